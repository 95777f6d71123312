//! bridle's consumers: the tools an agent uses to touch the machine, all under the one
//! `SandboxSpec` the policy plans — the one-shot `bash` tool, the file tools, `grep`, the
//! persistent terminal and the subprocess manager — plus the approvals seam (which reports each
//! call's decisions to an observer) and the tools' model-facing schemas. The pre-execute command
//! rules are decided in the policy crate ([`bridle_policy::Plan::decide_bash`]).
//!
//! Kept apart, so a remote implementation can replace the local one without touching the tools:
//! the interfaces ([`tool::Tool`], [`backend::FileSystem`], [`backend::Spawner`],
//! [`approvals::Answerer`]), the local implementations ([`backend::LocalFs`],
//! [`backend::LocalSpawner`], which launch through `bridle-sandbox`), the tool values
//! ([`bash_tool`], [`fs_tools`], [`terminal`]) and the one pipeline every call goes through
//! ([`pipeline::Pipeline`]: validate, rules, approval, guards, execute, record).
//!
//! What it must never do: run anything outside the sandbox launcher, or turn a denial back into
//! an allow. `#![forbid(unsafe_code)]`: every syscall lives in `bridle-sandbox`.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod approvals;
pub mod attribution;
pub mod backend;
pub mod bash_tool;
pub mod editor;
mod error;
pub mod fs_tools;
pub mod git_dirs;
pub mod net;
pub mod output;
pub mod pipeline;
pub mod printable;
pub mod process;
pub mod run;
pub mod schemas;
pub mod supervised;
pub mod terminal;
pub mod tool;

pub use error::ExecError;
