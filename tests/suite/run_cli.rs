//! `bridle run`: the agent headless, with a scripted model and the real tools under the
//! sandbox; what it did is read back from its session log.

use bridle_agent::log::{Event, SessionDir, TurnEndReason};
use pretty_assertions::assert_eq;

use super::support::{ExecEnv, Run, path_str, run_bounded};

/// Writes `script` into the home (outside the workspace) and runs `bridle run` on it with the
/// sessions in `<home>/sessions`.
pub(super) fn agent(e: &ExecEnv, script: &str, extra: &[&str], task: &str) -> Run {
    run_bounded(&mut agent_cmd(e, script, extra, task))
}

/// The `bridle run` command line of [`agent`], not yet run.
pub(super) fn agent_cmd(
    e: &ExecEnv,
    script: &str,
    extra: &[&str],
    task: &str,
) -> std::process::Command {
    agent_cmd_in(e, &e.home.join("sessions"), script, extra, task)
}

/// [`agent_cmd`] with the sessions in `sessions`.
pub(super) fn agent_cmd_in(
    e: &ExecEnv,
    sessions: &std::path::Path,
    script: &str,
    extra: &[&str],
    task: &str,
) -> std::process::Command {
    let file = e.home.join("script.yaml");
    std::fs::write(&file, script).unwrap();
    let mut cmd = e.bridle();
    cmd.arg("run")
        .arg("--model")
        .arg(format!("script:{}", path_str(&file)))
        .arg("--session-dir")
        .arg(sessions)
        .args(extra)
        .arg(task);
    cmd
}

/// The session id `bridle run` announced on stderr.
pub(super) fn session_id(r: &Run) -> String {
    session_id_in(&r.stderr)
}

/// The session id announced in `stderr`.
pub(super) fn session_id_in(stderr: &str) -> String {
    stderr
        .lines()
        .find_map(|l| l.strip_prefix("bridle: session "))
        .map(|rest| rest.split(':').next().unwrap().trim().to_owned())
        .unwrap_or_else(|| panic!("no session line:\n{stderr}"))
}

pub(super) fn events(e: &ExecEnv, id: &str) -> Vec<Event> {
    let dir = SessionDir::existing(&e.home.join("sessions")).unwrap();
    dir.read(id)
        .unwrap()
        .iter()
        .filter_map(|r| r.event().unwrap())
        .collect()
}

/// The content of every tool result, in order.
pub(super) fn tool_results(events: &[Event]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::ToolResult { content, .. } => Some(content.clone()),
            _ => None,
        })
        .collect()
}

/// Every exec decision, with the call it belongs to, in order.
pub(super) fn exec_events(events: &[Event]) -> Vec<(String, bridle_agent::log::ExecDecision)> {
    events
        .iter()
        .filter_map(|ev| match ev {
            Event::ExecDecision { call_id, exec } => Some((call_id.clone(), exec.clone())),
            _ => None,
        })
        .collect()
}

pub(super) fn decisions(events: &[Event]) -> Vec<(String, String)> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::ToolDecision { decision, by, .. } => Some((decision.to_string(), by.clone())),
            _ => None,
        })
        .collect()
}

pub(super) fn results(events: &[Event]) -> Vec<(bool, String)> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::ToolResult { ok, content, .. } => Some((*ok, content.clone())),
            _ => None,
        })
        .collect()
}

#[test]
fn a_task_runs_confined_and_the_log_says_what_decided_each_call() {
    let e = ExecEnv::new();
    let victim = e.outside.join("victim.txt");
    std::fs::write(&victim, "original").unwrap();
    let script = format!(
        r#"
- text: Working on it.
  tool_calls:
    - name: bash
      arguments: {{command: "echo made > made.txt && echo escaped > {victim}"}}
    - name: write_file
      arguments: {{path: "{victim}", content: overwritten}}
    - name: read_file
      arguments: {{path: made.txt}}
- text: Made made.txt; the file outside was out of reach.
"#,
        victim = path_str(&victim)
    );
    let r = agent(&e, &script, &[], "make a file");
    r.assert_code(0);
    assert_eq!(
        r.stdout.trim(),
        "Made made.txt; the file outside was out of reach."
    );
    assert_eq!(
        std::fs::read_to_string(e.workspace.join("made.txt")).unwrap(),
        "made\n"
    );
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "original");
    let id = session_id(&r);
    let events = events(&e, &id);
    let decisions = decisions(&events);
    assert_eq!(decisions.len(), 3, "{decisions:?}");
    assert_eq!(decisions[0].0, "allow");
    assert_eq!(decisions[1].0, "deny");
    assert!(
        decisions[1].1.contains("outside every writable root"),
        "{decisions:?}"
    );
    assert_eq!(decisions[2].0, "allow");
    let results = results(&events);
    // The command ran but could not write outside: the sandbox said no.
    assert!(
        !results[0].0 && results[0].1.contains("Read-only file system"),
        "{results:?}"
    );
    assert!(!results[1].0, "{results:?}");
    assert!(results[2].0 && results[2].1.contains("made"), "{results:?}");
    assert_eq!(
        events.last(),
        Some(&Event::TurnEnd {
            turn: 0,
            reason: TurnEndReason::Completed,
            detail: None,
            cancelled_by: None,
        })
    );
    // The same story through `bridle log`.
    let mut cmd = e.bridle();
    cmd.args(["log", "show", &id, "--session-dir"])
        .arg(e.home.join("sessions"));
    let shown = run_bounded(&mut cmd);
    shown.assert_code(0);
    assert!(shown.stdout.contains("write_file"), "{}", shown.stdout);
    assert!(
        shown.stdout.contains("deny by write to"),
        "{}",
        shown.stdout
    );
}

#[test]
fn rules_and_approvals_are_recorded_and_fail_closed_without_a_terminal() {
    let e = ExecEnv::new();
    let profile = e.profile(
        "ask.yaml",
        r#"
extends: workspace-write
approval: ask
rules:
  commands:
    append:
      - id: no-push
        prefix: [git, push]
        decision: deny
        justification: pushing needs a person
        examples: ["git push origin main"]
      - id: ask-curl
        prefix: [curl]
        decision: ask
        justification: downloads need approval
        examples: ["curl https://example.com"]
"#,
    );
    let script = r#"
- tool_calls:
    - name: bash
      arguments: {command: "git push origin main"}
    - name: bash
      arguments: {command: "curl https://example.com"}
- text: Both were refused.
"#;
    let r = agent(&e, script, &["--profile", &profile], "publish");
    r.assert_code(0);
    let events = events(&e, &session_id(&r));
    let decisions = decisions(&events);
    assert_eq!(decisions[0].0, "deny");
    assert!(
        decisions[0].1.contains("pushing needs a person"),
        "{decisions:?}"
    );
    assert_eq!(decisions[1], ("deny".into(), "approval unavailable".into()));
    let asked: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            Event::ApprovalDecided { answer, by, .. } => Some((answer.clone(), by.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(
        asked,
        vec![(
            "unavailable".into(),
            "nobody (no terminal to ask on)".into()
        )]
    );
}

#[test]
fn bad_model_output_becomes_an_error_result_not_a_crash() {
    let e = ExecEnv::new();
    let script = r#"
- tool_calls:
    - name: bash
      arguments: '{"command": "ls"'
    - name: rm_everything
      arguments: {}
- text: Sorry.
"#;
    let r = agent(&e, script, &[], "go");
    r.assert_code(0);
    let results = results(&events(&e, &session_id(&r)));
    assert!(
        results[0].1.starts_with("invalid arguments for `bash`"),
        "{results:?}"
    );
    assert!(
        results[1].1.contains("unknown tool `rm_everything`"),
        "{results:?}"
    );
}

#[test]
fn resume_continues_turns_and_fork_branches_a_new_session() {
    let e = ExecEnv::new();
    let first = agent(&e, "- text: one\n", &["--store", "sqlite"], "first");
    first.assert_code(0);
    let id = session_id(&first);
    let second = agent(&e, "- text: two\n", &["--resume", &id], "second");
    second.assert_code(0);
    assert_eq!(session_id(&second), id);
    let turns: Vec<u64> = events(&e, &id)
        .iter()
        .filter_map(|e| match e {
            Event::TurnStart { turn } => Some(*turn),
            _ => None,
        })
        .collect();
    assert_eq!(turns, vec![0, 1]);
    let forked = agent(
        &e,
        "- text: three\n",
        &["--fork", &format!("{id}@0")],
        "again",
    );
    forked.assert_code(0);
    let fork_id = session_id(&forked);
    assert_ne!(fork_id, id);
    let fork_events = events(&e, &fork_id);
    assert!(fork_events.contains(&Event::SessionForked {
        from: id.clone(),
        seq: 0
    }));
    let bad = agent(&e, "- text: x\n", &["--fork", &format!("{id}@3")], "inside");
    bad.assert_code(1);
    assert!(bad.stderr.contains("inside turn 0"), "{}", bad.stderr);
}

#[test]
fn plan_mode_adds_only_its_section_and_cannot_be_left_headless() {
    let e = ExecEnv::new();
    let script = r##"
- tool_calls:
    - name: exit_plan_mode
      arguments: {plan: "# Plan\n1. edit"}
- text: I will wait for approval.
"##;
    let planned = agent(&e, script, &["--plan"], "plan it");
    planned.assert_code(0);
    let plain = agent(&e, "- text: ok\n", &[], "just do it");
    plain.assert_code(0);
    let header = |id: &str| {
        events(&e, id)
            .into_iter()
            .find_map(|e| match e {
                Event::RequestHeader(h) => Some(h),
                _ => None,
            })
            .unwrap()
    };
    let with = header(&session_id(&planned));
    let without = header(&session_id(&plain));
    assert!(
        with.sections
            .iter()
            .any(|s| s.name == "plan:policy" && s.order == 50)
    );
    assert!(without.sections.iter().all(|s| s.name != "plan:policy"));
    // The tool catalogue is the same in both states.
    assert_eq!(with.tools, without.tools);
    let events = events(&e, &session_id(&planned));
    assert!(events.contains(&Event::PlanMode { active: true }));
    let results = results(&events);
    assert!(
        !results[0].0 && results[0].1.contains("no user-interaction channel"),
        "{results:?}"
    );
}

/// Headless, plan mode is left with `--plan-off` (or the task `/plan off`) on the resumed
/// session; the switch is logged before the turn, and the next request has no plan section.
#[test]
fn plan_off_leaves_plan_mode_of_a_resumed_session() {
    let e = ExecEnv::new();
    let planned = agent(&e, "- text: planning\n", &["--plan"], "plan it");
    planned.assert_code(0);
    let id = session_id(&planned);
    let only = agent(&e, "- text: unused\n", &["--resume", &id], "/plan off");
    only.assert_code(0);
    assert!(only.stderr.contains("plan mode is off"), "{}", only.stderr);
    let again = agent(
        &e,
        "- text: done\n",
        &["--resume", &id, "--plan-off"],
        "do it",
    );
    again.assert_code(0);
    assert!(
        again.stderr.contains("already inactive"),
        "{}",
        again.stderr
    );
    let events = events(&e, &id);
    let switches: Vec<&Event> = events
        .iter()
        .filter(|e| matches!(e, Event::PlanMode { .. }))
        .collect();
    assert_eq!(
        switches,
        vec![
            &Event::PlanMode { active: true },
            &Event::PlanMode { active: false }
        ]
    );
    let last_header = events
        .iter()
        .rev()
        .find_map(|e| match e {
            Event::RequestHeader(h) => Some(h),
            _ => None,
        })
        .unwrap();
    assert!(last_header.sections.iter().all(|s| s.name != "plan:policy"));
}

#[test]
fn a_session_dir_inside_the_workspace_is_refused() {
    let e = ExecEnv::new();
    let file = e.home.join("script.yaml");
    std::fs::write(&file, "- text: hi\n").unwrap();
    let mut cmd = e.bridle();
    cmd.arg("run")
        .arg("--model")
        .arg(format!("script:{}", path_str(&file)))
        .arg("--session-dir")
        .arg(e.workspace.join(".sessions"))
        .arg("task");
    let r = run_bounded(&mut cmd);
    r.assert_code(2);
    assert!(
        r.stderr.contains("which the agent can write"),
        "{}",
        r.stderr
    );
    assert!(
        !e.workspace.join(".sessions").exists(),
        "created before it was refused"
    );
    // A `..` after a missing directory cannot hide where it really is.
    let sneaky = format!(
        "{}/missing/../{}/logs",
        path_str(&e.home),
        e.workspace.file_name().unwrap().to_str().unwrap()
    );
    let mut cmd = e.bridle();
    cmd.args(["run", "--model"])
        .arg(format!("script:{}", path_str(&file)))
        .args(["--session-dir", &sneaky, "task"]);
    let r = run_bounded(&mut cmd);
    r.assert_code(2);
    assert!(r.stderr.contains("`..` is not allowed"), "{}", r.stderr);
    assert!(!e.workspace.join("logs").exists());
    // danger-full-access has no writable roots to compare with; the workspace still counts.
    let mut cmd = e.bridle();
    cmd.args(["--profile", "danger-full-access", "run", "--model"])
        .arg(format!("script:{}", path_str(&file)))
        .arg("--session-dir")
        .arg(e.workspace.join("deep/.sessions"))
        .arg("task");
    let r = run_bounded(&mut cmd);
    r.assert_code(2);
    assert!(
        r.stderr.contains("which the agent can write"),
        "{}",
        r.stderr
    );
}

#[test]
fn a_bad_model_spec_or_script_is_a_clear_error() {
    let e = ExecEnv::new();
    // A usage error (exit 2): the model is checked before any session exists.
    let r = agent(&e, "- text: a\n  tool_call: []\n", &[], "x");
    r.assert_code(2);
    assert!(r.stderr.contains("script.yaml:2:"), "{}", r.stderr);
    let mut cmd = e.bridle();
    cmd.args(["run", "--model", "nosuch:model", "x"]);
    let r = run_bounded(&mut cmd);
    r.assert_code(2);
    assert!(r.stderr.contains("unknown provider"), "{}", r.stderr);
}

#[test]
fn the_terminal_keeps_its_shell_across_the_calls_of_a_session() {
    let e = ExecEnv::new();
    let script = r#"
- tool_calls:
    - name: terminal
      arguments: {input: "cd src && export MARK=kept\n", wait_ms: 3000}
- tool_calls:
    - name: terminal
      arguments: {input: "echo \"$MARK in $PWD\"\n", wait_ms: 3000}
- text: done
"#;
    std::fs::create_dir_all(e.workspace.join("src")).unwrap();
    let r = agent(&e, script, &[], "use the terminal");
    r.assert_code(0);
    let results = results(&events(&e, &session_id(&r)));
    let expected = format!("kept in {}", path_str(&e.workspace.join("src")));
    assert!(
        results[1].0 && results[1].1.contains(&expected),
        "{results:?}"
    );
}

#[test]
fn a_terminal_call_without_input_waits_for_the_command_still_running() {
    let e = ExecEnv::new();
    // The first call returns at its two seconds of quiet, the command still at work; the
    // second types nothing and waits for it to end; the third, at the prompt, returns at once.
    let script = r#"
- tool_calls:
    - name: terminal
      arguments: {input: "sleep 3; echo done-$((40+2))\n"}
- tool_calls:
    - name: terminal
      arguments: {wait_ms: 8000}
- tool_calls:
    - name: terminal
      arguments: {}
- tool_calls:
    - name: terminal
      arguments: {input: "sleep 1; echo slow\n", wait_ms: 6000}
- text: done
"#;
    let started = std::time::Instant::now();
    let r = agent(&e, script, &[], "wait for it");
    let took = started.elapsed();
    r.assert_code(0);
    let results = results(&events(&e, &session_id(&r)));
    assert!(!results[0].1.contains("done-42"), "{results:?}");
    assert!(
        results[1].0 && results[1].1.contains("done-42"),
        "{results:?}"
    );
    assert!(
        results[2].0 && !results[2].1.contains("done-42"),
        "{results:?}"
    );
    // An explicit wait is waited out past the two seconds of quiet, up to the prompt.
    assert!(results[3].1.contains("slow"), "{results:?}");
    assert!(took < std::time::Duration::from_secs(12), "{took:?}");
}

#[test]
fn a_terminal_closed_while_a_command_runs_says_it_was_stopped() {
    let e = ExecEnv::new();
    let mut cmd = e.bridle();
    cmd.args([
        "tool",
        "terminal",
        r#"{"input":"sleep 30; echo never\n","wait_ms":300}"#,
    ])
    .stdin(std::process::Stdio::null());
    let r = run_bounded(&mut cmd);
    r.assert_code(0);
    let v: serde_json::Value = serde_json::from_str(r.stdout.trim()).unwrap();
    let content = v["content"].as_str().unwrap();
    assert!(
        content.contains("had not come back to its prompt: what was still running was stopped"),
        "{content}"
    );
    // One that ended at its prompt says nothing of the kind.
    let mut cmd = e.bridle();
    cmd.args(["tool", "terminal", r#"{"input":"echo hi\n"}"#])
        .stdin(std::process::Stdio::null());
    let r = run_bounded(&mut cmd);
    assert!(!r.stdout.contains("had not come back"), "{}", r.stdout);
}

/// A chat-completions server on loopback: the first request gets a streamed tool call, the
/// second a streamed final answer. Returns the base URL and the bodies it received.
fn chat_server() -> (
    String,
    std::sync::Arc<std::sync::Mutex<Vec<serde_json::Value>>>,
) {
    chat_server_with(vec![
        (TOOL_CALL_REPLY.to_owned(), std::time::Duration::ZERO),
        (FINAL_REPLY.to_owned(), std::time::Duration::ZERO),
    ])
}

pub(super) const TOOL_CALL_REPLY: &str = concat!(
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"call_a\",",
    "\"type\":\"function\",\"function\":{\"name\":\"bash\",\"arguments\":\"{\\\"command\\\":\"}}]}}]}\n\n",
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":",
    "{\"arguments\":\"\\\"echo via-http > o.txt\\\"}\"}}]},\"finish_reason\":\"tool_calls\"}]}\n\n",
    "data: [DONE]\n\n"
);

const FINAL_REPLY: &str = concat!(
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Wrote o.txt.\"},\"finish_reason\":\"stop\"}]}\n\n",
    "data: [DONE]\n\n"
);

/// A chat-completions server on loopback answering each request with the next reply, after
/// sending the headers and pausing for its delay.
pub(super) fn chat_server_with(
    replies: Vec<(String, std::time::Duration)>,
) -> (
    String,
    std::sync::Arc<std::sync::Mutex<Vec<serde_json::Value>>>,
) {
    http_server(
        replies
            .into_iter()
            .map(|(body, delay)| (200, body, delay))
            .collect(),
    )
}

/// A server on loopback answering each request with the next `(status, body, delay)`: an
/// event stream when the status is 200, JSON otherwise.
pub(super) fn http_server(
    replies: Vec<(u16, String, std::time::Duration)>,
) -> (
    String,
    std::sync::Arc<std::sync::Mutex<Vec<serde_json::Value>>>,
) {
    use std::io::{BufRead, BufReader, Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    let bodies = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = std::sync::Arc::clone(&bodies);
    std::thread::spawn(move || {
        for (status, reply, delay) in replies {
            let Ok((stream, _)) = listener.accept() else {
                return;
            };
            let mut reader = BufReader::new(stream);
            let mut length = 0usize;
            loop {
                let mut line = String::new();
                reader.read_line(&mut line).unwrap();
                if line.trim_end().is_empty() {
                    break;
                }
                if let Some((k, v)) = line.split_once(':')
                    && k.eq_ignore_ascii_case("content-length")
                {
                    length = v.trim().parse().unwrap();
                }
            }
            let mut body = vec![0u8; length];
            reader.read_exact(&mut body).unwrap();
            seen.lock()
                .unwrap()
                .push(serde_json::from_slice(&body).unwrap());
            let mut stream = reader.into_inner();
            let kind = if status == 200 {
                "text/event-stream"
            } else {
                "application/json"
            };
            let head = format!(
                "HTTP/1.1 {status} X\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                reply.len()
            );
            let _ = stream.write_all(head.as_bytes());
            let _ = stream.flush();
            std::thread::sleep(delay);
            let _ = stream.write_all(reply.as_bytes());
        }
    });
    (url, bodies)
}

#[test]
fn an_openai_compatible_model_over_http_drives_the_tools() {
    let e = ExecEnv::new();
    let (url, bodies) = chat_server();
    let mut cmd = e.bridle();
    cmd.env("BRIDLE_BASE_URL", &url)
        .env("BRIDLE_API_KEY", "sk-test")
        .args(["run", "--model", "openai:test-model", "--session-dir"])
        .arg(e.home.join("sessions"))
        .arg("write o.txt");
    let r = run_bounded(&mut cmd);
    r.assert_code(0);
    assert_eq!(r.stdout.trim(), "Wrote o.txt.");
    assert_eq!(
        std::fs::read_to_string(e.workspace.join("o.txt")).unwrap(),
        "via-http\n"
    );
    let bodies = bodies.lock().unwrap();
    assert_eq!(bodies.len(), 2);
    assert_eq!(bodies[0]["model"], "test-model");
    // The second request carries the tool result the sandboxed command produced.
    let messages = bodies[1]["messages"].as_array().unwrap();
    let tool = messages.iter().find(|m| m["role"] == "tool").unwrap();
    assert_eq!(tool["tool_call_id"], "call_a");
    let events = events(&e, &session_id(&r));
    assert!(
        events
            .iter()
            .any(|e| matches!(e, Event::RequestHeader(h) if h.model == "openai:test-model"))
    );
}

#[test]
fn terminal_input_cannot_get_past_the_rules_in_pieces_or_with_line_editing() {
    let e = ExecEnv::new();
    // ci-locked denies curl and asks nobody.
    let script = r#"
- tool_calls:
    - name: terminal
      arguments: {input: "cur", wait_ms: 500}
- tool_calls:
    - name: terminal
      arguments: {input: "l --version\n", wait_ms: 2000}
- tool_calls:
    - name: terminal
      arguments: {input: "\u0003", wait_ms: 500}
- tool_calls:
    - name: terminal
      arguments: {input: "echo \u0015curl --version\n", wait_ms: 2000}
- tool_calls:
    - name: terminal
      arguments: {input: "echo still here\n", wait_ms: 2000}
- text: done
"#;
    let r = agent(&e, script, &["--profile", "ci-locked"], "try curl");
    r.assert_code(0);
    let events = events(&e, &session_id(&r));
    let results = results(&events);
    assert_eq!(results.len(), 5, "{results:?}");
    // The piece that completes `curl` is checked together with what was typed before it.
    assert!(
        !results[1].0 && results[1].1.contains("denied"),
        "{results:?}"
    );
    // Ctrl-C alone is allowed and clears the pending line.
    assert!(results[2].0, "{results:?}");
    // Line editing needs approval, and nobody can approve under ci-locked.
    assert!(
        !results[3].0 && results[3].1.contains("control characters"),
        "{results:?}"
    );
    assert!(
        results[4].0 && results[4].1.contains("still here"),
        "{results:?}"
    );
    for (_, content) in &results {
        assert!(
            !content.contains("curl 7") && !content.contains("curl 8"),
            "{content}"
        );
    }
}

#[test]
fn a_session_continues_only_where_it_began_and_a_policy_change_is_logged() {
    let e = ExecEnv::new();
    let first = agent(&e, "- text: one\n", &[], "first");
    first.assert_code(0);
    let id = session_id(&first);
    // From another directory: refused, with the way to branch it instead.
    let other = e.home.join("other");
    std::fs::create_dir_all(&other).unwrap();
    let file = e.home.join("script.yaml");
    std::fs::write(&file, "- text: two\n").unwrap();
    let mut cmd = e.bridle();
    cmd.current_dir(&other)
        .args(["run", "--resume", &id, "--model"])
        .arg(format!("script:{}", path_str(&file)))
        .arg("--session-dir")
        .arg(e.home.join("sessions"))
        .arg("second");
    let r = run_bounded(&mut cmd);
    r.assert_code(1);
    assert!(
        r.stderr.contains("belongs to the workspace") && r.stderr.contains("--fork"),
        "{}",
        r.stderr
    );
    // A fork from there describes where it continues.
    let mut cmd = e.bridle();
    cmd.current_dir(&other)
        .args(["run", "--fork", &id, "--model"])
        .arg(format!("script:{}", path_str(&file)))
        .arg("--session-dir")
        .arg(e.home.join("sessions"))
        .arg("second");
    let r = run_bounded(&mut cmd);
    r.assert_code(0);
    let header = events(&e, &session_id(&r)).into_iter().next().unwrap();
    let Event::SessionHeader(h) = header else {
        panic!("{header:?}")
    };
    assert_eq!(
        h.workspace,
        path_str(&std::fs::canonicalize(&other).unwrap())
    );
    // Same workspace, tighter profile: the switch is in the log.
    let again = agent(
        &e,
        "- text: three\n",
        &["--resume", &id, "--profile", "read-only"],
        "third",
    );
    again.assert_code(0);
    assert!(again.stderr.contains("policy differs"), "{}", again.stderr);
    assert!(events(&e, &id).contains(&Event::SandboxMode {
        mode: bridle_policy::SandboxMode::ReadOnly
    }));
}

#[test]
fn the_agent_cannot_read_its_session_logs_or_their_key() {
    let e = ExecEnv::new();
    let sessions = e.home.join("sessions");
    let script = format!(
        r#"
- tool_calls:
    - name: bash
      arguments: {{command: "wc -c {dir}/log.key; ls {dir}"}}
    - name: read_file
      arguments: {{path: "{dir}/log.key"}}
- text: done
"#,
        dir = path_str(&sessions)
    );
    let r = agent(&e, &script, &[], "read the key");
    r.assert_code(0);
    let results = results(&events(&e, &session_id(&r)));
    assert!(!results[0].0, "{results:?}");
    assert!(
        !results[0].1.contains(" log.key\n") && !results[0].1.contains(".jsonl"),
        "{results:?}"
    );
    assert!(!results[1].0, "{results:?}");
    // The header's policy digest covers the mask: the spec the commands ran under.
    assert!(std::fs::metadata(sessions.join("log.key")).unwrap().len() == 32);
}

#[test]
fn ctrl_c_cancels_the_turn_kills_the_tools_and_balances_the_log() {
    let e = ExecEnv::new();
    let mark = super::support::token("run-int");
    let script = format!(
        r#"
- tool_calls:
    - name: bash
      arguments: {{command: "sh -c 'sleep 60; : {mark}' & sleep 60 # {mark}"}}
    - name: bash
      arguments: {{command: "echo never > never.txt"}}
- text: never reached
"#
    );
    let mut cmd = agent_cmd(&e, &script, &[], "sleep");
    cmd.stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
    let child = cmd.spawn().unwrap();
    assert!(
        super::support::wait_until(std::time::Duration::from_secs(20), || {
            !super::support::processes_with(&mark).is_empty()
        }),
        "the tool never started"
    );
    let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap());
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).unwrap();
    let out = child.wait_with_output().unwrap();
    // bridle still dies of the signal, as its caller expects, once the turn is closed.
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&out.status),
        Some(nix::sys::signal::Signal::SIGINT as i32)
    );
    assert!(
        super::support::wait_until(std::time::Duration::from_secs(10), || {
            super::support::processes_with(&mark).is_empty()
        }),
        "the tool's processes outlived the cancel"
    );
    super::support::assert_no_survivor(&mark, "cancelled bridle run");
    assert!(
        !e.workspace.join("never.txt").exists(),
        "a call after the cancel ran"
    );
    let id = session_id_in(&String::from_utf8_lossy(&out.stderr));
    let events = events(&e, &id);
    // The log says who cancelled.
    assert_eq!(
        events.last(),
        Some(&Event::TurnEnd {
            turn: 0,
            reason: TurnEndReason::Aborted,
            detail: Some("the turn was cancelled (signal SIGINT)".into()),
            cancelled_by: Some("signal SIGINT".into()),
        })
    );
    let results = results(&events);
    assert_eq!(results.len(), 2, "{results:?}");
    assert!(!results[0].0, "{results:?}");
    assert!(
        results[1].1.contains("aborted before dispatch"),
        "{results:?}"
    );
    // `log show` puts that answer under the call it answers, and says who cancelled.
    let mut cmd = e.bridle();
    cmd.args(["log", "show", &id, "--session-dir"])
        .arg(e.home.join("sessions"));
    let shown = run_bounded(&mut cmd);
    shown.assert_code(0);
    for want in [
        "not dispatched\n        failed: aborted before dispatch: the turn was cancelled",
        "ended aborted (cancelled by signal SIGINT)",
    ] {
        assert!(shown.stdout.contains(want), "{want:?}:\n{}", shown.stdout);
    }
    assert!(
        !shown.stdout.contains("belongs to no turn"),
        "{}",
        shown.stdout
    );
    // Nothing left to repair.
    let again = agent(&e, "- text: resumed\n", &["--resume", &id], "go on");
    again.assert_code(0);
    assert!(
        !again.stderr.contains("closed as interrupted"),
        "{}",
        again.stderr
    );
}

#[test]
fn a_cancel_does_not_wait_for_a_stalled_model_and_cleans_up() {
    let e = ExecEnv::new();
    let git = std::process::Command::new("git")
        .args(["init", "-q", "."])
        .current_dir(&e.workspace)
        .status()
        .unwrap();
    assert!(git.success());
    // The persistent terminal is open (its sandbox holds git's config lock) while the model
    // stalls.
    let terminal_call = serde_json::json!({"choices": [{"index": 0, "delta": {"tool_calls": [{
        "index": 0, "id": "call_t", "type": "function",
        "function": {"name": "terminal", "arguments": "{\"input\": \"echo hi\\n\"}"}}]},
        "finish_reason": "tool_calls"}]});
    let (url, bodies) = chat_server_with(vec![
        (
            format!("data: {terminal_call}\n\ndata: [DONE]\n\n"),
            std::time::Duration::ZERO,
        ),
        (FINAL_REPLY.to_owned(), std::time::Duration::from_secs(60)),
    ]);
    let mut cmd = e.bridle();
    cmd.env("BRIDLE_BASE_URL", &url)
        .args(["run", "--model", "openai:test-model", "--session-dir"])
        .arg(e.home.join("sessions"))
        .arg("write o.txt")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
    let child = cmd.spawn().unwrap();
    assert!(
        super::support::wait_until(std::time::Duration::from_secs(20), || {
            bodies.lock().unwrap().len() == 2
        }),
        "the second request never came"
    );
    let asked = std::time::Instant::now();
    let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap());
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        asked.elapsed() < std::time::Duration::from_secs(5),
        "{:?}",
        asked.elapsed()
    );
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&out.status),
        Some(nix::sys::signal::Signal::SIGTERM as i32)
    );
    let id = session_id_in(&String::from_utf8_lossy(&out.stderr));
    assert_eq!(
        events(&e, &id).last(),
        Some(&Event::TurnEnd {
            turn: 0,
            reason: TurnEndReason::Aborted,
            detail: Some("the turn was cancelled (signal SIGTERM)".into()),
            cancelled_by: Some("signal SIGTERM".into()),
        })
    );
    assert!(!e.workspace.join(".git/config.lock").exists());
    let results = results(&events(&e, &id));
    assert!(results[0].0 && results[0].1.contains("hi"), "{results:?}");
}
