//! The `network:` key of a layer: its scalar or mapping form, and how a layer's allow and deny
//! lists combine with the ones below it.

use std::collections::BTreeMap;
use std::fmt;
use std::net::IpAddr;

use serde::Deserialize;
use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_saphyr::Spanned;

use super::hosts::{HostPattern, check_name};
use crate::error::PolicyError;
use crate::merge::{Applier, Direction};
use crate::origin::Sourced;
use crate::policy::Policy;
use crate::raw::ListOp;
use crate::vocab::Network;

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

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
        Err(not_a_setting(&format!("the number {v}")))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
        Err(not_a_setting(&format!("the number {v}")))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
        Err(not_a_setting(&format!("the number {v}")))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, _: A) -> Result<Self::Value, A::Error> {
        Err(not_a_setting("a list"))
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        RawNetworkTable::deserialize(de::value::MapAccessDeserializer::new(map))
            .map(|t| RawNetwork::Table(Box::new(t)))
    }
}

/// The message for a `network:` value that is neither a word nor a mapping.
fn not_a_setting<E: de::Error>(got: &str) -> E {
    E::custom(format!(
        "expected one of off, allow-list, on (network setting), or a mapping with mode, \
         allow, deny, resolve; got {got}"
    ))
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
pub(super) fn canonical_op(
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
