//! [`SessionLog`]: one session's append-only log, sealed event by event, written in batches
//! that a barrier makes durable.

use super::chain::{self, Hash, LogKey};
use super::compaction::{self, Window};
use super::event::Event;
use super::head;
use super::progress::Progress;
use super::record::{self, Record};
use super::store::LogStore;
use super::verify::Tip;
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
    /// Where in `events` the latest `context/compacted` is.
    compacted: Option<usize>,
    /// Set when a write failed: nothing more is appended (a gap would break the chain).
    failed: Option<String>,
    /// Told of every event as it is appended (the front ends' feed).
    watcher: Option<Watcher>,
    /// The head record, rewritten after every batch.
    head: head::HeadFile,
    /// Held while the log is open, so no other process appends to the same session.
    _lock: std::fs::File,
    /// The event types plugins declare (an event of another type is never written).
    kinds: Option<std::sync::Arc<dyn super::event::EventKinds>>,
}

impl SessionLog {
    /// A log whose stored events (already verified) are `events`, ending at `tip`.
    pub(crate) fn resume_from(
        id: String,
        store: Box<dyn LogStore>,
        key: LogKey,
        lock: std::fs::File,
        events: Vec<(u64, Event)>,
        tip: Tip,
    ) -> Self {
        let mut progress = Progress::default();
        let mut compacted = None;
        for (i, (_, event)) in events.iter().enumerate() {
            progress.observe(event);
            if matches!(event, Event::ContextCompacted { .. }) {
                compacted = Some(i);
            }
        }
        let head = head::HeadFile::new(head::path_for(store.path()));
        Self {
            head,
            id,
            store,
            key,
            next_seq: tip.next_seq,
            last_hash: tip.last_hash,
            pending: Vec::new(),
            events,
            progress,
            compacted,
            failed: None,
            watcher: None,
            _lock: lock,
            kinds: None,
        }
    }

    /// The log, writing events of the types `kinds` declares (checked by their validators).
    pub(crate) fn with_kinds(
        mut self,
        kinds: Option<std::sync::Arc<dyn super::event::EventKinds>>,
    ) -> Self {
        self.kinds = kinds;
        self
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

    /// What the next request derives from: the latest compaction's summary and the events
    /// from where it ends on (every event when there is none).
    pub fn request_window(&self) -> Window<'_> {
        compaction::window(&self.events, self.compacted)
    }

    /// The number of the latest `context/compacted` event.
    pub fn latest_compaction(&self) -> Option<u64> {
        self.compacted
            .and_then(|i| self.events.get(i))
            .map(|(seq, _)| *seq)
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
        if let Event::Plugin(plugin) = &event {
            // Never written when reading it back would refuse it.
            super::kinds::check_append(self.kinds.as_deref(), plugin).map_err(refuse)?;
        }
        let seq = self.next_seq;
        if let Event::ContextCompacted {
            before, summary, ..
        } = &event
        {
            // Never written when verification would refuse it.
            compaction::check(
                seq,
                *before,
                summary,
                self.latest_compaction(),
                &self.progress,
            )
            .map_err(refuse)?;
        }
        let record = Record::seal(&self.key, &self.last_hash, seq, time, &event);
        self.last_hash = chain::from_hex(&record.hash).unwrap_or(self.last_hash);
        self.next_seq += 1;
        self.pending.push(record);
        self.progress.observe(&event);
        if let Some(Watcher(watch)) = &mut self.watcher {
            watch(seq, &event);
        }
        if matches!(event, Event::ContextCompacted { .. }) {
            self.compacted = Some(self.events.len());
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
            self.head
                .write(&self.key, &self.id, self.next_seq - 1, &self.last_hash)
                .map_err(|e| AgentError::AppendLog {
                    path: self.head.path().to_owned(),
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

/// A new JSONL session in the session directory `dir`, for tests.
#[cfg(test)]
pub(crate) fn scratch_session(dir: &std::path::Path) -> SessionLog {
    super::SessionDir::open(dir)
        .and_then(|d| {
            d.create(
                super::Backend::Jsonl,
                &super::NewSession {
                    workspace: "/w".into(),
                    profile: "p".into(),
                    policy_digest: "d".into(),
                },
            )
        })
        .unwrap_or_else(|e| panic!("{e}"))
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
