//! The agent crate's error type: one variant per failing operation, each naming its input.

use std::path::PathBuf;

/// What went wrong in the agent crate (today: the session log and its directory).
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    #[error("cannot create the session directory {}: {source}", dir.display())]
    CreateSessionDir {
        dir: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot list the session directory {}: {source}", dir.display())]
    ListSessionDir {
        dir: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot read the log key {}: {reason}", path.display())]
    ReadLogKey { path: PathBuf, reason: String },
    #[error("cannot create the log key {}: {source}", path.display())]
    CreateLogKey {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot create the session log {}: {reason}", path.display())]
    CreateLog { path: PathBuf, reason: String },
    #[error("cannot open the session log {}: {reason}", path.display())]
    OpenLog { path: PathBuf, reason: String },
    #[error("cannot read the session log {}: {reason}", path.display())]
    ReadLog { path: PathBuf, reason: String },
    /// The log's file is there and readable but damaged: not what bridle writes at all (a
    /// truncated or overwritten database), as opposed to one that cannot be read.
    #[error("session log {} is corrupt: {reason}", path.display())]
    CorruptLog { path: PathBuf, reason: String },
    #[error("cannot append to the session log {}: {reason}", path.display())]
    AppendLog { path: PathBuf, reason: String },
    #[error("session log {}: event {seq}: {reason}", path.display())]
    ParseEvent {
        path: PathBuf,
        seq: u64,
        reason: String,
    },
    #[error("session log {}, line {line}: {reason}", path.display())]
    ParseLine {
        path: PathBuf,
        line: u64,
        reason: String,
    },
    #[error("session log {}: event {seq} has the unknown type {kind:?} and is not marked ignorable", path.display())]
    UnknownEvent {
        path: PathBuf,
        seq: u64,
        kind: String,
    },
    #[error("session log {} fails verification at event {seq}: {what}", path.display())]
    VerifyLog {
        path: PathBuf,
        seq: u64,
        what: String,
    },
    #[error("no session {id:?} in {}", dir.display())]
    FindSession { id: String, dir: PathBuf },
    #[error("invalid session id {id:?}: ids are letters, digits and '-', at most 64 characters")]
    ParseSessionId { id: String },
    #[error("cannot fork session {id:?} at event {seq}: {reason}")]
    ForkSession {
        id: String,
        seq: u64,
        reason: String,
    },
    #[error("cannot record {kind} in {}: {reason}", path.display())]
    RecordEvent {
        path: PathBuf,
        kind: String,
        reason: String,
    },
    #[error("refusing the session directory {}: {reason}", dir.display())]
    CheckSessionDir { dir: PathBuf, reason: String },
    /// A plugin's tools or guards could not be added to the tool pipeline: running without
    /// them (a guard missing) is not an option.
    #[error("cannot attach the plugins to the tool pipeline: {source}")]
    AttachPlugins {
        #[source]
        source: crate::plugin::PluginError,
    },
}
