//! Where records are kept: one trait, two backends (JSONL and SQLite), one conformance suite
//! (`agent/tests/log_conformance.rs`).

use std::path::{Path, PathBuf};

use super::record::Record;
use crate::AgentError;

/// A backend that keeps a session's records in order.
pub trait LogStore: std::fmt::Debug + Send {
    /// The file the records are in.
    fn path(&self) -> &Path;

    /// Appends `records` (the next ones, in order) and makes them durable before returning.
    fn append(&mut self, records: &[Record]) -> Result<(), AgentError>;

    /// Every record, in order, and a torn tail if a crash left one (it is not an error: the
    /// events in it were never acted on).
    fn read_all(&mut self) -> Result<Stored, AgentError>;

    /// Moves a torn tail out of the log into a file beside it (never deleting it) and returns
    /// where it went; `None` when there was none.
    fn set_aside_torn_tail(&mut self) -> Result<Option<PathBuf>, AgentError>;
}

/// What a backend holds.
#[derive(Debug, Clone, PartialEq)]
pub struct Stored {
    pub records: Vec<Record>,
    /// Bytes after the last complete record that are not a record.
    pub torn: Option<TornTail>,
}

/// The incomplete end of a log a crash left.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TornTail {
    /// Where it starts in the file.
    pub offset: u64,
    /// How long it is.
    pub len: u64,
}

/// The two backends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Backend {
    /// One JSON object per line (the default): easy to read, export and diff.
    #[default]
    Jsonl,
    /// One row per event in an SQLite database in WAL mode.
    Sqlite,
}

impl Backend {
    /// Every backend, in the order a session directory looks for them.
    pub const ALL: [Self; 2] = [Self::Jsonl, Self::Sqlite];

    /// The file extension of this backend's logs.
    pub fn extension(self) -> &'static str {
        match self {
            Self::Jsonl => "jsonl",
            Self::Sqlite => "sqlite",
        }
    }

    /// The name used on the command line (`--store`).
    pub fn name(self) -> &'static str {
        self.extension()
    }

    /// Creates a new, empty log at `path` (which must not exist).
    pub fn create(self, path: &Path) -> Result<Box<dyn LogStore>, AgentError> {
        Ok(match self {
            Self::Jsonl => Box::new(super::jsonl::JsonlStore::create(path)?),
            Self::Sqlite => Box::new(super::sqlite::SqliteStore::create(path)?),
        })
    }

    /// Opens the existing log at `path`.
    pub fn open(self, path: &Path) -> Result<Box<dyn LogStore>, AgentError> {
        Ok(match self {
            Self::Jsonl => Box::new(super::jsonl::JsonlStore::open(path)?),
            Self::Sqlite => Box::new(super::sqlite::SqliteStore::open(path)?),
        })
    }
}

impl std::str::FromStr for Backend {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "jsonl" => Ok(Self::Jsonl),
            "sqlite" => Ok(Self::Sqlite),
            other => Err(format!(
                "unknown log store {other:?}: expected jsonl or sqlite"
            )),
        }
    }
}
