//! The head record `ID.head` beside every log: the last durable event's number and hash,
//! sealed with the directory's key. The chain alone cannot show that events were cut from the
//! end of a log; the head can, unless it is replaced by an older head of the same session.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::chain::{self, Hash, LogKey};
use super::store::sync_dir;

/// The stored head.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Stored {
    seq: u64,
    hash: String,
    mac: String,
}

/// The last durable event of a log, as its head record states it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Head {
    pub seq: u64,
    pub hash: Hash,
}

/// Where the head of the log at `log_path` lives.
pub(crate) fn path_for(log_path: &Path) -> PathBuf {
    log_path.with_extension("head")
}

fn seal(key: &LogKey, id: &str, seq: u64, hash: &Hash) -> String {
    let seq = seq.to_string();
    chain::to_hex(&key.mac(&[
        b"bridle-head-v1\0",
        id.as_bytes(),
        b"\0",
        seq.as_bytes(),
        b"\0",
        hash,
    ]))
}

/// Replaces the head at `path` durably: staged, synced, renamed over, directory synced.
pub(crate) fn write(
    path: &Path,
    key: &LogKey,
    id: &str,
    seq: u64,
    hash: &Hash,
) -> std::io::Result<()> {
    let stored = Stored {
        seq,
        hash: chain::to_hex(hash),
        mac: seal(key, id, seq, hash),
    };
    let staged = super::store::staging_name(path);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&staged)?;
    let written = serde_json::to_vec(&stored)
        .map_err(std::io::Error::other)
        .and_then(|bytes| file.write_all(&bytes))
        .and_then(|()| file.sync_all())
        .and_then(|()| std::fs::rename(&staged, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&staged);
    }
    written?;
    sync_dir(path.parent().unwrap_or(Path::new(".")))
}

/// Reads the head at `path`: `Ok(None)` when there is none, an error saying what is wrong
/// when it cannot be trusted.
pub(crate) fn read(path: &Path, key: &LogKey, id: &str) -> Result<Option<Head>, String> {
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e.to_string()),
    };
    let stored: Stored = serde_json::from_slice(&bytes).map_err(|e| e.to_string())?;
    let hash = chain::from_hex(&stored.hash).ok_or("its hash is not 64 lower-case hex digits")?;
    if stored.mac != seal(key, id, stored.seq, &hash) {
        return Err("its seal does not match (edited, forged or from another session)".into());
    }
    Ok(Some(Head {
        seq: stored.seq,
        hash,
    }))
}
