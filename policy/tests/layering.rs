//! Layering: how each layer combines with the ones below it, and where every effective value is
//! recorded to have come from.

#![cfg(test)]

mod support;

use bridle_policy::{
    ApprovalPolicy, EnvInherit, Guarantee, LayerKind, LoadRequest, Network, Origin, Overrides,
    Policy, SandboxMode, ShippedOnly, Sourced, load,
};
use pretty_assertions::assert_eq;

use support::{MemSource, origin_of, request, shipped, shipped_text};

const BASE: &str = "\
mode: workspace-write
approval: ask
masked_paths:
  - ~/.a
  - ~/.b
writable_roots: [/opt/cache]
limits:
  processes: 100
  memory: 1GiB
environment:
  allow: [MY_TOOL_*]
  set:
    BASE_ONLY: base
    SHARED: from-base
rules:
  commands:
    - {id: ask-make, prefix: [make], decision: ask}
    - {id: deny-rm, prefix: [rm], decision: deny}
";

fn child(text: &str) -> Policy {
    let source = MemSource::new()
        .with("base.yaml", BASE)
        .with("child.yaml", format!("extends: base.yaml\n{text}"));
    match load(&source, &request("child.yaml")) {
        Ok(policy) => policy,
        Err(err) => panic!("{err}"),
    }
}

/// The values of a sourced list.
fn values<T: Clone>(list: &[Sourced<T>]) -> Vec<T> {
    list.iter().map(|s| s.value.clone()).collect()
}

fn rule_ids(policy: &Policy) -> Vec<&str> {
    policy.command_rules.iter().map(|r| r.id.as_str()).collect()
}

/// Where `needle` sits in the child layer (whose text is prefixed by one `extends` line).
fn in_child(text: &str, needle: &str) -> Origin {
    origin_of("child.yaml", &format!("extends: base.yaml\n{text}"), needle)
}

#[test]
fn plain_list_appends_to_the_layer_below() {
    let text = "masked_paths: [~/.c, ~/.a]\n";
    let policy = child(text);
    assert_eq!(values(&policy.masked_paths), ["~/.a", "~/.b", "~/.c"]);
    // The duplicate keeps its original origin.
    assert_eq!(
        policy.masked_paths[0].origin,
        origin_of("base.yaml", BASE, "~/.a")
    );
    assert_eq!(policy.masked_paths[2].origin, in_child(text, "~/.c"));
}

#[test]
fn append_and_remove_edit_the_list_below() {
    let policy = child("masked_paths:\n  remove: [~/.a]\n  append: [~/.z]\n");
    assert_eq!(values(&policy.masked_paths), ["~/.b", "~/.z"]);
    let policy = child("writable_roots: {remove: [/opt/cache]}\n");
    assert_eq!(values(&policy.writable_roots), Vec::<String>::new());
}

#[test]
fn replace_starts_the_list_over() {
    let text = "masked_paths: {replace: [~/.only, ~/.only]}\n";
    let policy = child(text);
    assert_eq!(values(&policy.masked_paths), ["~/.only"]);
    assert_eq!(policy.masked_paths[0].origin, in_child(text, "~/.only"));
    // Even the built-in defaults can be replaced by a deployer.
    let policy = child("protected_paths: {replace: [.secrets]}\n");
    assert_eq!(values(&policy.protected_paths), [".secrets"]);
    let policy = child("environment:\n  scrub: {replace: []}\n");
    assert_eq!(values(&policy.environment.scrub), Vec::<String>::new());
}

#[test]
fn rule_lists_append_remove_by_id_and_replace() {
    let policy = child("rules:\n  commands:\n    - {id: deny-dd, prefix: [dd], decision: deny}\n");
    assert_eq!(rule_ids(&policy), ["ask-make", "deny-rm", "deny-dd"]);
    let policy = child("rules:\n  commands: {remove: [ask-make]}\n");
    assert_eq!(rule_ids(&policy), ["deny-rm"]);
    let policy = child(
        "rules:\n  commands:\n    replace:\n      - {id: ask-make, prefix: [make, install], decision: deny}\n",
    );
    assert_eq!(rule_ids(&policy), ["ask-make"]);
    assert_eq!(
        policy.command_rules[0].prefix,
        [vec!["make"], vec!["install"]]
    );
}

#[test]
fn scalars_are_overridden_by_the_upper_layer() {
    let text =
        "mode: read-only\napproval: never\nnetwork: on\nallow_dangerous_workspace_root: true\n";
    let policy = child(text);
    assert_eq!(policy.mode.value, SandboxMode::ReadOnly);
    assert_eq!(policy.mode.origin, in_child(text, "read-only"));
    assert_eq!(policy.approval.value, ApprovalPolicy::Never);
    assert_eq!(policy.approval.origin, in_child(text, "never"));
    assert_eq!(policy.network.value, Network::On);
    assert_eq!(policy.network.origin, in_child(text, "on\n"));
    assert!(policy.allow_dangerous_workspace_root.value);
    assert_eq!(
        policy.allow_dangerous_workspace_root.origin,
        in_child(text, "true")
    );
}

#[test]
fn unset_scalars_keep_the_lower_layer_or_builtin_value() {
    let policy = child("description: child\n");
    assert_eq!(
        policy.mode.origin,
        origin_of("base.yaml", BASE, "workspace-write")
    );
    assert_eq!(policy.network, Sourced::builtin(Network::Off));
    assert_eq!(
        policy.allow_dangerous_workspace_root,
        Sourced::builtin(false)
    );
}

#[test]
fn limits_merge_key_by_key() {
    let text = "limits:\n  memory: 2GiB\n  wall_time: 5m\n";
    let policy = child(text);
    let l = &policy.limits;
    assert_eq!(l.processes.value, Some(100));
    assert_eq!(l.processes.origin, origin_of("base.yaml", BASE, "100"));
    assert_eq!(l.memory.value, Some(2 << 30));
    assert_eq!(l.memory.origin, in_child(text, "2GiB"));
    assert_eq!(l.wall_time.value, Some(300));
    assert_eq!(l.wall_time.origin, in_child(text, "5m"));
    assert_eq!(l.command_timeout, Sourced::builtin(Some(120)));
    // `unlimited` lifts a limit set below.
    let policy = child("limits:\n  processes: unlimited\n");
    assert_eq!(policy.limits.processes.value, None);
    assert_eq!(policy.limits.memory.value, Some(1 << 30));
}

#[test]
fn environment_merges_key_by_key() {
    let text =
        "environment:\n  inherit: all\n  set:\n    SHARED: from-child\n    CHILD_ONLY: child\n";
    let policy = child(text);
    let env = &policy.environment;
    assert_eq!(env.inherit.value, EnvInherit::All);
    assert!(values(&env.allow).contains(&"MY_TOOL_*".to_owned()));
    assert!(values(&env.allow).contains(&"PATH".to_owned()));
    let set: Vec<(&str, &str)> = env
        .set
        .iter()
        .map(|(k, v)| (k.as_str(), v.value.as_str()))
        .collect();
    assert_eq!(
        set,
        [
            ("BASE_ONLY", "base"),
            ("CHILD_ONLY", "child"),
            ("SHARED", "from-child")
        ]
    );
    assert_eq!(env.set["SHARED"].origin, in_child(text, "from-child"));
    assert_eq!(
        env.set["BASE_ONLY"].origin,
        origin_of("base.yaml", BASE, "base\n")
    );
}

#[test]
fn rules_mapping_merges_commands_and_paths_independently() {
    let text = "rules:\n  paths:\n    - {id: ask-lock, pattern: '**/*.lock', decision: ask}\n";
    let policy = child(text);
    assert_eq!(rule_ids(&policy), ["ask-make", "deny-rm"]);
    assert_eq!(policy.path_rules.len(), 1);
    assert_eq!(policy.path_rules[0].origin, in_child(text, "ask-lock"));
}

#[test]
fn layers_are_recorded_base_first() {
    let policy = child("description: child\n");
    let layers: Vec<(&str, LayerKind)> = policy
        .layers
        .iter()
        .map(|l| (l.name.as_str(), l.kind))
        .collect();
    assert_eq!(
        layers,
        [
            ("base.yaml", LayerKind::Profile),
            ("child.yaml", LayerKind::Profile)
        ]
    );
    assert_eq!(policy.profile, "child.yaml");
    assert_eq!(
        policy.description.map(|d| d.value),
        Some("child".to_owned())
    );
}

#[test]
fn ci_locked_chain_records_the_layer_that_set_each_value() {
    let policy = shipped("ci-locked");
    let layers: Vec<&str> = policy.layers.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(
        layers,
        [
            "profiles/workspace-write.yaml",
            "profiles/workstation.yaml",
            "profiles/ci-locked.yaml"
        ]
    );
    let ww = |needle| {
        origin_of(
            "profiles/workspace-write.yaml",
            shipped_text("workspace-write"),
            needle,
        )
    };
    let ws = |needle| {
        origin_of(
            "profiles/workstation.yaml",
            shipped_text("workstation"),
            needle,
        )
    };
    let ci = |needle| origin_of("profiles/ci-locked.yaml", shipped_text("ci-locked"), needle);

    assert_eq!(
        policy.mode,
        Sourced::new(SandboxMode::WorkspaceWrite, ww("workspace-write\n"))
    );
    assert_eq!(
        policy.approval,
        Sourced::new(ApprovalPolicy::Never, ci("never"))
    );
    assert_eq!(policy.network, Sourced::new(Network::Off, ci("off")));
    assert_eq!(policy.tested_kernel_abi, Some(Sourced::new(7, ww("7"))));
    assert_eq!(
        policy.description.as_ref().map(|d| &d.origin),
        Some(&ci("unattended CI;"))
    );
    assert_eq!(
        policy.masked_paths[0],
        Sourced::new("~/.ssh".to_owned(), ww("~/.ssh"))
    );
    assert_eq!(policy.limits.processes, Sourced::new(Some(512), ci("512")));
    assert_eq!(
        policy.limits.command_timeout,
        Sourced::new(Some(600), ci("10m"))
    );
    assert_eq!(policy.readable_roots, [Sourced::builtin("/".to_owned())]);
    assert_eq!(
        policy.protected_paths[0],
        Sourced::builtin(".git/hooks".to_owned())
    );

    let rules: Vec<(&str, &Origin)> = policy
        .command_rules
        .iter()
        .map(|r| (r.id.as_str(), &r.origin))
        .collect();
    assert_eq!(
        rules,
        [
            ("deny-sudo", &ws("deny-sudo")),
            ("deny-git-push", &ci("deny-git-push\n")),
            ("deny-network-clients", &ci("deny-network-clients")),
            ("deny-package-publish", &ci("deny-package-publish")),
            ("deny-staged-publish", &ci("deny-staged-publish")),
            ("deny-registry-changes", &ci("deny-registry-changes")),
        ]
    );
    assert_eq!(policy.path_rules[0].origin, ws("ask-env-files"));
}

#[test]
fn workstation_chain_keeps_workspace_write_values_it_does_not_set() {
    let policy = shipped("workstation");
    assert_eq!(policy.mode.value, SandboxMode::WorkspaceWrite);
    assert!(
        matches!(&policy.mode.origin, Origin::File { file, .. } if file == "profiles/workspace-write.yaml")
    );
    assert!(
        matches!(&policy.approval.origin, Origin::File { file, .. } if file == "profiles/workstation.yaml")
    );
    assert!(
        matches!(&policy.network.origin, Origin::File { file, .. } if file == "profiles/workspace-write.yaml")
    );
    let ids: Vec<&str> = policy.command_rules.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(ids, ["ask-git-push", "deny-sudo"]);
}

#[test]
fn command_line_overrides_have_flag_origins() {
    let policy = load(
        &ShippedOnly,
        &LoadRequest {
            overrides: Overrides {
                mode: Some(SandboxMode::ReadOnly),
                network: Some(Network::On),
                allow_write: vec!["/opt/out".into(), "/opt/out".into(), "build".into()],
                ..Overrides::default()
            },
            ..request("ci-locked")
        },
    )
    .unwrap();
    assert_eq!(
        policy.mode,
        Sourced::new(SandboxMode::ReadOnly, Origin::flag("--mode"))
    );
    assert_eq!(
        policy.network,
        Sourced::new(Network::On, Origin::flag("--network"))
    );
    assert_eq!(
        policy.writable_roots,
        [
            Sourced::new("/opt/out".to_owned(), Origin::flag("--allow-write")),
            Sourced::new("build".to_owned(), Origin::flag("--allow-write")),
        ]
    );
    let last = policy.layers.last().unwrap();
    assert_eq!(
        (last.name.as_str(), last.kind, last.path.clone()),
        ("command line", LayerKind::Flags, None)
    );
    // Flags are shown as such in `policy show`.
    let shown = policy
        .entries()
        .into_iter()
        .find(|e| e.key == "mode")
        .unwrap();
    assert_eq!(shown.origin.to_string(), "command line --mode");
}

#[test]
fn no_overrides_adds_no_flags_layer() {
    let policy = shipped("workspace-write");
    assert!(policy.layers.iter().all(|l| l.kind != LayerKind::Flags));
}

#[test]
fn flags_may_widen_a_deployer_profile() {
    let policy = load(
        &ShippedOnly,
        &LoadRequest {
            overrides: Overrides {
                mode: Some(SandboxMode::DangerFullAccess),
                ..Overrides::default()
            },
            ..request("read-only")
        },
    )
    .unwrap();
    assert_eq!(policy.mode.value, SandboxMode::DangerFullAccess);
}

#[test]
fn accept_missing_is_a_list_of_guarantee_codes() {
    let text = "accept_missing: [G-FS-PROTECT, G-RES]\n";
    let policy = child(text);
    assert_eq!(
        values(&policy.accept_missing),
        [Guarantee::FsProtect, Guarantee::Res]
    );
    assert_eq!(
        policy.accept_missing[0].origin,
        in_child(text, "G-FS-PROTECT")
    );
    let grand = MemSource::new()
        .with("base.yaml", BASE)
        .with("child.yaml", format!("extends: base.yaml\n{text}"))
        .with(
            "grand.yaml",
            "extends: child.yaml\naccept_missing: {remove: [G-RES]}\n",
        );
    let policy = load(&grand, &request("grand.yaml")).unwrap();
    assert_eq!(values(&policy.accept_missing), [Guarantee::FsProtect]);
}

#[test]
fn entries_list_every_key_in_a_stable_order() {
    let policy = shipped("read-only");
    let keys: Vec<String> = policy.entries().into_iter().map(|e| e.key).collect();
    let mut firsts: Vec<&str> = Vec::new();
    for key in &keys {
        if firsts.last() != Some(&key.as_str()) {
            firsts.push(key);
        }
    }
    assert_eq!(
        firsts,
        [
            "description",
            "tested_kernel_abi",
            "mode",
            "approval",
            "network",
            "unix_sockets",
            "readable_roots",
            "writable_roots",
            "protected_paths",
            "masked_paths",
            "limits.processes",
            "limits.memory",
            "limits.file_size",
            "limits.open_files",
            "limits.cpu_time",
            "limits.wall_time",
            "limits.command_timeout",
            "limits.command_timeout_max",
            "limits.spill_size",
            "environment.inherit",
            "environment.allow",
            "environment.scrub",
            "cache_home.mode",
            "cache_home.paths",
            "accept_missing",
            "allow_dangerous_workspace_root",
            "agent.preset",
            "agent.tools.remove",
        ]
    );
    assert_eq!(policy.entries(), policy.entries());
}

#[test]
fn env_flags_pass_or_set_variables_with_flag_origins() {
    use bridle_policy::EnvOverride;
    let policy = load(
        &ShippedOnly,
        &LoadRequest {
            overrides: Overrides {
                env: vec![
                    EnvOverride {
                        name: "RUSTFLAGS".into(),
                        value: None,
                    },
                    EnvOverride {
                        name: "MODE".into(),
                        value: Some("ci".into()),
                    },
                ],
                ..Overrides::default()
            },
            ..request("workspace-write")
        },
    )
    .unwrap();
    assert!(
        policy
            .environment
            .allow
            .contains(&Sourced::new("RUSTFLAGS".to_owned(), Origin::flag("--env")))
    );
    assert_eq!(
        policy.environment.set.get("MODE"),
        Some(&Sourced::new("ci".to_owned(), Origin::flag("--env")))
    );
    let host: std::collections::BTreeMap<String, String> = [
        ("RUSTFLAGS".to_owned(), "-Dwarnings".to_owned()),
        ("BUILD_FLAVOUR".to_owned(), "x".to_owned()),
        ("GITHUB_TOKEN".to_owned(), "x".to_owned()),
    ]
    .into();
    let decisions = bridle_policy::env_decisions(&policy, &host);
    let find = |name: &str| decisions.iter().find(|d| d.name == name).unwrap();
    assert!(find("RUSTFLAGS").passed, "{:?}", find("RUSTFLAGS"));
    assert!(!find("BUILD_FLAVOUR").passed);
    assert!(
        find("BUILD_FLAVOUR")
            .reason
            .contains("not in `environment.allow`")
    );
    assert!(!find("GITHUB_TOKEN").passed);
    assert!(find("GITHUB_TOKEN").reason.contains("`*TOKEN*`"));
}

#[test]
fn an_env_flag_naming_a_scrubbed_variable_is_refused() {
    use bridle_policy::{EnvOverride, PolicyError};
    for value in [None, Some("x".to_owned())] {
        let err = load(
            &ShippedOnly,
            &LoadRequest {
                overrides: Overrides {
                    env: vec![EnvOverride {
                        name: "GITHUB_TOKEN".into(),
                        value: value.clone(),
                    }],
                    ..Overrides::default()
                },
                ..request("workspace-write")
            },
        )
        .unwrap_err();
        assert!(
            matches!(&err, PolicyError::EnvScrubbed { name, pattern, .. } if name == "GITHUB_TOKEN" && pattern == "*TOKEN*"),
            "{err}"
        );
        assert!(err.to_string().contains("--env GITHUB_TOKEN"), "{err}");
    }
}

#[test]
fn a_timeout_flag_lowers_the_wall_time_and_never_raises_it() {
    let with = |profile: &str, secs: u64| {
        load(
            &ShippedOnly,
            &LoadRequest {
                overrides: Overrides {
                    timeout_secs: Some(secs),
                    ..Overrides::default()
                },
                ..request(profile)
            },
        )
        .unwrap()
        .limits
        .wall_time
    };
    assert_eq!(
        with("workspace-write", 90),
        Sourced::new(Some(90), Origin::flag("--timeout"))
    );
    // ci-locked's wall_time is 2h: a longer --timeout does not widen it.
    let kept = with("ci-locked", 10 * 3600);
    assert_eq!(kept.value, Some(2 * 3600));
    assert!(matches!(kept.origin, Origin::File { .. }));
}
