//! The seam between the loop and the tools. The host runs one call through the tool pipeline
//! (argument validation, rules, approvals, guards, the sandbox, output caps) and tells the loop
//! each decision as it is taken, so the log shows what decided a call before the call runs.

use bridle_policy::Decision;

/// What the pipeline tells the loop while it handles a call, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolNote {
    /// A question went to the approval seam.
    ApprovalAsked { question: String },
    /// The approval seam answered (`approved`, `rejected`, `unavailable`) and who answered.
    ApprovalDecided { answer: String, by: String },
    /// The call was decided; with `Allow` it runs right after the loop returns from the note
    /// (the loop makes the log durable first).
    Decided { decision: Decision, by: String },
    /// While the call's command ran, the exec supervisor denied an exec (or asked about one).
    ExecDecided(crate::log::ExecDecision),
    /// The network proxy decided connections of the call's command (after it ran).
    NetDecision {
        host: String,
        port: u16,
        decision: Decision,
        by: String,
        error: Option<String>,
        connections: u64,
        sent: u64,
        received: u64,
    },
}

/// What the model sees of a call, and what the sandbox enforced for it.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutcome {
    pub ok: bool,
    pub content: String,
    pub sandbox: Option<serde_json::Value>,
}

/// The tools a session offers.
pub trait ToolHost: Sync {
    /// The schemas the model is shown (`{name, description, parameters}`), in a fixed order.
    fn schemas(&self) -> Vec<serde_json::Value>;

    /// Whether a call may run alongside other such calls (reads and searches); any other call
    /// waits for earlier calls and runs alone.
    fn concurrency_safe(&self, name: &str, arguments: &str) -> bool;

    /// Runs one call through the pipeline. `arguments` is the raw text the model sent, which
    /// may not be valid JSON; an invalid call is an error result the model can read. Every
    /// decision is reported through `note` before it takes effect; when `note` fails (the
    /// session log could not record it), the call must not run.
    fn call(&self, name: &str, arguments: &str, note: &mut Notes<'_>) -> ToolOutcome;
}

/// Where a host reports a call's decisions: the loop records each in the session log.
pub type Notes<'a> = dyn FnMut(ToolNote) -> Result<(), String> + Send + 'a;

/// The outcome of a call that did not run because its decision could not be recorded.
pub fn not_recorded(reason: &str) -> ToolOutcome {
    ToolOutcome {
        ok: false,
        content: format!("not run: the session log could not record the decision ({reason})"),
        sandbox: None,
    }
}
