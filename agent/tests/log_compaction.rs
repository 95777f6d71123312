//! Context compaction through the loop: after a `context/compacted` event, every request
//! carries its summary in place of the events before it, then what follows, rebuilt from the
//! log alone (also after resume); plan mode, which folds over the whole log, is the same before
//! and after a compaction.

#![cfg(test)]

use std::sync::Arc;

use bridle_agent::log::{Backend, NewSession, PromptSection, SessionDir, SessionLog};
use bridle_agent::model::script::{ScriptModel, ScriptedResponse};
use bridle_agent::model::{Message, ModelRequest};
use bridle_agent::plan_mode::{self, PlanModePlugin};
use bridle_agent::plugin::{Config, PluginHost};
use bridle_agent::tools::{Notes, ToolHost, ToolOutcome};
use bridle_agent::transcript::{COMPACTED_PREFIX, derive_request_messages};
use bridle_agent::{Agent, AgentConfig};
use pretty_assertions::assert_eq;

/// No tools of its own: these turns only talk; a plugin's tools (plan mode's) are offered and
/// answer that they do nothing here.
#[derive(Default)]
struct NoTools {
    added: std::sync::Mutex<Vec<Arc<dyn bridle_exec::tool::Tool>>>,
}

impl ToolHost for NoTools {
    fn schemas(&self) -> Vec<serde_json::Value> {
        let added = self.added.lock().unwrap();
        added.iter().map(|t| t.schema()).collect()
    }

    fn concurrency_safe(&self, _name: &str, _arguments: &str) -> bool {
        false
    }

    fn call(&self, call: &bridle_agent::log::ToolCall, _note: &mut Notes<'_>) -> ToolOutcome {
        ToolOutcome {
            ok: false,
            content: format!("no tool {}", call.name),
            sandbox: None,
        }
    }

    fn add_tool(&self, _owner: &str, tool: Arc<dyn bridle_exec::tool::Tool>) -> Result<(), String> {
        self.added.lock().unwrap().push(tool);
        Ok(())
    }
}

fn config(plan: bool) -> AgentConfig {
    AgentConfig {
        sections: vec![PromptSection {
            name: "base".into(),
            order: 10,
            text: "You are a careful coding agent.".into(),
        }],
        plugins: Arc::new(plugins(plan)),
        ..AgentConfig::default()
    }
}

/// The plugins: plan mode (with its shipped section) or none.
fn plugins(plan: bool) -> PluginHost {
    let host = PluginHost::new();
    if plan {
        host.load(&PlanModePlugin, &Config::new("plan-mode", None))
            .unwrap();
    }
    host
}

/// Runs one turn on `input` answered by `reply`; returns the log and the request made.
fn turn(log: SessionLog, input: &str, reply: &str, plan: bool) -> (SessionLog, ModelRequest) {
    let model = ScriptModel::new(
        "script:test",
        vec![ScriptedResponse {
            text: Some(reply.into()),
            tool_calls: Vec::new(),
        }],
    )
    .recorded();
    let requests = Arc::clone(&model.requests);
    let tools = NoTools::default();
    let mut agent = Agent::new(log, Box::new(model), &tools, config(plan)).unwrap();
    agent.run_turn(input).unwrap();
    let log = agent.into_log();
    let request = requests.lock().unwrap().pop().unwrap();
    (log, request)
}

fn user(text: &str) -> Message {
    Message::User { text: text.into() }
}

fn assistant(text: &str) -> Message {
    Message::Assistant {
        text: text.into(),
        tool_calls: Vec::new(),
        reasoning: String::new(),
    }
}

fn session(dir: &SessionDir) -> SessionLog {
    dir.create(
        Backend::Jsonl,
        &NewSession {
            workspace: "/w".into(),
            profile: "workspace-write".into(),
            policy_digest: "d".into(),
        },
    )
    .unwrap()
}

#[test]
fn requests_after_a_compaction_carry_its_summary_then_what_follows() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = SessionDir::open(tmp.path()).unwrap();
    let (log, _) = turn(session(&dir), "first", "one", false);
    let second = log.next_seq();
    let (mut log, before) = turn(log, "second", "two", false);
    assert_eq!(
        *before.messages,
        vec![user("first"), assistant("one"), user("second")]
    );
    // Compact the first turn away: the second turn starts at `second`.
    log.compact(second, "The user said first; I said one.", "test")
        .unwrap();
    let (log, after) = turn(log, "third", "three", false);
    let summary = user(&format!(
        "{COMPACTED_PREFIX}The user said first; I said one."
    ));
    assert_eq!(
        *after.messages,
        vec![
            summary.clone(),
            user("second"),
            assistant("two"),
            user("third")
        ]
    );
    // The system prompt and tools do not change with a compaction.
    assert_eq!(after.system, before.system);
    assert_eq!(after.tools, before.tools);
    // Rebuilt from the log alone, after resume.
    let id = log.id().to_owned();
    drop(log);
    let (resumed, _) = dir.resume(&id).unwrap();
    assert_eq!(
        derive_request_messages(resumed.request_window()),
        vec![
            summary,
            user("second"),
            assistant("two"),
            user("third"),
            assistant("three")
        ]
    );
}

/// PM2: the state is a fold of the log, so a fork, a compaction and a resume restore it with
/// no other mechanism.
#[test]
fn plan_mode_is_the_same_before_and_after_a_compaction() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = SessionDir::open(tmp.path()).unwrap();
    let tools = NoTools::default();
    let mut agent = Agent::new(
        session(&dir),
        Box::new(ScriptModel::new(
            "script:test",
            vec![ScriptedResponse {
                text: Some("planned".into()),
                tool_calls: Vec::new(),
            }],
        )),
        &tools,
        config(true),
    )
    .unwrap();
    assert_eq!(
        agent.command("/plan").unwrap(),
        "committed: plan mode is on"
    );
    agent.run_turn("plan the change").unwrap();
    let mut log = agent.into_log();
    let (_, before) = turn(
        dir.fork(log.id(), None, Backend::Jsonl, &new_fork())
            .unwrap(),
        "go on",
        "ok",
        true,
    );
    let active = |log: &SessionLog| plan_mode::fold_plan_mode(log.events().iter().map(|(_, e)| e));
    assert!(active(&log));
    // Everything so far compacted, the `plan/mode` switch included.
    log.compact(log.next_seq(), "We are planning the change.", "test")
        .unwrap();
    assert!(active(&log), "plan mode survives the compaction");
    let (log, after) = turn(log, "go on", "ok", true);
    assert_eq!(
        after.system, before.system,
        "the plan section is still sent"
    );
    assert!(
        after
            .system
            .iter()
            .any(|s| s.name == plan_mode::SECTION_NAME)
    );
    let id = log.id().to_owned();
    drop(log);
    let (resumed, _) = dir.resume(&id).unwrap();
    assert!(
        active(&resumed),
        "and survives resume of the compacted session"
    );
}

fn new_fork() -> NewSession {
    NewSession {
        workspace: "/w".into(),
        profile: "workspace-write".into(),
        policy_digest: "d".into(),
    }
}
