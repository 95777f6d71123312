//! The mount view: what a confined process sees of the filesystem.
//!
//! Built inside a fresh mount namespace (owned by a fresh user namespace when unprivileged):
//!
//! 1. everything becomes `MS_PRIVATE` so nothing propagates back to the host;
//! 2. detached clones of the writable roots and the session temp dir are taken (`open_tree`);
//! 3. the whole tree is made read-only, recursively (`mount_setattr`): this, not Landlock, is
//!    what blocks chmod/chown/utimes/xattr outside writable roots;
//! 4. the temp dir is attached at `/tmp`, then the writable clones at their paths (read-write;
//!    a root below `/tmp` gets its mount point inside the private `/tmp`);
//! 5. ancestors of protected paths inside writable roots are pinned (bound onto themselves), so
//!    they cannot be renamed or removed to swap a protected path out (`mv .git .old`);
//! 6. protected paths are re-bound read-only;
//! 7. masked directories get an empty, mode-000, read-only tmpfs; masked files an empty,
//!    mode-000 file;
//! 8. `/dev` is replaced by a minimal one (null, zero, full, random, urandom, tty, a private
//!    devpts, a private `/dev/shm`), so no disk or other device node is reachable;
//! 9. `/run` (and `/var/run` when it is a directory) is hidden behind an empty tmpfs: the sockets
//!    of outside daemons (D-Bus, systemd, docker, user sessions) are not reachable by path;
//! 10. a fresh `/proc` for the PID namespace is mounted by the namespace's init.
//!
//! The parent prepares a [`MountPlan`] (paths checked, placeholders for missing protected paths
//! created) and the launcher executes it.

use std::ffi::CString;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use bridle_policy::{Guarantee, SandboxSpec};
use nix::fcntl::{Flock, FlockArg};
use nix::mount::{MsFlags, mount};
use serde::{Deserialize, Serialize};

use crate::sys;

/// Device nodes bound into the minimal `/dev`.
const DEV_NODES: &[&str] = &["null", "zero", "full", "random", "urandom", "tty"];

/// A failure while building the view, attributed to the guarantee it would have provided.
#[derive(Debug)]
pub struct MountFailure {
    /// The guarantee that cannot be provided.
    pub guarantee: Guarantee,
    /// What failed.
    pub cause: String,
}

fn fail(guarantee: Guarantee, cause: impl Into<String>) -> MountFailure {
    MountFailure {
        guarantee,
        cause: cause.into(),
    }
}

/// The plan the launcher executes, prepared by the parent from a `SandboxSpec`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MountPlan {
    /// Writable roots that exist, outermost only, in order.
    pub writable: Vec<PathBuf>,
    /// Device and inode of each writable root when the parent checked it; the launcher refuses
    /// a root that is no longer the same directory.
    pub writable_ids: Vec<(u64, u64)>,
    /// The session temp dir (also mounted on `/tmp` when `private_tmp`).
    pub temp_dir: PathBuf,
    /// Mount the temp dir on `/tmp` and a private tmpfs on `/dev/shm`.
    pub private_tmp: bool,
    /// Directories bound onto themselves so they cannot be renamed or removed.
    pub pins: Vec<PathBuf>,
    /// Paths re-bound read-only (they exist).
    pub protected: Vec<PathBuf>,
    /// Masked directories.
    pub masked_dirs: Vec<PathBuf>,
    /// Masked files.
    pub masked_files: Vec<PathBuf>,
    /// Directories hidden behind an empty tmpfs.
    pub hidden: Vec<PathBuf>,
    /// Files kept visible inside hidden directories (e.g. the resolv.conf target under /run).
    pub keep_in_hidden: Vec<PathBuf>,
    /// Paths that must not come into existence during the run (`.git/commondir`, which would
    /// redirect git's configuration and hooks to a directory the command controls). Missing
    /// files cannot be bound read-only, so init watches for them instead.
    pub must_stay_absent: Vec<PathBuf>,
}

/// The name of the marker file inside every placeholder directory bridle creates, so that any
/// later run (not only the one that created it) recognises it and may remove it.
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
/// run that used it, whichever created it. Placeholders carry a [`PLACEHOLDER_MARKER`] file so
/// that runs other than their creator (or a run after a crashed one) recognise them.
#[derive(Debug, Default)]
pub struct Placeholders {
    created: Vec<PathBuf>,
    held: Vec<HeldDir>,
}

/// A directory on a protected path, with the shared lock this run holds on it.
#[derive(Debug)]
struct HeldDir {
    path: PathBuf,
    id: (u64, u64),
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
    /// Takes a shared lock on the directory at `dir` and keeps it until [`Placeholders::remove`].
    /// `Ok(false)` when the directory vanished or was replaced meanwhile (the caller walks again).
    fn hold(&mut self, dir: &Path) -> Result<bool, MountFailure> {
        let file = match open_dir(dir) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
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
        let mut pending = file;
        let lock = loop {
            match Flock::lock(pending, FlockArg::LockShared) {
                Ok(lock) => break Some(lock),
                Err((again, nix::errno::Errno::EINTR)) => pending = again,
                // No flock on this filesystem: protect it anyway, never remove it.
                Err(_) => break None,
            }
        };
        // Another run may have removed (and someone re-created) it while we waited.
        if !same_dir(dir, id) {
            return Ok(false);
        }
        self.held.push(HeldDir {
            path: dir.to_path_buf(),
            id,
            _lock: lock,
        });
        Ok(true)
    }

    /// Removes the placeholder directories no other run is using any more: the ones this run
    /// created and the ones it found (marked by [`PLACEHOLDER_MARKER`]). Deepest first; a
    /// placeholder another run still holds stays, and that run removes it when it ends.
    pub fn remove(&mut self) {
        let held = std::mem::take(&mut self.held);
        let created = std::mem::take(&mut self.created);
        let mut candidates: Vec<(PathBuf, (u64, u64))> = held
            .iter()
            .filter(|h| created.contains(&h.path) || h.path.join(PLACEHOLDER_MARKER).is_file())
            .map(|h| (h.path.clone(), h.id))
            .collect();
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
        for (path, id) in candidates {
            remove_placeholder(&path, id);
        }
    }
}

/// Removes the placeholder at `path` when it is still the directory `id`, holds nothing but its
/// marker, and no other run holds a lock on it.
fn remove_placeholder(path: &Path, id: (u64, u64)) {
    let Ok(file) = open_dir(path) else { return };
    let Ok(lock) = Flock::lock(file, FlockArg::LockExclusiveNonblock) else {
        return;
    };
    if !same_dir(path, id) {
        return;
    }
    if !holds_only_marker(path) {
        return;
    }
    let _ = std::fs::remove_file(path.join(PLACEHOLDER_MARKER));
    let _ = std::fs::remove_dir(path);
    drop(lock);
}

/// Whether the directory `dir` is a bare placeholder: it holds its marker and nothing else.
fn holds_only_marker(dir: &Path) -> bool {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return false;
    };
    let mut marked = false;
    for entry in entries {
        match entry {
            Ok(e) if e.file_name() == PLACEHOLDER_MARKER => marked = true,
            _ => return false,
        }
    }
    marked
}

impl Drop for Placeholders {
    fn drop(&mut self) {
        self.remove();
    }
}

fn is_within(path: &Path, roots: &[PathBuf]) -> bool {
    roots.iter().any(|r| path.starts_with(r))
}

/// Prepares the mount plan on the host side.
///
/// For every protected path (shallowest first; one below an already protected path is covered
/// by it), walks its components below the writable root: a symlink on the way is a refusal (a
/// protected path must not be redirectable); the first missing component gets a placeholder
/// directory, holding only a [`PLACEHOLDER_MARKER`], which is then protected itself (so a
/// missing `.git` at the root cannot be created, and git ignores a `.git` directory without
/// `HEAD`); an existing placeholder or non-directory on the way is protected itself. See
/// [`Placeholders`] for how concurrent runs share placeholders.
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

    let mut pins = Vec::new();
    let mut protected: Vec<PathBuf> = Vec::new();
    // Shallow first: a path below one that is already protected (read-only) needs nothing more,
    // in particular no placeholder of its own inside a placeholder.
    let mut requested: Vec<&PathBuf> = spec.protected_paths.iter().collect();
    requested.sort_by_key(|p| p.components().count());
    for path in requested {
        let Some(root) = outermost
            .iter()
            .filter(|r| path.starts_with(r))
            .max_by_key(|r| r.as_os_str().len())
        else {
            continue;
        };
        if protected.iter().any(|t| path.starts_with(t)) {
            continue;
        }
        let chain = protected_chain(root, path, &mut placeholders)?;
        if let Some((target, ancestors)) = chain.split_last() {
            pins.extend(ancestors.iter().cloned());
            protected.push(target.clone());
        }
    }
    pins.sort();
    pins.dedup();
    pins.retain(|p| !protected.iter().any(|t| p.starts_with(t)));
    protected.sort();
    protected.dedup();

    let mut masked_dirs = Vec::new();
    let mut masked_files = Vec::new();
    for path in &spec.masked_paths {
        match std::fs::metadata(path) {
            Ok(meta) if meta.is_dir() => masked_dirs.push(path.clone()),
            Ok(_) => masked_files.push(path.clone()),
            Err(_) => {}
        }
    }

    let mut hidden = Vec::new();
    let mut keep_in_hidden = Vec::new();
    for dir in ["/run", "/var/run"] {
        let path = Path::new(dir);
        if std::fs::symlink_metadata(path).is_ok_and(|m| m.is_dir()) && !is_within(path, &outermost)
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
    let must_stay_absent: Vec<PathBuf> = outermost
        .iter()
        .map(|root| root.join(".git"))
        .filter(|git| std::fs::symlink_metadata(git).is_ok_and(|m| m.is_dir()))
        .map(|git| git.join("commondir"))
        .filter(|c| std::fs::symlink_metadata(c).is_err())
        .collect();
    let plan = MountPlan {
        writable: outermost,
        must_stay_absent,
        writable_ids,
        temp_dir: spec.temp_dir.clone(),
        private_tmp: spec.private_tmp,
        pins,
        protected,
        masked_dirs,
        masked_files,
        hidden,
        keep_in_hidden,
    };
    Ok((plan, placeholders))
}

/// The existing directories leading to the protected `path` below `root`, ending with what is
/// protected: `path` itself, the first existing non-directory on the way, or a fresh placeholder
/// for the first missing component. Every directory in the chain is held (shared lock). Walks
/// again when a concurrent run changes the path meanwhile.
fn protected_chain(
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
                if holds_only_marker(&current) {
                    break;
                }
            }
            Ok(_) => {
                chain.push(current.clone());
                break;
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                match std::fs::create_dir(&current) {
                    Ok(()) => {}
                    // Another run created it first: walk again and share it.
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => return Ok(None),
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
                std::fs::File::create(current.join(PLACEHOLDER_MARKER)).map_err(|e| {
                    fail(
                        Guarantee::FsProtect,
                        format!("marking the placeholder `{}`: {e}", current.display()),
                    )
                })?;
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

fn cstr(path: &Path) -> Result<CString, MountFailure> {
    CString::new(path.as_os_str().as_bytes()).map_err(|_| {
        fail(
            Guarantee::FsWrite,
            format!("path `{}` contains a NUL byte", path.display()),
        )
    })
}

fn clone_tree(path: &Path, guarantee: Guarantee) -> Result<OwnedFd, MountFailure> {
    sys::open_tree_clone(&cstr(path)?)
        .map_err(|e| fail(guarantee, format!("open_tree(`{}`): {e}", path.display())))
}

fn attach(tree: &OwnedFd, target: &Path, guarantee: Guarantee) -> Result<(), MountFailure> {
    sys::move_mount_to(tree.as_fd(), &cstr(target)?).map_err(|e| {
        fail(
            guarantee,
            format!("move_mount onto `{}`: {e}", target.display()),
        )
    })
}

/// Opens `path` as an `O_PATH` descriptor without following any symlink on the way, so a
/// component swapped for a symlink after the parent checked it makes the launch fail instead of
/// redirecting a mount.
fn open_strict(path: &Path, guarantee: Guarantee) -> Result<OwnedFd, MountFailure> {
    use nix::fcntl::{OFlag, OpenHow, ResolveFlag, openat2};
    let how = OpenHow::new()
        .flags(OFlag::O_PATH | OFlag::O_CLOEXEC | OFlag::O_NOFOLLOW)
        .resolve(ResolveFlag::RESOLVE_NO_SYMLINKS | ResolveFlag::RESOLVE_NO_MAGICLINKS);
    openat2(nix::fcntl::AT_FDCWD, path, how).map_err(|e| {
        fail(
            guarantee,
            format!(
                "opening `{}` without following symlinks: {e}",
                path.display()
            ),
        )
    })
}

/// Clones the tree at `path` through [`open_strict`], checking it is still the directory the
/// parent prepared (`expect`: device and inode).
fn clone_tree_strict(
    path: &Path,
    guarantee: Guarantee,
    expect: Option<(u64, u64)>,
) -> Result<OwnedFd, MountFailure> {
    let fd = open_strict(path, guarantee)?;
    if let Some((dev, ino)) = expect {
        let st = nix::sys::stat::fstat(&fd)
            .map_err(|e| fail(guarantee, format!("inspecting `{}`: {e}", path.display())))?;
        if (st.st_dev, st.st_ino) != (dev, ino) {
            return Err(fail(
                guarantee,
                format!(
                    "`{}` changed between preparation and launch",
                    path.display()
                ),
            ));
        }
    }
    sys::open_tree_clone_fd(fd.as_fd())
        .map_err(|e| fail(guarantee, format!("open_tree(`{}`): {e}", path.display())))
}

/// Attaches `tree` on `target`, opened through [`open_strict`].
fn attach_strict(tree: &OwnedFd, target: &Path, guarantee: Guarantee) -> Result<(), MountFailure> {
    let fd = open_strict(target, guarantee)?;
    sys::move_mount_to_fd(tree.as_fd(), fd.as_fd()).map_err(|e| {
        fail(
            guarantee,
            format!("move_mount onto `{}`: {e}", target.display()),
        )
    })
}

fn bind_onto_itself(
    path: &Path,
    read_only: bool,
    guarantee: Guarantee,
) -> Result<(), MountFailure> {
    let tree = clone_tree_strict(path, guarantee, None)?;
    if read_only {
        sys::mount_setattr_fd(tree.as_fd(), sys::MOUNT_ATTR_RDONLY, 0).map_err(|e| {
            fail(
                guarantee,
                format!("making `{}` read-only: {e}", path.display()),
            )
        })?;
    }
    attach_strict(&tree, path, guarantee)
}

fn mount_tmpfs(
    target: &Path,
    flags: MsFlags,
    options: &str,
    guarantee: Guarantee,
) -> Result<(), MountFailure> {
    mount(Some("tmpfs"), target, Some("tmpfs"), flags, Some(options)).map_err(|e| {
        fail(
            guarantee,
            format!("mounting a tmpfs on `{}`: {e}", target.display()),
        )
    })
}

fn remount_read_only(target: &Path, guarantee: Guarantee) -> Result<(), MountFailure> {
    sys::mount_setattr_path(&cstr(target)?, sys::MOUNT_ATTR_RDONLY, 0).map_err(|e| {
        fail(
            guarantee,
            format!("making `{}` read-only: {e}", target.display()),
        )
    })
}

/// Whether `path` exists in the view being built. A masked path that is not there (for example
/// a home below `/tmp`, which the private `/tmp` replaces) cannot be read by that path at all, so
/// there is nothing to mask.
fn visible_in_view(path: &Path) -> Result<bool, MountFailure> {
    match std::fs::metadata(path) {
        Ok(_) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(fail(
            Guarantee::FsMask,
            format!("inspecting masked path `{}`: {e}", path.display()),
        )),
    }
}

/// Builds the view in the current (fresh) mount namespace, except `/proc`. Must run before the
/// PID namespace's init mounts `/proc`, in a process that holds CAP_SYS_ADMIN over the mount
/// namespace.
pub fn build_view(plan: &MountPlan) -> Result<(), MountFailure> {
    use Guarantee::{FsMask, FsProtect, FsWrite, Ipc};
    mount(
        None::<&str>,
        "/",
        None::<&str>,
        MsFlags::MS_REC | MsFlags::MS_PRIVATE,
        None::<&str>,
    )
    .map_err(|e| fail(FsWrite, format!("making mounts private: {e}")))?;

    let writable: Vec<(PathBuf, OwnedFd)> = plan
        .writable
        .iter()
        .enumerate()
        .map(|(i, w)| {
            Ok((
                w.clone(),
                clone_tree_strict(w, FsWrite, plan.writable_ids.get(i).copied())?,
            ))
        })
        .collect::<Result<_, MountFailure>>()?;
    let temp = clone_tree_strict(&plan.temp_dir, FsWrite, None)?;
    let temp_for_tmp = if plan.private_tmp {
        Some(clone_tree(&plan.temp_dir, FsWrite)?)
    } else {
        None
    };
    let dev_nodes: Vec<(&str, OwnedFd)> = DEV_NODES
        .iter()
        .filter(|n| Path::new("/dev").join(n).exists())
        .map(|n| Ok((*n, clone_tree(&Path::new("/dev").join(n), FsWrite)?)))
        .collect::<Result<_, MountFailure>>()?;
    let kept: Vec<(PathBuf, OwnedFd)> = plan
        .keep_in_hidden
        .iter()
        .map(|p| Ok((p.clone(), clone_tree(p, Ipc)?)))
        .collect::<Result<_, MountFailure>>()?;

    // Masked files share one empty, mode-000 file inside the session temp dir.
    let mask_file = plan.temp_dir.join(".bridle-masked");
    if !plan.masked_files.is_empty() {
        std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o000)
            .open(&mask_file)
            .map_err(|e| {
                fail(
                    FsMask,
                    format!("creating the mask file `{}`: {e}", mask_file.display()),
                )
            })?;
    }

    sys::mount_setattr_path(c"/", sys::MOUNT_ATTR_RDONLY, 0)
        .map_err(|e| fail(FsWrite, format!("making `/` read-only: {e}")))?;

    // The private /tmp goes first: a writable root below /tmp (a workspace in /tmp, say) is
    // then attached on a mount point created inside the private /tmp.
    if let Some(tree) = &temp_for_tmp {
        attach(tree, Path::new("/tmp"), FsWrite)?;
    }
    for (path, tree) in &writable {
        if temp_for_tmp.is_some() && path.starts_with("/tmp") {
            std::fs::create_dir_all(path).map_err(|e| {
                fail(
                    FsWrite,
                    format!(
                        "creating the mount point `{}` in the private /tmp: {e}",
                        path.display()
                    ),
                )
            })?;
        }
        attach_strict(tree, path, FsWrite)?;
    }
    if temp_for_tmp.is_some() && plan.temp_dir.starts_with("/tmp") {
        // A temp dir below /tmp (a session dir there, say) is reached at its own path too.
        std::fs::create_dir_all(&plan.temp_dir).map_err(|e| {
            fail(
                FsWrite,
                format!(
                    "creating the mount point `{}` in the private /tmp: {e}",
                    plan.temp_dir.display()
                ),
            )
        })?;
    }
    // Other runs' temp dirs live next to ours: hide the directory that holds them behind an
    // empty read-only tmpfs that has only a mount point for ours.
    if let Some(base) = plan.temp_dir.parent()
        && plan.private_tmp
        && base != Path::new("/")
        && !base.starts_with("/tmp")
        && !plan
            .writable
            .iter()
            .any(|w| base.starts_with(w) || w.starts_with(base))
    {
        mount_tmpfs(
            base,
            MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
            "size=16k,mode=755",
            FsWrite,
        )?;
        std::fs::create_dir(&plan.temp_dir).map_err(|e| {
            fail(
                FsWrite,
                format!(
                    "creating the mount point `{}`: {e}",
                    plan.temp_dir.display()
                ),
            )
        })?;
        remount_read_only(base, FsWrite)?;
    }
    attach_strict(&temp, &plan.temp_dir, FsWrite)?;
    for pin in &plan.pins {
        bind_onto_itself(pin, false, FsProtect)?;
    }
    for path in &plan.protected {
        bind_onto_itself(path, true, FsProtect)?;
    }
    let mask_flags =
        MsFlags::MS_RDONLY | MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC;
    for dir in &plan.masked_dirs {
        if !visible_in_view(dir)? {
            continue;
        }
        mount_tmpfs(dir, mask_flags, "size=4k,nr_inodes=1,mode=000", FsMask)?;
    }
    for file in &plan.masked_files {
        if !visible_in_view(file)? {
            continue;
        }
        // Each bind needs its own clone (attaching consumes it), made read-only before it is
        // attached, so not even the mask file's metadata can be
        // changed through a masked path.
        let again = sys::open_tree_clone(&cstr(&mask_file)?)
            .map_err(|e| fail(FsMask, format!("cloning the mask file: {e}")))?;
        sys::mount_setattr_fd(again.as_fd(), sys::MOUNT_ATTR_RDONLY, 0)
            .map_err(|e| fail(FsMask, format!("making the mask file read-only: {e}")))?;
        attach(&again, file, FsMask)?;
    }

    build_dev(dev_nodes, plan.private_tmp)?;
    for dir in &plan.hidden {
        mount_tmpfs(
            dir,
            MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
            "size=64k,mode=755",
            Ipc,
        )?;
        for (path, tree) in kept.iter().filter(|(p, _)| p.starts_with(dir)) {
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent)
                    .map_err(|e| fail(Ipc, format!("recreating `{}`: {e}", parent.display())))?;
            }
            std::fs::File::create(path)
                .map_err(|e| fail(Ipc, format!("recreating `{}`: {e}", path.display())))?;
            attach(tree, path, Ipc)?;
        }
        remount_read_only(dir, Ipc)?;
    }
    Ok(())
}

/// Replaces `/dev` with a minimal tmpfs: a few device nodes bound from the host, a private
/// devpts instance, a private `/dev/shm`, and the usual symlinks.
fn build_dev(nodes: Vec<(&str, OwnedFd)>, private_shm: bool) -> Result<(), MountFailure> {
    use Guarantee::FsWrite;
    let dev = Path::new("/dev");
    mount_tmpfs(
        dev,
        MsFlags::MS_NOSUID | MsFlags::MS_NOEXEC,
        "size=64k,mode=755",
        FsWrite,
    )?;
    let io =
        |what: &str, r: std::io::Result<()>| r.map_err(|e| fail(FsWrite, format!("{what}: {e}")));
    for (name, tree) in &nodes {
        let path = dev.join(name);
        io(
            "creating a device mount point",
            std::fs::File::create(&path).map(drop),
        )?;
        attach(tree, &path, FsWrite)?;
    }
    for dir in ["pts", "shm"] {
        io(
            "creating /dev directories",
            std::fs::create_dir(dev.join(dir)),
        )?;
    }
    mount(
        Some("devpts"),
        "/dev/pts",
        Some("devpts"),
        MsFlags::MS_NOSUID | MsFlags::MS_NOEXEC,
        Some("newinstance,ptmxmode=0666,mode=620"),
    )
    .map_err(|e| fail(FsWrite, format!("mounting a private devpts: {e}")))?;
    for (link, target) in [
        ("ptmx", "pts/ptmx"),
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
    ] {
        io(
            "creating /dev symlinks",
            std::os::unix::fs::symlink(target, dev.join(link)),
        )?;
    }
    let shm_flags = MsFlags::MS_NOSUID | MsFlags::MS_NODEV;
    if private_shm {
        mount_tmpfs(&dev.join("shm"), shm_flags, "mode=1777", FsWrite)?;
    }
    sys::mount_setattr_path(c"/dev", sys::MOUNT_ATTR_RDONLY, 0)
        .map_err(|e| fail(FsWrite, format!("making /dev read-only: {e}")))?;
    // mount_setattr on "/dev" is recursive: give the private devpts and /dev/shm their
    // write access back.
    for sub in [c"/dev/pts", c"/dev/shm"] {
        sys::mount_setattr_path(sub, 0, sys::MOUNT_ATTR_RDONLY).map_err(|e| {
            fail(
                FsWrite,
                format!("making {} writable: {e}", sub.to_string_lossy()),
            )
        })?;
    }
    Ok(())
}

/// Mounts a fresh `/proc` for the current PID namespace (run by its init).
pub fn mount_proc() -> Result<(), MountFailure> {
    mount(
        Some("proc"),
        "/proc",
        Some("proc"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
        None::<&str>,
    )
    .map_err(|e| {
        fail(
            Guarantee::Proc,
            format!("mounting /proc for the PID namespace: {e}"),
        )
    })?;
    // Kernel knobs stay read-only even where Landlock is missing: sysctls only check the uid,
    // so uid 0 in the sandbox could otherwise write /proc/sys/kernel/core_pattern.
    for knob in [
        "/proc/sys",
        "/proc/sysrq-trigger",
        "/proc/irq",
        "/proc/bus",
        "/proc/fs",
    ] {
        let path = Path::new(knob);
        if path.exists() {
            bind_onto_itself(path, true, Guarantee::Priv)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_protected_path_gets_a_marked_placeholder_that_is_removed() {
        let root = tempfile::tempdir().unwrap();
        let ws = root.path();
        let mut run = Placeholders::default();
        let chain = protected_chain(ws, &ws.join(".git/hooks"), &mut run).unwrap();
        assert_eq!(chain, vec![ws.join(".git")]);
        assert!(holds_only_marker(&ws.join(".git")));
        run.remove();
        assert!(!ws.join(".git").exists());
    }

    #[test]
    fn placeholder_stays_while_another_run_holds_it() {
        let root = tempfile::tempdir().unwrap();
        let ws = root.path();
        let mut first = Placeholders::default();
        let mut second = Placeholders::default();
        protected_chain(ws, &ws.join(".git/hooks"), &mut first).unwrap();
        // The second run protects the first run's placeholder as it is.
        let chain = protected_chain(ws, &ws.join(".git/config"), &mut second).unwrap();
        assert_eq!(chain, vec![ws.join(".git")]);
        first.remove();
        assert!(ws.join(".git").is_dir(), "removed under another run");
        // The last run out removes it, though it did not create it.
        second.remove();
        assert!(!ws.join(".git").exists());
    }

    #[test]
    fn existing_directories_are_held_and_never_removed() {
        let root = tempfile::tempdir().unwrap();
        let ws = root.path();
        std::fs::create_dir_all(ws.join(".git/hooks")).unwrap();
        let mut run = Placeholders::default();
        let chain = protected_chain(ws, &ws.join(".git/hooks"), &mut run).unwrap();
        assert_eq!(chain, vec![ws.join(".git"), ws.join(".git/hooks")]);
        run.remove();
        assert!(ws.join(".git/hooks").is_dir());
    }

    #[test]
    fn symlink_on_a_protected_path_is_refused() {
        let root = tempfile::tempdir().unwrap();
        let ws = root.path();
        std::os::unix::fs::symlink("/", ws.join(".git")).unwrap();
        let mut run = Placeholders::default();
        let err = protected_chain(ws, &ws.join(".git/hooks"), &mut run).unwrap_err();
        assert_eq!(err.guarantee, Guarantee::FsProtect);
    }
}

/// Mount points listed in a `/proc/self/mountinfo` text (field 5, octal escapes decoded).
fn mount_points(mountinfo: &str) -> std::collections::HashSet<PathBuf> {
    mountinfo
        .lines()
        .filter_map(|line| line.split(' ').nth(4))
        .map(|field| {
            let mut out = Vec::new();
            let bytes = field.as_bytes();
            let mut i = 0;
            while i < bytes.len() {
                if bytes[i] == b'\\' && i + 3 < bytes.len() {
                    let code = std::str::from_utf8(&bytes[i + 1..i + 4])
                        .ok()
                        .and_then(|o| u8::from_str_radix(o, 8).ok());
                    if let Some(c) = code {
                        out.push(c);
                        i += 4;
                        continue;
                    }
                }
                out.push(bytes[i]);
                i += 1;
            }
            PathBuf::from(std::ffi::OsStr::from_bytes(&out))
        })
        .collect()
}

/// Watches the protected-path binds from init: when one disappears (the host renamed or deleted
/// the file, which detaches a bind in every other mount namespace), the path is no longer
/// read-only inside, so the whole sandbox is stopped at once and the user told to check it.
/// Runs on its own thread in init (PID 1), for the life of the run.
pub fn watch_protected(protected: Vec<PathBuf>, must_stay_absent: Vec<PathBuf>) {
    if protected.is_empty() && must_stay_absent.is_empty() {
        return;
    }
    let _ = std::thread::Builder::new().name("bridle-protect-watch".into()).spawn(move || {
        use std::io::{Read, Seek};
        let Ok(mut file) = std::fs::File::open("/proc/self/mountinfo") else { return };
        let read_points = |file: &mut std::fs::File| {
            let mut text = String::new();
            let _ = file.rewind();
            let _ = file.read_to_string(&mut text);
            mount_points(&text)
        };
        let initial = read_points(&mut file);
        let watched: Vec<PathBuf> = protected.into_iter().filter(|p| initial.contains(p)).collect();
        loop {
            // Mount changes wake us at once; files that must stay absent are checked a few times a
            // second.
            let mut fds = [nix::poll::PollFd::new(file.as_fd(), nix::poll::PollFlags::POLLPRI)];
            let _ = nix::poll::poll(&mut fds, nix::poll::PollTimeout::from(250u16));
            if let Some(planted) = must_stay_absent.iter().find(|p| std::fs::symlink_metadata(p).is_ok()) {
                // Remove it before anything on the host reads it, then stop everything.
                let _ = std::fs::remove_file(planted).or_else(|_| std::fs::remove_dir_all(planted));
                let message = format!(
                    "bridle: the command created `{}`, which would redirect git's configuration and hooks outside the protected paths; it was removed and the sandbox was stopped.\n",
                    planted.display()
                );
                let _ = sys::write_all_raw(2, message.as_bytes());
                let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(-1), nix::sys::signal::Signal::SIGKILL);
                sys::exit_now(137);
            }
            let now = read_points(&mut file);
            if let Some(gone) = watched.iter().find(|p| !now.contains(*p)) {
                let message = format!(
                    "bridle: protected path `{}` was replaced from outside the sandbox during the run, which made it writable inside; the sandbox was stopped. Check the file: the command may have changed it.\n",
                    gone.display()
                );
                let _ = sys::write_all_raw(2, message.as_bytes());
                let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(-1), nix::sys::signal::Signal::SIGKILL);
                sys::exit_now(137);
            }
        }
    });
}

#[cfg(test)]
mod mountinfo_tests {
    use super::*;

    #[test]
    fn mount_points_are_parsed_with_escapes() {
        let text = "36 35 98:0 / /mnt/a\\040b rw - ext3 /dev/root rw\n37 35 98:0 / /w/.git/config ro - ext4 x rw\n";
        let points = mount_points(text);
        assert!(points.contains(Path::new("/mnt/a b")));
        assert!(points.contains(Path::new("/w/.git/config")));
    }
}
