//! Layering: built-in defaults, then the `extends` chain (base first), then command-line flags,
//! then workspace configuration (tighten-only).
//!
//! Combine rules, for every key:
//! - scalars (`mode`, `approval`, `network`, `unix_sockets`, `allow_dangerous_workspace_root`, each limit,
//!   `environment.inherit`): a layer that sets the key replaces the value below;
//! - lists (`readable_roots`, `writable_roots`, `protected_paths`, `masked_paths`,
//!   `environment.allow`, `environment.scrub`, `accept_missing`, `rules.commands`,
//!   `rules.paths`): a plain list appends; `{append, remove}` appends and removes entries
//!   (removing an entry that is not there is an error); `{replace}` starts over. Nothing else
//!   replaces a list;
//! - mappings (`limits`, `environment`, `environment.set`, `rules`): merged key by key, never
//!   replaced as a whole;
//! - `description`, `tested_kernel_abi`, `extends`: taken from the layer that sets them;
//! - `agent`: see [`crate::agent`] (`preset` a scalar, `plugins` merged plugin by plugin,
//!   `tools.remove` a list).
//!
//! A workspace layer may only tighten: stricter scalars, lower limits, appended protected or
//! masked paths, scrub patterns, `ask`/`deny` rules, and removals from writable or readable
//! roots, the environment allow-list and `accept_missing`. Anything else names the key and fails.

mod apply;
mod rules;

use std::collections::BTreeMap;

use serde_saphyr::Location;

use crate::error::PolicyError;
use crate::origin::{Origin, Sourced};
use crate::parse::parse_layer;
use crate::plan::normalize;
use crate::policy::{CacheHomePolicy, EnvironmentPolicy, Layer, LayerKind, Limits, Policy};
use crate::raw::{EnvInherit, RawProfile};
use crate::source::{ProfileSource, SourceFile};
use crate::spec::DEFAULT_SPILL_SIZE;
use crate::vocab::{ApprovalPolicy, CacheHome, Network, SandboxMode, UnixSockets};

/// The longest `extends` chain accepted.
pub const MAX_EXTENDS_DEPTH: usize = 16;

/// Protected paths every policy starts with.
pub const DEFAULT_PROTECTED: &[&str] = &[".git/hooks", ".git/config", ".bridle"];

/// The cache directories tools write (`cache_home.paths` by default): package caches and the
/// per-user install prefix, never a directory that holds credentials.
pub const DEFAULT_CACHE_PATHS: &[&str] = &[
    "~/.cache",
    "~/.npm",
    "~/.cargo/registry",
    "~/.cargo/git",
    "~/.local",
    "~/go/pkg/mod",
];

/// Environment variables passed by default (name globs).
pub const DEFAULT_ENV_ALLOW: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "TERM",
    "COLORTERM",
    "LANG",
    "LANGUAGE",
    "LC_*",
    "TZ",
    "EDITOR",
    "VISUAL",
    "PAGER",
    "NO_COLOR",
    "CLICOLOR",
    "FORCE_COLOR",
    "CARGO_HOME",
    "RUSTUP_HOME",
    "RUSTUP_TOOLCHAIN",
    "GOPATH",
    "GOROOT",
    "GOCACHE",
    "JAVA_HOME",
    "VIRTUAL_ENV",
    "PYTHONPATH",
];

/// Environment variable names never passed by default (name globs), even when allowed.
pub const DEFAULT_ENV_SCRUB: &[&str] = &[
    "*TOKEN*",
    "*SECRET*",
    "*PASSWORD*",
    "*PASSWD*",
    "*CREDENTIAL*",
    "*API_KEY*",
    "*_KEY",
    "*PRIVATE*",
    "AWS_*",
    "AZURE_*",
    "GOOGLE_APPLICATION_CREDENTIALS",
    "SSH_AUTH_SOCK",
    "GPG_AGENT_INFO",
    "DBUS_SESSION_BUS_ADDRESS",
    "KRB5CCNAME",
];

/// Command-line settings applied above the profile chain.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Overrides {
    /// `--mode`.
    pub mode: Option<SandboxMode>,
    /// `--network`.
    pub network: Option<Network>,
    /// `--allow-write`, repeatable.
    pub allow_write: Vec<String>,
    /// `--timeout`, in whole seconds (rounded up): lowers `limits.wall_time`, the wall-clock
    /// limit of every sandboxed command, for this invocation (never raises it).
    pub timeout_secs: Option<u64>,
    /// `--env NAME[=VALUE]`, repeatable: pass the host's `NAME`, or set it. A name the
    /// effective policy scrubs is refused ([`PolicyError::EnvScrubbed`]).
    pub env: Vec<EnvOverride>,
}

/// One `--env`: pass the host's value of `name` (`value` is `None`), or set it to `value`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvOverride {
    /// The variable's name.
    pub name: String,
    /// The value to set, or `None` to pass the host's.
    pub value: Option<String>,
}

/// The origin of every `--env` entry.
const ENV_FLAG: &str = "--env";

/// What to load.
#[derive(Debug, Clone)]
pub struct LoadRequest {
    /// `--profile`: a shipped name or a path.
    pub profile: String,
    /// Command-line overrides.
    pub overrides: Overrides,
    /// The workspace's own configuration (e.g. `WS/.bridle/profile.yaml`), if present.
    pub workspace_layer: Option<SourceFile>,
}

/// Loads and merges a policy.
pub fn load(source: &dyn ProfileSource, request: &LoadRequest) -> Result<Policy, PolicyError> {
    let chain = resolve_chain(source, &request.profile)?;
    let mut policy = builtin(&request.profile);
    for (file, raw) in chain.into_iter().rev() {
        let root = raw.extends.is_none();
        if root && raw.mode.is_none() {
            return Err(PolicyError::MissingMode { file: file.display });
        }
        policy.layers.push(Layer {
            name: file.display.clone(),
            path: file.path.clone(),
            kind: LayerKind::Profile,
        });
        Applier {
            file: &file.display,
            kind: LayerKind::Profile,
        }
        .apply(&mut policy, raw)?;
    }
    apply_overrides(&mut policy, &request.overrides)?;
    if let Some(file) = &request.workspace_layer {
        let raw = parse_layer(file)?;
        policy.layers.push(Layer {
            name: file.display.clone(),
            path: file.path.clone(),
            kind: LayerKind::Workspace,
        });
        Applier {
            file: &file.display,
            kind: LayerKind::Workspace,
        }
        .apply(&mut policy, raw)?;
    }
    validate(&policy)?;
    check_env_flags(&policy)?;
    Ok(policy)
}

/// Validates a workspace layer against an effective policy without keeping the result: used by
/// `bridle policy check` on a `.bridle/profile.yaml`.
pub fn check_workspace_layer(base: &Policy, file: &SourceFile) -> Result<Policy, PolicyError> {
    let mut policy = base.clone();
    let raw = parse_layer(file)?;
    Applier {
        file: &file.display,
        kind: LayerKind::Workspace,
    }
    .apply(&mut policy, raw)?;
    validate(&policy)?;
    Ok(policy)
}

fn resolve_chain(
    source: &dyn ProfileSource,
    profile: &str,
) -> Result<Vec<(SourceFile, RawProfile)>, PolicyError> {
    let mut chain: Vec<(SourceFile, RawProfile)> = Vec::new();
    let mut current = source.resolve(profile, None)?;
    loop {
        let raw = parse_layer(&current)?;
        let extends = raw.extends.clone();
        chain.push((current, raw));
        let Some(extends) = extends else {
            return Ok(chain);
        };
        let (last, _) = chain
            .last()
            .ok_or_else(|| unreachable_empty_chain(profile))?;
        let at = origin_in(&last.display, &extends.referenced);
        if chain.len() >= MAX_EXTENDS_DEPTH {
            return Err(PolicyError::ExtendsTooDeep {
                at,
                limit: MAX_EXTENDS_DEPTH,
            });
        }
        let next = source.resolve(&extends.value, Some(last)).map_err(|err| {
            PolicyError::InvalidValue {
                at: at.clone(),
                key: "extends".to_owned(),
                message: err.to_string(),
            }
        })?;
        // Lexically normalised, so `sub/../sub/a.yaml` is recognised as `sub/a.yaml`.
        let identity = |f: &SourceFile| {
            f.path
                .as_ref()
                .map_or_else(|| f.display.clone(), |p| normalize(p).display().to_string())
        };
        if chain.iter().any(|(f, _)| identity(f) == identity(&next)) {
            let mut names: Vec<String> = chain.iter().map(|(f, _)| f.display.clone()).collect();
            names.push(next.display.clone());
            return Err(PolicyError::ExtendsCycle {
                at,
                chain: names.join(" -> "),
            });
        }
        current = next;
    }
}

fn unreachable_empty_chain(profile: &str) -> PolicyError {
    PolicyError::InvalidValue {
        at: Origin::Builtin,
        key: "extends".into(),
        message: format!("empty chain for `{profile}`"),
    }
}

fn builtin(profile: &str) -> Policy {
    let strings = |items: &[&str]| {
        items
            .iter()
            .map(|s| Sourced::builtin((*s).to_owned()))
            .collect()
    };
    Policy {
        profile: profile.to_owned(),
        layers: Vec::new(),
        description: None,
        tested_kernel_abi: None,
        mode: Sourced::builtin(SandboxMode::ReadOnly),
        approval: Sourced::builtin(ApprovalPolicy::Ask),
        network: Sourced::builtin(Network::Off),
        network_hosts: crate::network::NetworkHosts::default(),
        unix_sockets: Sourced::builtin(UnixSockets::Block),
        readable_roots: strings(&["/"]),
        writable_roots: Vec::new(),
        protected_paths: strings(DEFAULT_PROTECTED),
        masked_paths: Vec::new(),
        limits: Limits {
            processes: Sourced::builtin(None),
            memory: Sourced::builtin(None),
            file_size: Sourced::builtin(None),
            open_files: Sourced::builtin(None),
            cpu_time: Sourced::builtin(None),
            wall_time: Sourced::builtin(None),
            command_timeout: Sourced::builtin(Some(120)),
            command_timeout_max: Sourced::builtin(Some(600)),
            spill_size: Sourced::builtin(Some(DEFAULT_SPILL_SIZE)),
        },
        environment: EnvironmentPolicy {
            inherit: Sourced::builtin(EnvInherit::AllowList),
            allow: strings(DEFAULT_ENV_ALLOW),
            scrub: strings(DEFAULT_ENV_SCRUB),
            set: BTreeMap::new(),
        },
        cache_home: CacheHomePolicy {
            mode: Sourced::builtin(CacheHome::PerWorkspace),
            paths: strings(DEFAULT_CACHE_PATHS),
        },
        accept_missing: Vec::new(),
        allow_dangerous_workspace_root: Sourced::builtin(false),
        command_rules: Vec::new(),
        path_rules: Vec::new(),
        agent: crate::agent::AgentSection::default(),
    }
}

fn apply_overrides(policy: &mut Policy, overrides: &Overrides) -> Result<(), PolicyError> {
    let any = overrides.mode.is_some()
        || overrides.network.is_some()
        || !overrides.allow_write.is_empty()
        || !overrides.env.is_empty()
        || overrides.timeout_secs.is_some();
    if !any {
        return Ok(());
    }
    policy.layers.push(Layer {
        name: "command line".into(),
        path: None,
        kind: LayerKind::Flags,
    });
    if let Some(mode) = overrides.mode {
        policy.mode = Sourced::new(mode, Origin::flag("--mode"));
    }
    if let Some(network) = overrides.network {
        policy.network = Sourced::new(network, Origin::flag("--network"));
    }
    for dir in &overrides.allow_write {
        let origin = Origin::flag("--allow-write");
        check_path_entry(dir).map_err(|message| PolicyError::InvalidValue {
            at: origin.clone(),
            key: "writable_roots".into(),
            message,
        })?;
        if !policy.writable_roots.iter().any(|r| &r.value == dir) {
            policy
                .writable_roots
                .push(Sourced::new(dir.clone(), origin));
        }
    }
    if let Some(secs) = overrides.timeout_secs {
        let wall = &mut policy.limits.wall_time;
        if wall.value.is_none_or(|w| secs < w) {
            *wall = Sourced::new(Some(secs), Origin::flag("--timeout"));
        }
    }
    for item in &overrides.env {
        let origin = Origin::flag(ENV_FLAG);
        match &item.value {
            Some(value) => {
                policy
                    .environment
                    .set
                    .insert(item.name.clone(), Sourced::new(value.clone(), origin));
            }
            None => policy
                .environment
                .allow
                .push(Sourced::new(item.name.clone(), origin)),
        }
    }
    Ok(())
}

/// A variable named by `--env` that the effective policy scrubs (the workspace layer may add
/// scrub patterns after the flags) is refused: the flag must not smuggle a secret in.
fn check_env_flags(policy: &Policy) -> Result<(), PolicyError> {
    let env = &policy.environment;
    let from_flag = env
        .set
        .iter()
        .filter(|(_, v)| v.origin == Origin::flag(ENV_FLAG))
        .map(|(name, _)| name)
        .chain(
            env.allow
                .iter()
                .filter(|a| a.origin == Origin::flag(ENV_FLAG))
                .map(|a| &a.value),
        );
    for name in from_flag {
        if let Some(pattern) = env
            .scrub
            .iter()
            .find(|p| crate::glob::Glob::new(&p.value).is_ok_and(|g| g.is_match(name)))
        {
            return Err(PolicyError::EnvScrubbed {
                name: name.clone(),
                pattern: pattern.value.clone(),
                at: pattern.origin.clone(),
            });
        }
    }
    Ok(())
}

fn validate(policy: &Policy) -> Result<(), PolicyError> {
    let l = &policy.limits;
    if let (Some(default), Some(max)) = (l.command_timeout.value, l.command_timeout_max.value)
        && default > max
    {
        return Err(PolicyError::InvalidValue {
            at: l.command_timeout.origin.clone(),
            key: "limits.command_timeout".into(),
            message: format!(
                "default {default}s is above `limits.command_timeout_max` {max}s ({})",
                l.command_timeout_max.origin
            ),
        });
    }
    Ok(())
}

fn origin_in(file: &str, loc: &Location) -> Origin {
    Origin::file(file, loc.line().max(1), loc.column().max(1))
}

/// Checks an entry of a path list: absolute, `~`-relative, or relative without `..`.
fn check_path_entry(entry: &str) -> Result<(), String> {
    if entry.trim().is_empty() {
        return Err("an empty path".into());
    }
    if entry.contains('\0') {
        return Err(format!(
            "path `{}` contains a NUL byte",
            entry.escape_debug()
        ));
    }
    if entry.starts_with('~') && !(entry == "~" || entry.starts_with("~/")) {
        return Err(format!(
            "`{entry}`: only `~` and `~/...` are expanded (no `~user`)"
        ));
    }
    if entry.split('/').any(|c| c == "..") {
        return Err(format!(
            "`{entry}` contains `..`; write the path without it"
        ));
    }
    Ok(())
}

/// Applies the keys of one layer: `file` names the layer in errors, `kind` says whether it may
/// only tighten.
pub(crate) struct Applier<'a> {
    file: &'a str,
    kind: LayerKind,
}

impl Applier<'_> {
    pub(crate) fn at(&self, loc: &Location) -> Origin {
        origin_in(self.file, loc)
    }

    pub(crate) fn widens(&self, loc: &Location, key: &str, why: impl Into<String>) -> PolicyError {
        PolicyError::WorkspaceLayerWidens {
            at: self.at(loc),
            key: key.to_owned(),
            why: why.into(),
        }
    }

    pub(crate) fn invalid(
        &self,
        loc: &Location,
        key: &str,
        message: impl Into<String>,
    ) -> PolicyError {
        PolicyError::InvalidValue {
            at: self.at(loc),
            key: key.to_owned(),
            message: message.into(),
        }
    }

    pub(crate) fn tighten_only(&self) -> bool {
        self.kind == LayerKind::Workspace
    }
}

#[derive(Debug, Clone, Copy)]
pub(crate) enum Direction {
    /// Entries grant access: a workspace layer may only remove.
    ShrinkOnly,
    /// Entries restrict: a workspace layer may only add.
    GrowOnly,
}
