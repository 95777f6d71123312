//! The host: a plugin's registrations are kept under its name and unloading removes all of
//! them; presets, tool removal and plugin configurations load strictly with file:line:col.

use std::sync::Arc;

use bridle_exec::approvals::{Approvals, NoAnswerer};
use bridle_exec::backend::{LocalFs, LocalSpawner};
use bridle_exec::pipeline::{DeclaredCall, Denial, Guard, Pipeline};
use bridle_exec::run::SandboxRunner;
use bridle_policy::{
    AgentSection, LoadRequest, Overrides, PlanContext, Preset, ShippedOnly, SourceFile,
};

use super::*;
use crate::log::Event;
use crate::session::{Command, CommandCtx, PreStep, StepVerdict, StepView};
use crate::tools::ToolHost;

struct Probe;

struct ProbeSection;

impl Section for ProbeSection {
    fn name(&self) -> &str {
        "probe:section"
    }
    fn order(&self) -> u32 {
        30
    }
    fn render(&self, events: &[(u64, Event)]) -> Option<String> {
        Some(format!("{} events", events.len()))
    }
}

struct ProbeListener;

impl PreStep for ProbeListener {
    fn name(&self) -> &str {
        "probe"
    }
    fn before_step(&self, _view: &mut StepView<'_>) -> StepVerdict {
        StepVerdict::Accept
    }
}

struct ProbeCommand;

impl Command for ProbeCommand {
    fn name(&self) -> &str {
        "probe"
    }
    fn run(&self, _args: &str, _ctx: &mut CommandCtx<'_, '_>) -> Result<String, String> {
        Ok("probed".into())
    }
}

struct ProbeGuard;

impl Guard for ProbeGuard {
    fn name(&self) -> &str {
        "probe-guard"
    }
    fn check(&self, _call: &DeclaredCall<'_>) -> Option<Denial> {
        None
    }
}

impl Plugin for Probe {
    fn name(&self) -> &str {
        "probe"
    }

    fn register(&self, r: &mut Registrar, config: &Config<'_>) -> Result<(), PluginError> {
        config.fields(&[])?;
        r.section(Arc::new(ProbeSection));
        r.pre_step(Arc::new(ProbeListener));
        r.pre_step_first(Arc::new(ProbeListener));
        r.command(Arc::new(ProbeCommand));
        r.event_kind(
            "probe/seen",
            Arc::new(|d: &serde_json::Value| {
                d.get("n")
                    .and_then(serde_json::Value::as_u64)
                    .map(drop)
                    .ok_or_else(|| "`n` must be a number".to_owned())
            }),
        );
        r.guard(Arc::new(ProbeGuard));
        r.tool(bridle_exec::schemas::tool("glob", false).unwrap_or_else(|| unreachable!()));
        Ok(())
    }
}

/// A real pipeline (read-only profile, nothing executed) without the shipped `glob`, so the
/// probe plugin can register it.
fn pipeline(dir: &std::path::Path) -> Pipeline {
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
        workspace: dir.join("w"),
        home: dir.join("home"),
        account_home: None,
        state_dir: dir.join("state"),
        config_dir: dir.join("config"),
        temp_dir: dir.join("tmp"),
        cache_root: None,
        temp_base: None,
        host_env: Default::default(),
        found: Vec::new(),
        masks: Vec::new(),
        masks_may_vanish: Vec::new(),
        escalated_from: None,
    };
    let plan = bridle_policy::plan(&policy, &ctx).unwrap();
    let registry = bridle_exec::schemas::registry(&["bash", "read_file"], false);
    let launcher = std::path::PathBuf::from("/nonexistent/bridle");
    Pipeline::new(
        plan.clone(),
        registry,
        Approvals::new(plan.approval, Box::new(NoAnswerer)),
        Box::new(LocalFs::new(&plan.spec)),
        Box::new(LocalSpawner::new(
            launcher.clone(),
            SandboxRunner::new(launcher),
        )),
    )
}

fn names(tools: &dyn ToolHost) -> Vec<String> {
    tools
        .schemas()
        .iter()
        .map(|s| s["name"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[test]
fn unloading_a_plugin_removes_everything_it_registered() {
    let dir = tempfile::tempdir().unwrap();
    let pipeline = pipeline(dir.path());
    let guards_before = pipeline.registry().guards().len();
    let host = PluginHost::new();
    host.load(&Probe, &Config::new("probe", None)).unwrap();
    host.attach(&pipeline).unwrap();
    assert_eq!(names(&pipeline), ["bash", "read_file", "glob"]);
    assert_eq!(pipeline.registry().guards().len(), guards_before + 1);
    assert_eq!(host.sections(&[]).len(), 1);
    let (first, rest) = host.listeners();
    assert_eq!((first.len(), rest.len()), (1, 1));
    assert_eq!(host.commands().len(), 1);
    assert!(host.declares("probe/seen"));
    assert_eq!(
        host.validate("probe/seen", &serde_json::json!({"n": 1})),
        Ok(())
    );
    assert!(
        host.validate("probe/seen", &serde_json::json!({"n": "x"}))
            .unwrap_err()
            .contains("`n` must be a number")
    );

    assert!(host.unload("probe", &pipeline));
    assert_eq!(names(&pipeline), ["bash", "read_file"]);
    assert_eq!(pipeline.registry().guards().len(), guards_before);
    assert!(host.sections(&[]).is_empty());
    let (first, rest) = host.listeners();
    assert!(first.is_empty() && rest.is_empty());
    assert!(host.commands().is_empty());
    assert!(!host.declares("probe/seen"));
    // Fail closed: an event type no loaded plugin declares is refused.
    assert!(
        host.validate("probe/seen", &serde_json::json!({"n": 1}))
            .unwrap_err()
            .contains("no loaded plugin declares")
    );
    assert!(!host.unload("probe", &pipeline));
}

#[test]
fn a_plugin_loads_once_and_its_configuration_is_strict() {
    let host = PluginHost::new();
    host.load(&Probe, &Config::new("probe", None)).unwrap();
    let again = host.load(&Probe, &Config::new("probe", None)).unwrap_err();
    assert!(again.to_string().contains("already loaded"), "{again}");
    let section = agent_section("agent:\n  plugins:\n    probe: {x: 1}\n");
    let node = match &section.plugins["probe"].value {
        bridle_policy::PluginSetting::Config(node) => node,
        other => panic!("{other:?}"),
    };
    let err = PluginHost::new()
        .load(&Probe, &Config::new("probe", Some(node)))
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        "p.yaml:4:13: plugin `probe`: unknown key `x` (expected: none)"
    );
}

/// The effective `agent:` of a profile `mode: read-only` plus `text`.
fn agent_section(text: &str) -> AgentSection {
    let source = bridle_policy::SourceFile::from_text("p.yaml", format!("mode: read-only\n{text}"));
    let source = One(source);
    bridle_policy::load(
        &source,
        &LoadRequest {
            profile: "p.yaml".into(),
            overrides: Overrides::default(),
            workspace_layer: None,
        },
    )
    .unwrap_or_else(|e| panic!("{e}"))
    .agent
}

/// A profile source holding one file.
struct One(SourceFile);

impl bridle_policy::ProfileSource for One {
    fn resolve(
        &self,
        name: &str,
        from: Option<&SourceFile>,
    ) -> Result<SourceFile, bridle_policy::PolicyError> {
        if name == self.0.display {
            return Ok(self.0.clone());
        }
        ShippedOnly.resolve(name, from)
    }
}

fn facts() -> RuntimeFacts {
    RuntimeFacts {
        workspace: "/w".into(),
        mode: bridle_policy::SandboxMode::WorkspaceWrite,
        network: bridle_policy::Network::Off,
        approval: bridle_policy::ApprovalPolicy::Ask,
        allow_hosts: None,
    }
}

fn loaded(text: &str) -> Result<PluginHost, PluginError> {
    load(&agent_section(text), &Shipped::new(facts()))
}

#[test]
fn presets_choose_the_tools_and_plugins() {
    assert_eq!(
        offered_tools(Preset::Minimal),
        ["terminal", "str_replace_editor"]
    );
    assert_eq!(offered_tools(Preset::Standard), bridle_exec::schemas::TOOLS);
    let standard = loaded("").unwrap();
    assert_eq!(standard.names(), ["runtime-context", "plan-mode"]);
    let minimal = loaded("agent: {preset: minimal}\n").unwrap();
    assert_eq!(minimal.names(), ["runtime-context"]);
    let dir = tempfile::tempdir().unwrap();
    let pipeline = pipeline(dir.path());
    let registry = pipeline.registry();
    for name in ["terminal", "str_replace_editor"] {
        registry
            .add_tool(
                None,
                bridle_exec::schemas::tool(name, false).unwrap_or_else(|| unreachable!()),
            )
            .unwrap();
    }
    minimal.attach(&pipeline).unwrap();
    assert_eq!(names(&pipeline), ["terminal", "str_replace_editor"]);
    // Plan mode can be added to minimal by configuring it, or taken off standard.
    let with_plan = loaded("agent:\n  preset: minimal\n  plugins: {plan-mode: {section: Plan.}}\n");
    assert_eq!(with_plan.unwrap().names(), ["runtime-context", "plan-mode"]);
    let off = loaded("agent:\n  plugins: {plan-mode: off}\n").unwrap();
    assert_eq!(off.names(), ["runtime-context"]);
}

#[test]
fn unknown_plugins_tools_and_keys_fail_naming_the_place() {
    for (text, expected) in [
        (
            "agent:\n  plugins: {plan-mod: {section: x}}\n",
            "p.yaml:3:23: `agent.plugins.plan-mod`: no such plugin (available: runtime-context, plan-mode)",
        ),
        (
            "agent:\n  preset: minimal\n  tools: {remove: [grep]}\n",
            "p.yaml:4:20: `agent.tools.remove`: `grep` is not a tool of this preset (offered: terminal, str_replace_editor)",
        ),
        (
            "agent:\n  plugins:\n    plan-mode:\n      section: Plan.\n      sektion: x\n",
            "p.yaml:6:7: plugin `plan-mode`: unknown key `sektion` (expected: `section`)",
        ),
        (
            "agent:\n  plugins:\n    runtime-context: {date: yes}\n",
            "p.yaml:4:29: plugin `runtime-context`: `date` must be `true` or `false`, not a string",
        ),
    ] {
        let err = loaded(text).expect_err(text).to_string();
        assert_eq!(err, expected, "{text}");
    }
}

/// PM16: exactly one key, `section`, a non-empty string; anything else fails the load.
#[test]
fn plan_mode_configuration_is_exactly_a_non_empty_section() {
    for (text, expected) in [
        (
            "agent:\n  plugins:\n    plan-mode: {}\n",
            "p.yaml:4:16: plugin `plan-mode`: `section` is required (a non-empty string)",
        ),
        (
            "agent:\n  plugins:\n    plan-mode: {section: \"  \"}\n",
            "p.yaml:4:26: plugin `plan-mode`: `section` must be a non-empty string",
        ),
        (
            "agent:\n  plugins:\n    plan-mode: {section: 5}\n",
            "p.yaml:4:26: plugin `plan-mode`: `section` must be a string, not an integer",
        ),
        (
            "agent:\n  plugins:\n    plan-mode: [section]\n",
            "p.yaml:4:16: plugin `plan-mode`: the configuration must be a mapping (keys: `section`), not a list",
        ),
    ] {
        let err = loaded(text).expect_err(text).to_string();
        assert_eq!(err, expected, "{text}");
    }
    let host = loaded("agent:\n  plugins:\n    plan-mode: {section: Plan it.}\n").unwrap();
    let events = [(0, Event::PlanMode { active: true })];
    let sections = host.sections(&events);
    assert!(
        sections
            .iter()
            .any(|s| s.name == "plan:policy" && s.order == 50 && s.text == "Plan it."),
        "{sections:?}"
    );
}

#[test]
fn the_runtime_context_section_says_where_and_under_what_the_agent_works() {
    let host = loaded("").unwrap();
    let sections = host.sections(&[]);
    assert_eq!(sections.len(), 1, "{sections:?}");
    assert_eq!(
        (sections[0].name.as_str(), sections[0].order),
        ("bridle:environment", 10)
    );
    let text = &sections[0].text;
    for part in ["`/w`", "`workspace-write`", "network `off`", "policy `ask`"] {
        assert!(text.contains(part), "{part}: {text}");
    }
    assert!(!text.contains("Today is"), "{text}");
    let dated = loaded("agent:\n  plugins:\n    runtime-context: {date: true}\n").unwrap();
    let text = &dated.sections(&[])[0].text;
    let today = &crate::log::now_rfc3339()[..10];
    assert!(
        text.ends_with(&format!("Today is {today} (UTC).")),
        "{text}"
    );
}

mod event_kinds {
    //! A plugin's event type in the session log: appended and read back through the plugin's
    //! validator; a log holding a type nobody declares is still checked, and named.

    use std::sync::Arc;

    use super::{Config, Plugin, PluginError, PluginHost, Probe, Registrar};
    use crate::log::{Backend, Event, NewSession, PluginEvent, SessionDir, SessionLog};

    /// Declares `probe/seen` like the probe plugin, but takes any data (an older version of
    /// it, say): it writes what the probe's validator then refuses.
    struct Lax;

    impl Plugin for Lax {
        fn name(&self) -> &str {
            "lax"
        }
        fn register(&self, r: &mut Registrar, _: &Config<'_>) -> Result<(), PluginError> {
            r.event_kind("probe/seen", Arc::new(|_: &serde_json::Value| Ok(())));
            Ok(())
        }
    }

    fn host(plugin: &dyn Plugin) -> Arc<PluginHost> {
        let host = PluginHost::new();
        host.load(plugin, &Config::new(plugin.name(), None))
            .unwrap();
        Arc::new(host)
    }

    fn seen(data: serde_json::Value) -> Event {
        Event::Plugin(PluginEvent {
            kind: "probe/seen".into(),
            data,
        })
    }

    fn new_log(sessions: &SessionDir) -> SessionLog {
        sessions
            .create(
                Backend::Jsonl,
                &NewSession {
                    workspace: "/w".into(),
                    profile: "p".into(),
                    policy_digest: "d".into(),
                },
            )
            .unwrap()
    }

    /// A session written through `sessions`: a turn start, a `probe/seen` with `data` (event
    /// 2), a turn end.
    fn session(sessions: &SessionDir, data: serde_json::Value) -> String {
        let mut log = new_log(sessions);
        log.append(Event::TurnStart { turn: 0 }).unwrap();
        assert_eq!(log.append(seen(data)).unwrap(), 2);
        log.append(Event::TurnEnd {
            turn: 0,
            reason: crate::log::TurnEndReason::Completed,
            detail: None,
            cancelled_by: None,
        })
        .unwrap();
        log.id().to_owned()
    }

    #[test]
    fn a_plugin_event_type_is_appended_verified_shown_and_resumed() {
        let dir = tempfile::tempdir().unwrap();
        let sessions = SessionDir::open(dir.path())
            .unwrap()
            .with_kinds(host(&Probe));
        let id = session(&sessions, serde_json::json!({"n": 7}));
        let v = sessions.verify(&id).unwrap();
        assert_eq!((v.problem, v.intact, v.undeclared), (None, 4, vec![]));
        let shown = sessions.read_events(&id).unwrap();
        assert_eq!(shown[2].2, seen(serde_json::json!({"n": 7})));
        let (log, repairs) = sessions.resume(&id).unwrap();
        assert!(repairs.is_empty());
        assert_eq!(log.events()[2], (2, seen(serde_json::json!({"n": 7}))));
        // The line is stored like any other event's.
        let text = std::fs::read_to_string(log.path()).unwrap();
        assert!(
            text.contains(r#","type":"probe/seen","data":{"n":7},"hash":"#),
            "{text}"
        );
    }

    #[test]
    fn an_event_type_no_plugin_declares_is_refused_on_append() {
        let dir = tempfile::tempdir().unwrap();
        for sessions in [
            SessionDir::open(dir.path()).unwrap(),
            SessionDir::open(dir.path())
                .unwrap()
                .with_kinds(host(&Probe)),
        ] {
            let mut log = new_log(&sessions);
            let err = log
                .append(Event::Plugin(PluginEvent {
                    kind: "other/kind".into(),
                    data: serde_json::json!({}),
                }))
                .unwrap_err()
                .to_string();
            assert!(
                err.contains("no loaded plugin declares the event type \"other/kind\""),
                "{err}"
            );
            let err = log
                .append(Event::Plugin(PluginEvent {
                    kind: "turn/start".into(),
                    data: serde_json::json!({"turn": 0}),
                }))
                .unwrap_err()
                .to_string();
            assert!(err.contains("built-in event type"), "{err}");
            assert_eq!(log.next_seq(), 1, "nothing was written");
        }
    }

    #[test]
    fn data_the_validator_rejects_is_refused_on_append_and_on_read_naming_the_event() {
        let dir = tempfile::tempdir().unwrap();
        let probe = SessionDir::open(dir.path())
            .unwrap()
            .with_kinds(host(&Probe));
        let mut log = new_log(&probe);
        let err = log
            .append(seen(serde_json::json!({"n": "x"})))
            .unwrap_err()
            .to_string();
        assert!(err.contains("`n` must be a number"), "{err}");
        drop(log);

        // Written under a plugin that took any data, read under the probe's validator.
        let lax = SessionDir::open(dir.path()).unwrap().with_kinds(host(&Lax));
        let id = session(&lax, serde_json::json!({"n": "x"}));
        assert_eq!(lax.verify(&id).unwrap().problem, None);
        let v = probe.verify(&id).unwrap();
        let (seq, what) = v.problem.unwrap();
        assert_eq!((seq, v.intact), (2, 2));
        assert!(
            what.contains("event `probe/seen`: `n` must be a number"),
            "{what}"
        );
        let err = probe.resume(&id).unwrap_err().to_string();
        assert!(
            err.contains("at event 2") && err.contains("`n` must be a number"),
            "{err}"
        );
        let err = probe.read_events(&id).unwrap_err().to_string();
        assert!(err.contains("at event 2"), "{err}");
    }

    #[test]
    fn a_log_holding_an_undeclared_type_verifies_its_chain_and_names_the_type() {
        let dir = tempfile::tempdir().unwrap();
        let writer = SessionDir::open(dir.path())
            .unwrap()
            .with_kinds(host(&Probe));
        let id = session(&writer, serde_json::json!({"n": 1}));
        let plain = SessionDir::existing(dir.path()).unwrap();

        let v = plain.verify(&id).unwrap();
        assert_eq!(v.undeclared, vec![(2, "probe/seen".to_owned())]);
        let (seq, what) = v.problem.unwrap();
        assert_eq!((seq, v.intact), (2, 2));
        assert!(
            what.contains("unknown event type \"probe/seen\"")
                && what.contains("the hash chain over all 4 events is intact"),
            "{what}"
        );
        let err = plain.read_events(&id).unwrap_err().to_string();
        assert!(
            err.contains("at event 2") && err.contains("\"probe/seen\""),
            "{err}"
        );
        let err = plain.resume(&id).unwrap_err().to_string();
        assert!(
            err.contains("at event 2") && err.contains("\"probe/seen\""),
            "{err}"
        );

        // The chain is still checked over it: an edit after it is found first.
        let path = dir.path().join(format!("{id}.jsonl"));
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::write(
            &path,
            text.replace(r#""completed","turn":0}"#, r#""completed","turn":1}"#),
        )
        .unwrap();
        let (seq, what) = plain.verify(&id).unwrap().problem.unwrap();
        assert_eq!(seq, 3, "{what}");
        assert!(what.contains("hash does not match"), "{what}");
    }
}
