//! Configuration found inside the workspace may only tighten the policy: every widening is
//! refused naming the key and its location, every tightening is applied.

#![cfg(test)]

mod support;

use bridle_policy::{
    ApprovalPolicy, Decision, LayerKind, LoadRequest, Network, Origin, Overrides, Policy,
    PolicyError, SandboxMode, ShippedOnly, SourceFile, check_workspace_layer, load,
};
use pretty_assertions::assert_eq;

use support::{MemSource, load_with_workspace, origin_of, request, shipped};

/// A deployer profile that leaves room to tighten everything: an extra writable root, an
/// accepted missing guarantee, environment allow entries, limits.
const DEPLOYER: &str = "\
extends: ci-locked
writable_roots: [/opt/cache]
readable_roots: [/opt/data]
accept_missing: [G-FS-PROTECT]
environment:
  allow: [MY_TOOL_HOME]
";

fn deployer() -> Policy {
    let source = MemSource::new().with("deployer.yaml", DEPLOYER);
    load(&source, &request("deployer.yaml")).unwrap()
}

fn ws(text: &str) -> SourceFile {
    SourceFile::from_text(".bridle/profile.yaml", text)
}

/// Expects `text` to be refused as widening `key`, both through `load` and through
/// `check_workspace_layer`, and returns the `load` error.
fn refused(base: &str, text: &str, key: &str) -> PolicyError {
    let source = MemSource::new().with("deployer.yaml", DEPLOYER);
    let err = load(
        &source,
        &LoadRequest {
            workspace_layer: Some(ws(text)),
            ..request(base)
        },
    )
    .expect_err(text);
    match &err {
        PolicyError::WorkspaceLayerWidens { at, key: k, why } => {
            assert_eq!(k, key, "{text}");
            assert!(!why.is_empty());
            assert!(
                matches!(at, Origin::File { file, .. } if file == ".bridle/profile.yaml"),
                "{at:?}"
            );
        }
        other => panic!("{text}: expected WorkspaceLayerWidens, got {other:?}"),
    }
    let msg = err.to_string();
    assert!(msg.starts_with(".bridle/profile.yaml:"), "{msg}");
    assert!(msg.contains(&format!("`{key}`")), "{msg}");
    assert!(msg.contains("may only tighten"), "{msg}");

    let policy = load(&source, &request(base)).unwrap();
    let checked = check_workspace_layer(&policy, &ws(text)).expect_err(text);
    assert_eq!(checked.to_string(), msg);
    err
}

fn accepted(text: &str) -> Policy {
    let base = deployer();
    let checked = match check_workspace_layer(&base, &ws(text)) {
        Ok(p) => p,
        Err(err) => panic!("{text}: {err}"),
    };
    let source = MemSource::new().with("deployer.yaml", DEPLOYER);
    let loaded = load(
        &source,
        &LoadRequest {
            workspace_layer: Some(ws(text)),
            ..request("deployer.yaml")
        },
    )
    .unwrap();
    assert_eq!(
        loaded.layers.last().map(|l| l.kind),
        Some(LayerKind::Workspace)
    );
    assert_eq!(checked.mode, loaded.mode);
    checked
}

#[test]
fn widening_mode_is_refused() {
    let err = refused("workspace-write", "mode: danger-full-access\n", "mode");
    assert_eq!(
        err.to_string().split(": ").next(),
        Some(".bridle/profile.yaml:1:7")
    );
    assert!(
        err.to_string().contains("profiles/workspace-write.yaml:"),
        "{err}"
    );
    refused("read-only", "mode: workspace-write\n", "mode");
}

#[test]
fn approval_never_to_ask_is_refused() {
    refused("ci-locked", "approval: ask\n", "approval");
}

#[test]
fn network_off_to_on_is_refused() {
    refused("workstation", "network: on\n", "network");
}

#[test]
fn appending_a_writable_or_readable_root_is_refused() {
    refused(
        "workstation",
        "writable_roots: [/opt/elsewhere]\n",
        "writable_roots",
    );
    refused(
        "workstation",
        "writable_roots: {append: [~/bin]}\n",
        "writable_roots",
    );
    refused("workstation", "readable_roots: [/srv]\n", "readable_roots");
}

#[test]
fn removing_a_protected_path_is_refused() {
    refused(
        "workstation",
        "protected_paths: {remove: [.git/hooks]}\n",
        "protected_paths.remove",
    );
}

#[test]
fn replacing_any_list_is_refused() {
    refused(
        "workstation",
        "masked_paths: {replace: [~/.ssh]}\n",
        "masked_paths.replace",
    );
    refused(
        "workstation",
        "protected_paths: {replace: [.git/hooks, .git/config, .bridle]}\n",
        "protected_paths.replace",
    );
    refused(
        "deployer.yaml",
        "writable_roots: {replace: []}\n",
        "writable_roots.replace",
    );
    refused(
        "workstation",
        "rules:\n  commands: {replace: []}\n",
        "rules.commands.replace",
    );
}

#[test]
fn removing_a_masked_path_scrub_pattern_or_rule_is_refused() {
    refused(
        "workstation",
        "masked_paths: {remove: [~/.ssh]}\n",
        "masked_paths.remove",
    );
    refused(
        "workstation",
        "environment:\n  scrub: {remove: ['*TOKEN*']}\n",
        "environment.scrub.remove",
    );
    refused(
        "workstation",
        "rules:\n  commands: {remove: [deny-sudo]}\n",
        "rules.commands.remove",
    );
    refused(
        "workstation",
        "rules:\n  paths: {remove: [ask-env-files]}\n",
        "rules.paths.remove",
    );
}

#[test]
fn raising_a_limit_is_refused() {
    refused(
        "ci-locked",
        "limits:\n  processes: 100000\n",
        "limits.processes",
    );
    refused("ci-locked", "limits:\n  memory: 16GiB\n", "limits.memory");
    refused(
        "ci-locked",
        "limits:\n  command_timeout_max: 1h\n",
        "limits.command_timeout_max",
    );
    refused(
        "ci-locked",
        "limits:\n  wall_time: 3h\n",
        "limits.wall_time",
    );
    refused(
        "ci-locked",
        "limits:\n  spill_size: unlimited\n",
        "limits.spill_size",
    );
    refused(
        "workstation",
        "limits:\n  spill_size: 65MiB\n",
        "limits.spill_size",
    );
    // The built-in timeouts are limits too.
    refused(
        "workstation",
        "limits:\n  command_timeout: 5m\n",
        "limits.command_timeout",
    );
}

#[test]
fn lifting_a_limit_with_unlimited_is_refused() {
    refused(
        "ci-locked",
        "limits:\n  memory: unlimited\n",
        "limits.memory",
    );
    refused(
        "ci-locked",
        "limits:\n  cpu_time: unlimited\n",
        "limits.cpu_time",
    );
    refused(
        "workstation",
        "limits:\n  command_timeout_max: unlimited\n",
        "limits.command_timeout_max",
    );
}

#[test]
fn setting_an_environment_variable_is_refused() {
    refused(
        "workstation",
        "environment:\n  set:\n    LD_PRELOAD: /tmp/x.so\n",
        "environment.set.LD_PRELOAD",
    );
}

#[test]
fn inheriting_the_whole_environment_is_refused() {
    refused(
        "workstation",
        "environment:\n  inherit: all\n",
        "environment.inherit",
    );
}

#[test]
fn allowing_more_environment_variables_is_refused() {
    refused(
        "workstation",
        "environment:\n  allow: [GITHUB_TOKEN]\n",
        "environment.allow",
    );
}

#[test]
fn accepting_a_missing_guarantee_is_refused() {
    refused("workstation", "accept_missing: [G-NET]\n", "accept_missing");
}

#[test]
fn adding_an_allow_rule_is_refused() {
    refused(
        "workstation",
        "rules:\n  commands:\n    - {id: let-me, prefix: [git, push], decision: allow}\n",
        "rules.commands[let-me]",
    );
    refused(
        "workstation",
        "rules:\n  paths:\n    - {id: let-me, pattern: '**/.env', decision: allow}\n",
        "rules.paths[let-me]",
    );
}

#[test]
fn extends_is_refused() {
    let err = refused("ci-locked", "extends: danger-full-access\n", "extends");
    assert!(
        err.to_string().starts_with(".bridle/profile.yaml:1:10: "),
        "{err}"
    );
    // Even extending the profile already in force.
    refused("ci-locked", "extends: ci-locked\n", "extends");
}

#[test]
fn allow_dangerous_workspace_root_is_refused() {
    refused(
        "workstation",
        "allow_dangerous_workspace_root: true\n",
        "allow_dangerous_workspace_root",
    );
}

#[test]
fn loose_boolean_spellings_are_rejected() {
    // Booleans are strict: `yes`/`on` are not silently read as true.
    let source = MemSource::new().with("deployer.yaml", DEPLOYER);
    let err = load(
        &source,
        &LoadRequest {
            workspace_layer: Some(ws("allow_dangerous_workspace_root: yes\n")),
            ..request("workstation")
        },
    )
    .expect_err("yes is not a boolean");
    assert!(matches!(err, PolicyError::ParseProfile { .. }), "{err:?}");
    assert!(err.to_string().contains("invalid boolean"), "{err}");
}

#[test]
fn the_first_widening_key_is_reported_with_its_location() {
    let err = refused(
        "workstation",
        "description: mine\nmode: read-only\nnetwork: on\n",
        "network",
    );
    assert!(
        err.to_string().starts_with(".bridle/profile.yaml:3:10: "),
        "{err}"
    );
}

#[test]
fn tightening_the_mode_is_accepted() {
    let text = "mode: read-only\n";
    let policy = accepted(text);
    assert_eq!(policy.mode.value, SandboxMode::ReadOnly);
    assert_eq!(
        policy.mode.origin,
        origin_of(".bridle/profile.yaml", text, "read-only")
    );
}

#[test]
fn restating_the_current_values_is_accepted() {
    let policy = accepted("mode: workspace-write\nnetwork: off\napproval: never\n");
    assert_eq!(policy.network.value, Network::Off);
    assert_eq!(policy.approval.value, ApprovalPolicy::Never);
    accepted("allow_dangerous_workspace_root: false\n");
}

#[test]
fn network_off_is_accepted_over_a_network_on_flag() {
    let policy = load(
        &ShippedOnly,
        &LoadRequest {
            overrides: Overrides {
                network: Some(Network::On),
                ..Overrides::default()
            },
            workspace_layer: Some(ws("network: off\n")),
            ..request("workstation")
        },
    )
    .unwrap();
    assert_eq!(policy.network.value, Network::Off);
    assert!(
        matches!(&policy.network.origin, Origin::File { file, .. } if file == ".bridle/profile.yaml")
    );
}

#[test]
fn a_workspace_layer_cannot_undo_a_flag_that_tightened() {
    let err = load(
        &ShippedOnly,
        &LoadRequest {
            overrides: Overrides {
                mode: Some(SandboxMode::ReadOnly),
                ..Overrides::default()
            },
            workspace_layer: Some(ws("mode: workspace-write\n")),
            ..request("workstation")
        },
    )
    .unwrap_err();
    assert!(err.to_string().contains("command line --mode"), "{err}");
}

#[test]
fn adding_deny_and_ask_rules_is_accepted() {
    let text = "rules:\n  commands:\n    - {id: no-make, prefix: [make], decision: deny}\n    - {id: ask-npm, prefix: [npm], decision: ask}\n  paths:\n    - {id: no-lock, pattern: '**/*.lock', decision: deny}\n";
    let policy = accepted(text);
    let ids: Vec<(&str, Decision)> = policy
        .command_rules
        .iter()
        .map(|r| (r.id.as_str(), r.decision))
        .collect();
    assert!(ids.contains(&("no-make", Decision::Deny)), "{ids:?}");
    assert!(ids.contains(&("ask-npm", Decision::Ask)), "{ids:?}");
    let rule = policy
        .path_rules
        .iter()
        .find(|r| r.id == "no-lock")
        .unwrap();
    assert_eq!(
        rule.origin,
        origin_of(".bridle/profile.yaml", text, "no-lock")
    );
}

#[test]
fn appending_protected_and_masked_paths_and_scrub_patterns_is_accepted() {
    let policy = accepted(
        "protected_paths: [Makefile]\nmasked_paths: [~/.config/secrets]\nenvironment:\n  scrub: [EDITOR]\n",
    );
    assert!(policy.protected_paths.iter().any(|p| p.value == "Makefile"));
    assert!(
        policy
            .masked_paths
            .iter()
            .any(|p| p.value == "~/.config/secrets")
    );
    assert!(policy.environment.scrub.iter().any(|p| p.value == "EDITOR"));
}

#[test]
fn lowering_limits_is_accepted() {
    let text = "limits:\n  processes: 64\n  memory: 1GiB\n  command_timeout: 1m\n";
    let policy = accepted(text);
    assert_eq!(policy.limits.processes.value, Some(64));
    assert_eq!(policy.limits.memory.value, Some(1 << 30));
    assert_eq!(policy.limits.command_timeout.value, Some(60));
    assert_eq!(
        policy.limits.processes.origin,
        origin_of(".bridle/profile.yaml", text, "64")
    );
    // Setting a limit the deployer left unlimited is a tightening.
    let policy = accepted("limits:\n  open_files: 256\n");
    assert_eq!(policy.limits.open_files.value, Some(256));
    let policy =
        check_workspace_layer(&shipped("workstation"), &ws("limits:\n  memory: 512MiB\n")).unwrap();
    assert_eq!(policy.limits.memory.value, Some(512 << 20));
    let text = "limits:\n  spill_size: 1MiB\n";
    let policy = accepted(text);
    assert_eq!(policy.limits.spill_size.value, Some(1 << 20));
    assert_eq!(
        policy.limits.spill_size.origin,
        origin_of(".bridle/profile.yaml", text, "1MiB")
    );
}

#[test]
fn removing_grants_is_accepted() {
    let policy = accepted(
        "writable_roots: {remove: [/opt/cache]}\nreadable_roots: {remove: [/opt/data]}\naccept_missing: {remove: [G-FS-PROTECT]}\nenvironment:\n  allow: {remove: [MY_TOOL_HOME]}\n",
    );
    assert!(policy.writable_roots.is_empty());
    assert!(!policy.readable_roots.iter().any(|r| r.value == "/opt/data"));
    assert!(policy.accept_missing.is_empty());
    assert!(
        !policy
            .environment
            .allow
            .iter()
            .any(|a| a.value == "MY_TOOL_HOME")
    );
}

#[test]
fn removing_an_allow_write_flag_root_is_accepted() {
    let policy = load(
        &ShippedOnly,
        &LoadRequest {
            overrides: Overrides {
                allow_write: vec!["/opt/out".into()],
                ..Overrides::default()
            },
            workspace_layer: Some(ws("writable_roots: {remove: [/opt/out]}\n")),
            ..request("workstation")
        },
    )
    .unwrap();
    assert!(policy.writable_roots.is_empty());
}

#[test]
fn removing_an_entry_that_is_not_there_is_still_an_error() {
    let err = check_workspace_layer(
        &shipped("workstation"),
        &ws("writable_roots: {remove: [/nope]}\n"),
    )
    .unwrap_err();
    assert!(matches!(err, PolicyError::InvalidValue { .. }), "{err:?}");
}

#[test]
fn check_workspace_layer_leaves_the_base_policy_untouched() {
    let base = shipped("workstation");
    let before = base.clone();
    let tightened = check_workspace_layer(&base, &ws("mode: read-only\n")).unwrap();
    assert_eq!(base, before);
    assert_eq!(tightened.mode.value, SandboxMode::ReadOnly);
}

#[test]
fn workspace_layer_is_parsed_with_the_same_strictness() {
    let err = load_with_workspace("workstation", "mdoe: read-only\n").unwrap_err();
    assert!(
        err.to_string()
            .starts_with("ws.yaml:1:1: unknown field `mdoe`"),
        "{err}"
    );
    let err = load_with_workspace("workstation", "").unwrap_err();
    assert!(matches!(err, PolicyError::ParseProfile { .. }), "{err:?}");
}

#[test]
fn workspace_layer_file_is_recorded_as_a_workspace_layer() {
    let policy = load_with_workspace("workstation", "network: off\n").unwrap();
    let last = policy.layers.last().unwrap();
    assert_eq!(
        (last.name.as_str(), last.kind),
        ("ws.yaml", LayerKind::Workspace)
    );
}

#[test]
fn the_workspace_may_turn_the_cache_home_off_or_shrink_it_but_not_add_paths() {
    use bridle_policy::CacheHome;
    let policy = accepted("cache_home: {mode: \"off\"}\n");
    assert_eq!(policy.cache_home.mode.value, CacheHome::Off);
    let policy = accepted("cache_home: {paths: {remove: [~/.local]}}\n");
    assert!(
        !policy
            .cache_home
            .paths
            .iter()
            .any(|p| p.value == "~/.local")
    );
    refused(
        "workstation",
        "cache_home: {paths: [~/.config]}\n",
        "cache_home.paths",
    );
    let source = MemSource::new().with(
        "off.yaml",
        "extends: workspace-write\ncache_home: {mode: \"off\"}\n",
    );
    let err = load(
        &source,
        &LoadRequest {
            workspace_layer: Some(ws("cache_home: {mode: per-workspace}\n")),
            ..request("off.yaml")
        },
    )
    .unwrap_err();
    assert!(err.to_string().contains("`cache_home.mode`"), "{err}");
}
