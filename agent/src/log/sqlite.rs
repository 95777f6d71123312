//! The SQLite backend: one row per event, WAL journal, every batch one synced transaction.

use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use rusqlite::{Connection, OpenFlags, params};

use super::record::Record;
use super::store::{LogStore, Stored};
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
    /// Creates `path`, which must not exist (mode 0600: logs hold tool output).
    pub fn create(path: &Path) -> Result<Self, AgentError> {
        let fail = |reason: String| AgentError::CreateLog {
            path: path.to_owned(),
            reason,
        };
        // Claim the name first: SQLite would open an existing database instead of failing.
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(path)
            .map_err(|e| fail(e.to_string()))?;
        let conn = connect(path).map_err(|e| fail(e.to_string()))?;
        conn.execute_batch(
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
        .and_then(|()| {
            conn.execute(
                "INSERT INTO meta (key, value) VALUES ('format', ?1)",
                params![FORMAT],
            )
        })
        .map_err(|e| fail(e.to_string()))?;
        Ok(Self {
            path: path.to_owned(),
            conn,
        })
    }

    /// Opens the existing log at `path`.
    pub fn open(path: &Path) -> Result<Self, AgentError> {
        let fail = |reason: String| AgentError::OpenLog {
            path: path.to_owned(),
            reason,
        };
        if !path.is_file() {
            return Err(fail("no such file".to_owned()));
        }
        let conn = connect(path).map_err(|e| fail(e.to_string()))?;
        let format: String = conn
            .query_row("SELECT value FROM meta WHERE key = 'format'", [], |row| {
                row.get(0)
            })
            .map_err(|e| fail(format!("not a bridle log database: {e}")))?;
        if format != FORMAT {
            return Err(fail(format!(
                "log format {format:?}, this version reads {FORMAT:?}"
            )));
        }
        Ok(Self {
            path: path.to_owned(),
            conn,
        })
    }
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
        {
            let mut insert = tx
                .prepare_cached(
                    "INSERT INTO events (seq, time, type, data, ignorable, hash)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                )
                .map_err(fail)?;
            for record in records {
                let seq = i64::try_from(record.seq).map_err(|_| AgentError::AppendLog {
                    path: self.path.clone(),
                    reason: format!("event number {} is too large", record.seq),
                })?;
                insert
                    .execute(params![
                        seq,
                        record.time,
                        record.kind,
                        record.data.to_string(),
                        record.ignorable,
                        record.hash
                    ])
                    .map_err(fail)?;
            }
        }
        tx.commit().map_err(fail)
    }

    fn read_all(&mut self) -> Result<Stored, AgentError> {
        let path = self.path.clone();
        let fail = |e: rusqlite::Error| AgentError::ReadLog {
            path: path.clone(),
            reason: e.to_string(),
        };
        let mut query = self
            .conn
            .prepare("SELECT seq, time, type, data, ignorable, hash FROM events ORDER BY seq")
            .map_err(fail)?;
        let rows = query
            .query_map([], |row| {
                Ok((
                    row.get::<_, i64>(0)?,
                    row.get::<_, String>(1)?,
                    row.get::<_, String>(2)?,
                    row.get::<_, String>(3)?,
                    row.get::<_, bool>(4)?,
                    row.get::<_, String>(5)?,
                ))
            })
            .map_err(fail)?;
        let mut records = Vec::new();
        for row in rows {
            let (seq, time, kind, data, ignorable, hash) = row.map_err(fail)?;
            let seq = u64::try_from(seq).map_err(|_| AgentError::ParseEvent {
                path: path.clone(),
                seq: 0,
                reason: format!("negative event number {seq}"),
            })?;
            let data = serde_json::from_str(&data).map_err(|e| AgentError::ParseEvent {
                path: path.clone(),
                seq,
                reason: format!("data is not JSON: {e}"),
            })?;
            records.push(Record {
                seq,
                time,
                kind,
                data,
                ignorable,
                hash,
            });
        }
        // SQLite commits whole transactions: a crash leaves no partial record.
        Ok(Stored {
            records,
            torn: None,
        })
    }

    fn set_aside_torn_tail(&mut self) -> Result<Option<PathBuf>, AgentError> {
        Ok(None)
    }
}
