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

use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};

use bridle_policy::Guarantee;
use nix::mount::{MsFlags, mount};
use serde::{Deserialize, Serialize};

use crate::sys;

mod aside;
pub mod cache;
pub(crate) mod devices;
mod full_view;
mod git_lock;
pub mod inspect;
mod masks;
mod ops;
mod pins;
mod placeholders;
mod prepare;
mod state;
mod watch;

pub use git_lock::{ConfigLock, LOCK_MARKER};
pub use inspect::{Inspection, Inspector, Quarantined};

use masks::{mask_clone, mask_file, mask_paths};
use ops::{
    attach, attach_strict, bind_onto_itself, clone_tree, clone_tree_strict, cstr, mount_tmpfs,
    remount_read_only,
};
use placeholders::protected_chain;
pub use placeholders::{PLACEHOLDER_MARKER, Placeholders};
pub use prepare::prepare;
pub use watch::{exit_init, planted_message, sweep_planted, watch_protected};

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
    /// Directories below the host's `/tmp` that stay visible, read-only, in the private `/tmp`
    /// (a workspace there that is not writable, as under `read-only`).
    #[serde(default)]
    pub read_only_in_tmp: Vec<PathBuf>,
    /// `$HOME`, when it is one of `read_only_in_tmp`: it gets an overlay whose upper layer is
    /// in the private `/tmp`, so what the command writes there (caches) works and goes with the
    /// run, as when the private `/tmp` hid it, while the host's files in it are seen.
    #[serde(default)]
    pub home_in_tmp: Option<PathBuf>,
    /// Cache directories made writable through an overlay (see [`cache`]).
    #[serde(default)]
    pub cache_overlays: Vec<cache::CacheOverlay>,
    /// Directories bound onto themselves so they cannot be renamed or removed.
    pub pins: Vec<PathBuf>,
    /// Pins kept only for masks another run may remove (its session directories), bound after
    /// `pins`: one that is gone when the view is built is passed over, since nothing below it
    /// is left to hide. None of them holds a pin of `pins`.
    #[serde(default)]
    pub pins_may_vanish: Vec<PathBuf>,
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
    /// Missing protected paths that got no placeholder (at the top of a root holding no
    /// repository, where one would keep `git clone URL .` from working): what the command
    /// creates there is moved aside when the run ends.
    #[serde(default)]
    pub absent_at_end: Vec<PathBuf>,
    /// Full access except the protected paths and masks (see [`full_view`]): no read-only `/`,
    /// no writable binds, the real `/dev`, `/run` and `/tmp`.
    #[serde(default)]
    pub full_view: bool,
}

/// A suffix for names bridle makes next to the user's files (moved-aside paths, placeholders
/// under construction): the process id and the time, unlikely to be taken.
fn unique_suffix() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!("{}-{nanos:x}", std::process::id())
}

/// A shared `flock` on `file`, retried on EINTR; `None` when the filesystem has no `flock`.
fn lock_shared(file: std::fs::File) -> Option<nix::fcntl::Flock<std::fs::File>> {
    use nix::fcntl::{Flock, FlockArg};
    let mut pending = file;
    loop {
        match Flock::lock(pending, FlockArg::LockShared) {
            Ok(lock) => return Some(lock),
            Err((again, nix::errno::Errno::EINTR)) => pending = again,
            Err(_) => return None,
        }
    }
}

/// The names in `dir`, sorted (for tests).
#[cfg(test)]
fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// Mounts an overlay on `home` (already bound read-only from the host) whose upper layer lives in
/// the private `/tmp` (`/tmp/.bridle-home`), so writes there succeed and end with the run.
fn overlay_home_in_tmp(home: &Path) -> Result<(), String> {
    let layers = Path::new("/tmp/.bridle-home");
    let (upper, work) = (layers.join("upper"), layers.join("work"));
    for dir in [&upper, &work] {
        std::fs::create_dir_all(dir).map_err(|e| format!("creating `{}`: {e}", dir.display()))?;
    }
    let options = format!(
        "lowerdir={},upperdir={},workdir={},userxattr",
        home.display(),
        upper.display(),
        work.display()
    );
    mount(
        Some("overlay"),
        home,
        Some("overlay"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
        Some(options.as_str()),
    )
    .map_err(|e| format!("mounting its overlay: {e}"))
}

/// The directories of the private /tmp that hold the mount points `points` (below /tmp) and
/// are not mount points themselves: the top one of each (`/tmp/ci` for `/tmp/ci/job/ws`).
fn holders_in_tmp(points: &[&Path]) -> Vec<PathBuf> {
    let mut holders: Vec<PathBuf> = points
        .iter()
        .filter_map(|p| {
            let first = p.strip_prefix("/tmp").ok()?.components().next()?;
            Some(Path::new("/tmp").join(first))
        })
        .filter(|top| !points.contains(&top.as_path()))
        .collect();
    holders.sort();
    holders.dedup();
    holders
}

fn is_within(path: &Path, roots: &[PathBuf]) -> bool {
    roots.iter().any(|r| path.starts_with(r))
}

/// What [`build_view`] set up besides the guarantees: the cache paths it made writable, and
/// why others were left read-only.
#[derive(Debug, Default)]
pub struct ViewReport {
    /// Cache directories now writable (through their overlay).
    pub cache_writable: Vec<PathBuf>,
    /// What the view left out, and why: a cache directory left read-only, a pin passed over
    /// because what it held is gone.
    pub notes: Vec<String>,
}

/// Builds the view in the current (fresh) mount namespace, except `/proc`. Must run before the
/// PID namespace's init mounts `/proc`, in a process that holds CAP_SYS_ADMIN over the mount
/// namespace.
pub fn build_view(plan: &MountPlan) -> Result<ViewReport, MountFailure> {
    use Guarantee::{FsMask, FsProtect, FsWrite, Ipc};
    let mut report = ViewReport::default();
    mount(
        None::<&str>,
        "/",
        None::<&str>,
        MsFlags::MS_REC | MsFlags::MS_PRIVATE,
        None::<&str>,
    )
    .map_err(|e| fail(FsWrite, format!("making mounts private: {e}")))?;
    if plan.full_view {
        report.notes = build_full_view(plan)?;
        return Ok(report);
    }

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
    // Taken from the host's /tmp before the private one covers it.
    let read_only_in_tmp: Vec<(PathBuf, OwnedFd)> = plan
        .read_only_in_tmp
        .iter()
        .map(|p| {
            let tree = clone_tree(p, FsWrite)?;
            sys::mount_setattr_fd(tree.as_fd(), sys::MOUNT_ATTR_RDONLY, 0)
                .map_err(|e| fail(FsWrite, format!("making `{}` read-only: {e}", p.display())))?;
            Ok((p.clone(), tree))
        })
        .collect::<Result<_, MountFailure>>()?;
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

    // Before `/` is read-only, and before the writable roots are attached: the workspace may lie
    // inside a cache path, and must be seen on top of its overlay.
    for overlay in &plan.cache_overlays {
        match cache::mount(overlay) {
            Ok(()) => report.cache_writable.push(overlay.target.clone()),
            Err(why) => report.notes.push(format!(
                "cache path `{}` left read-only: {why}",
                overlay.target.display()
            )),
        }
    }

    sys::mount_setattr_path(c"/", sys::MOUNT_ATTR_RDONLY, 0)
        .map_err(|e| fail(FsWrite, format!("making `/` read-only: {e}")))?;

    // The private /tmp goes first: a writable root below /tmp (a workspace in /tmp, say) is
    // then attached on a mount point created inside the private /tmp.
    if let Some(tree) = &temp_for_tmp {
        attach(tree, Path::new("/tmp"), FsWrite)?;
    }
    // The overlays were mounted writable before `/` became read-only (their upper layers are on
    // the host's filesystem, which overlayfs needs writable when it mounts); they went read-only
    // with everything else and are made writable again, each on its own.
    // One that cannot be stays read-only, like a path without a cache home.
    let mounted = std::mem::take(&mut report.cache_writable);
    for target in mounted {
        match sys::mount_setattr_path(&cstr(&target)?, 0, sys::MOUNT_ATTR_RDONLY) {
            Ok(()) => report.cache_writable.push(target),
            Err(e) => report.notes.push(format!(
                "cache path `{}` left read-only: making its overlay writable: {e}",
                target.display()
            )),
        }
    }
    // A path below the host's /tmp needs its mount point made inside the private one.
    let mount_point_in_tmp = |path: &Path| -> Result<(), MountFailure> {
        if temp_for_tmp.is_none() || !path.starts_with("/tmp") {
            return Ok(());
        }
        std::fs::create_dir_all(path).map_err(|e| {
            fail(
                FsWrite,
                format!(
                    "creating the mount point `{}` in the private /tmp: {e}",
                    path.display()
                ),
            )
        })
    };
    if temp_for_tmp.is_some() {
        // Every mount point below /tmp is made first; then each directory made only to hold
        // them goes read-only, so a write beside a workspace in /tmp (`../out.txt`) fails
        // instead of landing in the private /tmp and vanishing when the run ends.
        let points: Vec<&Path> = read_only_in_tmp
            .iter()
            .map(|(p, _)| p.as_path())
            .chain(writable.iter().map(|(p, _)| p.as_path()))
            .chain(std::iter::once(plan.temp_dir.as_path()))
            .filter(|p| p.starts_with("/tmp") && *p != Path::new("/tmp"))
            .collect();
        for point in &points {
            mount_point_in_tmp(point)?;
        }
        for holder in holders_in_tmp(&points) {
            bind_onto_itself(&holder, true, FsWrite)?;
        }
        // In order, outer first: a read-only workspace in the home goes on top of its overlay.
        for (path, tree) in &read_only_in_tmp {
            attach(tree, path, FsWrite)?;
            if plan.home_in_tmp.as_ref() == Some(path)
                && let Err(why) = overlay_home_in_tmp(path)
            {
                report.notes.push(format!(
                    "`{}` (the home, below /tmp) left read-only: {why}",
                    path.display()
                ));
            }
        }
    }
    for (path, tree) in &writable {
        mount_point_in_tmp(path)?;
        attach_strict(tree, path, FsWrite)?;
    }
    // A temp dir below /tmp (a session dir there, say) is reached at its own path too.
    mount_point_in_tmp(&plan.temp_dir)?;
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
    report.notes.extend(bind_pins(plan)?);
    for path in &plan.protected {
        bind_onto_itself(path, true, FsProtect)?;
    }
    // The mask file lives in the temp dir, attached writable by now.
    mask_paths(plan, FsMask)?;

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
    Ok(report)
}

/// Step 5: binds the pins onto themselves, then those that may vanish (see
/// [`pins::pin_unless_gone`]); returns a note for each of those passed over.
fn bind_pins(plan: &MountPlan) -> Result<Vec<String>, MountFailure> {
    for path in &plan.pins {
        bind_onto_itself(path, false, Guarantee::FsProtect)?;
    }
    let mut notes = Vec::new();
    for pin in &plan.pins_may_vanish {
        notes.extend(pins::pin_unless_gone(pin)?);
    }
    Ok(notes)
}

/// The full view (see [`full_view`]), in a mount namespace whose mounts are private already:
/// pins, protected paths read-only, masks; nothing else changes. Returns the pins passed over.
fn build_full_view(plan: &MountPlan) -> Result<Vec<String>, MountFailure> {
    use Guarantee::{FsMask, FsProtect};
    let notes = bind_pins(plan)?;
    for path in &plan.protected {
        bind_onto_itself(path, true, FsProtect)?;
    }
    // Root in its own user namespace is still uid 0, whom file permissions do not stop.
    let root = nix::unistd::geteuid().is_root();
    let nodes = devices::nodes_to_hide(root)?;
    if !nodes.is_empty() {
        let mask_file = mask_file(plan, FsProtect)?;
        for node in &nodes {
            attach_strict(&mask_clone(&mask_file, FsProtect)?, node, FsProtect)?;
        }
    }
    // sysfs checks only the owner for most knobs (a uevent helper set there would run outside
    // the view): root gets a read-only /sys, as every sandbox's /proc/sys. Anyone else keeps
    // it as the host has it (delegated cgroups).
    if root && Path::new("/sys").exists() {
        bind_onto_itself(Path::new("/sys"), true, FsProtect)?;
    }
    mask_paths(plan, FsMask)?;
    Ok(notes)
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
        "/proc/scsi",
        "/proc/acpi",
        "/proc/driver",
    ] {
        let path = Path::new(knob);
        if path.exists() {
            bind_onto_itself(path, true, Guarantee::Priv)?;
        }
    }
    Ok(())
}
