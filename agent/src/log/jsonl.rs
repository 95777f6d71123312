//! The JSONL backend: one record per line, appended with one `write` per batch and synced.

use std::io::{Read, Seek, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use super::record::Record;
use super::store::{LogStore, Stored, TornTail};
use crate::AgentError;

/// A session log as a JSON-lines file.
#[derive(Debug)]
pub struct JsonlStore {
    path: PathBuf,
    file: std::fs::File,
}

impl JsonlStore {
    /// Creates `path`, which must not exist (mode 0600: logs hold tool output).
    pub fn create(path: &Path) -> Result<Self, AgentError> {
        let mut options = std::fs::OpenOptions::new();
        options.create_new(true).mode(0o600);
        Self::open_with(path, &mut options).map_err(|reason| AgentError::CreateLog {
            path: path.to_owned(),
            reason,
        })
    }

    /// Opens the existing log at `path`.
    pub fn open(path: &Path) -> Result<Self, AgentError> {
        Self::open_with(path, &mut std::fs::OpenOptions::new()).map_err(|reason| {
            AgentError::OpenLog {
                path: path.to_owned(),
                reason,
            }
        })
    }

    fn open_with(path: &Path, options: &mut std::fs::OpenOptions) -> Result<Self, String> {
        let file = options
            .read(true)
            .append(true)
            .open(path)
            .map_err(|e| e.to_string())?;
        Ok(Self {
            path: path.to_owned(),
            file,
        })
    }

    fn read_bytes(&mut self) -> Result<Vec<u8>, AgentError> {
        let mut bytes = Vec::new();
        self.file
            .seek(std::io::SeekFrom::Start(0))
            .and_then(|_| self.file.read_to_end(&mut bytes))
            .map_err(|e| AgentError::ReadLog {
                path: self.path.clone(),
                reason: e.to_string(),
            })?;
        Ok(bytes)
    }
}

impl LogStore for JsonlStore {
    fn path(&self) -> &Path {
        &self.path
    }

    fn append(&mut self, records: &[Record]) -> Result<(), AgentError> {
        let mut batch = Vec::new();
        for record in records {
            // A record is plain data; serialising it cannot fail.
            serde_json::to_writer(&mut batch, record).map_err(|e| AgentError::AppendLog {
                path: self.path.clone(),
                reason: e.to_string(),
            })?;
            batch.push(b'\n');
        }
        self.file
            .write_all(&batch)
            .and_then(|()| self.file.sync_data())
            .map_err(|e| AgentError::AppendLog {
                path: self.path.clone(),
                reason: e.to_string(),
            })
    }

    fn read_all(&mut self) -> Result<Stored, AgentError> {
        let bytes = self.read_bytes()?;
        let complete = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
        let mut records = Vec::new();
        if complete > 0 {
            // `bytes[..complete]` ends with a newline; every line before it is one record.
            for (index, line) in bytes[..complete - 1].split(|&b| b == b'\n').enumerate() {
                let record: Record =
                    serde_json::from_slice(line).map_err(|e| AgentError::ParseLine {
                        path: self.path.clone(),
                        line: u64::try_from(index + 1).unwrap_or(u64::MAX),
                        reason: e.to_string(),
                    })?;
                records.push(record);
            }
        }
        let torn = (complete < bytes.len()).then(|| TornTail {
            offset: u64::try_from(complete).unwrap_or(u64::MAX),
            len: u64::try_from(bytes.len() - complete).unwrap_or(u64::MAX),
        });
        Ok(Stored { records, torn })
    }

    fn set_aside_torn_tail(&mut self) -> Result<Option<PathBuf>, AgentError> {
        let bytes = self.read_bytes()?;
        let complete = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
        if complete == bytes.len() {
            return Ok(None);
        }
        let fail = |e: std::io::Error| AgentError::AppendLog {
            path: self.path.clone(),
            reason: format!("setting the torn tail aside: {e}"),
        };
        let aside = unique_beside(&self.path, "torn").map_err(fail)?;
        let mut out = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&aside)
            .map_err(fail)?;
        out.write_all(&bytes[complete..])
            .and_then(|()| out.sync_all())
            .map_err(fail)?;
        self.file
            .set_len(u64::try_from(complete).unwrap_or(u64::MAX))
            .and_then(|()| self.file.sync_all())
            .map_err(fail)?;
        Ok(Some(aside))
    }
}

/// A name beside `path` that does not exist yet: `path.SUFFIX`, `path.SUFFIX.1`, ...
pub(crate) fn unique_beside(path: &Path, suffix: &str) -> std::io::Result<PathBuf> {
    let base = path.as_os_str().to_owned();
    for n in 0..1000u32 {
        let mut name = base.clone();
        name.push(format!(".{suffix}"));
        if n > 0 {
            name.push(format!(".{n}"));
        }
        let candidate = PathBuf::from(name);
        if std::fs::symlink_metadata(&candidate).is_err() {
            return Ok(candidate);
        }
    }
    Err(std::io::Error::new(
        std::io::ErrorKind::AlreadyExists,
        format!("too many files named {}.{suffix}.*", path.display()),
    ))
}
