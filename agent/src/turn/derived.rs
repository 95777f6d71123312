//! What the loop derived from the log, kept per session and extended by the events appended
//! since the last step, never re-derived from the start: so a step's cost does not grow with
//! the session's length. This is also the one place a later event that replaces what came
//! before (a compaction) takes effect: [`Derived::update`] is the interface for it.

use std::collections::HashSet;

use crate::log::{Event, RequestHeader};
use crate::model::Message;
use crate::transcript::derive_messages;

/// The derived state of a session, as of event index `upto`.
#[derive(Debug, Default)]
pub(crate) struct Derived {
    upto: usize,
    /// The model's messages.
    pub messages: Vec<Message>,
    /// The request header in force.
    pub header: Option<RequestHeader>,
    /// Plan mode's folded state (PM2), as of the same prefix.
    pub plan_active: bool,
    /// Every call id the session used.
    pub call_ids: HashSet<String>,
}

impl Derived {
    /// Extends the derived state by the events of `events` (the whole log) not yet seen.
    pub fn update(&mut self, events: &[(u64, Event)]) {
        for (_, event) in events.get(self.upto..).unwrap_or(&[]) {
            match event {
                Event::RequestHeader(h) => self.header = Some(h.clone()),
                Event::PlanMode { active } => self.plan_active = *active,
                Event::ToolCall(call) => {
                    self.call_ids.insert(call.call_id.clone());
                }
                _ => {}
            }
            self.messages
                .extend(derive_messages(std::iter::once(event)));
        }
        self.upto = events.len();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::ToolCall;

    /// Deriving step by step gives what deriving the whole log at once gives.
    #[test]
    fn incremental_derivation_equals_deriving_everything() {
        let all = [
            (
                0,
                Event::UserMessage {
                    id: None,
                    text: "a".into(),
                },
            ),
            (1, Event::PlanMode { active: true }),
            (
                2,
                Event::AssistantMessage {
                    text: "b".into(),
                    tool_calls: vec![ToolCall {
                        call_id: "c1".into(),
                        name: "bash".into(),
                        arguments: "{}".into(),
                    }],
                    reasoning: String::new(),
                    reply: None,
                },
            ),
            (
                3,
                Event::ToolResult {
                    call_id: "c1".into(),
                    ok: true,
                    content: "x".into(),
                    sandbox: None,
                },
            ),
            (4, Event::PlanMode { active: false }),
        ];
        let mut stepwise = Derived::default();
        for end in 0..=all.len() {
            stepwise.update(&all[..end]);
        }
        let events: Vec<&Event> = all.iter().map(|(_, e)| e).collect();
        assert_eq!(stepwise.messages, derive_messages(events.iter().copied()));
        assert_eq!(
            stepwise.plan_active,
            crate::plan_mode::fold_plan_mode(events.iter().copied())
        );
    }
}
