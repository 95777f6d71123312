//! bridle's consumers: the tools an agent uses to touch the machine, all under the one
//! `SandboxSpec` the policy plans — the one-shot `bash` tool, the file tools, `grep`, the
//! persistent terminal and the subprocess manager — plus the approvals seam (which reports each
//! call's decisions to an observer) and the tools' model-facing schemas. The pre-execute command
//! rules are decided in the policy crate ([`bridle_policy::Plan::decide_bash`]).
//!
//! Kept apart, so a remote implementation can replace the local one without touching the tools:
//! the interface ([`approvals::Approvals`], [`run::Runner`]), the local implementation
//! ([`run::SandboxRunner`], which launches through `bridle-sandbox`), and the model-facing tools
//! ([`bash_tool`]).
//!
//! What it must never do: run anything outside the sandbox launcher, or turn a denial back into
//! an allow. `#![forbid(unsafe_code)]`: every syscall lives in `bridle-sandbox`.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod approvals;
pub mod bash_tool;
mod error;
pub mod fs_tools;
pub mod git_dirs;
pub mod net;
pub mod output;
pub mod printable;
pub mod process;
pub mod run;
pub mod schemas;
pub mod supervised;
pub mod terminal;

pub use error::ExecError;
