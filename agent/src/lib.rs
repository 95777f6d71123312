//! bridle's agent loop: the session event log, the turn/step lifecycle, the tool pipeline,
//! model adapters and plugins (plan mode). Depends on `exec` and `policy`, never on `sandbox`.
//!
//! Built so far: the session log ([`log`]), the single source of truth of a session.
#![forbid(unsafe_code)]

mod error;
pub mod front;
pub mod log;
pub mod model;
pub mod plan_mode;
pub mod tools;
pub mod transcript;
mod turn;

pub use turn::{Agent, AgentConfig, TurnReport};

pub use error::AgentError;
