//! Verification of a log as it streams past, one record at a time: numbered from 0 without
//! gaps, stored exactly as bridle writes it, every hash linking to the one before under the
//! key, event 0 the header of the session, every event readable and valid, and nothing cut from
//! the end that the head record says was written. Nothing but a bounded batch of records and a
//! few hashes is held, so memory does not grow with the log; callers keep what they need.
//!
//! Two stages, fed in order: the [`Chain`] (numbers, stored form, hashes, the head) and the
//! [`Events`] (each event parsed and checked, in the lifecycle so far). The chain hands the
//! events stage batches of what it linked; [`run`] runs the stages on two threads when it may
//! (the stages are of about equal cost), and the first problem in log order wins exactly as if
//! one thread had checked record after record.

use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;

use super::chain::{Hash, LogKey};
use super::event::{Event, EventKinds};
use super::head::Head;
use super::record::{Record, Scanned};
use super::store::{Flow, LogStore, TornTail};
use crate::AgentError;
use events::Events;

mod events;

/// The first bad event and what is wrong with it.
pub(crate) type Problem = (u64, String);

/// One record that passed, as the caller gets it.
#[derive(Debug)]
pub(crate) struct Passed<'a> {
    pub seq: u64,
    pub time: &'a str,
    /// `None` for an ignorable event of a type this version does not know (or, when the
    /// caller collects them, one of a type nobody declares: see [`Undeclared`]).
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

/// What to do with an event of a type neither this version nor a loaded plugin declares, and
/// that is not marked ignorable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Undeclared {
    /// It is the problem (what is derived from the log would be wrong without it).
    Refuse,
    /// Go on checking the chain over it and report it afterwards (`log verify`).
    Collect,
}

/// What a run of verification found.
#[derive(Debug)]
pub(crate) struct Outcome {
    pub verdict: Result<Tip, Problem>,
    pub torn: Option<TornTail>,
    /// Events of undeclared types that are chained like every other (with [`Undeclared::Collect`]).
    pub undeclared: Vec<(u64, String)>,
}

/// How the log is read.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Options<'a> {
    pub key: &'a LogKey,
    pub id: &'a str,
    pub kinds: Option<&'a dyn EventKinds>,
    pub undeclared: Undeclared,
    /// Hand each record back beside its event.
    pub records: bool,
}

/// Streams the records of `store` through verification against `head`, handing each that
/// passed to `keep` (in log order) and stopping at the first that did not. `keep` runs on a
/// second thread unless records are kept (export: the records are the point, not speed).
pub(crate) fn run(
    store: &mut dyn LogStore,
    head: Result<Option<Head>, String>,
    options: Options<'_>,
    mut keep: impl FnMut(Passed<'_>) + Send,
) -> Result<Outcome, AgentError> {
    let mut chain = Chain::new(options.key, options.id, head, options.records);
    let mut events = Events::new(options);
    let mut failed: Option<Problem> = None;
    let torn = if options.records {
        let mut batch = Batch::default();
        store.scan(&mut |scanned| {
            batch.clear();
            let checked = chain
                .link(scanned, &mut batch)
                .and_then(|()| events.check(&mut batch, &mut keep));
            match checked {
                Ok(()) => Flow::Continue(()),
                Err(problem) => {
                    failed = Some(problem);
                    Flow::Break(())
                }
            }
        })?
    } else {
        let (torn, late) = two_threads(store, &mut chain, &mut events, &mut failed, keep)?;
        // The events stage saw only records before any the chain refused: its problem is
        // the earlier one.
        if let Some(problem) = late {
            failed = Some(problem);
        }
        torn
    };
    let verdict = match failed {
        Some(problem) => Err(problem),
        None => chain.finish(),
    };
    Ok(Outcome {
        verdict,
        torn,
        undeclared: events.undeclared,
    })
}

/// Batches in flight between the stages: bounded, so memory stays flat.
const IN_FLIGHT: usize = 4;

/// Runs the chain on this thread and the events stage on another; returns the torn tail and
/// the events stage's problem. The chain's own problem goes to `failed`.
fn two_threads(
    store: &mut dyn LogStore,
    chain: &mut Chain<'_>,
    events: &mut Events<'_>,
    failed: &mut Option<Problem>,
    mut keep: impl FnMut(Passed<'_>) + Send,
) -> Result<(Option<TornTail>, Option<Problem>), AgentError> {
    let stop = AtomicBool::new(false);
    std::thread::scope(|scope| {
        let (full_tx, full_rx) = mpsc::sync_channel::<Batch>(IN_FLIGHT);
        let (empty_tx, empty_rx) = mpsc::channel::<Batch>();
        let stop = &stop;
        let worker = scope.spawn(move || {
            let mut problem = None;
            for mut batch in full_rx {
                if problem.is_none()
                    && let Err(p) = events.check(&mut batch, &mut keep)
                {
                    problem = Some(p);
                    stop.store(true, Ordering::Relaxed);
                }
                batch.clear();
                // The reader may be gone already; the batch is then dropped.
                let _ = empty_tx.send(batch);
            }
            problem
        });
        let mut batch = Batch::default();
        let mut sent = true;
        let scanned = store.scan(&mut |scanned| {
            if stop.load(Ordering::Relaxed) {
                return Flow::Break(());
            }
            if let Err(problem) = chain.link(scanned, &mut batch) {
                *failed = Some(problem);
                return Flow::Break(());
            }
            if batch.is_full() {
                let next = empty_rx.try_recv().unwrap_or_default();
                sent = full_tx.send(std::mem::replace(&mut batch, next)).is_ok();
                if !sent {
                    return Flow::Break(());
                }
            }
            Flow::Continue(())
        });
        if sent && !batch.items.is_empty() {
            let _ = full_tx.send(batch);
        }
        drop(full_tx);
        let problem = match worker.join() {
            Ok(problem) => problem,
            Err(panic) => std::panic::resume_unwind(panic),
        };
        match (scanned, problem) {
            // The events stage saw only lines the scan had read, so its problem comes before
            // any line the scan then failed to read: the first in log order wins.
            (Err(_), Some(problem)) => Ok((None, Some(problem))),
            (scanned, problem) => Ok((scanned?, problem)),
        }
    })
}

/// Records the chain linked, in order, for the events stage: their times and each event as
/// `{"type":..,"data":..}` (tag first, so serde reads the data straight into the variant),
/// all in one buffer reused from batch to batch. It is text (the chain read every line as
/// UTF-8), so serde does not check each string again.
#[derive(Debug, Default)]
struct Batch {
    bytes: String,
    items: Vec<Item>,
    records: Vec<Record>,
}

#[derive(Debug)]
struct Item {
    seq: u64,
    time: Range<usize>,
    kind: Range<usize>,
    /// `{"type":..,"data":..}`.
    tagged: Range<usize>,
    data: Range<usize>,
    ignorable: bool,
}

impl Batch {
    const MAX_ITEMS: usize = 1024;
    const MAX_BYTES: usize = 1 << 20;

    fn is_full(&self) -> bool {
        self.items.len() >= Self::MAX_ITEMS || self.bytes.len() >= Self::MAX_BYTES
    }

    fn clear(&mut self) {
        self.bytes.clear();
        self.items.clear();
        self.records.clear();
    }

    /// Adds a linked record; `kind` is its type and that as a JSON string (`None`: the type
    /// needs no escape).
    fn push(
        &mut self,
        seq: u64,
        time: &str,
        kind: (&str, Option<&str>),
        data: &str,
        ignorable: bool,
    ) {
        let b = &mut self.bytes;
        let start = b.len();
        b.push_str(time);
        let time = start..b.len();
        let kind_at = b.len();
        b.push_str(kind.0);
        let kind_range = kind_at..b.len();
        let tagged = b.len();
        b.push_str("{\"type\":");
        match kind.1 {
            Some(quoted) => b.push_str(quoted),
            None => {
                b.push('"');
                b.push_str(kind.0);
                b.push('"');
            }
        }
        b.push_str(",\"data\":");
        let data_at = b.len();
        b.push_str(data);
        let data_range = data_at..b.len();
        b.push('}');
        self.items.push(Item {
            seq,
            time,
            kind: kind_range,
            tagged: tagged..b.len(),
            data: data_range,
            ignorable,
        });
    }
}

/// The first stage: every record numbered in turn, stored as bridle writes it, and linked to
/// the one before; where the head record says the log ends.
#[derive(Debug)]
struct Chain<'a> {
    key: &'a LogKey,
    /// The head record, read before the log (or why it cannot be trusted).
    head: Result<Option<Head>, String>,
    prev: Hash,
    next: u64,
    /// The chain's hash at the head record's event, once the log reached it.
    at_head: Option<Hash>,
    records: bool,
}

impl<'a> Chain<'a> {
    fn new(key: &'a LogKey, id: &str, head: Result<Option<Head>, String>, records: bool) -> Self {
        Self {
            prev: key.genesis(id),
            key,
            head,
            next: 0,
            at_head: None,
            records,
        }
    }

    /// Checks the next record, as the store read it, and adds it to `batch`.
    fn link(&mut self, scanned: Scanned<'_>, batch: &mut Batch) -> Result<(), Problem> {
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
        match scanned {
            Scanned::Exact(raw) => {
                self.prev = raw
                    .check_link(self.key, &self.prev)
                    .map_err(|e| (expected, e))?;
                if self.records {
                    batch.records.push(raw.to_record());
                }
                // The strict scan let no escape into the type: it quotes as it is.
                batch.push(seq, raw.time, (raw.kind, None), raw.data, raw.ignorable);
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
                let quoted = super::canonical::quoted(&record.kind);
                // serde_json writes text.
                let Ok(data) = std::str::from_utf8(&data) else {
                    return Err((expected, "its data is not UTF-8".to_owned()));
                };
                batch.push(
                    seq,
                    &record.time,
                    (&record.kind, Some(quoted.as_str())),
                    data,
                    record.ignorable,
                );
                if self.records {
                    batch.records.push(record);
                }
            }
        }
        if matches!(&self.head, Ok(Some(head)) if head.seq == expected) {
            self.at_head = Some(self.prev);
        }
        self.next += 1;
        Ok(())
    }

    /// The verdict once every record passed: the log is not empty and ends where its head
    /// record says (or later: a head is written after the batch it names).
    fn finish(self) -> Result<Tip, Problem> {
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

#[cfg(test)]
mod tests {
    use super::super::chain::{self, LogKey};
    use super::super::event::SessionHeader;
    use super::super::{SessionDir, head, jsonl::JsonlStore};
    use super::*;

    const ID: &str = "20261201-000000-0000abcd";

    /// A log of `count` events (a header, then turn starts), each correctly chained, with the
    /// data of event `bad_data` replaced (and sealed) by one its type cannot read, and the
    /// stored bytes of event `bad_link` edited after sealing; then what `verify` says.
    fn first_problem(count: u64, bad_data: Option<u64>, bad_link: Option<u64>) -> (u64, String) {
        first_problem_with(count, bad_data, bad_link, None)
    }

    /// [`first_problem`], with the line of event `garbage` (when given) replaced by text that
    /// is not JSON.
    fn first_problem_with(
        count: u64,
        bad_data: Option<u64>,
        bad_link: Option<u64>,
        garbage: Option<u64>,
    ) -> (u64, String) {
        let dir = tempfile::tempdir().unwrap();
        let key = LogKey::load_or_create(dir.path()).unwrap();
        let mut prev = key.genesis(ID);
        let mut records = Vec::new();
        for seq in 0..count {
            let event = if seq == 0 {
                Event::SessionHeader(SessionHeader {
                    id: ID.into(),
                    created: "t".into(),
                    workspace: "/w".into(),
                    profile: "p".into(),
                    policy_digest: "d".into(),
                })
            } else {
                Event::TurnStart { turn: seq }
            };
            let mut record = Record::seal(&key, &prev, seq, "t".into(), &event);
            if bad_data == Some(seq) {
                record.data = serde_json::json!({"turn": "not a number"});
                record.hash = chain::to_hex(&key.link(&prev, &record.canonical_body()));
            }
            prev = chain::from_hex(&record.hash).unwrap();
            if bad_link == Some(seq) {
                record.data = serde_json::json!({"turn": seq + 1});
            }
            records.push(record);
        }
        let path = dir.path().join(format!("{ID}.jsonl"));
        drop(JsonlStore::create(&path, &records).unwrap());
        if let Some(garbage) = garbage {
            let text = std::fs::read_to_string(&path).unwrap();
            let lines: Vec<&str> = text
                .lines()
                .enumerate()
                .map(|(i, l)| if i as u64 == garbage { "not json" } else { l })
                .collect();
            std::fs::write(&path, lines.join("\n") + "\n").unwrap();
        }
        head::write(&head::path_for(&path), &key, ID, count - 1, &prev).unwrap();
        let v = SessionDir::existing(dir.path())
            .unwrap()
            .verify(ID)
            .unwrap();
        let problem = v.problem.expect("a problem");
        assert_eq!(v.intact, problem.0);
        problem
    }

    /// The two stages run apart (far more events than a batch holds), yet the problem
    /// reported is the first in log order, said as one pass over the records says it.
    #[test]
    fn the_first_problem_in_log_order_wins_whichever_stage_finds_it() {
        let count = 3000;
        let (seq, what) = first_problem(count, Some(1100), Some(2500));
        assert_eq!(seq, 1100, "{what}");
        assert!(what.starts_with("turn/start data: "), "{what}");
        let (seq, what) = first_problem(count, Some(2500), Some(1100));
        assert_eq!(seq, 1100, "{what}");
        assert!(what.contains("hash does not match"), "{what}");
        let (seq, what) = first_problem(count, Some(2000), Some(2000));
        assert_eq!(seq, 2000);
        assert!(what.contains("hash does not match"), "{what}");
        let (seq, what) = first_problem(count, Some(count - 1), None);
        assert_eq!(seq, count - 1, "{what}");
    }

    /// A line that is not a record, read ahead by the chain stage after an event the events
    /// stage refuses, does not hide that earlier problem.
    #[test]
    fn an_unreadable_line_after_a_bad_event_does_not_hide_it() {
        let (seq, what) = first_problem_with(3000, Some(1100), None, Some(1110));
        assert_eq!(seq, 1100, "{what}");
        assert!(what.starts_with("turn/start data: "), "{what}");
    }
}
