//! `bridle policy show|check|explain` and the CLI surface.

use pretty_assertions::assert_eq;
use serde_json::Value;

use super::support::{Env, path_str, run};

#[test]
fn help_lists_only_working_subcommands() {
    let env = Env::new();
    let r = run(env.bridle().arg("--help"));
    r.assert_code(0);
    for working in [
        "  policy ",
        "  exec ",
        "  probe ",
        "  tool ",
        "  shell ",
        "  log ",
    ] {
        assert!(
            r.stdout.contains(working),
            "--help misses `{working}`:\n{}",
            r.stdout
        );
    }
    assert!(
        !r.stdout.contains("__bridle_launch"),
        "--help lists the hidden launcher:\n{}",
        r.stdout
    );
}

#[test]
fn usage_error_exits_2() {
    let env = Env::new();
    run(env.bridle().args(["policy", "frobnicate"])).assert_code(2);
    run(env.bridle().args(["policy", "explain", "exec"])).assert_code(2);
}

#[test]
fn show_ci_locked_prints_provenance_for_every_value() {
    let env = Env::new();
    let r = run(env
        .bridle()
        .args(["policy", "show", "--profile", "ci-locked"]));
    r.assert_code(0);
    let table: Vec<&str> = r
        .stdout
        .lines()
        .skip_while(|l| !l.starts_with("KEY"))
        .skip(1)
        .take_while(|l| !l.is_empty())
        .collect();
    assert!(table.len() > 20, "{}", r.stdout);
    for row in &table {
        let has_origin = row.ends_with("built-in default")
            || row.contains("command line")
            || row
                .split_whitespace()
                .last()
                .is_some_and(|last| last.contains(".yaml:"));
        assert!(has_origin, "row without provenance: {row}");
    }
    assert!(table.iter().any(|r| r.starts_with("approval")
        && r.contains("never")
        && r.contains("profiles/ci-locked.yaml:")));
    assert!(
        table
            .iter()
            .any(|r| r.starts_with("mode") && r.contains("profiles/workspace-write.yaml:"))
    );
    assert!(table.iter().any(|r| r.starts_with("masked_paths")
        && r.contains("~/.ssh")
        && r.contains("profiles/workspace-write.yaml:")));
}

#[test]
fn show_json_has_entries_with_origins_and_the_spec() {
    let env = Env::new();
    let r = run(env
        .bridle()
        .args(["--profile", "ci-locked", "policy", "show", "--json"]));
    r.assert_code(0);
    let v: Value = serde_json::from_str(&r.stdout).expect("json");
    let entries = v["entries"].as_array().expect("entries");
    assert!(entries.iter().all(|e| e["origin"]["kind"].is_string()));
    let approval = entries
        .iter()
        .find(|e| e["key"] == "approval")
        .expect("approval entry");
    assert_eq!(approval["value"], "never");
    assert_eq!(approval["origin"]["file"], "profiles/ci-locked.yaml");
    assert!(approval["origin"]["line"].as_u64().is_some_and(|l| l > 0));
    assert_eq!(v["spec"]["mode"], "workspace-write");
    assert_eq!(v["spec"]["network"], "off");
    assert_eq!(v["spec"]["workspace"], path_str(&env.workspace));
    let guarantees: Vec<&str> = v["spec"]["guarantees"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g.as_str().unwrap())
        .collect();
    assert!(
        guarantees.contains(&"G-FS-WRITE")
            && guarantees.contains(&"G-NET")
            && guarantees.contains(&"G-RES")
    );
}

#[test]
fn explain_exec_git_push_under_ci_locked_names_the_denying_rule() {
    let env = Env::new();
    let r = run(env.bridle().args([
        "--profile",
        "ci-locked",
        "policy",
        "explain",
        "exec",
        "--",
        "git",
        "push",
        "origin",
        "main",
    ]));
    r.assert_code(1);
    assert!(r.stdout.starts_with("deny:"), "{}", r.stdout);
    assert!(
        r.stdout.contains("deny-git-push") && r.stdout.contains("profiles/ci-locked.yaml:"),
        "{}",
        r.stdout
    );

    let r = run(env.bridle().args([
        "--profile",
        "ci-locked",
        "policy",
        "explain",
        "exec",
        "--json",
        "--",
        "git",
        "status",
    ]));
    let v: Value = serde_json::from_str(&r.stdout).expect("json");
    assert_eq!(v["decision"], "allow");
    assert_eq!(v["by"]["kind"], "default");
}

#[test]
fn explain_write_names_the_root_or_protected_path() {
    let env = Env::new();
    let inside = run(env
        .bridle()
        .args(["policy", "explain", "write", "src/main.rs"]));
    assert!(
        inside.stdout.starts_with("allow:") && inside.stdout.contains(path_str(&env.workspace)),
        "{}",
        inside.stdout
    );

    let outside = run(env
        .bridle()
        .args(["policy", "explain", "write", "/etc/passwd"]));
    assert!(
        outside.stdout.starts_with("deny:")
            && outside.stdout.contains("outside every writable root"),
        "{}",
        outside.stdout
    );

    let hook = run(env
        .bridle()
        .args(["policy", "explain", "write", ".git/hooks/pre-commit"]));
    assert!(
        hook.stdout.starts_with("deny:") && hook.stdout.contains("protected path"),
        "{}",
        hook.stdout
    );

    let escape = run(env
        .bridle()
        .args(["policy", "explain", "write", "../../outside.txt"]));
    assert!(escape.stdout.starts_with("deny:"), "{}", escape.stdout);
}

#[test]
fn explain_write_resolves_symlinks_in_existing_ancestors() {
    let env = Env::new();
    let outside = env.home.join("elsewhere");
    std::fs::create_dir_all(&outside).unwrap();
    std::os::unix::fs::symlink(&outside, env.workspace.join("link")).unwrap();
    let r = run(env
        .bridle()
        .args(["policy", "explain", "write", "link/new-file.txt"]));
    assert!(
        r.stdout.starts_with("deny:"),
        "a symlink out of the workspace must not look writable: {}",
        r.stdout
    );
}

#[test]
fn ask_under_approval_never_says_it_is_rejected() {
    let env = Env::new();
    let r = run(env.bridle().args([
        "--profile",
        "ci-locked",
        "policy",
        "explain",
        "write",
        "config/.env",
    ]));
    assert!(
        r.stdout.starts_with("ask:") && r.stdout.contains("never"),
        "{}",
        r.stdout
    );
}

#[test]
fn check_accepts_every_shipped_profile_by_path() {
    let env = Env::new();
    // Written out from the copies embedded in the binary's policy crate, so the test does not
    // depend on the source tree being readable (the suite also runs as an unprivileged user).
    for (name, text) in bridle_policy::SHIPPED {
        let path = env.home.join(format!("{name}.yaml"));
        std::fs::write(&path, text).unwrap();
        let r = run(env.bridle().args(["policy", "check", path_str(&path)]));
        r.assert_code(0);
        assert!(r.stdout.contains(": ok"), "{}", r.stdout);
        // No shipped rule names a shell builtin: every one is decided at the exec.
        assert!(!r.stdout.contains("note: rule"), "{name}: {}", r.stdout);
    }
}

#[test]
fn check_and_show_say_a_rule_naming_a_shell_builtin_is_decided_on_text_only() {
    let env = Env::new();
    let file = env.home.join("mine.yaml");
    std::fs::write(
        &file,
        "extends: workstation\nrules:\n  commands:\n    - {id: deny-ulimit, prefix: [ulimit], decision: deny}\n",
    )
    .unwrap();
    let r = run(env.bridle().args(["policy", "check", path_str(&file)]));
    r.assert_code(0);
    let note = "note: rule `deny-ulimit` (";
    assert!(
        r.stdout.contains(note) && r.stdout.contains("decided on command-line text only"),
        "{}",
        r.stdout
    );
    assert_eq!(r.stdout.matches("note: rule").count(), 1, "{}", r.stdout);
    let r = run(env
        .bridle()
        .args(["--profile", path_str(&file), "policy", "show"]));
    r.assert_code(0);
    assert!(r.stdout.contains(note), "{}", r.stdout);
}

#[test]
fn deployer_profile_extends_a_shipped_one_and_overrides_with_provenance() {
    let env = Env::new();
    let file = env.home.join("team.yaml");
    std::fs::write(
        &file,
        "extends: ci-locked\nnetwork: on\nlimits:\n  processes: 64\n",
    )
    .unwrap();
    let r = run(env
        .bridle()
        .args(["--profile", path_str(&file), "policy", "show"]));
    r.assert_code(0);
    let row = |key: &str| {
        r.stdout
            .lines()
            .find(|l| l.starts_with(key))
            .unwrap_or_default()
            .to_owned()
    };
    assert!(
        row("network ").contains("on") && row("network ").contains("team.yaml:2:10"),
        "{}",
        r.stdout
    );
    assert!(
        row("limits.processes").contains("64")
            && row("limits.processes").contains("team.yaml:4:14")
    );
    assert!(
        row("limits.memory").contains("profiles/ci-locked.yaml:"),
        "limits merge key by key: {}",
        row("limits.memory")
    );
}

#[test]
fn workspace_configuration_can_tighten_but_not_widen() {
    let env = Env::new();
    env.write(".bridle/profile.yaml", "network: off\nmode: read-only\n");
    let r = run(env.bridle().args(["policy", "show"]));
    r.assert_code(0);
    assert!(
        r.stdout.lines().any(|l| l.starts_with("mode")
            && l.contains("read-only")
            && l.contains(".bridle/profile.yaml:2:7")),
        "{}",
        r.stdout
    );

    env.write(".bridle/profile.yaml", "mode: danger-full-access\n");
    let r = run(env.bridle().args(["policy", "show"]));
    r.assert_code(2);
    assert!(
        r.stderr.contains("profile.yaml:1:7")
            && r.stderr.contains("`mode`")
            && r.stderr.contains("widen"),
        "{}",
        r.stderr
    );

    let checked = run(env
        .bridle()
        .args(["policy", "check", ".bridle/profile.yaml"]));
    checked.assert_code(1);
    assert!(checked.stderr.contains("widen"), "{}", checked.stderr);
}

#[test]
fn home_as_workspace_is_refused() {
    let env = Env::new();
    let r = run(env
        .bridle()
        .args(["policy", "show", "--workspace", path_str(&env.home)]));
    r.assert_code(2);
    assert!(
        r.stderr.starts_with("bridle: refusing workspace root")
            && r.stderr.contains("home directory"),
        "{}",
        r.stderr
    );
    let r = run(env.bridle().args(["policy", "show", "--workspace", "/"]));
    r.assert_code(2);
    assert!(r.stderr.contains("filesystem root"), "{}", r.stderr);
}

#[test]
fn missing_workspace_is_a_clear_error() {
    let env = Env::new();
    let r = run(env
        .bridle()
        .args(["policy", "show", "--workspace", "/no/such/dir"]));
    r.assert_code(2);
    assert!(r.stderr.contains("/no/such/dir"), "{}", r.stderr);
}

#[test]
fn unknown_profile_name_lists_the_shipped_ones() {
    let env = Env::new();
    let r = run(env.bridle().args(["policy", "show", "--profile", "yolo"]));
    r.assert_code(2);
    assert!(
        r.stderr.contains("`yolo`") && r.stderr.contains("ci-locked"),
        "{}",
        r.stderr
    );
}
