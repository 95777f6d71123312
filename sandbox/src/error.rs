//! The one error type at the `sandbox` boundary.

use std::io;
use std::path::PathBuf;

/// Everything that can go wrong probing the host or confining a process. Messages are
/// lower-case and name the failing operation and its input.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SandboxError {
    /// Building the seccomp filter failed (a bug in the rule table, or an unsupported arch).
    #[error("building seccomp filter `{profile}`: {message}")]
    SeccompBuild {
        /// Which filter.
        profile: String,
        /// What the compiler said.
        message: String,
    },
    /// Installing the seccomp filter failed.
    #[error("installing seccomp filter `{profile}`: {source}")]
    SeccompInstall {
        /// Which filter.
        profile: String,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// Building or applying the Landlock ruleset failed, or it was not fully enforced.
    #[error("landlock: {stage}: {message}")]
    Landlock {
        /// Which step.
        stage: String,
        /// What went wrong.
        message: String,
    },
    /// A syscall failed.
    #[error("{call} failed: {source}")]
    Syscall {
        /// The syscall and its key argument, e.g. `unshare(CLONE_NEWUSER)`.
        call: String,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// A path could not be opened or prepared.
    #[error("{what} `{}`: {source}", path.display())]
    Path {
        /// What was being done, e.g. `opening writable root`.
        what: &'static str,
        /// The path.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },
}
