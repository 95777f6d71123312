//! The timeline `bridle log show` prints: turns, steps, tool calls with their policy decision,
//! approvals asked and answered, denials and mode switches, built from a session's events.

use bridle_policy::Decision;
use serde::Serialize;

use super::event::{Event, SessionHeader, TurnEndReason};

/// A session as a reviewer reads it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Timeline {
    pub session: Option<SessionHeader>,
    /// `(session, event)` this session was forked from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub forked_from: Option<(String, u64)>,
    /// Turns and switches outside turns, in the order they happened.
    pub entries: Vec<Entry>,
}

/// One thing that happened at the top level of a session.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Entry {
    Turn(Turn),
    Switch(Switch),
    /// An event that belongs to no turn or call the log shows (a decision for a call that was
    /// never made, a message outside a turn): listed, never dropped.
    Unattached {
        seq: u64,
        time: String,
        #[serde(rename = "type")]
        kind: &'static str,
    },
}

/// A turn: the input that opened it, its steps and how it ended.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Turn {
    pub turn: u64,
    pub seq: u64,
    pub time: String,
    /// The user messages of the turn (the first opened it; later ones were steering).
    pub input: Vec<String>,
    pub steps: Vec<Step>,
    /// Mode switches made during the turn.
    pub switches: Vec<Switch>,
    /// `None` while the turn is open.
    pub ended: Option<TurnEndReason>,
}

/// A step: one model request and the tool calls it produced.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Step {
    pub step: u64,
    pub seq: u64,
    /// The model's answer text.
    pub answer: String,
    pub calls: Vec<Call>,
}

/// A tool call and everything that decided and answered it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Call {
    pub call_id: String,
    pub seq: u64,
    pub name: String,
    pub arguments: String,
    pub decision: Option<Decision>,
    /// The rule, approval or guard that decided.
    pub decided_by: Option<String>,
    pub approval: Option<Approval>,
    /// `None` when the log has no result.
    pub ok: Option<bool>,
    pub result: Option<String>,
    /// What the sandbox enforced for the call, as recorded with its result.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<serde_json::Value>,
    /// What the network proxy decided for the call's connections.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub network: Vec<super::event::NetDecision>,
}

/// An approval question and its answer.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Approval {
    pub question: String,
    pub answer: Option<String>,
    pub answered_by: Option<String>,
}

/// A change of sandbox mode, approval policy or plan mode.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Switch {
    pub seq: u64,
    pub time: String,
    /// `sandbox-mode`, `approval-policy`, `plan-mode` or `model` (the route of the requests
    /// from here on).
    pub what: &'static str,
    pub to: String,
}

/// Builds the timeline of `events` (`(seq, time, event)`, in order).
pub fn timeline<'a>(events: impl IntoIterator<Item = (u64, &'a str, &'a Event)>) -> Timeline {
    let mut out = Timeline {
        session: None,
        forked_from: None,
        entries: Vec::new(),
    };
    let mut turn: Option<Turn> = None;
    let mut model: Option<String> = None;
    for (seq, time, event) in events {
        let unattached = Entry::Unattached {
            seq,
            time: time.to_owned(),
            kind: event.kind(),
        };
        let switch = |what, to: String| Switch {
            seq,
            time: time.to_owned(),
            what,
            to,
        };
        match event {
            Event::SessionHeader(header) => out.session = Some(header.clone()),
            Event::SessionForked { from, seq } => out.forked_from = Some((from.clone(), *seq)),
            Event::TurnStart { turn: n } => {
                if let Some(open) = turn.take() {
                    out.entries.push(Entry::Turn(open));
                }
                turn = Some(Turn {
                    turn: *n,
                    seq,
                    time: time.to_owned(),
                    input: Vec::new(),
                    steps: Vec::new(),
                    switches: Vec::new(),
                    ended: None,
                });
            }
            Event::TurnEnd { reason, .. } => match turn.take() {
                Some(mut open) => {
                    open.ended = Some(*reason);
                    out.entries.push(Entry::Turn(open));
                }
                None => out.entries.push(unattached),
            },
            Event::UserMessage { text, .. } => match turn.as_mut() {
                Some(open) => open.input.push(text.clone()),
                None => out.entries.push(unattached),
            },
            Event::StepStart { step, .. } => match turn.as_mut() {
                Some(open) => open.steps.push(Step {
                    step: *step,
                    seq,
                    answer: String::new(),
                    calls: Vec::new(),
                }),
                None => out.entries.push(unattached),
            },
            Event::AssistantMessage { text, .. } => {
                match turn.as_mut().and_then(|t| t.steps.last_mut()) {
                    Some(step) => step.answer.clone_from(text),
                    None => out.entries.push(unattached),
                }
            }
            Event::ToolCall(call) => match turn.as_mut().and_then(|t| t.steps.last_mut()) {
                Some(step) => step.calls.push(Call {
                    call_id: call.call_id.clone(),
                    seq,
                    name: call.name.clone(),
                    arguments: call.arguments.clone(),
                    decision: None,
                    decided_by: None,
                    approval: None,
                    ok: None,
                    result: None,
                    sandbox: None,
                    network: Vec::new(),
                }),
                None => out.entries.push(unattached),
            },
            Event::ToolDecision {
                call_id,
                decision,
                by,
            } => match find_call(&mut turn, call_id) {
                Some(call) => {
                    call.decision = Some(*decision);
                    call.decided_by = Some(by.clone());
                }
                None => out.entries.push(unattached),
            },
            Event::NetDecision(decision) => match find_call(&mut turn, &decision.call_id) {
                Some(call) => call.network.push(decision.clone()),
                None => out.entries.push(unattached),
            },
            Event::ApprovalAsked { call_id, question } => match find_call(&mut turn, call_id) {
                Some(call) => {
                    call.approval = Some(Approval {
                        question: question.clone(),
                        answer: None,
                        answered_by: None,
                    });
                }
                None => out.entries.push(unattached),
            },
            Event::ApprovalDecided {
                call_id,
                answer,
                by,
            } => match find_call(&mut turn, call_id).and_then(|c| c.approval.as_mut()) {
                Some(approval) => {
                    approval.answer = Some(answer.clone());
                    approval.answered_by = Some(by.clone());
                }
                None => out.entries.push(unattached),
            },
            Event::ToolResult {
                call_id,
                ok,
                content,
                sandbox,
            } => match find_call(&mut turn, call_id) {
                Some(call) => {
                    call.ok = Some(*ok);
                    call.result = Some(content.clone());
                    call.sandbox.clone_from(sandbox);
                }
                None => out.entries.push(unattached),
            },
            Event::RequestHeader(header) => {
                if model.as_deref() != Some(header.model.as_str()) {
                    model = Some(header.model.clone());
                    let s = switch("model", header.model.clone());
                    push_switch(&mut out, &mut turn, s);
                }
            }
            Event::SandboxMode { mode } => {
                let s = switch("sandbox-mode", mode.to_string());
                push_switch(&mut out, &mut turn, s);
            }
            Event::ApprovalPolicy { policy } => {
                let s = switch("approval-policy", policy.to_string());
                push_switch(&mut out, &mut turn, s);
            }
            Event::PlanMode { active } => {
                let s = switch("plan-mode", if *active { "on" } else { "off" }.to_owned());
                push_switch(&mut out, &mut turn, s);
            }
            Event::StepEnd { .. } | Event::AssistantChunk { .. } => {}
        }
    }
    if let Some(open) = turn.take() {
        out.entries.push(Entry::Turn(open));
    }
    out
}

/// The call a decision, approval or result with `call_id` belongs to: the first with that id
/// that has no result yet (ids the model repeated are answered in order).
fn find_call<'t>(turn: &'t mut Option<Turn>, call_id: &str) -> Option<&'t mut Call> {
    turn.as_mut()?
        .steps
        .iter_mut()
        .flat_map(|s| s.calls.iter_mut())
        .find(|c| c.call_id == call_id && c.ok.is_none())
}

fn push_switch(out: &mut Timeline, turn: &mut Option<Turn>, switch: Switch) {
    match turn.as_mut() {
        Some(open) => open.switches.push(switch),
        None => out.entries.push(Entry::Switch(switch)),
    }
}
