//! The JSONL backend: one record per line, appended with one `write` per batch and synced.

use std::io::{Read, Seek, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use super::canonical;
use super::record::{Record, Scanned};
use super::store::{Flow, LogStore, TornTail, publish, staging_name, sync_dir};
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

    /// Where the complete lines of the file end, and how long it is: the bytes after the last
    /// newline, found by reading back from the end (never the whole log).
    fn complete_len(&mut self) -> std::io::Result<(u64, u64)> {
        let len = self.file.metadata()?.len();
        let mut end = len;
        let mut chunk = vec![0u8; 1 << 16];
        while end > 0 {
            let take = end.min(chunk.len() as u64);
            let start = end - take;
            let buf = &mut chunk[..usize::try_from(take).unwrap_or(0)];
            self.file.seek(std::io::SeekFrom::Start(start))?;
            self.file.read_exact(buf)?;
            if let Some(i) = buf.iter().rposition(|&b| b == b'\n') {
                return Ok((start + i as u64 + 1, len));
            }
            end = start;
        }
        Ok((0, len))
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

    fn scan(
        &mut self,
        visit: &mut dyn FnMut(Scanned<'_>) -> Flow,
    ) -> Result<Option<TornTail>, AgentError> {
        let read_error = |e: std::io::Error| AgentError::ReadLog {
            path: self.path.clone(),
            reason: e.to_string(),
        };
        self.file
            .seek(std::io::SeekFrom::Start(0))
            .map_err(read_error)?;
        let mut chunks = Chunks::new(&self.file);
        let mut offset = 0u64;
        let mut visiting = true;
        // The number of lines before this one.
        let mut index = 0u64;
        loop {
            let rest = chunks.rest();
            // The common case: a record read in place, its end found by reading it.
            if visiting
                && let Some((raw, end)) = canonical::parse_record(rest)
                && rest.get(end) == Some(&b'\n')
            {
                visiting = visit(Scanned::Exact(raw)).is_continue();
                chunks.consume(end + 1);
                offset += u64::try_from(end + 1).unwrap_or(u64::MAX);
                index += 1;
                continue;
            }
            let Some(newline) = rest.iter().position(|&b| b == b'\n') else {
                if chunks.fill().map_err(read_error)? {
                    continue;
                }
                let n = chunks.rest().len();
                return Ok((n > 0).then_some(TornTail {
                    offset,
                    len: u64::try_from(n).unwrap_or(u64::MAX),
                }));
            };
            if visiting {
                let line = &rest[..newline];
                let record: Record =
                    serde_json::from_slice(line).map_err(|e| AgentError::ParseLine {
                        path: self.path.clone(),
                        line: index + 1,
                        reason: e.to_string(),
                    })?;
                let data = record.stored_data(line);
                visiting = visit(Scanned::Parsed(record, data)).is_continue();
            }
            chunks.consume(newline + 1);
            offset += u64::try_from(newline + 1).unwrap_or(u64::MAX);
            index += 1;
        }
    }

    fn set_aside_torn_tail(&mut self) -> Result<Option<PathBuf>, AgentError> {
        let (complete, len) = self.complete_len().map_err(|e| AgentError::ReadLog {
            path: self.path.clone(),
            reason: e.to_string(),
        })?;
        if complete == len {
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
        self.file
            .seek(std::io::SeekFrom::Start(complete))
            .and_then(|_| std::io::copy(&mut (&self.file).take(len - complete), &mut out))
            .and_then(|_| out.sync_all())
            .and_then(|()| sync_dir(self.path.parent().unwrap_or(Path::new("."))))
            .map_err(fail)?;
        // Only once the copy is durable under its own name is the log cut.
        self.file
            .set_len(complete)
            .and_then(|()| self.file.sync_all())
            .map_err(fail)?;
        Ok(Some(aside))
    }
}

/// A file read in large chunks into one buffer, its lines parsed where they lie (not copied
/// out one by one).
struct Chunks<'f> {
    file: &'f std::fs::File,
    buf: Vec<u8>,
    /// The unread bytes are `buf[start..end]`.
    start: usize,
    end: usize,
}

impl<'f> Chunks<'f> {
    const SIZE: usize = 1 << 18;

    fn new(file: &'f std::fs::File) -> Self {
        Self {
            file,
            buf: vec![0; Self::SIZE],
            start: 0,
            end: 0,
        }
    }

    fn rest(&self) -> &[u8] {
        &self.buf[self.start..self.end]
    }

    fn consume(&mut self, n: usize) {
        self.start += n;
    }

    /// Reads more after the unread bytes (moved to the front, the buffer doubled when they
    /// fill it: a line longer than it); `false` at the end of the file.
    fn fill(&mut self) -> std::io::Result<bool> {
        self.buf.copy_within(self.start..self.end, 0);
        self.end -= self.start;
        self.start = 0;
        if self.end == self.buf.len() {
            self.buf.resize(self.buf.len() * 2, 0);
        }
        loop {
            match self.file.read(&mut self.buf[self.end..]) {
                Ok(0) => return Ok(false),
                Ok(n) => {
                    self.end += n;
                    return Ok(true);
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::Event;
    use crate::log::chain::LogKey;

    /// `count` records of about `size` bytes each, chained, written with the real writer.
    fn log_of(dir: &Path, count: u64, size: usize) -> (PathBuf, Vec<Record>) {
        let key = LogKey::load_or_create(dir).unwrap();
        let mut prev = key.genesis("s");
        let records: Vec<Record> = (0..count)
            .map(|seq| {
                let event = Event::ToolResult {
                    call_id: format!("c{seq}"),
                    ok: true,
                    content: format!("line one\n\"two\"\t{}", "x".repeat(size)),
                    sandbox: None,
                };
                let record = Record::seal(&key, &prev, seq, "t".into(), &event);
                prev = crate::log::chain::from_hex(&record.hash).unwrap();
                record
            })
            .collect();
        let path = dir.join("s.jsonl");
        drop(JsonlStore::create(&path, &records).unwrap());
        (path, records)
    }

    /// What a scan of the whole file returned, and each record it visited.
    type Scan = (Result<Option<TornTail>, AgentError>, Vec<(Record, bool)>);

    fn scan_all(path: &Path) -> Scan {
        let mut seen = Vec::new();
        let mut store = JsonlStore::open(path, false).unwrap();
        let result = store.scan(&mut |scanned| {
            seen.push(scanned.into_record());
            Flow::Continue(())
        });
        (result, seen)
    }

    /// The file is read in chunks: records that straddle them, and one longer than a chunk,
    /// come back as written, and bytes after the last newline are the torn tail.
    #[test]
    fn records_across_read_chunks_come_back_as_written() {
        let dir = tempfile::tempdir().unwrap();
        let (path, mut records) = log_of(dir.path(), 700, 1000);
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        let long = log_of(tempfile::tempdir().unwrap().path(), 1, 3 * Chunks::SIZE).1;
        file.write_all(&lines(&long)).unwrap();
        records.extend(long);
        let complete = file.metadata().unwrap().len();
        file.write_all(b"{\"seq\":701,\"ti").unwrap();
        let (result, seen) = scan_all(&path);
        assert_eq!(
            result.unwrap(),
            Some(TornTail {
                offset: complete,
                len: 14
            })
        );
        assert_eq!(seen.len(), records.len());
        for (i, ((record, exact), written)) in seen.into_iter().zip(&records).enumerate() {
            assert_eq!(&record, written, "record {i}");
            assert!(exact, "record {i} is stored as bridle writes it");
        }
    }

    /// A line that is not a record is named by its number, wherever the chunks fall.
    #[test]
    fn a_line_that_is_not_a_record_is_named_by_its_number() {
        let dir = tempfile::tempdir().unwrap();
        let (path, _) = log_of(dir.path(), 700, 1000);
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        file.write_all(b"not a record\n").unwrap();
        let err = scan_all(&path).0.unwrap_err().to_string();
        assert!(err.contains(", line 701: "), "{err}");
    }
}
