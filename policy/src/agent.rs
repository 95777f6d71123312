//! The `agent:` key of a profile: which preset of tools and plugins a session starts from,
//! each plugin's configuration (or `off`), and tools removed. Plugin configurations are not
//! interpreted here: each stays a [`ConfigNode`] tree with the line and column of every value,
//! handed to the agent, where each plugin parses its own configuration strictly. YAML never
//! leaves this crate.
//!
//! Combine rules: `preset` is a scalar (a layer that sets it replaces it); `plugins` is merged
//! plugin by plugin, and a layer that names a plugin replaces that plugin's whole
//! configuration (no deep merge: a plugin sees exactly one layer's configuration);
//! `tools.remove` is a list (appended, `{append, remove}`, `{replace}` as elsewhere). A
//! workspace layer may only take away: `preset: minimal`, `plugins: {NAME: off}`, and entries
//! appended to `tools.remove`.

use std::collections::BTreeMap;
use std::fmt;

use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Serialize};
use serde_saphyr::Spanned;

use crate::error::PolicyError;
use crate::merge::{Applier, Direction};
use crate::origin::{Origin, Sourced};
use crate::raw::ListOp;

/// Which tools and plugins a session starts from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Preset {
    /// The persistent terminal and `str_replace_editor`, no plan mode.
    Minimal,
    /// Every shipped tool and plugin (plan mode included).
    Standard,
}

impl<'de> Deserialize<'de> for Preset {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        const WHAT: &str = "preset";
        const WORDS: [&str; 2] = ["minimal", "standard"];
        let parse = |s: &str| match s {
            "minimal" => Ok(Preset::Minimal),
            "standard" => Ok(Preset::Standard),
            other => Err(crate::vocab::unknown_word(WHAT, other, &WORDS)),
        };
        crate::vocab::deserialize_word(d, WHAT, WORDS.to_vec(), parse)
    }
}

impl fmt::Display for Preset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Preset::Minimal => "minimal",
            Preset::Standard => "standard",
        })
    }
}

/// A plugin's setting in the effective policy.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PluginSetting {
    /// `NAME: off`: the plugin is not loaded.
    Off,
    /// The plugin's configuration, as written (the plugin parses it).
    Config(ConfigNode),
}

/// One value of a plugin's configuration, with where it was written.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ConfigNode {
    /// The value.
    pub value: ConfigValue,
    /// Where it was written.
    pub origin: Origin,
}

/// The shape of a configuration value.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "type", content = "value")]
pub enum ConfigValue {
    /// `~` or nothing.
    Null,
    /// `true` / `false`.
    Bool(bool),
    /// An integer.
    Int(i64),
    /// A float.
    Float(f64),
    /// A string.
    String(String),
    /// A sequence.
    List(Vec<ConfigNode>),
    /// A mapping with string keys, in the order written.
    Map(Vec<(Sourced<String>, ConfigNode)>),
}

impl ConfigValue {
    /// What kind of value this is, for error messages.
    pub fn kind(&self) -> &'static str {
        match self {
            ConfigValue::Null => "null",
            ConfigValue::Bool(_) => "a boolean",
            ConfigValue::Int(_) => "an integer",
            ConfigValue::Float(_) => "a number",
            ConfigValue::String(_) => "a string",
            ConfigValue::List(_) => "a list",
            ConfigValue::Map(_) => "a mapping",
        }
    }
}

/// The effective `agent:` section.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AgentSection {
    /// `agent.preset` (`standard` by default).
    pub preset: Sourced<Preset>,
    /// `agent.plugins`, by plugin name.
    pub plugins: BTreeMap<String, Sourced<PluginSetting>>,
    /// `agent.tools.remove`: tools the session does not offer.
    pub remove_tools: Vec<Sourced<String>>,
}

impl Default for AgentSection {
    fn default() -> Self {
        Self {
            preset: Sourced::builtin(Preset::Standard),
            plugins: BTreeMap::new(),
            remove_tools: Vec::new(),
        }
    }
}

impl AgentSection {
    /// `(key, value, origin)` for `bridle policy show`.
    pub(crate) fn entries(&self) -> Vec<(String, String, Origin)> {
        let mut out = vec![(
            "agent.preset".to_owned(),
            self.preset.value.to_string(),
            self.preset.origin.clone(),
        )];
        for (name, setting) in &self.plugins {
            let value = match &setting.value {
                PluginSetting::Off => "off".to_owned(),
                PluginSetting::Config(node) => render(&node.value),
            };
            out.push((
                format!("agent.plugins.{name}"),
                value,
                setting.origin.clone(),
            ));
        }
        if self.remove_tools.is_empty() {
            out.push((
                "agent.tools.remove".to_owned(),
                "(none)".to_owned(),
                Origin::Builtin,
            ));
        }
        for tool in &self.remove_tools {
            out.push((
                "agent.tools.remove".to_owned(),
                tool.value.clone(),
                tool.origin.clone(),
            ));
        }
        out
    }
}

/// A configuration value in flow YAML (one line, for `policy show`).
fn render(value: &ConfigValue) -> String {
    match value {
        ConfigValue::Null => "~".to_owned(),
        ConfigValue::Bool(b) => b.to_string(),
        ConfigValue::Int(i) => i.to_string(),
        ConfigValue::Float(f) => f.to_string(),
        ConfigValue::String(s) => format!("{s:?}"),
        ConfigValue::List(items) => {
            let items: Vec<String> = items.iter().map(|n| render(&n.value)).collect();
            format!("[{}]", items.join(", "))
        }
        ConfigValue::Map(entries) => {
            let entries: Vec<String> = entries
                .iter()
                .map(|(k, v)| format!("{}: {}", k.value, render(&v.value)))
                .collect();
            format!("{{{}}}", entries.join(", "))
        }
    }
}

/// `agent:` as written in one layer.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawAgent {
    pub preset: Option<Spanned<Preset>>,
    pub plugins: Option<BTreeMap<String, Spanned<RawNode>>>,
    pub tools: Option<RawAgentTools>,
}

/// `agent.tools` as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawAgentTools {
    pub remove: Option<ListOp<String>>,
}

/// Any YAML value, every part with its location.
#[derive(Debug)]
pub(crate) enum RawNode {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    String(String),
    List(Vec<Spanned<RawNode>>),
    Map(Vec<(Spanned<String>, Spanned<RawNode>)>),
}

struct RawNodeVisitor;

impl<'de> Visitor<'de> for RawNodeVisitor {
    type Value = RawNode;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a plugin configuration (a mapping, a scalar or a list)")
    }

    fn visit_unit<E: de::Error>(self) -> Result<RawNode, E> {
        Ok(RawNode::Null)
    }

    fn visit_none<E: de::Error>(self) -> Result<RawNode, E> {
        Ok(RawNode::Null)
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<RawNode, E> {
        Ok(RawNode::Bool(v))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<RawNode, E> {
        Ok(RawNode::Int(v))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<RawNode, E> {
        i64::try_from(v)
            .map(RawNode::Int)
            .map_err(|_| E::custom(format!("integer {v} is too large")))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<RawNode, E> {
        Ok(RawNode::Float(v))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<RawNode, E> {
        Ok(RawNode::String(v.to_owned()))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<RawNode, E> {
        Ok(RawNode::String(v))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<RawNode, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element::<Spanned<RawNode>>()? {
            items.push(item);
        }
        Ok(RawNode::List(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<RawNode, A::Error> {
        let mut entries = Vec::new();
        while let Some(key) = map.next_key::<Spanned<String>>()? {
            let value = map.next_value::<Spanned<RawNode>>()?;
            entries.push((key, value));
        }
        Ok(RawNode::Map(entries))
    }
}

impl<'de> Deserialize<'de> for RawNode {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(RawNodeVisitor)
    }
}

impl Applier<'_> {
    fn node(&self, raw: Spanned<RawNode>) -> ConfigNode {
        let origin = self.at(&raw.referenced);
        let value = match raw.value {
            RawNode::Null => ConfigValue::Null,
            RawNode::Bool(b) => ConfigValue::Bool(b),
            RawNode::Int(i) => ConfigValue::Int(i),
            RawNode::Float(f) => ConfigValue::Float(f),
            RawNode::String(s) => ConfigValue::String(s),
            RawNode::List(items) => {
                ConfigValue::List(items.into_iter().map(|i| self.node(i)).collect())
            }
            RawNode::Map(entries) => ConfigValue::Map(
                entries
                    .into_iter()
                    .map(|(k, v)| {
                        let key = Sourced::new(k.value, self.at(&k.referenced));
                        (key, self.node(v))
                    })
                    .collect(),
            ),
        };
        ConfigNode { value, origin }
    }

    /// Applies one layer's `agent:` (see the module's combine rules).
    pub(crate) fn agent(
        &self,
        section: &mut AgentSection,
        raw: Option<RawAgent>,
    ) -> Result<(), PolicyError> {
        let Some(raw) = raw else { return Ok(()) };
        if let Some(preset) = raw.preset {
            // Minimal < standard: a workspace layer may only choose the smaller preset.
            self.scalar(&mut section.preset, Some(preset), "agent.preset")?;
        }
        for (name, value) in raw.plugins.unwrap_or_default() {
            let key = format!("agent.plugins.{name}");
            if name.is_empty() {
                return Err(self.invalid(&value.referenced, &key, "an empty plugin name"));
            }
            let off = matches!(&value.value, RawNode::String(s) if s == "off");
            if self.tighten_only() && !off {
                return Err(self.widens(
                    &value.referenced,
                    &key,
                    "a workspace layer may only turn plugins off (`off`), not add or configure them",
                ));
            }
            let origin = self.at(&value.referenced);
            let setting = if off {
                PluginSetting::Off
            } else {
                PluginSetting::Config(self.node(value))
            };
            section.plugins.insert(name, Sourced::new(setting, origin));
        }
        if let Some(op) = raw.tools.and_then(|t| t.remove) {
            // Entries take tools away: a workspace layer may only add to the list.
            self.list(
                &mut section.remove_tools,
                op,
                "agent.tools.remove",
                Direction::GrowOnly,
                Clone::clone,
                |name, loc| {
                    if name.trim().is_empty() {
                        Err(self.invalid(loc, "agent.tools.remove", "an empty tool name"))
                    } else {
                        Ok(())
                    }
                },
            )?;
        }
        Ok(())
    }
}
