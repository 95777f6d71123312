//! The registry of a pipeline: its tools and guards, each with the owner that registered it
//! (`None` for the session's own), so that unloading a plugin removes everything it added.
//! Interior mutability: plugins register while the session runs, through a shared pipeline.

use std::sync::{Arc, RwLock};

use crate::pipeline::Guard;
use crate::tool::Tool;

/// Entries with the owner that registered each (`None`: the session's own).
type Owned<T> = RwLock<Vec<(Option<String>, Arc<T>)>>;

/// Tools and guards, in registration order.
#[derive(Default)]
pub struct Registry {
    tools: Owned<dyn Tool>,
    guards: Owned<dyn Guard>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry")
            .field("tools", &self.names())
            .finish_non_exhaustive()
    }
}

fn read<T>(l: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    l.read().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn write<T>(l: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    l.write().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Why a registration was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegistryError {
    /// Another tool has this name.
    #[error("a tool named `{0}` is already registered")]
    DuplicateTool(String),
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Registry {
        Registry::default()
    }

    /// Adds `tool`, owned by `owner` (a plugin's name, or `None`).
    pub fn add_tool(&self, owner: Option<&str>, tool: Arc<dyn Tool>) -> Result<(), RegistryError> {
        let mut tools = write(&self.tools);
        if tools.iter().any(|(_, t)| t.name() == tool.name()) {
            return Err(RegistryError::DuplicateTool(tool.name().to_owned()));
        }
        tools.push((owner.map(str::to_owned), tool));
        Ok(())
    }

    /// Removes the tool `name` (a profile's `tools: {remove: [...]}`); whether it was there.
    pub fn remove_tool(&self, name: &str) -> bool {
        let mut tools = write(&self.tools);
        let before = tools.len();
        tools.retain(|(_, t)| t.name() != name);
        tools.len() != before
    }

    /// Adds `guard`, owned by `owner`.
    pub fn add_guard(&self, owner: Option<&str>, guard: Arc<dyn Guard>) {
        write(&self.guards).push((owner.map(str::to_owned), guard));
    }

    /// Removes everything `owner` registered.
    pub fn unload(&self, owner: &str) {
        write(&self.tools).retain(|(o, _)| o.as_deref() != Some(owner));
        write(&self.guards).retain(|(o, _)| o.as_deref() != Some(owner));
    }

    /// The tool `name`.
    pub fn tool(&self, name: &str) -> Option<Arc<dyn Tool>> {
        read(&self.tools)
            .iter()
            .find(|(_, t)| t.name() == name)
            .map(|(_, t)| Arc::clone(t))
    }

    /// Every tool, in order.
    pub fn tools(&self) -> Vec<Arc<dyn Tool>> {
        read(&self.tools)
            .iter()
            .map(|(_, t)| Arc::clone(t))
            .collect()
    }

    /// The tools' names, in order.
    pub fn names(&self) -> Vec<String> {
        read(&self.tools)
            .iter()
            .map(|(_, t)| t.name().to_owned())
            .collect()
    }

    /// Every guard, in order.
    pub fn guards(&self) -> Vec<Arc<dyn Guard>> {
        read(&self.guards)
            .iter()
            .map(|(_, g)| Arc::clone(g))
            .collect()
    }
}
