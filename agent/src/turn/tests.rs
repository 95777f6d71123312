//! What a step costs the loop, kept from coming back: the model answers every request of an
//! agent on one thread (none started per request), the conversation is handed to it shared
//! (extended in place, never copied per request), and that thread neither holds up a cancel
//! nor outlives a model that panicked.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::{Agent, AgentConfig};
use crate::log::{SessionLog, TurnEndReason};
use crate::model::{Chunk, FinishReason, Model, ModelError, ModelRequest};
use crate::tools::{Notes, ToolHost, ToolNote, ToolOutcome};

/// One tool, `noop`, allowed and doing nothing.
struct Noop;

impl ToolHost for Noop {
    fn schemas(&self) -> Vec<serde_json::Value> {
        vec![serde_json::json!({"name": "noop", "parameters": {"type": "object"}})]
    }

    fn concurrency_safe(&self, _name: &str, _arguments: &str) -> bool {
        false
    }

    fn call(&self, _call: &crate::log::ToolCall, note: &mut Notes<'_>) -> ToolOutcome {
        let _ = note(ToolNote::Decided {
            decision: bridle_policy::Decision::Allow,
            by: "test".into(),
        });
        ToolOutcome {
            ok: true,
            content: "ok".into(),
            sandbox: None,
        }
    }
}

/// What a request looked like to the model: the thread it was answered on, where its
/// messages were and how many.
type Seen = (std::thread::ThreadId, usize, usize);

/// Calls `noop` on every request but each third, which it answers with text; notes every
/// request.
struct Probe {
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl Model for Probe {
    fn route(&self) -> String {
        "script:probe".into()
    }

    fn stream(
        &mut self,
        request: &ModelRequest,
        on_chunk: &mut dyn FnMut(Chunk),
    ) -> Result<(), ModelError> {
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        seen.push((
            std::thread::current().id(),
            Arc::as_ptr(&request.messages) as usize,
            request.messages.len(),
        ));
        if seen.len().is_multiple_of(3) {
            on_chunk(Chunk::Text("done".into()));
            on_chunk(Chunk::Finish(FinishReason::Stop));
        } else {
            on_chunk(Chunk::ToolCallDelta {
                index: 0,
                id: None,
                name: Some("noop".into()),
                arguments: "{}".into(),
            });
            on_chunk(Chunk::Finish(FinishReason::ToolCalls));
        }
        Ok(())
    }
}

fn new_log(dir: &std::path::Path) -> SessionLog {
    crate::log::scratch_session(dir)
}

/// Two turns of three steps each against [`Probe`]; what it saw.
fn probed() -> Vec<Seen> {
    let tmp = tempfile::tempdir().unwrap();
    let seen = Arc::default();
    let model = Probe {
        seen: Arc::clone(&seen),
    };
    let mut agent = Agent::new(
        new_log(tmp.path()),
        Box::new(model),
        &Noop,
        AgentConfig::default(),
    )
    .unwrap();
    for input in ["one", "two"] {
        let report = agent.run_turn(input).unwrap();
        assert_eq!(report.reason, TurnEndReason::Completed, "{report:?}");
    }
    drop(agent);
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 6, "{seen:?}");
    seen
}

#[test]
fn every_request_of_an_agent_is_answered_on_one_model_thread() {
    let seen = probed();
    let model_thread = seen[0].0;
    assert_ne!(model_thread, std::thread::current().id());
    assert!(
        seen.iter().all(|(thread, ..)| *thread == model_thread),
        "{seen:?}"
    );
}

#[test]
fn a_request_shares_the_conversation_the_loop_extends_in_place() {
    let seen = probed();
    // One list of messages, grown step by step: never copied for a request.
    assert!(seen.iter().all(|(_, at, _)| *at == seen[0].1), "{seen:?}");
    let lengths: Vec<usize> = seen.iter().map(|(.., len)| *len).collect();
    assert_eq!(lengths, vec![1, 3, 5, 7, 9, 11]);
}

/// Never answers: blocks until the test lets it go.
struct Stuck {
    started: Arc<AtomicBool>,
    release: std::sync::mpsc::Receiver<()>,
}

impl Model for Stuck {
    fn route(&self) -> String {
        "script:stuck".into()
    }

    fn stream(
        &mut self,
        _request: &ModelRequest,
        _on_chunk: &mut dyn FnMut(Chunk),
    ) -> Result<(), ModelError> {
        self.started.store(true, Ordering::SeqCst);
        let _ = self.release.recv();
        Ok(())
    }
}

#[test]
fn a_cancel_abandons_a_model_that_never_answers_without_waiting_for_it() {
    let tmp = tempfile::tempdir().unwrap();
    let started = Arc::new(AtomicBool::new(false));
    let (release, stuck) = std::sync::mpsc::channel();
    let model = Stuck {
        started: Arc::clone(&started),
        release: stuck,
    };
    let flag = Arc::clone(&started);
    let config = AgentConfig {
        cancel: Some(Arc::new(move || {
            flag.load(Ordering::SeqCst).then(|| "the test".to_owned())
        })),
        ..AgentConfig::default()
    };
    let begun = Instant::now();
    let mut agent = Agent::new(new_log(tmp.path()), Box::new(model), &Noop, config).unwrap();
    let report = agent.run_turn("go").unwrap();
    assert_eq!(report.reason, TurnEndReason::Aborted, "{report:?}");
    // The model went with the abandoned request; dropping the agent does not wait for it.
    drop(agent);
    assert!(
        begun.elapsed() < Duration::from_secs(5),
        "{:?}",
        begun.elapsed()
    );
    release.send(()).unwrap();
}

/// Panics on every request.
struct Exploding;

impl Model for Exploding {
    fn route(&self) -> String {
        "script:exploding".into()
    }

    fn stream(
        &mut self,
        _request: &ModelRequest,
        _on_chunk: &mut dyn FnMut(Chunk),
    ) -> Result<(), ModelError> {
        panic!("the model blew up");
    }
}

#[test]
fn a_model_that_panics_ends_the_turn_as_error_and_every_later_one_too() {
    let tmp = tempfile::tempdir().unwrap();
    let mut agent = Agent::new(
        new_log(tmp.path()),
        Box::new(Exploding),
        &Noop,
        AgentConfig::default(),
    )
    .unwrap();
    for input in ["one", "two"] {
        let report = agent.run_turn(input).unwrap();
        assert_eq!(report.reason, TurnEndReason::Error, "{report:?}");
        let error = report.error.unwrap_or_default();
        assert!(error.contains("panicked"), "{error}");
    }
}
