//! What the parent and the launcher say to each other.
//!
//! The parent writes one JSON [`LaunchConfig`] on the config pipe (fd 3 in the launcher) and
//! closes it. The launcher (and the processes it forks) write lines on the status pipe (fd 4),
//! which is close-on-exec everywhere, so it reaches end-of-file exactly when the command has
//! been exec'd or everyone has exited:
//!
//! - `ready\t<json report>`: confinement applied and verified from inside; exec follows;
//! - `fail\t<G-code>\t<cause>`: the sandbox could not be established; the command never ran;
//! - `exec-failed\t<exit code>\t<cause>`: confined, but the command itself could not be exec'd.
//!
//! When the spec has command rules, the launcher also gets the exec supervisor's channel (fd
//! 5, see [`crate::supervisor::record`]).
//!
//! The parent never infers a launcher failure from the command's exit status or stderr.

use std::path::PathBuf;

use bridle_policy::{Guarantee, SandboxSpec};
use serde::{Deserialize, Serialize};

use crate::assess::MechanismPlan;
use crate::mounts::MountPlan;

/// The launcher's fd for the config pipe.
pub const CONFIG_FD: i32 = 3;
/// The launcher's fd for the status pipe.
pub const STATUS_FD: i32 = 4;
/// The launcher's fd for the relay channel to bridle's proxy (network `allow-list` only; see
/// [`crate::relay`]).
pub const RELAY_FD: i32 = 5;
/// The launcher's fd for the exec supervisor's channel to bridle (a stream socket), when the
/// spec has command rules; init keeps it, the command never has it.
pub const SUPERVISOR_FD: i32 = 6;

/// Everything the launcher needs.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LaunchConfig {
    /// The spec being enforced.
    pub spec: SandboxSpec,
    /// What to apply.
    pub mechanisms: MechanismPlan,
    /// The mount view (when `mechanisms.mount_view`).
    pub mounts: MountPlan,
    /// The command.
    pub argv: Vec<String>,
    /// The working directory (must be visible inside).
    pub cwd: PathBuf,
    /// The parent's pid, to detect having been orphaned before the parent-death signal was set.
    pub parent_pid: i32,
    /// The parent's uid and gid (mapped to themselves in the user namespace).
    pub uid: u32,
    /// See `uid`.
    pub gid: u32,
    /// The `cgroup.procs` file of the run's pids cgroup, which the launcher joins first.
    pub cgroup_procs: Option<PathBuf>,
    /// What the launcher set up short of the plan, where that is not a guarantee (a cache path
    /// left read-only, say); reported with `ready`.
    #[serde(default)]
    pub notes: Vec<String>,
    /// The exec supervisor, when the spec has command rules (its channel is at
    /// [`SUPERVISOR_FD`]).
    #[serde(default)]
    pub supervisor: Option<crate::supervisor::SupervisorConfig>,
    /// The launcher starts a new session without a controlling terminal (see
    /// [`super::Launch::keeping_terminal`]). No serde default: a config without it is refused
    /// rather than read as "keep the caller's terminal".
    pub new_session: bool,
}

/// What was enforced, reported with `ready`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadyReport {
    /// The mechanisms that were applied.
    pub mechanisms: MechanismPlan,
    /// The Landlock ABI the rules were built for, when Landlock was applied.
    pub landlock_abi: Option<i32>,
    /// The pid of the command in the parent's PID namespace is not known to the launcher; this
    /// is the command's pid as the launcher saw it.
    pub command_pid_inside: i32,
    /// What was set up short of the plan where that is not a guarantee (see
    /// [`LaunchConfig::notes`]).
    #[serde(default)]
    pub notes: Vec<String>,
}

/// A parsed status line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StatusLine {
    /// Confinement verified.
    Ready(ReadyReport),
    /// Setup failed.
    Fail {
        /// The guarantee that could not be established.
        guarantee: Option<Guarantee>,
        /// Why.
        cause: String,
    },
    /// The command could not be exec'd.
    ExecFailed {
        /// The exit status to use (126 or 127).
        code: i32,
        /// Why.
        cause: String,
    },
}

impl StatusLine {
    /// Renders the line (without the newline). Tabs and newlines in causes are replaced.
    pub fn render(&self) -> String {
        let clean = |s: &str| s.replace(['\t', '\n'], " ");
        match self {
            StatusLine::Ready(report) => format!(
                "ready\t{}",
                serde_json::to_string(report).unwrap_or_default()
            ),
            StatusLine::Fail { guarantee, cause } => {
                format!(
                    "fail\t{}\t{}",
                    guarantee.map_or("-", |g| g.code()),
                    clean(cause)
                )
            }
            StatusLine::ExecFailed { code, cause } => {
                format!("exec-failed\t{code}\t{}", clean(cause))
            }
        }
    }

    /// Parses a line; `None` for anything malformed.
    pub fn parse(line: &str) -> Option<StatusLine> {
        let mut parts = line.splitn(3, '\t');
        match (parts.next()?, parts.next(), parts.next()) {
            ("ready", Some(json), None) => serde_json::from_str(json).ok().map(StatusLine::Ready),
            ("fail", Some(code), Some(cause)) => Some(StatusLine::Fail {
                guarantee: code.parse().ok(),
                cause: cause.to_owned(),
            }),
            ("exec-failed", Some(code), Some(cause)) => Some(StatusLine::ExecFailed {
                code: code.parse().ok()?,
                cause: cause.to_owned(),
            }),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_lines_round_trip() {
        for line in [
            StatusLine::Fail {
                guarantee: Some(Guarantee::FsWrite),
                cause: "no\tmount\nnamespace".into(),
            },
            StatusLine::Fail {
                guarantee: None,
                cause: "x".into(),
            },
            StatusLine::ExecFailed {
                code: 127,
                cause: "command not found: frob".into(),
            },
        ] {
            let parsed = StatusLine::parse(&line.render()).unwrap();
            match (&line, &parsed) {
                (
                    StatusLine::Fail { guarantee: a, .. },
                    StatusLine::Fail {
                        guarantee: b,
                        cause,
                    },
                ) => {
                    assert_eq!(a, b);
                    assert!(!cause.contains('\t') && !cause.contains('\n'));
                }
                _ => assert_eq!(line, parsed),
            }
        }
    }

    #[test]
    fn malformed_lines_are_rejected() {
        for line in [
            "",
            "ready",
            "ready\tnot json",
            "fail\tG-FS-WRITE",
            "exec-failed\tx\ty",
            "hello\tworld",
        ] {
            assert_eq!(StatusLine::parse(line), None, "{line:?}");
        }
    }
}
