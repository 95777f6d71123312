//! The plugin host (`shared/spec/sessions.md`, "Plugins"). A [`Plugin`] registers, through a
//! [`Registrar`], tools, prompt sections, pre-step listeners, slash commands, event types with
//! their validators, and guards; the [`PluginHost`] keeps what each plugin registered under
//! its name, so [`PluginHost::unload`] removes exactly that. The loop asks the host for
//! sections, listeners and commands and knows no plugin by name.
//!
//! A plugin's configuration comes from the profile's `agent.plugins.NAME` (a
//! [`bridle_policy::ConfigNode`], every value with its file:line:col); each plugin parses it
//! strictly through [`Config`], so an unknown key, a wrong type or a missing key fails the
//! load of the whole profile naming the place.

mod build;
mod config;
mod host;
mod registrar;

use std::sync::Arc;

pub use build::{RuntimeFacts, Shipped, load, offered_tools};
pub use config::{Config, Fields};
pub use host::PluginHost;
pub use registrar::{EventValidator, Registrar};

use bridle_policy::Origin;

use crate::log::Event;

/// A plugin: a name, and what it registers for a given configuration.
pub trait Plugin: Send + Sync {
    /// Its name, as profiles spell it (`plan-mode`).
    fn name(&self) -> &str;

    /// Parses `config` (strictly) and registers what the plugin adds to a session.
    fn register(&self, registrar: &mut Registrar, config: &Config<'_>) -> Result<(), PluginError>;
}

/// A system-prompt section a plugin contributes: derived from the session log alone.
pub trait Section: Send + Sync {
    /// The section's name (`plan:policy`).
    fn name(&self) -> &str;

    /// Where it goes among the sections (lower first).
    fn order(&self) -> u32;

    /// The text the next request carries after `events` (the whole log), or `None` when the
    /// section contributes nothing.
    fn render(&self, events: &[(u64, Event)]) -> Option<String>;
}

/// Why a plugin could not be loaded, or a profile's `agent:` section not applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PluginError {
    /// The plugin's configuration is wrong.
    #[error("{at}: plugin `{plugin}`: {message}")]
    Config {
        at: Origin,
        plugin: String,
        message: String,
    },
    /// `agent.plugins` names a plugin bridle does not ship.
    #[error("{at}: `agent.plugins.{name}`: no such plugin (available: {available})")]
    UnknownPlugin {
        at: Origin,
        name: String,
        available: String,
    },
    /// `agent.tools.remove` names a tool the preset does not offer.
    #[error(
        "{at}: `agent.tools.remove`: `{name}` is not a tool of this preset (offered: {offered})"
    )]
    UnknownTool {
        at: Origin,
        name: String,
        offered: String,
    },
    /// A registration was refused (a name another plugin already took).
    #[error("plugin `{plugin}`: {message}")]
    Register { plugin: String, message: String },
}

/// A shared plugin, as the host keeps it.
pub type SharedPlugin = Arc<dyn Plugin>;

#[cfg(test)]
mod tests;
