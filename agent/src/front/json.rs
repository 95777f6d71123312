//! `bridle run --json` and the progress lines of `bridle run`.
//!
//! `--json` prints one compact JSON object per line on stdout for each committed event a
//! script needs, and the final answer last. Every line has `v` (the schema version, bumped
//! only when a field changes meaning or goes away), `event` (the names below) and, for lines
//! that come from the log, `seq` (the event's sequence number there, so a line can be matched
//! with `bridle log export`). The names and fields are a contract (README "bridle run
//! --json"):
//!
//! | `event` | fields |
//! |---|---|
//! | `session` | `id`, `workspace`, `profile` |
//! | `turn_start` | `turn` |
//! | `step_start`, `step_end` | `turn`, `step` |
//! | `user_message` | `text`, `id`? |
//! | `text_delta`, `reasoning_delta` | `text` |
//! | `assistant_message` | `text`, `tool_calls` [{`call_id`, `name`}] |
//! | `tool_call` | `call_id`, `name`, `arguments` (the JSON sent, or the raw text when it is not JSON) |
//! | `tool_decision` | `call_id`, `decision` (allow/ask/deny), `by` |
//! | `approval_asked` | `call_id`, `question` |
//! | `approval_decided` | `call_id`, `answer` (approved/rejected/unavailable), `by` |
//! | `tool_result` | `call_id`, `ok`, `content` |
//! | `net_decision` | `call_id`, `host`, `port`, `decision`, `by` |
//! | `exec_decision` | `call_id`, `pid`, `program`, `argv`, `decision`, `rule`?, `outcome`, `message` |
//! | `context_compacted` | `before`, `by` |
//! | `quarantine` | `call_id`, `path`, `reason`, `moved_to`? |
//! | `input_received` | `input_id`, `kind` (prompt/steer/queue/inject) |
//! | `input_included` | `input_id`, `turn`, `step`, `carried` (the receipt) |
//! | `input_dropped` | `input_id`, `kind`, `turn`?, `reason` (cancelled/session-closed) |
//! | `plan_mode` | `active` |
//! | `sandbox_mode` | `mode` |
//! | `approval_policy` | `policy` |
//! | `turn_end` | `turn`, `reason`, `detail`?, `cancelled_by`? |
//! | `final` | `session`, `turn`, `reason`, `answer` (always the last line); when the task was a command and no turn ran, `turn` and `reason` are `null` and `command`, `reply` say what it did |

use std::collections::HashMap;

use serde_json::{Value, json};

use super::summary::{call_summary, parsed_arguments};
use crate::log::{Event, TurnEndReason, turn_end_name};

/// The version of the `--json` line schema.
pub const JSON_VERSION: u64 = 1;

/// The `--json` line for the committed event `event` (number `seq` in the log), or `None` for
/// an event a script does not need (request headers, policy summaries, forks).
pub fn json_line(seq: u64, event: &Event) -> Option<Value> {
    let (name, fields) = match event {
        Event::SessionHeader(h) => (
            "session",
            json!({"id": h.id, "workspace": h.workspace, "profile": h.profile}),
        ),
        Event::TurnStart { turn } => ("turn_start", json!({"turn": turn})),
        Event::TurnEnd {
            turn,
            reason,
            detail,
            cancelled_by,
        } => {
            let mut fields = json!({"turn": turn, "reason": turn_end_name(*reason)});
            insert_some(&mut fields, "detail", detail.as_deref());
            insert_some(&mut fields, "cancelled_by", cancelled_by.as_deref());
            ("turn_end", fields)
        }
        Event::StepStart { turn, step } => ("step_start", json!({"turn": turn, "step": step})),
        Event::StepEnd { turn, step } => ("step_end", json!({"turn": turn, "step": step})),
        Event::UserMessage { id, text } => {
            let mut fields = json!({"text": text});
            insert_some(&mut fields, "id", id.as_deref());
            ("user_message", fields)
        }
        Event::AssistantChunk { text, reasoning } => (
            if *reasoning {
                "reasoning_delta"
            } else {
                "text_delta"
            },
            json!({"text": text}),
        ),
        Event::AssistantMessage {
            text, tool_calls, ..
        } => {
            let calls: Vec<Value> = tool_calls
                .iter()
                .map(|c| json!({"call_id": c.call_id, "name": c.name}))
                .collect();
            (
                "assistant_message",
                json!({"text": text, "tool_calls": calls}),
            )
        }
        Event::ToolCall(call) => (
            "tool_call",
            json!({
                "call_id": call.call_id,
                "name": call.name,
                "arguments": parsed_arguments(&call.arguments),
            }),
        ),
        Event::ToolDecision {
            call_id,
            decision,
            by,
        } => (
            "tool_decision",
            json!({"call_id": call_id, "decision": decision, "by": by}),
        ),
        Event::ToolResult {
            call_id,
            ok,
            content,
            ..
        } => (
            "tool_result",
            json!({"call_id": call_id, "ok": ok, "content": content}),
        ),
        Event::ApprovalAsked { call_id, question } => (
            "approval_asked",
            json!({"call_id": call_id, "question": question}),
        ),
        Event::ApprovalDecided {
            call_id,
            answer,
            by,
        } => (
            "approval_decided",
            json!({"call_id": call_id, "answer": answer, "by": by}),
        ),
        Event::NetDecision(d) => {
            let mut fields = json!({
                "call_id": d.call_id, "host": d.host, "port": d.port,
                "decision": d.decision, "by": d.by,
            });
            if d.between_calls {
                fields["between_calls"] = json!(true);
            }
            ("net_decision", fields)
        }
        Event::ExecDecision { call_id, exec } => {
            let mut fields = json!({
                "call_id": call_id, "pid": exec.pid, "program": exec.program,
                "argv": exec.argv, "decision": exec.decision, "outcome": exec.outcome,
                "message": exec.message,
            });
            insert_some(&mut fields, "rule", exec.rule.as_deref());
            if exec.between_calls {
                fields["between_calls"] = json!(true);
            }
            ("exec_decision", fields)
        }
        Event::ContextCompacted { before, by, .. } => {
            ("context_compacted", json!({"before": before, "by": by}))
        }
        Event::SandboxQuarantine {
            call_id,
            path,
            reason,
            moved_to,
        } => {
            let mut fields = json!({"call_id": call_id, "path": path, "reason": reason});
            insert_some(&mut fields, "moved_to", moved_to.as_deref());
            ("quarantine", fields)
        }
        Event::PlanMode { active } => ("plan_mode", json!({"active": active})),
        Event::SandboxMode { mode } => ("sandbox_mode", json!({"mode": mode})),
        Event::ApprovalPolicy { policy } => ("approval_policy", json!({"policy": policy})),
        Event::InputReceived { input_id, kind } => (
            "input_received",
            json!({"input_id": input_id, "kind": kind}),
        ),
        Event::InputIncluded {
            input_id,
            turn,
            step,
            carried,
        } => (
            "input_included",
            json!({"input_id": input_id, "turn": turn, "step": step, "carried": carried}),
        ),
        Event::InputDropped {
            input_id,
            kind,
            turn,
            reason,
        } => {
            let mut fields = json!({"input_id": input_id, "kind": kind, "reason": reason});
            if let Some(turn) = turn {
                fields["turn"] = json!(turn);
            }
            ("input_dropped", fields)
        }
        Event::SessionForked { .. }
        | Event::RequestHeader(_)
        | Event::PolicyEffective(_)
        | Event::Plugin(_) => {
            return None;
        }
    };
    Some(envelope(name, Some(seq), fields))
}

/// The last `--json` line: how the turn ended and the final answer.
pub fn final_line(session: &str, turn: u64, reason: TurnEndReason, answer: &str) -> Value {
    envelope(
        "final",
        None,
        json!({
            "session": session,
            "turn": turn,
            "reason": turn_end_name(reason),
            "answer": answer,
        }),
    )
}

/// The last `--json` line of a run whose task was a command (`/plan off`): no turn ran, so
/// `turn` and `reason` are `null`, and `command` and `reply` say what was done.
pub fn final_command_line(session: &str, command: &str, reply: &str) -> Value {
    envelope(
        "final",
        None,
        json!({
            "session": session,
            "turn": null,
            "reason": null,
            "answer": "",
            "command": command,
            "reply": reply,
        }),
    )
}

/// `{v, event, seq?, ...fields}`, in that order.
fn envelope(name: &str, seq: Option<u64>, fields: Value) -> Value {
    let mut line = serde_json::Map::new();
    line.insert("v".into(), json!(JSON_VERSION));
    line.insert("event".into(), json!(name));
    if let Some(seq) = seq {
        line.insert("seq".into(), json!(seq));
    }
    if let Value::Object(fields) = fields {
        line.extend(fields);
    }
    Value::Object(line)
}

fn insert_some(fields: &mut Value, key: &str, value: Option<&str>) {
    if let (Value::Object(map), Some(value)) = (fields, value) {
        map.insert(key.into(), json!(value));
    }
}

/// The progress lines of `bridle run` without `--json`: one line per tool call when it is
/// decided, with the decision and what decided it, and one per exec inside it that a command
/// rule refused or asked about (an allowed call may still have had its `git push` refused).
/// Folds the calls it has seen, so a decision names its call.
#[derive(Debug, Default)]
pub struct ProgressLines {
    /// Call id → its summary, until it is decided.
    calls: HashMap<String, String>,
    /// Call id → its summary, from its decision to its result.
    running: HashMap<String, String>,
}

impl ProgressLines {
    /// The progress line `event` makes, if any (without the `bridle: ` prefix, unescaped).
    pub fn line(&mut self, event: &Event) -> Option<String> {
        match event {
            Event::ToolCall(call) => {
                self.calls.insert(
                    call.call_id.clone(),
                    call_summary(&call.name, &call.arguments, 72),
                );
                None
            }
            Event::ToolDecision {
                call_id,
                decision,
                by,
            } => {
                let call = self
                    .calls
                    .remove(call_id)
                    .unwrap_or_else(|| format!("call {call_id}"));
                // An approval's reason (an escalation's whole account of it) was just shown
                // with its question: the line keeps its start. Other reasons stay whole.
                let by = match by
                    .strip_prefix("approved (")
                    .and_then(|r| r.strip_suffix(')'))
                {
                    Some(reason) => format!("approved ({})", super::summary::cut(reason, 120)),
                    None => by.clone(),
                };
                let line = format!("{call} → {decision} ({by})");
                self.running.insert(call_id.clone(), call);
                Some(line)
            }
            Event::ExecDecision { call_id, exec } => {
                let call = self
                    .running
                    .get(call_id)
                    .cloned()
                    .unwrap_or_else(|| format!("call {call_id}"));
                if exec.between_calls {
                    return Some(format!("between calls → {}", exec.message));
                }
                Some(format!("{call} → {}", exec.message))
            }
            // A call that never reached a decision (its arguments were invalid): its line
            // says why it did not run.
            Event::ToolResult {
                call_id, content, ..
            } => {
                self.running.remove(call_id);
                self.calls.remove(call_id).map(|call| {
                    let why = content.split('\n').next().unwrap_or("");
                    format!("{call} → not run: {}", super::summary::cut(why, 120))
                })
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::{NewSession, SessionDir, ToolCall};
    use bridle_policy::Decision;

    /// A real session log with a turn that calls a tool, as the loop writes it.
    fn logged_session() -> (tempfile::TempDir, Vec<(u64, Event)>) {
        let dir = tempfile::tempdir().unwrap();
        let sessions = SessionDir::open(dir.path()).unwrap();
        let mut log = sessions
            .create(
                crate::log::Backend::Jsonl,
                &NewSession {
                    workspace: "/w".into(),
                    profile: "workspace-write".into(),
                    policy_digest: "d".into(),
                },
            )
            .unwrap();
        let call = ToolCall {
            call_id: "c1".into(),
            name: "bash".into(),
            arguments: r#"{"command":"ls -la"}"#.into(),
        };
        for event in [
            Event::TurnStart { turn: 0 },
            Event::UserMessage {
                id: None,
                text: "list".into(),
            },
            Event::StepStart { turn: 0, step: 0 },
            Event::AssistantChunk {
                text: "let me".into(),
                reasoning: true,
            },
            Event::AssistantChunk {
                text: "Listing.".into(),
                reasoning: false,
            },
            Event::AssistantMessage {
                text: "Listing.".into(),
                tool_calls: vec![call.clone()],
                reasoning: "let me".into(),
                reply: None,
            },
            Event::ToolCall(call),
            Event::ApprovalAsked {
                call_id: "c1".into(),
                question: "run `ls -la`?".into(),
            },
            Event::ApprovalDecided {
                call_id: "c1".into(),
                answer: "approved".into(),
                by: "a person at the terminal".into(),
            },
            Event::ToolDecision {
                call_id: "c1".into(),
                decision: Decision::Allow,
                by: "approval".into(),
            },
            Event::ToolResult {
                call_id: "c1".into(),
                ok: true,
                content: "a\nb".into(),
                sandbox: None,
            },
            Event::StepEnd { turn: 0, step: 0 },
            Event::PlanMode { active: true },
            Event::TurnEnd {
                turn: 0,
                reason: TurnEndReason::Aborted,
                detail: Some("the turn was cancelled (signal SIGINT)".into()),
                cancelled_by: Some("signal SIGINT".into()),
            },
        ] {
            log.append(event).unwrap();
        }
        let events = log.events().to_vec();
        (dir, events)
    }

    #[test]
    fn every_line_carries_the_version_its_name_and_its_log_seq() {
        let (_dir, events) = logged_session();
        let lines: Vec<Value> = events
            .iter()
            .filter_map(|(seq, e)| json_line(*seq, e))
            .collect();
        let names: Vec<&str> = lines.iter().map(|l| l["event"].as_str().unwrap()).collect();
        assert_eq!(
            names,
            [
                "session",
                "turn_start",
                "user_message",
                "step_start",
                "reasoning_delta",
                "text_delta",
                "assistant_message",
                "tool_call",
                "approval_asked",
                "approval_decided",
                "tool_decision",
                "tool_result",
                "step_end",
                "plan_mode",
                "turn_end",
            ]
        );
        for (line, (seq, _)) in lines.iter().zip(events.iter()) {
            assert_eq!(line["v"], JSON_VERSION);
            assert_eq!(line["seq"], *seq, "{line}");
        }
        let call = &lines[7];
        assert_eq!(call["arguments"], json!({"command": "ls -la"}));
        assert_eq!(lines[10]["decision"], "allow");
        assert_eq!(lines[11]["content"], "a\nb");
        assert_eq!(lines[14]["reason"], "aborted");
        assert_eq!(lines[14]["cancelled_by"], "signal SIGINT");
        // Compact: one line each.
        assert!(lines.iter().all(|l| !l.to_string().contains('\n')));
    }

    #[test]
    fn events_a_script_does_not_need_make_no_line() {
        let header = Event::RequestHeader(crate::log::RequestHeader {
            sections: vec![],
            tools: vec![],
            model: "script:x".into(),
        });
        assert_eq!(json_line(3, &header), None);
    }

    /// An input that never reached the model has its line, with the documented fields.
    #[test]
    fn a_dropped_input_has_its_line() {
        let dropped = |turn| Event::InputDropped {
            input_id: "input-2".into(),
            kind: "steer".into(),
            turn,
            reason: crate::log::DropReason::Cancelled,
        };
        assert_eq!(
            json_line(9, &dropped(Some(0))).unwrap(),
            json!({"v": 1, "event": "input_dropped", "seq": 9, "input_id": "input-2",
                "kind": "steer", "turn": 0, "reason": "cancelled"})
        );
        let idle = json_line(9, &dropped(None)).unwrap();
        assert!(idle.get("turn").is_none(), "{idle}");
    }

    #[test]
    fn malformed_arguments_are_given_verbatim() {
        let line = json_line(
            5,
            &Event::ToolCall(ToolCall {
                call_id: "c".into(),
                name: "bash".into(),
                arguments: "{oops".into(),
            }),
        )
        .unwrap();
        assert_eq!(line["arguments"], "{oops");
    }

    #[test]
    fn the_final_line_has_the_answer_and_no_seq() {
        let line = final_line("s1", 2, TurnEndReason::Completed, "done");
        assert_eq!(
            line,
            json!({"v": 1, "event": "final", "session": "s1", "turn": 2, "reason": "completed", "answer": "done"})
        );
        assert!(line.to_string().starts_with(r#"{"v":1,"event":"final""#));
    }

    #[test]
    fn an_approvals_long_reason_is_cut_in_its_progress_line() {
        let reason = format!(
            "asks to run with sandbox mode `danger-full-access`{}",
            " x".repeat(300)
        );
        let mut progress = ProgressLines::default();
        let call = Event::ToolCall(ToolCall {
            call_id: "c1".into(),
            name: "bash".into(),
            arguments: r#"{"command":"make"}"#.into(),
        });
        assert_eq!(progress.line(&call), None);
        let line = progress
            .line(&Event::ToolDecision {
                call_id: "c1".into(),
                decision: Decision::Allow,
                by: format!("approved ({reason})"),
            })
            .unwrap();
        assert!(
            line.starts_with("bash: make → allow (approved (asks to run with sandbox mode"),
            "{line}"
        );
        assert!(
            line.ends_with("…))") && line.chars().count() < 160,
            "{line}"
        );
        // Any other reason stays whole: a denial was shown in no question.
        let denial = format!(
            "write to `/w/{}` denied: outside every writable root",
            "d/".repeat(80)
        );
        let call = Event::ToolCall(ToolCall {
            call_id: "c2".into(),
            name: "write_file".into(),
            arguments: r#"{"path":"/w"}"#.into(),
        });
        assert_eq!(progress.line(&call), None);
        let line = progress
            .line(&Event::ToolDecision {
                call_id: "c2".into(),
                decision: Decision::Deny,
                by: denial.clone(),
            })
            .unwrap();
        assert!(line.ends_with(&format!("({denial})")), "{line}");
    }

    #[test]
    fn one_progress_line_per_call_names_the_call_and_its_decision() {
        let (_dir, events) = logged_session();
        let mut progress = ProgressLines::default();
        let lines: Vec<String> = events
            .iter()
            .filter_map(|(_, e)| progress.line(e))
            .collect();
        assert_eq!(lines, ["bash: ls -la → allow (approval)"]);
        let invalid = [
            Event::ToolCall(ToolCall {
                call_id: "c2".into(),
                name: "read_file".into(),
                arguments: "{oops".into(),
            }),
            Event::ToolResult {
                call_id: "c2".into(),
                ok: false,
                content: "invalid arguments: expected ident\nmore".into(),
                sandbox: None,
            },
        ];
        let lines: Vec<String> = invalid.iter().filter_map(|e| progress.line(e)).collect();
        assert_eq!(
            lines,
            ["read_file: {oops → not run: invalid arguments: expected ident"]
        );
    }

    /// An allowed call whose command had an exec refused says so on a line of its own.
    #[test]
    fn an_exec_refused_inside_an_allowed_call_has_its_own_progress_line() {
        let mut progress = ProgressLines::default();
        let message = "rule deny-git-push denied exec of /usr/bin/git push (pid 5)";
        let events = [
            Event::ToolCall(ToolCall {
                call_id: "c1".into(),
                name: "bash".into(),
                arguments: r#"{"command":"./push.sh"}"#.into(),
            }),
            Event::ToolDecision {
                call_id: "c1".into(),
                decision: Decision::Allow,
                by: "no rule matched".into(),
            },
            Event::ExecDecision {
                call_id: "c1".into(),
                exec: bridle_exec::supervised::ExecDecision {
                    pid: 5,
                    program: "/usr/bin/git".into(),
                    argv: vec!["git".into(), "push".into()],
                    decision: Decision::Deny,
                    rule: Some("deny-git-push".into()),
                    reason: "r".into(),
                    outcome: "refused".into(),
                    same_as: Vec::new(),
                    ancestry: Vec::new(),
                    answer: None,
                    message: message.into(),
                    between_calls: false,
                },
            },
            Event::ToolResult {
                call_id: "c1".into(),
                ok: false,
                content: "pushed=126".into(),
                sandbox: None,
            },
        ];
        let lines: Vec<String> = events.iter().filter_map(|e| progress.line(e)).collect();
        assert_eq!(
            lines,
            [
                "bash: ./push.sh → allow (no rule matched)".to_owned(),
                format!("bash: ./push.sh → {message}"),
            ]
        );
    }

    /// The seam `bridle run` renders from: every event appended after `watch`, in order, with
    /// the seq the log gave it, and nothing from before.
    #[test]
    fn the_log_watch_sees_every_appended_event_in_order_with_its_seq() {
        let dir = tempfile::tempdir().unwrap();
        let sessions = SessionDir::open(dir.path()).unwrap();
        let mut log = sessions
            .create(
                crate::log::Backend::Sqlite,
                &NewSession {
                    workspace: "/w".into(),
                    profile: "p".into(),
                    policy_digest: "d".into(),
                },
            )
            .unwrap();
        log.append(Event::TurnStart { turn: 0 }).unwrap();
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let sink = std::sync::Arc::clone(&seen);
        log.watch(move |seq, event| sink.lock().unwrap().push((seq, event.clone())));
        log.append(Event::StepStart { turn: 0, step: 0 }).unwrap();
        log.append(Event::StepEnd { turn: 0, step: 0 }).unwrap();
        let logged: Vec<(u64, Event)> = log.events()[2..].to_vec();
        assert_eq!(*seen.lock().unwrap(), logged);
        assert_eq!(logged[0].0, 2);
    }
}
