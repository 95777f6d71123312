//! What front ends show of a session, derived from committed log events only: the lines of
//! `bridle run --json` and its progress lines on stderr ([`json`]), and the ACP
//! `session/update`s of `bridle acp` ([`acp`]). Pure functions of events (and a little state
//! folded from earlier events), so a live session and a replay of its log show the same.

pub mod acp;
pub mod json;
mod summary;

pub use summary::{call_summary, parsed_arguments};
