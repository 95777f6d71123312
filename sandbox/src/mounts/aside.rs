//! Moving something a command left aside, for the user to look at: renamed to a fresh
//! `NAME.bridle-moved-ID` next to it, never over anything (`RENAME_NOREPLACE`), never deleted
//! (the host may have made it), and never through a symlink.

use std::ffi::OsStr;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};

use nix::fcntl::{OFlag, OpenHow, RenameFlags, ResolveFlag, openat2, renameat2};

/// Renames `path` aside. Its directory is opened without following any symlink (writable roots
/// have none above them), and the rename is relative to it, so a command cannot have bridle
/// rename a file outside the workspace. Returns the new path, or `None` when it could not be
/// moved.
pub(super) fn move_aside(path: &Path) -> Option<PathBuf> {
    let name = path.file_name()?;
    let how = OpenHow::new()
        .flags(OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC)
        .resolve(ResolveFlag::RESOLVE_NO_SYMLINKS | ResolveFlag::RESOLVE_NO_MAGICLINKS);
    let dir = openat2(nix::fcntl::AT_FDCWD, path.parent()?, how).ok()?;
    move_aside_at(&dir, name, path)
}

/// Renames the entry `name` of the directory `dir` (whose path is `path`'s parent) aside.
pub(super) fn move_aside_at(dir: impl AsFd, name: &OsStr, path: &Path) -> Option<PathBuf> {
    let suffix = super::unique_suffix();
    for attempt in 0..100u32 {
        let mut target = name.to_os_string();
        target.push(format!(".bridle-moved-{suffix}-{attempt}"));
        match renameat2(
            dir.as_fd(),
            name,
            dir.as_fd(),
            target.as_os_str(),
            RenameFlags::RENAME_NOREPLACE,
        ) {
            Ok(()) => return Some(path.with_file_name(target)),
            Err(nix::errno::Errno::EEXIST) => {}
            Err(_) => return None,
        }
    }
    None
}
