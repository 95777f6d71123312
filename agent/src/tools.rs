//! The seam between the loop and the tools. The host runs one call through the tool pipeline
//! (argument validation, rules, approvals, guards, the sandbox, output caps) and tells the loop
//! each decision as it is taken, so the log shows what decided a call before the call runs.
//! [`bridle_exec::pipeline::Pipeline`] is the host of every real session; the trait stays so a
//! test can drive the loop with tools of its own.

use std::sync::{Arc, Mutex};

use bridle_exec::pipeline::Pipeline;
use bridle_exec::tool::Tool;

use crate::log::ToolCall;

/// What the pipeline tells the loop while it handles a call, in order (the pipeline's own
/// notes: no translation between the layers).
pub use bridle_exec::approvals::PipelineNote as ToolNote;

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

    /// Runs one call through the pipeline. `call.arguments` is the raw text the model sent,
    /// which may not be valid JSON; an invalid call is an error result the model can read.
    /// Every decision is reported through `note` before it takes effect; when `note` fails (the
    /// session log could not record it), the call must not run. A question asked during the
    /// call names `call.call_id`.
    fn call(&self, call: &ToolCall, note: &mut Notes<'_>) -> ToolOutcome;

    /// Adds a plugin's tool, owned by `owner`; hosts without a registry refuse.
    fn add_tool(&self, owner: &str, tool: Arc<dyn Tool>) -> Result<(), String> {
        let _ = (owner, tool);
        Err("this tool host takes no plugin tools".to_owned())
    }

    /// Adds a plugin's guard, owned by `owner`; hosts without a registry refuse.
    fn add_guard(
        &self,
        owner: &str,
        guard: Arc<dyn bridle_exec::pipeline::Guard>,
    ) -> Result<(), String> {
        let _ = (owner, guard);
        Err("this tool host takes no plugin guards".to_owned())
    }

    /// Takes the tool `name` away (a profile's preset or `tools.remove`); whether it was
    /// there.
    fn remove_tool(&self, name: &str) -> bool {
        let _ = name;
        false
    }

    /// Removes everything `owner` registered.
    fn unload(&self, owner: &str) {
        let _ = owner;
    }
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

impl ToolHost for Pipeline {
    fn schemas(&self) -> Vec<serde_json::Value> {
        Pipeline::schemas(self)
    }

    fn concurrency_safe(&self, name: &str, arguments: &str) -> bool {
        Pipeline::concurrency_safe(self, name, arguments)
    }

    fn call(&self, call: &ToolCall, note: &mut Notes<'_>) -> ToolOutcome {
        let note = Mutex::new(note);
        let observer = |n: ToolNote| -> Result<(), String> {
            let mut note = note.lock().map_err(|_| "the note lock was poisoned")?;
            (*note)(n)
        };
        let result = self.call_identified(
            Some(&call.call_id),
            &call.name,
            &call.arguments,
            Some(&observer),
        );
        let mut sandbox = serde_json::to_value(&result.sandbox).ok();
        // Who refused a call that never ran is part of what the log says about it.
        if let (Some(serde_json::Value::Object(facts)), Some(by)) = (&mut sandbox, result.denied_by)
            && let Ok(by) = serde_json::to_value(by)
        {
            facts.insert("denied_by".to_owned(), by);
        }
        ToolOutcome {
            ok: result.ok,
            content: result.content,
            sandbox,
        }
    }

    fn add_tool(&self, owner: &str, tool: Arc<dyn Tool>) -> Result<(), String> {
        self.registry()
            .add_tool(Some(owner), tool)
            .map_err(|e| e.to_string())
    }

    fn add_guard(
        &self,
        owner: &str,
        guard: Arc<dyn bridle_exec::pipeline::Guard>,
    ) -> Result<(), String> {
        self.registry().add_guard(Some(owner), guard);
        Ok(())
    }

    fn remove_tool(&self, name: &str) -> bool {
        self.registry().remove_tool(name)
    }

    fn unload(&self, owner: &str) {
        self.registry().unload(owner);
    }
}
