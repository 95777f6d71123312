//! The events of a session log (`shared/spec/agent.md`). Each serialises as its `type` and
//! `data`, the two event-specific fields of a [`Record`](super::Record).

use bridle_policy::{ApprovalPolicy, Decision, Network, SandboxMode};
use serde::{Deserialize, Serialize};

pub use super::kinds::{EventKinds, PluginEvent};

/// One event of a session, as the loop records it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", content = "data")]
pub enum Event {
    /// Always event 0: what the session is.
    #[serde(rename = "session/header")]
    SessionHeader(SessionHeader),
    /// Right after the copied prefix of a forked session: where it came from.
    #[serde(rename = "session/forked")]
    SessionForked {
        /// The session the prefix was copied from.
        from: String,
        /// The last event of `from` that was copied.
        seq: u64,
    },
    /// User input opened a turn.
    #[serde(rename = "turn/start")]
    TurnStart { turn: u64 },
    /// The turn ended, and why.
    #[serde(rename = "turn/end")]
    TurnEnd {
        turn: u64,
        reason: TurnEndReason,
        /// Why the turn did not complete, in full: the model's error, the cut at the token
        /// limit, the step limit, the cancel. Absent when it completed (and in older logs).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        detail: Option<String>,
        /// Who or what cancelled the turn (`SIGINT`, say), when it was cancelled.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cancelled_by: Option<String>,
    },
    /// A step (one model request, its retries and its tool calls) began.
    #[serde(rename = "step/start")]
    StepStart { turn: u64, step: u64 },
    /// The step ended.
    #[serde(rename = "step/end")]
    StepEnd { turn: u64, step: u64 },
    /// What the user said.
    #[serde(rename = "user/message")]
    UserMessage {
        /// The id of a queued or steering message (its receipt is the request that carried it).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        id: Option<String>,
        text: String,
    },
    /// A piece of the model's streamed answer.
    #[serde(rename = "assistant/chunk")]
    AssistantChunk {
        text: String,
        /// Reasoning rather than answer text.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        reasoning: bool,
    },
    /// The model's whole answer for a step. `text`, `tool_calls` and `reasoning` derive into
    /// the model's messages; the rest is what the model reported about its answer.
    #[serde(rename = "assistant/message")]
    AssistantMessage {
        text: String,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<ToolCall>,
        /// The model's reasoning for this answer (some providers need it sent back with the
        /// calls it led to).
        #[serde(default, skip_serializing_if = "String::is_empty")]
        reasoning: String,
        /// What the model reported about the answer (model id, finish reason, usage).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reply: Option<Reply>,
    },
    /// What the next model request is made of, written when it changes.
    #[serde(rename = "request/header")]
    RequestHeader(RequestHeader),
    /// The model asked for a tool call.
    #[serde(rename = "tool/call")]
    ToolCall(ToolCall),
    /// What decided a tool call, and how.
    #[serde(rename = "tool/decision")]
    ToolDecision {
        call_id: String,
        decision: Decision,
        /// The rule, approval or guard that decided.
        by: String,
    },
    /// What the model sees of a tool call's outcome.
    #[serde(rename = "tool/result")]
    ToolResult {
        call_id: String,
        ok: bool,
        content: String,
        /// What the sandbox enforced for this call (mode, network, denials).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        sandbox: Option<serde_json::Value>,
    },
    /// When a tool call's command ended, bridle moved aside something it left that git on the
    /// host would run or load (a hook, a config naming a command).
    #[serde(rename = "sandbox/quarantine")]
    SandboxQuarantine {
        call_id: String,
        /// Where it was.
        path: String,
        /// Why git on the host would run something because of it.
        reason: String,
        /// Where it is now; `None` when it could not be moved.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        moved_to: Option<String>,
    },
    /// While a tool call's command ran, the exec supervisor denied an exec of one of its
    /// processes (or asked about one and had its answer).
    #[serde(rename = "exec/decision")]
    ExecDecision { call_id: String, exec: ExecDecision },
    /// The network proxy decided connections a call's command made (network `allow-list`):
    /// one event per host, port and decision, with the bytes moved, before the call's result.
    #[serde(rename = "net/decision")]
    NetDecision(NetDecision),
    /// An approval question went to the approval seam.
    #[serde(rename = "approval/asked")]
    ApprovalAsked { call_id: String, question: String },
    /// The approval seam answered.
    #[serde(rename = "approval/decided")]
    ApprovalDecided {
        call_id: String,
        /// `approved`, `rejected` or `unavailable`.
        answer: String,
        /// Who answered (a person at a terminal, a configured answerer, the policy).
        by: String,
    },
    /// The sandbox mode changed.
    #[serde(rename = "sandbox/mode")]
    SandboxMode { mode: SandboxMode },
    /// The approval policy changed.
    #[serde(rename = "approval/policy")]
    ApprovalPolicy { policy: ApprovalPolicy },
    /// Plan mode was switched on or off.
    #[serde(rename = "plan/mode")]
    PlanMode { active: bool },
    /// The policy in force from here on (logged when the session starts and whenever it
    /// changes), so a reviewer can see what confined the agent.
    #[serde(rename = "policy/effective")]
    PolicyEffective(PolicySummary),
    /// The model's context was compacted: from here on, requests carry `summary` in place of
    /// every event before `before`, then the events from `before` on (this one excepted).
    /// Only the latest compaction counts; it covers the ones before it. Everything else that
    /// derives from the log (plan mode, the request header, turn numbers) still folds over the
    /// whole log, so a compaction changes what the model is sent and nothing else.
    #[serde(rename = "context/compacted")]
    ContextCompacted {
        /// The first event requests still derive from (a `turn/start`, a `step/start`, or
        /// this event itself, so no tool call is cut from its result).
        before: u64,
        /// What replaces the events before `before` in the model's messages.
        summary: String,
        /// Who or what asked for it (a threshold of the loop, a command).
        by: String,
    },
    /// A live session received an input (a prompt, steering, a queued or injected message).
    #[serde(rename = "input/received")]
    InputReceived {
        input_id: String,
        /// `prompt`, `steer`, `queue` or `inject`.
        kind: String,
    },
    /// The receipt: the request of this step included the input (as a `user/message` with
    /// its id). `carried`: it arrived after the last step of an earlier turn.
    #[serde(rename = "input/included")]
    InputIncluded {
        input_id: String,
        turn: u64,
        step: u64,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        carried: bool,
    },
    /// An input the session accepted (its `input/received` comes first) that no step's
    /// request will include: a reviewer sees why it never reached the model.
    #[serde(rename = "input/dropped")]
    InputDropped {
        input_id: String,
        /// `prompt`, `steer`, `queue` or `inject`.
        kind: String,
        /// The turn that was running when it was dropped (absent: none was).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        turn: Option<u64>,
        reason: DropReason,
    },
    /// An event of a type a loaded plugin declares (never one of the types above), checked
    /// by that plugin's validator when it is appended and whenever the log is read. Stored as
    /// its own `type` and `data` like every other event; serde never reads or writes this
    /// variant (the log does: see `record.rs`).
    #[serde(skip)]
    Plugin(PluginEvent),
}

impl Event {
    /// The event's `type`, as written in the log.
    pub fn kind(&self) -> &str {
        match self {
            Self::Plugin(plugin) => &plugin.kind,
            other => other.builtin_kind(),
        }
    }

    /// The `type` of a built-in event; `plugin` for a plugin's.
    pub(crate) fn builtin_kind(&self) -> &'static str {
        match self {
            Self::Plugin(_) => "plugin",
            Self::SessionHeader(_) => "session/header",
            Self::SessionForked { .. } => "session/forked",
            Self::TurnStart { .. } => "turn/start",
            Self::TurnEnd { .. } => "turn/end",
            Self::StepStart { .. } => "step/start",
            Self::StepEnd { .. } => "step/end",
            Self::UserMessage { .. } => "user/message",
            Self::AssistantChunk { .. } => "assistant/chunk",
            Self::AssistantMessage { .. } => "assistant/message",
            Self::RequestHeader(_) => "request/header",
            Self::ToolCall(_) => "tool/call",
            Self::ToolDecision { .. } => "tool/decision",
            Self::ToolResult { .. } => "tool/result",
            Self::SandboxQuarantine { .. } => "sandbox/quarantine",
            Self::ExecDecision { .. } => "exec/decision",
            Self::NetDecision(_) => "net/decision",
            Self::ApprovalAsked { .. } => "approval/asked",
            Self::ApprovalDecided { .. } => "approval/decided",
            Self::SandboxMode { .. } => "sandbox/mode",
            Self::ApprovalPolicy { .. } => "approval/policy",
            Self::PlanMode { .. } => "plan/mode",
            Self::PolicyEffective(_) => "policy/effective",
            Self::ContextCompacted { .. } => "context/compacted",
            Self::InputReceived { .. } => "input/received",
            Self::InputIncluded { .. } => "input/included",
            Self::InputDropped { .. } => "input/dropped",
        }
    }

    /// Whether `kind` is a type this version knows.
    pub fn is_known_kind(kind: &str) -> bool {
        KNOWN_KINDS.contains(&kind)
    }

    /// The event's `data`, as stored (its keys sorted).
    pub fn data(&self) -> serde_json::Value {
        let mut data = match self {
            Self::Plugin(plugin) => plugin.data.clone(),
            // Serialising an `Event` cannot fail: every field is plain data with string keys.
            other => serde_json::to_value(other)
                .ok()
                .and_then(|mut v| v.get_mut("data").map(serde_json::Value::take))
                .unwrap_or(serde_json::Value::Null),
        };
        data.sort_all_objects();
        data
    }
}

/// Every `type` this version writes and reads.
pub const KNOWN_KINDS: &[&str] = &[
    "session/header",
    "session/forked",
    "turn/start",
    "turn/end",
    "step/start",
    "step/end",
    "user/message",
    "assistant/chunk",
    "assistant/message",
    "request/header",
    "tool/call",
    "tool/decision",
    "tool/result",
    "sandbox/quarantine",
    "exec/decision",
    "net/decision",
    "approval/asked",
    "approval/decided",
    "sandbox/mode",
    "approval/policy",
    "plan/mode",
    "policy/effective",
    "context/compacted",
    "input/received",
    "input/included",
    "input/dropped",
];

/// What the exec supervisor decided about one exec (`exec/decision`): the tools' own note
/// of it, kept as it is (agent knows the supervisor only through the tools).
pub use bridle_exec::supervised::ExecDecision;

/// A `net/decision` event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NetDecision {
    pub call_id: String,
    pub host: String,
    pub port: u16,
    /// `allow` or `deny`.
    pub decision: Decision,
    /// The `network.allow`/`network.deny` entry, the missing entry, the approval or the
    /// address check that decided.
    pub by: String,
    /// An allowed connection that could not be made: why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// How many connections the decision covers.
    pub connections: u64,
    /// Bytes from the sandbox to the host.
    pub sent: u64,
    /// Bytes from the host to the sandbox.
    pub received: u64,
    /// Decided, or ended, while no call read the persistent terminal: the call it is recorded
    /// with did not make it; with no call, the session had ended.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub between_calls: bool,
}

impl NetDecision {
    /// The proxy's decision `d`, recorded with the call `call_id` (empty: no call).
    pub fn of(call_id: String, d: bridle_exec::net::NetDecision) -> NetDecision {
        NetDecision {
            call_id,
            host: d.host,
            port: d.port,
            decision: d.decision,
            by: d.by,
            error: d.error,
            connections: d.connections,
            sent: d.sent,
            received: d.received,
            between_calls: d.between_calls,
        }
    }
}

/// Event 0 of every session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionHeader {
    pub id: String,
    /// RFC 3339, UTC.
    pub created: String,
    /// The canonical workspace root.
    pub workspace: String,
    /// The profile the session runs under (name or path).
    pub profile: String,
    /// SHA-256 of the effective policy, so a reader can tell which policy governed the session.
    pub policy_digest: String,
}

/// Why a turn ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TurnEndReason {
    Completed,
    Aborted,
    Blocked,
    Error,
    MaxTokens,
    /// Closed by crash repair when the log was next opened.
    Interrupted,
}

/// Why an accepted input was never delivered (`input/dropped`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DropReason {
    /// The turn it was meant for was cancelled before a step took it.
    Cancelled,
    /// The session closed (the front end left) before a step took it.
    SessionClosed,
}

impl DropReason {
    /// As logged.
    pub fn name(self) -> &'static str {
        match self {
            DropReason::Cancelled => "cancelled",
            DropReason::SessionClosed => "session-closed",
        }
    }
}

/// A tool call as the model asked for it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    pub call_id: String,
    pub name: String,
    /// The arguments exactly as the model sent them (possibly not valid JSON).
    pub arguments: String,
}

/// What a model reported about one answer.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reply {
    /// The model id the provider says answered (it may differ from the one asked for).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Why the answer ended, as the provider said it (`stop`, `tool_calls`, `length`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finish: Option<String>,
    /// Tokens the request and the answer took, as the provider counted them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
}

/// Token counts of one model request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
}

/// The effective policy of a session, as a reviewer reads it, with the digest that identifies
/// it (the header's `policy_digest` names the policy the session began with).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PolicySummary {
    /// SHA-256 of the effective policy (stable across runs of the same policy).
    pub digest: String,
    /// The profile (name or path).
    pub profile: String,
    pub mode: SandboxMode,
    pub approval: ApprovalPolicy,
    pub network: Network,
    /// Writable roots; the session's private temp directory is written `<session temp dir>`.
    #[serde(default)]
    pub writable_roots: Vec<String>,
    /// Paths inside writable roots that stay read-only.
    #[serde(default)]
    pub protected_paths: Vec<String>,
    /// Paths that cannot be read.
    #[serde(default)]
    pub masked_paths: Vec<String>,
    /// The profile's rules, in the order they are checked.
    #[serde(default)]
    pub rules: Vec<PolicyRule>,
}

/// One rule of the effective policy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PolicyRule {
    pub id: String,
    /// `command` (a command-prefix rule) or `path` (a path rule for writes).
    pub applies_to: String,
    pub decision: Decision,
}

/// The parts of a model request that do not come from messages.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RequestHeader {
    /// System prompt sections, in order.
    pub sections: Vec<PromptSection>,
    /// Tool schemas as sent to the model.
    pub tools: Vec<serde_json::Value>,
    /// The model route (`openai:MODEL`, `script:FILE`, ...).
    pub model: String,
}

/// One ordered section of the system prompt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PromptSection {
    pub name: String,
    pub order: u32,
    pub text: String,
}

#[cfg(test)]
mod tests;
