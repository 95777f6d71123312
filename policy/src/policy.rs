//! The effective policy: every value after all layers, each with the place that set it.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Serialize;

use crate::origin::{Origin, Sourced};
use crate::raw::EnvInherit;
use crate::rules::{CommandRule, PathRule};
use crate::units::{Limit, format_bytes, format_count, format_seconds};
use crate::vocab::{ApprovalPolicy, CacheHome, Guarantee, Network, SandboxMode, UnixSockets};

/// Where a layer came from, and how much it is trusted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum LayerKind {
    /// A shipped or deployer profile: may widen or tighten.
    Profile,
    /// Command-line flags given by the user: may widen or tighten.
    Flags,
    /// Configuration found inside the workspace: may only tighten.
    Workspace,
}

/// One layer that contributed to the policy, in application order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Layer {
    /// How it is named in provenance.
    pub name: String,
    /// The file on disk, if any.
    pub path: Option<PathBuf>,
    /// Its trust level.
    pub kind: LayerKind,
}

/// Resource limits with provenance. `None` values mean unlimited.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Limits {
    /// RLIMIT_NPROC.
    pub processes: Sourced<Limit>,
    /// RLIMIT_DATA, bytes.
    pub memory: Sourced<Limit>,
    /// RLIMIT_FSIZE, bytes.
    pub file_size: Sourced<Limit>,
    /// RLIMIT_NOFILE.
    pub open_files: Sourced<Limit>,
    /// RLIMIT_CPU, seconds.
    pub cpu_time: Sourced<Limit>,
    /// Wall-clock limit for a whole sandboxed command, seconds.
    pub wall_time: Sourced<Limit>,
    /// Default per-call timeout for tool commands, seconds.
    pub command_timeout: Sourced<Limit>,
    /// Largest per-call timeout a tool call may ask for, seconds.
    pub command_timeout_max: Sourced<Limit>,
    /// Most bytes of one tool output spill file (written by bridle, outside the command's
    /// `file_size` limit); a session's spill files together hold at most
    /// [`SESSION_SPILL_MULTIPLE`](crate::SESSION_SPILL_MULTIPLE) times this.
    pub spill_size: Sourced<Limit>,
}

/// The environment policy with provenance.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EnvironmentPolicy {
    /// Allow-list or inherit-all.
    pub inherit: Sourced<EnvInherit>,
    /// Name globs that pass (with `allow-list`).
    pub allow: Vec<Sourced<String>>,
    /// Name globs that never pass (secrets).
    pub scrub: Vec<Sourced<String>>,
    /// Variables set explicitly.
    pub set: BTreeMap<String, Sourced<String>>,
}

/// The cache home with provenance (see [`CacheHome`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CacheHomePolicy {
    /// `per-workspace` or `off`.
    pub mode: Sourced<CacheHome>,
    /// The cache directories made writable (`~/.cache`, `~/.npm`, ...).
    pub paths: Vec<Sourced<String>>,
}

/// The effective policy after all layers.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Policy {
    /// The profile selected (as given on the command line).
    pub profile: String,
    /// The layers, base first.
    pub layers: Vec<Layer>,
    /// Free text from the selected profile.
    pub description: Option<Sourced<String>>,
    /// The Landlock ABI the profile was tested with.
    pub tested_kernel_abi: Option<Sourced<u32>>,
    /// Sandbox mode.
    pub mode: Sourced<SandboxMode>,
    /// Approval policy.
    pub approval: Sourced<ApprovalPolicy>,
    /// Network: `off`, `allow-list` or `on` (`network.mode` in the mapping form).
    pub network: Sourced<Network>,
    /// `network.allow`, `network.deny` and `network.resolve`.
    pub network_hosts: crate::network::NetworkHosts,
    /// Unix socket creation (`block` by default; `allow` is the named G-IPC opt-out).
    pub unix_sockets: Sourced<UnixSockets>,
    /// Readable roots (`/` by default).
    pub readable_roots: Vec<Sourced<String>>,
    /// Extra writable roots besides the workspace.
    pub writable_roots: Vec<Sourced<String>>,
    /// Paths kept read-only inside writable roots (relative ones apply under every root).
    pub protected_paths: Vec<Sourced<String>>,
    /// Paths made unreadable.
    pub masked_paths: Vec<Sourced<String>>,
    /// Resource limits.
    pub limits: Limits,
    /// Environment filtering.
    pub environment: EnvironmentPolicy,
    /// Writable cache directories for tools.
    pub cache_home: CacheHomePolicy,
    /// Guarantees the deployer accepts as missing on this host.
    pub accept_missing: Vec<Sourced<Guarantee>>,
    /// Opt-in to use `/`, `$HOME` or similar as a workspace or writable root.
    pub allow_dangerous_workspace_root: Sourced<bool>,
    /// Command-prefix rules.
    pub command_rules: Vec<CommandRule>,
    /// Path rules for writes.
    pub path_rules: Vec<PathRule>,
    /// `agent:`: the preset, the plugins' configurations, the tools removed.
    pub agent: crate::agent::AgentSection,
}

/// One printable line of `bridle policy show`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Entry {
    /// Dotted key, e.g. `limits.memory` or `rules.commands[deny-git-push]`.
    pub key: String,
    /// The value as a profile would spell it.
    pub value: String,
    /// Where it was set.
    pub origin: Origin,
}

impl Policy {
    /// Every effective value, in a stable order, with its origin.
    pub fn entries(&self) -> Vec<Entry> {
        let mut out = Vec::new();
        let mut push = |key: &str, value: String, origin: &Origin| {
            out.push(Entry {
                key: key.to_owned(),
                value,
                origin: origin.clone(),
            });
        };
        if let Some(d) = &self.description {
            push("description", d.value.clone(), &d.origin);
        }
        if let Some(abi) = &self.tested_kernel_abi {
            push("tested_kernel_abi", abi.value.to_string(), &abi.origin);
        }
        push("mode", self.mode.value.to_string(), &self.mode.origin);
        push(
            "approval",
            self.approval.value.to_string(),
            &self.approval.origin,
        );
        push(
            "network",
            self.network.value.to_string(),
            &self.network.origin,
        );
        for (key, value, origin) in self.network_hosts.entries(self.network.value) {
            push(key, value, &origin);
        }
        push(
            "unix_sockets",
            self.unix_sockets.value.to_string(),
            &self.unix_sockets.origin,
        );
        for (key, list) in [
            ("readable_roots", &self.readable_roots),
            ("writable_roots", &self.writable_roots),
            ("protected_paths", &self.protected_paths),
            ("masked_paths", &self.masked_paths),
        ] {
            if list.is_empty() {
                push(key, "(none)".to_owned(), &Origin::Builtin);
            }
            for item in list {
                push(key, item.value.clone(), &item.origin);
            }
        }
        let l = &self.limits;
        push(
            "limits.processes",
            format_count(l.processes.value),
            &l.processes.origin,
        );
        push(
            "limits.memory",
            format_bytes(l.memory.value),
            &l.memory.origin,
        );
        push(
            "limits.file_size",
            format_bytes(l.file_size.value),
            &l.file_size.origin,
        );
        push(
            "limits.open_files",
            format_count(l.open_files.value),
            &l.open_files.origin,
        );
        push(
            "limits.cpu_time",
            format_seconds(l.cpu_time.value),
            &l.cpu_time.origin,
        );
        push(
            "limits.wall_time",
            format_seconds(l.wall_time.value),
            &l.wall_time.origin,
        );
        push(
            "limits.command_timeout",
            format_seconds(l.command_timeout.value),
            &l.command_timeout.origin,
        );
        push(
            "limits.command_timeout_max",
            format_seconds(l.command_timeout_max.value),
            &l.command_timeout_max.origin,
        );
        push(
            "limits.spill_size",
            format_bytes(l.spill_size.value),
            &l.spill_size.origin,
        );
        let env = &self.environment;
        let inherit = match env.inherit.value {
            EnvInherit::AllowList => "allow-list",
            EnvInherit::All => "all",
        };
        push(
            "environment.inherit",
            inherit.to_owned(),
            &env.inherit.origin,
        );
        for item in &env.allow {
            push("environment.allow", item.value.clone(), &item.origin);
        }
        for item in &env.scrub {
            push("environment.scrub", item.value.clone(), &item.origin);
        }
        for (name, value) in &env.set {
            push(
                "environment.set",
                format!("{name}={}", value.value),
                &value.origin,
            );
        }
        let cache = &self.cache_home;
        push(
            "cache_home.mode",
            cache.mode.value.as_str().to_owned(),
            &cache.mode.origin,
        );
        for item in &cache.paths {
            push("cache_home.paths", item.value.clone(), &item.origin);
        }
        if self.accept_missing.is_empty() {
            push("accept_missing", "(none)".to_owned(), &Origin::Builtin);
        }
        for g in &self.accept_missing {
            push("accept_missing", g.value.to_string(), &g.origin);
        }
        push(
            "allow_dangerous_workspace_root",
            self.allow_dangerous_workspace_root.value.to_string(),
            &self.allow_dangerous_workspace_root.origin,
        );
        for rule in &self.command_rules {
            let prefix: Vec<String> = rule
                .prefix
                .iter()
                .map(|alts| {
                    if alts.len() == 1 {
                        alts[0].clone()
                    } else {
                        format!("[{}]", alts.join("|"))
                    }
                })
                .collect();
            push(
                &format!("rules.commands[{}]", rule.id),
                format!("{} `{}`", rule.decision, prefix.join(" ")),
                &rule.origin,
            );
        }
        for rule in &self.path_rules {
            push(
                &format!("rules.paths[{}]", rule.id),
                format!("{} `{}`", rule.decision, rule.pattern.as_str()),
                &rule.origin,
            );
        }
        for (key, value, origin) in self.agent.entries() {
            push(&key, value, &origin);
        }
        out
    }
}
