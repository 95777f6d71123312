//! The host: the loaded plugins and what each registered. The loop asks it for the sections
//! of the next request, the pre-step listeners and the commands; the pipeline gets the
//! plugins' tools and guards when the agent attaches the host to it.

use std::sync::{Arc, RwLock};

use bridle_exec::pipeline::Guard;
use bridle_exec::tool::Tool;

use super::{Config, Plugin, PluginError, Registrar};
use crate::log::{Event, PromptSection};
use crate::session::{Command, PreStep};
use crate::tools::ToolHost;

/// Pre-step listeners, in the order they are asked.
pub type Listeners = Vec<Arc<dyn PreStep>>;

/// One loaded plugin.
struct Loaded {
    name: String,
    registered: Registrar,
}

/// The loaded plugins, in load order.
#[derive(Default)]
pub struct PluginHost {
    loaded: RwLock<Vec<Loaded>>,
    /// The shipped tools a session offers (the preset's, minus the profile's removals);
    /// `None`: every tool the pipeline has.
    offered: Option<Vec<String>>,
}

impl std::fmt::Debug for PluginHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PluginHost")
            .field("plugins", &self.names())
            .field("offered", &self.offered)
            .finish()
    }
}

fn read<T>(l: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    l.read().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn write<T>(l: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    l.write().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl PluginHost {
    /// A host with no plugins, offering every tool of the pipeline.
    pub fn new() -> Self {
        Self::default()
    }

    /// A host whose session offers only the shipped tools `offered` (plus plugins' tools).
    pub fn offering(offered: Vec<String>) -> Self {
        Self {
            loaded: RwLock::default(),
            offered: Some(offered),
        }
    }

    /// Loads `plugin` with `config`; a plugin of the same name is refused.
    pub fn load(&self, plugin: &dyn Plugin, config: &Config<'_>) -> Result<(), PluginError> {
        let name = plugin.name().to_owned();
        if self.names().contains(&name) {
            return Err(PluginError::Register {
                plugin: name,
                message: "a plugin of this name is already loaded".to_owned(),
            });
        }
        let mut registered = Registrar::default();
        plugin.register(&mut registered, config)?;
        let mut loaded = write(&self.loaded);
        for other in loaded.iter() {
            let clash = registered.commands.iter().find(|c| {
                other
                    .registered
                    .commands
                    .iter()
                    .any(|o| o.name() == c.name())
            });
            if let Some(c) = clash {
                return Err(PluginError::Register {
                    plugin: name,
                    message: format!("the command `/{}` belongs to `{}`", c.name(), other.name),
                });
            }
        }
        loaded.push(Loaded { name, registered });
        Ok(())
    }

    /// Removes everything plugin `name` registered (here and, through `tools`, its tools and
    /// guards in the pipeline); whether it was loaded.
    pub fn unload(&self, name: &str, tools: &dyn ToolHost) -> bool {
        let mut loaded = write(&self.loaded);
        let before = loaded.len();
        loaded.retain(|l| l.name != name);
        tools.unload(name);
        loaded.len() != before
    }

    /// The loaded plugins' names, in load order.
    pub fn names(&self) -> Vec<String> {
        read(&self.loaded).iter().map(|l| l.name.clone()).collect()
    }

    /// Gives the pipeline the plugins' tools and guards (each owned by its plugin), and takes
    /// away the shipped tools the session does not offer.
    pub fn attach(&self, tools: &dyn ToolHost) -> Result<(), PluginError> {
        if let Some(offered) = &self.offered {
            for schema in tools.schemas() {
                if let Some(name) = schema.get("name").and_then(serde_json::Value::as_str)
                    && !offered.iter().any(|o| o == name)
                {
                    tools.remove_tool(name);
                }
            }
        }
        for loaded in read(&self.loaded).iter() {
            let err = |message: String| PluginError::Register {
                plugin: loaded.name.clone(),
                message,
            };
            for tool in &loaded.registered.tools {
                tools
                    .add_tool(&loaded.name, Arc::clone(tool))
                    .map_err(err)?;
            }
            for guard in &loaded.registered.guards {
                tools
                    .add_guard(&loaded.name, Arc::clone(guard))
                    .map_err(err)?;
            }
        }
        Ok(())
    }

    /// The sections the next request carries after `events`, in registration order (the
    /// caller sorts them by their order).
    pub fn sections(&self, events: &[(u64, Event)]) -> Vec<PromptSection> {
        read(&self.loaded)
            .iter()
            .flat_map(|l| l.registered.sections.iter())
            .filter_map(|s| {
                s.render(events).map(|text| PromptSection {
                    name: s.name().to_owned(),
                    order: s.order(),
                    text,
                })
            })
            .collect()
    }

    /// The listeners asked ahead of all others, then the ordinary ones, each in load order.
    pub fn listeners(&self) -> (Listeners, Listeners) {
        let loaded = read(&self.loaded);
        let collect = |pick: fn(&Registrar) -> &Vec<Arc<dyn PreStep>>| {
            loaded
                .iter()
                .flat_map(|l| pick(&l.registered).iter().cloned())
                .collect()
        };
        (collect(|r| &r.first_listeners), collect(|r| &r.listeners))
    }

    /// The slash commands.
    pub fn commands(&self) -> Vec<Arc<dyn Command>> {
        read(&self.loaded)
            .iter()
            .flat_map(|l| l.registered.commands.iter().cloned())
            .collect()
    }

    /// The tools the plugins registered.
    pub fn tools(&self) -> Vec<Arc<dyn Tool>> {
        read(&self.loaded)
            .iter()
            .flat_map(|l| l.registered.tools.iter().cloned())
            .collect()
    }

    /// The guards the plugins registered.
    pub fn guards(&self) -> Vec<Arc<dyn Guard>> {
        read(&self.loaded)
            .iter()
            .flat_map(|l| l.registered.guards.iter().cloned())
            .collect()
    }

    /// Whether a loaded plugin declares the event type `kind`.
    pub fn declares(&self, kind: &str) -> bool {
        read(&self.loaded)
            .iter()
            .any(|l| l.registered.event_kinds.iter().any(|(k, _)| k == kind))
    }

    /// Checks `data` of an event of type `kind` against the validator of the plugin that
    /// declares it; a kind no loaded plugin declares is refused (fail closed).
    pub fn validate(&self, kind: &str, data: &serde_json::Value) -> Result<(), String> {
        let loaded = read(&self.loaded);
        let validator = loaded
            .iter()
            .flat_map(|l| l.registered.event_kinds.iter())
            .find(|(k, _)| k == kind)
            .map(|(_, v)| Arc::clone(v));
        drop(loaded);
        match validator {
            Some(v) => v(data).map_err(|e| format!("event `{kind}`: {e}")),
            None => Err(format!(
                "event `{kind}`: no loaded plugin declares this event type"
            )),
        }
    }
}

/// The loaded plugins' event types, for the session log (read and written through it).
impl crate::log::EventKinds for PluginHost {
    fn declares(&self, kind: &str) -> bool {
        PluginHost::declares(self, kind)
    }

    fn validate(&self, kind: &str, data: &serde_json::Value) -> Result<(), String> {
        PluginHost::validate(self, kind, data)
    }
}
