//! The words every layer shares: sandbox mode, approval policy, network, decisions and the
//! guarantee codes of `shared/spec/sandbox.md`.

use std::fmt;
use std::str::FromStr;

use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Serialize};

/// What file effects a sandboxed command may have. Ordered from strictest to widest, so
/// `a < b` means "`a` is tighter than `b`".
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SandboxMode {
    /// Nothing is writable except `/dev/null` and the session's private temp dir.
    ReadOnly,
    /// The workspace, extra writable roots and the private temp dir are writable.
    WorkspaceWrite,
    /// No confinement beyond process-tree, fd and environment hygiene.
    DangerFullAccess,
}

/// Who answers an escalation request. Ordered from strictest to widest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ApprovalPolicy {
    /// Every escalation is rejected without asking anyone.
    Never,
    /// A person or a configured answerer is asked; with no channel the answer is `unavailable`.
    Ask,
}

/// Whether commands may reach the network outside the sandbox. Ordered from strictest to widest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Network {
    /// No connection or datagram leaves the sandbox; loopback inside it may work.
    Off,
    /// Only connections through bridle's proxy to allowed host names (the profile's
    /// `network.allow`, minus `network.deny`); nothing else leaves the sandbox.
    AllowList,
    /// Unrestricted network.
    On,
}

/// Whether a confined command may create unix sockets (and so reach a daemon's socket that
/// lies anywhere it can read). Ordered from strictest to widest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum UnixSockets {
    /// `socket(AF_UNIX)` is denied (socketpair keeps working): no pathname or abstract socket
    /// of an outside daemon can be connected, wherever it lies.
    Block,
    /// Unix sockets may be created. Named opt-out: outside daemons are then kept away only by
    /// hiding their usual socket directories (`/run`, `/var/run`, private `/tmp`) and by
    /// namespacing abstract sockets; a daemon socket elsewhere (for example git's fsmonitor
    /// socket inside `.git/`) is reachable.
    Allow,
}

/// Whether tools get a writable cache home (see [`crate::CacheHomeSpec`]). Ordered from
/// strictest to widest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CacheHome {
    /// Cache directories stay as the host has them: readable, not writable.
    Off,
    /// Each cache directory is writable through an overlay whose changes are kept per
    /// workspace, outside the workspace; the host's own directory is never written.
    PerWorkspace,
}

/// A policy decision. Ordered so that the strictest decision is the greatest:
/// `Allow < Ask < Deny`, and combining decisions takes the maximum.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Decision {
    /// Proceed without asking.
    Allow,
    /// Ask the approval seam; only an explicit approval proceeds.
    Ask,
    /// Refuse. Final: nothing later can turn it back into an allow.
    Deny,
}

/// A guarantee from `shared/spec/sandbox.md`, cited by tests and by `bridle probe`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum Guarantee {
    /// No file effect outside writable roots, metadata included.
    #[serde(rename = "G-FS-WRITE")]
    FsWrite,
    /// Protected paths inside writable roots stay read-only.
    #[serde(rename = "G-FS-PROTECT")]
    FsProtect,
    /// Masked paths are unreadable.
    #[serde(rename = "G-FS-MASK")]
    FsMask,
    /// With network off, nothing reaches outside the sandbox.
    #[serde(rename = "G-NET")]
    Net,
    /// No reaching daemons outside through unix sockets.
    #[serde(rename = "G-IPC")]
    Ipc,
    /// No signalling, ptracing or reading memory of processes outside.
    #[serde(rename = "G-PROC")]
    Proc,
    /// No privileges: no_new_privs, no capabilities, no dangerous kernel interfaces.
    #[serde(rename = "G-PRIV")]
    Priv,
    /// No injecting input into a terminal outside the sandbox.
    #[serde(rename = "G-TTY")]
    Tty,
    /// No process outlives the command or bridle.
    #[serde(rename = "G-TREE")]
    Tree,
    /// No file descriptor other than 0, 1, 2 (and deliberate ones) is inherited.
    #[serde(rename = "G-FD")]
    Fd,
    /// Secrets are not passed in the environment.
    #[serde(rename = "G-ENV")]
    Env,
    /// Resource limits from the profile apply.
    #[serde(rename = "G-RES")]
    Res,
}

impl Guarantee {
    /// Every guarantee, in spec order.
    pub const ALL: [Guarantee; 12] = [
        Guarantee::FsWrite,
        Guarantee::FsProtect,
        Guarantee::FsMask,
        Guarantee::Net,
        Guarantee::Ipc,
        Guarantee::Proc,
        Guarantee::Priv,
        Guarantee::Tty,
        Guarantee::Tree,
        Guarantee::Fd,
        Guarantee::Env,
        Guarantee::Res,
    ];

    /// The code as written in the spec, e.g. `G-FS-WRITE`.
    pub fn code(self) -> &'static str {
        match self {
            Guarantee::FsWrite => "G-FS-WRITE",
            Guarantee::FsProtect => "G-FS-PROTECT",
            Guarantee::FsMask => "G-FS-MASK",
            Guarantee::Net => "G-NET",
            Guarantee::Ipc => "G-IPC",
            Guarantee::Proc => "G-PROC",
            Guarantee::Priv => "G-PRIV",
            Guarantee::Tty => "G-TTY",
            Guarantee::Tree => "G-TREE",
            Guarantee::Fd => "G-FD",
            Guarantee::Env => "G-ENV",
            Guarantee::Res => "G-RES",
        }
    }
}

macro_rules! display_and_parse {
    ($ty:ty, $what:literal, [$($variant:path => $text:literal),+ $(,)?]) => {
        impl $ty {
            /// The spelling used in profiles and on the command line.
            pub fn as_str(self) -> &'static str {
                match self {
                    $($variant => $text,)+
                }
            }
        }

        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl FromStr for $ty {
            type Err = String;

            fn from_str(s: &str) -> Result<Self, Self::Err> {
                match s {
                    $($text => Ok($variant),)+
                    other => Err(unknown_word($what, other, &[$($text),+])),
                }
            }
        }

        impl<'de> Deserialize<'de> for $ty {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                deserialize_word(d, $what, vec![$($text),+], str::parse)
            }
        }
    };
}

/// The message for a word that is not one of `words`.
pub(crate) fn unknown_word(what: &str, text: &str, words: &[&str]) -> String {
    format!(
        "unknown {what} `{text}` (expected one of: {})",
        words.join(", ")
    )
}

/// Reads one of `words` (a `what`, such as a sandbox mode) with `parse`. Whatever else is
/// written there (a list, a mapping, a number, nothing) gets a message that lists the
/// accepted words, not the deserializer's own terms.
pub(crate) fn deserialize_word<'de, D: Deserializer<'de>, T>(
    d: D,
    what: &'static str,
    words: Vec<&'static str>,
    parse: fn(&str) -> Result<T, String>,
) -> Result<T, D::Error> {
    d.deserialize_any(WordVisitor { what, words, parse })
}

struct WordVisitor<T> {
    what: &'static str,
    words: Vec<&'static str>,
    parse: fn(&str) -> Result<T, String>,
}

impl<T> WordVisitor<T> {
    fn not_a_word<E: de::Error>(&self, got: &str) -> E {
        E::custom(format!(
            "expected one of {} ({}), got {got}",
            self.words.join(", "),
            self.what
        ))
    }
}

impl<'de, T> Visitor<'de> for WordVisitor<T> {
    type Value = T;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "one of {} ({})", self.words.join(", "), self.what)
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<T, E> {
        (self.parse)(v).map_err(E::custom)
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<T, E> {
        Err(self.not_a_word(&format!("`{v}`")))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<T, E> {
        Err(self.not_a_word(&format!("the number {v}")))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<T, E> {
        Err(self.not_a_word(&format!("the number {v}")))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<T, E> {
        Err(self.not_a_word(&format!("the number {v}")))
    }

    fn visit_unit<E: de::Error>(self) -> Result<T, E> {
        Err(self.not_a_word("nothing"))
    }

    fn visit_none<E: de::Error>(self) -> Result<T, E> {
        Err(self.not_a_word("nothing"))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, _: A) -> Result<T, A::Error> {
        Err(self.not_a_word("a list"))
    }

    fn visit_map<A: MapAccess<'de>>(self, _: A) -> Result<T, A::Error> {
        Err(self.not_a_word("a mapping"))
    }
}

display_and_parse!(SandboxMode, "sandbox mode", [
    SandboxMode::ReadOnly => "read-only",
    SandboxMode::WorkspaceWrite => "workspace-write",
    SandboxMode::DangerFullAccess => "danger-full-access",
]);
display_and_parse!(ApprovalPolicy, "approval policy", [
    ApprovalPolicy::Never => "never",
    ApprovalPolicy::Ask => "ask",
]);
display_and_parse!(Network, "network setting", [
    Network::Off => "off",
    Network::AllowList => "allow-list",
    Network::On => "on",
]);
display_and_parse!(UnixSockets, "unix socket setting", [
    UnixSockets::Block => "block",
    UnixSockets::Allow => "allow",
]);
display_and_parse!(CacheHome, "cache home setting", [
    CacheHome::Off => "off",
    CacheHome::PerWorkspace => "per-workspace",
]);
display_and_parse!(Decision, "decision", [
    Decision::Allow => "allow",
    Decision::Ask => "ask",
    Decision::Deny => "deny",
]);

impl fmt::Display for Guarantee {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.code())
    }
}

impl<'de> Deserialize<'de> for Guarantee {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let codes = Guarantee::ALL.iter().map(|g| g.code()).collect();
        deserialize_word(d, "guarantee", codes, str::parse)
    }
}

impl FromStr for Guarantee {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Guarantee::ALL
            .into_iter()
            .find(|g| g.code() == s)
            .ok_or_else(|| {
                let codes: Vec<&str> = Guarantee::ALL.iter().map(|g| g.code()).collect();
                unknown_word("guarantee", s, &codes)
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decisions_order_strictest_last() {
        assert!(Decision::Allow < Decision::Ask && Decision::Ask < Decision::Deny);
        assert_eq!(
            [Decision::Ask, Decision::Deny, Decision::Allow]
                .into_iter()
                .max(),
            Some(Decision::Deny)
        );
    }

    #[test]
    fn modes_order_tightest_first() {
        assert!(SandboxMode::ReadOnly < SandboxMode::WorkspaceWrite);
        assert!(SandboxMode::WorkspaceWrite < SandboxMode::DangerFullAccess);
        assert!(ApprovalPolicy::Never < ApprovalPolicy::Ask);
        assert!(Network::Off < Network::AllowList && Network::AllowList < Network::On);
    }

    #[test]
    fn guarantee_codes_round_trip() {
        for g in Guarantee::ALL {
            assert_eq!(g.code().parse::<Guarantee>(), Ok(g));
        }
        assert!("G-NOPE".parse::<Guarantee>().is_err());
    }

    #[test]
    fn unknown_mode_names_the_input() {
        let err = "write-all".parse::<SandboxMode>().unwrap_err();
        assert!(err.contains("`write-all`"), "{err}");
    }
}
