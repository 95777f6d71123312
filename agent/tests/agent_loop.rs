//! The turn/step loop against the scripted model and a tool host that follows the pipeline
//! contract (decisions reported before a call runs). What the loop records is checked in the
//! session log, and every request the model got is rebuilt from the log alone.

#![cfg(test)]

use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use bridle_agent::log::{
    Backend, Event, NewSession, PromptSection, Reply, SessionDir, ToolCall, TurnEndReason, Usage,
};
use bridle_agent::model::script::{ScriptModel, ScriptedArguments, ScriptedCall, ScriptedResponse};
use bridle_agent::model::{Chunk, FinishReason, Model, ModelError, ModelRequest};
use bridle_agent::tools::{Notes, ToolHost, ToolNote, ToolOutcome};
use bridle_agent::transcript::{derive_messages, header_in_force};
use bridle_agent::{Agent, AgentConfig};
use bridle_policy::Decision;
use pretty_assertions::assert_eq;

/// Tools: `read` (concurrency-safe; with `"meet": true` it waits for a second `read` to
/// arrive, which only happens when the two run side by side), `write` (denied for `secret`),
/// `ask` (the approval seam rejects it).
struct Host {
    /// Set by the `cancel` tool, as a signal handler would.
    cancel: Arc<std::sync::atomic::AtomicBool>,
    meet: (Mutex<u32>, Condvar),
    ran: Mutex<Vec<String>>,
}

impl Host {
    fn new() -> Self {
        Self {
            cancel: Arc::default(),
            meet: (Mutex::new(0), Condvar::new()),
            ran: Mutex::new(Vec::new()),
        }
    }
}

impl ToolHost for Host {
    fn schemas(&self) -> Vec<serde_json::Value> {
        ["read", "write", "ask"]
            .iter()
            .map(|n| serde_json::json!({"name": n, "parameters": {"type": "object"}}))
            .collect()
    }

    fn concurrency_safe(&self, name: &str, _arguments: &str) -> bool {
        name == "read"
    }

    fn call(&self, call: &bridle_agent::log::ToolCall, note: &mut Notes<'_>) -> ToolOutcome {
        let (name, arguments) = (call.name.as_str(), call.arguments.as_str());
        let fail = |content: String| ToolOutcome {
            ok: false,
            content,
            sandbox: None,
        };
        let args: serde_json::Value = match serde_json::from_str(arguments) {
            Ok(v) => v,
            Err(e) => return fail(format!("invalid arguments for {name}: {e}")),
        };
        let path = args["path"].as_str().unwrap_or("").to_owned();
        if name == "cancel" {
            self.cancel.store(true, std::sync::atomic::Ordering::SeqCst);
        }
        if name == "explode" {
            let _ = note(ToolNote::Decided {
                decision: Decision::Allow,
                by: "test".into(),
            });
            panic!("the tool blew up");
        }
        let (decision, by) = match (name, path.as_str()) {
            ("write", "secret") => (Decision::Deny, "rule no-secrets"),
            ("ask", _) => {
                if note(ToolNote::ApprovalAsked {
                    question: format!("run ask on {path}?"),
                })
                .is_err()
                {
                    return fail("not recorded".into());
                }
                let _ = note(ToolNote::ApprovalDecided {
                    answer: "rejected".into(),
                    by: "test answerer".into(),
                });
                (Decision::Deny, "approval rejected")
            }
            _ => (Decision::Allow, "mode workspace-write"),
        };
        if note(ToolNote::Decided {
            decision,
            by: by.into(),
        })
        .is_err()
        {
            return fail("not recorded".into());
        }
        if decision != Decision::Allow {
            return fail(format!("denied by {by}"));
        }
        if args["meet"] == true {
            // Both reads must be running for either to get past this point.
            let (count, arrived) = &self.meet;
            let mut n = count.lock().unwrap();
            *n += 1;
            arrived.notify_all();
            let (n, timeout) = arrived
                .wait_timeout_while(n, Duration::from_secs(5), |n| *n < 2)
                .unwrap();
            if timeout.timed_out() && *n < 2 {
                return fail("the two reads did not run at the same time".into());
            }
        }
        self.ran.lock().unwrap().push(format!("{name} {path}"));
        ToolOutcome {
            ok: true,
            content: format!("{name} {path}: done"),
            sandbox: Some(serde_json::json!({"mode": "workspace-write"})),
        }
    }
}

fn call(name: &str, args: serde_json::Value) -> ScriptedCall {
    ScriptedCall {
        name: name.into(),
        arguments: ScriptedArguments::Mapping(args.as_object().unwrap().clone()),
    }
}

fn answer(text: &str, calls: Vec<ScriptedCall>) -> ScriptedResponse {
    ScriptedResponse {
        text: Some(text.into()),
        tool_calls: calls,
    }
}

fn sections() -> Vec<PromptSection> {
    vec![PromptSection {
        name: "base".into(),
        order: 10,
        text: "You are a careful coding agent.".into(),
    }]
}

/// A new session in `dir`.
fn new_log(dir: &SessionDir, backend: Backend) -> bridle_agent::log::SessionLog {
    dir.create(
        backend,
        &NewSession {
            workspace: "/w".into(),
            profile: "workspace-write".into(),
            policy_digest: "d".into(),
        },
    )
    .unwrap()
}

struct Run {
    _tmp: tempfile::TempDir,
    dir: SessionDir,
    id: String,
    requests: Vec<ModelRequest>,
    reports: Vec<bridle_agent::TurnReport>,
    host: Host,
}

fn run(script: Vec<ScriptedResponse>, inputs: &[&str]) -> Run {
    let tmp = tempfile::tempdir().unwrap();
    let dir = SessionDir::open(tmp.path()).unwrap();
    let log = new_log(&dir, Backend::Jsonl);
    let id = log.id().to_owned();
    let model = ScriptModel::new("script:test.yaml", script).recorded();
    let requests = Arc::clone(&model.requests);
    let host = Host::new();
    let mut reports = Vec::new();
    {
        let mut agent = Agent::new(
            log,
            Box::new(model),
            &host,
            AgentConfig {
                sections: sections(),
                ..AgentConfig::default()
            },
        )
        .unwrap();
        for input in inputs {
            reports.push(agent.run_turn(input).unwrap());
        }
    }
    let requests = requests.lock().unwrap().clone();
    Run {
        _tmp: tmp,
        dir,
        id,
        requests,
        reports,
        host,
    }
}

fn events(r: &Run) -> Vec<Event> {
    r.dir
        .read(&r.id)
        .unwrap()
        .iter()
        .filter_map(|rec| rec.event().unwrap())
        .collect()
}

fn kinds(events: &[Event]) -> Vec<&str> {
    events
        .iter()
        .map(Event::kind)
        .filter(|k| *k != "assistant/chunk")
        .collect()
}

#[test]
fn a_turn_without_tool_calls_completes_with_the_lifecycle_logged() {
    let r = run(vec![answer("All done here.", vec![])], &["say done"]);
    assert_eq!(r.reports[0].reason, TurnEndReason::Completed);
    assert_eq!(r.reports[0].answer, "All done here.");
    let events = events(&r);
    assert_eq!(
        kinds(&events),
        vec![
            "session/header",
            "turn/start",
            "user/message",
            "step/start",
            "request/header",
            "assistant/message",
            "step/end",
            "turn/end",
        ]
    );
    // The answer streamed in pieces, each logged.
    let chunks: String = events
        .iter()
        .filter_map(|e| match e {
            Event::AssistantChunk { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(chunks, "All done here.");
    assert_eq!(r.dir.verify(&r.id).unwrap().problem, None);
}

#[test]
fn tool_calls_are_decided_run_and_answered_in_the_models_order() {
    let r = run(
        vec![
            answer(
                "Looking.",
                vec![
                    call("write", serde_json::json!({"path": "notes.md"})),
                    call("write", serde_json::json!({"path": "secret"})),
                    call("ask", serde_json::json!({"path": "x"})),
                ],
            ),
            answer("Wrote notes; the rest was refused.", vec![]),
        ],
        &["do things"],
    );
    assert_eq!(r.reports[0].reason, TurnEndReason::Completed);
    assert_eq!(*r.host.ran.lock().unwrap(), vec!["write notes.md"]);
    let events = events(&r);
    let step0: Vec<&str> = kinds(&events)[5..18].to_vec();
    assert_eq!(
        step0,
        vec![
            "assistant/message",
            "tool/call",
            "tool/decision",
            "tool/result",
            "tool/call",
            "tool/decision",
            "tool/result",
            "tool/call",
            "approval/asked",
            "approval/decided",
            "tool/decision",
            "tool/result",
            "step/end",
        ]
    );
    let results: Vec<(String, bool, String)> = events
        .iter()
        .filter_map(|e| match e {
            Event::ToolResult {
                call_id,
                ok,
                content,
                ..
            } => Some((call_id.clone(), *ok, content.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(results.len(), 3);
    assert!(
        results[0].1 && !results[1].1 && !results[2].1,
        "{results:?}"
    );
    assert_eq!(results[1].2, "denied by rule no-secrets");
    // The second request carries the answer and the three results.
    let messages = &r.requests[1].messages;
    assert_eq!(messages.len(), 5, "{messages:?}");
    assert!(
        matches!(&messages[1], bridle_agent::model::Message::Assistant { tool_calls, .. } if tool_calls.len() == 3)
    );
}

#[test]
fn every_request_is_rebuilt_from_the_log_alone() {
    let r = run(
        vec![
            answer("", vec![call("read", serde_json::json!({"path": "a"}))]),
            answer("first turn done", vec![]),
            answer("", vec![call("write", serde_json::json!({"path": "b"}))]),
            answer("second turn done", vec![]),
        ],
        &["one", "two"],
    );
    let events = events(&r);
    assert_eq!(r.requests.len(), 4);
    // Each request, rebuilt from the events before its step's first model output.
    let mut rebuilt = Vec::new();
    for (i, e) in events.iter().enumerate() {
        if matches!(e, Event::StepStart { .. }) {
            let end = events[i..]
                .iter()
                .position(|e| {
                    matches!(
                        e,
                        Event::AssistantChunk { .. } | Event::AssistantMessage { .. }
                    )
                })
                .map_or(events.len(), |p| i + p);
            let prefix = &events[..end];
            let header = header_in_force(prefix).unwrap();
            rebuilt.push(ModelRequest {
                system: header.sections,
                messages: derive_messages(prefix).into(),
                tools: header.tools,
            });
        }
    }
    assert_eq!(rebuilt, r.requests);
    // The header was logged once: nothing about it changed.
    let headers = events
        .iter()
        .filter(|e| matches!(e, Event::RequestHeader(_)))
        .count();
    assert_eq!(headers, 1);
    // Turn numbers follow each other.
    assert_eq!(r.reports[1].turn, 1);
}

#[test]
fn concurrency_safe_calls_run_side_by_side_and_others_alone() {
    let r = run(
        vec![
            answer(
                "",
                vec![
                    call("read", serde_json::json!({"path": "a", "meet": true})),
                    call("read", serde_json::json!({"path": "b", "meet": true})),
                    call("write", serde_json::json!({"path": "c"})),
                ],
            ),
            answer("ok", vec![]),
        ],
        &["read two files"],
    );
    assert_eq!(r.reports[0].reason, TurnEndReason::Completed);
    let ran = r.host.ran.lock().unwrap().clone();
    assert_eq!(ran.len(), 3, "{:?}", events(&r));
    assert_eq!(ran[2], "write c", "the write waits for both reads");
    // Results are logged in the model's order whatever order the reads finished in.
    let events = events(&r);
    let ids: Vec<String> = events
        .iter()
        .filter_map(|e| match e {
            Event::ToolResult { call_id, .. } => Some(call_id.clone()),
            _ => None,
        })
        .collect();
    let called: Vec<String> = events
        .iter()
        .filter_map(|e| match e {
            Event::ToolCall(c) => Some(c.call_id.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(ids, called);
}

#[test]
fn malformed_arguments_reach_the_pipeline_verbatim_and_come_back_as_an_error() {
    let r = run(
        vec![
            answer(
                "",
                vec![ScriptedCall {
                    name: "write".into(),
                    arguments: ScriptedArguments::Raw(r#"{"path": "a""#.into()),
                }],
            ),
            answer("sorry", vec![]),
        ],
        &["go"],
    );
    let events = events(&r);
    let call = events.iter().find_map(|e| match e {
        Event::ToolCall(c) => Some(c.clone()),
        _ => None,
    });
    assert_eq!(call.unwrap().arguments, r#"{"path": "a""#);
    let result = events.iter().find_map(|e| match e {
        Event::ToolResult { ok, content, .. } => Some((*ok, content.clone())),
        _ => None,
    });
    let (ok, content) = result.unwrap();
    assert!(
        !ok && content.starts_with("invalid arguments for write"),
        "{content}"
    );
    assert!(r.host.ran.lock().unwrap().is_empty());
}

/// A model that repeats call ids, fails, or stops at its token limit.
struct Odd {
    answers: Vec<Result<(Vec<Chunk>, FinishReason), ModelError>>,
}

impl Model for Odd {
    fn route(&self) -> String {
        "script:odd".into()
    }

    fn stream(
        &mut self,
        _request: &ModelRequest,
        on_chunk: &mut dyn FnMut(Chunk),
    ) -> Result<(), ModelError> {
        let (chunks, finish) = self.answers.remove(0)?;
        for c in chunks {
            on_chunk(c);
        }
        on_chunk(Chunk::Finish(finish));
        Ok(())
    }
}

fn run_odd(answers: Vec<Result<(Vec<Chunk>, FinishReason), ModelError>>) -> (Run, Vec<Event>) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = SessionDir::open(tmp.path()).unwrap();
    let log = new_log(&dir, Backend::Sqlite);
    let id = log.id().to_owned();
    let host = Host::new();
    let report = {
        let flag = Arc::clone(&host.cancel);
        let config = AgentConfig {
            cancel: Some(Arc::new(move || {
                flag.load(std::sync::atomic::Ordering::SeqCst)
                    .then(|| "the cancel tool".to_owned())
            })),
            ..AgentConfig::default()
        };
        let mut agent = Agent::new(log, Box::new(Odd { answers }), &host, config).unwrap();
        agent.run_turn("go").unwrap()
    };
    let r = Run {
        _tmp: tmp,
        dir,
        id,
        requests: Vec::new(),
        reports: vec![report],
        host,
    };
    let events = events(&r);
    (r, events)
}

/// The ids of the calls recorded in `events`, in order.
fn call_ids(events: &[Event]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::ToolCall(ToolCall { call_id, .. }) => Some(call_id.clone()),
            _ => None,
        })
        .collect()
}

fn delta(index: usize, id: &str, name: &str, args: &str) -> Chunk {
    Chunk::ToolCallDelta {
        index,
        id: Some(id.into()),
        name: Some(name.into()),
        arguments: args.into(),
    }
}

#[test]
fn repeated_or_missing_call_ids_are_made_unique() {
    let (r, events) = run_odd(vec![
        Ok((
            vec![
                delta(0, "c", "read", r#"{"path":"a"}"#),
                delta(1, "c", "read", r#"{"path":"b"}"#),
                delta(2, "", "read", r#"{"path":"c"}"#),
            ],
            FinishReason::ToolCalls,
        )),
        Ok((vec![], FinishReason::Stop)),
    ]);
    assert_eq!(r.reports[0].reason, TurnEndReason::Completed);
    let ids = call_ids(&events);
    assert_eq!(ids.len(), 3);
    assert_eq!(ids[0], "c");
    assert!(
        ids.iter().collect::<std::collections::HashSet<_>>().len() == 3,
        "{ids:?}"
    );
    let results = events
        .iter()
        .filter(|e| matches!(e, Event::ToolResult { .. }))
        .count();
    assert_eq!(results, 3);
}

#[test]
fn a_model_error_ends_the_turn_as_error_and_a_cut_answer_as_max_tokens() {
    let (r, events) = run_odd(vec![Err(ModelError::RateLimit {
        route: "script:odd".into(),
        detail: "slow down".into(),
    })]);
    assert_eq!(r.reports[0].reason, TurnEndReason::Error);
    assert!(
        r.reports[0]
            .error
            .as_deref()
            .unwrap()
            .contains("rate limited")
    );
    // The error itself is logged with the end, so a reviewer can tell why.
    assert_eq!(
        events.last(),
        Some(&Event::TurnEnd {
            turn: 0,
            reason: TurnEndReason::Error,
            detail: Some("model script:odd: rate limited: slow down".into()),
            cancelled_by: None,
        })
    );
    let (r, _) = run_odd(vec![Ok((
        vec![Chunk::Text("half an ans".into())],
        FinishReason::Length,
    ))]);
    assert_eq!(r.reports[0].reason, TurnEndReason::MaxTokens);
    assert_eq!(r.reports[0].answer, "half an ans");
}

#[test]
fn a_turn_that_never_stops_calling_tools_ends_at_the_step_limit() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = SessionDir::open(tmp.path()).unwrap();
    let log = new_log(&dir, Backend::Jsonl);
    let script = (0..5)
        .map(|_| answer("", vec![call("read", serde_json::json!({"path": "a"}))]))
        .collect();
    let host = Host::new();
    let mut agent = Agent::new(
        log,
        Box::new(ScriptModel::new("script:loop", script)),
        &host,
        AgentConfig {
            max_steps: 3,
            ..AgentConfig::default()
        },
    )
    .unwrap();
    let report = agent.run_turn("loop").unwrap();
    assert_eq!(report.reason, TurnEndReason::Aborted);
    assert!(report.error.unwrap().contains("3 steps"));
    assert!(!agent.log().progress().in_turn());
}

#[test]
fn a_resumed_session_continues_its_turn_numbers() {
    let r = run(vec![answer("one", vec![])], &["first"]);
    let (log, _) = r.dir.resume(&r.id).unwrap();
    let host = Host::new();
    let mut agent = Agent::new(
        log,
        Box::new(ScriptModel::new(
            "script:again",
            vec![answer("two", vec![])],
        )),
        &host,
        AgentConfig::default(),
    )
    .unwrap();
    let report = agent.run_turn("second").unwrap();
    assert_eq!(report.turn, 1);
    drop(agent);
    // The model route changed, so a new header was logged.
    let events = events(&r);
    let headers: Vec<String> = events
        .iter()
        .filter_map(|e| match e {
            Event::RequestHeader(h) => Some(h.model.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(headers, vec!["script:test.yaml", "script:again"]);
}

#[test]
fn calls_of_an_answer_cut_at_the_token_limit_are_answered_not_run() {
    let (r, events) = run_odd(vec![Ok((
        vec![delta(0, "c1", "write", r#"{"path":"a"}"#)],
        FinishReason::Length,
    ))]);
    assert_eq!(r.reports[0].reason, TurnEndReason::MaxTokens);
    assert!(r.host.ran.lock().unwrap().is_empty());
    let messages = derive_messages(&events);
    let Some(bridle_agent::model::Message::Tool { call_id, content }) = messages.last() else {
        panic!("{messages:?}");
    };
    assert_eq!(call_id, "c1");
    assert!(content.contains("token limit"), "{content}");
    // The timeline puts the answer under the call, which was never dispatched, and says why
    // the turn ended.
    let events = r.dir.read_events(&r.id).unwrap();
    let view = bridle_agent::log::timeline(events.iter().map(|(s, t, e)| (*s, t.as_str(), e)));
    let [bridle_agent::log::Entry::Turn(turn)] = view.entries.as_slice() else {
        panic!("{view:?}");
    };
    let call = &turn.steps[0].calls[0];
    assert!(!call.dispatched);
    assert!(call.result.as_deref().unwrap().contains("token limit"));
    assert_eq!(
        turn.detail.as_deref(),
        Some("the model's answer was cut at its output token limit")
    );
}

#[test]
fn a_generated_call_id_never_repeats_one_the_model_sent() {
    // The generated id for the second call would be `bridle_5_1` (event 5, call 1).
    let (_, events) = run_odd(vec![
        Ok((
            vec![
                delta(0, "bridle_5_1", "read", r#"{"path":"a"}"#),
                delta(1, "", "read", r#"{"path":"b"}"#),
            ],
            FinishReason::ToolCalls,
        )),
        Ok((vec![], FinishReason::Stop)),
    ]);
    let ids = call_ids(&events);
    assert_eq!(ids.len(), 2);
    assert_ne!(ids[0], ids[1], "{ids:?}");
}

#[test]
fn a_tool_that_panics_fails_its_call_and_the_turn_goes_on() {
    let (r, events) = run_odd(vec![
        Ok((
            vec![delta(0, "c1", "explode", "{}")],
            FinishReason::ToolCalls,
        )),
        Ok((vec![Chunk::Text("recovered".into())], FinishReason::Stop)),
    ]);
    assert_eq!(r.reports[0].reason, TurnEndReason::Completed);
    assert_eq!(r.reports[0].answer, "recovered");
    let result = events.iter().find_map(|e| match e {
        Event::ToolResult { ok, content, .. } => Some((*ok, content.clone())),
        _ => None,
    });
    let (ok, content) = result.unwrap();
    assert!(!ok && content.contains("panicked"), "{content}");
}

#[test]
fn a_cancelled_turn_answers_calls_not_started_and_ends_aborted() {
    let (r, events) = run_odd(vec![
        Ok((
            vec![
                delta(0, "c1", "cancel", "{}"),
                delta(1, "c2", "write", r#"{"path":"a"}"#),
            ],
            FinishReason::ToolCalls,
        )),
        Ok((vec![Chunk::Text("not asked".into())], FinishReason::Stop)),
    ]);
    assert_eq!(r.reports[0].reason, TurnEndReason::Aborted);
    assert_eq!(*r.host.ran.lock().unwrap(), vec!["cancel "]);
    let results: Vec<(String, String)> = events
        .iter()
        .filter_map(|e| match e {
            Event::ToolResult {
                call_id, content, ..
            } => Some((call_id.clone(), content.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(results.len(), 2);
    assert!(
        results[1].1.contains("aborted before dispatch"),
        "{results:?}"
    );
    assert_eq!(
        events.last(),
        Some(&Event::TurnEnd {
            turn: 0,
            reason: TurnEndReason::Aborted,
            detail: Some("the turn was cancelled (the cancel tool)".into()),
            cancelled_by: Some("the cancel tool".into()),
        })
    );
    // The model was asked once: no step starts after the cancel.
    let steps = events
        .iter()
        .filter(|e| matches!(e, Event::StepStart { .. }))
        .count();
    assert_eq!(steps, 1);
}

#[test]
fn the_models_reasoning_and_report_are_logged_and_sent_back_from_the_log() {
    let (r, events) = run_odd(vec![
        Ok((
            vec![
                Chunk::Model("odd-2025".into()),
                Chunk::Reasoning("think ".into()),
                Chunk::Reasoning("hard".into()),
                delta(0, "c1", "read", r#"{"path":"a"}"#),
                Chunk::Usage {
                    input: 30,
                    output: 5,
                },
            ],
            FinishReason::ToolCalls,
        )),
        Ok((vec![Chunk::Text("done".into())], FinishReason::Stop)),
    ]);
    assert_eq!(r.reports[0].reason, TurnEndReason::Completed);
    let answers: Vec<(String, Option<Reply>)> = events
        .iter()
        .filter_map(|e| match e {
            Event::AssistantMessage {
                reasoning, reply, ..
            } => Some((reasoning.clone(), reply.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(
        answers,
        vec![
            (
                "think hard".to_owned(),
                Some(Reply {
                    model: Some("odd-2025".into()),
                    finish: Some("tool_calls".into()),
                    usage: Some(Usage {
                        prompt_tokens: 30,
                        completion_tokens: 5
                    }),
                })
            ),
            (
                String::new(),
                Some(Reply {
                    model: None,
                    finish: Some("stop".into()),
                    usage: None,
                })
            ),
        ]
    );
    // The second request, derived from the log alone, carries the reasoning with its call.
    let messages = derive_messages(&events);
    let Some(bridle_agent::model::Message::Assistant {
        tool_calls,
        reasoning,
        ..
    }) = messages.get(1)
    else {
        panic!("{messages:?}");
    };
    assert_eq!((tool_calls.len(), reasoning.as_str()), (1, "think hard"));
}
