//! The on-disk shape of one profile layer, exactly as written. Every struct rejects unknown
//! keys; every value keeps the line and column it was read from.

use std::collections::BTreeMap;
use std::fmt;
use std::marker::PhantomData;

use serde::Deserialize;
use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_saphyr::Spanned;

use crate::units::{ByteSize, Count, Seconds};
use crate::vocab::{
    ApprovalPolicy, CacheHome, Decision, Guarantee, SandboxMode, UnixSockets, deserialize_word,
    unknown_word,
};

/// One profile layer.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawProfile {
    pub description: Option<Spanned<String>>,
    pub extends: Option<Spanned<String>>,
    pub tested_kernel_abi: Option<Spanned<u32>>,
    pub mode: Option<Spanned<SandboxMode>>,
    pub approval: Option<Spanned<ApprovalPolicy>>,
    pub network: Option<Spanned<crate::network::RawNetwork>>,
    pub unix_sockets: Option<Spanned<UnixSockets>>,
    pub readable_roots: Option<ListOp<String>>,
    pub writable_roots: Option<ListOp<String>>,
    pub protected_paths: Option<ListOp<String>>,
    pub masked_paths: Option<ListOp<String>>,
    pub limits: Option<RawLimits>,
    pub environment: Option<RawEnvironment>,
    pub cache_home: Option<RawCacheHome>,
    pub accept_missing: Option<ListOp<Guarantee>>,
    pub allow_dangerous_workspace_root: Option<Spanned<bool>>,
    pub rules: Option<RawRules>,
    pub agent: Option<crate::agent::RawAgent>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawLimits {
    pub processes: Option<Spanned<Count>>,
    pub memory: Option<Spanned<ByteSize>>,
    pub file_size: Option<Spanned<ByteSize>>,
    pub open_files: Option<Spanned<Count>>,
    pub cpu_time: Option<Spanned<Seconds>>,
    pub wall_time: Option<Spanned<Seconds>>,
    pub command_timeout: Option<Spanned<Seconds>>,
    pub command_timeout_max: Option<Spanned<Seconds>>,
    pub spill_size: Option<Spanned<ByteSize>>,
}

/// How the environment is inherited.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum EnvInherit {
    /// Only variables matching `allow` pass (then `scrub` removes secrets).
    AllowList,
    /// Every variable passes except those matching `scrub`.
    All,
}

impl<'de> Deserialize<'de> for EnvInherit {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        const WHAT: &str = "environment inheritance";
        const WORDS: [&str; 2] = ["allow-list", "all"];
        let parse = |s: &str| match s {
            "allow-list" => Ok(EnvInherit::AllowList),
            "all" => Ok(EnvInherit::All),
            other => Err(unknown_word(WHAT, other, &WORDS)),
        };
        deserialize_word(d, WHAT, WORDS.to_vec(), parse)
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawEnvironment {
    pub inherit: Option<Spanned<EnvInherit>>,
    pub allow: Option<ListOp<String>>,
    pub scrub: Option<ListOp<String>>,
    pub set: Option<BTreeMap<String, Spanned<String>>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawCacheHome {
    pub mode: Option<Spanned<CacheHome>>,
    pub paths: Option<ListOp<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawRules {
    pub commands: Option<ListOp<RawCommandRule>>,
    pub paths: Option<ListOp<RawPathRule>>,
}

/// A command token: one word, or a list of alternatives.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub(crate) enum RawToken {
    One(String),
    AnyOf(Vec<String>),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawCommandRule {
    pub id: Spanned<String>,
    pub prefix: Spanned<Vec<RawToken>>,
    pub decision: Spanned<Decision>,
    pub justification: Option<String>,
    #[serde(default)]
    pub examples: Vec<Spanned<String>>,
    #[serde(default)]
    pub counter_examples: Vec<Spanned<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawPathRule {
    pub id: Spanned<String>,
    pub pattern: Spanned<String>,
    pub decision: Spanned<Decision>,
    pub justification: Option<String>,
    #[serde(default)]
    pub examples: Vec<Spanned<String>>,
    #[serde(default)]
    pub counter_examples: Vec<Spanned<String>>,
}

/// How a layer changes a list from the layers below it.
///
/// - a plain YAML sequence appends its entries;
/// - `{append: [...], remove: [...]}` appends and/or removes entries (removal by value, or by
///   rule `id` for rule lists);
/// - `{replace: [...]}` discards everything below and starts over (alone: it cannot be combined).
#[derive(Debug)]
pub(crate) struct ListOp<T> {
    pub append: Vec<Spanned<T>>,
    pub remove: Vec<Spanned<String>>,
    pub replace: Option<Spanned<Vec<Spanned<T>>>>,
    /// Where the `replace`/`remove` keys were written, for error messages.
    pub op_keys: Vec<(&'static str, serde_saphyr::Location)>,
}

struct ListOpVisitor<T>(PhantomData<T>);

impl<'de, T: Deserialize<'de>> Visitor<'de> for ListOpVisitor<T> {
    type Value = ListOp<T>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a list (appended), or a mapping with `append`/`remove` or `replace`")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut append = Vec::new();
        while let Some(item) = seq.next_element::<Spanned<T>>()? {
            append.push(item);
        }
        Ok(ListOp {
            append,
            remove: Vec::new(),
            replace: None,
            op_keys: Vec::new(),
        })
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut op = ListOp {
            append: Vec::new(),
            remove: Vec::new(),
            replace: None,
            op_keys: Vec::new(),
        };
        let mut seen: Vec<&'static str> = Vec::new();
        while let Some(key) = map.next_key::<Spanned<String>>()? {
            let name: &'static str = match key.value.as_str() {
                "append" => "append",
                "remove" => "remove",
                "replace" => "replace",
                other => {
                    return Err(de::Error::custom(format!(
                        "unknown list operation `{other}` (expected `append`, `remove` or `replace`)"
                    )));
                }
            };
            if seen.contains(&name) {
                return Err(de::Error::custom(format!(
                    "list operation `{name}` given twice"
                )));
            }
            seen.push(name);
            op.op_keys.push((name, key.referenced));
            match name {
                "append" => op.append = map.next_value()?,
                "remove" => op.remove = map.next_value()?,
                _ => op.replace = Some(map.next_value()?),
            }
        }
        if op.replace.is_some() && seen.len() > 1 {
            return Err(de::Error::custom(
                "`replace` cannot be combined with `append` or `remove` in the same list",
            ));
        }
        if seen.is_empty() {
            return Err(de::Error::custom(
                "empty list operation: write `append`, `remove` or `replace`",
            ));
        }
        Ok(op)
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for ListOp<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(ListOpVisitor(PhantomData))
    }
}
