//! A profile's `agent:` section made into a host: the preset's tools minus the removed ones,
//! the preset's plugins minus those turned `off`, plus those configured, each loaded with its
//! configuration.

use std::sync::Arc;

use bridle_policy::{AgentSection, PluginSetting, Preset};

use super::{Config, Plugin, PluginError, PluginHost};

pub use crate::plugins::runtime_context::RuntimeFacts;

/// The tools of the `minimal` preset: the persistent terminal and the file editor.
const MINIMAL_TOOLS: &[&str] = &["terminal", "str_replace_editor"];

/// The plugins bridle ships, and which preset loads each.
#[derive(Debug, Clone)]
pub struct Shipped {
    facts: RuntimeFacts,
}

impl Shipped {
    /// The shipped plugins for a session with `facts`.
    pub fn new(facts: RuntimeFacts) -> Self {
        Self { facts }
    }

    /// Every shipped plugin, in load order, and whether `preset` loads it by default.
    fn all(&self, preset: Preset) -> Vec<(Arc<dyn Plugin>, bool)> {
        vec![
            (
                Arc::new(crate::plugins::runtime_context::RuntimeContext::new(
                    self.facts.clone(),
                )) as Arc<dyn Plugin>,
                true,
            ),
            (
                Arc::new(crate::plan_mode::PlanModePlugin),
                preset == Preset::Standard,
            ),
        ]
    }
}

/// The shipped tools `preset` offers, in the order shown to the model.
pub fn offered_tools(preset: Preset) -> Vec<&'static str> {
    match preset {
        Preset::Minimal => MINIMAL_TOOLS.to_vec(),
        Preset::Standard => bridle_exec::schemas::TOOLS.to_vec(),
    }
}

/// The host for a profile's `agent:` section. Every error names the file:line:col of the
/// value at fault.
pub fn load(section: &AgentSection, shipped: &Shipped) -> Result<PluginHost, PluginError> {
    let preset = section.preset.value;
    let mut offered: Vec<String> = offered_tools(preset)
        .into_iter()
        .map(str::to_owned)
        .collect();
    for removed in &section.remove_tools {
        let before = offered.len();
        offered.retain(|t| *t != removed.value);
        if offered.len() == before {
            return Err(PluginError::UnknownTool {
                at: removed.origin.clone(),
                name: removed.value.clone(),
                offered: offered_tools(preset).join(", "),
            });
        }
    }
    let plugins = shipped.all(preset);
    for (name, setting) in &section.plugins {
        if !plugins.iter().any(|(p, _)| p.name() == name) {
            return Err(PluginError::UnknownPlugin {
                at: setting.origin.clone(),
                name: name.clone(),
                available: plugins
                    .iter()
                    .map(|(p, _)| p.name().to_owned())
                    .collect::<Vec<_>>()
                    .join(", "),
            });
        }
    }
    let host = PluginHost::offering(offered);
    for (plugin, by_default) in &plugins {
        let node = match section.plugins.get(plugin.name()).map(|s| &s.value) {
            Some(PluginSetting::Off) => continue,
            Some(PluginSetting::Config(node)) => Some(node),
            None if *by_default => None,
            None => continue,
        };
        host.load(plugin.as_ref(), &Config::new(plugin.name(), node))?;
    }
    Ok(host)
}
