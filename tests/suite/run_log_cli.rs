//! What `bridle run` leaves for a security reviewer: read back with `bridle log show` alone,
//! the log says what the agent did, under which policy, who allowed each call, and why the
//! turn ended. Also how the final answer reaches the user's terminal.

use bridle_agent::log::{Event, TurnEndReason};
use pretty_assertions::assert_eq;

use super::run_cli::{agent, agent_cmd_in, events, http_server, session_id, session_id_in};
use super::support::{ExecEnv, Run, assert_contains_all, path_str, run_bounded};

/// `bridle log show ARGS... --session-dir <home>/sessions`.
pub(super) fn show(e: &ExecEnv, args: &[&str]) -> Run {
    let mut cmd = e.bridle();
    cmd.args(["log", "show"])
        .args(args)
        .arg("--session-dir")
        .arg(e.home.join("sessions"));
    let r = run_bounded(&mut cmd);
    r.assert_code(0);
    r
}

#[track_caller]
fn assert_shows(shown: &Run, expected: &[&str]) {
    assert_contains_all(&shown.stdout, expected);
}

#[test]
fn the_policy_digest_is_the_same_on_every_run_and_each_policy_is_logged_once() {
    let e = ExecEnv::new();
    let first = agent(&e, "- text: one\n", &[], "first");
    first.assert_code(0);
    let id = session_id(&first);
    // Another session directory, which the registry lists from now on: bridle's housekeeping,
    // no part of the policy.
    let elsewhere = e.home.join("elsewhere");
    run_bounded(&mut agent_cmd_in(
        &e,
        &elsewhere,
        "- text: elsewhere\n",
        &[],
        "elsewhere",
    ))
    .assert_code(0);
    let other = agent(&e, "- text: two\n", &[], "second");
    other.assert_code(0);
    let digest = |id: &str| match events(&e, id).into_iter().next() {
        Some(Event::SessionHeader(h)) => h.policy_digest,
        other => panic!("{other:?}"),
    };
    // Each run has its own private temp dir; the digest does not see it.
    assert_eq!(digest(&id), digest(&session_id(&other)));
    let resumed = agent(&e, "- text: three\n", &["--resume", &id], "third");
    resumed.assert_code(0);
    assert!(
        !resumed.stderr.contains("policy differs"),
        "{}",
        resumed.stderr
    );
    let policies = |id: &str| -> Vec<bridle_agent::log::PolicySummary> {
        events(&e, id)
            .into_iter()
            .filter_map(|e| match e {
                Event::PolicyEffective(p) => Some(p),
                _ => None,
            })
            .collect()
    };
    let logged = policies(&id);
    assert_eq!(logged.len(), 1, "{logged:?}");
    assert_eq!(logged[0].digest, digest(&id));
    assert!(
        !events(&e, &id)
            .iter()
            .any(|e| matches!(e, Event::SandboxMode { .. })),
        "a spurious policy change was logged"
    );
    let ws = path_str(&e.workspace);
    let shown = show(&e, &[&id]);
    assert_shows(
        &shown,
        &[
            &format!("policy -> sha256:{}", digest(&id)),
            "profile workspace-write  mode workspace-write  approval ask  network off",
            &format!("writable: {ws}, <session temp dir>, /dev/null"),
            &format!("protected: {ws}/.bridle"),
        ],
    );
    // The session directory is among the masked paths (with whatever the profile masks).
    let masked = shown
        .stdout
        .lines()
        .find_map(|l| l.trim_start().strip_prefix("masked: "))
        .unwrap_or_else(|| panic!("no masked line:\n{}", shown.stdout));
    assert!(
        masked
            .split(", ")
            .any(|p| p == path_str(&e.home.join("sessions"))),
        "{masked}"
    );
    // Another policy is logged once, when it first applies.
    for _ in 0..2 {
        let stricter = agent(
            &e,
            "- text: four\n",
            &["--resume", &id, "--profile", "read-only"],
            "fourth",
        );
        stricter.assert_code(0);
    }
    let logged = policies(&id);
    assert_eq!(logged.len(), 2, "{logged:?}");
    assert_eq!(logged[1].mode, bridle_policy::SandboxMode::ReadOnly);
    assert_eq!(logged[1].profile, "read-only");
}

#[test]
fn a_session_dir_that_holds_the_workspace_is_refused() {
    let e = ExecEnv::new();
    let parent = e.workspace.parent().unwrap().to_owned();
    for dir in [parent.as_path(), std::path::Path::new("/")] {
        let r = run_bounded(&mut agent_cmd_in(&e, dir, "- text: hi\n", &[], "task"));
        r.assert_code(2);
        assert!(
            r.stderr.contains(&format!(
                "refusing session dir `{}`: it contains `{}`",
                path_str(dir),
                path_str(&e.workspace)
            )),
            "{}",
            r.stderr
        );
        assert!(
            !dir.join("log.key").exists(),
            "created before it was refused"
        );
    }
}

#[test]
fn why_a_turn_ended_in_error_is_logged_and_shown() {
    let e = ExecEnv::new();
    let (url, _) = http_server(vec![(
        401,
        r#"{"error":{"message":"invalid api key"}}"#.to_owned(),
        std::time::Duration::ZERO,
    )]);
    let mut cmd = e.bridle();
    cmd.env("BRIDLE_BASE_URL", &url)
        .args(["run", "--model", "openai:test-model", "--session-dir"])
        .arg(e.home.join("sessions"))
        .arg("anything");
    let r = run_bounded(&mut cmd);
    r.assert_code(1);
    let id = session_id(&r);
    let Some(Event::TurnEnd { reason, detail, .. }) = events(&e, &id).pop() else {
        panic!("no turn end")
    };
    assert_eq!(reason, TurnEndReason::Error);
    let detail = detail.unwrap();
    assert!(
        detail.contains("authentication failed") && detail.contains("invalid api key"),
        "{detail}"
    );
    assert_shows(
        &show(&e, &[&id]),
        &["turn 0 (error)", &format!("ended error: {detail}")],
    );
}

#[test]
fn the_models_own_id_finish_reason_and_usage_are_shown_per_step() {
    let e = ExecEnv::new();
    let reply = concat!(
        "data: {\"model\":\"test-model-2025-01\",\"choices\":[{\"index\":0,\"delta\":",
        "{\"reasoning_content\":\"The user wants a greeting.\"}}]}\n\n",
        "data: {\"model\":\"test-model-2025-01\",\"choices\":[{\"index\":0,\"delta\":",
        "{\"content\":\"Hello.\"},\"finish_reason\":\"stop\"}]}\n\n",
        "data: {\"model\":\"test-model-2025-01\",\"choices\":[],",
        "\"usage\":{\"prompt_tokens\":42,\"completion_tokens\":7}}\n\n",
        "data: [DONE]\n\n"
    );
    let (url, _) =
        super::run_cli::chat_server_with(vec![(reply.to_owned(), std::time::Duration::ZERO)]);
    let mut cmd = e.bridle();
    cmd.env("BRIDLE_BASE_URL", &url)
        .args(["run", "--model", "openai:test-model", "--session-dir"])
        .arg(e.home.join("sessions"))
        .arg("greet");
    let r = run_bounded(&mut cmd);
    r.assert_code(0);
    assert_shows(
        &show(&e, &[&session_id(&r)]),
        &[
            "step 0  model test-model-2025-01  finish stop  tokens 42 in, 7 out",
            "reasoning: The user wants a greeting.",
            "answer: Hello.",
        ],
    );
}

#[test]
fn the_answer_reaches_a_pipe_byte_for_byte() {
    let e = ExecEnv::new();
    // OSC 52 would set the terminal's clipboard; a pipe gets exactly what the model said.
    let r = agent(
        &e,
        "- text: \"copied\\e]52;c;aGk=\\a\\r\\ndone\"\n",
        &[],
        "answer",
    );
    r.assert_code(0);
    assert_eq!(r.stdout, "copied\u{1b}]52;c;aGk=\u{7}\r\ndone\n");
}

#[test]
fn on_a_terminal_the_answer_is_escaped_and_escalations_are_shown() {
    let e = ExecEnv::new();
    let escaped = e.home.join("escaped.txt");
    let script = format!(
        r#"
- tool_calls:
    - name: bash
      arguments: {{command: "echo x > {escaped}", sandbox_permissions: danger-full-access, justification: "write the report outside"}}
    - name: bash
      arguments: {{command: "touch /etc/bridle-review-probe"}}
    - name: write_file
      arguments: {{path: /etc/bridle-review-probe, content: x}}
- text: "copied\e]52;c;aGk=\a\nline two"
"#,
        escaped = path_str(&escaped)
    );
    let file = e.home.join("script.yaml");
    std::fs::write(&file, script).unwrap();
    let sessions = e.home.join("sessions");
    let model = format!("script:{}", path_str(&file));
    let args = [
        "--profile",
        "workstation",
        "run",
        "--model",
        &model,
        "--session-dir",
        path_str(&sessions),
        "report",
    ];
    // A person at the terminal approves the escalation.
    let r = super::support::bridle_in_pty(&args, &e.home, &e.workspace, Some("y"), None);
    r.assert_code(0);
    if std::fs::read_to_string(&escaped).ok().as_deref() != Some("x\n") {
        // What the call's result said is in the log. It failed in CI (2026-12-07) with
        // "sandbox unavailable: G-FS-PROTECT (opening `/var/tmp/bridle-e2e-…` without
        // following symlinks…": a session directory another test had registered was removed
        // while this escalated call's view pinned its parents. Those pins may vanish now
        // (sandbox/src/mounts/pins.rs); a failure here is something else.
        let shown = show(&e, &[&session_id_in(&r.stdout)]);
        panic!(
            "the approved escalation did not write its file:\n{:?}\nthe log:\n{}",
            r.stdout, shown.stdout
        );
    }
    assert!(!r.stdout.contains("\u{1b}]52"), "{:?}", r.stdout);
    assert!(
        r.stdout.contains("copied\\u{1b}]52;c;aGk=\\u{7}"),
        "{:?}",
        r.stdout
    );
    // Lines stay lines.
    assert!(r.stdout.contains("line two"), "{:?}", r.stdout);
    let id = session_id_in(&r.stdout);
    assert_shows(
        &show(&e, &[&id]),
        &[
            "escalation: asked danger-full-access, ran escalated (mode danger-full-access)",
            "answer: approved by the person at the terminal",
            "denied by the sandbox: ",
            "/etc/bridle-review-probe",
            "refused by: policy",
        ],
    );
    // The escalation's whole account was on the question: the progress line keeps its start
    // (the log keeps it whole, and so does `log show`).
    let whole = "and no privilege over the host is kept";
    let progress = r
        .stdout
        .lines()
        .find(|l| l.contains("→ allow (approved (asks to run"))
        .unwrap_or_else(|| panic!("no progress line:\n{}", r.stdout));
    assert!(!progress.contains(whole), "{progress}");
}
