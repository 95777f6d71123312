//! bridle's sandbox: the only crate that talks to the kernel about confinement, and the only
//! crate allowed `unsafe` (in `sys`, the seccomp installer, fault injection and taking
//! ownership of a descriptor received by the relay, each block with a `// SAFETY:` comment).
//!
//! It owns: probing the host ([`mod@probe`]), deciding which mechanism provides each guarantee a
//! [`bridle_policy::SandboxSpec`] requires ([`assess`]), and launching commands under that spec
//! ([`Sandbox`], [`launcher_main`]): user, mount, PID, network and IPC namespaces, a read-only
//! mount view with writable and protected binds, Landlock, seccomp, capabilities dropped,
//! no_new_privs, rlimits, closed descriptors and a filtered environment, verified from inside
//! before the command is exec'd.
//!
//! What it must never do: run a command with less confinement than its spec requires. A
//! guarantee with no mechanism on this host is a [`Refusal`], never a warning. Landlock and
//! seccomp are per-thread: the launcher applies them in the single-threaded command process
//! right before exec, never in the long-lived bridle process.
//!
//! Limits: see the module docs of [`mounts`], [`landlock_rules`] and [`seccomp`].

#![warn(missing_docs)]

pub mod assess;
pub mod cgroup;
pub mod confined_fs;
mod error;
#[cfg(feature = "test-support")]
pub mod fault;
pub mod landlock_rules;
pub mod launcher;
pub mod mounts;
pub mod net_watch;
pub mod privileges;
pub mod probe;
pub mod real_path;
pub mod relay;
pub mod seccomp;
pub mod supervisor;
mod sys;
pub mod tty;

/// Whether `BRIDLE_HOST_LACKS` (comma-separated) declares that this host lacks `feature`: a
/// kernel-dependent test then checks the rest instead of failing.
#[cfg(test)]
fn host_lacks(feature: &str) -> bool {
    std::env::var("BRIDLE_HOST_LACKS").is_ok_and(|v| v.split(',').any(|f| f.trim() == feature))
}

pub use assess::{Assessment, GuaranteeStatus, Mechanism, MechanismPlan};
pub use error::SandboxError;
pub use launcher::{
    Background, Controller, ExecEvents, ExecFailure, Finished, LAUNCHER_SUBCOMMAND, Launch,
    Outcome, Refusal, Running, Sandbox, Spawned, launcher_main,
};
pub use mounts::{Inspection, Quarantined};
pub use probe::{HostProbe, PINNED_LANDLOCK_ABI, probe};
pub use supervisor::{ExecObserver, ExecOutcome, ExecRecord};
