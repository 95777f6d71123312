//! bridle's policy: pure decisions and data.
//!
//! This crate owns the policy vocabulary (sandbox mode, approval policy, network, rules,
//! guarantees), the profile format and its layering, and planning: turning an effective policy
//! plus a session's facts into a plain-data [`SandboxSpec`] and answering the tool layer's
//! questions ([`Plan::decide_write`], [`Plan::decide_exec`], [`Plan::decide_bash`],
//! [`Plan::decide_connect`]).
//!
//! What it must never do: make syscalls, spawn processes, or touch the filesystem beyond reading
//! profile text ([`source`] is the only module that does). The `sandbox` crate enforces what this
//! crate decides; `exec` and `agent` consult it.
//!
//! Threat model: profile files are written by deployers and trusted to widen; configuration
//! found inside the workspace (which an agent could have written) may only tighten. Parsing is
//! bounded (size cap, YAML budget) and total: malformed input yields an error naming
//! `file:line:column`, never a panic.
//!
//! Limitations: path decisions are lexical; callers canonicalise paths (symlinks resolved)
//! before asking, and the kernel enforces the same roots regardless.
//!
//! ```
//! use bridle_policy::{load, LoadRequest, Overrides, ShippedOnly, Decision};
//!
//! let policy = load(&ShippedOnly, &LoadRequest {
//!     profile: "ci-locked".into(),
//!     overrides: Overrides::default(),
//!     workspace_layer: None,
//! }).unwrap();
//! let git_push = policy.command_rules.iter().find(|r| r.id == "deny-git-push").unwrap();
//! assert_eq!(git_push.decision, Decision::Deny);
//! ```

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod agent;
pub mod cargo_config;
mod error;
pub mod git_config;
pub mod glob;
mod merge;
pub mod network;
mod origin;
mod parse;
mod plan;
mod policy;
mod raw;
pub mod rules;
pub mod shell;
pub mod source;
mod spec;
pub mod units;
mod vocab;

pub use agent::{AgentSection, ConfigNode, ConfigValue, PluginSetting, Preset};
pub use error::PolicyError;
pub use merge::{
    DEFAULT_CACHE_PATHS, DEFAULT_ENV_ALLOW, DEFAULT_ENV_SCRUB, DEFAULT_PROTECTED, EnvOverride,
    LoadRequest, MAX_EXTENDS_DEPTH, Overrides, check_workspace_layer, load,
};
pub use network::{AllowListSpec, NetList, RELAY_PORT};
pub use origin::{AccountHome, Origin, Sourced, XdgMoved};
pub use parse::parse_document;
pub use plan::{
    DecidedBy, EnvDecision, FoundPath, Plan, PlanContext, Verdict, cache_dir_for, env_decisions,
    normalize, plan,
};
pub use policy::{CacheHomePolicy, Entry, EnvironmentPolicy, Layer, LayerKind, Limits, Policy};
pub use raw::EnvInherit;
pub use rules::{CommandRule, PathRule};
pub use source::{FsProfileSource, ProfileSource, SHIPPED, ShippedOnly, SourceFile};
pub use spec::{
    CacheHomeSpec, DEFAULT_SPILL_SIZE, ResourceLimits, SESSION_SPILL_MULTIPLE, SandboxSpec,
    SeccompProfile,
};
pub use vocab::{
    ApprovalPolicy, CacheHome, Decision, Guarantee, Network, SandboxMode, UnixSockets,
};
