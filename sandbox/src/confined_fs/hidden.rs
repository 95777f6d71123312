//! What the worker refuses to read whatever Landlock says: masked paths and the host's `/proc`,
//! compared with the path the kernel actually opened.

use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use super::denied::FsDenied;

/// The host's `/proc`: refused by the confined file tools (commands see their own).
pub(super) const HOST_PROC: &str = "/proc";

/// The path of the file `fd` refers to, as the kernel opened it.
pub(super) fn opened_path(fd: &OwnedFd, fallback: &Path) -> PathBuf {
    std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()))
        .unwrap_or_else(|_| fallback.to_path_buf())
}

/// What the worker refuses to read whatever Landlock says: masked paths (in every form) and,
/// when confined, the host's `/proc`.
#[derive(Debug, Clone)]
pub(super) struct Hidden {
    pub(super) masked: Vec<PathBuf>,
    pub(super) proc: bool,
}

impl Hidden {
    pub(super) fn check(&self, path: &Path) -> Result<(), FsDenied> {
        if self.proc && path.starts_with(HOST_PROC) {
            Err(FsDenied::HostProc(path.to_path_buf()))
        } else if self.masked.iter().any(|m| path.starts_with(m)) {
            Err(FsDenied::Masked(path.to_path_buf()))
        } else {
            Ok(())
        }
    }

    pub(super) fn is_masked(&self, path: &Path) -> bool {
        self.masked.iter().any(|m| path.starts_with(m))
    }
}
