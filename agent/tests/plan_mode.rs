//! Plan mode end to end (`shared/spec/plan-mode.md`), as a plugin loaded in the host, through
//! the real tool pipeline and the user-interaction seam: a plan reviewed, kept planning with
//! feedback, then approved; the exit appended by the next accepted pre-step; and the rules
//! about what the model sees. Each test names the rules it checks.

#![cfg(test)]

use std::sync::Arc;

use bridle_agent::log::{Backend, Event, NewSession, SessionDir, SessionLog, TurnEndReason};
use bridle_agent::model::ModelRequest;
use bridle_agent::model::script::ScriptModel;
use bridle_agent::plan_mode::{self, PlanMode, SetOutcome};
use bridle_agent::plugin::{Config, PluginHost};
use bridle_agent::session::{ChannelAnswerer, PreStep, Question, Questions, StepVerdict, StepView};
use bridle_agent::{Agent, AgentConfig};
use bridle_exec::approvals::{Answerer, Approvals, NoAnswerer, PlanReview};
use bridle_exec::backend::{LocalFs, LocalSpawner};
use bridle_exec::pipeline::Pipeline;
use bridle_exec::run::SandboxRunner;
use bridle_policy::{LoadRequest, Overrides, PlanContext, ShippedOnly};
use pretty_assertions::assert_eq;

#[path = "support/http_server.rs"]
#[allow(dead_code)]
mod http_server;

struct World {
    dir: tempfile::TempDir,
    pipeline: Pipeline,
}

/// A real pipeline over a read-only plan of a temp workspace (nothing here spawns).
fn world(answerer: Box<dyn Answerer>) -> World {
    let dir = tempfile::tempdir().unwrap();
    let workspace = dir.path().join("w");
    std::fs::create_dir_all(&workspace).unwrap();
    std::fs::write(workspace.join("notes.txt"), "hello\n").unwrap();
    let policy = bridle_policy::load(
        &ShippedOnly,
        &LoadRequest {
            profile: "read-only".into(),
            overrides: Overrides::default(),
            workspace_layer: None,
        },
    )
    .unwrap();
    let ctx = PlanContext {
        workspace,
        home: dir.path().join("home"),
        account_home: None,
        state_dir: dir.path().join("state"),
        config_dir: dir.path().join("config"),
        temp_dir: dir.path().join("tmp"),
        cache_root: None,
        temp_base: None,
        host_env: Default::default(),
        found: Vec::new(),
        masks: Vec::new(),
        masks_may_vanish: Vec::new(),
        escalated_from: None,
    };
    let plan = bridle_policy::plan(&policy, &ctx).unwrap();
    let launcher = std::path::PathBuf::from("/nonexistent/bridle");
    let pipeline = Pipeline::new(
        plan.clone(),
        bridle_exec::schemas::registry(&["read_file", "bash"], false),
        Approvals::new(plan.approval, answerer),
        Box::new(LocalFs::new(&plan.spec)),
        Box::new(LocalSpawner::new(
            launcher.clone(),
            SandboxRunner::new(launcher),
        )),
    );
    World { dir, pipeline }
}

fn new_log(w: &World) -> SessionLog {
    SessionDir::open(&w.dir.path().join("sessions"))
        .unwrap()
        .create(
            Backend::Jsonl,
            &NewSession {
                workspace: "/w".into(),
                profile: "read-only".into(),
                policy_digest: "d".into(),
            },
        )
        .unwrap()
}

fn host(plan: &PlanMode) -> Arc<PluginHost> {
    let host = PluginHost::new();
    host.load(plan, &Config::new("plan-mode", None)).unwrap();
    Arc::new(host)
}

fn scripted(script: &str) -> (Box<ScriptModel>, Arc<std::sync::Mutex<Vec<ModelRequest>>>) {
    let model = ScriptModel::new("script:t", ScriptModel::parse("t", script).unwrap()).recorded();
    let requests = Arc::clone(&model.requests);
    (Box::new(model), requests)
}

/// Answers the plan reviews it is asked, in order, with `answers` (then dismisses).
fn reviewer(
    mut questions: Questions,
    answers: Vec<PlanReview>,
) -> std::thread::JoinHandle<Vec<String>> {
    std::thread::spawn(move || {
        let mut answers = answers.into_iter();
        let mut plans = Vec::new();
        while let Some(q) = questions.blocking_recv() {
            match q {
                Question::PlanReview { plan, reply } => {
                    plans.push(plan);
                    match answers.next() {
                        Some(a) => reply.send(a),
                        None => drop(reply),
                    }
                }
                Question::Approval { reply, .. } => drop(reply),
            }
        }
        plans
    })
}

fn events(log: &SessionLog) -> Vec<Event> {
    log.events().iter().map(|(_, e)| e.clone()).collect()
}

fn results_of(events: &[Event]) -> Vec<(bool, String)> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::ToolResult { ok, content, .. } => Some((*ok, content.clone())),
            _ => None,
        })
        .collect()
}

fn has_plan_section(r: &ModelRequest) -> bool {
    r.system
        .iter()
        .any(|s| s.name == plan_mode::SECTION_NAME && s.order == plan_mode::SECTION_ORDER)
}

const REVIEWED: &str = r##"
- tool_calls:
    - name: exit_plan_mode
      arguments: {plan: "# Fix it\n1. edit"}
- tool_calls:
    - name: exit_plan_mode
      arguments: {plan: "# Fix it\n1. read notes.txt\n2. edit"}
    - name: read_file
      arguments: {path: notes.txt}
- text: carrying the plan out
"##;

/// PM18, PM19, PM20, PM12 (no notice for an approved exit), PM14, PM8: a plan goes to the
/// person through the interaction seam; "keep planning" with feedback fails the call and
/// carries the feedback; "approve" succeeds, the rest of the batch still runs under the plan
/// guidance, and the exit is appended by the next step's pre-step, silently; the tool
/// catalogue never changes.
#[test]
fn a_plan_kept_planning_then_approved_through_the_review_seam_leaves_plan_mode() {
    let (answerer, questions) = ChannelAnswerer::new();
    let w = world(Box::new(answerer));
    let plan = PlanMode::new("Plan first.").unwrap();
    let config = AgentConfig {
        plugins: host(&plan),
        ..AgentConfig::default()
    };
    let (model, requests) = scripted(REVIEWED);
    let reviews = reviewer(
        questions,
        vec![
            PlanReview::KeepPlanning {
                feedback: Some("read notes.txt first".into()),
            },
            PlanReview::Approved,
        ],
    );
    let mut agent = Agent::new(new_log(&w), model, &w.pipeline, config).unwrap();
    assert_eq!(
        agent.command("/plan").unwrap(),
        "committed: plan mode is on"
    );
    let report = agent.run_turn("fix it").unwrap();
    assert_eq!(report.reason, TurnEndReason::Completed, "{report:?}");
    let log = agent.into_log();
    drop(w);
    let plans = reviews.join().unwrap();
    assert_eq!(
        plans,
        ["# Fix it\n1. edit", "# Fix it\n1. read notes.txt\n2. edit"]
    );
    let events = events(&log);
    let results = results_of(&events);
    assert!(!results[0].0, "{results:?}");
    assert!(results[0].1.contains("read notes.txt first"), "{results:?}");
    assert!(results[1].0, "{results:?}");
    assert!(
        results[1].1.starts_with("{\"approved\": true}"),
        "{results:?}"
    );
    // The read after the approval ran in the same batch, before the exit was appended.
    assert!(results[2].0, "{results:?}");
    let requests = requests.lock().unwrap();
    assert_eq!(requests.len(), 3);
    assert!(has_plan_section(&requests[0]) && has_plan_section(&requests[1]));
    assert!(!has_plan_section(&requests[2]), "left from the next step");
    assert!(
        requests.iter().all(|r| r.tools == requests[0].tools),
        "PM14"
    );
    let off = events
        .iter()
        .position(|e| *e == Event::PlanMode { active: false })
        .unwrap();
    let step2 = events
        .iter()
        .position(|e| *e == Event::StepStart { turn: 0, step: 2 })
        .unwrap();
    let last_result = events
        .iter()
        .rposition(|e| matches!(e, Event::ToolResult { .. }))
        .unwrap();
    assert!(off > step2 && off > last_result, "{events:#?}");
    let notices = events
        .iter()
        .filter(|e| matches!(e, Event::UserMessage { text, .. } if text.starts_with("[bridle]")))
        .count();
    assert_eq!(notices, 0, "an approved exit tells the model nothing more");
    assert_eq!(plan.get(), (false, None));
}

/// PM21: a dismissed review fails the call and plan mode stays active; PM17: outside plan
/// mode, and without a `# ` title, the call fails before anyone is asked.
#[test]
fn a_dismissed_review_or_a_bad_call_never_leaves_plan_mode() {
    let (answerer, questions) = ChannelAnswerer::new();
    let w = world(Box::new(answerer));
    let plan = PlanMode::new("Plan first.").unwrap();
    let script = r##"
- tool_calls:
    - name: exit_plan_mode
      arguments: {plan: "# Plan\n1. x"}
    - name: exit_plan_mode
      arguments: {plan: "no title"}
- text: still planning
"##;
    let (model, requests) = scripted(script);
    let reviews = reviewer(questions, Vec::new());
    let config = AgentConfig {
        plugins: host(&plan),
        ..AgentConfig::default()
    };
    let mut agent = Agent::new(new_log(&w), model, &w.pipeline, config).unwrap();
    agent.command("/plan").unwrap();
    agent.run_turn("plan").unwrap();
    let log = agent.into_log();
    drop(w);
    assert_eq!(
        reviews.join().unwrap().len(),
        1,
        "only the titled plan is shown"
    );
    let results = results_of(&events(&log));
    assert!(
        !results[0].0 && results[0].1.contains("dismissed"),
        "{results:?}"
    );
    assert!(
        !results[1].0 && results[1].1.contains("`# ` title"),
        "{results:?}"
    );
    assert!(has_plan_section(&requests.lock().unwrap()[1]));
    assert!(plan_mode::fold_plan_mode(
        log.events().iter().map(|(_, e)| e)
    ));

    // Outside plan mode the tool is offered (PM14) but fails.
    let w = world(Box::new(NoAnswerer));
    let plan = PlanMode::new("Plan first.").unwrap();
    let (model, requests) = scripted(
        "- tool_calls:\n    - name: exit_plan_mode\n      arguments: {plan: \"# P\"}\n- text: ok\n",
    );
    let config = AgentConfig {
        plugins: host(&plan),
        ..AgentConfig::default()
    };
    let mut agent = Agent::new(new_log(&w), model, &w.pipeline, config).unwrap();
    agent.run_turn("go").unwrap();
    let log = agent.into_log();
    let results = results_of(&events(&log));
    assert!(
        !results[0].0 && results[0].1.contains("not active"),
        "{results:?}"
    );
    let requests = requests.lock().unwrap();
    assert!(
        requests[0]
            .tools
            .iter()
            .any(|t| t["name"] == plan_mode::EXIT_TOOL)
    );
    assert!(!has_plan_section(&requests[0]));
}

/// PM1, PM3 (through PM2's fold): `plan/mode` is a log event only; it never enters the
/// model's messages, and a new session starts inactive.
#[test]
fn the_state_lives_in_the_log_and_never_in_the_transcript() {
    let w = world(Box::new(NoAnswerer));
    let plan = PlanMode::new("Plan first.").unwrap();
    let (model, requests) = scripted("- text: planned\n");
    let config = AgentConfig {
        plugins: host(&plan),
        ..AgentConfig::default()
    };
    let mut agent = Agent::new(new_log(&w), model, &w.pipeline, config).unwrap();
    assert!(!plan_mode::fold_plan_mode(
        agent.log().events().iter().map(|(_, e)| e)
    ));
    agent.command("/plan").unwrap();
    agent.run_turn("plan").unwrap();
    let requests = requests.lock().unwrap();
    let messages = serde_json::to_string(&requests[0].messages).unwrap();
    assert!(
        !messages.contains("plan/mode") && !messages.contains("active"),
        "{messages}"
    );
    assert!(has_plan_section(&requests[0]));
}

/// Records the order in which listeners are told a step was accepted, and whether plan
/// mode's event was already there for it.
struct Recorder {
    seen: std::sync::Mutex<Vec<(u64, u64, usize)>>,
    block_first: bool,
}

impl PreStep for Recorder {
    fn name(&self) -> &str {
        "recorder"
    }

    fn before_step(&self, view: &mut StepView<'_>) -> StepVerdict {
        if self.block_first && view.turn == 0 {
            return StepVerdict::Block("not yet".into());
        }
        StepVerdict::Accept
    }

    fn accepted(&self, view: &mut StepView<'_>) {
        // What listeners ahead of this one put to append for the step.
        let planned = view
            .append
            .iter()
            .filter(|e| matches!(e, Event::PlanMode { .. }))
            .count();
        self.seen
            .lock()
            .unwrap()
            .push((view.turn, view.step, planned));
    }
}

/// PM8, PM9, PM5: a choice queued while a turn is open is appended only by an accepted
/// pre-step, by the listener asked ahead of the others (its event is already there when a
/// later listener is told the step was accepted); a blocked step appends nothing, and the
/// choice waits for the first accepted pre-step of a later turn.
#[test]
fn a_pending_choice_is_appended_first_and_only_by_an_accepted_pre_step() {
    let w = world(Box::new(NoAnswerer));
    let plan = PlanMode::new("Plan first.").unwrap();
    let recorder = Arc::new(Recorder {
        seen: Default::default(),
        block_first: true,
    });
    let (model, requests) = scripted("- text: one\n");
    let config = AgentConfig {
        plugins: host(&plan),
        pre_step: vec![Arc::clone(&recorder) as Arc<dyn PreStep>],
        ..AgentConfig::default()
    };
    let mut agent = Agent::new(new_log(&w), model, &w.pipeline, config).unwrap();
    // As if chosen at the prompt while the turn that will run is being opened.
    assert_eq!(plan.set(true, false, true), SetOutcome::Queued);
    let blocked = agent.run_turn("first").unwrap();
    assert_eq!(blocked.reason, TurnEndReason::Blocked);
    assert!(!events(agent.log()).contains(&Event::PlanMode { active: true }));
    assert_eq!(plan.get(), (false, Some(true)), "still pending");
    let done = agent.run_turn("second").unwrap();
    assert_eq!(done.reason, TurnEndReason::Completed);
    let events = events(agent.log());
    let on = events
        .iter()
        .position(|e| *e == Event::PlanMode { active: true })
        .unwrap();
    let step = events
        .iter()
        .position(|e| *e == Event::StepStart { turn: 1, step: 0 })
        .unwrap();
    assert!(on > step);
    assert_eq!(*recorder.seen.lock().unwrap(), [(1, 0, 1)]);
    assert!(has_plan_section(&requests.lock().unwrap()[0]));
    // No notice: before this step no request header existed (the section says it all).
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, Event::UserMessage { text, .. } if text.starts_with("[bridle]")))
    );
}

/// PM12: a user's choice tells the model once, when the last request header described the
/// opposite state; a choice whose header already matched tells nothing.
#[test]
fn the_notice_comes_only_when_the_last_header_described_the_opposite_state() {
    let w = world(Box::new(NoAnswerer));
    let plan = PlanMode::new("Plan first.").unwrap();
    let (model, _requests) = scripted("- text: a\n- text: b\n- text: c\n");
    let config = AgentConfig {
        plugins: host(&plan),
        ..AgentConfig::default()
    };
    let mut agent = Agent::new(new_log(&w), model, &w.pipeline, config).unwrap();
    agent.run_turn("one").unwrap(); // header: inactive
    assert_eq!(plan.set(true, false, true), SetOutcome::Queued);
    agent.run_turn("two").unwrap(); // appended with a notice: the header said inactive
    // Off and on again before any step: the pending entry is cancelled (PM5), nothing
    // appended, nothing told.
    assert_eq!(plan.set(false, true, true), SetOutcome::Queued);
    assert_eq!(plan.set(true, true, true), SetOutcome::Cancelled);
    agent.run_turn("three").unwrap();
    let events = events(agent.log());
    let notices: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            Event::UserMessage { text, .. } if text.starts_with("[bridle]") => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(notices, [plan_mode::notice(true)]);
    let switches = events
        .iter()
        .filter(|e| matches!(e, Event::PlanMode { .. }))
        .count();
    assert_eq!(switches, 1);
}

/// PM15: plan mode installs no rule, guard or approval: the pipeline's guards are the same
/// with it loaded, and a call is decided the same in both states.
#[test]
fn plan_mode_blocks_no_tool() {
    let w = world(Box::new(NoAnswerer));
    let guards = w.pipeline.registry().guards().len();
    let plan = PlanMode::new("Plan first.").unwrap();
    let script =
        "- tool_calls:\n    - name: read_file\n      arguments: {path: notes.txt}\n- text: ok\n";
    let decided = |active: bool| {
        let (model, _) = scripted(script);
        let config = AgentConfig {
            plugins: host(&plan),
            ..AgentConfig::default()
        };
        let mut agent = Agent::new(new_log(&w), model, &w.pipeline, config).unwrap();
        assert_eq!(w.pipeline.registry().guards().len(), guards);
        if active {
            agent.command("/plan").unwrap();
        }
        agent.run_turn("read").unwrap();
        let decisions: Vec<String> = events(agent.log())
            .iter()
            .filter_map(|e| match e {
                Event::ToolDecision { decision, by, .. } => Some(format!("{decision} {by}")),
                _ => None,
            })
            .collect();
        agent.plugins().unload("plan-mode", &w.pipeline);
        decisions
    };
    let inactive = decided(false);
    assert_eq!(decided(true), inactive);
    assert!(inactive[0].starts_with("allow"), "{inactive:?}");
}

/// PM11: a choice still pending when the process goes lives only in memory: the log of the
/// session does not have it, so resuming starts from the logged state.
#[test]
fn a_choice_not_yet_appended_is_lost_with_the_process() {
    let w = world(Box::new(NoAnswerer));
    let plan = PlanMode::new("Plan first.").unwrap();
    let (model, _) = scripted("- text: a\n");
    let config = AgentConfig {
        plugins: host(&plan),
        ..AgentConfig::default()
    };
    let mut agent = Agent::new(new_log(&w), model, &w.pipeline, config).unwrap();
    agent.run_turn("one").unwrap();
    assert_eq!(plan.set(true, false, true), SetOutcome::Queued);
    let id = agent.log().id().to_owned();
    drop(agent.into_log());
    let (resumed, _) = SessionDir::open(&w.dir.path().join("sessions"))
        .unwrap()
        .resume(&id)
        .unwrap();
    assert!(!plan_mode::fold_plan_mode(
        resumed.events().iter().map(|(_, e)| e)
    ));
}

/// PM8: a retry after a failed request is seen with the choice in force. The choice is
/// appended by the accepted pre-step of a step whose request then fails: the adapter's retry of
/// that request (after a server error) and, after the request failed for good, the next turn's
/// request are all made in plan mode, and the choice is appended once.
#[test]
fn a_request_retried_after_a_failure_carries_the_choice_appended_before_it() {
    use bridle_agent::model::openai::{OpenAiModel, Retry};
    use http_server::{serve, sse, status};

    let w = world(Box::new(NoAnswerer));
    let plan = PlanMode::new("Plan first.").unwrap();
    let (url, received) = serve(vec![
        status(503, r#"{"error":{"message":"overloaded"}}"#),
        status(400, r#"{"error":{"message":"no such model"}}"#),
        sse(&[
            serde_json::json!({"choices": [{"index": 0, "delta": {"content": "planned"}, "finish_reason": null}]}),
            serde_json::json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}),
        ]),
    ]);
    let model = OpenAiModel::new(
        "openai:test-model",
        "test-model",
        &url,
        Some("sk-test".into()),
        Retry {
            attempts: 3,
            base_delay: std::time::Duration::from_millis(10),
            max_delay: std::time::Duration::from_millis(50),
            stall: std::time::Duration::from_secs(5),
        },
    )
    .unwrap();
    let config = AgentConfig {
        plugins: host(&plan),
        ..AgentConfig::default()
    };
    let mut agent = Agent::new(new_log(&w), Box::new(model), &w.pipeline, config).unwrap();
    assert_eq!(plan.set(true, false, true), SetOutcome::Queued);
    let failed = agent.run_turn("first").unwrap();
    assert_eq!(failed.reason, TurnEndReason::Error, "{failed:?}");
    let done = agent.run_turn("again").unwrap();
    assert_eq!(done.reason, TurnEndReason::Completed);
    assert_eq!(done.answer, "planned");

    let bodies: Vec<serde_json::Value> = received
        .lock()
        .unwrap()
        .iter()
        .map(|r| r.body.clone())
        .collect();
    assert_eq!(
        bodies.len(),
        3,
        "the failed request, its retry, the next turn's"
    );
    for (i, body) in bodies.iter().enumerate() {
        let system = body["messages"][0]["content"].as_str().unwrap_or_default();
        assert!(
            system.contains("Plan first."),
            "request {i} not in plan mode: {body}"
        );
    }
    let events = events(agent.log());
    let entered: Vec<usize> = events
        .iter()
        .enumerate()
        .filter(|(_, e)| **e == Event::PlanMode { active: true })
        .map(|(i, _)| i)
        .collect();
    assert_eq!(entered.len(), 1, "appended once: {events:?}");
    let first_step = events
        .iter()
        .position(|e| *e == Event::StepStart { turn: 0, step: 0 })
        .unwrap();
    assert!(
        entered[0] > first_step,
        "appended by the first turn's accepted pre-step"
    );
    assert_eq!(plan.get(), (true, None));
}
