//! Why a confined file operation failed, and who refused it: the sandbox's rules, a symlink,
//! the file's owner and mode, or the OS.

use std::path::{Path, PathBuf};

/// Why a file operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FsDenied {
    /// The path is outside every writable root (writes).
    #[error("`{0}` is outside the writable roots")]
    OutsideWritableRoots(PathBuf),
    /// The path is in a masked path.
    #[error("`{0}` is in a masked path")]
    Masked(PathBuf),
    /// Resolution met a symlink where none is allowed, or left the root.
    #[error(
        "`{0}` goes through a symlink or leaves its root; file tools do not follow symlinks when writing"
    )]
    Symlink(PathBuf),
    /// The kernel (Landlock) refused.
    #[error("`{0}`: denied by the sandbox (Landlock)")]
    Landlock(PathBuf),
    /// The owner and mode of the file, or (for a file to be created) of the directory it would
    /// be created in, refuse it to root without capabilities, which is what the sandbox leaves
    /// root (commands and file tools alike).
    #[error(
        "`{path}`: permission denied by the owner and mode of {}: the sandbox takes root's capabilities away (from commands and file tools alike), so root gets only what the permission bits give it",
        refused_by.as_ref().map_or("the file".to_owned(), |d| format!("`{}`, the directory it would be created in", d.display()))
    )]
    RootWithoutCapabilities {
        /// The path.
        path: PathBuf,
        /// The directory whose mode refused creating `path` in it, when that is what refused.
        refused_by: Option<PathBuf>,
    },
    /// The path is in the host's `/proc`.
    #[error(
        "`{0}` is in /proc, which the file tools do not read (it would show the host's processes, sockets and keys); use `bash`, whose commands see the sandbox's own /proc"
    )]
    HostProc(PathBuf),
    /// The path is not a regular file (a FIFO, socket or device).
    #[error(
        "`{path}` is a {kind}, not a regular file; the file tools read and write regular files only"
    )]
    NotRegular {
        /// The path.
        path: PathBuf,
        /// What it is: "FIFO", "socket", "character device", ...
        kind: &'static str,
    },
    /// The file has more than one name, and the caller refused writing such a file.
    #[error(
        "`{path}` has {links} names (hard links); a path rule may cover another of them, so it is not written without approval"
    )]
    HardLinked {
        /// The path.
        path: PathBuf,
        /// Its link count.
        links: u64,
    },
    /// Any other OS error.
    #[error("`{path}`: {message}")]
    Io {
        /// The path.
        path: PathBuf,
        /// The OS error text.
        message: String,
    },
    /// The worker is gone.
    #[error("the confined file worker is not running")]
    WorkerGone,
    /// The worker could not be confined, so it never started (the file tools refuse).
    #[error("{0}")]
    Unavailable(String),
}

pub(super) fn io_denied(path: &Path, err: nix::errno::Errno, access: Access) -> FsDenied {
    match err {
        nix::errno::Errno::ELOOP | nix::errno::Errno::EXDEV => {
            FsDenied::Symlink(path.to_path_buf())
        }
        nix::errno::Errno::EACCES => permission_denied(path, access),
        other => FsDenied::Io {
            path: path.to_path_buf(),
            message: std::io::Error::from(other).to_string(),
        },
    }
}

/// What an operation needed of its path, to tell who refused it.
#[derive(Debug, Clone, Copy)]
pub(super) enum Access {
    Read,
    Write,
}

/// Who refused `access` to `path` with `EACCES`, asked on the worker (its credentials): the
/// file's owner and mode, or Landlock. `access(2)` checks only the former (Landlock takes no
/// part in it), with the thread's own credentials under `AT_EACCESS`; for a missing file, the
/// nearest existing directory must be writable.
pub(super) fn permission_denied(path: &Path, access: Access) -> FsDenied {
    use nix::errno::Errno;
    let refused_by =
        match crate::privileges::unconfined_access(path, matches!(access, Access::Write)) {
            Err((Errno::EACCES, at)) => Some(at),
            _ => None,
        };
    match (refused_by, nix::unistd::geteuid().is_root()) {
        (None, _) => FsDenied::Landlock(path.to_path_buf()),
        (Some(at), true) => FsDenied::RootWithoutCapabilities {
            path: path.to_path_buf(),
            refused_by: (at != path).then_some(at),
        },
        (Some(_), false) => FsDenied::Io {
            path: path.to_path_buf(),
            message: std::io::Error::from(Errno::EACCES).to_string(),
        },
    }
}

pub(super) fn io_error(path: &Path, e: &std::io::Error) -> FsDenied {
    FsDenied::Io {
        path: path.to_path_buf(),
        message: e.to_string(),
    }
}
