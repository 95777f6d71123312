//! Context compaction as a logged event (`context/compacted`): the summary that replaces, in
//! the requests made from then on, every event before a given one. The loop decides when to
//! compact (a threshold, a command) and writes the summary; this module checks the event, finds
//! what requests derive from, and appends one ([`SessionLog::compact`]).
//!
//! What it rules: `before` is at most the compaction's own number and past the previous
//! compaction (so the latest one covers every earlier one and is the only one requests read),
//! the summary is not blank, and no tool call is waiting for its result when it is written.
//! Verification checks these as it streams through the log; appending additionally checks that
//! `before` starts a turn or a step (or is the compaction itself), so no call is cut from its
//! result — verification cannot check that without remembering every boundary, so derivation
//! also drops any result whose call was compacted away.

use super::event::Event;
use super::progress::Progress;
use super::session::SessionLog;
use crate::AgentError;

/// What the requests made after `events` derive from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Window<'a> {
    /// The latest compaction's summary, standing for every event before `events`.
    pub summary: Option<&'a str>,
    /// The events from the latest compaction's `before` on (all of them without one).
    pub events: &'a [(u64, Event)],
}

/// The window of `events` (in log order) under the compaction at `latest` (an index into
/// `events`), or all of them when there is none.
pub(crate) fn window(events: &[(u64, Event)], latest: Option<usize>) -> Window<'_> {
    let Some((
        _,
        Event::ContextCompacted {
            before, summary, ..
        },
    )) = latest.and_then(|i| events.get(i))
    else {
        return Window {
            summary: None,
            events,
        };
    };
    let start = events.partition_point(|(seq, _)| seq < before);
    Window {
        summary: Some(summary),
        events: &events[start..],
    }
}

/// Checks a `context/compacted` event about to be event `seq`, after the compaction at `last`
/// (if any), in the lifecycle state `progress` of the events before it.
pub(crate) fn check(
    seq: u64,
    before: u64,
    summary: &str,
    last: Option<u64>,
    progress: &Progress,
) -> Result<(), String> {
    if summary.trim().is_empty() {
        return Err("context/compacted has an empty summary".to_owned());
    }
    if before == 0 || before > seq {
        return Err(format!(
            "context/compacted replaces the events before event {before}, which is not \
             between event 1 and itself (event {seq})"
        ));
    }
    if let Some(last) = last
        && before <= last
    {
        return Err(format!(
            "context/compacted replaces the events before event {before}, which leaves the \
             compaction at event {last} in force beside it (it must replace that one too)"
        ));
    }
    if let Some(open) = progress.open_calls.first() {
        return Err(format!(
            "context/compacted is written while tool call {:?} has no result",
            open.call_id
        ));
    }
    Ok(())
}

impl SessionLog {
    /// Appends a compaction: from here on requests carry `summary` in place of every event
    /// before `before`, which must start a turn or a step, or be the next event (compacting
    /// everything so far). `by` says who asked (`threshold`, `/compact`). Refused, with
    /// nothing written, when verification or derivation would not accept it.
    pub fn compact(&mut self, before: u64, summary: &str, by: &str) -> Result<u64, AgentError> {
        let seq = self.next_seq();
        let refuse = |reason: String| AgentError::RecordEvent {
            path: self.path().to_owned(),
            kind: "context/compacted".to_owned(),
            reason,
        };
        check(
            seq,
            before,
            summary,
            self.latest_compaction(),
            self.progress(),
        )
        .map_err(refuse)?;
        let events = self.events();
        let at = events.partition_point(|(s, _)| *s < before);
        let starts = match events.get(at) {
            None => before == seq,
            Some((s, event)) => {
                *s == before && matches!(event, Event::TurnStart { .. } | Event::StepStart { .. })
            }
        };
        if !starts {
            return Err(refuse(format!(
                "event {before} starts no turn or step (a tool call could be cut from its \
                 result); compact before a turn/start or step/start, or everything so far"
            )));
        }
        self.append(Event::ContextCompacted {
            before,
            summary: summary.to_owned(),
            by: by.to_owned(),
        })
    }
}
