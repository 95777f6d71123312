//! The `agent:` key: presets, plugin configurations kept with their locations, tool removal,
//! layering with provenance, and the workspace layer's tighten-only rule.

#![cfg(test)]

mod support;

use bridle_policy::{
    ConfigValue, LoadRequest, Origin, PluginSetting, Policy, PolicyError, Preset, SourceFile, load,
};
use pretty_assertions::assert_eq;

use support::{MemSource, origin_of, request};

const BASE: &str = "\
mode: workspace-write
agent:
  preset: standard
  plugins:
    plan-mode:
      section: \"Plan first.\"
  tools:
    remove: [grep]
";

fn source(child: &str) -> MemSource {
    MemSource::new()
        .with("base.yaml", BASE)
        .with("child.yaml", format!("extends: base.yaml\n{child}"))
}

fn child(text: &str) -> Policy {
    load(&source(text), &request("child.yaml")).unwrap_or_else(|e| panic!("{e}"))
}

fn with_workspace(text: &str) -> Result<Policy, PolicyError> {
    load(
        &source(""),
        &LoadRequest {
            workspace_layer: Some(SourceFile::from_text(".bridle/profile.yaml", text)),
            ..request("child.yaml")
        },
    )
}

fn removed(policy: &Policy) -> Vec<&str> {
    policy
        .agent
        .remove_tools
        .iter()
        .map(|t| t.value.as_str())
        .collect()
}

#[test]
fn a_profile_without_agent_gets_the_standard_preset_built_in() {
    let policy = support::load_text("mode: read-only\n").unwrap();
    assert_eq!(policy.agent.preset.value, Preset::Standard);
    assert_eq!(policy.agent.preset.origin, Origin::Builtin);
    assert!(policy.agent.plugins.is_empty());
    assert!(policy.agent.remove_tools.is_empty());
}

#[test]
fn plugin_configuration_is_kept_with_the_location_of_every_value() {
    let policy = child("");
    let setting = &policy.agent.plugins["plan-mode"];
    let PluginSetting::Config(node) = &setting.value else {
        panic!("{setting:?}");
    };
    let ConfigValue::Map(entries) = &node.value else {
        panic!("{node:?}");
    };
    let (key, value) = &entries[0];
    assert_eq!(key.value, "section");
    assert_eq!(key.origin, origin_of("base.yaml", BASE, "section"));
    assert_eq!(value.value, ConfigValue::String("Plan first.".into()));
    assert_eq!(
        value.origin,
        origin_of("base.yaml", BASE, "\"Plan first.\"")
    );
}

#[test]
fn a_layer_replaces_a_plugins_whole_configuration_and_lists_combine() {
    let text =
        "agent:\n  preset: minimal\n  plugins:\n    plan-mode: off\n  tools:\n    remove: [bash]\n";
    let policy = child(text);
    let full = format!("extends: base.yaml\n{text}");
    assert_eq!(policy.agent.preset.value, Preset::Minimal);
    assert_eq!(
        policy.agent.preset.origin,
        origin_of("child.yaml", &full, "minimal")
    );
    assert_eq!(policy.agent.plugins["plan-mode"].value, PluginSetting::Off);
    assert_eq!(removed(&policy), ["grep", "bash"]);
    let policy = child("agent:\n  tools:\n    remove: {remove: [grep]}\n");
    assert!(removed(&policy).is_empty());
}

#[test]
fn policy_show_prints_the_agent_section_with_provenance() {
    let entries = child("").entries();
    let agent: Vec<(String, String, String)> = entries
        .iter()
        .filter(|e| e.key.starts_with("agent."))
        .map(|e| (e.key.clone(), e.value.clone(), e.origin.to_string()))
        .collect();
    assert_eq!(
        agent,
        [
            ("agent.preset", "standard", "base.yaml:3:11"),
            (
                "agent.plugins.plan-mode",
                "{section: \"Plan first.\"}",
                "base.yaml:6:7"
            ),
            ("agent.tools.remove", "grep", "base.yaml:8:14"),
        ]
        .map(|(k, v, o)| (k.to_owned(), v.to_owned(), o.to_owned()))
    );
}

#[test]
fn the_workspace_layer_may_only_remove_tools_and_plugins() {
    let policy = with_workspace(
        "agent:\n  preset: minimal\n  plugins: {plan-mode: off}\n  tools: {remove: [bash]}\n",
    )
    .unwrap();
    assert_eq!(policy.agent.preset.value, Preset::Minimal);
    assert_eq!(policy.agent.plugins["plan-mode"].value, PluginSetting::Off);
    assert_eq!(removed(&policy), ["grep", "bash"]);
    for (text, key, at) in [
        (
            "agent:\n  plugins:\n    plan-mode: {section: mine}\n",
            "agent.plugins.plan-mode",
            ".bridle/profile.yaml:3:16",
        ),
        (
            "agent:\n  tools:\n    remove: {remove: [grep]}\n",
            "agent.tools.remove.remove",
            ".bridle/profile.yaml:3:23",
        ),
        (
            "agent:\n  tools:\n    remove: {replace: []}\n",
            "agent.tools.remove.replace",
            ".bridle/profile.yaml:3:23",
        ),
    ] {
        let err = with_workspace(text).expect_err(text);
        let msg = err.to_string();
        assert!(
            matches!(&err, PolicyError::WorkspaceLayerWidens { key: k, .. } if k == key),
            "{text}: {err:?}"
        );
        assert!(msg.starts_with(at), "{text}: {msg}");
    }
    let base = load(
        &MemSource::new().with("m.yaml", "mode: read-only\nagent: {preset: minimal}\n"),
        &LoadRequest {
            workspace_layer: Some(SourceFile::from_text(
                ".bridle/profile.yaml",
                "agent: {preset: standard}\n",
            )),
            ..request("m.yaml")
        },
    )
    .expect_err("a workspace layer widening the preset");
    assert!(
        matches!(&base, PolicyError::WorkspaceLayerWidens { key, .. } if key == "agent.preset"),
        "{base:?}"
    );
}

#[test]
fn unknown_agent_keys_and_presets_fail_the_load_naming_the_place() {
    for (text, at, what) in [
        (
            "mode: read-only\nagent:\n  preset: tiny\n",
            "p.yaml:3:11",
            "tiny",
        ),
        (
            "mode: read-only\nagent:\n  pluggins: {}\n",
            "p.yaml:3:3",
            "pluggins",
        ),
        (
            "mode: read-only\nagent:\n  tools: {add: [x]}\n",
            "p.yaml:3:11",
            "add",
        ),
    ] {
        let err = load(&MemSource::new().with("p.yaml", text), &request("p.yaml"))
            .expect_err(text)
            .to_string();
        assert!(err.starts_with(at), "{text}: {err}");
        assert!(err.contains(what), "{text}: {err}");
    }
}

/// The effective agent section of a layered profile, as `policy show --json` would carry it.
#[test]
fn the_effective_agent_section_matches_its_snapshot() {
    let policy = child(
        "agent:\n  plugins:\n    plan-mode:\n      section: |\n        Plan.\n        Then ask.\n    extra: {list: [1, 2.5, true, ~]}\n",
    );
    insta::assert_yaml_snapshot!("agent-section-layered", policy.agent);
}
