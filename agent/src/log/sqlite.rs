//! The SQLite backend: one row per event, WAL journal, every batch one synced transaction.

use std::path::{Path, PathBuf};

use rusqlite::{Connection, OpenFlags, params};

use super::canonical::{self, RawRecord};
use super::record::{Record, Scanned};
use super::store::{Flow, LogStore, TornTail, publish, staging_name};
use crate::AgentError;

/// Written in the `meta` table; a database without it is not a bridle log.
const FORMAT: &str = "bridle-log-v1";

/// A session log as an SQLite database.
#[derive(Debug)]
pub struct SqliteStore {
    path: PathBuf,
    conn: Connection,
}

impl SqliteStore {
    /// Creates `path` (which must not exist) holding `first` (mode 0600: logs hold tool
    /// output). The database is built under a staging name in one transaction and linked into
    /// place once it is complete.
    pub fn create(path: &Path, first: &[Record]) -> Result<Self, AgentError> {
        let fail = |reason: String| AgentError::CreateLog {
            path: path.to_owned(),
            reason,
        };
        let staged = staging_name(path);
        let built = build(&staged, first);
        if let Err(e) = built {
            let _ = std::fs::remove_file(&staged);
            return Err(fail(e));
        }
        publish(&staged, path).map_err(|e| fail(e.to_string()))?;
        Self::open(path, true)
    }

    /// Opens the existing log at `path`, for appending or for reading only.
    pub fn open(path: &Path, write: bool) -> Result<Self, AgentError> {
        let fail = |reason: String| AgentError::OpenLog {
            path: path.to_owned(),
            reason,
        };
        if !path.is_file() {
            return Err(fail("no such file".to_owned()));
        }
        let corrupt = |reason: String| AgentError::CorruptLog {
            path: path.to_owned(),
            reason,
        };
        let conn = if write {
            connect(path)
        } else {
            connect_read_only(path)
        }
        .map_err(|e| {
            if is_damage(&e) {
                corrupt(e.to_string())
            } else {
                fail(e.to_string())
            }
        })?;
        let format: String = conn
            .query_row("SELECT value FROM meta WHERE key = 'format'", [], |row| {
                row.get(0)
            })
            .map_err(|e| match e {
                e if is_damage(&e) => corrupt(e.to_string()),
                // A database without the marker (no `meta` table, no row, a value that is not
                // text) is not a log bridle wrote.
                e if is_schema_error(&e) || is_misshapen(&e) => {
                    corrupt(format!("not a bridle log database: {e}"))
                }
                e => fail(format!("cannot read its format marker: {e}")),
            })?;
        // Another marker is an altered log as far as this version can tell: it cannot check
        // it, and a log that cannot be checked because of what it holds is not intact.
        if format != FORMAT {
            return Err(corrupt(format!(
                "its format marker is {format:?}, not {FORMAT:?} (altered, or not written by \
                 this version of bridle)"
            )));
        }
        Ok(Self {
            path: path.to_owned(),
            conn,
        })
    }
}

/// Builds a complete log database at `staged`: schema, format marker and `first`, in one
/// transaction, with a rollback journal (so nothing is left beside it once it is closed).
fn build(staged: &Path, first: &[Record]) -> Result<(), String> {
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(staged)
        .and_then(|f| {
            use std::os::unix::fs::PermissionsExt;
            f.set_permissions(std::fs::Permissions::from_mode(0o600))
        })
        .map_err(|e| e.to_string())?;
    let mut conn = Connection::open_with_flags(
        staged,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|e| e.to_string())?;
    conn.pragma_update(None, "synchronous", "FULL")
        .map_err(|e| e.to_string())?;
    let tx = conn.transaction().map_err(|e| e.to_string())?;
    tx.execute_batch(
        "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
         CREATE TABLE events (
             seq INTEGER PRIMARY KEY,
             time TEXT NOT NULL,
             type TEXT NOT NULL,
             data TEXT NOT NULL,
             ignorable INTEGER NOT NULL,
             hash TEXT NOT NULL
         );",
    )
    .map_err(|e| e.to_string())?;
    tx.execute(
        "INSERT INTO meta (key, value) VALUES ('format', ?1)",
        params![FORMAT],
    )
    .map_err(|e| e.to_string())?;
    insert(&tx, first).map_err(|e| e.to_string())?;
    tx.commit().map_err(|e| e.to_string())?;
    conn.close().map_err(|(_, e)| e.to_string())
}

fn connect(path: &Path) -> rusqlite::Result<Connection> {
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    // WAL: appends do not rewrite pages readers hold; FULL: a committed batch survives a
    // crash of the machine, not only of the process.
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", "FULL")?;
    Ok(conn)
}

/// A read-only connection. A WAL database in a directory this process cannot write (a
/// read-only copy of the logs) can only be opened as immutable: then no writer exists. A
/// database that is busy (a writer is appending to it right now) is waited for, never opened
/// as immutable: that would ignore the batches still in its WAL, which the head already names.
fn connect_read_only(path: &Path) -> rusqlite::Result<Connection> {
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags(path, flags)?;
    conn.busy_timeout(std::time::Duration::from_secs(10))?;
    match conn.query_row("SELECT count(*) FROM sqlite_master", [], |_| Ok(())) {
        Ok(()) => Ok(conn),
        Err(e) if is_busy(&e) => Err(e),
        Err(_) => {
            let mut uri = std::ffi::OsString::from("file:");
            uri.push(path.as_os_str());
            uri.push("?immutable=1");
            Connection::open_with_flags(
                std::path::Path::new(&uri),
                flags | OpenFlags::SQLITE_OPEN_URI,
            )
        }
    }
}

/// Whether `e` says the file's bytes are not a sound SQLite database (truncated, overwritten,
/// not a database at all): the log is corrupt, not merely unreadable right now.
fn is_damage(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(rusqlite::ErrorCode::DatabaseCorrupt | rusqlite::ErrorCode::NotADatabase)
    )
}

/// Whether `e` is SQLite's generic error, which a query over bridle's fixed schema only gets
/// when the schema is not there (`no such table`, `no such column`). rusqlite reports one that
/// points at a token of the query (a missing column) as an input error.
fn is_schema_error(e: &rusqlite::Error) -> bool {
    matches!(
        e,
        rusqlite::Error::SqliteFailure(f, _) | rusqlite::Error::SqlInputError { error: f, .. }
            if f.extended_code == rusqlite::ffi::SQLITE_ERROR
    )
}

/// Whether `e` says a value is not of the type bridle writes there, or a row bridle always
/// writes is missing: the database holds something bridle did not write, like a damaged page.
fn is_misshapen(e: &rusqlite::Error) -> bool {
    matches!(
        e,
        rusqlite::Error::QueryReturnedNoRows
            | rusqlite::Error::InvalidColumnType(..)
            | rusqlite::Error::FromSqlConversionFailure(..)
            | rusqlite::Error::IntegralValueOutOfRange(..)
    )
}

fn is_busy(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
    )
}

fn insert(conn: &Connection, records: &[Record]) -> rusqlite::Result<()> {
    let mut insert = conn.prepare_cached(
        "INSERT INTO events (seq, time, type, data, ignorable, hash)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )?;
    for record in records {
        let seq = i64::try_from(record.seq)
            .map_err(|e| rusqlite::Error::ToSqlConversionFailure(Box::new(e)))?;
        insert.execute(params![
            seq,
            record.time,
            record.kind,
            record.data.to_string(),
            record.ignorable,
            record.hash
        ])?;
    }
    Ok(())
}

impl LogStore for SqliteStore {
    fn path(&self) -> &Path {
        &self.path
    }

    fn append(&mut self, records: &[Record]) -> Result<(), AgentError> {
        let fail = |e: rusqlite::Error| AgentError::AppendLog {
            path: self.path.clone(),
            reason: e.to_string(),
        };
        let tx = self.conn.transaction().map_err(fail)?;
        insert(&tx, records).map_err(fail)?;
        tx.commit().map_err(fail)
    }

    fn scan(
        &mut self,
        visit: &mut dyn FnMut(Scanned<'_>) -> Flow,
    ) -> Result<Option<TornTail>, AgentError> {
        let path = self.path.clone();
        let fail = |row: u64, e: rusqlite::Error| {
            let reason = format!("row {row}: {e}");
            if is_misshapen(&e) || is_damage(&e) || is_schema_error(&e) {
                AgentError::CorruptLog {
                    path: path.clone(),
                    reason,
                }
            } else {
                AgentError::ReadLog {
                    path: path.clone(),
                    reason,
                }
            }
        };
        let mut query = self
            .conn
            .prepare("SELECT seq, time, type, data, ignorable, hash FROM events ORDER BY seq")
            .map_err(|e| fail(0, e))?;
        // Rows are stepped through one at a time: nothing but the current one is held.
        let mut rows = query.query([]).map_err(|e| fail(0, e))?;
        for index in 0u64.. {
            let Some(row) = rows.next().map_err(|e| fail(index, e))? else {
                break;
            };
            let get_text = |i| row.get::<_, String>(i).map_err(|e| fail(index, e));
            let seq = row.get::<_, i64>(0).map_err(|e| fail(index, e))?;
            let (time, kind, hash) = (get_text(1)?, get_text(2)?, get_text(5)?);
            let ignorable = row.get::<_, bool>(4).map_err(|e| fail(index, e))?;
            let seq = u64::try_from(seq).map_err(|_| AgentError::ParseEvent {
                path: path.clone(),
                seq: index,
                reason: format!("the event in row {index} has the negative number {seq}"),
            })?;
            let data_text = get_text(3)?;
            if canonical::is_canonical_value(&data_text) {
                let raw = RawRecord {
                    seq,
                    time: &time,
                    kind: &kind,
                    data: &data_text,
                    ignorable,
                    hash: &hash,
                };
                if visit(Scanned::Exact(raw)).is_break() {
                    break;
                }
                continue;
            }
            let data: serde_json::Value =
                serde_json::from_str(&data_text).map_err(|e| AgentError::ParseEvent {
                    path: path.clone(),
                    seq,
                    reason: format!("data is not JSON: {e}"),
                })?;
            // Compared as text: the value was parsed from it, so only a respelling differs.
            let canonical = serde_json::to_string(&data)
                .ok()
                .filter(|text| *text == data_text)
                .map(String::into_bytes);
            let record = Record {
                seq,
                time,
                kind,
                data,
                ignorable,
                hash,
            };
            if visit(Scanned::Parsed(record, canonical)).is_break() {
                break;
            }
        }
        // SQLite commits whole transactions: a crash leaves no partial record.
        Ok(None)
    }

    fn set_aside_torn_tail(&mut self) -> Result<Option<PathBuf>, AgentError> {
        Ok(None)
    }
}
