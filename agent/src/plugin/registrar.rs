//! What one plugin registers: collected by a [`Registrar`] while the plugin's `register`
//! runs, then kept by the host under the plugin's name.

use std::sync::Arc;

use bridle_exec::pipeline::Guard;
use bridle_exec::tool::Tool;

use super::Section;
use crate::session::{Command, PreStep};

/// Checks the data of an event type a plugin declares; `Err` says what is wrong with it.
pub type EventValidator = Arc<dyn Fn(&serde_json::Value) -> Result<(), String> + Send + Sync>;

/// The registrations of one plugin, in the order made.
#[derive(Default)]
pub struct Registrar {
    pub(crate) tools: Vec<Arc<dyn Tool>>,
    pub(crate) sections: Vec<Arc<dyn Section>>,
    /// Listeners asked ahead of every other listener (plan mode's appender, PM8).
    pub(crate) first_listeners: Vec<Arc<dyn PreStep>>,
    pub(crate) listeners: Vec<Arc<dyn PreStep>>,
    pub(crate) commands: Vec<Arc<dyn Command>>,
    pub(crate) event_kinds: Vec<(String, EventValidator)>,
    pub(crate) guards: Vec<Arc<dyn Guard>>,
}

impl std::fmt::Debug for Registrar {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registrar")
            .field(
                "tools",
                &self.tools.iter().map(|t| t.name()).collect::<Vec<_>>(),
            )
            .field(
                "sections",
                &self.sections.iter().map(|s| s.name()).collect::<Vec<_>>(),
            )
            .field(
                "commands",
                &self.commands.iter().map(|c| c.name()).collect::<Vec<_>>(),
            )
            .field(
                "event_kinds",
                &self.event_kinds.iter().map(|(k, _)| k).collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}

impl Registrar {
    /// A tool, offered to the model (through the one pipeline, like every tool).
    pub fn tool(&mut self, tool: Arc<dyn Tool>) {
        self.tools.push(tool);
    }

    /// A system-prompt section.
    pub fn section(&mut self, section: Arc<dyn Section>) {
        self.sections.push(section);
    }

    /// A pre-step listener, asked after those registered before it.
    pub fn pre_step(&mut self, listener: Arc<dyn PreStep>) {
        self.listeners.push(listener);
    }

    /// A pre-step listener asked ahead of every ordinary listener (so that it sees every
    /// candidate step, and its `accepted` comes first).
    pub fn pre_step_first(&mut self, listener: Arc<dyn PreStep>) {
        self.first_listeners.push(listener);
    }

    /// A slash command.
    pub fn command(&mut self, command: Arc<dyn Command>) {
        self.commands.push(command);
    }

    /// An event type (`kind`, as written in the log) and the validator of its data.
    pub fn event_kind(&mut self, kind: &str, validator: EventValidator) {
        self.event_kinds.push((kind.to_owned(), validator));
    }

    /// A guard (deny-only, final), run by the pipeline after rules and approvals.
    pub fn guard(&mut self, guard: Arc<dyn Guard>) {
        self.guards.push(guard);
    }
}
