//! A plugin whose tools or guards cannot join the tool pipeline stops the agent before its
//! first request: running without a plugin's guard would let through what it denies.

#![cfg(test)]

use std::sync::Arc;

use bridle_agent::log::{Backend, NewSession, SessionDir};
use bridle_agent::model::script::{ScriptModel, ScriptedResponse};
use bridle_agent::plugin::{Config, Plugin, PluginError, PluginHost, Registrar};
use bridle_agent::tools::{Notes, ToolHost, ToolOutcome};
use bridle_agent::{Agent, AgentConfig, AgentError};
use bridle_exec::pipeline::{DeclaredCall, Denial, Guard};

/// Denies every call it sees.
struct DenyAll;

impl Guard for DenyAll {
    fn name(&self) -> &str {
        "deny-all"
    }
    fn check(&self, _call: &DeclaredCall<'_>) -> Option<Denial> {
        Some(Denial {
            guard: "deny-all".into(),
            reason: "nothing runs".into(),
        })
    }
}

struct Guarding;

impl Plugin for Guarding {
    fn name(&self) -> &str {
        "guarding"
    }
    fn register(&self, r: &mut Registrar, config: &Config<'_>) -> Result<(), PluginError> {
        config.fields(&[])?;
        r.guard(Arc::new(DenyAll));
        Ok(())
    }
}

/// A host that cannot take plugin guards (the trait's default), with one tool of its own.
struct Unguardable;

impl ToolHost for Unguardable {
    fn schemas(&self) -> Vec<serde_json::Value> {
        vec![serde_json::json!({"name": "write_file", "description": "", "parameters": {}})]
    }
    fn concurrency_safe(&self, _name: &str, _arguments: &str) -> bool {
        false
    }
    fn call(&self, _call: &bridle_agent::log::ToolCall, _note: &mut Notes<'_>) -> ToolOutcome {
        panic!("no call may run: the plugin's guard is not attached")
    }
}

#[test]
fn a_plugin_guard_that_cannot_be_attached_stops_the_agent_before_any_request() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = SessionDir::open(tmp.path()).unwrap();
    let log = dir
        .create(
            Backend::Jsonl,
            &NewSession {
                workspace: "/w".into(),
                profile: "workspace-write".into(),
                policy_digest: "d".into(),
            },
        )
        .unwrap();
    let host = PluginHost::new();
    host.load(&Guarding, &Config::new("guarding", None))
        .unwrap();
    let model = ScriptModel::new(
        "script:test",
        vec![ScriptedResponse {
            text: Some("done".into()),
            tool_calls: Vec::new(),
        }],
    )
    .recorded();
    let requests = Arc::clone(&model.requests);
    let config = AgentConfig {
        plugins: Arc::new(host),
        ..AgentConfig::default()
    };
    let Err(err) = Agent::new(log, Box::new(model), &Unguardable, config) else {
        panic!("the agent started without the plugin's guard");
    };
    assert!(matches!(err, AgentError::AttachPlugins { .. }), "{err}");
    let text = err.to_string();
    assert!(text.contains("guarding"), "{text}");
    assert!(text.contains("takes no plugin guards"), "{text}");
    assert!(requests.lock().unwrap().is_empty());
}
