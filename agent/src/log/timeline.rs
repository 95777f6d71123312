//! The timeline `bridle log show` prints: turns, steps, tool calls with their policy decision,
//! approvals asked and answered, denials and mode switches, built from a session's events.

use bridle_policy::Decision;
use serde::Serialize;

use super::event::{DropReason, Event, PolicySummary, Reply, SessionHeader, TurnEndReason};

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
    /// An exec decided while no call was running, reported after the last call (a process the
    /// persistent terminal's shell left running, when the session ended).
    ExecBetweenCalls {
        seq: u64,
        time: String,
        exec: crate::log::ExecDecision,
    },
    /// A connection decided while no call was running, reported after the last call.
    NetBetweenCalls {
        seq: u64,
        time: String,
        decision: super::event::NetDecision,
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
    /// Why it did not complete (the error, the cut, the cancel), when the log says.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// Who or what cancelled it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cancelled_by: Option<String>,
}

/// A step: one model request and the tool calls it produced.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Step {
    pub step: u64,
    pub seq: u64,
    /// The model's answer text.
    pub answer: String,
    /// The model's reasoning for it.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub reasoning: String,
    /// What the model reported about its answer (model id, finish reason, usage).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reply: Option<Reply>,
    pub calls: Vec<Call>,
}

/// A tool call and everything that decided and answered it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Call {
    pub call_id: String,
    /// The `tool/call` event; for a call that was never dispatched, the answer listing it.
    pub seq: u64,
    pub name: String,
    pub arguments: String,
    /// Whether it was dispatched to the pipeline (recorded as `tool/call`). A call the answer
    /// listed that never was (cancelled, cut at the token limit, interrupted) is not.
    pub dispatched: bool,
    /// The wider sandbox mode the call asked for, and whether it ran under it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub escalation: Option<Escalation>,
    pub decision: Option<Decision>,
    /// The rule, approval or guard that decided.
    pub decided_by: Option<String>,
    /// Every question asked about the call, in order: the call's own, then one for each exec
    /// its command made that an `ask` rule matched.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub approvals: Vec<Approval>,
    /// `None` when the log has no result.
    pub ok: Option<bool>,
    pub result: Option<String>,
    /// What the sandbox enforced for the call, as recorded with its result.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<serde_json::Value>,
    /// What the sandbox blocked, when the call's failure looks caused by it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub denied_by_sandbox: Option<String>,
    /// Who refused the call before it ran (`rule`, `policy`, `approval`, `sandbox`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refused_by: Option<String>,
    /// What bridle moved aside when the call's command ended (`sandbox/quarantine`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub quarantined: Vec<Quarantine>,
    /// What the exec supervisor denied (or asked about) while the call's command ran
    /// (`exec/decision`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub execs: Vec<crate::log::ExecDecision>,
    /// What the network proxy decided for the call's connections.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub network: Vec<super::event::NetDecision>,
}

/// An escalation a call asked for (`sandbox_permissions` in its arguments).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Escalation {
    /// The mode asked for.
    pub asked: String,
    /// Whether the call ran escalated; `None` when the log does not say (it did not run, or
    /// its result carries no sandbox facts).
    pub ran_escalated: Option<bool>,
}

/// Something a call's command left that git on the host would run, moved aside.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Quarantine {
    pub path: String,
    pub reason: String,
    pub moved_to: Option<String>,
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
    /// `sandbox-mode`, `approval-policy`, `plan-mode`, `model` (the route of the requests
    /// from here on), `policy` (the effective policy, by digest) `context` (a compaction), `input` (a live session's input arrived, a request included it, or it was dropped) or
    /// `plugin` (an event of a plugin's type: its type and data).
    pub what: &'static str,
    pub to: String,
    /// For `policy`: what it is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub policy: Option<PolicySummary>,
    /// For `context` (a compaction): the summary requests carry from here on in place of the
    /// events before the one `to` names.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
}

/// Builds the timeline of `events` (`(seq, time, event)`, in order).
pub fn timeline<'a>(events: impl IntoIterator<Item = (u64, &'a str, &'a Event)>) -> Timeline {
    let mut out = Timeline {
        session: None,
        forked_from: None,
        entries: Vec::new(),
    };
    let mut turn: Option<Turn> = None;
    let mut open = Unanswered::default();
    let mut model: Option<String> = None;
    for (seq, time, event) in events {
        let unattached = Entry::Unattached {
            seq,
            time: time.to_owned(),
            kind: event.builtin_kind(),
        };
        let switch = |what, to: String| Switch {
            seq,
            time: time.to_owned(),
            what,
            to,
            policy: None,
            summary: None,
        };
        match event {
            Event::SessionHeader(header) => out.session = Some(header.clone()),
            Event::SessionForked { from, seq } => out.forked_from = Some((from.clone(), *seq)),
            Event::TurnStart { turn: n } => {
                if let Some(open) = turn.take() {
                    out.entries.push(Entry::Turn(open));
                }
                open = Unanswered::default();
                turn = Some(Turn {
                    turn: *n,
                    seq,
                    time: time.to_owned(),
                    input: Vec::new(),
                    steps: Vec::new(),
                    switches: Vec::new(),
                    ended: None,
                    detail: None,
                    cancelled_by: None,
                });
            }
            Event::TurnEnd {
                reason,
                detail,
                cancelled_by,
                ..
            } => match turn.take() {
                Some(mut open) => {
                    open.ended = Some(*reason);
                    open.detail.clone_from(detail);
                    open.cancelled_by.clone_from(cancelled_by);
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
                    reasoning: String::new(),
                    reply: None,
                    calls: Vec::new(),
                }),
                None => out.entries.push(unattached),
            },
            Event::AssistantMessage {
                text,
                tool_calls,
                reasoning,
                reply,
            } => match last_step(&mut turn) {
                Some((at, step)) => {
                    step.answer.clone_from(text);
                    step.reasoning.clone_from(reasoning);
                    step.reply.clone_from(reply);
                    // Listed first: a call that is never dispatched still gets its result.
                    for call in tool_calls {
                        open.add(&call.call_id, (at, step.calls.len()));
                        step.calls.push(Call::listed(call, seq));
                    }
                }
                None => out.entries.push(unattached),
            },
            Event::ToolCall(call) => match last_step(&mut turn) {
                Some((at, step)) => {
                    let mut recorded = Call::listed(call, seq);
                    recorded.dispatched = true;
                    match open.listed_in(step, at, &call.call_id) {
                        Some(listed) => *listed = recorded,
                        None => {
                            open.add(&call.call_id, (at, step.calls.len()));
                            step.calls.push(recorded);
                        }
                    }
                }
                None => out.entries.push(unattached),
            },
            Event::ToolDecision {
                call_id,
                decision,
                by,
            } => match open.find(&mut turn, call_id) {
                Some(call) => {
                    call.decision = Some(*decision);
                    call.decided_by = Some(by.clone());
                }
                None => out.entries.push(unattached),
            },
            Event::NetDecision(decision) => match open.find(&mut turn, &decision.call_id) {
                Some(call) => call.network.push(decision.clone()),
                None if decision.between_calls => out.entries.push(Entry::NetBetweenCalls {
                    seq,
                    time: time.to_owned(),
                    decision: decision.clone(),
                }),
                None => out.entries.push(unattached),
            },
            Event::ApprovalAsked { call_id, question } => match open.find(&mut turn, call_id) {
                Some(call) => {
                    call.approvals.push(Approval {
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
            } => match open
                .find(&mut turn, call_id)
                .and_then(|c| c.approvals.last_mut())
            {
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
            } => match open.answer(&mut turn, call_id) {
                Some(call) => {
                    call.ok = Some(*ok);
                    call.result = Some(content.clone());
                    call.sandbox.clone_from(sandbox);
                    let fact = |name: &str| {
                        sandbox
                            .as_ref()
                            .and_then(|s| s.get(name))
                            .and_then(serde_json::Value::as_str)
                            .map(str::to_owned)
                    };
                    call.denied_by_sandbox = fact("denied_by_sandbox");
                    call.refused_by = fact("denied_by");
                    if let Some(escalation) = call.escalation.as_mut() {
                        escalation.ran_escalated = sandbox
                            .as_ref()
                            .and_then(|s| s.get("escalated"))
                            .and_then(serde_json::Value::as_bool);
                    }
                }
                None => out.entries.push(unattached),
            },
            Event::SandboxQuarantine {
                call_id,
                path,
                reason,
                moved_to,
            } => match open.find(&mut turn, call_id) {
                Some(call) => call.quarantined.push(Quarantine {
                    path: path.clone(),
                    reason: reason.clone(),
                    moved_to: moved_to.clone(),
                }),
                None => out.entries.push(unattached),
            },
            Event::ExecDecision { call_id, exec } => match open.find(&mut turn, call_id) {
                Some(call) => call.execs.push(exec.clone()),
                None if exec.between_calls => out.entries.push(Entry::ExecBetweenCalls {
                    seq,
                    time: time.to_owned(),
                    exec: exec.clone(),
                }),
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
            Event::PolicyEffective(summary) => {
                let mut s = switch("policy", format!("sha256:{}", summary.digest));
                s.policy = Some(summary.clone());
                push_switch(&mut out, &mut turn, s);
            }
            Event::ContextCompacted {
                before,
                summary,
                by,
            } => {
                let mut s = switch(
                    "context",
                    format!("compacted: events before {before} replaced by a summary ({by})"),
                );
                s.summary = Some(summary.clone());
                push_switch(&mut out, &mut turn, s);
            }
            // A live session's inputs: shown where they arrived and where a request carried
            // them (the receipt), in order with the steps.
            Event::InputReceived { input_id, kind } => {
                let s = switch("input", format!("{input_id} received ({kind})"));
                push_switch(&mut out, &mut turn, s);
            }
            Event::InputIncluded {
                input_id,
                turn: n,
                step,
                carried,
            } => {
                let carried = if *carried {
                    ", carried from the turn it arrived in"
                } else {
                    ""
                };
                let s = switch(
                    "input",
                    format!("{input_id} included in turn {n} step {step}{carried}"),
                );
                push_switch(&mut out, &mut turn, s);
            }
            Event::InputDropped {
                input_id,
                kind,
                turn: n,
                reason,
            } => {
                let why = match (reason, n) {
                    (DropReason::Cancelled, Some(n)) => format!("turn {n} was cancelled"),
                    (DropReason::Cancelled, None) => "a turn was cancelled".to_owned(),
                    (DropReason::SessionClosed, Some(n)) => {
                        format!("the session closed during turn {n}")
                    }
                    (DropReason::SessionClosed, None) => "the session closed".to_owned(),
                };
                let s = switch(
                    "input",
                    format!("{input_id} ({kind}) dropped, never sent to the model: {why}"),
                );
                push_switch(&mut out, &mut turn, s);
            }
            // A plugin's own event: its type and data, where it stands.
            Event::Plugin(plugin) => {
                let s = switch("plugin", format!("{} {}", plugin.kind, plugin.data));
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

impl Call {
    /// `call` as the log first shows it, at event `seq`: not yet dispatched, decided or
    /// answered.
    fn listed(call: &super::event::ToolCall, seq: u64) -> Self {
        let asked = serde_json::from_str::<serde_json::Value>(&call.arguments)
            .ok()
            .and_then(|args| {
                args.get("sandbox_permissions")
                    .and_then(serde_json::Value::as_str)
                    .map(str::to_owned)
            });
        Self {
            call_id: call.call_id.clone(),
            seq,
            name: call.name.clone(),
            arguments: call.arguments.clone(),
            dispatched: false,
            escalation: asked.map(|asked| Escalation {
                asked,
                ran_escalated: None,
            }),
            decision: None,
            decided_by: None,
            approvals: Vec::new(),
            ok: None,
            result: None,
            sandbox: None,
            denied_by_sandbox: None,
            refused_by: None,
            quarantined: Vec::new(),
            execs: Vec::new(),
            network: Vec::new(),
        }
    }
}

/// The open turn's last step and where it is among the turn's steps.
fn last_step(turn: &mut Option<Turn>) -> Option<(usize, &mut Step)> {
    let steps = &mut turn.as_mut()?.steps;
    let at = steps.len().checked_sub(1)?;
    steps.last_mut().map(|step| (at, step))
}

/// The calls of the open turn that have no result yet, by id, as (step, call) positions in
/// the order they were made: a decision, approval or result belongs to the first with its id
/// (ids the model repeated are answered in order). Found without scanning the turn, so a turn
/// with thousands of calls is read in linear time.
#[derive(Debug, Default)]
struct Unanswered {
    by_id: std::collections::HashMap<String, std::collections::VecDeque<(usize, usize)>>,
}

impl Unanswered {
    fn add(&mut self, call_id: &str, at: (usize, usize)) {
        self.by_id
            .entry(call_id.to_owned())
            .or_default()
            .push_back(at);
    }

    fn first(&self, call_id: &str) -> Option<(usize, usize)> {
        self.by_id.get(call_id)?.front().copied()
    }

    /// The call `call_id` belongs to.
    fn find<'t>(&self, turn: &'t mut Option<Turn>, call_id: &str) -> Option<&'t mut Call> {
        let (step, call) = self.first(call_id)?;
        turn.as_mut()?.steps.get_mut(step)?.calls.get_mut(call)
    }

    /// The call a result for `call_id` answers; it is no longer open.
    fn answer<'t>(&mut self, turn: &'t mut Option<Turn>, call_id: &str) -> Option<&'t mut Call> {
        let (step, call) = self.by_id.get_mut(call_id)?.pop_front()?;
        turn.as_mut()?.steps.get_mut(step)?.calls.get_mut(call)
    }

    /// The call of `step` (at position `at`) the answer listed as `call_id` and that was not
    /// dispatched yet.
    fn listed_in<'s>(&self, step: &'s mut Step, at: usize, call_id: &str) -> Option<&'s mut Call> {
        let index = self
            .by_id
            .get(call_id)?
            .iter()
            .find(|(s, c)| *s == at && step.calls.get(*c).is_some_and(|call| !call.dispatched))
            .map(|(_, c)| *c)?;
        step.calls.get_mut(index)
    }
}

fn push_switch(out: &mut Timeline, turn: &mut Option<Turn>, switch: Switch) {
    match turn.as_mut() {
        Some(open) => open.switches.push(switch),
        None => out.entries.push(Entry::Switch(switch)),
    }
}
