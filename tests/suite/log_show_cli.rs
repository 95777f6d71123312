//! `bridle log show|verify|export` as a reviewer uses them: what the timeline says about
//! decisions, denials, escalations and why turns ended; how a session is named (`last`, id
//! prefixes); what happens when the reader of the output goes away; a session that is being
//! appended to while it is checked.

use bridle_agent::log::{
    Backend, Event, NewSession, PolicyRule, PolicySummary, Reply, SessionDir, ToolCall,
    TurnEndReason, Usage,
};
use bridle_policy::{ApprovalPolicy, Decision, Network, SandboxMode};
use pretty_assertions::assert_eq;

use super::support::{Env, Run, path_str, run};

fn log_cmd(env: &Env, dir: &std::path::Path, args: &[&str]) -> Run {
    let mut cmd = env.bridle();
    cmd.arg("log").args(args).arg("--session-dir").arg(dir);
    run(&mut cmd)
}

fn new_session(env: &Env) -> NewSession {
    NewSession {
        workspace: path_str(&env.workspace).into(),
        profile: "workstation".into(),
        policy_digest: "ab".repeat(32),
    }
}

fn call(id: &str, name: &str, arguments: &str) -> ToolCall {
    ToolCall {
        call_id: id.into(),
        name: name.into(),
        arguments: arguments.into(),
    }
}

fn decided(id: &str, decision: Decision, by: &str) -> Event {
    Event::ToolDecision {
        call_id: id.into(),
        decision,
        by: by.into(),
    }
}

fn result(id: &str, ok: bool, content: &str, sandbox: serde_json::Value) -> Event {
    Event::ToolResult {
        call_id: id.into(),
        ok,
        content: content.into(),
        sandbox: Some(sandbox),
    }
}

/// A rule's decision text longer than any line limit.
const LONG_REASON: &str = "rule deny-etc: writes below /etc change the whole machine and are \
     never part of a task in this workspace; ask the owner of the machine to make the change \
     instead (see the workstation policy, section 3)";

/// A session with everything a reviewer looks for: the policy, an approved escalation, a
/// sandbox denial, a call refused by a rule with a long reason, a call the cancel stopped
/// before it was dispatched, a turn cancelled by a signal, and a turn that ended in an error.
fn reviewed(env: &Env, backend: Backend) -> (std::path::PathBuf, String) {
    let dir_path = env.home.join("sessions");
    let dir = SessionDir::open(&dir_path).unwrap();
    let mut log = dir.create(backend, &new_session(env)).unwrap();
    let ws = path_str(&env.workspace);
    let escalate = r#"{"command":"make install","sandbox_permissions":"danger-full-access","justification":"install"}"#;
    let touch = r#"{"command":"touch /etc/motd"}"#;
    let write = r#"{"path":"/etc/hosts","content":"x"}"#;
    let listed = [
        call("c1", "bash", escalate),
        call("c2", "bash", touch),
        call("c3", "write_file", write),
        call("c4", "bash", r#"{"command":"make test"}"#),
    ];
    let facts = |mode: &str, escalated: bool| {
        serde_json::json!({"mode": mode, "network": "off", "guarantees": [],
            "escalated": escalated, "denied_by_sandbox": null})
    };
    let long_output: String = (1..=30)
        .map(|n| format!("test case {n} ... ok\n"))
        .collect();
    for event in [
        Event::PolicyEffective(PolicySummary {
            digest: "ab".repeat(32),
            profile: "workstation".into(),
            mode: SandboxMode::WorkspaceWrite,
            approval: ApprovalPolicy::Ask,
            network: Network::Off,
            writable_roots: vec![ws.into(), "<session temp dir>".into(), "/dev/null".into()],
            protected_paths: vec![format!("{ws}/.git/hooks")],
            masked_paths: vec!["/home/u/.ssh".into()],
            rules: vec![PolicyRule {
                id: "deny-etc".into(),
                applies_to: "path".into(),
                decision: Decision::Deny,
            }],
        }),
        Event::TurnStart { turn: 0 },
        Event::UserMessage {
            id: None,
            text: "install the tool system-wide, then run the whole test suite and report every \
                   failure you find"
                .into(),
        },
        Event::StepStart { turn: 0, step: 0 },
        Event::AssistantMessage {
            text: "Installing.".into(),
            tool_calls: listed.to_vec(),
            reasoning: "The install needs root-owned paths.".into(),
            reply: Some(Reply {
                model: Some("gpt-x-2025-01-01".into()),
                finish: Some("tool_calls".into()),
                usage: Some(Usage {
                    prompt_tokens: 1200,
                    completion_tokens: 35,
                }),
            }),
        },
        Event::ToolCall(listed[0].clone()),
        Event::ApprovalAsked {
            call_id: "c1".into(),
            question: "bash: asks to run with sandbox mode `danger-full-access` (justification: \
                       install)"
                .into(),
        },
        Event::ApprovalDecided {
            call_id: "c1".into(),
            answer: "approved".into(),
            by: "the person at the terminal".into(),
        },
        decided(
            "c1",
            Decision::Allow,
            "approved escalation of this one call",
        ),
        result(
            "c1",
            true,
            "[exit code 0]",
            facts("danger-full-access", true),
        ),
        Event::ToolCall(listed[1].clone()),
        decided(
            "c2",
            Decision::Allow,
            "no rule matched (mode workspace-write)",
        ),
        result(
            "c2",
            false,
            "touch: cannot touch '/etc/motd': Read-only file system",
            {
                let mut f = facts("workspace-write", false);
                f["denied_by_sandbox"] = "`/etc/motd` is outside the writable roots".into();
                f
            },
        ),
        Event::ToolCall(listed[2].clone()),
        decided("c3", Decision::Deny, LONG_REASON),
        result("c3", false, &format!("denied: {LONG_REASON}"), {
            let mut f = facts("workspace-write", false);
            f["denied_by"] = "rule".into();
            f
        }),
        // The cancel came before the last call was dispatched.
        Event::ToolResult {
            call_id: "c4".into(),
            ok: false,
            content: "aborted before dispatch: the turn was cancelled".into(),
            sandbox: None,
        },
        Event::StepEnd { turn: 0, step: 0 },
        Event::TurnEnd {
            turn: 0,
            reason: TurnEndReason::Aborted,
            detail: Some("the turn was cancelled (signal SIGINT)".into()),
            cancelled_by: Some("signal SIGINT".into()),
        },
        Event::TurnStart { turn: 1 },
        Event::UserMessage {
            id: None,
            text: "run the tests".into(),
        },
        Event::StepStart { turn: 1, step: 0 },
        Event::AssistantMessage {
            text: String::new(),
            tool_calls: vec![call("c5", "bash", r#"{"command":"make test"}"#)],
            reasoning: String::new(),
            reply: None,
        },
        Event::ToolCall(call("c5", "bash", r#"{"command":"make test"}"#)),
        decided(
            "c5",
            Decision::Allow,
            "no rule matched (mode workspace-write)",
        ),
        result("c5", true, &long_output, facts("workspace-write", false)),
        Event::StepEnd { turn: 1, step: 0 },
        Event::StepStart { turn: 1, step: 1 },
        Event::StepEnd { turn: 1, step: 1 },
        Event::TurnEnd {
            turn: 1,
            reason: TurnEndReason::Error,
            detail: Some(
                "model openai:gpt-x: server error: HTTP 503: {\"error\":\"overloaded\"}".into(),
            ),
            cancelled_by: None,
        },
    ] {
        log.append(event).unwrap();
    }
    let id = log.id().to_owned();
    drop(log);
    (dir_path, id)
}

/// `text` with what differs from run to run (the session id, the workspace, event times)
/// written as placeholders.
fn stable(text: &str, env: &Env, id: &str) -> String {
    let text = text
        .replace(id, "<ID>")
        .replace(path_str(&env.workspace), "<WS>");
    // Times look like 2026-11-30T09:08:08.123Z.
    let shape = "dddd-dd-ddTdd:dd:dd.dddZ";
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::new();
    let mut i = 0;
    while i < chars.len() {
        let fits = chars.len() - i >= shape.len()
            && shape.chars().zip(&chars[i..]).all(|(s, c)| match s {
                'd' => c.is_ascii_digit(),
                other => other == *c,
            });
        if fits {
            out.push_str("<TIME>");
            i += shape.len();
        } else {
            out.push(chars[i]);
            i += 1;
        }
    }
    out
}

#[test]
fn show_tells_a_reviewer_what_ran_and_who_allowed_it() {
    let env = Env::new();
    let mut outputs = Vec::new();
    for backend in [Backend::Jsonl, Backend::Sqlite] {
        let (dir, id) = reviewed(&env, backend);
        let r = log_cmd(&env, &dir, &["show", &id]);
        r.assert_code(0);
        assert!(!r.stdout.contains("belongs to no turn"), "{}", r.stdout);
        // Decisions and reasons are never cut.
        assert!(
            r.stdout
                .contains(&format!("deny by {LONG_REASON}\n        refused by: rule")),
            "{}",
            r.stdout
        );
        outputs.push(stable(&r.stdout, &env, &id));
    }
    assert_eq!(outputs[0], outputs[1], "the same story whatever the store");
    insta::assert_snapshot!("log_show_review", outputs[0]);
}

#[test]
fn show_full_prints_long_text_whole_and_marks_what_it_cuts_otherwise() {
    let env = Env::new();
    let (dir, id) = reviewed(&env, Backend::Jsonl);
    let cut = log_cmd(&env, &dir, &["show", &id]);
    cut.assert_code(0);
    assert!(
        cut.stdout
            .contains("ok: test case 1 ... ok… [+29 lines, 573 chars]"),
        "{}",
        cut.stdout
    );
    let full = log_cmd(&env, &dir, &["show", &id, "--full"]);
    full.assert_code(0);
    let block: String = (1..=30)
        .map(|n| format!("          | test case {n} ... ok\n"))
        .collect();
    assert!(
        full.stdout.contains(&format!("        ok:\n{block}")),
        "{}",
        full.stdout
    );
    assert!(
        full.stdout.contains(
            "user: install the tool system-wide, then run the whole test suite and report \
             every failure you find\n"
        ),
        "{}",
        full.stdout
    );
    assert!(!full.stdout.contains("chars]"), "{}", full.stdout);
}

#[test]
fn last_and_unique_id_prefixes_name_a_session() {
    let env = Env::new();
    let (dir, older) = reviewed(&env, Backend::Jsonl);
    std::thread::sleep(std::time::Duration::from_millis(20));
    let (_, newer) = reviewed(&env, Backend::Sqlite);
    let r = log_cmd(&env, &dir, &["show", "last"]);
    r.assert_code(0);
    assert!(
        r.stdout.starts_with(&format!("session {newer} ")),
        "{}",
        r.stdout
    );
    let prefix = &older[..older.len() - 1];
    for args in [
        vec!["show", prefix],
        vec!["verify", prefix],
        vec!["export", prefix],
    ] {
        let r = log_cmd(&env, &dir, &args);
        r.assert_code(0);
        assert!(r.stdout.contains(&older), "{args:?}: {}", r.stdout);
    }
    // Every id starts with the century: the prefix names both, and bridle says which.
    for command in ["show", "verify", "export"] {
        let r = log_cmd(&env, &dir, &[command, "20"]);
        r.assert_code(2);
        assert!(r.stdout.is_empty(), "{}", r.stdout);
        assert!(
            r.stderr.contains("2 sessions start with \"20\"")
                && r.stderr.contains(&format!("\n  {older}\n"))
                && r.stderr.contains(&format!("\n  {newer}\n")),
            "{command}: {}",
            r.stderr
        );
    }
    let r = log_cmd(&env, &dir, &["show", "1999"]);
    r.assert_code(1);
    assert!(r.stderr.contains("no session \"1999\""), "{}", r.stderr);
    log_cmd(&env, &dir, &["verify", "1999"]).assert_code(2);
    // With no session at all, `last` names none.
    let empty = env.home.join("empty");
    SessionDir::open(&empty).unwrap();
    let r = log_cmd(&env, &empty, &["show", "last"]);
    r.assert_code(1);
    assert!(r.stderr.contains("no sessions in"), "{}", r.stderr);
}

#[test]
fn export_writes_jsonl_without_being_asked() {
    let env = Env::new();
    let (dir, id) = reviewed(&env, Backend::Jsonl);
    let r = log_cmd(&env, &dir, &["export", &id]);
    r.assert_code(0);
    let file = std::fs::read_to_string(dir.join(format!("{id}.jsonl"))).unwrap();
    assert_eq!(r.stdout, file);
}

/// Runs `bridle log ARGS` with stdout a pipe nobody reads any more.
fn into_closed_pipe(env: &Env, dir: &std::path::Path, args: &[&str]) -> (Option<i32>, String) {
    let (read, write) = nix::unistd::pipe().unwrap();
    drop(read);
    let out = env
        .bridle()
        .arg("log")
        .args(args)
        .arg("--session-dir")
        .arg(dir)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::from(write))
        .stderr(std::process::Stdio::piped())
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_reader_that_goes_away_ends_the_output_quietly() {
    let env = Env::new();
    let (dir, id) = reviewed(&env, Backend::Jsonl);
    for args in [
        vec!["list"],
        vec!["list", "--json"],
        vec!["show", id.as_str()],
        vec!["show", id.as_str(), "--json"],
        vec!["verify", id.as_str()],
        vec!["export", id.as_str()],
    ] {
        assert_eq!(
            into_closed_pipe(&env, &dir, &args),
            (Some(0), String::new()),
            "{args:?}"
        );
    }
    // `verify` still says by its status what it found.
    let path = dir.join(format!("{id}.jsonl"));
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, text.replacen("\"deny\"", "\"allow\"", 1)).unwrap();
    assert_eq!(
        into_closed_pipe(&env, &dir, &["verify", &id]),
        (Some(1), String::new())
    );
}

#[test]
fn head_on_a_long_export_ends_it_quietly() {
    let env = Env::new();
    let dir_path = env.home.join("sessions");
    let dir = SessionDir::open(&dir_path).unwrap();
    let mut log = dir.create(Backend::Jsonl, &new_session(&env)).unwrap();
    for n in 0..3000 {
        log.append(Event::UserMessage {
            id: None,
            text: format!("message {n} {}", "x".repeat(100)),
        })
        .unwrap();
    }
    let id = log.id().to_owned();
    drop(log);
    let bridle = env!("CARGO_BIN_EXE_bridle");
    for command in ["export", "show"] {
        let script = format!(
            "set -o pipefail; '{bridle}' log {command} {id} --session-dir '{}' | head -1",
            path_str(&dir_path)
        );
        let mut cmd = std::process::Command::new("bash");
        cmd.args(["-c", &script]).env("HOME", &env.home);
        let r = run(&mut cmd);
        r.assert_code(0);
        assert_eq!(r.stdout.lines().count(), 1, "{}", r.stdout);
        assert_eq!(r.stderr, "", "{command}");
    }
}

fn distinct(seen: &[String]) -> usize {
    let mut seen = seen.to_vec();
    seen.dedup();
    seen.len()
}

#[test]
fn verify_of_a_session_being_appended_never_says_tampered() {
    let env = Env::new();
    let dir_path = env.home.join("sessions");
    let dir = SessionDir::open(&dir_path).unwrap();
    for backend in [Backend::Jsonl, Backend::Sqlite] {
        let mut log = dir.create(backend, &new_session(&env)).unwrap();
        let id = log.id().to_owned();
        let done = std::sync::atomic::AtomicBool::new(false);
        let mut counts = std::thread::scope(|scope| {
            let writer = scope.spawn(|| {
                let mut n = 0u64;
                while !done.load(std::sync::atomic::Ordering::SeqCst) {
                    log.append(Event::UserMessage {
                        id: None,
                        text: format!("message {n}"),
                    })
                    .unwrap();
                    if n.is_multiple_of(3) {
                        log.barrier().unwrap();
                    }
                    n += 1;
                }
            });
            // At least 25 checks, and more until they have seen the log grow (a loaded disk can
            // make the writer's syncs slow; the point is that no check says tampered).
            let mut counts: Vec<String> = Vec::new();
            let started = std::time::Instant::now();
            while counts.len() < 25
                || (distinct(&counts) <= 5
                    && started.elapsed() < std::time::Duration::from_secs(60))
            {
                let r = log_cmd(&env, &dir_path, &["verify", &id]);
                assert_eq!(r.code, Some(0), "{}{}", r.stdout, r.stderr);
                counts.push(r.stdout.clone());
            }
            done.store(true, std::sync::atomic::Ordering::SeqCst);
            writer.join().unwrap();
            counts
        });
        counts.dedup();
        assert!(
            counts.len() > 5,
            "the checks did not overlap the appends: {counts:?}"
        );
    }
}

/// A compaction is shown where it happened, with what it replaced and the start of its
/// summary, and the compacted session still verifies.
#[test]
fn show_says_where_the_context_was_compacted_and_with_what_summary() {
    let env = Env::new();
    let dir_path = env.home.join("sessions");
    let dir = SessionDir::open(&dir_path).unwrap();
    let mut log = dir.create(Backend::Jsonl, &new_session(&env)).unwrap();
    log.append(Event::TurnStart { turn: 0 }).unwrap();
    log.append(Event::UserMessage {
        id: None,
        text: "list the files".into(),
    })
    .unwrap();
    log.append(Event::TurnEnd {
        turn: 0,
        reason: TurnEndReason::Completed,
        detail: None,
        cancelled_by: None,
    })
    .unwrap();
    let at = log
        .compact(
            log.next_seq(),
            "The user asked for the files; there are 3.",
            "/compact",
        )
        .unwrap();
    let id = log.id().to_owned();
    drop(log);
    let r = log_cmd(&env, &dir_path, &["show", &id]);
    r.assert_code(0);
    assert!(
        r.stdout.contains(&format!(
            "[{at}] context -> compacted: events before {at} replaced by a summary (/compact)\n      \
             summary: The user asked for the files; there are 3.\n"
        )),
        "{}",
        r.stdout
    );
    log_cmd(&env, &dir_path, &["verify", &id]).assert_code(0);
}
