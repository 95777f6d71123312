//! `bridle tool bash`: the one-shot bash tool through the agent's pipeline (rules, approvals,
//! sandbox, output caps, denial attribution).

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::support::{Env, Run, path_str, run};

fn tool(env: &Env, profile: &str, args: &str) -> (Run, Value) {
    let mut cmd = env.bridle();
    cmd.args(["--profile", profile, "tool", "bash", args])
        .stdin(std::process::Stdio::null());
    let r = run(&mut cmd);
    let v: Value = serde_json::from_str(r.stdout.trim())
        .unwrap_or_else(|e| panic!("not one JSON object ({e}):\n{}\n{}", r.stdout, r.stderr));
    (r, v)
}

#[test]
fn bash_runs_confined_and_reports_output_and_exit_status() {
    let env = Env::new();
    let (r, v) = tool(
        &env,
        "workspace-write",
        r#"{"command": "echo hello; echo oops >&2; touch made.txt; exit 3"}"#,
    );
    r.assert_code(1);
    assert_eq!(v["ok"], false);
    assert_eq!(v["exit_code"], 3);
    let content = v["content"].as_str().unwrap();
    assert!(
        content.contains("hello")
            && content.contains("[stderr]\noops")
            && content.contains("[exit code 3]"),
        "{content}"
    );
    assert!(env.workspace.join("made.txt").exists());
    assert_eq!(v["sandbox"]["mode"], "workspace-write");
    let (r, v) = tool(&env, "workspace-write", r#"{"command": "true"}"#);
    r.assert_code(0);
    assert_eq!(v["ok"], true);
}

#[test]
fn git_push_inside_a_compound_command_is_denied_by_rule() {
    let env = Env::new();
    let (r, v) = tool(&env, "ci-locked", r#"{"command": "cd x && git push"}"#);
    r.assert_code(1);
    assert_eq!(v["denied_by"], "rule");
    assert!(
        v["content"].as_str().unwrap().contains("deny-git-push"),
        "{v}"
    );
}

#[test]
fn plain_shell_syntax_runs_without_approval_where_rules_exist() {
    // The old splitter asked for any `$(...)`, function or here document; with rules that
    // cannot match them, they run (confined by the sandbox) without asking.
    let env = Env::new();
    let (r, v) = tool(
        &env,
        "workstation",
        r#"{"command": "f() { echo \"in $(echo f)\"; }; f; cat <<EOF\nhere $((6*7))\nEOF"}"#,
    );
    r.assert_code(0);
    let content = v["content"].as_str().unwrap();
    assert!(
        content.contains("in f") && content.contains("here 42"),
        "{v}"
    );
}

#[test]
fn a_rule_inside_a_nested_shell_or_behind_global_options_still_denies() {
    let env = Env::new();
    for command in [
        "bash -c 'echo $(git push)'",
        "git -C . --no-pager push",
        "find . -maxdepth 0 -exec git push \\;",
    ] {
        let args = serde_json::json!({ "command": command }).to_string();
        let (r, v) = tool(&env, "ci-locked", &args);
        r.assert_code(1);
        assert_eq!(v["denied_by"], "rule", "{command}: {v}");
        assert!(
            v["content"].as_str().unwrap().contains("deny-git-push"),
            "{command}: {v}"
        );
    }
}

#[test]
fn ask_rule_without_a_terminal_is_unavailable() {
    let env = Env::new();
    let (r, v) = tool(
        &env,
        "workstation",
        r#"{"command": "git push origin main"}"#,
    );
    r.assert_code(1);
    assert_eq!(v["denied_by"], "approval");
    assert!(
        v["content"].as_str().unwrap().contains("unavailable"),
        "{v}"
    );
}

#[test]
fn escalation_is_rejected_unavailable_or_invalid_with_distinct_messages() {
    let env = Env::new();
    let outside = env.home.join("outside.txt");
    let args = format!(
        r#"{{"command": "echo x > {}", "sandbox_permissions": "danger-full-access", "justification": "needs it"}}"#,
        path_str(&outside)
    );
    let (_, never) = tool(&env, "ci-locked", &args);
    assert_eq!(never["denied_by"], "approval");
    assert!(
        never["content"].as_str().unwrap().contains("`never`"),
        "{never}"
    );
    let (_, unavailable) = tool(&env, "workstation", &args);
    assert!(
        unavailable["content"]
            .as_str()
            .unwrap()
            .contains("unavailable"),
        "{unavailable}"
    );
    assert_ne!(never["content"], unavailable["content"]);
    assert!(!outside.exists(), "a denied escalation ran");
    let (_, narrower) = tool(
        &env,
        "workstation",
        r#"{"command": "true", "sandbox_permissions": "read-only", "justification": "x"}"#,
    );
    assert!(
        narrower["content"]
            .as_str()
            .unwrap()
            .contains("must be wider"),
        "{narrower}"
    );
    let (_, unjustified) = tool(
        &env,
        "workstation",
        r#"{"command": "true", "sandbox_permissions": "danger-full-access"}"#,
    );
    assert!(
        unjustified["content"]
            .as_str()
            .unwrap()
            .contains("justification"),
        "{unjustified}"
    );
}

#[test]
fn approved_escalation_runs_that_one_call_wider() {
    let env = Env::new();
    let outside = env.home.join("escalated.txt");
    let args = format!(
        r#"{{"command": "echo x > {}", "sandbox_permissions": "danger-full-access", "justification": "write the report outside"}}"#,
        path_str(&outside)
    );
    // A real terminal answers `y` at the prompt.
    let r = super::support::bridle_in_pty(
        &["--profile", "workstation", "tool", "bash", &args],
        &env.home,
        &env.workspace,
        Some("y"),
        None,
    );
    assert!(
        r.stdout.contains("approval needed for tool `bash`")
            && r.stdout.contains("write the report outside"),
        "{}",
        r.stdout
    );
    r.assert_code(0);
    assert!(r.stdout.contains(r#""escalated":true"#), "{}", r.stdout);
    assert_eq!(std::fs::read_to_string(&outside).unwrap(), "x\n");
    // The next call is back to the profile's mode: the host file is out of reach again.
    let (_, v) = tool(
        &env,
        "workstation",
        &format!(r#"{{"command": "echo y > {}"}}"#, path_str(&outside)),
    );
    assert_eq!(v["sandbox"]["escalated"], false, "{v}");
    assert_eq!(std::fs::read_to_string(&outside).unwrap(), "x\n");
}

#[test]
fn sandbox_denial_is_attributed_but_an_ordinary_permission_error_is_not() {
    let env = Env::new();
    let (_, denied) = tool(
        &env,
        "workspace-write",
        r#"{"command": "touch /etc/bridle-probe"}"#,
    );
    assert!(
        denied["sandbox"]["denied_by_sandbox"]
            .as_str()
            .is_some_and(|s| s.contains("/etc/bridle-probe")),
        "{denied}"
    );
    assert!(
        denied["content"]
            .as_str()
            .unwrap()
            .contains("denied by the sandbox"),
        "{denied}"
    );
    env.write("locked.txt", "secret");
    let (_, own) = tool(
        &env,
        "workspace-write",
        r#"{"command": "chmod 000 locked.txt && cat locked.txt"}"#,
    );
    assert_eq!(own["ok"], false, "{own}");
    assert!(
        own["content"]
            .as_str()
            .unwrap()
            .contains("Permission denied"),
        "{own}"
    );
    assert!(
        own["sandbox"]["denied_by_sandbox"].is_null(),
        "a permission error the sandbox did not cause was attributed: {own}"
    );
    // A file its owner and mode refuse bridle's user anyway (as root, it is read).
    let (_, shadow) = tool(
        &env,
        "workspace-write",
        r#"{"command": "cat /etc/shadow > /dev/null"}"#,
    );
    assert!(
        shadow["sandbox"]["denied_by_sandbox"].is_null(),
        "reading a file the user may not read was attributed to the sandbox: {shadow}"
    );
    let (_, net) = tool(
        &env,
        "workspace-write",
        r#"{"command": "curl -sS --max-time 5 http://example.invalid/"}"#,
    );
    assert!(
        net["sandbox"]["denied_by_sandbox"]
            .as_str()
            .is_some_and(|s| s.contains("network")),
        "{net}"
    );
}

#[test]
fn a_failure_to_reach_the_network_is_attributed_from_the_kernels_count_whatever_it_printed() {
    let env = Env::new();
    // The message names no network error bridle knows (as npm's `ENOTCACHED` or pip's retries
    // do not): the kernel's count of the attempt attributes it.
    let reach = "python3 -c \"import socket\ntry:\n  socket.create_connection(('192.0.2.1', 80), timeout=2)\nexcept OSError:\n  raise SystemExit('fetching the index went wrong')\"";
    for name in ["bash", "terminal"] {
        let args = if name == "bash" {
            json!({ "command": reach })
        } else {
            json!({ "input": format!("{reach}\n") })
        };
        let r = run(env
            .bridle()
            .args([
                "--profile",
                "workspace-write",
                "tool",
                name,
                &args.to_string(),
            ])
            .stdin(std::process::Stdio::null()));
        let v: Value = serde_json::from_str(r.stdout.trim()).unwrap();
        let content = v["content"].as_str().unwrap();
        assert!(content.contains("fetching the index went wrong"), "{v}");
        assert_eq!(
            v["sandbox"]["denied_by_sandbox"],
            "the network is off (the command tried to reach it once)",
            "{name}: {v}"
        );
    }
    // A failure that sent nothing anywhere is not the network's.
    let (_, v) = tool(&env, "workspace-write", r#"{"command": "exit 3"}"#);
    assert!(v["sandbox"]["denied_by_sandbox"].is_null(), "{v}");
}

#[test]
fn timeout_kills_the_whole_tree() {
    let env = Env::new();
    let token = format!("bridle-tool-timeout-{}", std::process::id());
    let args =
        format!(r#"{{"command": "setsid sleep 300 & sleep 300; : {token}", "timeout_secs": 1}}"#);
    let start = Instant::now();
    let (_, v) = tool(&env, "workspace-write", &args);
    assert!(start.elapsed() < Duration::from_secs(20));
    assert_eq!(v["timed_out"], true, "{v}");
    assert!(super::support::processes_with(&token).is_empty());
    let (_, too_long) = tool(
        &env,
        "ci-locked",
        r#"{"command": "true", "timeout_secs": 999999}"#,
    );
    assert!(
        too_long["content"].as_str().unwrap().contains("maximum"),
        "{too_long}"
    );
}

#[test]
fn a_gigabyte_of_output_keeps_memory_bounded_and_spills_up_to_the_spill_size() {
    let env = Env::new();
    let session = env.home.join("session");
    let mut cmd = env.bridle();
    cmd.args([
        "tool",
        "--session-dir",
        path_str(&session),
        "bash",
        r#"{"command": "head -c 1073741824 /dev/zero | tr '\\0' 'z'"}"#,
    ]);
    // Peak memory of this bridle process: its own high-water mark, read while it runs (the
    // test process's RUSAGE_CHILDREN would count every other test's children too).
    cmd.stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let child = cmd.spawn().unwrap();
    let status_file = format!("/proc/{}/status", child.id());
    let peak = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let sampler = {
        let peak = peak.clone();
        std::thread::spawn(move || {
            while let Ok(text) = std::fs::read_to_string(&status_file) {
                let hwm = text
                    .lines()
                    .find_map(|l| l.strip_prefix("VmHWM:"))
                    .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok());
                match hwm {
                    Some(kib) => peak.fetch_max(kib, std::sync::atomic::Ordering::Relaxed),
                    // A zombie has no memory figures left: it is over.
                    None => break,
                };
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
        })
    };
    let out = child.wait_with_output().unwrap();
    sampler.join().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let v: Value = serde_json::from_str(stdout.trim()).unwrap();
    let content = v["content"].as_str().unwrap();
    assert!(
        content.len() < 100_000,
        "content is {} bytes",
        content.len()
    );
    let spill = content
        .split_whitespace()
        .find(|w| w.contains("/session/tmp/") && w.ends_with(".stdout"))
        .unwrap_or_else(|| panic!("no spill path in {}", &content[..content.len().min(300)]));
    let meta = std::fs::metadata(spill).unwrap();
    assert_eq!(
        meta.len(),
        64 << 20,
        "the spill file is not cut at the default spill size"
    );
    let dropped = format!(
        "the other {} bytes were not kept: limits.spill_size is 64MiB",
        (1u64 << 30) - (64 << 20)
    );
    assert!(
        content.contains(&dropped),
        "{}",
        content
            .chars()
            .skip(16 * 1024)
            .take(400)
            .collect::<String>()
    );
    std::fs::remove_file(spill).unwrap();
    let peak = peak.load(std::sync::atomic::Ordering::Relaxed);
    assert!(peak > 0, "no memory figure was read");
    assert!(peak < 200 * 1024, "bridle peaked at {peak} KiB");
}

#[test]
fn invalid_arguments_and_unknown_tools_are_reported() {
    let env = Env::new();
    let (r, v) = tool(
        &env,
        "workspace-write",
        r#"{"command": "true", "frobnicate": 1}"#,
    );
    r.assert_code(1);
    assert!(
        v["content"]
            .as_str()
            .unwrap()
            .contains("unknown field `frobnicate`"),
        "{v}"
    );
    let (r, v) = tool(&env, "workspace-write", "not json");
    r.assert_code(1);
    assert!(
        v["content"].as_str().unwrap().contains("invalid arguments"),
        "{v}"
    );
    // A usage error is the one JSON object too, with the `content` every result has.
    let r = run(env.bridle().args(["tool", "teleport", "{}"]));
    r.assert_code(2);
    let v: Value = serde_json::from_str(r.stdout.trim()).unwrap();
    assert_eq!(v["ok"], false, "{v}");
    assert!(
        v["content"]
            .as_str()
            .is_some_and(|c| c.contains("unknown tool `teleport`")),
        "{v}"
    );
    assert_eq!(v["exit_code"], 2, "{v}");
}

/// git rewrites its repository config under a lock bridle holds for the run, so `git config`
/// fails with git's own words ("could not lock config file .git/config: File exists"), naming
/// the config relative to the top of the work tree. The model must learn that the sandbox did
/// it, that no wider mode lifts it, and what to do instead, from the bash tool and the terminal.
#[test]
fn a_change_to_the_protected_git_config_is_attributed_with_what_to_do_instead() {
    let env = Env::new();
    let git = |args: &[&str]| {
        let out = std::process::Command::new("git")
            .args(args)
            .current_dir(&env.workspace)
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {out:?}");
    };
    git(&["init", "-q"]);
    std::fs::create_dir_all(env.workspace.join("src")).unwrap();
    let config = env.workspace.join(".git/config");
    let before = std::fs::read_to_string(&config).unwrap();
    let (_, v) = tool(
        &env,
        "workspace-write",
        r#"{"command": "git config user.email agent@example.com", "workdir": "src"}"#,
    );
    assert_eq!(v["ok"], false, "{v}");
    let what = v["sandbox"]["denied_by_sandbox"]
        .as_str()
        .unwrap_or_default();
    assert!(
        what.contains(&format!("`{}` is a protected path", path_str(&config)))
            && what.contains("git -c NAME=VALUE"),
        "{v}"
    );
    let content = v["content"].as_str().unwrap();
    assert!(
        content.contains("do not ask for `sandbox_permissions`")
            && !content.contains("call again with `sandbox_permissions`"),
        "{v}"
    );
    let mut cmd = env.bridle();
    cmd.args([
        "--profile",
        "workspace-write",
        "tool",
        "terminal",
        r#"{"input": "git remote add upstream ../elsewhere\n", "wait_ms": 3000}"#,
    ])
    .stdin(std::process::Stdio::null());
    let r = run(&mut cmd);
    let v: Value = serde_json::from_str(r.stdout.trim()).unwrap();
    assert!(
        v["sandbox"]["denied_by_sandbox"]
            .as_str()
            .is_some_and(|w| w.contains("is a protected path")),
        "{v}"
    );
    assert!(
        v["content"]
            .as_str()
            .unwrap()
            .contains("denied by the sandbox (mode workspace-write)"),
        "{v}"
    );
    assert_eq!(std::fs::read_to_string(&config).unwrap(), before);
    // A command that succeeds while git could not update the config (`git branch -D` deletes
    // the branch but keeps its section) is told why too.
    git(&[
        "-c",
        "user.name=t",
        "-c",
        "user.email=t@e",
        "commit",
        "-q",
        "--allow-empty",
        "-m",
        "a",
    ]);
    git(&["branch", "feat"]);
    git(&["config", "branch.feat.description", "work in progress"]);
    let (_, v) = tool(
        &env,
        "workspace-write",
        r#"{"command": "git branch -D feat"}"#,
    );
    assert_eq!(v["ok"], true, "{v}");
    let content = v["content"].as_str().unwrap();
    assert!(
        content.contains("could not lock config file")
            && content.contains("is a protected path")
            && content.contains("do not ask for `sandbox_permissions`"),
        "{v}"
    );
}
