//! [`SessionLog`]: one session's append-only log, sealed event by event, written in batches
//! that a barrier makes durable.

use super::chain::{self, Hash, LogKey};
use super::event::Event;
use super::head::{self, Head};
use super::progress::Progress;
use super::record::{self, Record};
use super::store::{LogStore, Stored};
use crate::AgentError;

/// Events buffered before a batch is written even without a barrier.
const MAX_BATCH: usize = 256;

/// One session's log, open for appending. Dropping it writes what is buffered.
#[derive(Debug)]
pub struct SessionLog {
    id: String,
    store: Box<dyn LogStore>,
    key: LogKey,
    next_seq: u64,
    last_hash: Hash,
    pending: Vec<Record>,
    events: Vec<(u64, Event)>,
    progress: Progress,
    /// Set when a write failed: nothing more is appended (a gap would break the chain).
    failed: Option<String>,
    /// Told of every event as it is appended (the front ends' feed).
    watcher: Option<Watcher>,
    /// The head record, rewritten after every batch.
    head_path: std::path::PathBuf,
    /// Held while the log is open, so no other process appends to the same session.
    _lock: std::fs::File,
}

impl SessionLog {
    /// A log whose stored events (already verified) are `events`, ending with `last_hash`.
    pub(crate) fn resume_from(
        id: String,
        store: Box<dyn LogStore>,
        key: LogKey,
        lock: std::fs::File,
        verified: Verified,
    ) -> Self {
        let mut progress = Progress::default();
        for (_, event) in &verified.events {
            progress.observe(event);
        }
        let head_path = head::path_for(store.path());
        Self {
            head_path,
            id,
            store,
            key,
            next_seq: verified.next_seq,
            last_hash: verified.last_hash,
            pending: Vec::new(),
            events: verified.events,
            progress,
            failed: None,
            watcher: None,
            _lock: lock,
        }
    }

    /// The session id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The file the log is in.
    pub fn path(&self) -> &std::path::Path {
        self.store.path()
    }

    /// Every event so far (written or buffered), with its sequence number.
    pub fn events(&self) -> &[(u64, Event)] {
        &self.events
    }

    /// Where the session stands in the turn/step lifecycle.
    pub fn progress(&self) -> &Progress {
        &self.progress
    }

    /// The sequence number the next event gets.
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// Calls `watch` with every event appended from now on, with its sequence number, once it
    /// is sealed into the log (in order, on the appending thread). Front ends render from it
    /// (`bridle run --json`, the progress lines); an event is never shown before the log has
    /// it. Replaces an earlier watcher.
    pub fn watch(&mut self, watch: impl FnMut(u64, &Event) + Send + 'static) {
        self.watcher = Some(Watcher(Box::new(watch)));
    }

    /// Records `event` (buffered; see [`SessionLog::barrier`]) and returns its sequence number.
    pub fn append(&mut self, event: Event) -> Result<u64, AgentError> {
        self.append_at(event, record::now_rfc3339())
    }

    /// Records `event` with a given time (a fork copies events with their original times).
    pub(crate) fn append_at(&mut self, event: Event, time: String) -> Result<u64, AgentError> {
        let refuse = |reason: String| AgentError::RecordEvent {
            path: self.store.path().to_owned(),
            kind: event.kind().to_owned(),
            reason,
        };
        if let Some(reason) = &self.failed {
            return Err(refuse(format!(
                "an earlier write to the log failed ({reason})"
            )));
        }
        if matches!(event, Event::SessionHeader(_)) {
            return Err(refuse(
                "session/header is event 0 and only event 0".to_owned(),
            ));
        }
        let seq = self.next_seq;
        let record = Record::seal(&self.key, &self.last_hash, seq, time, &event);
        self.last_hash = chain::from_hex(&record.hash).unwrap_or(self.last_hash);
        self.next_seq += 1;
        self.pending.push(record);
        self.progress.observe(&event);
        if let Some(Watcher(watch)) = &mut self.watcher {
            watch(seq, &event);
        }
        self.events.push((seq, event));
        if self.pending.len() >= MAX_BATCH {
            self.barrier()?;
        }
        Ok(seq)
    }

    /// Makes every recorded event durable. The loop calls it before each model request and
    /// each tool execution, so a crash loses at most events that were not acted on.
    pub fn barrier(&mut self) -> Result<(), AgentError> {
        if self.pending.is_empty() {
            return Ok(());
        }
        if let Some(reason) = &self.failed {
            return Err(AgentError::AppendLog {
                path: self.store.path().to_owned(),
                reason: format!("an earlier write failed ({reason})"),
            });
        }
        // The log first, then its head: a crash in between leaves a head that is behind the
        // log, never ahead of it.
        let written = self.store.append(&self.pending).and_then(|()| {
            head::write(
                &self.head_path,
                &self.key,
                &self.id,
                self.next_seq - 1,
                &self.last_hash,
            )
            .map_err(|e| AgentError::AppendLog {
                path: self.head_path.clone(),
                reason: e.to_string(),
            })
        });
        match written {
            Ok(()) => {
                self.pending.clear();
                Ok(())
            }
            Err(e) => {
                self.failed = Some(e.to_string());
                Err(e)
            }
        }
    }
}

impl Drop for SessionLog {
    fn drop(&mut self) {
        if let Err(e) = self.barrier() {
            tracing::error!("session {}: events lost at exit: {e}", self.id);
        }
    }
}

/// What [`SessionLog::watch`] calls.
struct Watcher(Box<WatchFn>);

/// What a watcher is: told each event with its sequence number.
type WatchFn = dyn FnMut(u64, &Event) + Send;

impl std::fmt::Debug for Watcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Watcher")
    }
}

/// A log's events after verification.
#[derive(Debug)]
pub(crate) struct Verified {
    pub events: Vec<(u64, Event)>,
    pub next_seq: u64,
    pub last_hash: Hash,
}

/// Checks what a backend holds as the log of session `id`: numbered from 0 without gaps,
/// stored exactly as bridle writes it, every hash linking to the one before under `key`, event
/// 0 the header of `id`, every event readable, and nothing cut from the end that `head` (the
/// head record, or why it cannot be trusted) says was written. The error is the first bad
/// event and what is wrong with it.
pub(crate) fn verify_stored(
    stored: &Stored,
    key: &LogKey,
    id: &str,
    head: Result<Option<Head>, String>,
) -> Result<Verified, (u64, String)> {
    let records = &stored.records;
    let mut prev = key.genesis(id);
    let mut events = Vec::with_capacity(records.len());
    let mut hashes = Vec::with_capacity(records.len());
    for (expected, record) in (0u64..).zip(records) {
        if record.seq != expected {
            return Err((
                expected,
                format!(
                    "expected event {expected}, found event {} (events removed, inserted or \
                     reordered)",
                    record.seq
                ),
            ));
        }
        if stored.noncanonical.contains(&expected) {
            return Err((
                expected,
                "its stored bytes are not what bridle wrote for it (edited outside bridle)"
                    .to_owned(),
            ));
        }
        prev = record.check_link(key, &prev).map_err(|e| (expected, e))?;
        hashes.push(prev);
        let event = record.event().map_err(|e| (expected, e))?;
        match (&event, expected) {
            (Some(Event::SessionHeader(header)), 0) if header.id != id => {
                return Err((
                    0,
                    format!("the header names session {:?}, not {id:?}", header.id),
                ));
            }
            (Some(Event::SessionHeader(_)), 0) => {}
            (_, 0) => {
                return Err((
                    0,
                    format!("event 0 is {:?}, not session/header", record.kind),
                ));
            }
            (Some(Event::SessionHeader(_)), _) => {
                return Err((expected, "a second session/header".to_owned()));
            }
            _ => {}
        }
        if let Some(event) = event {
            events.push((expected, event));
        }
    }
    let count = u64::try_from(records.len()).unwrap_or(u64::MAX);
    if records.is_empty() {
        return Err((0, "the log is empty: no session/header".to_owned()));
    }
    match head {
        Err(why) => return Err((count, format!("its head record cannot be trusted: {why}"))),
        Ok(None) => {
            return Err((
                count,
                "its head record is missing, so events cut from the end cannot be ruled out"
                    .to_owned(),
            ));
        }
        Ok(Some(head)) => match usize::try_from(head.seq).ok().and_then(|i| hashes.get(i)) {
            None => {
                return Err((
                    count,
                    format!(
                        "the log ends at event {} but its head record says event {} was \
                         written: events were cut from the end",
                        count - 1,
                        head.seq
                    ),
                ));
            }
            Some(hash) if *hash != head.hash => {
                return Err((
                    head.seq,
                    "it does not match the head record (a different history)".to_owned(),
                ));
            }
            Some(_) => {}
        },
    }
    Ok(Verified {
        events,
        next_seq: count,
        last_hash: prev,
    })
}
