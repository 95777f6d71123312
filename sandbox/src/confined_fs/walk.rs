//! Listing and walking directories for the file tools: beneath the base, without following
//! symlinks, leaving out masked paths (not even their names are shown).

use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use nix::fcntl::{OFlag, OpenHow, ResolveFlag, openat2};

use super::ConfinedFs;
use super::denied::{Access, FsDenied, io_denied, io_error};
use super::hidden::opened_path;

impl ConfinedFs {
    /// Walks the tree below `base` (not following symlinks, leaving out masked paths and not
    /// entering `.git`), returning `(path relative to base, is_dir)` for at most `max_entries` entries,
    /// and whether the walk stopped early. Every directory is opened beneath `base` without
    /// following symlinks, so one swapped for a symlink during the walk is skipped, not entered.
    pub fn walk(
        &self,
        base: &Path,
        max_entries: usize,
    ) -> Result<(Vec<(PathBuf, bool)>, bool), FsDenied> {
        let shown = base.to_path_buf();
        let hidden = self.hidden.clone();
        hidden.check(base)?;
        self.run(move || {
            let base_fd = open_dir(
                nix::fcntl::AT_FDCWD,
                &shown,
                ResolveFlag::RESOLVE_NO_MAGICLINKS,
            )
            .map_err(|e| io_denied(&shown, e, Access::Read))?;
            let real_base = opened_path(&base_fd, &shown);
            hidden.check(&real_base)?;
            let beneath = ResolveFlag::RESOLVE_BENEATH
                | ResolveFlag::RESOLVE_NO_SYMLINKS
                | ResolveFlag::RESOLVE_NO_MAGICLINKS;
            let mut out = Vec::new();
            let mut stack = vec![PathBuf::new()];
            while let Some(relative) = stack.pop() {
                if hidden.is_masked(&real_base.join(&relative)) {
                    continue;
                }
                let dir = if relative.as_os_str().is_empty() {
                    base_fd.try_clone().map_err(|e| io_error(&shown, &e))?
                } else {
                    match open_dir(base_fd.as_fd(), &relative, beneath) {
                        Ok(fd) => fd,
                        Err(_) => continue,
                    }
                };
                let Ok(entries) = std::fs::read_dir(format!("/proc/self/fd/{}", dir.as_raw_fd()))
                else {
                    continue;
                };
                let mut names: Vec<(PathBuf, bool)> = entries
                    .flatten()
                    .map(|e| {
                        let is_dir = e.file_type().map(|t| t.is_dir()).unwrap_or(false);
                        (relative.join(e.file_name()), is_dir)
                    })
                    .collect();
                names.sort();
                for (path, is_dir) in names.into_iter().rev() {
                    if hidden.is_masked(&real_base.join(&path)) {
                        continue;
                    }
                    if out.len() >= max_entries {
                        return Ok((out, true));
                    }
                    if is_dir && path.file_name().is_some_and(|n| n != ".git") {
                        stack.push(path.clone());
                    }
                    out.push((path, is_dir));
                }
            }
            out.sort();
            Ok((out, false))
        })
    }

    /// Lists a directory: `(name, is_dir)` sorted by name, masked entries left out. Refuses
    /// masked directories and `/proc`.
    pub fn list_dir(&self, path: &Path) -> Result<Vec<(String, bool)>, FsDenied> {
        let shown = path.to_path_buf();
        let hidden = self.hidden.clone();
        hidden.check(path)?;
        self.run(move || {
            let fd = open_dir(
                nix::fcntl::AT_FDCWD,
                &shown,
                ResolveFlag::RESOLVE_NO_MAGICLINKS,
            )
            .map_err(|e| io_denied(&shown, e, Access::Read))?;
            let real = opened_path(&fd, &shown);
            hidden.check(&real)?;
            let mut out = Vec::new();
            let entries = std::fs::read_dir(format!("/proc/self/fd/{}", fd.as_raw_fd()))
                .map_err(|e| io_error(&shown, &e))?;
            for entry in entries.flatten() {
                if hidden.is_masked(&real.join(entry.file_name())) {
                    continue;
                }
                let is_dir = entry.file_type().map(|t| t.is_dir()).unwrap_or(false);
                out.push((entry.file_name().to_string_lossy().into_owned(), is_dir));
            }
            out.sort();
            Ok(out)
        })
    }
}

/// Opens a directory for listing; a FIFO or other non-directory fails at once (`ENOTDIR`).
fn open_dir<Fd: std::os::fd::AsFd>(
    at: Fd,
    path: &Path,
    resolve: ResolveFlag,
) -> nix::Result<OwnedFd> {
    openat2(
        at,
        path,
        OpenHow::new()
            .flags(OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC)
            .resolve(resolve),
    )
}
