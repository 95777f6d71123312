//! The `Tool` trait: a tool is a value that parses its typed arguments, declares what a call
//! will do, and executes with what the pipeline hands it. It never asks for approval, never
//! records a decision and never picks its own sandbox: [`crate::pipeline::Pipeline`] does,
//! once, for every tool.
//!
//! Most tools implement [`TypedTool`] (arguments as a serde type with
//! `deny_unknown_fields` and a `schemars` schema, so the schema the model sees and the parser
//! cannot drift); the blanket implementation turns it into a [`Tool`].

use std::path::PathBuf;

use bridle_policy::{Guarantee, Network, Plan, SandboxMode, SandboxSpec};
use bridle_sandbox::confined_fs::HardLinks;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::approvals::{Answerer, Approvals};
use crate::backend::{FileSystem, Spawner};

/// What one call will do, as its tool declares it; the pipeline decides on this alone.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Declaration {
    /// The effects, each decided by the rules.
    pub effects: Vec<Effect>,
    /// A wider sandbox mode the call asks for, with the model's justification.
    pub escalation: Option<Escalation>,
    /// The call needs the file tools' confined worker.
    pub uses_files: bool,
}

/// One effect of a call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    /// Runs this shell text (decided by the command rules like a `bash` command line).
    Shell(String),
    /// Runs this argv without a shell.
    Exec(Vec<String>),
    /// Writes this (absolute, resolved) path.
    Write(PathBuf),
    /// Nothing beyond what the sandbox confines anyway (reads, searches); the text says why it
    /// needs no rule.
    Confined(String),
    /// Needs a person's approval, for the reason given (input the rules cannot see through).
    Ask(String),
    /// No effect outside the session itself (a plugin's own tool).
    Session(String),
}

/// A wider mode asked for one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Escalation {
    /// The mode asked for.
    pub mode: SandboxMode,
    /// Why (required, non-blank).
    pub justification: Option<String>,
}

/// Who denied a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum DeniedBy {
    /// A profile rule.
    Rule,
    /// The policy itself: outside the writable roots, a protected or a masked path.
    Policy,
    /// The approvals seam (rejected, cancelled or unavailable).
    Approval,
    /// A guard (final, whatever was approved).
    Guard,
    /// The sandbox could not be established.
    Sandbox,
}

/// Facts about the sandbox a call ran (or would have run) under.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SandboxFacts {
    /// The mode.
    pub mode: SandboxMode,
    /// The network setting.
    pub network: Network,
    /// Guarantees in force.
    pub guarantees: Vec<Guarantee>,
    /// Whether an approved escalation widened this call.
    pub escalated: bool,
    /// When the command's failure looks caused by the sandbox: what was blocked.
    pub denied_by_sandbox: Option<String>,
    /// What the command left in repositories that git on the host would run, which bridle
    /// moved aside when the run ended.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub quarantined: Vec<QuarantineNote>,
    /// What the exec supervisor denied (or asked about) while the command ran.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub exec_decisions: Vec<bridle_sandbox::ExecRecord>,
    /// What the network proxy decided for the call's connections (network `allow-list`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub network_decisions: Vec<crate::net::NetDecision>,
}

impl SandboxFacts {
    /// The facts of `spec`, nothing observed yet.
    pub fn of(spec: &SandboxSpec, escalated: bool) -> SandboxFacts {
        SandboxFacts {
            mode: spec.mode,
            network: spec.network,
            guarantees: spec.guarantees.clone(),
            escalated,
            denied_by_sandbox: None,
            quarantined: Vec::new(),
            exec_decisions: Vec::new(),
            network_decisions: Vec::new(),
        }
    }
}

/// Something a call's command left that git on the host would run, which bridle moved aside
/// when the run ended (the session log records one `sandbox/quarantine` event for each).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct QuarantineNote {
    /// Where it was.
    pub path: String,
    /// Why git on the host would run something because of it.
    pub reason: String,
    /// Where it is now; `None` when it could not be moved.
    pub moved_to: Option<String>,
}

/// What a tool returns (the JSON `bridle tool` prints).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ToolResult {
    /// The call succeeded.
    pub ok: bool,
    /// The text the model sees.
    pub content: String,
    /// The exit status, when a command ran.
    pub exit_code: Option<i32>,
    /// The timeout passed.
    pub timed_out: bool,
    /// Who denied the call, when it was denied before running.
    pub denied_by: Option<DeniedBy>,
    /// The sandbox facts.
    pub sandbox: SandboxFacts,
}

impl ToolResult {
    /// A result under `spec` that ran nothing (or whose command's facts do not matter).
    pub fn plain(spec: &SandboxSpec, ok: bool, content: String) -> ToolResult {
        ToolResult {
            ok,
            content,
            exit_code: None,
            timed_out: false,
            denied_by: None,
            sandbox: SandboxFacts::of(spec, false),
        }
    }

    /// A failed call, denied by `by` when that is known.
    pub fn denied(spec: &SandboxSpec, content: String, by: Option<DeniedBy>) -> ToolResult {
        ToolResult {
            denied_by: by,
            ..ToolResult::plain(spec, false, content)
        }
    }
}

/// What the pipeline hands a tool to execute one allowed call.
pub struct CallEnv<'a> {
    /// The spec this call runs under (the session's, or an approved escalation's).
    pub spec: &'a SandboxSpec,
    /// Whether an approved escalation widened this call.
    pub escalated: bool,
    /// The files this call may touch, confined by `spec`.
    pub fs: &'a dyn FileSystem,
    /// Where commands run.
    pub spawner: &'a dyn Spawner,
    /// Whether a write must refuse a file with several names (path rules, nobody approved).
    pub links: HardLinks,
    /// Bytes of head and tail kept per output stream.
    pub output_cap: usize,
    /// The user-interaction seam (plan review), for tools that ask the person themselves.
    pub answerer: &'a dyn Answerer,
    /// The call's approvals seam, observed: what the exec supervisor decides while the
    /// call's command runs is reported there as it happens, and its questions asked there.
    pub approvals: &'a Approvals<'a>,
    /// The command lines a person approved for this call, exactly: the exec supervisor does
    /// not ask about them a second time.
    pub approved_commands: &'a [Vec<String>],
}

impl std::fmt::Debug for CallEnv<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallEnv")
            .field("mode", &self.spec.mode)
            .field("escalated", &self.escalated)
            .finish_non_exhaustive()
    }
}

impl CallEnv<'_> {
    /// The facts of this call's sandbox.
    pub fn facts(&self) -> SandboxFacts {
        SandboxFacts::of(self.spec, self.escalated)
    }

    /// A result with this call's facts.
    pub fn result(&self, ok: bool, content: String, denied_by: Option<DeniedBy>) -> ToolResult {
        ToolResult {
            ok,
            content,
            exit_code: None,
            timed_out: false,
            denied_by,
            sandbox: self.facts(),
        }
    }
}

/// How an allowed call is carried out, once the pipeline has decided it.
pub type Execute<'t> = Box<dyn FnOnce(&CallEnv<'_>) -> ToolResult + Send + 't>;

/// A call its tool has parsed and declared.
pub struct Prepared<'t> {
    /// What the call will do.
    pub declaration: Declaration,
    /// Carries it out.
    pub execute: Execute<'t>,
}

impl std::fmt::Debug for Prepared<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Prepared")
            .field("declaration", &self.declaration)
            .finish_non_exhaustive()
    }
}

/// A tool the model can call.
pub trait Tool: Send + Sync {
    /// Its name, unique in a registry.
    fn name(&self) -> &str;

    /// What the model is shown: `{name, description, parameters}`.
    fn schema(&self) -> serde_json::Value;

    /// Whether this call may run alongside other such calls (reads and searches).
    fn concurrency_safe(&self, _raw_arguments: &str) -> bool {
        false
    }

    /// Parses `raw_arguments` (the text the model sent) and declares the call; an error is the
    /// text the model reads (`invalid arguments for ...`). `plan` is the session's plan, for
    /// limits an argument is checked against.
    fn prepare<'t>(&'t self, raw_arguments: &str, plan: &Plan) -> Result<Prepared<'t>, String>;
}

/// A tool with typed arguments; the blanket implementation makes it a [`Tool`].
pub trait TypedTool: Send + Sync {
    /// The arguments (serde with `deny_unknown_fields`, and a schema).
    type Args: DeserializeOwned + schemars::JsonSchema + Send + 'static;

    /// The tool's name.
    fn name(&self) -> &str;

    /// One or two sentences for the model.
    fn description(&self) -> &str;

    /// Whether calls with `args` may run alongside other such calls.
    fn concurrency_safe(&self, _args: &Self::Args) -> bool {
        false
    }

    /// What a call with `args` will do; an error is an invalid call (without the `invalid
    /// arguments for` prefix, which the adapter adds).
    fn declare(&self, args: &Self::Args, plan: &Plan) -> Result<Declaration, String>;

    /// Carries out an allowed call.
    fn execute(&self, args: Self::Args, env: &CallEnv<'_>) -> ToolResult;
}

impl<T: TypedTool> Tool for T {
    fn name(&self) -> &str {
        TypedTool::name(self)
    }

    fn schema(&self) -> serde_json::Value {
        serde_json::json!({
            "name": TypedTool::name(self),
            "description": self.description(),
            "parameters": parameters::<T::Args>(),
        })
    }

    fn concurrency_safe(&self, raw_arguments: &str) -> bool {
        arguments::<T::Args>(raw_arguments).is_ok_and(|a| TypedTool::concurrency_safe(self, &a))
    }

    fn prepare<'t>(&'t self, raw_arguments: &str, plan: &Plan) -> Result<Prepared<'t>, String> {
        let name = TypedTool::name(self);
        let args: T::Args =
            arguments(raw_arguments).map_err(|e| format!("invalid arguments for `{name}`: {e}"))?;
        let declaration = self
            .declare(&args, plan)
            .map_err(|e| format!("invalid arguments for `{name}`: {e}"))?;
        Ok(Prepared {
            declaration,
            execute: Box::new(move |env| self.execute(args, env)),
        })
    }
}

/// Parses a call's arguments: one JSON object of named arguments, as the schema offers. serde
/// would also take a struct as a positional array (`["a.txt", null, null]`), which no schema
/// describes, and word its refusal of one in Rust terms.
fn arguments<A: DeserializeOwned>(raw_arguments: &str) -> Result<A, String> {
    let value: serde_json::Value =
        serde_json::from_str(raw_arguments).map_err(|e| e.to_string())?;
    if value.is_object() {
        return serde_json::from_value(value).map_err(|e| e.to_string());
    }
    let kind = match &value {
        serde_json::Value::Object(_) => "an object",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Null => "null",
    };
    Err(format!(
        "expected a JSON object of named arguments (`{{\"name\": value, ...}}`, as the tool's schema says), got {kind}"
    ))
}

/// The JSON schema of `A` in the shape chat-completion APIs take: an object schema without
/// `$schema` or `title`, subschemas inlined, optional arguments simply not required.
pub fn parameters<A: schemars::JsonSchema>() -> serde_json::Value {
    let settings =
        schemars::generate::SchemaSettings::draft07().with(|s| s.inline_subschemas = true);
    let schema = settings.into_generator().into_root_schema_for::<A>();
    let mut value = schema.to_value();
    if let Some(map) = value.as_object_mut() {
        map.remove("$schema");
        map.remove("title");
        map.remove("definitions");
        map.remove("$defs");
        map.remove("description");
        let properties = map
            .entry("properties")
            .or_insert_with(|| serde_json::json!({}));
        // An optional argument is simply not required: `null` is not offered to the model.
        if let Some(properties) = properties.as_object_mut() {
            for property in properties.values_mut() {
                not_null(property);
            }
        }
        map.entry("required")
            .or_insert_with(|| serde_json::json!([]));
    }
    value
}

/// `schema` without `null` among its types.
fn not_null(schema: &mut serde_json::Value) {
    let Some(types) = schema.get_mut("type") else {
        return;
    };
    if let Some(list) = types.as_array() {
        let kept: Vec<serde_json::Value> = list.iter().filter(|t| *t != "null").cloned().collect();
        *types = match kept.as_slice() {
            [one] => one.clone(),
            _ => serde_json::Value::Array(kept),
        };
    }
}

/// The schema of a wider sandbox mode argument.
pub fn mode_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "string",
        "enum": ["read-only", "workspace-write", "danger-full-access"],
        "description": "a strictly wider sandbox mode for this one call; a person must approve it",
    })
}
