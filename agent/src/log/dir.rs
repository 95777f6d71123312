//! [`SessionDir`]: the directory session logs live in (outside every writable root), with the
//! key that seals them. Creates, resumes, forks and verifies sessions (finding and listing them:
//! [`super::listing`]).

use std::io::Read;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::chain::LogKey;
use super::event::EventKinds;
use super::event::{Event, SessionHeader, TurnEndReason};
use super::head;
use super::progress::Progress;
use super::record::{self, Record};
use super::session::SessionLog;
use super::store::{Backend, LogStore, TornTail};
use super::verify::{self, Options, Outcome, Passed, Problem, Tip, Undeclared};
use crate::AgentError;

/// What a new session is about (the header's other fields are filled in).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewSession {
    pub workspace: String,
    pub profile: String,
    pub policy_digest: String,
}

/// What opening a session for appending had to repair first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Repair {
    /// Trailing bytes that were not a complete event (a write a crash cut short) were moved
    /// to `saved_to`.
    TornTailSetAside { len: u64, saved_to: PathBuf },
    /// A turn was left open; it was closed with `synthetic` synthetic tool results and
    /// `turn/end {interrupted}`.
    TurnClosed { turn: u64, synthetic: usize },
}

impl std::fmt::Display for Repair {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::TornTailSetAside { len, saved_to } => write!(
                f,
                "{len} trailing bytes that were not a complete event were moved to {}",
                saved_to.display()
            ),
            Self::TurnClosed { turn, synthetic } => write!(
                f,
                "turn {turn} was left open; closed as interrupted ({synthetic} tool calls got a \
                 synthetic result)"
            ),
        }
    }
}

/// The outcome of `bridle log verify`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verification {
    /// Events that passed (all of them when `problem` is `None`).
    pub intact: u64,
    /// The first bad event and what is wrong with it.
    pub problem: Option<(u64, String)>,
    /// Trailing bytes that are not a complete event: a write a crash cut short, or bytes
    /// someone added. Not part of the log; set aside when the session is resumed.
    pub torn: Option<TornTail>,
    /// Events of a type neither this version nor a loaded plugin declares (not marked
    /// ignorable), with their numbers: the chain was checked over them, but what they say
    /// cannot be, so the first of them is also the `problem` when the chain is intact.
    pub undeclared: Vec<(u64, String)>,
}

/// A directory of session logs.
#[derive(Debug, Clone)]
pub struct SessionDir {
    dir: PathBuf,
    /// The event types loaded plugins declare, with their validators.
    kinds: Option<Arc<dyn EventKinds>>,
}

impl SessionDir {
    /// The directory at `dir`, created (mode 0700) when missing.
    pub fn open(dir: &Path) -> Result<Self, AgentError> {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|source| AgentError::CreateSessionDir {
                dir: dir.to_owned(),
                source,
            })?;
        Self::existing(dir)
    }

    /// The existing directory at `dir`, never created (for reading).
    pub fn existing(dir: &Path) -> Result<Self, AgentError> {
        check_dir(dir)?;
        Ok(Self {
            dir: dir.to_owned(),
            kinds: None,
        })
    }

    /// The same directory, reading and writing events of the types `kinds` declares (the
    /// loaded plugins'), each checked by its validator; without it only built-in types are.
    #[must_use]
    pub fn with_kinds(mut self, kinds: Arc<dyn EventKinds>) -> Self {
        self.kinds = Some(kinds);
        self
    }

    /// Where the directory is.
    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// Starts a new session: its header is event 0, durable (with the head record) before
    /// the log appears under its name.
    pub fn create(&self, backend: Backend, new: &NewSession) -> Result<SessionLog, AgentError> {
        self.create_with(backend, new, Vec::new())
    }

    /// A new session holding a header for `new`, then `prefix` (events with their times).
    fn create_with(
        &self,
        backend: Backend,
        new: &NewSession,
        prefix: Vec<(Event, String)>,
    ) -> Result<SessionLog, AgentError> {
        let key = self.key_for_writing()?;
        let mut last_error = None;
        for _ in 0..16 {
            let id = new_id()?;
            if Backend::ALL
                .iter()
                .any(|b| self.dir.join(format!("{id}.{}", b.extension())).exists())
            {
                continue;
            }
            let path = self.dir.join(format!("{id}.{}", backend.extension()));
            let lock = self.lock(&id)?;
            let header = Event::SessionHeader(SessionHeader {
                id: id.clone(),
                created: record::now_rfc3339(),
                workspace: new.workspace.clone(),
                profile: new.profile.clone(),
                policy_digest: new.policy_digest.clone(),
            });
            let all = std::iter::once((header, record::now_rfc3339())).chain(prefix.clone());
            let mut prev = key.genesis(&id);
            let mut records = Vec::with_capacity(prefix.len() + 1);
            let mut events = Vec::with_capacity(prefix.len() + 1);
            for (seq, (event, time)) in (0u64..).zip(all) {
                let sealed = Record::seal(&key, &prev, seq, time, &event);
                prev = super::chain::from_hex(&sealed.hash).unwrap_or(prev);
                records.push(sealed);
                events.push((seq, event));
            }
            let last = u64::try_from(records.len() - 1).unwrap_or(u64::MAX);
            // The head first: a log never exists without one.
            let head_path = head::path_for(&path);
            head::write(&head_path, &key, &id, last, &prev).map_err(|e| AgentError::CreateLog {
                path: head_path.clone(),
                reason: e.to_string(),
            })?;
            match backend.create(&path, &records) {
                Ok(store) => {
                    let tip = Tip {
                        next_seq: last + 1,
                        last_hash: prev,
                    };
                    return Ok(SessionLog::resume_from(id, store, key, lock, events, tip)
                        .with_kinds(self.kinds.clone()));
                }
                Err(e) => {
                    let _ = std::fs::remove_file(&head_path);
                    last_error = Some(e);
                }
            }
        }
        Err(last_error.unwrap_or_else(|| AgentError::CreateLog {
            path: self.dir.clone(),
            reason: "no free session id".to_owned(),
        }))
    }

    /// The directory's key, created when there is none yet, but never when logs sealed with
    /// a lost key are there (a new key would make all of them fail verification).
    fn key_for_writing(&self) -> Result<LogKey, AgentError> {
        let path = self.dir.join(LogKey::FILE_NAME);
        if !path.exists() && self.holds_logs() {
            return Err(AgentError::ReadLogKey {
                path,
                reason: "it is missing, but the directory holds session logs sealed with it; \
                         restore it from a backup (a new key would make every one of them fail \
                         verification)"
                    .to_owned(),
            });
        }
        LogKey::load_or_create(&self.dir)
    }

    fn holds_logs(&self) -> bool {
        std::fs::read_dir(&self.dir).is_ok_and(|entries| {
            entries.flatten().any(|e| {
                let name = e.file_name();
                let name = name.to_string_lossy();
                !name.starts_with('.')
                    && (name.ends_with(".head")
                        || Backend::ALL
                            .iter()
                            .any(|b| name.ends_with(&format!(".{}", b.extension()))))
            })
        })
    }

    /// Reads session `id` (read-only) record by record, verifying as it goes, and hands each
    /// record that passed to `keep`; nothing else is held. Returns the file, the verdict and
    /// the trailing bytes that are not a complete event.
    ///
    /// The head is read before the log: a writer makes a batch durable in the log before it
    /// writes the head naming it, so a head read first never names an event that the log,
    /// read after it, lacks. A session `bridle run` is appending to right now therefore
    /// verifies (up to wherever the read of the log ended) instead of looking cut short.
    pub(super) fn load(
        &self,
        id: &str,
        records: bool,
        keep: impl FnMut(Passed<'_>) + Send,
    ) -> Result<(PathBuf, Checked, Option<TornTail>), AgentError> {
        let (path, outcome) = self.load_with(id, records, Undeclared::Refuse, keep)?;
        Ok((path, outcome.verdict, outcome.torn))
    }

    /// [`SessionDir::load`], saying what to do with events of undeclared types.
    fn load_with(
        &self,
        id: &str,
        records: bool,
        undeclared: Undeclared,
        keep: impl FnMut(Passed<'_>) + Send,
    ) -> Result<(PathBuf, Outcome), AgentError> {
        let (backend, path) = self.locate(id)?;
        let mut store = backend.open_read_only(&path)?;
        let key = LogKey::load(&self.dir)?;
        let outcome = scan_verified(
            store.as_mut(),
            self.options(&key, id, undeclared, records),
            keep,
        )?;
        Ok((path, outcome))
    }

    fn options<'a>(
        &'a self,
        key: &'a LogKey,
        id: &'a str,
        undeclared: Undeclared,
        records: bool,
    ) -> Options<'a> {
        Options {
            key,
            id,
            kinds: self.kinds.as_deref(),
            undeclared,
            records,
        }
    }

    /// [`SessionDir::load`] keeping every event, which must verify.
    fn load_events(&self, id: &str) -> Result<(Vec<TimedEvent>, Tip), AgentError> {
        let mut events = Vec::new();
        let (path, verdict, _) = self.load(id, false, |passed| {
            if let Some(event) = passed.event {
                events.push((passed.seq, passed.time.to_owned(), event));
            }
        })?;
        let tip = verdict.map_err(|(seq, what)| AgentError::VerifyLog { path, seq, what })?;
        Ok((events, tip))
    }

    /// Opens session `id` to continue it. The log must verify; trailing bytes that are not a
    /// complete event are set aside and a turn left open is closed as interrupted, both
    /// reported.
    ///
    /// One pass over the log: each record is parsed, hashed and checked once, and its event
    /// kept for the loop (which derives its requests from them). A checkpoint of derived
    /// state would not make this cheaper without trusting it over the chain: the records
    /// before it would still have to be read and hashed to know the checkpoint describes them.
    pub fn resume(&self, id: &str) -> Result<(SessionLog, Vec<Repair>), AgentError> {
        let (backend, path) = self.locate(id)?;
        let lock = self.lock(id)?;
        let mut store: Box<dyn LogStore> = backend.open(&path)?;
        let key = LogKey::load(&self.dir)?;
        let mut events = Vec::new();
        let options = self.options(&key, id, Undeclared::Refuse, false);
        let Outcome { verdict, torn, .. } = scan_verified(store.as_mut(), options, |passed| {
            if let Some(event) = passed.event {
                events.push((passed.seq, event));
            }
        })?;
        let tip = verdict.map_err(|(seq, what)| AgentError::VerifyLog {
            path: path.clone(),
            seq,
            what,
        })?;
        let mut repairs = Vec::new();
        if let Some(torn) = torn
            && let Some(saved_to) = store.set_aside_torn_tail()?
        {
            repairs.push(Repair::TornTailSetAside {
                len: torn.len,
                saved_to,
            });
        }
        let mut log = SessionLog::resume_from(id.to_owned(), store, key, lock, events, tip)
            .with_kinds(self.kinds.clone());
        let closing = log.progress().closing_events();
        if let Some(turn) = log.progress().open_turn {
            let synthetic = log.progress().open_calls.len();
            for event in closing {
                log.append(event)?;
            }
            log.barrier()?;
            repairs.push(Repair::TurnClosed { turn, synthetic });
        }
        Ok((log, repairs))
    }

    /// Copies session `id` up to event `at` (default: its last) into a new session for `new`
    /// (the header describes the session that continues, not the one copied), followed by a
    /// `session/forked` marker. `at` may not fall inside a turn.
    pub fn fork(
        &self,
        id: &str,
        at: Option<u64>,
        backend: Backend,
        new: &NewSession,
    ) -> Result<SessionLog, AgentError> {
        let mut prefix = Vec::new();
        let (path, verdict, _) = self.load(id, false, |passed| {
            if at.is_none_or(|at| passed.seq <= at)
                && let Some(event) = passed.event
            {
                prefix.push((passed.seq, passed.time.to_owned(), event));
            }
        })?;
        let tip = verdict.map_err(|(seq, what)| AgentError::VerifyLog { path, seq, what })?;
        let last = tip.next_seq.saturating_sub(1);
        let at = at.unwrap_or(last);
        let refuse = |reason: String| AgentError::ForkSession {
            id: id.to_owned(),
            seq: at,
            reason,
        };
        if at > last {
            return Err(refuse(format!("the session has events 0 to {last}")));
        }
        let mut progress = Progress::default();
        for (_, _, event) in &prefix {
            progress.observe(event);
        }
        if let Some(turn) = progress.open_turn {
            return Err(refuse(format!(
                "event {at} is inside turn {turn}; fork at an event outside a turn"
            )));
        }
        if !matches!(prefix.first(), Some((_, _, Event::SessionHeader(_)))) {
            return Err(refuse("the session has no header".to_owned()));
        }
        // Copied events keep their original times; the marker is new.
        let mut copied: Vec<(Event, String)> = prefix
            .into_iter()
            .skip(1)
            .map(|(_, time, event)| (event, time))
            .collect();
        copied.push((
            Event::SessionForked {
                from: id.to_owned(),
                seq: at,
            },
            record::now_rfc3339(),
        ));
        self.create_with(backend, new, copied)
    }

    /// Checks session `id` without changing it, streaming: memory does not grow with the log.
    /// An event of a type nobody declares does not stop the check of the chain; the first
    /// one is the problem once the chain is found intact (its data cannot be checked).
    pub fn verify(&self, id: &str) -> Result<Verification, AgentError> {
        let (_, outcome) = self.load_with(id, false, Undeclared::Collect, |_| {})?;
        let Outcome {
            verdict,
            torn,
            undeclared,
        } = outcome;
        Ok(match (verdict, undeclared.first()) {
            (Ok(tip), None) => Verification {
                intact: tip.next_seq,
                problem: None,
                torn,
                undeclared,
            },
            (Ok(tip), Some((seq, kind))) => Verification {
                intact: *seq,
                problem: Some((
                    *seq,
                    format!(
                        "unknown event type {kind:?}: no loaded plugin declares it and it is \
                         not marked ignorable, so its data cannot be checked ({} events of \
                         undeclared types; the hash chain over all {} events is intact)",
                        undeclared.len(),
                        tip.next_seq
                    ),
                )),
                torn,
                undeclared,
            },
            (Err((seq, what)), _) => Verification {
                intact: seq,
                problem: Some((seq, what)),
                torn,
                undeclared,
            },
        })
    }

    /// Every record of session `id`, which must verify (read-only; for `export`).
    pub fn read(&self, id: &str) -> Result<Vec<Record>, AgentError> {
        let mut records = Vec::new();
        let (path, verdict, _) = self.load(id, true, |passed| records.extend(passed.record))?;
        verdict.map_err(|(seq, what)| AgentError::VerifyLog { path, seq, what })?;
        Ok(records)
    }

    /// Every event of session `id` with its number and time, which must verify (read-only;
    /// read and parsed once, for `show`). Ignorable events of unknown types are left out.
    pub fn read_events(&self, id: &str) -> Result<Vec<(u64, String, Event)>, AgentError> {
        self.load_events(id).map(|(events, _)| events)
    }

    /// An exclusive lock on session `id`, held while its log is open for appending.
    fn lock(&self, id: &str) -> Result<std::fs::File, AgentError> {
        let path = self.dir.join(format!("{id}.lock"));
        let fail = |reason: String| AgentError::OpenLog {
            path: path.clone(),
            reason,
        };
        // 0600 like everything else in the directory (the lock holds nothing, but nothing in
        // a session directory is for others to open).
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(0o600)
            .open(&path)
            .map_err(|e| fail(e.to_string()))?;
        match file.try_lock() {
            Ok(()) => Ok(file),
            Err(std::fs::TryLockError::WouldBlock) => Err(fail(
                "the session is open in another bridle process".to_owned(),
            )),
            Err(std::fs::TryLockError::Error(e)) => Err(fail(e.to_string())),
        }
    }
}

/// An event with its number and time.
type TimedEvent = (u64, String, Event);

/// What verification concluded: where the verified log ends, or the first bad event and why.
type Checked = Result<Tip, Problem>;

/// Streams the records of `store` (the log of session `id`) through verification, reading the
/// head record first, handing each record that passed to `keep` (with its stored form when
/// `records`), and stopping at the first that did not.
fn scan_verified(
    store: &mut dyn LogStore,
    options: Options<'_>,
    keep: impl FnMut(Passed<'_>) + Send,
) -> Result<Outcome, AgentError> {
    let head = head::read(&head::path_for(store.path()), options.key, options.id);
    verify::run(store, head, options, keep)
}
/// Refuses a directory someone else could have put logs or a key into: it must be a real
/// directory owned by this user and writable by nobody else.
fn check_dir(dir: &Path) -> Result<(), AgentError> {
    use std::os::unix::fs::MetadataExt;
    let refuse = |reason: String| AgentError::CheckSessionDir {
        dir: dir.to_owned(),
        reason,
    };
    let meta = std::fs::symlink_metadata(dir).map_err(|e| refuse(e.to_string()))?;
    if !meta.is_dir() {
        return Err(refuse("it is not a directory".to_owned()));
    }
    let me = std::fs::metadata("/proc/self")
        .map(|m| m.uid())
        .map_err(|e| refuse(format!("cannot tell which user this process runs as: {e}")))?;
    if meta.uid() != me {
        return Err(refuse(format!(
            "it belongs to uid {}, not to this user (uid {me})",
            meta.uid()
        )));
    }
    if meta.mode() & 0o022 != 0 {
        return Err(refuse(format!(
            "others can write to it (mode {:o})",
            meta.mode() & 0o777
        )));
    }
    Ok(())
}

/// The name `bridle log list` shows for a turn end reason.
pub fn turn_end_name(reason: TurnEndReason) -> &'static str {
    match reason {
        TurnEndReason::Completed => "completed",
        TurnEndReason::Aborted => "aborted",
        TurnEndReason::Blocked => "blocked",
        TurnEndReason::Error => "error",
        TurnEndReason::MaxTokens => "max-tokens",
        TurnEndReason::Interrupted => "interrupted",
    }
}

/// Checks that `id` can name a session file: letters, digits and `-`, 1 to 64 characters.
pub fn parse_id(id: &str) -> Result<(), AgentError> {
    let ok = !id.is_empty()
        && id.len() <= 64
        && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-');
    if ok {
        Ok(())
    } else {
        Err(AgentError::ParseSessionId { id: id.to_owned() })
    }
}

/// `YYYYMMDD-HHMMSS-` and 8 random hex digits.
fn new_id() -> Result<String, AgentError> {
    let mut random = [0u8; 4];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut random))
        .map_err(|e| AgentError::CreateLog {
            path: PathBuf::from("/dev/urandom"),
            reason: format!("reading randomness for a session id: {e}"),
        })?;
    let now = record::now_rfc3339();
    let stamp: String = now.chars().take(19).filter(char::is_ascii_digit).collect();
    let (date, time) = stamp.split_at(8.min(stamp.len()));
    let suffix: String = random.iter().map(|b| format!("{b:02x}")).collect();
    Ok(format!("{date}-{time}-{suffix}"))
}
