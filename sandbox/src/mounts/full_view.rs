//! The full view: full access for a call escalated from a confined session, except that the
//! protected paths stay read-only and bridle's own directories stay hidden.
//!
//! Only steps 1 (private propagation), 5 (pins), 6 (protected binds) and 7 (masks) of the mount
//! view, plus the PID namespace's fresh `/proc` (10): `/` stays writable, the real `/dev`, `/run`
//! and `/tmp` stay. Since everything around them is writable, pins go all the way up: every
//! ancestor of a content root, of a protected path and of a masked path is bound onto itself, so
//! no directory on the way can be renamed or removed to put another one in its place (`mv
//! ~/project ~/old && mkdir -p ~/project/.git/hooks`) for bridle or git to read after the run.
//! The real `/dev` stays, except the nodes [`super::devices`] hides.

use std::path::{Path, PathBuf};

use bridle_policy::{Guarantee, SandboxSpec};

use super::{MountFailure, fail, is_within};

/// The ancestors of `path` below `/`, outermost first, `path` itself included when `inclusive`.
fn ancestors_below_root(path: &Path, inclusive: bool) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = path
        .ancestors()
        .skip(usize::from(!inclusive))
        .filter(|a| a.parent().is_some())
        .map(Path::to_path_buf)
        .collect();
    out.reverse();
    out
}

/// Refuses a path reached through a symlink: a command with full access could re-point it.
fn refuse_symlinks(path: &Path) -> Result<(), MountFailure> {
    for dir in ancestors_below_root(path, true) {
        if std::fs::symlink_metadata(&dir).is_ok_and(|m| m.file_type().is_symlink()) {
            return Err(fail(
                Guarantee::FsProtect,
                format!(
                    "protected path `{}` goes through the symlink `{}`, which a command with full access could redirect",
                    path.display(),
                    dir.display()
                ),
            ));
        }
    }
    Ok(())
}

/// What the full view adds to the prepared plan: the protected paths outside every content root
/// (bridle's configuration directory, the profile files), created first when missing (an empty
/// directory: bridle's own, which the command then cannot create), and the pins of every
/// ancestor. `protected` and `pins` are the plan's so far (inside the content roots). The pins
/// kept only for masks that may vanish (another run's session directories) go to
/// `pins_may_vanish` instead: the view passes over one that is gone when it is built.
pub(super) fn extend(
    spec: &SandboxSpec,
    outermost: &[PathBuf],
    protected: &mut Vec<PathBuf>,
    pins: &mut Vec<PathBuf>,
    pins_may_vanish: &mut Vec<PathBuf>,
) -> Result<(), MountFailure> {
    let masked = &spec.masked_paths;
    for root in outermost {
        pins.extend(ancestors_below_root(root, true));
    }
    for path in &spec.protected_paths {
        if is_within(path, outermost) {
            continue;
        }
        refuse_symlinks(path)?;
        if std::fs::symlink_metadata(path).is_err() {
            std::fs::create_dir_all(path).map_err(|e| {
                fail(
                    Guarantee::FsProtect,
                    format!(
                        "creating the protected directory `{}` so that the escalated command cannot: {e}",
                        path.display()
                    ),
                )
            })?;
        }
        pins.extend(ancestors_below_root(path, false));
        protected.push(path.clone());
    }
    for path in masked {
        refuse_symlinks(path)?;
        // A masked path may not exist (bridle's state directory before its first session):
        // only what exists can be pinned, and a missing one has nothing to hide.
        let existing = ancestors_below_root(path, false)
            .into_iter()
            .filter(|a| std::fs::symlink_metadata(a).is_ok());
        if spec.masks_may_vanish.contains(path) {
            pins_may_vanish.extend(existing);
        } else {
            pins.extend(existing);
        }
    }
    // A protected or masked path is a mount of its own; nothing below it needs a pin. A pin
    // that holds anything else than masks that may vanish may not vanish itself.
    let needed = |p: &PathBuf| {
        !p.ancestors()
            .any(|a| protected.iter().any(|q| q == a) || masked.iter().any(|m| m == a))
    };
    pins.retain(needed);
    pins.sort();
    pins.dedup();
    pins_may_vanish.retain(|p| needed(p) && pins.binary_search(p).is_err());
    pins_may_vanish.sort();
    pins_may_vanish.dedup();
    protected.sort();
    protected.dedup();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ancestors_below_root_run_outermost_first_without_the_root() {
        assert_eq!(
            ancestors_below_root(Path::new("/a/b/c"), true),
            [PathBuf::from("/a"), "/a/b".into(), "/a/b/c".into()]
        );
        assert_eq!(
            ancestors_below_root(Path::new("/a/b/c"), false),
            [PathBuf::from("/a"), "/a/b".into()]
        );
        assert!(ancestors_below_root(Path::new("/"), true).is_empty());
    }
}
