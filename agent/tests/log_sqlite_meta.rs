//! An SQLite log whose `meta` table or schema was altered is corrupt, like one whose events
//! were: every way of damaging the format marker (`bridle log verify` exits 1 for corrupt, 2
//! only when it could not look).

#![cfg(test)]

use bridle_agent::AgentError;
use bridle_agent::log::{Backend, Event, NewSession, SessionDir};

/// A session directory with one intact SQLite session; returns it, the id and the log's path.
fn sqlite_session(tmp: &tempfile::TempDir) -> (SessionDir, String, std::path::PathBuf) {
    let dir = SessionDir::open(&tmp.path().join("sessions")).unwrap();
    let mut log = dir
        .create(
            Backend::Sqlite,
            &NewSession {
                workspace: "/work/project".into(),
                profile: "workspace-write".into(),
                policy_digest: "ab".repeat(32),
            },
        )
        .unwrap();
    log.append(Event::TurnStart { turn: 0 }).unwrap();
    let id = log.id().to_owned();
    drop(log);
    let path = tmp.path().join("sessions").join(format!("{id}.sqlite"));
    assert!(path.is_file(), "{}", path.display());
    (dir, id, path)
}

#[test]
fn an_altered_meta_or_schema_makes_an_sqlite_log_corrupt() {
    for (what, sql) in [
        ("another value", "UPDATE meta SET value = 'x'"),
        (
            "a newer-looking value",
            "UPDATE meta SET value = 'bridle-log-v2'",
        ),
        ("a blob", "UPDATE meta SET value = x'00'"),
        ("no row", "DELETE FROM meta"),
        ("another key", "UPDATE meta SET key = 'other'"),
        ("no table", "DROP TABLE meta"),
        (
            "null",
            "DROP TABLE meta; CREATE TABLE meta (key, value); \
             INSERT INTO meta VALUES ('format', NULL)",
        ),
        (
            "an integer",
            "DROP TABLE meta; CREATE TABLE meta (key, value); \
             INSERT INTO meta VALUES ('format', 1)",
        ),
        (
            "no value column",
            "DROP TABLE meta; CREATE TABLE meta (key); INSERT INTO meta VALUES ('format')",
        ),
        // The events table: a column gone is damage too, not a log that cannot be read.
        ("no hash column", "ALTER TABLE events DROP COLUMN hash"),
        ("no events table", "DROP TABLE events"),
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let (dir, id, path) = sqlite_session(&tmp);
        dir.verify(&id).unwrap();
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch(sql).unwrap();
        drop(conn);
        match dir.verify(&id) {
            Err(AgentError::CorruptLog { path: named, .. }) => assert_eq!(named, path, "{what}"),
            other => panic!("{what}: {other:?}"),
        }
    }
}
