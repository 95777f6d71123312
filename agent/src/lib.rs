//! bridle's agent loop: the session event log, the turn/step lifecycle, the tool pipeline,
//! model adapters, the plugin host and the shipped plugins (plan mode, the runtime context). Depends on `exec` and `policy`, never on `sandbox`.
//!
//! The session log ([`log`]) is the single source of truth of a session; [`Agent`] runs its
//! turns; [`session::Session`] is the live handle front ends drive.
#![forbid(unsafe_code)]

mod error;
pub mod front;
pub mod log;
pub mod model;
pub mod plan_mode;
pub mod plugin;
pub mod plugins;
pub mod session;
pub mod tools;
pub mod transcript;
mod turn;

pub use turn::{Agent, AgentConfig, TurnReport};

pub use error::AgentError;
