//! Output capture with bounded memory and bounded disk: the first and last `cap` bytes of a
//! stream are kept for the model; when more than that arrives, the stream is also written to a
//! spill file whose path the result names.
//!
//! bridle writes spill files itself, outside the command's `file_size` limit, into the
//! session's private temp dir, which the command can write too. So a spill file holds at most
//! `limits.spill_size` bytes, all spill files of a session together at most
//! [`bridle_policy::SESSION_SPILL_MULTIPLE`] times that ([`SpillBudget`]), and each is created
//! new (`O_EXCL | O_NOFOLLOW`, mode 0600): a symlink or file the command planted under the name
//! is never followed or reused. The result says when a spill was cut and how much was left out.

use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use crate::error::ExecError;

/// Why a spill file does not hold the whole stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SpillCut {
    /// It reached `limits.spill_size` (bytes).
    SpillSize(u64),
    /// The session's spill files together reached their budget (bytes).
    SessionBudget(u64),
    /// Creating or writing it failed.
    Failed(String),
}

impl std::fmt::Display for SpillCut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SpillCut::SpillSize(limit) => write!(
                f,
                "limits.spill_size is {}",
                bridle_policy::units::format_bytes(Some(*limit))
            ),
            SpillCut::SessionBudget(total) => write!(
                f,
                "the session's spill budget of {} is used up",
                bridle_policy::units::format_bytes(Some(*total))
            ),
            SpillCut::Failed(why) => write!(f, "the spill file could not be written: {why}"),
        }
    }
}

/// What was captured from one stream.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Captured {
    /// The first bytes (up to the cap).
    pub head: Vec<u8>,
    /// The last bytes (up to the cap), when the stream was longer than `head`.
    pub tail: Vec<u8>,
    /// Total bytes seen.
    pub total: u64,
    /// The file holding the stream (or its first `spilled` bytes), when it did not fit.
    pub spill: Option<PathBuf>,
    /// Bytes written to the spill file.
    pub spilled: u64,
    /// Why the spill file holds less than the whole stream, when it does.
    pub cut: Option<SpillCut>,
}

impl Captured {
    /// Whether bytes were left out of `head` + `tail`.
    pub fn truncated(&self) -> bool {
        let kept = u64::try_from(self.head.len() + self.tail.len()).unwrap_or(u64::MAX);
        self.total > kept
    }

    /// The text the model sees: head, a marker naming what was left out and where the stream
    /// is (and what of it was not kept), tail.
    pub fn render(&self) -> String {
        let head = String::from_utf8_lossy(&self.head);
        if !self.truncated() {
            return head.into_owned();
        }
        let kept = u64::try_from(self.head.len() + self.tail.len()).unwrap_or(u64::MAX);
        let omitted = self.total.saturating_sub(kept);
        let total = self.total;
        let whole = match (&self.spill, &self.cut) {
            (Some(path), None) => format!(
                "the complete output ({total} bytes) is in {}",
                path.display()
            ),
            (Some(path), Some(cut)) => format!(
                "the first {} bytes of the output ({total} bytes in all) are in {} (the other {} bytes were not kept: {cut})",
                self.spilled,
                path.display(),
                total.saturating_sub(self.spilled)
            ),
            (None, Some(cut)) => {
                format!("the output ({total} bytes in all) was not kept: {cut}")
            }
            (None, None) => format!("the output had {total} bytes"),
        };
        format!(
            "{head}\n[... {omitted} bytes omitted; {whole} ...]\n{}",
            String::from_utf8_lossy(&self.tail)
        )
    }

    /// Removes the spill file unless `content` (what the model is shown) names it: a file no
    /// result names is never read.
    pub fn remove_spill_unless_named(&self, content: &str) {
        if let Some(path) = &self.spill
            && !content.contains(&path.display().to_string())
        {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// The bytes all spill files of one session may hold together, shared by its runs. Spill
/// files already in the spill directory when it is first used (earlier `bridle tool
/// --session-dir` calls of the same session) count against it.
#[derive(Debug, Default)]
pub struct SpillBudget {
    used: AtomicU64,
    counted: OnceLock<()>,
}

/// Prefixes of the spill files bridle writes (`bash-…` for one-shot runs, `job-…` for the
/// subprocess manager).
const SPILL_PREFIXES: [&str; 2] = ["bash-", "job-"];

impl SpillBudget {
    /// An unused budget.
    pub fn new() -> SpillBudget {
        SpillBudget::default()
    }

    /// Counts the spill files already in `dir`, once.
    fn count_existing(&self, dir: &Path) {
        self.counted.get_or_init(|| {
            let existing: u64 = std::fs::read_dir(dir)
                .into_iter()
                .flatten()
                .flatten()
                .filter(|e| {
                    let name = e.file_name();
                    let name = name.to_string_lossy();
                    SPILL_PREFIXES.iter().any(|p| name.starts_with(p))
                })
                .filter_map(|e| e.metadata().ok())
                .filter(std::fs::Metadata::is_file)
                .map(|m| m.len())
                .sum();
            self.used.fetch_add(existing, Ordering::Relaxed);
        });
    }

    /// Takes up to `want` bytes from a budget of `total` (`None`: unlimited); returns how many
    /// were granted.
    fn take(&self, want: u64, total: Option<u64>) -> u64 {
        let Some(total) = total else {
            self.used.fetch_add(want, Ordering::Relaxed);
            return want;
        };
        let mut granted = 0;
        let _ = self
            .used
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |used| {
                granted = want.min(total.saturating_sub(used));
                Some(used + granted)
            });
        granted
    }
}

/// Where a stream spills, and how much it may.
#[derive(Debug, Clone)]
pub struct SpillTarget {
    /// The directory (the session's private temp dir).
    pub dir: PathBuf,
    /// The file name; `-1`, `-2`, … are added before its extension when the name is taken.
    pub name: String,
    /// Most bytes of this file (`limits.spill_size`; `None`: unlimited).
    pub limit: Option<u64>,
    /// The session's budget (see [`SpillBudget`]).
    pub budget: Arc<SpillBudget>,
}

impl SpillTarget {
    /// The spill target for `name` in `dir`, limited as `limits` says.
    pub fn new(
        dir: &Path,
        name: String,
        limits: &bridle_policy::ResourceLimits,
        budget: Arc<SpillBudget>,
    ) -> SpillTarget {
        SpillTarget {
            dir: dir.to_path_buf(),
            name,
            limit: limits.spill_size_bytes,
            budget,
        }
    }
}

/// A spill file being written: created on first use, capped by its limit and the budget.
#[derive(Debug)]
pub struct Spill {
    target: SpillTarget,
    file: Option<File>,
    path: Option<PathBuf>,
    /// Creating the file was tried (it happens once).
    tried: bool,
    written: u64,
    cut: Option<SpillCut>,
}

impl Spill {
    /// Nothing written yet.
    pub fn new(target: SpillTarget) -> Spill {
        Spill {
            target,
            file: None,
            path: None,
            tried: false,
            written: 0,
            cut: None,
        }
    }

    /// Whether writing has begun (or was given up).
    pub fn started(&self) -> bool {
        self.tried || self.cut.is_some()
    }

    /// Appends `bytes`, up to the file's limit and the session's budget; what does not fit is
    /// dropped, and why is recorded.
    pub fn write(&mut self, bytes: &[u8]) {
        if bytes.is_empty() || matches!(self.cut, Some(SpillCut::Failed(_))) {
            return;
        }
        let want = u64::try_from(bytes.len()).unwrap_or(u64::MAX);
        let limit = self.target.limit;
        let room = limit.map_or(want, |l| want.min(l.saturating_sub(self.written)));
        self.target.budget.count_existing(&self.target.dir);
        let total = limit.map(|l| l.saturating_mul(bridle_policy::SESSION_SPILL_MULTIPLE));
        let granted = if room == 0 {
            0
        } else {
            self.target.budget.take(room, total)
        };
        if granted < want && self.cut.is_none() {
            // Less than the room means the budget ran out; otherwise the file's own limit did
            // (a budget is only `None` with no limit, and then everything is granted).
            self.cut = match (granted < room, total, limit) {
                (true, Some(total), _) => Some(SpillCut::SessionBudget(total)),
                (_, _, Some(limit)) => Some(SpillCut::SpillSize(limit)),
                _ => None,
            };
        }
        if granted == 0 {
            return;
        }
        let Some(file) = self.file_or_create() else {
            return;
        };
        let part = bytes
            .get(..usize::try_from(granted).unwrap_or(bytes.len()))
            .unwrap_or(bytes);
        match file.write_all(part) {
            Ok(()) => self.written += granted,
            Err(e) => {
                self.cut = Some(SpillCut::Failed(e.to_string()));
                self.file = None;
            }
        }
    }

    fn file_or_create(&mut self) -> Option<&mut File> {
        if !self.tried {
            self.tried = true;
            match create_new(&self.target.dir, &self.target.name) {
                Ok((file, path)) => {
                    self.file = Some(file);
                    self.path = Some(path);
                }
                Err(e) => self.cut = Some(SpillCut::Failed(e.to_string())),
            }
        }
        self.file.as_mut()
    }

    /// The spill's path (when a file was made), bytes written so far, and why it is short.
    pub fn state(&self) -> (Option<PathBuf>, u64, Option<SpillCut>) {
        (self.path.clone(), self.written, self.cut.clone())
    }
}

/// Creates a new file named `name` in `dir` (or `stem-1.ext`, `stem-2.ext`, … when taken),
/// mode 0600, never following or reusing what is there.
fn create_new(dir: &Path, name: &str) -> std::io::Result<(File, PathBuf)> {
    use std::os::unix::fs::OpenOptionsExt;
    let (stem, ext) = name.rsplit_once('.').map_or((name, ""), |(s, e)| (s, e));
    let mut last = None;
    for attempt in 0..8 {
        let path = match (attempt, ext) {
            (0, _) => dir.join(name),
            (_, "") => dir.join(format!("{stem}-{attempt}")),
            _ => dir.join(format!("{stem}-{attempt}.{ext}")),
        };
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
        {
            Ok(file) => return Ok((file, path)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| std::io::Error::other("every spill file name is taken")))
}

/// Reads `stream` to the end, keeping at most `cap` bytes of head and `cap` of tail in memory,
/// and spilling to `spill` once it does not fit (up to the spill's limits; the rest is read and
/// dropped, so the command never blocks on a full pipe).
pub fn capture(
    mut stream: impl Read,
    cap: usize,
    spill: SpillTarget,
    command: &str,
) -> Result<Captured, ExecError> {
    let mut out = Captured::default();
    let mut ring: std::collections::VecDeque<u8> = std::collections::VecDeque::new();
    let mut spill = Spill::new(spill);
    let mut buf = vec![0u8; 64 * 1024];
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
        if spill.started() {
            spill.write(chunk);
        }
        let room = cap.saturating_sub(out.head.len());
        let (to_head, rest) = chunk.split_at(room.min(chunk.len()));
        out.head.extend_from_slice(to_head);
        if !rest.is_empty() {
            if !spill.started() {
                spill.write(&out.head);
                spill.write(rest);
            }
            ring.extend(rest);
            while ring.len() > cap {
                let excess = ring.len() - cap;
                ring.drain(..excess);
            }
        }
    }
    if spill.started() {
        out.tail = ring.into_iter().collect();
    }
    (out.spill, out.spilled, out.cut) = spill.state();
    Ok(out)
}

#[cfg(test)]
#[path = "output_tests.rs"]
mod tests;
