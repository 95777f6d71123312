//! The mount operations the view is built from, each failing with the guarantee it serves:
//! detached clones (`open_tree`), attaching, binding onto itself, tmpfs, read-only remounts.

use std::ffi::CString;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use bridle_policy::Guarantee;
use nix::mount::{MsFlags, mount};

use super::{MountFailure, fail};
use crate::sys;

pub(super) fn cstr(path: &Path) -> Result<CString, MountFailure> {
    CString::new(path.as_os_str().as_bytes()).map_err(|_| {
        fail(
            Guarantee::FsWrite,
            format!("path `{}` contains a NUL byte", path.display()),
        )
    })
}

pub(super) fn clone_tree(path: &Path, guarantee: Guarantee) -> Result<OwnedFd, MountFailure> {
    sys::open_tree_clone(&cstr(path)?)
        .map_err(|e| fail(guarantee, format!("open_tree(`{}`): {e}", path.display())))
}

pub(super) fn attach(
    tree: &OwnedFd,
    target: &Path,
    guarantee: Guarantee,
) -> Result<(), MountFailure> {
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
pub(super) fn open_strict(path: &Path, guarantee: Guarantee) -> Result<OwnedFd, MountFailure> {
    open_no_symlinks(path).map_err(|e| open_strict_failure(path, e, guarantee))
}

/// The `openat2` behind [`open_strict`], with the kernel's error as it is.
pub(super) fn open_no_symlinks(path: &Path) -> nix::Result<OwnedFd> {
    use nix::fcntl::{OFlag, OpenHow, ResolveFlag, openat2};
    let how = OpenHow::new()
        .flags(OFlag::O_PATH | OFlag::O_CLOEXEC | OFlag::O_NOFOLLOW)
        .resolve(ResolveFlag::RESOLVE_NO_SYMLINKS | ResolveFlag::RESOLVE_NO_MAGICLINKS);
    openat2(nix::fcntl::AT_FDCWD, path, how)
}

/// The failure of [`open_strict`] on `path`.
pub(super) fn open_strict_failure(
    path: &Path,
    errno: nix::errno::Errno,
    guarantee: Guarantee,
) -> MountFailure {
    fail(
        guarantee,
        format!(
            "opening `{}` without following symlinks: {errno}",
            path.display()
        ),
    )
}

/// Clones the tree at `path` through [`open_strict`], checking it is still the directory the
/// parent prepared (`expect`: device and inode).
pub(super) fn clone_tree_strict(
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
pub(super) fn attach_strict(
    tree: &OwnedFd,
    target: &Path,
    guarantee: Guarantee,
) -> Result<(), MountFailure> {
    let fd = open_strict(target, guarantee)?;
    sys::move_mount_to_fd(tree.as_fd(), fd.as_fd()).map_err(|e| {
        fail(
            guarantee,
            format!("move_mount onto `{}`: {e}", target.display()),
        )
    })
}

pub(super) fn bind_onto_itself(
    path: &Path,
    read_only: bool,
    guarantee: Guarantee,
) -> Result<(), MountFailure> {
    let fd = open_strict(path, guarantee)?;
    bind_opened_onto_itself(&fd, path, read_only, guarantee)
}

/// Binds `fd` (opened through [`open_no_symlinks`] at `path`) onto itself: the clone and its
/// mount point are the one file or directory that was opened.
pub(super) fn bind_opened_onto_itself(
    fd: &OwnedFd,
    path: &Path,
    read_only: bool,
    guarantee: Guarantee,
) -> Result<(), MountFailure> {
    // The open does not follow a symlink that is the last component: it opens the link
    // itself, which would be bound while what it points to stayed as it was. The parent
    // refused symlinks when it planned, so one here was put in place since.
    let st = nix::sys::stat::fstat(fd)
        .map_err(|e| fail(guarantee, format!("inspecting `{}`: {e}", path.display())))?;
    if st.st_mode & nix::libc::S_IFMT == nix::libc::S_IFLNK {
        return Err(fail(
            guarantee,
            format!(
                "`{}` is a symlink now (something was put in its place since the launch was planned)",
                path.display()
            ),
        ));
    }
    let tree = sys::open_tree_clone_fd(fd.as_fd())
        .map_err(|e| fail(guarantee, format!("open_tree(`{}`): {e}", path.display())))?;
    if read_only {
        sys::mount_setattr_fd(tree.as_fd(), sys::MOUNT_ATTR_RDONLY, 0).map_err(|e| {
            fail(
                guarantee,
                format!("making `{}` read-only: {e}", path.display()),
            )
        })?;
    }
    sys::move_mount_to_fd(tree.as_fd(), fd.as_fd()).map_err(|e| {
        fail(
            guarantee,
            format!("move_mount onto `{}`: {e}", path.display()),
        )
    })
}

pub(super) fn mount_tmpfs(
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

pub(super) fn remount_read_only(target: &Path, guarantee: Guarantee) -> Result<(), MountFailure> {
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
pub(super) fn visible_in_view(path: &Path) -> Result<bool, MountFailure> {
    match std::fs::metadata(path) {
        Ok(_) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(fail(
            Guarantee::FsMask,
            format!("inspecting masked path `{}`: {e}", path.display()),
        )),
    }
}
