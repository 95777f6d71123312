//! `bridle run` under a profile's `agent:` section: presets, plugins turned off, tools removed,
//! and a bad plugin configuration failing the profile load.

use bridle_agent::log::{Event, RequestHeader};
use pretty_assertions::assert_eq;

use super::run_cli::{agent, events, session_id};
use super::support::ExecEnv;

const SCRIPT: &str = "\
- tool_calls:
    - name: bash
      arguments: {command: \"echo hi\"}
- text: done
";

/// Every request header of the session `id`, and the messages of the last request as the
/// log holds them (`user/message` and `tool/result` texts).
fn headers(e: &ExecEnv, id: &str) -> Vec<RequestHeader> {
    events(e, id)
        .into_iter()
        .filter_map(|e| match e {
            Event::RequestHeader(h) => Some(h),
            _ => None,
        })
        .collect()
}

fn tool_names(h: &RequestHeader) -> Vec<String> {
    h.tools
        .iter()
        .map(|t| t["name"].as_str().unwrap_or_default().to_owned())
        .collect()
}

fn section_names(h: &RequestHeader) -> Vec<String> {
    h.sections.iter().map(|s| s.name.clone()).collect()
}

/// What the model was sent, apart from the header: the messages' texts, in order.
fn transcript(e: &ExecEnv, id: &str) -> Vec<String> {
    events(e, id)
        .into_iter()
        .filter_map(|e| match e {
            Event::UserMessage { text, .. } => Some(format!("user: {text}")),
            Event::ToolResult { ok, content, .. } => Some(format!("result {ok}: {content}")),
            Event::AssistantMessage { text, .. } => Some(format!("assistant: {text}")),
            _ => None,
        })
        .collect()
}

#[test]
fn the_standard_preset_offers_every_shipped_tool_and_plan_mode() {
    let e = ExecEnv::new();
    let run = agent(&e, SCRIPT, &[], "go");
    run.assert_code(0);
    let headers = headers(&e, &session_id(&run));
    let mut expected: Vec<String> = bridle_exec::schemas::TOOLS
        .iter()
        .map(|t| (*t).to_owned())
        .collect();
    expected.push("exit_plan_mode".to_owned());
    assert_eq!(tool_names(&headers[0]), expected);
    assert_eq!(section_names(&headers[0]), ["bridle:environment"]);
}

/// Plan mode removed: the same requests, minus its section (while active) and its tool.
#[test]
fn a_profile_without_plan_mode_runs_the_same_requests_minus_its_section_and_tool() {
    let e = ExecEnv::new();
    let off = e.profile(
        "no-plan.yaml",
        "extends: workspace-write\nagent:\n  plugins:\n    plan-mode: off\n",
    );
    let with = agent(&e, SCRIPT, &[], "go");
    with.assert_code(0);
    let without = agent(&e, SCRIPT, &["--profile", &off], "go");
    without.assert_code(0);
    let (w, wo) = (session_id(&with), session_id(&without));
    let (hw, hwo) = (headers(&e, &w), headers(&e, &wo));
    assert_eq!(hw.len(), 1);
    assert_eq!(hwo.len(), 1);
    assert_eq!(hwo[0].sections, hw[0].sections);
    let minus_tool: Vec<serde_json::Value> = hw[0]
        .tools
        .iter()
        .filter(|t| t["name"] != "exit_plan_mode")
        .cloned()
        .collect();
    assert_eq!(hwo[0].tools, minus_tool);
    assert_eq!(transcript(&e, &wo), transcript(&e, &w));
    assert!(
        !events(&e, &wo)
            .iter()
            .any(|e| matches!(e, Event::PlanMode { .. }))
    );
    // And plan mode cannot be entered there.
    let plan = agent(&e, SCRIPT, &["--profile", &off, "--plan"], "go");
    plan.assert_code(2);
    assert!(
        plan.stderr
            .contains("--plan: the plan-mode plugin is not loaded"),
        "{}",
        plan.stderr
    );
    assert!(
        !plan.stderr.contains("bridle: session "),
        "refused before any session: {}",
        plan.stderr
    );
}

#[test]
fn the_minimal_preset_offers_only_the_terminal_and_the_editor() {
    let e = ExecEnv::new();
    let minimal = e.profile(
        "minimal.yaml",
        "extends: workspace-write\nagent: {preset: minimal}\n",
    );
    let run = agent(&e, SCRIPT, &["--profile", &minimal], "go");
    run.assert_code(0);
    let id = session_id(&run);
    let headers = headers(&e, &id);
    assert_eq!(tool_names(&headers[0]), ["terminal", "str_replace_editor"]);
    assert_eq!(section_names(&headers[0]), ["bridle:environment"]);
    // A tool the preset does not offer is an unknown tool to the pipeline.
    let results: Vec<(bool, String)> = super::run_cli::results(&events(&e, &id));
    assert!(!results[0].0, "{results:?}");
    assert!(results[0].1.contains("bash"), "{results:?}");
}

#[test]
fn removed_tools_are_not_offered() {
    let e = ExecEnv::new();
    let profile = e.profile(
        "fewer.yaml",
        "extends: workspace-write\nagent:\n  tools:\n    remove: [grep, glob]\n",
    );
    let run = agent(&e, "- text: ok\n", &["--profile", &profile], "go");
    run.assert_code(0);
    let names = tool_names(&headers(&e, &session_id(&run))[0]);
    assert!(
        !names.iter().any(|n| n == "grep" || n == "glob"),
        "{names:?}"
    );
    assert!(names.iter().any(|n| n == "bash"), "{names:?}");
}

#[test]
fn a_bad_plugin_configuration_fails_the_profile_load_naming_the_place() {
    let e = ExecEnv::new();
    for (yaml, expected) in [
        (
            "extends: workspace-write\nagent:\n  plugins:\n    plan-mode: {section: Plan., mode: x}\n",
            "bad.yaml:4:33: plugin `plan-mode`: unknown key `mode` (expected: `section`)",
        ),
        (
            "extends: workspace-write\nagent:\n  plugins:\n    plan-mode: {section: \"\"}\n",
            "bad.yaml:4:26: plugin `plan-mode`: `section` must be a non-empty string",
        ),
        (
            "extends: workspace-write\nagent:\n  tools: {remove: [grepp]}\n",
            "bad.yaml:3:20: `agent.tools.remove`: `grepp` is not a tool of this preset",
        ),
    ] {
        let bad = e.profile("bad.yaml", yaml);
        let run = agent(&e, "- text: ok\n", &["--profile", &bad], "go");
        run.assert_code(2);
        let expected = format!("{}/{expected}", e.home.display());
        assert!(run.stderr.contains(&expected), "{yaml}\n{}", run.stderr);
        // The profile failed to load: no session was started.
        assert!(!run.stderr.contains("bridle: session "), "{}", run.stderr);
    }
}

#[test]
fn policy_show_prints_the_agent_section_with_provenance() {
    let e = ExecEnv::new();
    let profile = e.profile(
        "shown.yaml",
        "extends: workspace-write\nagent:\n  preset: minimal\n  plugins: {plan-mode: off}\n",
    );
    let run =
        super::support::run_bounded(e.bridle().args(["policy", "show", "--profile", &profile]));
    run.assert_code(0);
    let at = format!("{}/shown.yaml", e.home.display());
    for line in ["agent.preset", "minimal", "agent.plugins.plan-mode", "off"] {
        assert!(run.stdout.contains(line), "{line}\n{}", run.stdout);
    }
    assert!(run.stdout.contains(&format!("{at}:3:11")), "{}", run.stdout);
}
