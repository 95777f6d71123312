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

use std::collections::BTreeMap;
use std::fmt;
use std::net::IpAddr;

use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::{Deserialize, Serialize};
use serde_saphyr::Spanned;

use crate::error::PolicyError;
use crate::merge::{Applier, Direction};
use crate::origin::{Origin, Sourced};
use crate::plan::{DecidedBy, Plan, Verdict};
use crate::policy::Policy;
use crate::raw::ListOp;
use crate::vocab::{ApprovalPolicy, Decision, Network};

/// The port the relay listens on inside the sandbox's network namespace (on 127.0.0.1), where
/// the proxy variables point. Below 1024: the command inside has no capabilities, so it can
/// never bind it itself, and no server of its own collides with it.
pub const RELAY_PORT: u16 = 312;

/// The ports an entry without `:port` matches.
pub const DEFAULT_PORTS: [u16; 2] = [80, 443];

/// Two-label public suffixes that a `*.` entry must not name (a single label such as `*.com`
/// is refused anyway): country second levels and shared hosting domains, where everything
/// below belongs to unrelated owners. Not the whole public suffix list: the common ones.
const PUBLIC_SUFFIXES: &[&str] = &[
    "ac.uk",
    "co.uk",
    "gov.uk",
    "ltd.uk",
    "me.uk",
    "org.uk",
    "plc.uk",
    "com.au",
    "net.au",
    "org.au",
    "co.jp",
    "ne.jp",
    "or.jp",
    "com.br",
    "com.cn",
    "net.cn",
    "co.in",
    "co.nz",
    "co.za",
    "com.mx",
    "com.tr",
    "co.kr",
    "com.sg",
    "com.tw",
    "com.hk",
    "github.io",
    "gitlab.io",
    "githubusercontent.com",
    "herokuapp.com",
    "appspot.com",
    "cloudfront.net",
    "amazonaws.com",
    "azurewebsites.net",
    "blogspot.com",
    "pages.dev",
    "workers.dev",
    "vercel.app",
    "netlify.app",
    "web.app",
    "firebaseapp.com",
    "ngrok.io",
    "ngrok.app",
];

/// A host as a client asked for it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RequestHost {
    /// A host name, lower-case, without a trailing dot.
    Name(String),
    /// An IP address literal.
    Ip(IpAddr),
}

impl fmt::Display for RequestHost {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RequestHost::Name(name) => f.write_str(name),
            RequestHost::Ip(IpAddr::V6(ip)) => write!(f, "[{ip}]"),
            RequestHost::Ip(ip) => write!(f, "{ip}"),
        }
    }
}

/// Parses a host as a client sends it (an HTTP authority, a SOCKS domain, the command line):
/// a name of letters, digits, `-` and `_` in dot-separated labels (at most 253 bytes, labels of
/// at most 63), or an IP address (IPv6 with or without brackets). Anything else — control
/// characters, spaces, `%`, a last label of digits only (`127.1`, which resolvers read as an
/// address) — is refused, so a name can never smuggle bytes into a request line or a log.
pub fn parse_host(text: &str) -> Result<RequestHost, String> {
    let shown = text.escape_debug();
    let inner = text
        .strip_prefix('[')
        .and_then(|t| t.strip_suffix(']'))
        .unwrap_or(text);
    if let Ok(ip) = inner.parse::<IpAddr>() {
        return Ok(RequestHost::Ip(ip));
    }
    if inner.len() != text.len() {
        return Err(format!("`{shown}` is not an IPv6 address"));
    }
    check_name(text).map(RequestHost::Name)
}

/// Validates and lower-cases a host name (no wildcard, no port).
fn check_name(text: &str) -> Result<String, String> {
    let shown = text.escape_debug();
    let name = text.strip_suffix('.').unwrap_or(text).to_ascii_lowercase();
    if name.is_empty() {
        return Err("an empty host name".to_owned());
    }
    if name.len() > 253 {
        return Err(format!(
            "`{shown}` is longer than the 253 bytes a host name may have"
        ));
    }
    for label in name.split('.') {
        if label.is_empty() {
            return Err(format!("`{shown}` has an empty label"));
        }
        if label.len() > 63 {
            return Err(format!("`{shown}` has a label longer than 63 bytes"));
        }
        if let Some(bad) = label
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || *c == '-' || *c == '_'))
        {
            return Err(format!(
                "`{shown}` contains `{}`; host names are letters, digits, `-`, `_` and dots",
                bad.escape_debug()
            ));
        }
        if label.starts_with('-') || label.ends_with('-') {
            return Err(format!("`{shown}`: a label starts or ends with `-`"));
        }
    }
    if name
        .rsplit('.')
        .next()
        .is_some_and(|last| last.chars().all(|c| c.is_ascii_digit()))
    {
        return Err(format!(
            "`{shown}` looks like an IP address; write addresses in full"
        ));
    }
    Ok(name)
}

/// Splits `HOST[:PORT]` (IPv6 in brackets: `[::1]:443`), with `default_port` when no port is
/// given.
pub fn split_host_port(text: &str, default_port: u16) -> Result<(RequestHost, u16), String> {
    let shown = text.escape_debug();
    let (host, port) = if let Some(rest) = text.strip_prefix('[') {
        let (addr, after) = rest
            .split_once(']')
            .ok_or_else(|| format!("`{shown}`: an unclosed `[`"))?;
        match after.strip_prefix(':') {
            Some(port) => (format!("[{addr}]"), Some(port)),
            None if after.is_empty() => (format!("[{addr}]"), None),
            None => return Err(format!("`{shown}`: unexpected text after `]`")),
        }
    } else if text.matches(':').count() > 1 {
        // A bare IPv6 address carries no port.
        (text.to_owned(), None)
    } else {
        match text.split_once(':') {
            Some((host, port)) => (host.to_owned(), Some(port)),
            None => (text.to_owned(), None),
        }
    };
    let port = match port {
        Some(p) => parse_port(p).map_err(|e| format!("`{shown}`: {e}"))?,
        None => default_port,
    };
    Ok((parse_host(&host)?, port))
}

fn parse_port(text: &str) -> Result<u16, String> {
    if text.is_empty() || text.len() > 5 || !text.chars().all(|c| c.is_ascii_digit()) {
        return Err(format!("`{}` is not a port number", text.escape_debug()));
    }
    match text.parse::<u16>() {
        Ok(0) | Err(_) => Err(format!("port `{text}` is not between 1 and 65535")),
        Ok(port) => Ok(port),
    }
}

/// One `network.allow` or `network.deny` entry, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostPattern {
    /// `*.suffix`: any name below `host`, not `host` itself.
    pub wildcard: bool,
    /// The name (or the suffix), lower-case, without a trailing dot.
    pub host: String,
    /// The one port it matches; `None`: 80 and 443.
    pub port: Option<u16>,
}

impl HostPattern {
    /// Parses an entry as a profile writes it. Refused: `*` alone, `*.` on a public suffix
    /// (`*.com`, `*.co.uk`, `*.github.io`), a `*` anywhere but a leading `*.`, IP addresses
    /// (name the host and pin it with `network.resolve`), and malformed names or ports.
    pub fn parse(text: &str) -> Result<HostPattern, String> {
        let shown = text.escape_debug();
        if let Some(bad) = text.chars().find(|c| {
            !(c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | '*' | ':' | '[' | ']'))
        }) {
            return Err(format!(
                "`{shown}` contains `{}`; an entry is a host name or `*.` and a domain, with an optional `:port`",
                bad.escape_debug()
            ));
        }
        if text == "*" || text.starts_with("*:") {
            return Err(
                "`*` would allow every host; write `network: on` if that is meant".to_owned(),
            );
        }
        if text.starts_with('[')
            || text.matches(':').count() > 1
            || strip_port(text).0.parse::<IpAddr>().is_ok()
        {
            return Err(format!(
                "`{shown}` is an IP address; name the host and pin the name to the address with `network.resolve`"
            ));
        }
        let (host, port) = strip_port(text);
        let port = port
            .map(parse_port)
            .transpose()
            .map_err(|e| format!("`{shown}`: {e}"))?;
        let (wildcard, name) = match host.strip_prefix("*.") {
            Some(rest) => (true, rest),
            None => (false, host),
        };
        if name.contains('*') {
            return Err(format!(
                "`{shown}`: `*` is only allowed as a leading `*.` (any name below a domain)"
            ));
        }
        let name = check_name(name).map_err(|e| {
            if name.parse::<IpAddr>().is_ok() {
                format!(
                    "`{shown}` is an IP address; name the host and pin it with `network.resolve`"
                )
            } else {
                e
            }
        })?;
        if wildcard && (!name.contains('.') || PUBLIC_SUFFIXES.contains(&name.as_str())) {
            return Err(format!(
                "`{shown}` would allow every host under the public suffix `{name}`; name the domains you mean"
            ));
        }
        Ok(HostPattern {
            wildcard,
            host: name,
            port,
        })
    }

    /// Whether a connection to `host` (a name; addresses never match) and `port` matches, for
    /// an `allow` entry: without a port it matches 80 and 443.
    pub fn matches(&self, host: &str, port: u16) -> bool {
        self.matches_in(NetList::Allow, host, port)
    }

    /// The same for an entry of `list`: a `deny` entry without a port matches every port (a
    /// host denied on 443 is not meant to be asked about on 8443).
    pub fn matches_in(&self, list: NetList, host: &str, port: u16) -> bool {
        let port_ok = match (self.port, list) {
            (Some(p), _) => p == port,
            (None, NetList::Allow) => DEFAULT_PORTS.contains(&port),
            (None, NetList::Deny) => true,
        };
        let host_ok = if self.wildcard {
            host.len() > self.host.len()
                && host.ends_with(self.host.as_str())
                && host.as_bytes()[host.len() - self.host.len() - 1] == b'.'
        } else {
            host == self.host
        };
        port_ok && host_ok
    }

    /// How specific the match is, for picking the entry that decides: an exact name over a
    /// suffix, a longer suffix over a shorter one, a port over the default ports.
    fn specificity(&self) -> (bool, usize, bool) {
        (!self.wildcard, self.host.len(), self.port.is_some())
    }
}

impl fmt::Display for HostPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.wildcard {
            f.write_str("*.")?;
        }
        f.write_str(&self.host)?;
        if let Some(port) = self.port {
            write!(f, ":{port}")?;
        }
        Ok(())
    }
}

fn strip_port(text: &str) -> (&str, Option<&str>) {
    match text.rsplit_once(':') {
        Some((host, port)) => (host, Some(port)),
        None => (text, None),
    }
}

/// The network lists of the effective policy, with provenance.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct NetworkHosts {
    /// `network.allow`, canonical text, in order.
    pub allow: Vec<Sourced<String>>,
    /// `network.deny`, canonical text, in order.
    pub deny: Vec<Sourced<String>>,
    /// `network.resolve`: names pinned to an address by the deployer.
    pub resolve: BTreeMap<String, Sourced<IpAddr>>,
}

impl NetworkHosts {
    /// The `policy show` rows: `(key, value, origin)`. With mode `allow-list`, an empty allow
    /// list shows as `(none)`, so a policy that allows nothing says so.
    pub(crate) fn entries(&self, mode: Network) -> Vec<(&'static str, String, Origin)> {
        let mut out = Vec::new();
        if self.allow.is_empty() && mode == Network::AllowList {
            out.push(("network.allow", "(none)".to_owned(), Origin::Builtin));
        }
        for item in &self.allow {
            out.push(("network.allow", item.value.clone(), item.origin.clone()));
        }
        for item in &self.deny {
            out.push(("network.deny", item.value.clone(), item.origin.clone()));
        }
        for (name, ip) in &self.resolve {
            out.push((
                "network.resolve",
                format!("{name}={}", ip.value),
                ip.origin.clone(),
            ));
        }
        out
    }
}

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

/// The `network:` value of one layer: a scalar (`off`, `allow-list`, `on`) or the mapping.
#[derive(Debug)]
pub(crate) enum RawNetwork {
    Mode(Network),
    Table(Box<RawNetworkTable>),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawNetworkTable {
    pub mode: Option<Spanned<Network>>,
    pub allow: Option<ListOp<String>>,
    pub deny: Option<ListOp<String>>,
    pub resolve: Option<BTreeMap<String, Spanned<String>>>,
}

struct RawNetworkVisitor;

impl<'de> Visitor<'de> for RawNetworkVisitor {
    type Value = RawNetwork;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(
            "`off`, `allow-list`, `on`, or a mapping with `mode`, `allow`, `deny`, `resolve`",
        )
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        v.parse::<Network>()
            .map(RawNetwork::Mode)
            .map_err(E::custom)
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Self::Value, E> {
        Err(E::custom(format!(
            "`{v}` is not a network setting (expected one of: off, allow-list, on)"
        )))
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        RawNetworkTable::deserialize(de::value::MapAccessDeserializer::new(map))
            .map(|t| RawNetwork::Table(Box::new(t)))
    }
}

impl<'de> Deserialize<'de> for RawNetwork {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(RawNetworkVisitor)
    }
}

impl Applier<'_> {
    /// Applies one layer's `network:`. A scalar sets the mode. In the mapping, `mode` is a
    /// scalar, `allow`/`deny` lists and `resolve` a mapping merged key by key. A workspace
    /// layer may only lower the mode, remove from `allow` and add to `deny`. A layer that adds
    /// `allow` entries must leave the mode at `allow-list`: anything else would be a list that
    /// silently does nothing.
    pub(crate) fn network(
        &self,
        policy: &mut Policy,
        raw: Option<Spanned<RawNetwork>>,
    ) -> Result<(), PolicyError> {
        let Some(raw) = raw else { return Ok(()) };
        let table = match raw.value {
            RawNetwork::Mode(mode) => {
                let spanned = Spanned {
                    value: mode,
                    referenced: raw.referenced,
                    defined: raw.defined,
                };
                return self.scalar(&mut policy.network, Some(spanned), "network");
            }
            RawNetwork::Table(table) => *table,
        };
        self.scalar(&mut policy.network, table.mode, "network.mode")?;
        let hosts = &mut policy.network_hosts;
        let mut first_allowed = None;
        if let Some(mut op) = table.allow {
            first_allowed = op.append.first().map(|s| s.referenced).or_else(|| {
                op.replace
                    .as_ref()
                    .and_then(|r| r.value.first())
                    .map(|s| s.referenced)
            });
            self.canonical_removals(&mut op, "network.allow")?;
            self.list(
                &mut hosts.allow,
                canonical_op(op, self, "network.allow")?,
                "network.allow",
                Direction::ShrinkOnly,
                Clone::clone,
                |_, _| Ok(()),
            )?;
        }
        if let Some(mut op) = table.deny {
            self.canonical_removals(&mut op, "network.deny")?;
            self.list(
                &mut hosts.deny,
                canonical_op(op, self, "network.deny")?,
                "network.deny",
                Direction::GrowOnly,
                Clone::clone,
                |_, _| Ok(()),
            )?;
        }
        for (name, address) in table.resolve.unwrap_or_default() {
            if self.tighten_only() {
                return Err(self.widens(
                    &address.referenced,
                    &format!("network.resolve.{name}"),
                    "a pinned name may reach a private address",
                ));
            }
            let host = check_name(&name)
                .map_err(|m| self.invalid(&address.referenced, "network.resolve", m))?;
            let ip = address.value.parse::<IpAddr>().map_err(|_| {
                self.invalid(
                    &address.referenced,
                    &format!("network.resolve.{name}"),
                    format!("`{}` is not an IP address", address.value.escape_debug()),
                )
            })?;
            hosts
                .resolve
                .insert(host, Sourced::new(ip, self.at(&address.referenced)));
        }
        if let Some(at) = first_allowed
            && policy.network.value != Network::AllowList
        {
            return Err(self.invalid(
                &at,
                "network.allow",
                format!(
                    "has no effect while the network is `{}` (set at {}); set `network.mode: allow-list` in this layer",
                    policy.network.value, policy.network.origin
                ),
            ));
        }
        Ok(())
    }

    /// Removal is by entry, compared in canonical form (`GitHub.com.` removes `github.com`).
    fn canonical_removals(&self, op: &mut ListOp<String>, key: &str) -> Result<(), PolicyError> {
        for removed in &mut op.remove {
            let pattern = HostPattern::parse(&removed.value)
                .map_err(|m| self.invalid(&removed.referenced, key, m))?;
            removed.value = pattern.to_string();
        }
        Ok(())
    }
}

/// Parses every appended or replacing entry, keeping the canonical text.
fn canonical_op(
    mut op: ListOp<String>,
    a: &Applier<'_>,
    key: &str,
) -> Result<ListOp<String>, PolicyError> {
    let canon = |item: &mut Spanned<String>| -> Result<(), PolicyError> {
        let pattern =
            HostPattern::parse(&item.value).map_err(|m| a.invalid(&item.referenced, key, m))?;
        item.value = pattern.to_string();
        Ok(())
    };
    for item in &mut op.append {
        canon(item)?;
    }
    if let Some(replace) = &mut op.replace {
        for item in &mut replace.value {
            canon(item)?;
        }
    }
    Ok(op)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_parse_to_their_canonical_form() {
        for (text, canonical) in [
            ("crates.io", "crates.io"),
            ("Crates.IO.", "crates.io"),
            ("*.crates.io", "*.crates.io"),
            ("github.com:443", "github.com:443"),
            ("*.pkg.dev:8443", "*.pkg.dev:8443"),
            ("registry.test", "registry.test"),
            ("_acme.example.com", "_acme.example.com"),
        ] {
            assert_eq!(HostPattern::parse(text).unwrap().to_string(), canonical);
        }
    }

    #[test]
    fn wide_or_malformed_patterns_are_refused() {
        for (text, needle) in [
            ("*", "every host"),
            ("*:443", "every host"),
            ("*.com", "public suffix"),
            ("*.co.uk", "public suffix"),
            ("*.github.io", "public suffix"),
            ("10.0.0.5", "IP address"),
            ("10.0.0.5:80", "IP address"),
            ("::1", "IP address"),
            ("[::1]:443", "IP address"),
            ("127.1", "IP address"),
            ("a*.example.com", "leading `*.`"),
            ("*.*.example.com", "leading `*.`"),
            ("exa mple.com", "contains ` `"),
            ("example.com\r\nX-y", "contains"),
            ("example..com", "empty label"),
            ("-bad.example.com", "starts or ends"),
            ("example.com:0", "between 1 and 65535"),
            ("example.com:70000", "between 1 and 65535"),
            ("example.com:http", "not a port"),
            ("", "empty"),
        ] {
            let err = HostPattern::parse(text).unwrap_err();
            assert!(err.contains(needle), "{text:?}: {err}");
        }
        let long = format!("{}.com", "a".repeat(64));
        assert!(HostPattern::parse(&long).unwrap_err().contains("63"));
    }

    #[test]
    fn entries_match_names_and_their_ports() {
        let exact = HostPattern::parse("crates.io").unwrap();
        assert!(exact.matches("crates.io", 443) && exact.matches("crates.io", 80));
        assert!(!exact.matches("crates.io", 22));
        assert!(!exact.matches("static.crates.io", 443));
        assert!(!exact.matches("evilcrates.io", 443));
        let suffix = HostPattern::parse("*.crates.io").unwrap();
        assert!(suffix.matches("static.crates.io", 443));
        assert!(suffix.matches("a.b.crates.io", 80));
        assert!(!suffix.matches("crates.io", 443));
        assert!(!suffix.matches("evilcrates.io", 443));
        let port = HostPattern::parse("github.com:443").unwrap();
        assert!(port.matches("github.com", 443) && !port.matches("github.com", 80));
    }

    #[test]
    fn request_hosts_refuse_injection_and_keep_addresses() {
        assert_eq!(
            parse_host("Example.COM.").unwrap(),
            RequestHost::Name("example.com".into())
        );
        assert!(matches!(parse_host("[::1]").unwrap(), RequestHost::Ip(_)));
        assert!(matches!(
            parse_host("169.254.169.254").unwrap(),
            RequestHost::Ip(_)
        ));
        for bad in [
            "evil.test\r\nHost: x",
            "a b",
            "a%2e",
            "",
            "0x7f.1",
            "127.1",
            "[not-v6]",
            "é.example",
        ] {
            assert!(parse_host(bad).is_err(), "{bad:?}");
        }
        assert_eq!(
            split_host_port("github.com", 443).unwrap(),
            (RequestHost::Name("github.com".into()), 443)
        );
        assert_eq!(split_host_port("[::1]:8443", 443).unwrap().1, 8443);
        assert!(split_host_port("github.com:", 443).is_err());
        assert!(split_host_port("github.com:65536", 443).is_err());
    }
}
