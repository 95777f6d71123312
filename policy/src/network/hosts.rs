//! Host names and patterns: parsing what a request names (a name or an address, and a port),
//! allow-list entries (`name`, `*.suffix`, with an optional `:port`) and matching them.

use std::collections::BTreeMap;
use std::fmt;
use std::net::IpAddr;

use serde::Serialize;

use super::{DEFAULT_PORTS, NetList};
use crate::origin::{Origin, Sourced};
use crate::vocab::Network;

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
pub(super) fn check_name(text: &str) -> Result<String, String> {
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

pub(super) fn parse_port(text: &str) -> Result<u16, String> {
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
    pub(super) fn specificity(&self) -> (bool, usize, bool) {
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

pub(super) fn strip_port(text: &str) -> (&str, Option<&str>) {
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
