//! The JSONL backend: one record per line, appended with one `write` per batch and synced.

use std::io::{Read, Seek, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use super::record::Record;
use super::store::{LogStore, Stored, TornTail, publish, staging_name, sync_dir};
use crate::AgentError;

/// A session log as a JSON-lines file.
#[derive(Debug)]
pub struct JsonlStore {
    path: PathBuf,
    file: std::fs::File,
}

impl JsonlStore {
    /// Creates `path` (which must not exist) holding `first` (mode 0600: logs hold tool
    /// output). The file is written under a staging name and linked into place when durable.
    pub fn create(path: &Path, first: &[Record]) -> Result<Self, AgentError> {
        let fail = |e: std::io::Error| AgentError::CreateLog {
            path: path.to_owned(),
            reason: e.to_string(),
        };
        let staged = staging_name(path);
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&staged)
            .map_err(fail)?;
        let written = file.write_all(&lines(first)).and_then(|()| file.sync_all());
        if let Err(e) = written {
            let _ = std::fs::remove_file(&staged);
            return Err(fail(e));
        }
        drop(file);
        publish(&staged, path).map_err(fail)?;
        Self::open(path, true)
    }

    /// Opens the existing log at `path`, for appending or for reading only.
    pub fn open(path: &Path, append: bool) -> Result<Self, AgentError> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .append(append)
            .open(path)
            .map_err(|e| AgentError::OpenLog {
                path: path.to_owned(),
                reason: e.to_string(),
            })?;
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

/// `records` as bridle writes them: one compact JSON object and a newline each.
fn lines(records: &[Record]) -> Vec<u8> {
    let mut out = Vec::new();
    for record in records {
        out.extend_from_slice(&record.stored_form());
        out.push(b'\n');
    }
    out
}

/// Where the complete lines of `bytes` end.
fn complete_len(bytes: &[u8]) -> usize {
    bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1)
}

impl LogStore for JsonlStore {
    fn path(&self) -> &Path {
        &self.path
    }

    fn append(&mut self, records: &[Record]) -> Result<(), AgentError> {
        self.file
            .write_all(&lines(records))
            .and_then(|()| self.file.sync_data())
            .map_err(|e| AgentError::AppendLog {
                path: self.path.clone(),
                reason: e.to_string(),
            })
    }

    fn read_all(&mut self) -> Result<Stored, AgentError> {
        let bytes = self.read_bytes()?;
        let complete = complete_len(&bytes);
        let mut records = Vec::new();
        let mut noncanonical = Vec::new();
        if complete > 0 {
            // `bytes[..complete]` ends with a newline; every line before it is one record.
            for (index, line) in (0u64..).zip(bytes[..complete - 1].split(|&b| b == b'\n')) {
                let record: Record =
                    serde_json::from_slice(line).map_err(|e| AgentError::ParseLine {
                        path: self.path.clone(),
                        line: index + 1,
                        reason: e.to_string(),
                    })?;
                if record.stored_form() != line {
                    noncanonical.push(index);
                }
                records.push(record);
            }
        }
        let torn = (complete < bytes.len()).then(|| TornTail {
            offset: u64::try_from(complete).unwrap_or(u64::MAX),
            len: u64::try_from(bytes.len() - complete).unwrap_or(u64::MAX),
        });
        Ok(Stored {
            records,
            noncanonical,
            torn,
        })
    }

    fn set_aside_torn_tail(&mut self) -> Result<Option<PathBuf>, AgentError> {
        let bytes = self.read_bytes()?;
        let complete = complete_len(&bytes);
        if complete == bytes.len() {
            return Ok(None);
        }
        let fail = |e: std::io::Error| AgentError::AppendLog {
            path: self.path.clone(),
            reason: format!("setting the trailing bytes aside: {e}"),
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
            .and_then(|()| sync_dir(self.path.parent().unwrap_or(Path::new("."))))
            .map_err(fail)?;
        // Only once the copy is durable under its own name is the log cut.
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
