//! Planning: an effective policy plus the session's facts become a `SandboxSpec`. Dangerous
//! roots are refused, each mode gets its writable roots and guarantees, and the result is
//! deterministic.

#![cfg(test)]

mod support;

use std::path::{Path, PathBuf};

use bridle_policy::{
    FoundPath, FsProfileSource, Guarantee, LoadRequest, Network, Overrides, PlanContext, Policy,
    PolicyError, SandboxMode, SeccompProfile, ShippedOnly, SourceFile, load, plan,
};
use pretty_assertions::assert_eq;

use support::{CONFIG, HOME, STATE, TEMP, WORKSPACE, ctx, ctx_in, load_text, request, shipped};

fn policy(text: &str) -> Policy {
    load_text(text).unwrap_or_else(|e| panic!("{e}"))
}

fn dangerous(text: &str) -> Policy {
    policy(&format!("{text}allow_dangerous_workspace_root: true\n"))
}

fn with_allow_write(profile: &str, dirs: &[&str]) -> Policy {
    load(
        &ShippedOnly,
        &LoadRequest {
            overrides: Overrides {
                allow_write: dirs.iter().map(|d| (*d).to_owned()).collect(),
                ..Overrides::default()
            },
            ..request(profile)
        },
    )
    .unwrap()
}

fn paths(list: &[&str]) -> Vec<PathBuf> {
    list.iter().map(PathBuf::from).collect()
}

#[test]
fn dangerous_workspace_roots_are_refused() {
    let cases = [
        ("/", "it is the filesystem root"),
        (HOME, "it is your home directory"),
        ("/home", "it contains your home directory `/home/dev`"),
        (
            "/home/dev/.local/state/bridle/sessions",
            "inside bridle's own state",
        ),
        (STATE, "inside bridle's own state"),
        (
            "/home/dev/.config/bridle/profiles",
            "configuration directory",
        ),
        ("/home/dev/project/../..", "it contains your home directory"),
    ];
    for profile in [
        "workspace-write",
        "read-only",
        "danger-full-access",
        "ci-locked",
    ] {
        let policy = shipped(profile);
        for (workspace, why_part) in cases {
            let err = plan(&policy, &ctx_in(workspace)).unwrap_err();
            match &err {
                PolicyError::DangerousRoot { what, path, why } => {
                    assert_eq!(*what, "workspace root");
                    assert_eq!(path, &bridle_policy::normalize(Path::new(workspace)));
                    assert!(why.contains(why_part), "{workspace}: {why}");
                }
                other => panic!("{profile} {workspace}: expected DangerousRoot, got {other:?}"),
            }
            let msg = err.to_string();
            assert!(msg.starts_with("refusing workspace root `"), "{msg}");
            assert!(
                msg.contains("allow_dangerous_workspace_root: true"),
                "{msg}"
            );
        }
    }
}

#[test]
fn workspace_containing_the_state_dir_is_refused() {
    let err = plan(&shipped("workspace-write"), &ctx_in("/home/dev/.local")).unwrap_err();
    match &err {
        PolicyError::StateInsideWritableRoot { what, path, state } => {
            assert_eq!(*what, "workspace root");
            assert_eq!(path, Path::new("/home/dev/.local"));
            assert_eq!(state, Path::new(STATE));
        }
        other => panic!("expected StateInsideWritableRoot, got {other:?}"),
    }
    assert!(
        err.to_string()
            .contains("must stay outside every writable root"),
        "{err}"
    );
}

#[test]
fn workspace_containing_the_config_dir_is_refused() {
    // Deployer profiles live there: a writable config dir would let the agent widen the policy
    // of the next session.
    for workspace in ["/home/dev/.config", "/home/dev/.config/bridle"] {
        let err = plan(&shipped("workspace-write"), &ctx_in(workspace)).unwrap_err();
        assert!(
            matches!(
                &err,
                PolicyError::DangerousRoot {
                    what: "workspace root",
                    ..
                }
            ),
            "{workspace}: {err:?}"
        );
        assert!(err.to_string().contains("configuration directory"), "{err}");
    }
    let err = plan(&with_allow_write("workspace-write", &["~/.config"]), &ctx()).unwrap_err();
    assert!(
        matches!(
            &err,
            PolicyError::DangerousRoot {
                what: "writable root",
                ..
            }
        ),
        "{err:?}"
    );
}

#[test]
fn dangerous_workspace_roots_are_allowed_when_the_deployer_opts_in() {
    let policy = dangerous("mode: workspace-write\n");
    for workspace in [
        "/",
        HOME,
        "/home",
        "/home/dev/.local",
        STATE,
        "/home/dev/.config",
    ] {
        let spec = plan(&policy, &ctx_in(workspace)).unwrap().spec;
        assert_eq!(spec.workspace, Path::new(workspace));
        assert_eq!(spec.writable_roots[0], Path::new(workspace));
    }
}

#[test]
fn ordinary_project_directories_are_accepted() {
    let policy = shipped("workspace-write");
    for workspace in [
        "/home/dev/project",
        "/srv/build/repo",
        "/home/dev/.localised",
        "/tmp/w",
    ] {
        assert!(plan(&policy, &ctx_in(workspace)).is_ok(), "{workspace}");
    }
}

#[test]
fn dangerous_extra_writable_roots_are_refused() {
    for (root, variant_is_state) in [
        ("/", false),
        ("~", false),
        ("/home", false),
        ("~/.local/state/bridle/x", false),
        ("~/.local/state", true),
    ] {
        let err = plan(&with_allow_write("workspace-write", &[root]), &ctx()).unwrap_err();
        match (&err, variant_is_state) {
            (PolicyError::DangerousRoot { what, .. }, false)
            | (PolicyError::StateInsideWritableRoot { what, .. }, true) => {
                assert_eq!(*what, "writable root", "{root}");
            }
            (other, _) => panic!("{root}: unexpected {other:?}"),
        }
        assert!(
            err.to_string().starts_with("refusing writable root `"),
            "{err}"
        );
    }
    let err = plan(
        &policy("mode: workspace-write\nwritable_roots: [/]\n"),
        &ctx(),
    )
    .unwrap_err();
    assert!(
        matches!(
            err,
            PolicyError::DangerousRoot {
                what: "writable root",
                ..
            }
        ),
        "{err:?}"
    );
    let opted_in = dangerous("mode: workspace-write\nwritable_roots: [/]\n");
    assert!(
        plan(&opted_in, &ctx())
            .unwrap()
            .spec
            .writable_roots
            .contains(&PathBuf::from("/"))
    );
}

#[test]
fn extra_writable_roots_are_ignored_outside_workspace_write() {
    for mode in [SandboxMode::ReadOnly, SandboxMode::DangerFullAccess] {
        let policy = load(
            &ShippedOnly,
            &LoadRequest {
                overrides: Overrides {
                    mode: Some(mode),
                    allow_write: vec!["/".into(), "/opt/out".into()],
                    ..Overrides::default()
                },
                ..request("workspace-write")
            },
        )
        .unwrap();
        let spec = plan(&policy, &ctx()).unwrap().spec;
        assert!(
            !spec.writable_roots.contains(&PathBuf::from("/opt/out")),
            "{mode}"
        );
    }
}

#[test]
fn extra_writable_roots_are_expanded_and_protected_too() {
    let policy = with_allow_write(
        "workspace-write",
        &["/opt/out", "~/cache", "build", "/home/dev/project"],
    );
    let spec = plan(&policy, &ctx()).unwrap().spec;
    assert_eq!(
        spec.writable_roots,
        paths(&[
            WORKSPACE,
            "/home/dev/cache",
            "/home/dev/project/build",
            "/opt/out",
            TEMP,
            "/dev/null"
        ])
    );
    assert!(
        spec.protected_paths
            .contains(&PathBuf::from("/opt/out/.git/hooks"))
    );
    assert!(
        spec.protected_paths
            .contains(&PathBuf::from("/home/dev/cache/.bridle"))
    );
}

#[test]
fn read_only_mode_writes_only_the_temp_dir_and_dev_null() {
    let spec = plan(&shipped("read-only"), &ctx()).unwrap().spec;
    assert_eq!(spec.writable_roots, paths(&[TEMP, "/dev/null"]));
    assert_eq!(spec.protected_paths, Vec::<PathBuf>::new());
    assert!(spec.private_tmp);
    assert!(spec.guarantees.contains(&Guarantee::FsWrite));
    assert!(!spec.guarantees.contains(&Guarantee::FsProtect));
}

#[test]
fn danger_full_access_requires_only_process_tree_fd_and_environment_hygiene() {
    let spec = plan(&shipped("danger-full-access"), &ctx()).unwrap().spec;
    assert_eq!(
        spec.guarantees,
        [Guarantee::Tree, Guarantee::Fd, Guarantee::Env]
    );
    assert_eq!(spec.writable_roots, Vec::<PathBuf>::new());
    assert_eq!(spec.seccomp, SeccompProfile::None);
    assert_eq!(spec.network, Network::On);
    assert!(!spec.private_tmp);

    let limited = policy("extends: danger-full-access\nlimits:\n  memory: 4GiB\n");
    let spec = plan(&limited, &ctx()).unwrap().spec;
    assert_eq!(
        spec.guarantees,
        [
            Guarantee::Tree,
            Guarantee::Fd,
            Guarantee::Env,
            Guarantee::Res
        ]
    );
}

#[test]
fn danger_full_access_drops_masks_and_forces_network_on() {
    let policy = policy("extends: ci-locked\nmode: danger-full-access\nnetwork: off\n");
    let spec = plan(&policy, &ctx()).unwrap().spec;
    assert_eq!(spec.masked_paths, Vec::<PathBuf>::new());
    assert_eq!(spec.network, Network::On);
    assert!(!spec.guarantees.contains(&Guarantee::FsMask));
    assert!(!spec.guarantees.contains(&Guarantee::Net));
}

#[test]
fn resource_guarantee_appears_when_an_os_limit_is_set() {
    let none = plan(&shipped("workspace-write"), &ctx()).unwrap().spec;
    assert!(!none.guarantees.contains(&Guarantee::Res));
    for limit in [
        "processes: 10",
        "memory: 1GiB",
        "file_size: 1MiB",
        "open_files: 64",
        "cpu_time: 1m",
        "wall_time: 1h",
    ] {
        let p = policy(&format!("extends: workspace-write\nlimits:\n  {limit}\n"));
        let spec = plan(&p, &ctx()).unwrap().spec;
        assert_eq!(spec.guarantees.last(), Some(&Guarantee::Res), "{limit}");
    }
    // Tool-call timeouts and the spill size are bridle's, not the kernel's.
    for limit in ["command_timeout: 30s", "spill_size: 1MiB"] {
        let p = policy(&format!("extends: workspace-write\nlimits:\n  {limit}\n"));
        assert!(
            !plan(&p, &ctx())
                .unwrap()
                .spec
                .guarantees
                .contains(&Guarantee::Res),
            "{limit}"
        );
    }
}

#[test]
fn spill_size_takes_units_and_bounds_the_session_budget() {
    let spec = plan(&shipped("workspace-write"), &ctx()).unwrap().spec;
    assert_eq!(spec.limits.spill_size_bytes, Some(64 << 20));
    assert_eq!(spec.limits.session_spill_budget(), Some(256 << 20));
    let p = policy("extends: workspace-write\nlimits:\n  spill_size: 100KiB\n");
    let limits = plan(&p, &ctx()).unwrap().spec.limits;
    assert_eq!(limits.spill_size_bytes, Some(100 << 10));
    assert_eq!(limits.session_spill_budget(), Some(400 << 10));
    let p = policy("extends: workspace-write\nlimits:\n  spill_size: unlimited\n");
    let limits = plan(&p, &ctx()).unwrap().spec.limits;
    assert_eq!(limits.spill_size_bytes, None);
    assert_eq!(limits.session_spill_budget(), None);
}

#[test]
fn network_on_drops_the_network_guarantee_and_filter() {
    let p = policy("extends: workspace-write\nnetwork: on\n");
    let spec = plan(&p, &ctx()).unwrap().spec;
    assert!(!spec.guarantees.contains(&Guarantee::Net));
    assert_eq!(spec.seccomp, SeccompProfile::Confined);
}

#[test]
fn removing_every_protected_path_drops_the_protect_guarantee() {
    let p = policy("extends: workspace-write\nprotected_paths: {replace: []}\n");
    let spec = plan(&p, &ctx()).unwrap().spec;
    assert!(spec.protected_paths.is_empty());
    assert!(!spec.guarantees.contains(&Guarantee::FsProtect));
}

#[test]
fn accepted_missing_guarantees_reach_the_spec() {
    let p =
        policy("extends: workspace-write\naccept_missing: [G-FS-PROTECT, G-FS-PROTECT, G-IPC]\n");
    let spec = plan(&p, &ctx()).unwrap().spec;
    assert_eq!(spec.accept_missing, [Guarantee::FsProtect, Guarantee::Ipc]);
}

#[test]
fn protected_paths_outside_every_writable_root_are_dropped() {
    let p = policy(
        "extends: workspace-write\nprotected_paths: [/etc/passwd, ~/.bashrc, Makefile, /home/dev/project/ci]\n",
    );
    let spec = plan(&p, &ctx()).unwrap().spec;
    assert_eq!(
        spec.protected_paths,
        paths(&[
            "/home/dev/project/.bridle",
            "/home/dev/project/.git/config",
            "/home/dev/project/.git/hooks",
            "/home/dev/project/Makefile",
            "/home/dev/project/ci",
        ])
    );
}

#[test]
fn masked_paths_expand_home_and_workspace_relative_entries() {
    let p = policy(
        "extends: read-only\nmasked_paths: {replace: [~/.ssh, secrets, /etc/shadow, \"~\"]}\n",
    );
    let spec = plan(&p, &ctx()).unwrap().spec;
    assert_eq!(
        spec.masked_paths,
        paths(&[
            "/etc/shadow",
            HOME,
            "/home/dev/.ssh",
            "/home/dev/project/secrets"
        ])
    );
    assert!(spec.guarantees.contains(&Guarantee::FsMask));
}

#[test]
fn profile_files_inside_the_workspace_become_protected_paths() {
    let root = tempfile::tempdir().unwrap();
    let workspace = root.path().join("project");
    std::fs::create_dir_all(workspace.join("ci")).unwrap();
    std::fs::write(workspace.join("ci/base.yaml"), "extends: workstation\n").unwrap();
    std::fs::write(
        workspace.join("ci/agent.yaml"),
        "extends: base.yaml\nnetwork: off\n",
    )
    .unwrap();
    std::fs::write(
        root.path().join("outside.yaml"),
        "extends: ./project/ci/agent.yaml\n",
    )
    .unwrap();
    std::fs::write(workspace.join("extra.yaml"), "mode: read-only\n").unwrap();
    let ws_layer = SourceFile::read(&workspace.join("extra.yaml")).unwrap();
    let policy = load(
        &FsProfileSource,
        &LoadRequest {
            profile: root.path().join("outside.yaml").display().to_string(),
            overrides: Overrides {
                mode: Some(SandboxMode::WorkspaceWrite),
                ..Overrides::default()
            },
            workspace_layer: Some(SourceFile {
                display: ".bridle/profile.yaml".into(),
                ..ws_layer
            }),
        },
    )
    .unwrap_or_else(|e| panic!("{e}"));
    // The workspace layer tightened to read-only; plan it in workspace-write to see protection.
    let mut policy = policy;
    policy.mode.value = SandboxMode::WorkspaceWrite;
    let ctx = PlanContext {
        workspace: workspace.clone(),
        ..ctx()
    };
    let spec = plan(&policy, &ctx).unwrap().spec;
    for file in ["ci/base.yaml", "ci/agent.yaml", "extra.yaml"] {
        assert!(
            spec.protected_paths.contains(&workspace.join(file)),
            "{file} not protected: {:?}",
            spec.protected_paths
        );
    }
    assert!(
        !spec
            .protected_paths
            .contains(&root.path().join("outside.yaml"))
    );
    assert!(spec.guarantees.contains(&Guarantee::FsProtect));
}

#[test]
fn relative_context_paths_are_refused() {
    let policy = shipped("workspace-write");
    for field in 0..5 {
        let mut ctx = ctx();
        let slot = match field {
            0 => &mut ctx.workspace,
            1 => &mut ctx.home,
            2 => &mut ctx.state_dir,
            3 => &mut ctx.config_dir,
            _ => &mut ctx.temp_dir,
        };
        *slot = PathBuf::from("relative/dir");
        let err = plan(&policy, &ctx).unwrap_err();
        assert!(
            matches!(&err, PolicyError::RelativePath { path } if path == Path::new("relative/dir")),
            "{err:?}"
        );
        assert_eq!(err.to_string(), "path `relative/dir` must be absolute");
    }
}

#[test]
fn workspace_path_is_normalised_lexically() {
    let spec = plan(
        &shipped("workspace-write"),
        &ctx_in("/home/dev/./project/sub/.."),
    )
    .unwrap()
    .spec;
    assert_eq!(spec.workspace, Path::new(WORKSPACE));
    assert_eq!(spec.writable_roots[0], Path::new(WORKSPACE));
}

#[test]
fn environment_is_filtered_then_set_then_given_tmpdir() {
    let p = policy(
        "extends: workspace-write\nenvironment:\n  allow: [MY_*]\n  scrub: [EDITOR]\n  set:\n    TMPDIR: /elsewhere\n    FROM_PROFILE: yes\n",
    );
    let env = plan(&p, &ctx()).unwrap().spec.env;
    assert!(!env.contains_key("MY_API_KEY"), "scrub beats allow");
    assert!(!env.contains_key("EDITOR"));
    assert_eq!(env.get("FROM_PROFILE").map(String::as_str), Some("yes"));
    assert_eq!(
        env.get("TMPDIR").map(String::as_str),
        Some(TEMP),
        "TMPDIR is always the session's"
    );
}

#[test]
fn inherit_all_still_scrubs_secrets() {
    let p = policy("extends: workspace-write\nenvironment:\n  inherit: all\n");
    let mut c = ctx();
    c.host_env.insert("RANDOM_TOOL_SETTING".into(), "1".into());
    let env = plan(&p, &c).unwrap().spec.env;
    assert!(env.contains_key("RANDOM_TOOL_SETTING"));
    for secret in [
        "GITHUB_TOKEN",
        "AWS_SECRET_ACCESS_KEY",
        "SSH_AUTH_SOCK",
        "MY_API_KEY",
    ] {
        assert!(!env.contains_key(secret), "{secret}");
    }
}

#[test]
fn planning_is_deterministic() {
    for (name, _) in bridle_policy::SHIPPED {
        let policy = shipped(name);
        let a = plan(&policy, &ctx()).unwrap();
        let b = plan(&policy, &ctx()).unwrap();
        assert_eq!(a, b, "{name}");
        assert_eq!(format!("{:?}", a.spec), format!("{:?}", b.spec), "{name}");
        // Loading again gives the same policy and the same plan.
        assert_eq!(plan(&shipped(name), &ctx()).unwrap(), a, "{name}");
    }
}

#[test]
fn list_order_in_profiles_does_not_change_the_spec() {
    let a = policy("extends: workstation\nmasked_paths: [~/.b, ~/.a]\nprotected_paths: [z, y]\n");
    let b = policy("extends: workstation\nmasked_paths: [~/.a, ~/.b]\nprotected_paths: [y, z]\n");
    assert_eq!(
        plan(&a, &ctx()).unwrap().spec,
        plan(&b, &ctx()).unwrap().spec
    );
}

#[test]
fn config_and_state_dirs_stay_out_of_the_default_spec() {
    for (name, _) in bridle_policy::SHIPPED {
        let spec = plan(&shipped(name), &ctx()).unwrap().spec;
        for root in &spec.writable_roots {
            assert!(!Path::new(STATE).starts_with(root), "{name}: {root:?}");
            assert!(!root.starts_with(CONFIG), "{name}: {root:?}");
        }
    }
}

fn found(path: impl Into<PathBuf>, what: &str, absent: bool) -> FoundPath {
    FoundPath {
        path: path.into(),
        what: what.into(),
        absent,
    }
}

#[test]
fn found_paths_are_protected_inside_content_roots_only() {
    let before = plan(&shipped("workspace-write"), &ctx()).unwrap();
    let module = Path::new(WORKSPACE).join(".git/modules/lib");
    assert_eq!(
        before.protected_git_names(Path::new(WORKSPACE)),
        paths(&["config", "hooks"])
    );
    let mut context = ctx();
    context.found = vec![
        found(module.join("config"), "git dir of submodule `lib`", false),
        found(module.join("commondir"), "git dir of submodule `lib`", true),
        found("/elsewhere/.git/config", "outside", false),
        found(
            Path::new(TEMP).join("x/.git/config"),
            "in the temp dir",
            false,
        ),
    ];
    let plan = plan(&shipped("workspace-write"), &context).unwrap();
    assert!(plan.spec.protected_paths.contains(&module.join("config")));
    assert_eq!(plan.spec.must_stay_absent, vec![module.join("commondir")]);
    assert!(
        !plan
            .spec
            .protected_paths
            .iter()
            .any(|p| p.starts_with("/elsewhere"))
    );
    assert!(
        !plan
            .spec
            .protected_paths
            .iter()
            .any(|p| p.starts_with(TEMP))
    );
    for path in [module.join("config"), module.join("commondir")] {
        let verdict = plan.decide_write(&path);
        assert!(
            verdict
                .reason
                .contains("found on disk: git dir of submodule `lib`"),
            "{}",
            verdict.reason
        );
    }
}

#[test]
fn found_paths_add_the_protect_guarantee_when_the_profile_had_none() {
    let text = "mode: workspace-write\nprotected_paths: { replace: [] }\n";
    let before = plan(&policy(text), &ctx()).unwrap();
    assert!(!before.spec.guarantees.contains(&Guarantee::FsProtect));
    let mut context = ctx();
    context.found = vec![found(
        Path::new(WORKSPACE).join("lib/.git"),
        "git file",
        false,
    )];
    let plan = plan(&policy(text), &context).unwrap();
    assert!(plan.spec.guarantees.contains(&Guarantee::FsProtect));
    let order: Vec<usize> = plan
        .spec
        .guarantees
        .iter()
        .map(|g| Guarantee::ALL.iter().position(|x| x == g).unwrap())
        .collect();
    assert!(order.windows(2).all(|w| w[0] < w[1]), "{order:?}");
}

/// danger-full-access writes everywhere, the workspace included, and protects nothing.
#[test]
fn danger_full_access_protects_nothing_found() {
    let mut context = ctx();
    context.found = vec![
        found(
            Path::new(WORKSPACE).join(".git/modules/lib/config"),
            "x",
            false,
        ),
        found(
            Path::new(WORKSPACE).join(".git/modules/lib/commondir"),
            "x",
            true,
        ),
    ];
    let plan = plan(&shipped("danger-full-access"), &context).unwrap();
    assert!(plan.spec.protected_paths.is_empty());
    assert!(plan.spec.must_stay_absent.is_empty());
}

#[test]
fn a_found_path_can_be_masked_except_without_confinement() {
    let unmasked = policy("extends: workspace-write\nmasked_paths: {replace: []}\n");
    let before = plan(&unmasked, &ctx()).unwrap();
    assert!(!before.spec.guarantees.contains(&Guarantee::FsMask));
    let sessions = Path::new(STATE).join("sessions");
    let mut context = ctx();
    context.masks = vec![(sessions.clone(), "bridle's session directory".to_owned())];
    let confined = plan(&unmasked, &context).unwrap();
    assert!(confined.spec.masked_paths.contains(&sessions));
    assert!(confined.spec.guarantees.contains(&Guarantee::FsMask));
    let verdict = confined.decide_write(&sessions.join("x.jsonl"));
    assert_eq!(verdict.decision, bridle_policy::Decision::Deny);
    assert!(
        verdict.reason.contains("bridle's session directory"),
        "{}",
        verdict.reason
    );
    let open = plan(&shipped("danger-full-access"), &context).unwrap();
    assert!(open.spec.masked_paths.is_empty());
}

#[test]
fn the_cache_home_is_planned_for_workspace_write_only_and_outside_writable_and_masked_paths() {
    let p = policy(
        "extends: workspace-write\ncache_home: {paths: [~/project/.venv-cache, ~/.ssh/cache, ~/.cache/pip]}\n",
    );
    let spec = plan(&p, &ctx()).unwrap().spec;
    let cache = spec.cache_home.expect("a cache home");
    assert!(
        cache.dir.starts_with("/var/tmp/bridle-1000/cache/"),
        "{cache:?}"
    );
    assert!(
        cache
            .dir
            .display()
            .to_string()
            .contains("home-dev-project-"),
        "{cache:?}"
    );
    // Inside the workspace (writable anyway), inside a masked path, inside another cache path:
    // none gets an overlay of its own.
    for left_out in [
        "/home/dev/project/.venv-cache",
        "/home/dev/.ssh/cache",
        "/home/dev/.cache/pip",
    ] {
        assert!(
            !cache.paths.contains(&PathBuf::from(left_out)),
            "{left_out}: {cache:?}"
        );
    }
    assert!(cache.paths.contains(&PathBuf::from("/home/dev/.cache")));
    for mode in ["read-only", "danger-full-access"] {
        assert_eq!(
            plan(&shipped(mode), &ctx()).unwrap().spec.cache_home,
            None,
            "{mode}"
        );
    }
    // The directory depends on the workspace only, so runs share it and workspaces do not.
    let again = plan(&p, &ctx()).unwrap().spec.cache_home.unwrap();
    assert_eq!(again.dir, cache.dir);
    let other = plan(&p, &ctx_in("/home/dev/other"))
        .unwrap()
        .spec
        .cache_home
        .unwrap();
    assert_ne!(other.dir, cache.dir);
}
