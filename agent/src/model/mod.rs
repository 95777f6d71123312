//! Model adapters: one trait that streams a request (system prompt, messages, tools) into
//! chunks. Adapters: [`openai`] (OpenAI-compatible chat completions, and DeepSeek) and
//! [`script`] (a scripted model for tests, demos and offline CI).

pub mod openai;
mod retry_after;
pub mod script;

use serde::{Deserialize, Serialize};

use crate::log::{PromptSection, ToolCall};

/// What a model is asked.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelRequest {
    /// System prompt sections, in render order.
    pub system: Vec<PromptSection>,
    /// The conversation, derived from the session log (shared with the loop, which extends
    /// it step by step: a request costs no copy of the conversation).
    #[serde(
        serialize_with = "shared::serialize",
        deserialize_with = "shared::deserialize"
    )]
    pub messages: std::sync::Arc<Vec<Message>>,
    /// Tool schemas (`{name, description, parameters}`).
    pub tools: Vec<serde_json::Value>,
}

/// Serde for a shared list, as the list itself.
mod shared {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<T: Serialize, S: Serializer>(
        value: &std::sync::Arc<T>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        T::serialize(value, serializer)
    }

    pub fn deserialize<'de, T: Deserialize<'de>, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<std::sync::Arc<T>, D::Error> {
        T::deserialize(deserializer).map(std::sync::Arc::new)
    }
}

/// One message of the conversation the model sees.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "lowercase")]
pub enum Message {
    User {
        text: String,
    },
    Assistant {
        text: String,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<ToolCall>,
        /// The reasoning that led to this answer (an adapter sends it back where the provider
        /// needs it).
        #[serde(default, skip_serializing_if = "String::is_empty")]
        reasoning: String,
    },
    Tool {
        call_id: String,
        content: String,
    },
}

/// A piece of a streamed answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Chunk {
    /// Answer text.
    Text(String),
    /// Reasoning text (not part of the answer).
    Reasoning(String),
    /// Part of a tool call: the call at `index` gets `id` and `name` (once) and `arguments`
    /// appended.
    ToolCallDelta {
        index: usize,
        id: Option<String>,
        name: Option<String>,
        arguments: String,
    },
    /// Token counts.
    Usage { input: u64, output: u64 },
    /// The model id the provider says is answering.
    Model(String),
    /// Why the answer ended.
    Finish(FinishReason),
}

/// Why a model stopped answering.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FinishReason {
    /// A complete answer.
    Stop,
    /// It wants tool calls made.
    ToolCalls,
    /// The output token limit cut it short.
    Length,
    /// Anything else the provider said.
    Other(String),
}

impl FinishReason {
    /// The reason as chat-completions providers spell it (`stop`, `tool_calls`, `length`).
    pub fn as_str(&self) -> &str {
        match self {
            Self::Stop => "stop",
            Self::ToolCalls => "tool_calls",
            Self::Length => "length",
            Self::Other(other) => other,
        }
    }
}

/// Why a model request failed, classified so the loop can tell retrying from giving up.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ModelError {
    #[error("model {route}: authentication failed: {detail}")]
    Auth { route: String, detail: String },
    #[error("model {route}: rate limited: {detail}")]
    RateLimit { route: String, detail: String },
    #[error("model {route}: server error: {detail}")]
    Server { route: String, detail: String },
    #[error("model {route}: timed out: {detail}")]
    Timeout { route: String, detail: String },
    #[error("model {route}: the request does not fit the context window: {detail}")]
    ContextWindow { route: String, detail: String },
    #[error("model {route}: {detail}")]
    Protocol { route: String, detail: String },
}

/// A model the loop can ask.
pub trait Model: Send {
    /// The route this model is reached by (`script:FILE`, `openai:MODEL`, ...), as logged.
    fn route(&self) -> String;

    /// Streams the answer to `request`, chunk by chunk, into `on_chunk`.
    fn stream(
        &mut self,
        request: &ModelRequest,
        on_chunk: &mut dyn FnMut(Chunk),
    ) -> Result<(), ModelError>;
}
