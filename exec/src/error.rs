//! The one error type at the `exec` boundary.

use std::io;

/// What can go wrong running a tool, apart from the tool's own failures (which are results the
/// model reads, not errors).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ExecError {
    /// Reading a command's output failed.
    #[error("reading the output of `{command}`: {source}")]
    ReadOutput {
        /// The command.
        command: String,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// Writing a command's stdin failed.
    #[error("writing the input of `{command}`: {source}")]
    WriteInput {
        /// The command.
        command: String,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// A job could not be started (refused by the sandbox, or not executable).
    #[error("starting `{command}`: {reason}")]
    Spawn {
        /// The command.
        command: String,
        /// Why.
        reason: String,
    },
    /// Planning a wider spec for an approved escalation failed.
    #[error("planning the escalated sandbox: {0}")]
    Replan(String),
    /// The network proxy could not start.
    #[error("starting the network proxy: {source}")]
    ProxyStart {
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// The relay listener of a sandbox could not be received or served.
    #[error("connecting the sandbox to the network proxy: {source}")]
    ProxyAttach {
        /// The OS error.
        #[source]
        source: io::Error,
    },
}
