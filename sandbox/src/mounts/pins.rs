//! Pins: directories bound onto themselves, so that nothing can rename or remove them to put
//! another one in their place. Some may vanish: the parents of another run's session directory,
//! which that run may remove between the plan and the launch (its own cleanup, a test's temp
//! dir going away).

use std::path::Path;

use bridle_policy::Guarantee;
use nix::errno::Errno;

use super::MountFailure;
use super::ops::{bind_opened_onto_itself, open_no_symlinks, open_strict_failure};

/// Binds `pin` onto itself, as every pin is; when `pin`, or a directory on the way, no longer exists, says so instead
/// (`Some(note)`). Only a missing name passes: a symlink in its place, or anything else the
/// kernel refuses, fails the launch as for every other pin. The decision is the
/// open's own error, not a second look that could disagree with it.
pub(super) fn pin_unless_gone(pin: &Path) -> Result<Option<String>, MountFailure> {
    match open_no_symlinks(pin) {
        Err(Errno::ENOENT) => Ok(Some(format!(
            "`{}` is gone since the launch was planned; it held only another run's session directory, which is then gone from where the registry says, so it is not pinned",
            pin.display()
        ))),
        Err(errno) => Err(open_strict_failure(pin, errno, Guarantee::FsProtect)),
        Ok(fd) => bind_opened_onto_itself(&fd, pin, false, Guarantee::FsProtect).map(|()| None),
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use bridle_policy::{Guarantee, SandboxMode};

    use super::super::{MountPlan, Placeholders, build_view, prepare};

    /// Where a test lays out a home, a workspace and another run's session directory.
    struct Layout {
        _temp: tempfile::TempDir,
        dir: PathBuf,
        state: PathBuf,
        other_run: PathBuf,
    }

    fn layout() -> Layout {
        let temp = tempfile::tempdir().unwrap();
        let dir = std::fs::canonicalize(temp.path()).unwrap();
        let state = dir.join("home/.local/state/bridle");
        let other_run = dir.join("other/run-1/sessions");
        for d in [&dir.join("ws"), &state.join("sessions"), &other_run] {
            std::fs::create_dir_all(d).unwrap();
        }
        Layout {
            _temp: temp,
            dir,
            state,
            other_run,
        }
    }

    /// The mount plan of a call escalated to `danger-full-access` from `workspace-write`, whose
    /// registry lists another run's session directory, and the placeholders it needs while the
    /// view is built.
    fn escalated_plan(at: &Layout) -> (MountPlan, Placeholders) {
        let policy = bridle_policy::load(
            &bridle_policy::ShippedOnly,
            &bridle_policy::LoadRequest {
                profile: "workspace-write".into(),
                overrides: bridle_policy::Overrides {
                    mode: Some(SandboxMode::DangerFullAccess),
                    ..bridle_policy::Overrides::default()
                },
                workspace_layer: None,
            },
        )
        .unwrap();
        let ctx = bridle_policy::PlanContext {
            workspace: at.dir.join("ws"),
            home: at.dir.join("home"),
            account_home: None,
            state_dir: at.state.clone(),
            config_dir: at.dir.join("home/.config/bridle"),
            temp_dir: at.dir.join("tmp"),
            cache_root: None,
            temp_base: None,
            host_env: Default::default(),
            found: Vec::new(),
            masks: vec![
                (
                    at.state.join("sessions"),
                    "bridle's session directory".into(),
                ),
                (
                    at.other_run.clone(),
                    "another run's session directory".into(),
                ),
            ],
            masks_may_vanish: vec![at.other_run.clone()],
            escalated_from: Some(SandboxMode::WorkspaceWrite),
        };
        let spec = bridle_policy::plan(&policy, &ctx).unwrap().spec;
        prepare(&spec).unwrap()
    }

    #[test]
    fn only_the_pins_of_masks_that_may_vanish_may_vanish() {
        let at = layout();
        let (plan, _placeholders) = escalated_plan(&at);
        assert!(plan.full_view);
        assert_eq!(
            plan.pins_may_vanish,
            [at.dir.join("other"), at.dir.join("other/run-1")]
        );
        for hard in [at.dir.clone(), at.dir.join("home"), at.state.clone()] {
            assert!(
                plan.pins.contains(&hard),
                "{}: {:?}",
                hard.display(),
                plan.pins
            );
        }
    }

    /// Builds `plan` in fresh user and mount namespaces (this test binary again, under
    /// `unshare`); what the view's build said, or `None` when the host has no user namespaces
    /// and says so.
    fn build_in_namespaces(plan: &MountPlan) -> Option<String> {
        let test = std::env::current_exe().unwrap();
        let out = std::process::Command::new("unshare")
            .args(["--user", "--map-root-user", "--mount"])
            .arg(&test)
            .args([
                "--exact",
                "mounts::pins::tests::build_the_view_inside_namespaces",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(
                "BRIDLE_TEST_MOUNT_PLAN",
                serde_json::to_string(plan).unwrap(),
            )
            .output()
            .expect("unshare (util-linux) runs");
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.stderr);
        if crate::host_lacks("userns") && !out.status.success() {
            return None;
        }
        assert!(
            out.status.success() && stdout.contains("view built: "),
            "the build inside namespaces did not report (a host without user namespaces says so in BRIDLE_HOST_LACKS=userns)\n{stdout}\n{stderr}"
        );
        Some(stdout)
    }

    #[test]
    #[ignore = "run by the tests around it, inside fresh user and mount namespaces"]
    fn build_the_view_inside_namespaces() {
        let plan: MountPlan =
            serde_json::from_str(&std::env::var("BRIDLE_TEST_MOUNT_PLAN").unwrap()).unwrap();
        match build_view(&plan) {
            Ok(report) => println!("view built: ok, notes: {:?}", report.notes),
            Err(e) => println!("view built: failed ({:?}): {}", e.guarantee, e.cause),
        }
    }

    #[test]
    fn another_runs_session_directory_removed_after_the_plan_does_not_stop_the_launch() {
        let at = layout();
        let (plan, _placeholders) = escalated_plan(&at);
        std::fs::remove_dir_all(at.dir.join("other")).unwrap();
        let Some(out) = build_in_namespaces(&plan) else {
            return;
        };
        assert!(out.contains("view built: ok"), "{out}");
        for gone in ["other`", "other/run-1`"] {
            assert!(
                out.contains(&format!("{gone} is gone since the launch was planned")),
                "{gone}: {out}"
            );
        }
    }

    #[test]
    fn a_pin_that_holds_bridles_own_state_and_is_gone_stops_the_launch() {
        let at = layout();
        let (plan, _placeholders) = escalated_plan(&at);
        std::fs::remove_dir_all(at.dir.join("home/.local")).unwrap();
        let Some(out) = build_in_namespaces(&plan) else {
            return;
        };
        let expected = format!("view built: failed ({:?})", Guarantee::FsProtect);
        assert!(out.contains(&expected), "{out}");
        assert!(out.contains(".local"), "{out}");
    }

    /// What building the view said once `pin`, a pin of `plan`, was replaced by a symlink to
    /// where it was moved.
    fn built_with_a_symlink_for(
        pin: &std::path::Path,
        at: &Layout,
        plan: &MountPlan,
    ) -> Option<String> {
        std::fs::rename(pin, at.dir.join("moved")).unwrap();
        std::os::unix::fs::symlink(at.dir.join("moved"), pin).unwrap();
        build_in_namespaces(plan)
    }

    fn assert_refused_as_a_symlink(out: &str) {
        let expected = format!("view built: failed ({:?})", Guarantee::FsProtect);
        assert!(out.contains(&expected), "{out}");
        assert!(out.contains("is a symlink now"), "{out}");
    }

    #[test]
    fn a_pin_that_may_vanish_replaced_by_a_symlink_stops_the_launch() {
        let at = layout();
        let (plan, _placeholders) = escalated_plan(&at);
        // The last pin that may vanish: no pin below it would fail in its place.
        let run = at.dir.join("other/run-1");
        assert_eq!(plan.pins_may_vanish.last(), Some(&run));
        if let Some(out) = built_with_a_symlink_for(&run, &at, &plan) {
            assert_refused_as_a_symlink(&out);
        }
    }

    #[test]
    fn a_pin_that_holds_bridles_own_state_replaced_by_a_symlink_stops_the_launch() {
        let at = layout();
        let (plan, _placeholders) = escalated_plan(&at);
        assert!(plan.pins.contains(&at.state), "{:?}", plan.pins);
        if let Some(out) = built_with_a_symlink_for(&at.state, &at, &plan) {
            assert_refused_as_a_symlink(&out);
        }
    }
}
