//! What the model sees, derived from the session log alone: the messages (from `user/message`,
//! `assistant/message` and `tool/result` only) and the request header in force.

use crate::log::{Event, RequestHeader, Window};
use crate::model::Message;

/// The conversation a request carries, derived from `events` (in log order).
pub fn derive_messages<'a>(events: impl IntoIterator<Item = &'a Event>) -> Vec<Message> {
    events
        .into_iter()
        .filter_map(|event| match event {
            Event::UserMessage { text, .. } => Some(Message::User { text: text.clone() }),
            Event::AssistantMessage {
                text,
                tool_calls,
                reasoning,
                ..
            } => Some(Message::Assistant {
                text: text.clone(),
                tool_calls: tool_calls.clone(),
                reasoning: reasoning.clone(),
            }),
            Event::ToolResult {
                call_id, content, ..
            } => Some(Message::Tool {
                call_id: call_id.clone(),
                content: content.clone(),
            }),
            _ => None,
        })
        .collect()
}

/// The request header in force after `events`: the last one logged.
pub fn header_in_force<'a>(events: impl IntoIterator<Item = &'a Event>) -> Option<RequestHeader> {
    events.into_iter().fold(None, |current, event| match event {
        Event::RequestHeader(header) => Some(header.clone()),
        _ => current,
    })
}

/// How the summary of a compaction is put to the model: the first message of every request
/// made after it, in place of the events it replaced.
pub const COMPACTED_PREFIX: &str =
    "The conversation before this point was compacted. Its summary:\n\n";

/// The conversation a request carries: the latest compaction's summary (when there is one),
/// then what derives from the events after it. A tool result whose call was compacted away
/// (the loop compacts at turn and step starts, so only a log written otherwise has one) is
/// left out, so the model never sees an answer without its call.
pub fn derive_request_messages(window: Window<'_>) -> Vec<Message> {
    let mut messages = Vec::new();
    if let Some(summary) = window.summary {
        messages.push(Message::User {
            text: format!("{COMPACTED_PREFIX}{summary}"),
        });
    }
    let events = window.events.iter().map(|(_, e)| e);
    let mut kept = derive_messages(events);
    if window.summary.is_some() {
        let mut asked = std::collections::HashSet::new();
        kept.retain(|m| match m {
            Message::Assistant { tool_calls, .. } => {
                asked.extend(tool_calls.iter().map(|c| c.call_id.clone()));
                true
            }
            Message::Tool { call_id, .. } => asked.contains(call_id),
            Message::User { .. } => true,
        });
    }
    messages.extend(kept);
    messages
}
