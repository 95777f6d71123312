//! The one error type at the `policy` boundary.

use std::io;
use std::path::PathBuf;

use crate::origin::Origin;

/// Everything that can go wrong loading, merging or planning a policy. Messages are lower-case,
/// name the offending input, and carry `file:line:column` where a location exists.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PolicyError {
    /// Reading a profile file failed.
    #[error("{file}: cannot read profile: {source}")]
    ReadProfile {
        /// The file.
        file: String,
        /// The I/O error.
        #[source]
        source: io::Error,
    },
    /// The profile file is larger than the size cap.
    #[error(
        "{file}: profile is larger than {limit} bytes (hint: profiles are small text files; is this the right file?)"
    )]
    ProfileTooLarge {
        /// The file.
        file: String,
        /// The cap in bytes.
        limit: usize,
    },
    /// The profile is not valid UTF-8.
    #[error("{file}:{line}:{column}: profile is not valid UTF-8 (hint: save it as UTF-8 text)")]
    ProfileNotUtf8 {
        /// The file.
        file: String,
        /// 1-based line of the first invalid byte.
        line: u64,
        /// 1-based column (in characters) of the first invalid byte.
        column: u64,
    },
    /// The YAML is malformed or does not fit the profile schema.
    #[error("{at}: {message}{}", hint_suffix(.hint))]
    ParseProfile {
        /// Where.
        at: Origin,
        /// What the parser said.
        message: String,
        /// What the user can do about it.
        hint: Option<String>,
    },
    /// `--profile NAME` or `extends: NAME` names no shipped profile.
    #[error(
        "unknown profile `{name}` (shipped profiles: {known}; a path must contain `/` or end in .yaml)"
    )]
    UnknownProfile {
        /// The name given.
        name: String,
        /// The shipped names.
        known: String,
    },
    /// `extends` chains loop.
    #[error("{at}: `extends` cycle: {chain}")]
    ExtendsCycle {
        /// The `extends` that closes the cycle.
        at: Origin,
        /// The chain, e.g. `a.yaml -> b.yaml -> a.yaml`.
        chain: String,
    },
    /// `extends` chains are too long.
    #[error("{at}: `extends` chain longer than {limit} profiles")]
    ExtendsTooDeep {
        /// The `extends` that went too deep.
        at: Origin,
        /// The maximum.
        limit: usize,
    },
    /// The base profile sets no mode.
    #[error(
        "{file}: profile sets no `mode` and extends nothing (hint: add `mode: workspace-write` or `extends: workspace-write`)"
    )]
    MissingMode {
        /// The file.
        file: String,
    },
    /// A value is well-formed YAML but not acceptable.
    #[error("{at}: `{key}`: {message}")]
    InvalidValue {
        /// Where.
        at: Origin,
        /// The key, dotted (e.g. `rules.commands[2].prefix`).
        key: String,
        /// Why.
        message: String,
    },
    /// A rule's example does not match it, or a counter-example does.
    #[error("{at}: rule `{rule}`: {which} `{example}` {outcome}")]
    RuleExample {
        /// Where the example is written.
        at: Origin,
        /// The rule id.
        rule: String,
        /// `example` or `counter-example`.
        which: &'static str,
        /// The example text.
        example: String,
        /// `does not match the rule` / `matches the rule`.
        outcome: &'static str,
    },
    /// Configuration from inside the workspace tries to widen the policy.
    #[error(
        "{at}: `{key}` in workspace configuration would widen the policy: {why} (workspace configuration may only tighten; put widening settings in a deployer profile)"
    )]
    WorkspaceLayerWidens {
        /// Where.
        at: Origin,
        /// The key.
        key: String,
        /// What it would widen.
        why: String,
    },
    /// The workspace or a writable root is a dangerous directory.
    #[error("refusing {what} `{}`: {why} (hint: choose a project directory; a deployer profile may set `allow_dangerous_workspace_root: true` to override)", path.display())]
    DangerousRoot {
        /// `workspace root` or `writable root`.
        what: &'static str,
        /// The path.
        path: PathBuf,
        /// Why it is refused.
        why: String,
    },
    /// bridle's state directory would be writable from inside the sandbox.
    #[error("refusing {what} `{}`: it contains bridle's state directory `{}`, which must stay outside every writable root", path.display(), state.display())]
    StateInsideWritableRoot {
        /// `workspace root` or `writable root`.
        what: &'static str,
        /// The root.
        path: PathBuf,
        /// The state directory.
        state: PathBuf,
    },
    /// bridle's temp directory would be writable from inside the sandbox.
    #[error("refusing {what} `{}`: it contains or lies inside bridle's temp directory `{}` (private temp dirs, cache homes, records of protected paths), which must stay outside every writable root", path.display(), base.display())]
    TempBaseInWritableRoot {
        /// `workspace root` or `writable root`.
        what: &'static str,
        /// The root.
        path: PathBuf,
        /// bridle's temp directory.
        base: PathBuf,
    },
    /// The workspace or a writable root lies in a pseudo filesystem (`/proc`, `/sys`, `/dev`).
    #[error("refusing {what} `{}`: it is inside `{}`, a kernel interface rather than a directory of files", path.display(), filesystem.display())]
    PseudoFilesystemRoot {
        /// `workspace root` or `writable root`.
        what: &'static str,
        /// The root.
        path: PathBuf,
        /// The pseudo filesystem's mount point.
        filesystem: PathBuf,
    },
    /// `--env NAME` names a variable the policy scrubs.
    #[error(
        "refusing `--env {name}`: the profile scrubs it as a secret (pattern `{pattern}` at {at}); set what the sandbox needs under another name, or change the profile's `environment.scrub`"
    )]
    EnvScrubbed {
        /// The variable.
        name: String,
        /// The scrub pattern that matches it.
        pattern: String,
        /// Where the pattern was written.
        at: Origin,
    },
    /// A path given to the planner or a decision function is not absolute.
    #[error("path `{}` must be absolute", path.display())]
    RelativePath {
        /// The path.
        path: PathBuf,
    },
}

fn hint_suffix(hint: &Option<String>) -> String {
    match hint {
        Some(h) => format!(" (hint: {h})"),
        None => String::new(),
    }
}
