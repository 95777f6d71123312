//! What the loop derived from the log, kept per session and extended by the events appended
//! since the last step, never re-derived from the start: so a step's cost does not grow with
//! the session's length. This is also the one place a later event that replaces what came
//! before (a compaction) takes effect: [`Derived::update`] is the interface for it.

use std::collections::HashSet;

use crate::log::{Event, RequestHeader, SessionLog, Window};
use crate::model::Message;
use crate::transcript::{derive_messages, derive_request_messages};

/// The derived state of a session, as of event index `upto`.
#[derive(Debug, Default)]
pub(crate) struct Derived {
    upto: usize,
    /// The latest compaction the messages start from (its sequence number).
    compaction: Option<u64>,
    /// Under a compaction: the calls asked in its window, so a result whose call was
    /// compacted away stays out, as [`derive_request_messages`] leaves it out.
    asked: Option<HashSet<String>>,
    /// The model's messages: the request window's (the latest compaction's summary, then
    /// what follows it). Shared with the request being answered, and extended in place once
    /// the model dropped it (copied only if it did not).
    pub messages: std::sync::Arc<Vec<Message>>,
    /// The request header in force (over the whole log: a compaction changes only the
    /// messages).
    pub header: Option<RequestHeader>,
    /// Every call id the session used.
    pub call_ids: HashSet<String>,
}

impl Derived {
    /// Extends the derived state by the events of `log` not yet seen; when its latest
    /// compaction changed, the messages restart from that compaction's window.
    pub fn update(&mut self, log: &SessionLog) {
        self.extend(log.events(), log.latest_compaction(), || {
            log.request_window()
        });
    }

    /// Extends by the events of `events` (the whole log) not yet seen, under the latest
    /// compaction `latest` whose window `window` gives.
    fn extend<'a>(
        &mut self,
        events: &'a [(u64, Event)],
        latest: Option<u64>,
        window: impl FnOnce() -> Window<'a>,
    ) {
        let restart = latest != self.compaction;
        for (_, event) in events.get(self.upto..).unwrap_or(&[]) {
            match event {
                Event::RequestHeader(h) => self.header = Some(h.clone()),
                Event::ToolCall(call) => {
                    self.call_ids.insert(call.call_id.clone());
                }
                _ => {}
            }
            if !restart {
                self.extend_messages(event);
            }
        }
        self.upto = events.len();
        if restart {
            let window = window();
            self.messages = std::sync::Arc::new(derive_request_messages(window));
            self.asked = window.summary.map(|_| {
                window
                    .events
                    .iter()
                    .filter_map(|(_, e)| match e {
                        Event::AssistantMessage { tool_calls, .. } => Some(tool_calls),
                        _ => None,
                    })
                    .flatten()
                    .map(|c| c.call_id.clone())
                    .collect()
            });
            self.compaction = latest;
        }
    }

    fn extend_messages(&mut self, event: &Event) {
        for message in derive_messages(std::iter::once(event)) {
            if let Some(asked) = &mut self.asked {
                match &message {
                    Message::Assistant { tool_calls, .. } => {
                        asked.extend(tool_calls.iter().map(|c| c.call_id.clone()));
                    }
                    Message::Tool { call_id, .. } if !asked.contains(call_id) => continue,
                    _ => {}
                }
            }
            std::sync::Arc::make_mut(&mut self.messages).push(message);
        }
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
            stepwise.extend(&all[..end], None, || Window {
                summary: None,
                events: &all[..end],
            });
        }
        let events: Vec<&Event> = all.iter().map(|(_, e)| e).collect();
        assert_eq!(*stepwise.messages, derive_messages(events.iter().copied()));
    }

    fn call(id: &str) -> ToolCall {
        ToolCall {
            call_id: id.into(),
            name: "bash".into(),
            arguments: "{}".into(),
        }
    }

    fn assistant(text: &str, calls: &[&str]) -> Event {
        Event::AssistantMessage {
            text: text.into(),
            tool_calls: calls.iter().map(|c| call(c)).collect(),
            reasoning: String::new(),
            reply: None,
        }
    }

    fn result(id: &str) -> Event {
        Event::ToolResult {
            call_id: id.into(),
            ok: true,
            content: format!("out of {id}"),
            sandbox: None,
        }
    }

    /// A compaction appended between steps restarts the messages from its summary; what
    /// follows extends them as deriving the window at once would (a result whose call was
    /// compacted away left out) (what folds over the whole log, plan mode say, is the plugins' own).
    #[test]
    fn a_compaction_restarts_the_messages_from_its_window() {
        let all = [
            (
                0,
                Event::UserMessage {
                    id: None,
                    text: "a".into(),
                },
            ),
            (1, assistant("b", &["c1"])),
            (2, Event::PlanMode { active: true }),
            (3, result("c1")),
            (
                4,
                Event::UserMessage {
                    id: None,
                    text: "d".into(),
                },
            ),
            (
                5,
                Event::ContextCompacted {
                    before: 4,
                    summary: "s".into(),
                    by: "test".into(),
                },
            ),
            (6, result("c1")),
            (7, assistant("e", &["c2"])),
            (8, result("c2")),
        ];
        let window = |end: usize| Window {
            summary: (end > 5).then_some("s"),
            events: if end > 5 { &all[4..end] } else { &all[..end] },
        };
        let mut stepwise = Derived::default();
        for end in 0..=all.len() {
            stepwise.extend(&all[..end], (end > 5).then_some(5), || window(end));
            assert_eq!(
                *stepwise.messages,
                derive_request_messages(window(end)),
                "after {end} events"
            );
        }
        assert!(matches!(
            stepwise.messages.first(),
            Some(Message::User { text }) if text.ends_with("s")
        ));
        assert_eq!(
            stepwise
                .messages
                .iter()
                .filter(|m| matches!(m, Message::Tool { .. }))
                .count(),
            1,
            "only c2's result: c1 was compacted away"
        );
    }
}
