//! Placeholders for missing protected paths, and the shared locks that let concurrent runs in
//! one workspace share them.
//!
//! A placeholder is an empty directory (which git ignores: `git status` does not show it, `git
//! add -A` adds nothing), recorded in bridle's registry outside the workspace (see
//! [`super::state`]) rather than marked inside it.

use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use bridle_policy::Guarantee;
use nix::fcntl::{Flock, FlockArg};

use super::state::Registry;
use super::{ConfigLock, MountFailure, fail, lock_shared};

/// The marker file earlier versions of bridle put inside their placeholders (git showed it);
/// a directory holding only this file is still recognised as a placeholder and removed.
pub const PLACEHOLDER_MARKER: &str = ".bridle-placeholder";

/// What the parent did to the host to prepare the plan, undone after the run.
///
/// Placeholders are shared between concurrent runs in one workspace: a run that finds an
/// existing directory on a protected path binds it read-only like any other. Removing such a
/// directory on the host while another run's mount view has it as a mount point would lazily
/// detach that mount in the other run (the kernel does so for `rmdir` of a mount point in
/// another mount namespace), and the other run could then create `.git/hooks` on the host. So
/// every run holds a shared `flock` on each directory of its protected paths for as long as it
/// lives, and a placeholder is removed only under an exclusive, non-blocking lock: by the last
/// run that used it, whichever created it. Placeholders are recorded in the registry so that
/// runs other than their creator (or a run after a crashed one) recognise them.
#[derive(Debug, Default)]
pub struct Placeholders {
    created: Vec<PathBuf>,
    held: Vec<HeldDir>,
    /// Repository config locks (see `super::git_lock`), released when the run ends.
    locks: Vec<ConfigLock>,
    /// Opened on first use.
    registry: Option<Registry>,
    /// Missing protected paths at the top of a root that holds no repository, which get no
    /// placeholder (see [`protected_chain`]).
    absent_at_end: Vec<PathBuf>,
}

/// A directory on a protected path, with the shared lock this run holds on it.
#[derive(Debug)]
struct HeldDir {
    path: PathBuf,
    id: (u64, u64),
    /// Whether it was a placeholder when it was held.
    placeholder: bool,
    /// `None` when the filesystem does not support `flock`; such a placeholder is never removed.
    _lock: Option<Flock<std::fs::File>>,
}

/// Whether the directory at `path` is still the one with identity `id` (device, inode).
fn same_dir(path: &Path, id: (u64, u64)) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.is_dir() && (m.dev(), m.ino()) == id)
}

fn open_dir(path: &Path) -> std::io::Result<std::fs::File> {
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_DIRECTORY | nix::libc::O_NOFOLLOW)
        .open(path)
}

impl Placeholders {
    /// The registry, opened on first use; `None` when it cannot be kept (then no directory is
    /// taken for a placeholder, and none can be made).
    fn registry(&mut self) -> Option<&Registry> {
        if self.registry.is_none() {
            match Registry::open() {
                Ok(registry) => self.registry = Some(registry),
                Err(e) => tracing::warn!("the placeholder registry cannot be used: {e}"),
            }
        }
        self.registry.as_ref()
    }

    /// Whether the directory `id` at `dir` is a placeholder: empty and recorded, or holding only
    /// an earlier version's marker.
    fn is_placeholder(&mut self, dir: &Path, id: (u64, u64)) -> bool {
        match contents(dir) {
            Contents::Empty => self.registry().is_some_and(|r| r.holds(id, dir)),
            Contents::LegacyMarker => true,
            Contents::Other => false,
        }
    }

    /// Whether the directory at `dir`, held by this run, was a placeholder when it was held.
    fn held_placeholder(&self, dir: &Path) -> bool {
        self.held.iter().any(|h| h.path == dir && h.placeholder)
    }

    /// The missing protected paths that got no placeholder and must be absent when the run
    /// ends.
    pub(super) fn take_absent_at_end(&mut self) -> Vec<PathBuf> {
        std::mem::take(&mut self.absent_at_end)
    }

    /// The config lock files this run holds (see `super::git_lock`).
    pub fn held_locks(&self) -> Vec<&Path> {
        self.locks.iter().map(ConfigLock::path).collect()
    }

    /// Keeps `lock` until [`Placeholders::remove`].
    pub(super) fn hold_lock(&mut self, lock: ConfigLock) {
        self.locks.push(lock);
    }

    /// Takes a shared lock on the directory at `dir` and keeps it until [`Placeholders::remove`].
    /// `Ok(false)` when the directory vanished or was replaced meanwhile (the caller walks again).
    fn hold(&mut self, dir: &Path) -> Result<bool, MountFailure> {
        let file = match open_dir(dir) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
            // A directory this user cannot read (a command may have made one so in an earlier
            // run, to lock later runs out): not a placeholder (bridle makes those readable, and
            // they are read-only inside), so it is protected as it is, without a lock, and never
            // removed. The bind itself needs no read permission.
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
                let Ok(meta) = std::fs::symlink_metadata(dir) else {
                    return Ok(false);
                };
                if !meta.is_dir() {
                    return Ok(false);
                }
                self.held.push(HeldDir {
                    path: dir.to_path_buf(),
                    id: (meta.dev(), meta.ino()),
                    placeholder: false,
                    _lock: None,
                });
                return Ok(true);
            }
            Err(e) => {
                return Err(fail(
                    Guarantee::FsProtect,
                    format!("opening protected directory `{}`: {e}", dir.display()),
                ));
            }
        };
        let meta = file.metadata().map_err(|e| {
            fail(
                Guarantee::FsProtect,
                format!("inspecting `{}`: {e}", dir.display()),
            )
        })?;
        let id = (meta.dev(), meta.ino());
        if self.held.iter().any(|h| h.path == dir && h.id == id) {
            return Ok(same_dir(dir, id));
        }
        // Only placeholders are ever removed, and they are recorded before they appear (see
        // `create_placeholder`): any other directory is the user's and needs no lock (nor a
        // descriptor kept open: a command could otherwise make later runs run out of them with
        // many protected directories).
        if !self.is_placeholder(dir, id) {
            self.held.push(HeldDir {
                path: dir.to_path_buf(),
                id,
                placeholder: false,
                _lock: None,
            });
            return Ok(true);
        }
        // No flock on this filesystem: protect it anyway, never remove it.
        let lock = lock_shared(file);
        // Another run may have removed (and someone re-created) it while we waited.
        if !same_dir(dir, id) {
            return Ok(false);
        }
        self.held.push(HeldDir {
            path: dir.to_path_buf(),
            id,
            placeholder: true,
            _lock: lock,
        });
        Ok(true)
    }

    /// Removes the placeholder directories no other run is using any more: the ones this run
    /// created and the ones it found (recorded in the registry). Deepest first; a
    /// placeholder another run still holds stays, and that run removes it when it ends.
    pub fn remove(&mut self) {
        self.locks.clear();
        let held = std::mem::take(&mut self.held);
        let created = std::mem::take(&mut self.created);
        let mut candidates: Vec<(PathBuf, (u64, u64))> = Vec::new();
        for h in &held {
            if created.contains(&h.path) || self.is_placeholder(&h.path, h.id) {
                candidates.push((h.path.clone(), h.id));
            }
        }
        // Created but never held (preparing failed in between): as found now.
        for path in &created {
            if !candidates.iter().any(|(p, _)| p == path)
                && let Ok(meta) = std::fs::symlink_metadata(path)
            {
                candidates.push((path.clone(), (meta.dev(), meta.ino())));
            }
        }
        // Release our own shared locks first: the exclusive lock below must only fail because
        // of other runs.
        drop(held);
        candidates.sort_by(|(a, _), (b, _)| {
            b.components()
                .count()
                .cmp(&a.components().count())
                .then_with(|| a.cmp(b))
        });
        candidates.dedup_by(|a, b| a.0 == b.0);
        let registry = self.registry();
        for (path, id) in candidates {
            remove_placeholder(&path, id, registry);
        }
    }
}

/// Removes the placeholder at `path` when it is still the directory `id`, is empty (or holds only
/// an earlier version's marker), and no other run holds a lock on it; and forgets it.
fn remove_placeholder(path: &Path, id: (u64, u64), registry: Option<&Registry>) {
    let Ok(file) = open_dir(path) else { return };
    let Ok(lock) = Flock::lock(file, FlockArg::LockExclusiveNonblock) else {
        return;
    };
    if !same_dir(path, id) {
        return;
    }
    match contents(path) {
        Contents::Empty => {}
        Contents::LegacyMarker => {
            let _ = std::fs::remove_file(path.join(PLACEHOLDER_MARKER));
        }
        Contents::Other => return,
    }
    if let Some(registry) = registry {
        registry.remove(id);
    }
    let _ = std::fs::remove_dir(path);
    drop(lock);
}

/// Creates the placeholder directory `path`: made under a temporary name, recorded in the
/// registry, then renamed into place (never over anything), so that no other run ever sees a
/// placeholder it cannot recognise and takes it for a directory of the user's.
fn create_placeholder(path: &Path, registry: &Registry) -> std::io::Result<()> {
    use nix::fcntl::{AT_FDCWD, RenameFlags, renameat2};
    let parent = path.parent().unwrap_or(Path::new("/"));
    let temp = parent.join(format!(".bridle-placeholder-{}", super::unique_suffix()));
    std::fs::create_dir(&temp)?;
    let mut id = None;
    let placed = std::fs::symlink_metadata(&temp)
        .and_then(|meta| {
            id = Some((meta.dev(), meta.ino()));
            registry.add((meta.dev(), meta.ino()), path)
        })
        .and_then(|()| {
            renameat2(
                AT_FDCWD,
                &temp,
                AT_FDCWD,
                path,
                RenameFlags::RENAME_NOREPLACE,
            )
            .map_err(std::io::Error::from)
        });
    if placed.is_err() {
        if let Some(id) = id {
            registry.remove(id);
        }
        let _ = std::fs::remove_dir(&temp);
    }
    placed
}

/// Whether `path` lies strictly inside a directory named `.git` at or below the missing
/// `missing` (an ancestor of it or `path` itself).
fn inside_git_dir(missing: &Path, path: &Path) -> bool {
    let below = path.strip_prefix(missing).unwrap_or(Path::new(""));
    let mut names: Vec<&std::ffi::OsStr> = std::iter::once(missing.file_name().unwrap_or_default())
        .chain(below.iter())
        .collect();
    names.pop();
    names.iter().any(|n| *n == ".git")
}

/// What a directory on a protected path holds, as far as placeholders are concerned.
enum Contents {
    Empty,
    /// Only an earlier version's [`PLACEHOLDER_MARKER`].
    LegacyMarker,
    /// Anything else, or it cannot be read.
    Other,
}

fn contents(dir: &Path) -> Contents {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Contents::Other;
    };
    let mut marked = false;
    for entry in entries {
        match entry {
            Ok(e) if e.file_name() == PLACEHOLDER_MARKER && !marked => marked = true,
            _ => return Contents::Other,
        }
    }
    if marked {
        Contents::LegacyMarker
    } else {
        Contents::Empty
    }
}

impl Drop for Placeholders {
    fn drop(&mut self) {
        self.remove();
    }
}

/// The existing directories leading to the protected `path` below `root`, ending with what is
/// protected: `path` itself, the first existing non-directory on the way, or a fresh placeholder
/// for the first missing component. Every directory in the chain is held (shared lock). Walks
/// again when a concurrent run changes the path meanwhile.
///
/// Empty (nothing to protect now) when the path is inside a missing `.git`, and when its first
/// missing component is at the top of a root that holds no repository: a placeholder there
/// would keep `git clone URL .` from working (git clones only into an empty directory), so that
/// component must be absent when the run ends instead (it is added to the paths
/// [`Placeholders::take_absent_at_end`] returns).
pub(super) fn protected_chain(
    root: &Path,
    path: &Path,
    placeholders: &mut Placeholders,
) -> Result<Vec<PathBuf>, MountFailure> {
    for _ in 0..16 {
        if let Some(chain) = try_protected_chain(root, path, placeholders)? {
            return Ok(chain);
        }
    }
    Err(fail(
        Guarantee::FsProtect,
        format!(
            "protected path `{}` keeps changing while the sandbox is prepared",
            path.display()
        ),
    ))
}

/// One walk of [`protected_chain`]; `None` when it raced with another run.
fn try_protected_chain(
    root: &Path,
    path: &Path,
    placeholders: &mut Placeholders,
) -> Result<Option<Vec<PathBuf>>, MountFailure> {
    let relative = path.strip_prefix(root).unwrap_or(path);
    let mut current = root.to_path_buf();
    let mut chain = Vec::new();
    for component in relative.components() {
        current.push(component);
        match std::fs::symlink_metadata(&current) {
            Ok(meta) if meta.file_type().is_symlink() => {
                return Err(fail(
                    Guarantee::FsProtect,
                    format!(
                        "protected path `{}` goes through the symlink `{}`, which the sandboxed command could redirect",
                        path.display(),
                        current.display()
                    ),
                ));
            }
            Ok(meta) if meta.is_dir() => {
                if !placeholders.hold(&current)? {
                    return Ok(None);
                }
                chain.push(current.clone());
                // Another run's placeholder: protect it as it is, as that run does, rather than
                // nesting placeholders of our own inside it.
                if placeholders.held_placeholder(&current) {
                    break;
                }
            }
            Ok(_) => {
                chain.push(current.clone());
                break;
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                // A missing git dir on the way (`.git` for `.git/hooks`): the command may
                // create the repository (`git init`, `git clone`); what it leaves there is
                // inspected when the run ends. A profile protecting `.git` itself still gets a
                // placeholder.
                if inside_git_dir(&current, path) {
                    return Ok(Some(Vec::new()));
                }
                let at_top = current.parent() == Some(root);
                if at_top && std::fs::symlink_metadata(root.join(".git")).is_err() {
                    placeholders.absent_at_end.push(current.clone());
                    return Ok(Some(Vec::new()));
                }
                let Some(registry) = placeholders.registry() else {
                    return Err(fail(
                        Guarantee::FsProtect,
                        format!(
                            "cannot make a placeholder for missing protected path `{}`: bridle's registry of placeholders cannot be used (see the log)",
                            current.display()
                        ),
                    ));
                };
                match create_placeholder(&current, registry) {
                    Ok(()) => {}
                    // Another run created it first: walk again and share it.
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => return Ok(None),
                    // The directory does not let this user create it (a command may have made
                    // it so in an earlier run, to lock later runs out): the directory itself is
                    // protected whole instead, read-only as it is, so its mode cannot be undone
                    // from inside either. Nothing is protected at a root, where the command,
                    // running as the same user, cannot create the path either.
                    Err(e)
                        if matches!(
                            e.raw_os_error(),
                            Some(nix::libc::EACCES | nix::libc::EPERM | nix::libc::EROFS)
                        ) =>
                    {
                        return Ok(Some(chain));
                    }
                    Err(e) => {
                        return Err(fail(
                            Guarantee::FsProtect,
                            format!(
                                "creating a placeholder for missing protected path `{}`: {e}",
                                current.display()
                            ),
                        ));
                    }
                }
                placeholders.created.push(current.clone());
                if !placeholders.hold(&current)? {
                    return Ok(None);
                }
                chain.push(current.clone());
                break;
            }
            Err(e) => {
                return Err(fail(
                    Guarantee::FsProtect,
                    format!("inspecting `{}`: {e}", current.display()),
                ));
            }
        }
    }
    Ok(Some(chain))
}

#[cfg(test)]
mod tests;
