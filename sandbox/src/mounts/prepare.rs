//! The parent's side: the [`MountPlan`] of a spec, with its paths checked and placeholders made
//! for missing protected paths, before anything is forked.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use bridle_policy::{Guarantee, SandboxSpec};

use super::{
    ConfigLock, MountFailure, MountPlan, Placeholders, fail, full_view, git_lock, is_within,
    protected_chain,
};

/// Prepares the mount plan on the host side.
///
/// For every protected path (shallowest first; one below an already protected path is covered
/// by it), walks its components below the writable root: a symlink on the way is a refusal (a
/// protected path must not be redirectable); the first missing component gets a placeholder,
/// an empty directory (which git does not see) recorded outside the workspace, which is then
/// protected itself (so a missing `.bridle` or `.git/hooks` cannot be created); an existing
/// placeholder or non-directory on the way is protected itself. A missing git dir on the way
/// (`.git` for `.git/hooks`) gets none: the command may create a repository, and what it leaves
/// in one is inspected when the run ends ([`inspect`](super::inspect)). See [`Placeholders`]
/// for how concurrent runs share placeholders.
pub fn prepare(spec: &SandboxSpec) -> Result<(MountPlan, Placeholders), MountFailure> {
    let mut placeholders = Placeholders::default();
    std::fs::create_dir_all(&spec.temp_dir)
        .and_then(|()| {
            std::fs::set_permissions(&spec.temp_dir, std::fs::Permissions::from_mode(0o700))
        })
        .map_err(|e| {
            fail(
                Guarantee::FsWrite,
                format!(
                    "creating the session temp dir `{}`: {e}",
                    spec.temp_dir.display()
                ),
            )
        })?;
    let devnull = Path::new("/dev/null");
    let mut writable: Vec<PathBuf> = Vec::new();
    for root in &spec.writable_roots {
        if root == devnull || *root == spec.temp_dir || !root.exists() {
            continue;
        }
        let canonical = std::fs::canonicalize(root).map_err(|e| {
            fail(
                Guarantee::FsWrite,
                format!("resolving writable root `{}`: {e}", root.display()),
            )
        })?;
        if canonical != *root {
            return Err(fail(
                Guarantee::FsWrite,
                format!(
                    "writable root `{}` is reached through a symlink (it resolves to `{}`); name the real path",
                    root.display(),
                    canonical.display()
                ),
            ));
        }
        writable.push(canonical);
    }
    writable.sort();
    writable.dedup();
    let outermost: Vec<PathBuf> = writable
        .iter()
        .filter(|w| !writable.iter().any(|o| o != *w && w.starts_with(o)))
        .cloned()
        .collect();

    // Files git reads that must stay absent: the root repository's `commondir`, and what the
    // spec names (git metadata found on disk). One that exists by now is protected instead; a
    // protected git file that vanished meanwhile must stay absent (a placeholder directory in its
    // place would break git).
    let mut requested: Vec<PathBuf> = spec.protected_paths.clone();
    let mut must_stay_absent = Vec::new();
    let absent = outermost
        .iter()
        .map(|root| root.join(".git"))
        .filter(|git| std::fs::symlink_metadata(git).is_ok_and(|m| m.is_dir()))
        .map(|git| git.join("commondir"))
        .chain(spec.must_stay_absent.iter().cloned());
    for path in absent {
        if std::fs::symlink_metadata(&path).is_ok() {
            requested.push(path);
        } else {
            must_stay_absent.push(path);
        }
    }
    requested.retain(|path| {
        let vanished_git_file = std::fs::symlink_metadata(path).is_err()
            && git_lock::is_git_file_name(path)
            && path
                .parent()
                .is_some_and(|dir| std::fs::symlink_metadata(dir.join("HEAD")).is_ok());
        if vanished_git_file {
            must_stay_absent.push(path.clone());
        }
        !vanished_git_file
    });
    must_stay_absent.retain(|p| is_within(p, &outermost));
    must_stay_absent.sort();
    must_stay_absent.dedup();

    let root_of = |path: &Path| {
        outermost
            .iter()
            .filter(|r| path.starts_with(r))
            .max_by_key(|r| r.as_os_str().len())
            .cloned()
    };
    let mut pins = Vec::new();
    let mut protected: Vec<PathBuf> = Vec::new();
    let mut protected_set = std::collections::HashSet::new();
    // Shallow first: a path below one that is already protected (read-only) needs nothing more,
    // in particular no placeholder of its own inside a placeholder.
    requested.sort_by_key(|p| p.components().count());
    for path in &requested {
        let Some(root) = root_of(path) else {
            continue;
        };
        if path.ancestors().any(|a| protected_set.contains(a)) {
            continue;
        }
        let chain = protected_chain(&root, path, &mut placeholders)?;
        if let Some((target, ancestors)) = chain.split_last() {
            pins.extend(ancestors.iter().cloned());
            protected_set.insert(target.clone());
            protected.push(target.clone());
        }
    }
    // The directories holding paths that must stay absent are pinned, so the command cannot
    // move them aside and put a directory of its own in their place.
    for path in &must_stay_absent {
        let (Some(root), Some(dir)) = (root_of(path), path.parent()) else {
            continue;
        };
        // A missing directory is not made (it would need a placeholder); init's timed check
        // covers the path.
        let exists = std::fs::symlink_metadata(dir).is_ok_and(|m| m.is_dir());
        if dir.starts_with(&root) && dir != root && exists {
            pins.extend(protected_chain(&root, dir, &mut placeholders)?);
        }
    }
    pins.sort();
    pins.dedup();
    pins.retain(|p| !p.ancestors().any(|a| protected_set.contains(a)));
    // Repository config files are also locked the way git locks them, so that git on the host
    // cannot replace one (which would detach its bind) or create one during the run; the lock
    // file is bound read-only too, so the command cannot release it.
    // Each held lock keeps a descriptor open: the shallowest configs (the repository's own
    // first) get one, up to a bound, so that many submodule git dirs cannot use up the
    // descriptors; beyond it, init's watch alone stops a run whose config bind is detached.
    let lock_deadline = std::time::Instant::now() + git_lock::FOREIGN_LOCK_WAIT;
    let mut configs: Vec<PathBuf> = protected
        .iter()
        .chain(&must_stay_absent)
        .filter(|file| git_lock::is_git_config(file))
        .cloned()
        .collect();
    configs.sort_by_key(|p| p.components().count());
    configs.truncate(git_lock::MAX_LOCKS);
    for file in configs {
        match ConfigLock::acquire(&file, lock_deadline)? {
            Some(lock) => {
                protected.push(lock.path().to_path_buf());
                placeholders.hold_lock(lock);
            }
            // Another program's lock file keeps git out instead of ours: bound read-only too,
            // so the command cannot remove it.
            None => {
                let foreign = git_lock::lock_path_for(&file);
                if std::fs::symlink_metadata(&foreign).is_ok_and(|m| m.is_file()) {
                    protected.push(foreign);
                }
            }
        }
    }
    protected.sort();
    protected.dedup();

    let mut masked_dirs = Vec::new();
    let mut masked_files = Vec::new();
    for path in &spec.masked_paths {
        // The resolved path is masked: a mask attached on a symlink (`~/.netrc -> /opt/netrc`,
        // a stow or home-manager dotfile) would hide only that name, never its target, and
        // would make the Landlock carve-out, which resolves the name inside the view, miss
        // the target too.
        let real = crate::real_path::real_path(path);
        match std::fs::metadata(&real) {
            Ok(meta) if meta.is_dir() => masked_dirs.push(real),
            Ok(_) => masked_files.push(real),
            Err(_) => {}
        }
    }
    masked_dirs.sort();
    masked_dirs.dedup();
    masked_files.sort();
    masked_files.dedup();

    let mut pins_may_vanish = Vec::new();
    if spec.protected_kept {
        full_view::extend(
            spec,
            &outermost,
            &mut protected,
            &mut pins,
            &mut pins_may_vanish,
        )?;
    }

    let mut hidden = Vec::new();
    let mut keep_in_hidden = Vec::new();
    for dir in ["/run", "/var/run"] {
        let path = Path::new(dir);
        if !spec.protected_kept
            && std::fs::symlink_metadata(path).is_ok_and(|m| m.is_dir())
            && !is_within(path, &outermost)
        {
            hidden.push(path.to_path_buf());
        }
    }
    if let Ok(resolv) = std::fs::canonicalize("/etc/resolv.conf")
        && is_within(&resolv, &hidden)
        && resolv.is_file()
    {
        keep_in_hidden.push(resolv);
    }
    let mut writable_ids = Vec::new();
    for root in &outermost {
        use std::os::unix::fs::MetadataExt;
        let meta = std::fs::symlink_metadata(root).map_err(|e| {
            fail(
                Guarantee::FsWrite,
                format!("inspecting writable root `{}`: {e}", root.display()),
            )
        })?;
        writable_ids.push((meta.dev(), meta.ino()));
    }
    // The private /tmp hides the host's: a workspace there that is not a writable root (it is
    // bound writable otherwise), and a home there (containers often have `HOME=/tmp`), must
    // still be seen, read-only (the masks then cover what they mask in it).
    let home = spec.env.get("HOME").map(PathBuf::from);
    let mut read_only_in_tmp: Vec<PathBuf> = [Some(spec.workspace.clone()), home.clone()]
        .into_iter()
        .flatten()
        .filter(|p| {
            spec.private_tmp
                && p.is_absolute()
                && p.starts_with("/tmp")
                && p != Path::new("/tmp")
                && p.is_dir()
                && !is_within(p, &outermost)
        })
        .collect();
    read_only_in_tmp.sort();
    read_only_in_tmp.dedup();
    // Outer first: a workspace in the home is bound read-only on top of the home's overlay.
    let mut absent_at_end = placeholders.take_absent_at_end();
    absent_at_end.sort();
    absent_at_end.dedup();
    let plan = MountPlan {
        full_view: spec.protected_kept,
        cache_overlays: Vec::new(),
        // Not a home in (or that is) a read-only workspace: that stays read-only.
        home_in_tmp: home
            .filter(|h| read_only_in_tmp.contains(h) && !h.starts_with(&spec.workspace)),
        read_only_in_tmp,
        writable: outermost,
        must_stay_absent,
        absent_at_end,
        writable_ids,
        temp_dir: spec.temp_dir.clone(),
        private_tmp: spec.private_tmp,
        pins,
        pins_may_vanish,
        protected,
        masked_dirs,
        masked_files,
        hidden,
        keep_in_hidden,
    };
    Ok((plan, placeholders))
}
