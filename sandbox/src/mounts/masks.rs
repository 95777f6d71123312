//! Step 7 of the view: masks. A masked directory gets an empty, mode-000, read-only tmpfs; a
//! masked file an empty, mode-000, read-only file bound over it.

use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use bridle_policy::Guarantee;
use nix::mount::MsFlags;

use super::ops::{attach, cstr, mount_tmpfs, visible_in_view};
use super::{MountFailure, MountPlan, fail};
use crate::sys;

/// Step 7: masked directories get an empty, mode-000, read-only tmpfs; masked files an empty,
/// mode-000, read-only file.
pub(super) fn mask_paths(plan: &MountPlan, guarantee: Guarantee) -> Result<(), MountFailure> {
    let mask_flags =
        MsFlags::MS_RDONLY | MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC;
    for dir in &plan.masked_dirs {
        if !visible_in_view(dir)? {
            continue;
        }
        if let Err(failure) =
            mount_tmpfs(dir, mask_flags, "size=4k,nr_inodes=1,mode=000", guarantee)
        {
            // Removed since it was looked at: nothing is left there to hide.
            if !visible_in_view(dir)? {
                continue;
            }
            return Err(failure);
        }
    }
    if plan.masked_files.is_empty() {
        return Ok(());
    }
    let mask_file = mask_file(plan, guarantee)?;
    for file in &plan.masked_files {
        if !visible_in_view(file)? {
            continue;
        }
        if let Err(failure) = attach(&mask_clone(&mask_file, guarantee)?, file, guarantee) {
            if !visible_in_view(file)? {
                continue;
            }
            return Err(failure);
        }
    }
    Ok(())
}

/// The empty, mode-000 file that masked files (and the full view's disk nodes) share, inside
/// the session temp dir. Earlier commands of the session could write there: a symlink planted
/// under the name is refused, never followed (its target would be truncated and bound over the
/// masked files), and a FIFO is refused instead of blocking the launcher.
pub(super) fn mask_file(plan: &MountPlan, guarantee: Guarantee) -> Result<PathBuf, MountFailure> {
    let mask_file = plan.temp_dir.join(".bridle-masked");
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o000)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK)
        .open(&mask_file)
        .map_err(|e| {
            fail(
                guarantee,
                format!("creating the mask file `{}`: {e}", mask_file.display()),
            )
        })?;
    Ok(mask_file)
}

/// A clone of `mask_file` to attach over one path. Each bind needs its own clone (attaching
/// consumes it), made read-only before it is attached, so not even the mask file's metadata
/// can be changed through a masked path.
pub(super) fn mask_clone(mask_file: &Path, guarantee: Guarantee) -> Result<OwnedFd, MountFailure> {
    let clone = sys::open_tree_clone(&cstr(mask_file)?)
        .map_err(|e| fail(guarantee, format!("cloning the mask file: {e}")))?;
    sys::mount_setattr_fd(clone.as_fd(), sys::MOUNT_ATTR_RDONLY, 0)
        .map_err(|e| fail(guarantee, format!("making the mask file read-only: {e}")))?;
    Ok(clone)
}
