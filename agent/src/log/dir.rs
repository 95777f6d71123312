//! [`SessionDir`]: the directory session logs live in (outside every writable root), with the
//! key that seals them. Creates, resumes, forks, verifies and lists sessions.

use std::io::Read;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use super::chain::LogKey;
use super::event::{Event, SessionHeader, TurnEndReason};
use super::jsonl::unique_beside;
use super::progress::Progress;
use super::record;
use super::session::{SessionLog, Verified, verify_records};
use super::store::{Backend, Stored, TornTail};
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
    /// A crash left an incomplete last line; it was moved to `saved_to`.
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
                "an incomplete last event ({len} bytes) was moved to {}",
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
    /// An incomplete last line a crash left (not tampering; set aside when resumed).
    pub torn: Option<TornTail>,
}

/// One line of `bridle log list`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionSummary {
    pub id: String,
    pub backend: Backend,
    pub created: String,
    pub workspace: String,
    pub turns: u64,
    /// `open`, how the last turn ended, `new`, or why the log cannot be read.
    pub status: String,
}

/// A directory of session logs.
#[derive(Debug, Clone)]
pub struct SessionDir {
    dir: PathBuf,
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
        Ok(Self {
            dir: dir.to_owned(),
        })
    }

    /// Where the directory is.
    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// Starts a new session: its header is event 0, written before this returns.
    pub fn create(&self, backend: Backend, new: &NewSession) -> Result<SessionLog, AgentError> {
        let key = LogKey::load_or_create(&self.dir)?;
        let (id, store) = self.claim_new(backend)?;
        let lock = self.lock(&id)?;
        let genesis = key.genesis(&id);
        let mut log = SessionLog::resume_from(
            id.clone(),
            store,
            key,
            lock,
            Verified {
                events: Vec::new(),
                next_seq: 0,
                last_hash: genesis,
            },
        );
        log.append(Event::SessionHeader(SessionHeader {
            id,
            created: record::now_rfc3339(),
            workspace: new.workspace.clone(),
            profile: new.profile.clone(),
            policy_digest: new.policy_digest.clone(),
        }))?;
        log.barrier()?;
        Ok(log)
    }

    /// Opens session `id` to continue it. The log must verify; a torn last line is set aside
    /// and a turn left open is closed as interrupted, both reported.
    pub fn resume(&self, id: &str) -> Result<(SessionLog, Vec<Repair>), AgentError> {
        let (backend, path) = self.locate(id)?;
        let lock = self.lock(id)?;
        let mut store = backend.open(&path)?;
        let Stored { records, torn } = store.read_all()?;
        let key = LogKey::load(&self.dir)?;
        let verified = verified(&path, &records, &key, id)?;
        let mut repairs = Vec::new();
        if let Some(torn) = torn
            && let Some(saved_to) = store.set_aside_torn_tail()?
        {
            repairs.push(Repair::TornTailSetAside {
                len: torn.len,
                saved_to,
            });
        }
        let mut log = SessionLog::resume_from(id.to_owned(), store, key, lock, verified);
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

    /// Copies session `id` up to event `at` (default: its last) into a new session, followed
    /// by a `session/forked` marker. `at` may not fall inside a turn.
    pub fn fork(
        &self,
        id: &str,
        at: Option<u64>,
        backend: Backend,
    ) -> Result<SessionLog, AgentError> {
        let (source_backend, path) = self.locate(id)?;
        let Stored { records, .. } = source_backend.open(&path)?.read_all()?;
        let key = LogKey::load(&self.dir)?;
        let verified = verified(&path, &records, &key, id)?;
        let last = verified.next_seq.saturating_sub(1);
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
        let mut prefix = Vec::new();
        for (seq, event) in verified.events.into_iter().take_while(|(s, _)| *s <= at) {
            progress.observe(&event);
            prefix.push((seq, event));
        }
        if let Some(turn) = progress.open_turn {
            return Err(refuse(format!(
                "event {at} is inside turn {turn}; fork at an event outside a turn"
            )));
        }
        let Some((_, Event::SessionHeader(header))) = prefix.first() else {
            return Err(refuse("the session has no header".to_owned()));
        };
        let mut log = self.create(
            backend,
            &NewSession {
                workspace: header.workspace.clone(),
                profile: header.profile.clone(),
                policy_digest: header.policy_digest.clone(),
            },
        )?;
        for (seq, event) in prefix.into_iter().skip(1) {
            let time = usize::try_from(seq)
                .ok()
                .and_then(|i| records.get(i))
                .map_or_else(record::now_rfc3339, |r| r.time.clone());
            log.append_at(event, time)?;
        }
        log.append(Event::SessionForked {
            from: id.to_owned(),
            seq: at,
        })?;
        log.barrier()?;
        Ok(log)
    }

    /// Checks session `id` without changing it.
    pub fn verify(&self, id: &str) -> Result<Verification, AgentError> {
        let (backend, path) = self.locate(id)?;
        let Stored { records, torn } = backend.open(&path)?.read_all()?;
        let key = LogKey::load(&self.dir)?;
        Ok(match verify_records(&records, &key, id) {
            Ok(v) => Verification {
                intact: v.next_seq,
                problem: None,
                torn,
            },
            Err((seq, what)) => Verification {
                intact: seq,
                problem: Some((seq, what)),
                torn,
            },
        })
    }

    /// Every verified event of session `id`, read-only (for `show` and `export`).
    pub fn read(&self, id: &str) -> Result<Vec<record::Record>, AgentError> {
        let (backend, path) = self.locate(id)?;
        let Stored { records, .. } = backend.open(&path)?.read_all()?;
        let key = LogKey::load(&self.dir)?;
        verified(&path, &records, &key, id)?;
        Ok(records)
    }

    /// Every session in the directory, oldest first. A log that cannot be read is listed with
    /// the reason as its status.
    pub fn list(&self) -> Result<Vec<SessionSummary>, AgentError> {
        let entries =
            std::fs::read_dir(&self.dir).map_err(|source| AgentError::ListSessionDir {
                dir: self.dir.clone(),
                source,
            })?;
        let mut out = Vec::new();
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            let Some((id, backend)) = Backend::ALL.iter().find_map(|b| {
                name.strip_suffix(&format!(".{}", b.extension()))
                    .map(|id| (id.to_owned(), *b))
            }) else {
                continue;
            };
            if parse_id(&id).is_err() {
                continue;
            }
            out.push(self.summarise(id, backend));
        }
        out.sort_by(|a, b| (&a.created, &a.id).cmp(&(&b.created, &b.id)));
        Ok(out)
    }

    fn summarise(&self, id: String, backend: Backend) -> SessionSummary {
        let mut summary = SessionSummary {
            id,
            backend,
            created: String::new(),
            workspace: String::new(),
            turns: 0,
            status: String::new(),
        };
        let records = match self.read(&summary.id) {
            Ok(records) => records,
            Err(e) => {
                summary.status = format!("unreadable: {e}");
                return summary;
            }
        };
        let mut progress = Progress::default();
        for record in &records {
            match record.event() {
                Ok(Some(Event::SessionHeader(h))) => {
                    summary.created = h.created;
                    summary.workspace = h.workspace;
                }
                Ok(Some(event)) => progress.observe(&event),
                _ => {}
            }
        }
        summary.turns = progress.last_turn.map_or(0, |t| t + 1);
        summary.status = match (progress.open_turn, progress.last_end) {
            (Some(_), _) => "open".to_owned(),
            (None, Some(reason)) => turn_end_name(reason).to_owned(),
            (None, None) => "new".to_owned(),
        };
        summary
    }

    /// The backend and file of session `id`.
    pub fn locate(&self, id: &str) -> Result<(Backend, PathBuf), AgentError> {
        parse_id(id)?;
        let found: Vec<_> = Backend::ALL
            .iter()
            .map(|b| (*b, self.dir.join(format!("{id}.{}", b.extension()))))
            .filter(|(_, p)| p.is_file())
            .collect();
        match found.as_slice() {
            [one] => Ok(one.clone()),
            [] => Err(AgentError::FindSession {
                id: id.to_owned(),
                dir: self.dir.clone(),
            }),
            _ => Err(AgentError::OpenLog {
                path: self.dir.join(id),
                reason: "the session exists in both stores (jsonl and sqlite)".to_owned(),
            }),
        }
    }

    /// A new id and its empty log.
    fn claim_new(
        &self,
        backend: Backend,
    ) -> Result<(String, Box<dyn crate::log::LogStore>), AgentError> {
        let mut last_error = None;
        for _ in 0..16 {
            let id = new_id()?;
            let taken = Backend::ALL
                .iter()
                .any(|b| self.dir.join(format!("{id}.{}", b.extension())).exists());
            if taken {
                continue;
            }
            match backend.create(&self.dir.join(format!("{id}.{}", backend.extension()))) {
                Ok(store) => return Ok((id, store)),
                Err(e) => last_error = Some(e),
            }
        }
        Err(last_error.unwrap_or_else(|| AgentError::CreateLog {
            path: self.dir.clone(),
            reason: "no free session id".to_owned(),
        }))
    }

    /// An exclusive lock on session `id`, held while its log is open for appending.
    fn lock(&self, id: &str) -> Result<std::fs::File, AgentError> {
        let path = self.dir.join(format!("{id}.lock"));
        let fail = |reason: String| AgentError::OpenLog {
            path: path.clone(),
            reason,
        };
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
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

    /// Where a crash's torn tail of session `id` would be set aside (for messages and tests).
    pub fn torn_tail_path(&self, id: &str) -> Option<PathBuf> {
        let (_, path) = self.locate(id).ok()?;
        unique_beside(&path, "torn").ok()
    }
}

/// [`verify_records`], with a failure as an error naming the log at `path`.
fn verified(
    path: &Path,
    records: &[record::Record],
    key: &LogKey,
    id: &str,
) -> Result<Verified, AgentError> {
    verify_records(records, key, id).map_err(|(seq, what)| AgentError::VerifyLog {
        path: path.to_owned(),
        seq,
        what,
    })
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
