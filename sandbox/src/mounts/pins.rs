//! Pins: directories bound onto themselves, so that nothing can rename or remove them to put
//! another one in their place for bridle or git to read after the run.

use std::path::{Path, PathBuf};

use bridle_policy::Guarantee;

use super::ops::bind_onto_itself;
use super::{MountFailure, MountPlan};

/// Binds `pin` onto itself. One removed since the plan was made (by someone outside: the
/// command has not started; another run's session directory, say) pins nothing and is passed
/// over, unless a protected path, or one that must stay absent, lies below it: those must be
/// where the plan found them, so the launch fails.
pub(super) fn pin_path(pin: &Path, plan: &MountPlan) -> Result<(), MountFailure> {
    match bind_onto_itself(pin, false, Guarantee::FsProtect) {
        Err(failure)
            if !may_pass_over(
                pin,
                &[&plan.protected, &plan.must_stay_absent],
                vanished(pin),
            ) =>
        {
            Err(failure)
        }
        _ => Ok(()),
    }
}

/// Whether a pin that failed may be passed over: it is `gone`, and no path of `needed` lies
/// below it.
fn may_pass_over(pin: &Path, needed: &[&Vec<PathBuf>], gone: bool) -> bool {
    gone && !needed
        .iter()
        .flat_map(|paths| paths.iter())
        .any(|p| p.starts_with(pin))
}

/// Whether nothing is at `path` any more (it, or a directory on the way, is missing).
fn vanished(path: &Path) -> bool {
    matches!(std::fs::symlink_metadata(path), Err(e) if e.kind() == std::io::ErrorKind::NotFound)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pin_removed_since_the_plan_is_passed_over_unless_the_plan_needs_what_was_below_it() {
        let pin = Path::new("/var/tmp/another-run");
        let protected = vec![PathBuf::from("/home/u/project/.git/hooks")];
        let absent = vec![PathBuf::from("/home/u/project/.git/commondir")];
        assert!(may_pass_over(pin, &[&protected, &absent], true));
        // Still there: its bind failed for another reason, which stops the launch.
        assert!(!may_pass_over(pin, &[&protected, &absent], false));
        // Gone with a protected path, or one that must stay absent, below it.
        let project = Path::new("/home/u/project");
        assert!(!may_pass_over(project, &[&protected, &absent], true));
        assert!(!may_pass_over(project, &[&vec![], &absent], true));
    }

    #[test]
    fn only_a_missing_path_has_vanished() {
        let dir = tempfile::tempdir().unwrap();
        assert!(!vanished(dir.path()));
        assert!(vanished(&dir.path().join("gone")));
        assert!(vanished(&dir.path().join("gone/below")));
        let file = dir.path().join("file");
        std::fs::write(&file, "x").unwrap();
        // A file where a directory was expected is not "gone": the bind's failure counts.
        assert!(!vanished(&file.join("below")));
    }
}
