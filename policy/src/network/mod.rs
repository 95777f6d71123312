//! The network allow-list: host patterns, `resolve` pins, how `network:` layers combine, and
//! the one decision function every consumer asks, [`Plan::decide_connect`] (the proxy for each
//! connection, `bridle policy explain connect` for a person).
//!
//! Profile shape (`shared/spec/network.md`):
//!
//! ```yaml
//! network: off                  # or `on`, or `allow-list`, or the mapping:
//! network:
//!   mode: allow-list
//!   allow: [crates.io, "*.crates.io", "github.com:443"]
//!   deny: ["*.example.invalid"]
//!   resolve: {registry.test: 127.0.0.1}
//! ```
//!
//! An entry is a host name, or `*.` and a suffix (any name below it, not the suffix itself),
//! with an optional `:port`; without one an `allow` entry matches ports 80 and 443, and a
//! `deny` entry every port. `deny` wins over `allow`.
//! A host no entry matches is asked under approval `ask` (the proxy asks once per session) and
//! denied under `never`. Names are compared lower-case without a trailing dot; a request for an
//! IP address never matches an entry (entries name hosts).

mod hosts;
mod layer;

pub use hosts::{HostPattern, NetworkHosts, RequestHost, parse_host, split_host_port};
pub(crate) use layer::RawNetwork;

use std::collections::BTreeMap;
use std::net::IpAddr;

use serde::{Deserialize, Serialize};

use crate::origin::{Origin, Sourced};
use crate::plan::{DecidedBy, Plan, Verdict};
use crate::policy::Policy;
use crate::vocab::{ApprovalPolicy, Decision, Network};

/// The port the relay listens on inside the sandbox's network namespace (on 127.0.0.1), where
/// the proxy variables point. Below 1024: the command inside has no capabilities, so it can
/// never bind it itself, and no server of its own collides with it.
pub const RELAY_PORT: u16 = 312;

/// The ports an entry without `:port` matches.
pub const DEFAULT_PORTS: [u16; 2] = [80, 443];

/// One entry of the spec's allow or deny list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NetEntry {
    /// The entry, canonical (`*.crates.io`, `github.com:443`).
    pub entry: String,
    /// Where it was written.
    pub origin: Origin,
}

/// A name the deployer pinned to an address.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResolvePin {
    /// The name.
    pub host: String,
    /// The address the proxy connects to for it (private addresses included).
    pub address: IpAddr,
    /// Where it was written.
    pub origin: Origin,
}

/// What a sandbox with network `allow-list` needs: the lists the proxy decides by, and where
/// the relay listens. Plain data, part of the [`crate::SandboxSpec`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AllowListSpec {
    /// Entries that allow a connection, in profile order.
    pub allow: Vec<NetEntry>,
    /// Entries that deny a connection (they win over `allow`).
    pub deny: Vec<NetEntry>,
    /// Names the proxy resolves to a fixed address, in name order.
    pub resolve: Vec<ResolvePin>,
    /// The relay's port on the sandbox's 127.0.0.1.
    pub relay_port: u16,
}

pub(crate) fn spec_allow_list(hosts: &NetworkHosts) -> AllowListSpec {
    let entries = |list: &[Sourced<String>]| {
        list.iter()
            .map(|s| NetEntry {
                entry: s.value.clone(),
                origin: s.origin.clone(),
            })
            .collect()
    };
    AllowListSpec {
        allow: entries(&hosts.allow),
        deny: entries(&hosts.deny),
        resolve: hosts
            .resolve
            .iter()
            .map(|(host, ip)| ResolvePin {
                host: host.clone(),
                address: ip.value,
                origin: ip.origin.clone(),
            })
            .collect(),
        relay_port: RELAY_PORT,
    }
}

/// The variables that point the common clients at the relay: the generic ones (curl, git,
/// Python, Go, pip, cargo through libcurl) upper- and lower-case, `ALL_PROXY` as SOCKS5 with
/// remote resolution (there is no DNS inside), and the tool-specific ones where they differ
/// (npm, yarn, pip, cargo, Node's opt-in). `NO_PROXY` is cleared unless the deployer's profile
/// sets it explicitly in `environment.set`.
pub(crate) fn set_proxy_env(env: &mut BTreeMap<String, String>, policy: &Policy, port: u16) {
    let http = format!("http://127.0.0.1:{port}");
    let socks = format!("socks5h://127.0.0.1:{port}");
    for name in [
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "http_proxy",
        "https_proxy",
        "npm_config_proxy",
        "npm_config_https_proxy",
        "YARN_HTTP_PROXY",
        "YARN_HTTPS_PROXY",
        "PIP_PROXY",
        "CARGO_HTTP_PROXY",
    ] {
        env.insert(name.to_owned(), http.clone());
    }
    for name in ["ALL_PROXY", "all_proxy"] {
        env.insert(name.to_owned(), socks.clone());
    }
    env.insert("NODE_USE_ENV_PROXY".to_owned(), "1".to_owned());
    for name in ["NO_PROXY", "no_proxy", "npm_config_noproxy"] {
        match policy.environment.set.get(name) {
            Some(value) => env.insert(name.to_owned(), value.value.clone()),
            None => env.remove(name),
        };
    }
}

/// Which list an entry that decided is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum NetList {
    /// `network.allow`.
    Allow,
    /// `network.deny`.
    Deny,
}

impl NetList {
    /// The profile key.
    pub fn key(self) -> &'static str {
        match self {
            NetList::Allow => "network.allow",
            NetList::Deny => "network.deny",
        }
    }
}

impl Plan {
    /// Decides a connection to `host` (a name or an address, as the client sent it) and
    /// `port`. Network `off` denies and `on` allows everything; with `allow-list`, a matching
    /// `network.deny` entry denies, else a matching `network.allow` entry allows (the most
    /// specific one is named), else the host is asked under approval `ask` and denied under
    /// `never`. A malformed host is denied. The caller (the proxy) still refuses private
    /// addresses after resolution unless the name is pinned by `network.resolve`.
    pub fn decide_connect(&self, host: &str, port: u16) -> Verdict {
        let spec = &self.spec;
        let parsed = parse_host(host);
        let shown = match &parsed {
            Ok(h) => format!("{h}:{port}"),
            Err(_) => format!("{}:{port}", host.escape_debug()),
        };
        let setting = |decision, why: &str| Verdict {
            decision,
            by: DecidedBy::NetworkSetting {
                network: spec.network,
                origin: self.network_origin().clone(),
            },
            reason: format!(
                "connection to `{shown}` {why} (`network: {}`, {})",
                spec.network,
                self.network_origin()
            ),
        };
        let list = match (spec.network, &spec.allow_list) {
            (Network::Off, _) => return setting(Decision::Deny, "denied: the network is off"),
            (Network::On, _) => return setting(Decision::Allow, "allowed: the network is on"),
            (Network::AllowList, None) => {
                return setting(
                    Decision::Deny,
                    "denied: the allow-list is missing from the plan",
                );
            }
            (Network::AllowList, Some(list)) => list,
        };
        if port == 0 {
            return Verdict {
                decision: Decision::Deny,
                by: DecidedBy::Default,
                reason: format!("connection to `{shown}` denied: port 0 is not a port"),
            };
        }
        let name = match parsed {
            Err(why) => {
                return Verdict {
                    decision: Decision::Deny,
                    by: DecidedBy::Default,
                    reason: format!("connection denied: {why}"),
                };
            }
            Ok(RequestHost::Ip(_)) => None,
            Ok(RequestHost::Name(name)) => Some(name),
        };
        if let Some(name) = &name {
            for (which, entries) in [(NetList::Deny, &list.deny), (NetList::Allow, &list.allow)] {
                if let Some(entry) = best_match(which, entries, name, port) {
                    let (decision, verb) = match which {
                        NetList::Deny => (Decision::Deny, "denied"),
                        NetList::Allow => (Decision::Allow, "allowed"),
                    };
                    return Verdict {
                        decision,
                        reason: format!(
                            "connection to `{shown}` {verb} by `{}` entry `{}` ({})",
                            which.key(),
                            entry.entry,
                            entry.origin
                        ),
                        by: DecidedBy::NetworkEntry {
                            list: which,
                            entry: entry.entry.clone(),
                            origin: entry.origin.clone(),
                        },
                    };
                }
            }
        }
        let (decision, verb) = match self.approval {
            ApprovalPolicy::Ask => (Decision::Ask, "needs approval"),
            ApprovalPolicy::Never => (Decision::Deny, "denied"),
        };
        let hint = match &name {
            Some(name) if DEFAULT_PORTS.contains(&port) => {
                format!("add `{name}` to `network.allow` in the profile")
            }
            Some(name) => format!("add `{name}:{port}` to `network.allow` in the profile"),
            None => "`network.allow` names hosts: connect by name (a private address needs the name pinned in `network.resolve`)".to_owned(),
        };
        Verdict {
            decision,
            by: DecidedBy::Default,
            reason: format!("connection to `{shown}` {verb}: not in the allow-list; {hint}"),
        }
    }

    /// The address `host` is pinned to by `network.resolve`, if it is.
    pub fn resolve_pin(&self, host: &str) -> Option<&ResolvePin> {
        let name = match parse_host(host) {
            Ok(RequestHost::Name(name)) => name,
            Ok(RequestHost::Ip(_)) | Err(_) => return None,
        };
        self.spec
            .allow_list
            .as_ref()?
            .resolve
            .iter()
            .find(|pin| pin.host == name)
    }
}

fn best_match<'e>(
    list: NetList,
    entries: &'e [NetEntry],
    host: &str,
    port: u16,
) -> Option<&'e NetEntry> {
    let mut best: Option<(&NetEntry, (bool, usize, bool))> = None;
    for entry in entries {
        // Entries in the spec were validated when the profile loaded.
        let Ok(pattern) = HostPattern::parse(&entry.entry) else {
            continue;
        };
        if !pattern.matches_in(list, host, port) {
            continue;
        }
        let score = pattern.specificity();
        if best.as_ref().is_none_or(|(_, b)| score > *b) {
            best = Some((entry, score));
        }
    }
    best.map(|(e, _)| e)
}
