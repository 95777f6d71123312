//! Fail closed: with a kernel mechanism made unavailable (a seccomp filter installed in the
//! process that execs `bridle`), bridle either still enforces every required guarantee through
//! another mechanism, or refuses with exit 125 and the command never runs.

use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;

use bridle_sandbox::fault::{Fault, inject};

use super::support::{Env, Run, path_str, run};

fn is_root() -> bool {
    std::fs::metadata("/proc/self")
        .map(|m| m.uid() == 0)
        .unwrap_or(false)
}

struct Case {
    env: Env,
    outside: PathBuf,
}

impl Case {
    fn new() -> Case {
        let env = Env::new();
        let outside = env.home.join("outside");
        std::fs::create_dir_all(&outside).unwrap();
        Case { env, outside }
    }

    /// `bridle exec` of a command that marks the workspace and tries to mark outside, under
    /// `fault`.
    fn exec(&self, fault: Fault, profile: Option<&str>) -> Run {
        let mut cmd = self.env.bridle();
        if let Some(p) = profile {
            cmd.args(["--profile", p]);
        }
        let script = format!(
            "touch MARK_IN; touch {}/MARK_OUT; grep -E '^(NoNewPrivs|Seccomp|Seccomp_filters|CapEff):' /proc/self/status",
            path_str(&self.outside)
        );
        cmd.args(["exec", "--", "sh", "-c", &script]);
        inject(&mut cmd, fault).unwrap();
        run(&mut cmd)
    }

    fn probe(&self, fault: Fault, profile: Option<&str>) -> Run {
        let mut cmd = self.env.bridle();
        if let Some(p) = profile {
            cmd.args(["--profile", p]);
        }
        cmd.arg("probe");
        inject(&mut cmd, fault).unwrap();
        run(&mut cmd)
    }

    fn mark_in(&self) -> bool {
        self.env.workspace.join("MARK_IN").exists()
    }

    fn mark_out(&self) -> bool {
        self.outside.join("MARK_OUT").exists()
    }

    #[track_caller]
    fn assert_refused(&self, r: &Run, guarantee: &str) {
        r.assert_code(125);
        assert_eq!(
            r.stderr.lines().count(),
            1,
            "exactly one line: {}",
            r.stderr
        );
        assert!(
            r.stderr
                .starts_with(&format!("bridle: sandbox unavailable: {guarantee}")),
            "{}",
            r.stderr
        );
        assert!(
            !self.mark_in(),
            "the command ran although the sandbox was refused"
        );
        assert!(!self.mark_out(), "the command wrote outside");
    }
}

#[test]
fn without_landlock_signals_cannot_be_scoped_so_the_command_is_refused() {
    let case = Case::new();
    let r = case.exec(Fault::LandlockUnavailable, None);
    case.assert_refused(&r, "G-PROC");
    let p = case.probe(Fault::LandlockUnavailable, None);
    p.assert_code(125);
    assert!(
        p.stdout.contains("landlock        unavailable"),
        "{}",
        p.stdout
    );
}

#[test]
fn without_landlock_the_mount_view_still_confines_writes() {
    let case = Case::new();
    let profile = case.env.home.join("no-signal-scope.yaml");
    std::fs::write(
        &profile,
        "extends: workspace-write\naccept_missing: [G-PROC]\n",
    )
    .unwrap();
    let profile = path_str(&profile).to_owned();
    let r = case.exec(Fault::LandlockUnavailable, Some(&profile));
    // The outside touch fails (read-only view); grep's success is the last status.
    assert!(r.code == Some(0), "{}", r.stderr);
    assert!(case.mark_in() && !case.mark_out(), "{}", r.stderr);
    assert!(
        r.stdout.contains("Seccomp:\t2") && r.stdout.contains("NoNewPrivs:\t1"),
        "{}",
        r.stdout
    );
    let p = case.probe(Fault::LandlockUnavailable, Some(&profile));
    p.assert_code(0);
    let fs_write = p
        .stdout
        .lines()
        .find(|l| l.trim_start().starts_with("G-FS-WRITE"))
        .unwrap();
    assert!(
        fs_write.contains("mount-view") && !fs_write.contains("landlock"),
        "{fs_write}"
    );
    // Kernel knobs stay read-only without Landlock (sysctls only check the uid).
    let mut cmd = case.env.bridle();
    cmd.args([
        "--profile",
        &profile,
        "exec",
        "--",
        "sh",
        "-c",
        "cat /proc/sys/kernel/core_pattern > /proc/sys/kernel/core_pattern; echo rc=$?",
    ]);
    inject(&mut cmd, Fault::LandlockUnavailable).unwrap();
    let w = run(&mut cmd);
    assert!(
        w.stdout.contains("rc=") && !w.stdout.contains("rc=0"),
        "a sysctl was writable: {} {}",
        w.stdout,
        w.stderr
    );
}

#[test]
fn without_seccomp_the_command_is_refused() {
    let case = Case::new();
    let r = case.exec(Fault::SeccompUnavailable, None);
    case.assert_refused(&r, "G-");
    assert!(r.stderr.contains("seccomp"), "{}", r.stderr);
    let p = case.probe(Fault::SeccompUnavailable, None);
    p.assert_code(125);
    assert!(p.stdout.contains("MISSING"), "{}", p.stdout);
}

#[test]
fn without_user_namespaces_root_falls_back_and_users_are_refused() {
    let case = Case::new();
    let r = case.exec(Fault::UserNamespacesDenied, None);
    if is_root() {
        // Root can create the other namespaces without a user namespace.
        assert!(r.code == Some(0), "{}", r.stderr);
        assert!(case.mark_in() && !case.mark_out(), "{}", r.stderr);
        assert!(
            r.stdout.contains("CapEff:\t0000000000000000"),
            "{}",
            r.stdout
        );
    } else {
        case.assert_refused(&r, "G-FS-WRITE");
        assert!(r.stderr.contains("user namespace"), "{}", r.stderr);
    }
}

#[test]
fn accept_missing_is_the_only_way_to_run_without_a_guarantee() {
    let case = Case::new();
    let profile = case.env.home.join("lenient.yaml");
    std::fs::write(
        &profile,
        "extends: workspace-write\naccept_missing: [G-IPC, G-PRIV, G-TTY]\n",
    )
    .unwrap();
    let profile = path_str(&profile).to_owned();
    let r = case.exec(Fault::SeccompUnavailable, Some(&profile));
    assert!(r.code == Some(0), "{}", r.stderr);
    assert!(case.mark_in() && !case.mark_out(), "{}", r.stderr);
    // The only filter is the one injected by this test: bridle could not add its own.
    assert!(
        r.stdout.contains("NoNewPrivs:\t1") && r.stdout.contains("Seccomp_filters:\t1"),
        "{}",
        r.stdout
    );
    let p = case.probe(Fault::SeccompUnavailable, Some(&profile));
    p.assert_code(0);
    assert!(p.stdout.contains("ACCEPTED MISSING"), "{}", p.stdout);
    assert!(
        p.stdout
            .contains("enforceable with accepted missing guarantees"),
        "{}",
        p.stdout
    );
}

#[test]
fn the_agent_refuses_to_start_a_session_on_a_host_that_cannot_enforce_the_profile() {
    // The agent would work with every command refused: no session, the line `exec` prints.
    let e = super::support::ExecEnv::new();
    let script = "- tool_calls:\n    - name: write_file\n      arguments: {path: wrote.txt, content: x}\n- text: done\n";
    let mut cmd = super::run_cli::agent_cmd(&e, script, &[], "write a file");
    inject(&mut cmd, Fault::LandlockUnavailable).unwrap();
    let child = cmd
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(125), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with("bridle: sandbox unavailable: G-PROC"),
        "{stderr}"
    );
    assert!(!e.workspace.join("wrote.txt").exists());
    let sessions = e.home.join("sessions");
    assert!(
        std::fs::read_dir(&sessions).map_or(true, |d| d.count() == 0),
        "a session was created"
    );
    // Its private temp dir is gone too.
    let uid = std::fs::metadata("/proc/self").unwrap().uid();
    let base = PathBuf::from(format!("/var/tmp/bridle-{uid}"));
    let left: Vec<_> = std::fs::read_dir(&base)
        .map(|d| {
            d.filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with(&format!("tool-{pid}-")))
                .collect()
        })
        .unwrap_or_default();
    assert!(left.is_empty(), "{left:?}");
}
