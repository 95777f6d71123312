//! One rule engine behind every consumer: `bridle policy explain bash`, `bridle tool bash`,
//! `bridle tool terminal` and `bridle run` reach the same decision and name the same rule;
//! `explain` exits 0/1/3; `bridle exec` refuses a denied or unapprovable top-level command
//! with 126 before anything runs.

use std::process::Stdio;

use bridle_agent::log::{Event, SessionDir};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use super::support::{Env, ExecEnv, path_str, run, run_bounded};

/// The first rule a text names (`rule `ID``).
/// The rule a result names first ("rule `X`", or "the rules `X` (...) and `Y` ...").
fn named_rule(text: &str) -> Option<String> {
    let rest = text
        .split_once("rule `")
        .or_else(|| text.split_once("rules `"))?
        .1;
    Some(rest.split('`').next()?.to_owned())
}

/// `(outcome, rule)` where the outcome is `allow`, `deny` or `ask` (asked, and refused because
/// nobody could answer).
type Seen = (String, Option<String>);

fn from_tool(v: &Value) -> Seen {
    let content = v["content"].as_str().unwrap_or_default();
    let outcome = match (v["ok"].as_bool(), v["denied_by"].as_str()) {
        (Some(true), _) => "allow",
        (_, Some("rule")) => "deny",
        (_, Some("approval")) if content.contains("unavailable") => "ask",
        _ => panic!("unexpected tool result: {v}"),
    };
    let rule = if outcome == "allow" {
        None
    } else {
        named_rule(content)
    };
    (outcome.to_owned(), rule)
}

fn tool(env: &Env, profile: &str, name: &str, args: &Value) -> Value {
    let mut cmd = env.bridle();
    cmd.args(["--profile", profile, "tool", name, &args.to_string()])
        .stdin(Stdio::null());
    let r = run(&mut cmd);
    serde_json::from_str(r.stdout.trim())
        .unwrap_or_else(|e| panic!("{e}: {}\n{}", r.stdout, r.stderr))
}

fn explain(env: &Env, profile: &str, command: &str) -> (Option<i32>, Value) {
    let r = run(env.bridle().args([
        "--profile",
        profile,
        "policy",
        "explain",
        "bash",
        "--json",
        command,
    ]));
    let v: Value = serde_json::from_str(&r.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}\n{}", r.stdout, r.stderr));
    (r.code, v)
}

/// Workstation: sudo is denied, `git push` asks, what hides a command name runs (its execs
/// are decided by the exec supervisor).
const CASES: [(&str, &str, Option<&str>); 4] = [
    ("cd . && sudo -n true", "deny", Some("deny-sudo")),
    ("git -C . push origin main", "ask", Some("ask-git-push")),
    ("x=true; $x push", "allow", None),
    ("echo \"year $(date +%Y)\"", "allow", None),
];

#[test]
fn every_consumer_reaches_the_same_decision_and_names_the_same_rule() {
    let e = ExecEnv::new();
    let want: Vec<Seen> = CASES
        .iter()
        .map(|(_, outcome, rule)| ((*outcome).to_owned(), rule.map(str::to_owned)))
        .collect();

    let explained: Vec<Seen> = CASES
        .iter()
        .map(|(cmd, _, _)| {
            let (code, v) = explain(&e, "workstation", cmd);
            let outcome = v["decision"].as_str().unwrap().to_owned();
            let expected_code = match outcome.as_str() {
                "allow" => 0,
                "deny" => 1,
                _ => 3,
            };
            assert_eq!(code, Some(expected_code), "{cmd}: {v}");
            let rule = v["by"]["id"]
                .as_str()
                .or(v["by"]["rule"].as_str())
                .map(str::to_owned);
            (outcome, rule)
        })
        .collect();
    assert_eq!(explained, want, "explain bash");

    let bash: Vec<Seen> = CASES
        .iter()
        .map(|(cmd, _, _)| from_tool(&tool(&e, "workstation", "bash", &json!({"command": cmd}))))
        .collect();
    assert_eq!(bash, want, "tool bash");

    let terminal: Vec<Seen> = CASES
        .iter()
        .map(|(cmd, _, _)| {
            from_tool(&tool(
                &e,
                "workstation",
                "terminal",
                &json!({"input": format!("{cmd}\n"), "wait_ms": 1000}),
            ))
        })
        .collect();
    assert_eq!(terminal, want, "tool terminal");

    let calls: Vec<Value> = CASES
        .iter()
        .map(|(cmd, _, _)| json!({"name": "bash", "arguments": {"command": cmd}}))
        .collect();
    let script = serde_json::to_string(&json!([{"tool_calls": calls}, {"text": "done"}])).unwrap();
    let file = e.home.join("script.yaml");
    std::fs::write(&file, script).unwrap();
    let mut cmd = e.bridle();
    cmd.args(["--profile", "workstation", "run", "--model"])
        .arg(format!("script:{}", path_str(&file)))
        .arg("--session-dir")
        .arg(e.home.join("sessions"))
        .arg("check the rules")
        .stdin(Stdio::null());
    let r = run_bounded(&mut cmd);
    r.assert_code(0);
    let id = r
        .stderr
        .lines()
        .find_map(|l| l.strip_prefix("bridle: session "))
        .map(|rest| rest.split(':').next().unwrap().trim().to_owned())
        .unwrap_or_else(|| panic!("no session line:\n{}", r.stderr));
    let dir = SessionDir::existing(&e.home.join("sessions")).unwrap();
    let results: Vec<Seen> = dir
        .read(&id)
        .unwrap()
        .iter()
        .filter_map(|rec| match rec.event().unwrap() {
            Some(Event::ToolResult { ok, content, .. }) => {
                let outcome = if ok {
                    "allow"
                } else if content.starts_with("denied: ") {
                    "deny"
                } else if content.contains("unavailable") {
                    "ask"
                } else {
                    panic!("unexpected result: {content}")
                };
                Some((
                    outcome.to_owned(),
                    if ok { None } else { named_rule(&content) },
                ))
            }
            _ => None,
        })
        .collect();
    assert_eq!(results, want, "bridle run");
}

#[test]
fn explain_bash_prints_the_decision_and_exits_0_allow_1_deny_3_ask() {
    let env = Env::new();
    let r = run(env.bridle().args([
        "--profile",
        "ci-locked",
        "policy",
        "explain",
        "bash",
        "cd x && git -C . push",
    ]));
    r.assert_code(1);
    assert!(
        r.stdout
            .starts_with("deny: `git -C . push` (as `git push`) denied by rule `deny-git-push`"),
        "{}",
        r.stdout
    );
    // The measured disagreement of issue 8: `explain` and the bash tool both allow this now.
    let r = run(env.bridle().args([
        "--profile",
        "ci-locked",
        "policy",
        "explain",
        "bash",
        "bash -c 'echo $(date)'",
    ]));
    r.assert_code(0);
    assert!(r.stdout.starts_with("allow:"), "{}", r.stdout);
    // What the rules cannot see runs; the exec supervisor decides each program it starts.
    let (code, v) = explain(&env, "workstation", "git $sub");
    assert_eq!(code, Some(0));
    assert_eq!(v["decision"], "allow");
    assert_eq!(v["by"]["kind"], "at-exec");
    assert_eq!(v["by"]["what"], "the variable `$sub`");
    assert_eq!(v["by"]["rules"], json!(["ask-git-push"]));
    assert_eq!(v["subject"]["bash"], "git $sub");
    assert_eq!(v["approval"], "ask");
    // Without the supervisor's guarantee (`danger-full-access`), the same text asks.
    let full = env.home.join("full.yaml");
    std::fs::write(&full, "extends: workstation\nmode: danger-full-access\n").unwrap();
    let (code, v) = explain(&env, path_str(&full), "git $sub");
    assert_eq!(code, Some(3), "{v}");
    assert_eq!(v["decision"], "ask");
    assert_eq!(v["by"]["kind"], "hidden");
    assert_eq!(v["by"]["what"], "the variable `$sub`");
    assert_eq!(v["by"]["rule"], "ask-git-push");
    // Every explain subcommand uses the same exit codes.
    let code = |args: &[&str]| {
        run(env
            .bridle()
            .args(["--profile", "ci-locked", "policy", "explain"])
            .args(args))
        .code
    };
    assert_eq!(code(&["exec", "--", "git", "push"]), Some(1));
    assert_eq!(code(&["exec", "--", "git", "status"]), Some(0));
    assert_eq!(code(&["write", "config/.env"]), Some(3));
    assert_eq!(code(&["write", "src/main.rs"]), Some(0));
    assert_eq!(code(&["write", "/etc/passwd"]), Some(1));
    assert_eq!(code(&["bash"]), Some(2));
}

#[test]
fn explain_of_an_allowed_script_says_its_programs_are_decided_again_at_exec() {
    let env = Env::new();
    let text = |profile: &str, args: &[&str], code: i32| {
        let r = run(env
            .bridle()
            .args(["--profile", profile, "policy", "explain"])
            .args(args));
        r.assert_code(code);
        r.stdout
    };
    let out = text("ci-locked", &["bash", "./push.sh"], 0);
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines[0].starts_with("allow: `./push.sh` allowed"), "{out}");
    assert_eq!(
        lines[1],
        "at exec: every program it runs (a script's commands, a program's children) is \
         decided again by these command rules when it starts, and a denied one fails there",
        "{out}"
    );
    let out = text("ci-locked", &["exec", "--json", "--", "./push.sh"], 0);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert!(
        v["at_exec"]
            .as_str()
            .is_some_and(|s| s.starts_with("every program it runs")),
        "{v}"
    );
    // A profile without command rules has no exec supervisor: nothing to say.
    let out = text("workspace-write", &["bash", "./push.sh"], 0);
    assert_eq!(out.lines().count(), 1, "{out}");
    let out = text("workspace-write", &["exec", "--json", "--", "./push.sh"], 0);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["at_exec"], Value::Null, "{v}");
    // A denial is final where it is made: no note.
    let out = text("ci-locked", &["bash", "git push"], 1);
    assert!(!out.contains("at exec:"), "{out}");
}

#[test]
fn explain_of_a_write_a_path_rule_decides_says_commands_are_not_held_by_it() {
    let env = Env::new();
    let explained = |path: &str| {
        let r = run(env.bridle().args([
            "--profile",
            "workstation",
            "policy",
            "explain",
            "write",
            "--json",
            path,
        ]));
        serde_json::from_str::<Value>(&r.stdout).unwrap()
    };
    let v = explained(".env");
    assert_eq!(v["decision"], "ask", "{v}");
    assert!(
        v["commands"].as_str().is_some_and(|s| s
            .starts_with("a path rule decides the file tools' writes")
            && s.contains("since the kernel confines writes by directory, not by name")),
        "{v}"
    );
    // Where no path rule decides, there is nothing to add.
    let v = explained("src/main.rs");
    assert_eq!(v["decision"], "allow", "{v}");
    assert_eq!(v["commands"], Value::Null, "{v}");
}

/// A workspace that is a git repository with a bare remote `origin` inside it.
fn repo_with_remote(e: &ExecEnv) -> std::path::PathBuf {
    let git = |args: &[&str]| {
        let out = std::process::Command::new("git")
            .args(args)
            .current_dir(&e.workspace)
            .env("HOME", &e.home)
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {out:?}");
    };
    git(&["init", "-q", "-b", "main", "."]);
    git(&[
        "-c",
        "user.email=a@example.com",
        "-c",
        "user.name=a",
        "commit",
        "-q",
        "--allow-empty",
        "-m",
        "init",
    ]);
    git(&["init", "-q", "--bare", "remote.git"]);
    let remote = e.workspace.join("remote.git");
    git(&["remote", "add", "origin", path_str(&remote)]);
    remote
}

fn pushed(remote: &std::path::Path) -> bool {
    std::process::Command::new("git")
        .args([
            "--git-dir",
            path_str(remote),
            "rev-parse",
            "--verify",
            "-q",
            "main",
        ])
        .stdout(Stdio::null())
        .status()
        .unwrap()
        .success()
}

#[test]
fn exec_refuses_a_denied_top_level_command_with_126_and_runs_nothing() {
    let e = ExecEnv::new();
    let remote = repo_with_remote(&e);
    for argv in [
        &["git", "push", "origin", "main"][..],
        &["env", "GIT_TRACE=0", "git", "push", "origin", "main"],
        &["git", "-C", ".", "push", "origin", "main"],
        &["sh", "-c", "git push origin main"],
    ] {
        let r = run(e
            .bridle()
            .args(["--profile", "ci-locked", "exec", "--"])
            .args(argv)
            .stdin(Stdio::null()));
        r.assert_code(126);
        let lines: Vec<&str> = r.stderr.lines().collect();
        assert_eq!(lines.len(), 1, "{argv:?}: {}", r.stderr);
        assert!(
            lines[0].starts_with("bridle: ") && lines[0].contains("rule `deny-git-push`"),
            "{argv:?}: {}",
            r.stderr
        );
        assert!(!pushed(&remote), "{argv:?} pushed");
    }
    // Without the rule the same push goes through: the refusal above is the rule's doing.
    let r = run(e
        .bridle()
        .args([
            "--profile",
            "workspace-write",
            "exec",
            "--",
            "git",
            "push",
            "-q",
        ])
        .args(["origin", "main"])
        .stdin(Stdio::null()));
    r.assert_code(0);
    assert!(pushed(&remote));
}

#[test]
fn exec_asks_for_an_ask_rule_and_refuses_when_nobody_can_answer() {
    let e = ExecEnv::new();
    let remote = repo_with_remote(&e);
    let r = run(e
        .bridle()
        .args([
            "--profile",
            "workstation",
            "exec",
            "--",
            "git",
            "push",
            "origin",
            "main",
        ])
        .stdin(Stdio::null()));
    r.assert_code(126);
    assert!(
        r.stderr.starts_with("bridle: ")
            && r.stderr.contains("rule `ask-git-push`")
            && r.stderr.contains("unavailable")
            && r.stderr.lines().count() == 1,
        "{}",
        r.stderr
    );
    assert!(!pushed(&remote));
}

#[test]
fn exec_runs_a_command_no_rule_matches() {
    let e = ExecEnv::new();
    repo_with_remote(&e);
    let r = run(e
        .bridle()
        .args([
            "--profile",
            "ci-locked",
            "exec",
            "--",
            "git",
            "status",
            "--short",
        ])
        .stdin(Stdio::null()));
    r.assert_code(0);
    let r = run(e
        .bridle()
        .args([
            "--profile",
            "ci-locked",
            "exec",
            "--",
            "sh",
            "-c",
            "echo $((6*7))",
        ])
        .stdin(Stdio::null()));
    r.assert_code(0);
    assert_eq!(r.stdout.trim(), "42");
}
