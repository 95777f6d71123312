//! Output capture with bounded memory: the first and last `cap` bytes of a stream are kept for
//! the model; when more than that arrives, the whole stream is also written to a spill file
//! whose path the result names.

use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use crate::error::ExecError;

/// What was captured from one stream.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Captured {
    /// The first bytes (up to the cap).
    pub head: Vec<u8>,
    /// The last bytes (up to the cap), when the stream was longer than `head`.
    pub tail: Vec<u8>,
    /// Total bytes seen.
    pub total: u64,
    /// The file holding the complete stream, when it did not fit.
    pub spill: Option<PathBuf>,
}

impl Captured {
    /// Whether bytes were left out of `head` + `tail`.
    pub fn truncated(&self) -> bool {
        self.spill.is_some()
    }

    /// The text the model sees: head, a marker naming what was left out and where the whole
    /// stream is, tail.
    pub fn render(&self) -> String {
        let head = String::from_utf8_lossy(&self.head);
        match &self.spill {
            None => head.into_owned(),
            Some(path) => {
                let kept = u64::try_from(self.head.len() + self.tail.len()).unwrap_or(u64::MAX);
                format!(
                    "{head}\n[... {} bytes omitted; the complete output ({} bytes) is in {} ...]\n{}",
                    self.total.saturating_sub(kept),
                    self.total,
                    path.display(),
                    String::from_utf8_lossy(&self.tail)
                )
            }
        }
    }
}

/// Reads `stream` to the end, keeping at most `cap` bytes of head and `cap` of tail in memory,
/// and spilling everything to `spill_path` once it does not fit.
pub fn capture(
    mut stream: impl Read,
    cap: usize,
    spill_path: &Path,
    command: &str,
) -> Result<Captured, ExecError> {
    let mut out = Captured::default();
    let mut ring: std::collections::VecDeque<u8> = std::collections::VecDeque::new();
    let mut spill: Option<File> = None;
    let mut buf = vec![0u8; 64 * 1024];
    let spill_err = |source| ExecError::SpillFile {
        path: spill_path.to_path_buf(),
        source,
    };
    loop {
        let n = match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(source) => {
                return Err(ExecError::ReadOutput {
                    command: command.to_owned(),
                    source,
                });
            }
        };
        let chunk = &buf[..n];
        out.total += u64::try_from(n).unwrap_or(0);
        if let Some(file) = spill.as_mut() {
            file.write_all(chunk).map_err(spill_err)?;
        }
        let room = cap.saturating_sub(out.head.len());
        let (to_head, rest) = chunk.split_at(room.min(chunk.len()));
        out.head.extend_from_slice(to_head);
        if !rest.is_empty() {
            if spill.is_none() {
                let mut file = File::create(spill_path).map_err(spill_err)?;
                file.write_all(&out.head).map_err(spill_err)?;
                file.write_all(rest).map_err(spill_err)?;
                spill = Some(file);
            }
            ring.extend(rest);
            while ring.len() > cap {
                let excess = ring.len() - cap;
                ring.drain(..excess);
            }
        }
    }
    if spill.is_some() {
        out.tail = ring.into_iter().collect();
        out.spill = Some(spill_path.to_path_buf());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_output_is_kept_whole_without_a_spill_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out");
        let c = capture(&b"hello"[..], 16, &path, "t").unwrap();
        assert_eq!(c.render(), "hello");
        assert!(!c.truncated() && !path.exists());
    }

    #[test]
    fn long_output_keeps_head_and_tail_and_spills_everything() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out");
        let data: Vec<u8> = (0..100_000u32)
            .map(|i| b'a' + u8::try_from(i % 26).unwrap())
            .collect();
        let c = capture(&data[..], 1000, &path, "t").unwrap();
        assert_eq!(c.head, data[..1000]);
        assert_eq!(c.tail, data[data.len() - 1000..]);
        assert_eq!(c.total, 100_000);
        assert_eq!(std::fs::read(&path).unwrap(), data);
        let text = c.render();
        assert!(
            text.contains("98000 bytes omitted") && text.contains(path.to_str().unwrap()),
            "{}",
            &text[..1100]
        );
    }

    #[test]
    fn output_just_over_the_cap_does_not_duplicate_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out");
        let data = b"0123456789ABC";
        let c = capture(&data[..], 10, &path, "t").unwrap();
        assert_eq!(c.head, b"0123456789");
        assert_eq!(c.tail, b"ABC");
        assert_eq!(std::fs::read(&path).unwrap(), data);
    }
}
