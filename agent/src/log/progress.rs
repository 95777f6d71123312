//! Where a session stands in the turn/step lifecycle, read off its events: which turn is open,
//! which step, which tool calls have no result yet. Crash repair closes what is open; fork
//! refuses a point inside a turn; resume continues the turn numbers.

use bridle_policy::Decision;

use super::event::{Event, TurnEndReason};

/// Result text of a call the log shows was never dispatched.
pub const NOT_STARTED: &str = "tool not started: the session was interrupted before this call ran";
/// Result text of a call the log shows may have run.
pub const OUTCOME_UNKNOWN: &str = "outcome unknown: the session was interrupted while this call \
     may have been running; whatever it did is not recorded";

/// Why a turn crash repair closed ended.
pub const INTERRUPTED: &str = "the session was interrupted (bridle stopped without ending the \
     turn); closed when the log was next opened";

/// The lifecycle state after some prefix of a session's events.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Progress {
    /// The highest turn number seen.
    pub last_turn: Option<u64>,
    /// The turn that started and has not ended.
    pub open_turn: Option<u64>,
    /// The step (turn, step) that started and has not ended.
    pub open_step: Option<(u64, u64)>,
    /// Tool calls without a result, in the order they were made.
    pub open_calls: Vec<OpenCall>,
    /// The reason the last ended turn ended.
    pub last_end: Option<TurnEndReason>,
}

/// A tool call without a result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenCall {
    pub call_id: String,
    /// Whether the log shows it was allowed to run (so it may have had effects).
    pub dispatched: bool,
    /// Whether it was recorded as `tool/call` (not only listed in the model's answer).
    pub recorded: bool,
}

impl Progress {
    /// Takes one more event into account.
    pub fn observe(&mut self, event: &Event) {
        match event {
            Event::TurnStart { turn } => {
                self.open_turn = Some(*turn);
                self.last_turn = Some(self.last_turn.map_or(*turn, |t| t.max(*turn)));
            }
            Event::TurnEnd { reason, .. } => {
                self.open_turn = None;
                self.open_step = None;
                self.open_calls.clear();
                self.last_end = Some(*reason);
            }
            Event::StepStart { turn, step } => self.open_step = Some((*turn, *step)),
            Event::StepEnd { .. } => self.open_step = None,
            // The model's answer lists its calls first; each is then recorded as `tool/call`.
            // A call the answer lists but the log never recorded still needs a result, or the
            // model's messages would show a call without an answer.
            Event::AssistantMessage { tool_calls, .. } => {
                for call in tool_calls {
                    self.open_calls.push(OpenCall {
                        call_id: call.call_id.clone(),
                        dispatched: false,
                        recorded: false,
                    });
                }
            }
            Event::ToolCall(call) => {
                match self
                    .open_calls
                    .iter_mut()
                    .find(|c| c.call_id == call.call_id && !c.recorded)
                {
                    Some(listed) => listed.recorded = true,
                    None => self.open_calls.push(OpenCall {
                        call_id: call.call_id.clone(),
                        dispatched: false,
                        recorded: true,
                    }),
                }
            }
            // The last decision counts: a guard's deny after a rule's allow means it never ran.
            Event::ToolDecision {
                call_id, decision, ..
            } => self.set_dispatched(call_id, *decision == Decision::Allow),
            Event::ApprovalDecided {
                call_id, answer, ..
            } if answer == "approved" => self.set_dispatched(call_id, true),
            Event::ToolResult { call_id, .. } => {
                // One result answers one call, the first still open with that id.
                if let Some(i) = self.open_calls.iter().position(|c| &c.call_id == call_id) {
                    self.open_calls.remove(i);
                }
            }
            _ => {}
        }
    }

    fn set_dispatched(&mut self, call_id: &str, dispatched: bool) {
        if let Some(call) = self.open_calls.iter_mut().find(|c| c.call_id == call_id) {
            call.dispatched = dispatched;
        }
    }

    /// The turn number the next user input opens.
    pub fn next_turn(&self) -> u64 {
        self.last_turn.map_or(0, |t| t + 1)
    }

    /// Whether a turn is open.
    pub fn in_turn(&self) -> bool {
        self.open_turn.is_some()
    }

    /// The events that close what is open after a crash: a synthetic result for every call
    /// without one, the open step's end, and `turn/end {interrupted}`.
    pub fn closing_events(&self) -> Vec<Event> {
        let Some(turn) = self.open_turn else {
            return Vec::new();
        };
        let mut events: Vec<Event> = self
            .open_calls
            .iter()
            .map(|call| Event::ToolResult {
                call_id: call.call_id.clone(),
                ok: false,
                content: if call.dispatched {
                    OUTCOME_UNKNOWN
                } else {
                    NOT_STARTED
                }
                .to_owned(),
                sandbox: None,
            })
            .collect();
        if let Some((turn, step)) = self.open_step {
            events.push(Event::StepEnd { turn, step });
        }
        events.push(Event::TurnEnd {
            turn,
            reason: TurnEndReason::Interrupted,
            detail: Some(INTERRUPTED.to_owned()),
            cancelled_by: None,
        });
        events
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::event::ToolCall;

    fn call(id: &str) -> Event {
        Event::ToolCall(ToolCall {
            call_id: id.into(),
            name: "bash".into(),
            arguments: "{}".into(),
        })
    }

    fn decide(id: &str, decision: Decision) -> Event {
        Event::ToolDecision {
            call_id: id.into(),
            decision,
            by: "test".into(),
        }
    }

    fn result(id: &str) -> Event {
        Event::ToolResult {
            call_id: id.into(),
            ok: true,
            content: String::new(),
            sandbox: None,
        }
    }

    fn progress(events: &[Event]) -> Progress {
        let mut p = Progress::default();
        for e in std::iter::once(&Event::TurnStart { turn: 4 }).chain(events) {
            p.observe(e);
        }
        p
    }

    #[test]
    fn a_repeated_call_id_still_gets_its_own_synthetic_result() {
        let p = progress(&[call("c"), call("c"), result("c")]);
        assert_eq!(p.open_calls.len(), 1);
        assert_eq!(p.closing_events().len(), 2, "one result, then turn/end");
    }

    #[test]
    fn a_guard_deny_after_an_allow_means_the_call_never_ran() {
        let p = progress(&[
            call("c"),
            decide("c", Decision::Allow),
            decide("c", Decision::Deny),
        ]);
        let Event::ToolResult { content, .. } = &p.closing_events()[0] else {
            panic!("{:?}", p.closing_events());
        };
        assert_eq!(content, NOT_STARTED);
    }

    #[test]
    fn turn_numbers_continue_after_the_highest_seen() {
        let mut p = progress(&[Event::TurnEnd {
            turn: 4,
            reason: TurnEndReason::Completed,
            detail: None,
            cancelled_by: None,
        }]);
        assert_eq!(p.next_turn(), 5);
        assert!(!p.in_turn());
        p.observe(&Event::TurnStart { turn: 2 });
        assert_eq!(p.next_turn(), 5);
    }
}
