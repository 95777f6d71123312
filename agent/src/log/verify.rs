//! Verification of a log as it streams past, one record at a time: numbered from 0 without
//! gaps, stored exactly as bridle writes it, every hash linking to the one before under the
//! key, event 0 the header of the session, every event readable and valid, and nothing cut from
//! the end that the head record says was written. Nothing but the current record and a few
//! hashes is held, so memory does not grow with the log; callers keep what they need.

use super::chain::{Hash, LogKey};
use super::compaction;
use super::event::Event;
use super::head::Head;
use super::progress::Progress;
use super::record::{Record, Scanned};

/// The first bad event and what is wrong with it.
pub(crate) type Problem = (u64, String);

/// One record that passed, as the caller gets it.
#[derive(Debug)]
pub(crate) struct Passed {
    pub seq: u64,
    pub time: String,
    /// `None` for an ignorable event of a type this version does not know.
    pub event: Option<Event>,
    /// The record as stored, when the verifier was asked to keep records.
    pub record: Option<Record>,
}

/// Where a verified log ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Tip {
    /// The number the next event gets (the count of events).
    pub next_seq: u64,
    pub last_hash: Hash,
}

/// The check of one session's log, fed its records in order.
#[derive(Debug)]
pub(crate) struct Verifier<'a> {
    key: &'a LogKey,
    id: &'a str,
    /// The head record, read before the log (or why it cannot be trusted).
    head: Result<Option<Head>, String>,
    prev: Hash,
    next: u64,
    /// The chain's hash at the head record's event, once the log reached it.
    at_head: Option<Hash>,
    /// The lifecycle state so far, and the latest compaction, for checking compactions.
    progress: Progress,
    last_compaction: Option<u64>,
    /// Whether each record is handed back beside its event.
    records: bool,
    /// Reused for parsing each event.
    scratch: Vec<u8>,
}

impl<'a> Verifier<'a> {
    /// A check of the log of session `id` under `key`, against `head`; `records`: hand each
    /// record back beside its event.
    pub fn new(
        key: &'a LogKey,
        id: &'a str,
        head: Result<Option<Head>, String>,
        records: bool,
    ) -> Self {
        Self {
            prev: key.genesis(id),
            key,
            id,
            head,
            next: 0,
            at_head: None,
            progress: Progress::default(),
            last_compaction: None,
            records,
            scratch: Vec::new(),
        }
    }

    /// Checks the next record, as the store read it.
    pub fn check(&mut self, scanned: Scanned<'_>) -> Result<Passed, Problem> {
        let expected = self.next;
        let seq = scanned.seq();
        if seq != expected {
            return Err((
                expected,
                format!(
                    "expected event {expected}, found event {seq} (events removed, inserted or \
                     reordered)"
                ),
            ));
        }
        let (time, kind, kept, event) = match scanned {
            Scanned::Exact(raw) => {
                self.prev = raw
                    .check_link(self.key, &self.prev)
                    .map_err(|e| (expected, e))?;
                let kept = self.records.then(|| raw.to_record());
                let event = raw.event(&mut self.scratch).map_err(|e| (expected, e))?;
                let kind = (expected == 0).then(|| raw.kind.to_owned());
                (raw.time.to_owned(), kind, kept, event)
            }
            Scanned::Parsed(_, None) => {
                return Err((
                    expected,
                    "its stored bytes are not what bridle wrote for it (edited outside bridle)"
                        .to_owned(),
                ));
            }
            Scanned::Parsed(record, Some(data)) => {
                self.prev = record
                    .check_link_with(self.key, &self.prev, &data)
                    .map_err(|e| (expected, e))?;
                let time = record.time.clone();
                let kind = (expected == 0).then(|| record.kind.clone());
                let kept = self.records.then(|| record.clone());
                let event = record.into_event().map_err(|e| (expected, e))?;
                (time, kind, kept, event)
            }
        };
        if matches!(&self.head, Ok(Some(head)) if head.seq == expected) {
            self.at_head = Some(self.prev);
        }
        match (&event, expected) {
            (Some(Event::SessionHeader(header)), 0) if header.id != self.id => {
                return Err((
                    0,
                    format!(
                        "the header names session {:?}, not {:?}",
                        header.id, self.id
                    ),
                ));
            }
            (Some(Event::SessionHeader(_)), 0) => {}
            (_, 0) => {
                return Err((
                    0,
                    format!(
                        "event 0 is {:?}, not session/header",
                        kind.unwrap_or_default()
                    ),
                ));
            }
            (Some(Event::SessionHeader(_)), _) => {
                return Err((expected, "a second session/header".to_owned()));
            }
            (
                Some(Event::ContextCompacted {
                    before, summary, ..
                }),
                seq,
            ) => {
                compaction::check(seq, *before, summary, self.last_compaction, &self.progress)
                    .map_err(|e| (seq, e))?;
                self.last_compaction = Some(seq);
            }
            _ => {}
        }
        if let Some(event) = &event {
            self.progress.observe(event);
        }
        self.next += 1;
        Ok(Passed {
            seq: expected,
            time,
            event,
            record: kept,
        })
    }

    /// The verdict once every record passed: the log is not empty and ends where its head
    /// record says (or later: a head is written after the batch it names).
    pub fn finish(self) -> Result<Tip, Problem> {
        let count = self.next;
        if count == 0 {
            return Err((0, "the log is empty: no session/header".to_owned()));
        }
        match self.head {
            Err(why) => Err((count, format!("its head record cannot be trusted: {why}"))),
            Ok(None) => Err((
                count,
                "its head record is missing, so events cut from the end cannot be ruled out"
                    .to_owned(),
            )),
            Ok(Some(head)) => match self.at_head {
                None => Err((
                    count,
                    format!(
                        "the log ends at event {} but its head record says event {} was \
                         written: events were cut from the end",
                        count - 1,
                        head.seq
                    ),
                )),
                Some(hash) if hash != head.hash => Err((
                    head.seq,
                    "it does not match the head record (a different history)".to_owned(),
                )),
                Some(_) => Ok(Tip {
                    next_seq: count,
                    last_hash: self.prev,
                }),
            },
        }
    }
}
