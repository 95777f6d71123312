//! The ACP `session/update`s of a session (`shared/spec/acp.md`), derived from committed log
//! events only, and what `bridle acp` answers from the log: the modes, the config options
//! (never wider than the profile), the available commands and a prompt's `stopReason`.
//!
//! [`AcpUpdates`] folds events in order and says which updates each one makes; a live session
//! feeds it the events as they are committed, and `session/load` feeds it the stored log
//! ([`replay`]), so both show the same. Diffs, locations and titles are read from the shape of
//! a call's arguments (`path`, `old_string`/`new_string`, `content`, ...); only the tool's ACP
//! kind is looked up by name ([`tool_kind`]).

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use agent_client_protocol::v1::schema::{
    AvailableCommand, AvailableCommandInput, AvailableCommandsUpdate, ConfigOptionUpdate,
    ContentBlock, ContentChunk, CurrentModeUpdate, Diff, Plan, PlanEntry, PlanEntryPriority,
    PlanEntryStatus, SessionMode, SessionModeState, SessionUpdate, StopReason, TextContent,
    ToolCall, ToolCallContent, ToolCallLocation, ToolCallStatus, ToolCallUpdate,
    ToolCallUpdateFields, ToolKind, UnstructuredCommandInput,
};
use bridle_policy::Decision;
use serde_json::Value;

use super::summary::{call_summary, parsed_arguments};
pub use config::{
    Ceiling, ConfigChoice, Current, OPTION_APPROVAL, OPTION_NETWORK, OPTION_SANDBOX, config_choice,
    config_options,
};
pub use permission::{
    ALLOW_ONCE, APPROVE_PLAN, Answer, KEEP_PLANNING, Question, REJECT_ONCE, answer_of,
    permission_request,
};

mod config;
mod permission;
use crate::log::{Event, TurnEndReason};

/// The id of the default mode.
pub const MODE_DEFAULT: &str = "default";
/// The id of plan mode.
pub const MODE_PLAN: &str = "plan";

/// The ACP kind of tool `name` for a call with `arguments`.
// The one place a front end looks a tool up by name: the kind belongs with the tool, and
// moves onto the tool trait when the pipeline's tools declare it.
pub fn tool_kind(name: &str, arguments: &Value) -> ToolKind {
    match name {
        "read_file" | "list_dir" => ToolKind::Read,
        "glob" | "grep" => ToolKind::Search,
        "write_file" | "edit_file" => ToolKind::Edit,
        "str_replace_editor" => match arguments.get("command").and_then(Value::as_str) {
            Some("view") => ToolKind::Read,
            _ => ToolKind::Edit,
        },
        "bash" | "terminal" => ToolKind::Execute,
        "exit_plan_mode" => ToolKind::SwitchMode,
        _ => ToolKind::Other,
    }
}

/// Folds a session's events into ACP updates.
#[derive(Debug)]
pub struct AcpUpdates {
    /// The workspace (from `session/header`): relative paths resolve against it.
    workspace: PathBuf,
    /// Calls the model asked for, by id: name and arguments (from `assistant/message`).
    asked: HashMap<String, (String, String)>,
    /// Calls already announced with a `tool_call` update.
    announced: HashSet<String>,
    /// Whether answer text / reasoning was streamed in chunks since the step began.
    streamed_text: bool,
    streamed_reasoning: bool,
    /// Whether `user/message` events become `user_message_chunk`s (a replay shows them; a
    /// live client sent them itself).
    echo_user: bool,
    /// The profile's ceiling, when config options are to be updated.
    ceiling: Option<Ceiling>,
}

impl AcpUpdates {
    /// A fold for a live session (the client's own prompts are not echoed back).
    pub fn live() -> Self {
        Self::new(false)
    }

    /// A fold for `session/load`: every user message is replayed too.
    pub fn replaying() -> Self {
        Self::new(true)
    }

    fn new(echo_user: bool) -> Self {
        Self {
            workspace: PathBuf::from("/"),
            asked: HashMap::new(),
            announced: HashSet::new(),
            streamed_text: false,
            streamed_reasoning: false,
            echo_user,
            ceiling: None,
        }
    }

    /// Config option updates are sent when the logged policy changes, within `ceiling`.
    pub fn with_ceiling(mut self, ceiling: Ceiling) -> Self {
        self.ceiling = Some(ceiling);
        self
    }

    /// Folds `event` without sending anything (the history before a live feed starts).
    pub fn observe(&mut self, event: &Event) {
        let _ = self.updates(event);
    }

    /// The updates `event` makes, in order.
    pub fn updates(&mut self, event: &Event) -> Vec<SessionUpdate> {
        match event {
            Event::SessionHeader(h) => {
                self.workspace = PathBuf::from(&h.workspace);
                Vec::new()
            }
            Event::UserMessage { text, .. } if self.echo_user => {
                vec![SessionUpdate::UserMessageChunk(chunk(text))]
            }
            Event::StepStart { .. } => {
                self.streamed_text = false;
                self.streamed_reasoning = false;
                Vec::new()
            }
            Event::AssistantChunk { text, reasoning } => {
                if *reasoning {
                    self.streamed_reasoning = true;
                    vec![SessionUpdate::AgentThoughtChunk(chunk(text))]
                } else {
                    self.streamed_text = true;
                    vec![SessionUpdate::AgentMessageChunk(chunk(text))]
                }
            }
            Event::AssistantMessage {
                text,
                tool_calls,
                reasoning,
                ..
            } => {
                for call in tool_calls {
                    self.asked.insert(
                        call.call_id.clone(),
                        (call.name.clone(), call.arguments.clone()),
                    );
                }
                // A model that did not stream still shows its answer.
                let mut out = Vec::new();
                if !reasoning.is_empty() && !self.streamed_reasoning {
                    out.push(SessionUpdate::AgentThoughtChunk(chunk(reasoning)));
                }
                if !text.is_empty() && !self.streamed_text {
                    out.push(SessionUpdate::AgentMessageChunk(chunk(text)));
                }
                out
            }
            Event::ToolCall(call) => {
                self.asked.insert(
                    call.call_id.clone(),
                    (call.name.clone(), call.arguments.clone()),
                );
                let mut out = vec![SessionUpdate::ToolCall(self.announce(
                    &call.call_id,
                    &call.name,
                    &call.arguments,
                ))];
                let args = parsed_arguments(&call.arguments);
                if tool_kind(&call.name, &args) == ToolKind::SwitchMode
                    && let Some(plan) = args.get("plan").and_then(Value::as_str)
                {
                    out.push(SessionUpdate::Plan(Plan::new(plan_entries(plan))));
                }
                out
            }
            Event::ToolDecision {
                call_id, decision, ..
            } if *decision == Decision::Allow => {
                vec![SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
                    call_id.clone(),
                    ToolCallUpdateFields::new().status(ToolCallStatus::InProgress),
                ))]
            }
            Event::ToolResult {
                call_id,
                ok,
                content,
                ..
            } => self.result(call_id, *ok, content),
            Event::PlanMode { active } => vec![SessionUpdate::CurrentModeUpdate(
                CurrentModeUpdate::new(mode_id(*active)),
            )],
            Event::PolicyEffective(summary) => match &self.ceiling {
                Some(ceiling) => vec![SessionUpdate::ConfigOptionUpdate(ConfigOptionUpdate::new(
                    config_options(
                        ceiling,
                        Current {
                            mode: summary.mode,
                            network: summary.network,
                            approval: summary.approval,
                        },
                    ),
                ))],
                None => Vec::new(),
            },
            _ => Vec::new(),
        }
    }

    /// The `tool_call` announcing a call (pending), with its kind, title, locations and input.
    fn announce(&mut self, call_id: &str, name: &str, arguments: &str) -> ToolCall {
        self.announced.insert(call_id.to_owned());
        let args = parsed_arguments(arguments);
        ToolCall::new(call_id.to_owned(), call_summary(name, arguments, 80))
            .name(name.to_owned())
            .kind(tool_kind(name, &args))
            .locations(locations(&self.workspace, &args))
            .raw_input(args)
    }

    /// The update for a call's result: completed or failed, with its text and, for an edit
    /// that succeeded, the diff. A call never dispatched (the turn was cancelled, the answer
    /// cut) is announced here, already failed, so the client knows what it was.
    fn result(&mut self, call_id: &str, ok: bool, content: &str) -> Vec<SessionUpdate> {
        let status = if ok {
            ToolCallStatus::Completed
        } else {
            ToolCallStatus::Failed
        };
        let (name, arguments) = self
            .asked
            .get(call_id)
            .cloned()
            .unwrap_or_else(|| (String::new(), String::new()));
        let args = parsed_arguments(&arguments);
        let mut body: Vec<ToolCallContent> = Vec::new();
        if ok && tool_kind(&name, &args) == ToolKind::Edit {
            body.extend(diff(&self.workspace, &args).map(ToolCallContent::Diff));
        }
        body.push(ToolCallContent::from(content.to_owned()));
        if self.announced.contains(call_id) {
            return vec![SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
                call_id.to_owned(),
                ToolCallUpdateFields::new().status(status).content(body),
            ))];
        }
        let call = self
            .announce(call_id, &name, &arguments)
            .status(status)
            .content(body);
        vec![SessionUpdate::ToolCall(call)]
    }
}

/// Every update the stored `events` make, as `session/load` replays them.
pub fn replay<'e>(events: impl IntoIterator<Item = &'e Event>) -> Vec<SessionUpdate> {
    let mut fold = AcpUpdates::replaying();
    events.into_iter().flat_map(|e| fold.updates(e)).collect()
}

fn chunk(text: &str) -> ContentChunk {
    ContentChunk::new(ContentBlock::Text(TextContent::new(text.to_owned())))
}

fn mode_id(plan: bool) -> &'static str {
    if plan { MODE_PLAN } else { MODE_DEFAULT }
}

/// `path` as an absolute path: relative paths resolve against the workspace.
fn absolute(workspace: &Path, path: &str) -> PathBuf {
    let path = Path::new(path);
    if path.is_absolute() {
        path.to_owned()
    } else {
        workspace.join(path)
    }
}

/// Where a call works: its `path` (with the line it starts at, when it says) or its `workdir`.
fn locations(workspace: &Path, args: &Value) -> Vec<ToolCallLocation> {
    let Some(path) = ["path", "workdir"]
        .iter()
        .find_map(|k| args.get(*k).and_then(Value::as_str))
    else {
        return Vec::new();
    };
    let line = ["offset", "insert_line"]
        .iter()
        .find_map(|k| args.get(*k).and_then(Value::as_u64))
        .or_else(|| args.pointer("/view_range/0").and_then(Value::as_u64))
        .and_then(|l| u32::try_from(l).ok());
    vec![ToolCallLocation::new(absolute(workspace, path)).line(line)]
}

/// The diff an edit's arguments describe: the text replaced and its replacement, or the
/// whole new content of a written file.
fn diff(workspace: &Path, args: &Value) -> Option<Diff> {
    let text = |keys: &[&str]| {
        keys.iter()
            .find_map(|k| args.get(*k).and_then(Value::as_str))
            .map(str::to_owned)
    };
    let path = text(&["path"])?;
    let new = text(&["new_string", "new_str", "content", "file_text"])?;
    let old = text(&["old_string", "old_str"]);
    Some(Diff::new(absolute(workspace, &path), new).old_text(old))
}

/// The plan entries of a plan under review: its markdown list items (`-`, `*`, `+` or
/// `1.`), each one entry, pending; a plan without a list is one entry, its title.
pub fn plan_entries(plan: &str) -> Vec<PlanEntry> {
    let entry = |text: &str| {
        PlanEntry::new(
            text.trim().to_owned(),
            PlanEntryPriority::Medium,
            PlanEntryStatus::Pending,
        )
    };
    let items: Vec<PlanEntry> = plan
        .lines()
        .filter_map(|line| {
            let line = line.trim_start();
            let item = line
                .strip_prefix("- ")
                .or_else(|| line.strip_prefix("* "))
                .or_else(|| line.strip_prefix("+ "))
                .or_else(|| {
                    let digits = line.find(|c: char| !c.is_ascii_digit())?;
                    (digits > 0)
                        .then(|| line[digits..].strip_prefix(". "))
                        .flatten()
                })?;
            let item = item
                .strip_prefix("[ ] ")
                .or_else(|| item.strip_prefix("[x] "))
                .unwrap_or(item);
            (!item.trim().is_empty()).then(|| entry(item))
        })
        .collect();
    if !items.is_empty() {
        return items;
    }
    let title = plan
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("")
        .trim_start_matches('#');
    vec![entry(title)]
}

/// The session's modes: `default` and `plan` (plan mode: soft guidance), the one in force
/// current.
pub fn modes(plan_active: bool) -> SessionModeState {
    SessionModeState::new(
        mode_id(plan_active),
        vec![
            SessionMode::new(MODE_DEFAULT, "Default").description(
                "The agent acts, within the sandbox and the approval policy.".to_owned(),
            ),
            SessionMode::new(MODE_PLAN, "Plan").description(
                "The agent plans first and presents the plan for review (soft guidance: the \
                 sandbox is unchanged)."
                    .to_owned(),
            ),
        ],
    )
}

/// Whether the mode id a client chose means plan mode.
pub fn parse_mode(id: &str) -> Result<bool, String> {
    match id {
        MODE_DEFAULT => Ok(false),
        MODE_PLAN => Ok(true),
        other => Err(format!(
            "unknown mode {other:?} (the modes are `{MODE_DEFAULT}` and `{MODE_PLAN}`)"
        )),
    }
}

/// The commands the session offers (`available_commands_update`).
pub fn available_commands() -> SessionUpdate {
    SessionUpdate::AvailableCommandsUpdate(AvailableCommandsUpdate::new(vec![
        AvailableCommand::new(
            "plan",
            "Enter plan mode; `/plan MSG` also sends MSG, `/plan off` leaves plan mode",
        )
        .input(AvailableCommandInput::Unstructured(
            UnstructuredCommandInput::new("optional message, or `off`"),
        )),
    ]))
}

/// How a prompt answers for a turn that ended with `reason`: its `stopReason`, or the error
/// it answers with (the turn failed).
pub fn stop_reason(
    reason: TurnEndReason,
    detail: Option<&str>,
    cancelled: bool,
) -> Result<StopReason, String> {
    match reason {
        TurnEndReason::Completed => Ok(StopReason::EndTurn),
        TurnEndReason::MaxTokens => Ok(StopReason::MaxTokens),
        TurnEndReason::Blocked => Ok(StopReason::Refusal),
        TurnEndReason::Interrupted => Ok(StopReason::Cancelled),
        TurnEndReason::Aborted if cancelled => Ok(StopReason::Cancelled),
        // An aborted turn nobody cancelled reached its step limit.
        TurnEndReason::Aborted => Ok(StopReason::MaxTurnRequests),
        TurnEndReason::Error => Err(detail.unwrap_or("the turn failed").to_owned()),
    }
}

#[cfg(test)]
mod tests;
