//! Where records are kept: one trait, two backends (JSONL and SQLite), one conformance suite
//! (`agent/tests/log_conformance.rs`).

use std::path::{Path, PathBuf};

use super::record::{Record, Scanned};
use crate::AgentError;

/// A backend that keeps a session's records in order.
pub trait LogStore: std::fmt::Debug + Send {
    /// The file the records are in.
    fn path(&self) -> &Path;

    /// Appends `records` (the next ones, in order) and makes them durable before returning.
    fn append(&mut self, records: &[Record]) -> Result<(), AgentError>;

    /// Reads the records in order, one at a time, handing each to `visit` as read: taken
    /// apart straight from its bytes when it is stored byte for byte as bridle writes it, else
    /// parsed (with its data's canonical bytes when it still is the stored form); nothing is
    /// kept, so memory does not grow with the log. When `visit` breaks, no further record is parsed or handed over (the rest is
    /// only read far enough to find a torn tail). Returns the trailing bytes after the last
    /// complete record that are not a record.
    fn scan(
        &mut self,
        visit: &mut dyn FnMut(Scanned<'_>) -> Flow,
    ) -> Result<Option<TornTail>, AgentError>;

    /// Every record, in order; which of them are not stored byte for byte as bridle writes
    /// them; and trailing bytes that are not a complete record (all held in memory: for small
    /// logs and tests; verification, resume and fork use [`LogStore::scan`]).
    fn read_all(&mut self) -> Result<Stored, AgentError> {
        let mut records = Vec::new();
        let mut noncanonical = Vec::new();
        let torn = self.scan(&mut |scanned| {
            let (record, canonical) = scanned.into_record();
            if !canonical {
                noncanonical.push(u64::try_from(records.len()).unwrap_or(u64::MAX));
            }
            records.push(record);
            Flow::Continue(())
        })?;
        Ok(Stored {
            records,
            noncanonical,
            torn,
        })
    }

    /// Moves trailing bytes that are not a complete record out of the log into a file beside
    /// it (never deleting them) and returns where they went; `None` when there were none.
    fn set_aside_torn_tail(&mut self) -> Result<Option<PathBuf>, AgentError>;
}

/// Whether [`LogStore::scan`] goes on to the next record.
pub type Flow = std::ops::ControlFlow<()>;

/// What a backend holds.
#[derive(Debug, Clone, PartialEq)]
pub struct Stored {
    pub records: Vec<Record>,
    /// Positions of records whose stored bytes differ from what bridle writes for them (the
    /// hash covers the parsed record, so such bytes were edited outside bridle).
    pub noncanonical: Vec<u64>,
    /// Bytes after the last complete record that are not a record.
    pub torn: Option<TornTail>,
}

/// Trailing bytes after the last complete record: a write a crash cut short, or bytes
/// someone added. Never part of the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TornTail {
    /// Where they start in the file.
    pub offset: u64,
    /// How many there are.
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

    /// Creates the log at `path` (which must not exist) holding `first`: the file appears
    /// under its name only once `first` is durable in it, so a crash never leaves a log
    /// without its header.
    pub fn create(self, path: &Path, first: &[Record]) -> Result<Box<dyn LogStore>, AgentError> {
        Ok(match self {
            Self::Jsonl => Box::new(super::jsonl::JsonlStore::create(path, first)?),
            Self::Sqlite => Box::new(super::sqlite::SqliteStore::create(path, first)?),
        })
    }

    /// Opens the existing log at `path` for appending.
    pub fn open(self, path: &Path) -> Result<Box<dyn LogStore>, AgentError> {
        Ok(match self {
            Self::Jsonl => Box::new(super::jsonl::JsonlStore::open(path, true)?),
            Self::Sqlite => Box::new(super::sqlite::SqliteStore::open(path, true)?),
        })
    }

    /// Opens the existing log at `path` for reading only (works on a read-only copy).
    pub fn open_read_only(self, path: &Path) -> Result<Box<dyn LogStore>, AgentError> {
        Ok(match self {
            Self::Jsonl => Box::new(super::jsonl::JsonlStore::open(path, false)?),
            Self::Sqlite => Box::new(super::sqlite::SqliteStore::open(path, false)?),
        })
    }
}

/// Makes a new name in `dir` durable (after creating, linking or renaming a file in it).
pub(crate) fn sync_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::File::open(dir)?.sync_all()
}

/// A temporary name beside `path` for building it before it is linked into place.
pub(crate) fn staging_name(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    path.with_file_name(format!(".{name}.{}-{nanos:08x}.new", std::process::id()))
}

/// Links the finished file `staged` into place at `path` (failing if `path` exists), removes
/// the staging name and makes the new name durable.
pub(crate) fn publish(staged: &Path, path: &Path) -> std::io::Result<()> {
    let linked = std::fs::hard_link(staged, path);
    let _ = std::fs::remove_file(staged);
    linked?;
    sync_dir(path.parent().unwrap_or(Path::new(".")))
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
