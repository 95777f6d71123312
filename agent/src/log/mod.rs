//! The session log: the single source of truth of a session (`shared/spec/agent.md`).
//!
//! - Every [`Event`] is stored in a [`Record`] envelope `{seq, time, type, data, hash}`;
//!   `seq` is contiguous from 0 and event 0 is the `session/header`.
//! - Each hash is an HMAC-SHA256 of the record and the previous hash under the session
//!   directory's key ([`chain`]), so `verify` finds edits, removals, reordering and forgeries.
//! - Two backends behind [`LogStore`]: JSONL (default) and SQLite (WAL). Both pass one
//!   conformance suite.
//! - Events are buffered and written in batches; [`SessionLog::barrier`] makes them durable
//!   (before each model request and each tool execution).
//! - Resuming repairs a crash: a torn last line is set aside, an open turn is closed with
//!   synthetic tool results and `turn/end {interrupted}` ([`Repair`]).
//! - A session can be read while it is appended to: the head is read before the log, so a
//!   growing log never looks cut short.
//! - [`timeline()`] is what a reviewer reads (`bridle log show`): the policy in force
//!   (`policy/effective`), each turn and why it ended, each call with what decided it, and
//!   the results of calls that were never dispatched under the calls they answer.

mod canonical;
pub mod chain;
mod compaction;
mod dir;
mod event;
mod head;
mod jsonl;
mod kinds;
mod listing;
mod progress;
mod record;
mod session;
mod sqlite;
mod store;
mod timeline;
mod verify;

pub use canonical::RawRecord;
pub use compaction::Window;
pub use dir::{NewSession, Repair, SessionDir, Verification, parse_id, turn_end_name};
pub use event::{
    DropReason, Event, EventKinds, ExecDecision, KNOWN_KINDS, NetDecision, PluginEvent, PolicyRule,
    PolicySummary, PromptSection, Reply, RequestHeader, SessionHeader, ToolCall, TurnEndReason,
    Usage,
};
pub use listing::SessionSummary;
pub use progress::{INTERRUPTED, NOT_STARTED, OUTCOME_UNKNOWN, OpenCall, Progress};
pub use record::{Record, Scanned, now_rfc3339, rfc3339};
pub use session::SessionLog;
#[cfg(test)]
pub(crate) use session::scratch_session;
pub use store::{Backend, Flow, LogStore, Stored, TornTail};
pub use timeline::{Approval, Call, Entry, Escalation, Step, Switch, Timeline, Turn, timeline};
