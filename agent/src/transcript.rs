//! What the model sees, derived from the session log alone: the messages (from `user/message`,
//! `assistant/message` and `tool/result` only) and the request header in force.

use crate::log::{Event, RequestHeader};
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
