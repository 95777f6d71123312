//! The live session: inputs, receipts, the committed-event feed, listeners and commands.

use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::*;
use crate::log::TurnEndReason;
use crate::model::script::ScriptModel;
use crate::tools::{Notes, ToolOutcome};

/// One tool, `wait`, that says it started and then waits to be released; a plugin's tools
/// (plan mode's) are offered beside it and answer that they do nothing here.
struct Gate {
    started: Mutex<Sender<()>>,
    release: Mutex<Receiver<()>>,
    added: Mutex<Vec<String>>,
}

impl ToolHost for Gate {
    fn schemas(&self) -> Vec<serde_json::Value> {
        let mut schemas =
            vec![serde_json::json!({"name": "wait", "parameters": {"type": "object"}})];
        for name in self.added.lock().unwrap().iter() {
            schemas.push(serde_json::json!({"name": name, "parameters": {"type": "object"}}));
        }
        schemas
    }

    fn add_tool(&self, _owner: &str, tool: Arc<dyn bridle_exec::tool::Tool>) -> Result<(), String> {
        self.added.lock().unwrap().push(tool.name().to_owned());
        Ok(())
    }

    fn concurrency_safe(&self, _name: &str, _arguments: &str) -> bool {
        false
    }

    fn call(&self, _call: &crate::log::ToolCall, note: &mut Notes<'_>) -> ToolOutcome {
        let _ = note(crate::tools::ToolNote::Decided {
            decision: bridle_policy::Decision::Allow,
            by: "test".into(),
        });
        let _ = self.started.lock().unwrap().send(());
        let _ = self
            .release
            .lock()
            .unwrap()
            .recv_timeout(Duration::from_secs(10));
        ToolOutcome {
            ok: true,
            content: "waited".into(),
            sandbox: None,
        }
    }
}

struct Fixture {
    _dir: tempfile::TempDir,
    session: Session,
    started: Receiver<()>,
    release: Sender<()>,
}

fn fixture(script: &str, config: SessionConfig) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let log = crate::log::scratch_session(dir.path());
    let model = ScriptModel::new("script:t", ScriptModel::parse("t", script).unwrap());
    let (started_tx, started) = channel();
    let (release, release_rx) = channel();
    let host = Arc::new(Gate {
        started: Mutex::new(started_tx),
        release: Mutex::new(release_rx),
        added: Mutex::default(),
    });
    let session = Session::start(log, Box::new(model), host, config);
    Fixture {
        _dir: dir,
        session,
        started,
        release,
    }
}

const WAIT_THEN_DONE: &str = "- tool_calls: [{name: wait, arguments: {}}]\n- text: done\n";

fn events(log: &SessionLog) -> Vec<Event> {
    log.events().iter().map(|(_, e)| e.clone()).collect()
}

#[test]
fn steering_while_a_turn_runs_joins_the_next_step_and_gets_a_receipt() {
    let f = fixture(WAIT_THEN_DONE, SessionConfig::default());
    let mut reports = f.session.reports().unwrap();
    let prompt = f.session.prompt("go").unwrap();
    f.started.recv_timeout(Duration::from_secs(10)).unwrap();
    // A turn runs: a second prompt is refused, steering is taken.
    assert_eq!(
        f.session.prompt("again"),
        Err(SessionError::Busy { turn: 0 })
    );
    let steer = f.session.steer("also check the tests").unwrap();
    assert_ne!(steer, prompt);
    f.release.send(()).unwrap();
    let report = reports.blocking_recv().unwrap();
    assert_eq!(report.reason, TurnEndReason::Completed);
    let log = f.session.close().unwrap();
    let events = events(&log);
    let at = |wanted: &Event| {
        events
            .iter()
            .position(|e| e == wanted)
            .unwrap_or_else(|| panic!("{wanted:?} missing: {events:#?}"))
    };
    let step1 = at(&Event::StepStart { turn: 0, step: 1 });
    let message = at(&Event::UserMessage {
        id: Some(steer.clone()),
        text: "also check the tests".into(),
    });
    let receipt = at(&Event::InputIncluded {
        input_id: steer.clone(),
        turn: 0,
        step: 1,
        carried: false,
    });
    assert!(step1 < message && message < receipt, "{events:#?}");
    at(&Event::InputIncluded {
        input_id: prompt,
        turn: 0,
        step: 0,
        carried: false,
    });
}

#[test]
fn queue_becomes_the_next_turn_and_inject_waits_for_a_step() {
    let script = "- tool_calls: [{name: wait, arguments: {}}]\n- text: first\n- text: second\n";
    let f = fixture(script, SessionConfig::default());
    let mut reports = f.session.reports().unwrap();
    f.session.prompt("one").unwrap();
    f.started.recv_timeout(Duration::from_secs(10)).unwrap();
    let queued = f.session.queue("two").unwrap();
    f.release.send(()).unwrap();
    assert_eq!(reports.blocking_recv().unwrap().answer, "first");
    assert_eq!(reports.blocking_recv().unwrap().answer, "second");
    // Injected context does not wake an idle agent.
    let injected = f.session.inject("context").unwrap();
    std::thread::sleep(Duration::from_millis(100));
    assert!(!f.session.is_running());
    let log = f.session.close().unwrap();
    let events = events(&log);
    // Received once: a step of turn 0 saw it arrive; the turn it opens does not log it again.
    let received = events
        .iter()
        .filter(|e| matches!(e, Event::InputReceived { input_id, .. } if *input_id == queued))
        .count();
    assert_eq!(received, 1, "{events:#?}");
    assert!(
        events.contains(&Event::InputIncluded {
            input_id: queued,
            turn: 1,
            step: 0,
            carried: true
        }),
        "{events:#?}"
    );
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, Event::InputIncluded { input_id, .. } if *input_id == injected))
    );
}

/// A front end that leaves drops what is queued: closing then runs no turn for it.
#[test]
fn discarded_inputs_never_run() {
    let script = "- tool_calls: [{name: wait, arguments: {}}]\n- text: first\n- text: second\n";
    let f = fixture(script, SessionConfig::default());
    let mut reports = f.session.reports().unwrap();
    f.session.prompt("one").unwrap();
    f.started.recv_timeout(Duration::from_secs(10)).unwrap();
    let queued = f.session.queue("two").unwrap();
    assert_eq!(f.session.discard_pending(), vec![queued.clone()]);
    f.release.send(()).unwrap();
    assert_eq!(reports.blocking_recv().unwrap().answer, "first");
    let log = f.session.close().unwrap();
    let events = events(&log);
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, Event::TurnStart { turn: 1, .. })),
        "{events:#?}"
    );
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, Event::InputIncluded { input_id, .. } if *input_id == queued))
    );
}

/// A cancel drops the steering no step took: it never opens a turn of its own, and steering
/// sent while the cancelled turn winds down is refused. A queued turn still runs.
#[test]
fn cancel_drops_pending_steering_and_no_turn_runs_it() {
    let script = "- tool_calls: [{name: wait, arguments: {}}]\n- text: queued turn\n";
    let f = fixture(script, SessionConfig::default());
    let mut reports = f.session.reports().unwrap();
    f.session.prompt("one").unwrap();
    f.started.recv_timeout(Duration::from_secs(10)).unwrap();
    let steer = f.session.steer("and then run this").unwrap();
    let injected = f.session.inject("context").unwrap();
    let queued = f.session.queue("next").unwrap();
    assert_eq!(f.session.cancel(), vec![steer.clone(), injected.clone()]);
    assert_eq!(
        f.session.steer("too late"),
        Err(SessionError::Cancelling { turn: 0 })
    );
    f.release.send(()).unwrap();
    assert_eq!(
        reports.blocking_recv().unwrap().reason,
        TurnEndReason::Aborted
    );
    assert_eq!(reports.blocking_recv().unwrap().answer, "queued turn");
    let log = f.session.close().unwrap();
    let events = events(&log);
    let turns = events
        .iter()
        .filter(|e| matches!(e, Event::TurnStart { .. }))
        .count();
    assert_eq!(turns, 2, "{events:#?}");
    for gone in [&steer, &injected] {
        assert!(
            !events.iter().any(|e| matches!(e,
                Event::UserMessage { id: Some(id), .. } if id == gone)),
            "{gone} reached the model: {events:#?}"
        );
    }
    assert!(events.iter().any(|e| matches!(e,
        Event::InputIncluded { input_id, turn: 1, .. } if *input_id == queued)));
}

#[test]
fn the_feed_yields_committed_events_in_order_from_tokio_too() {
    let f = fixture("- text: hi\n", SessionConfig::default());
    let mut feed = f.session.events();
    f.session.prompt("hello").unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let seen = runtime.block_on(async {
        let mut seen = Vec::new();
        while let Some(c) = feed.recv().await {
            let end = matches!(c.event, Event::TurnEnd { .. });
            seen.push(c);
            if end {
                break;
            }
        }
        seen
    });
    let log = f.session.close().unwrap();
    let seqs: Vec<u64> = seen.iter().map(|c| c.seq).collect();
    let first = seqs[0];
    assert_eq!(seqs, (first..first + seqs.len() as u64).collect::<Vec<_>>());
    for c in &seen {
        assert_eq!(log.events()[usize::try_from(c.seq).unwrap()].1, c.event);
    }
}

#[test]
fn input_to_a_closed_session_is_an_error_the_caller_sees() {
    let f = fixture("- text: hi\n", SessionConfig::default());
    let Fixture { session, _dir, .. } = f;
    session.shut();
    assert_eq!(session.steer("late"), Err(SessionError::Closed));
    assert_eq!(session.prompt(" "), Err(SessionError::Empty));
    assert!(matches!(
        session.command("/nope"),
        Err(SessionError::UnknownCommand { .. })
    ));
}

struct Listener {
    name: &'static str,
    verdict: fn() -> StepVerdict,
}

impl PreStep for Listener {
    fn name(&self) -> &str {
        self.name
    }

    fn before_step(&self, view: &mut StepView<'_>) -> StepVerdict {
        view.add_messages.push(format!("note from {}", self.name));
        (self.verdict)()
    }
}

fn with_listener(verdict: fn() -> StepVerdict) -> (TurnReport, Vec<Event>) {
    let config = SessionConfig {
        agent: AgentConfig {
            pre_step: vec![Arc::new(Listener {
                name: "test",
                verdict,
            })],
            ..AgentConfig::default()
        },
        ..SessionConfig::default()
    };
    let f = fixture("- text: hi\n", config);
    let mut reports = f.session.reports().unwrap();
    f.session.prompt("go").unwrap();
    let report = reports.blocking_recv().unwrap();
    let log = f.session.close().unwrap();
    (report, events(&log))
}

#[test]
fn a_listener_may_add_messages_or_block_the_step() {
    let (accepted, events) = with_listener(|| StepVerdict::Accept);
    assert_eq!(accepted.reason, TurnEndReason::Completed);
    assert!(events.contains(&Event::UserMessage {
        id: None,
        text: "note from test".into()
    }));
    let (blocked, events) = with_listener(|| StepVerdict::Block("not now".into()));
    assert_eq!(blocked.reason, TurnEndReason::Blocked);
    assert!(blocked.error.unwrap().contains("not now"));
    assert!(
        !events.iter().any(|e| matches!(e, Event::RequestHeader(_))),
        "a blocked step made a request"
    );
}

#[test]
fn a_listener_that_panics_fails_its_step_not_the_process() {
    let (report, events) = with_listener(|| panic!("listener bug"));
    assert_eq!(report.reason, TurnEndReason::Error);
    assert!(report.error.unwrap().contains("`test`"));
    assert!(matches!(
        events.last(),
        Some(Event::TurnEnd {
            reason: TurnEndReason::Error,
            ..
        })
    ));
}

/// PM4-PM6, PM8, PM12, PM22, PM24, PM25: `/plan` commits at once with no turn open; during a
/// turn it is kept pending (a revert cancels it) and appended by the next step's pre-step,
/// with the notice only because the last request header described the opposite state.
#[test]
fn plan_commands_commit_when_idle_and_stay_pending_during_a_turn() {
    let plan = crate::plan_mode::PlanMode::new("Plan first.").unwrap();
    let config = SessionConfig {
        agent: AgentConfig {
            plugins: plan_host(&plan),
            ..AgentConfig::default()
        },
        ..SessionConfig::default()
    };
    let f = fixture(WAIT_THEN_DONE, config);
    let mut reports = f.session.reports().unwrap();
    assert_eq!(
        f.session.command("/plan").unwrap(),
        "committed: plan mode is on"
    );
    assert_eq!(
        f.session.command("/plan").unwrap(),
        "plan mode is already active"
    );
    let usage = f.session.command("/plan --now").unwrap_err().to_string();
    assert!(usage.contains("usage: `/plan`"), "{usage}");
    f.session.prompt("go").unwrap();
    f.started.recv_timeout(Duration::from_secs(10)).unwrap();
    assert!(
        f.session
            .command("/plan off")
            .unwrap()
            .starts_with("queued")
    );
    assert!(f.session.command("/plan").unwrap().starts_with("cancelled"));
    assert_eq!(plan.get(), (true, None));
    assert!(
        f.session
            .command("/plan off")
            .unwrap()
            .starts_with("queued")
    );
    f.release.send(()).unwrap();
    reports.blocking_recv().unwrap();
    let log = f.session.close().unwrap();
    let events = events(&log);
    let switches: Vec<&Event> = events
        .iter()
        .filter(|e| matches!(e, Event::PlanMode { .. }))
        .collect();
    assert_eq!(
        switches,
        vec![
            &Event::PlanMode { active: true },
            &Event::PlanMode { active: false }
        ]
    );
    let off = events
        .iter()
        .position(|e| *e == Event::PlanMode { active: false })
        .unwrap();
    let step1 = events
        .iter()
        .position(|e| *e == Event::StepStart { turn: 0, step: 1 })
        .unwrap();
    assert!(
        off > step1,
        "appended by the pre-step of step 1: {events:#?}"
    );
    let notices = events
        .iter()
        .filter(|e| matches!(e, Event::UserMessage { text, .. } if *text == crate::plan_mode::notice(false)))
        .count();
    assert_eq!(notices, 1, "{events:#?}");
}

/// PM23: `/plan MESSAGE` enters plan mode, then sends MESSAGE through the steering path: an
/// ordinary, logged user message with its id and receipt, in a request that carries the plan
/// section. PM22/PM25: `/plan on` is not a form of the command; the reply says how to use it.
#[test]
fn plan_with_a_message_enters_plan_mode_then_steers_the_message() {
    let plan = crate::plan_mode::PlanMode::new("Plan first.").unwrap();
    let config = SessionConfig {
        agent: AgentConfig {
            plugins: plan_host(&plan),
            ..AgentConfig::default()
        },
        ..SessionConfig::default()
    };
    let f = fixture("- text: planned\n", config);
    let mut reports = f.session.reports().unwrap();
    let usage = f.session.command("/plan on").unwrap_err().to_string();
    assert!(usage.contains("usage: `/plan`"), "{usage}");
    let reply = f.session.command("/plan look at the parser").unwrap();
    assert!(
        reply.starts_with("committed: plan mode is on; message sent as input-"),
        "{reply}"
    );
    reports.blocking_recv().unwrap();
    let log = f.session.close().unwrap();
    let events = events(&log);
    let on = events
        .iter()
        .position(|e| *e == Event::PlanMode { active: true })
        .unwrap();
    let message = events
        .iter()
        .position(|e| matches!(e, Event::UserMessage { id: Some(_), text } if text == "look at the parser"))
        .unwrap();
    assert!(on < message, "{events:#?}");
    assert!(events.iter().any(|e| matches!(
        e,
        Event::InputIncluded {
            turn: 0,
            step: 0,
            ..
        }
    )));
    let header = events
        .iter()
        .find_map(|e| match e {
            Event::RequestHeader(h) => Some(h),
            _ => None,
        })
        .unwrap();
    assert!(header.sections.iter().any(|s| s.name == "plan:policy"));
}

/// A host with plan mode (`plan`'s state) loaded.
fn plan_host(plan: &crate::plan_mode::PlanMode) -> Arc<crate::plugin::PluginHost> {
    let host = crate::plugin::PluginHost::new();
    host.load(plan, &crate::plugin::Config::new("plan-mode", None))
        .unwrap();
    Arc::new(host)
}

/// A host that takes no plugin tools (the trait's default).
struct Plain;

impl ToolHost for Plain {
    fn schemas(&self) -> Vec<serde_json::Value> {
        Vec::new()
    }

    fn concurrency_safe(&self, _name: &str, _arguments: &str) -> bool {
        false
    }

    fn call(&self, _call: &crate::log::ToolCall, _note: &mut Notes<'_>) -> ToolOutcome {
        panic!("nothing runs in a session that did not start")
    }
}

#[test]
fn a_session_whose_plugins_cannot_attach_refuses_inputs_and_says_why_at_close() {
    let dir = tempfile::tempdir().unwrap();
    let log = crate::log::scratch_session(dir.path());
    let plan = crate::plan_mode::PlanMode::new("Plan first.").unwrap();
    let config = SessionConfig {
        agent: AgentConfig {
            plugins: plan_host(&plan),
            ..AgentConfig::default()
        },
        ..SessionConfig::default()
    };
    let model = ScriptModel::new("script:t", ScriptModel::parse("t", "- text: hi\n").unwrap());
    let session = Session::start(log, Box::new(model), Arc::new(Plain), config);
    // Whether the worker has failed yet or not, the command is answered, never left waiting.
    assert!(matches!(
        session.command("/plan"),
        Err(SessionError::Closed)
    ));
    assert!(matches!(session.prompt("go"), Err(SessionError::Closed)));
    let Err(why) = session.close() else {
        panic!("the session ran without its plugins");
    };
    assert!(why.contains("cannot attach the plugins"), "{why}");
    assert!(why.contains("plan-mode"), "{why}");
}

mod dropped;
