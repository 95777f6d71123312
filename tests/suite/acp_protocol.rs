//! `bridle acp` at the wire: bad input gets the protocol's errors, a client that goes away
//! mid-turn leaves a clean exit and a balanced, verifiable log, and stdout carries protocol
//! lines only. Raw JSON-RPC lines over real pipes, every wait bounded.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::support::{ExecEnv, path_str};

const WAIT: Duration = Duration::from_secs(30);

/// A `bridle acp` process and its stdout, line by line.
struct Wire {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    /// Every stdout line so far.
    seen: Vec<String>,
}

impl Wire {
    fn start(e: &ExecEnv, extra: &[&str], script: &str) -> Wire {
        let file = e.home.join("script.yaml");
        std::fs::write(&file, script).unwrap();
        let mut cmd = e.bridle();
        cmd.args(extra)
            .arg("acp")
            .arg("--model")
            .arg(format!("script:{}", path_str(&file)))
            .arg("--session-dir")
            .arg(e.home.join("sessions"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let stdin = child.stdin.take();
        Wire {
            child,
            stdin,
            lines,
            seen: Vec::new(),
        }
    }

    fn send(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "{line}").unwrap();
        stdin.flush().unwrap();
    }

    fn request(&mut self, id: u64, method: &str, params: Value) -> Value {
        self.send(
            &json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string(),
        );
        self.answer(id)
    }

    /// The response to request `id` (other lines are kept in `seen`).
    fn answer(&mut self, id: u64) -> Value {
        self.answer_matching(|v| v.get("id") == Some(&json!(id)) && v.get("method").is_none())
    }

    fn answer_matching(&mut self, want: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + WAIT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    self.seen.push(line.clone());
                    if let Ok(v) = serde_json::from_str::<Value>(&line)
                        && want(&v)
                    {
                        return v;
                    }
                }
                Err(RecvTimeoutError::Timeout) => panic!("no answer (a hang): {:#?}", self.seen),
                Err(RecvTimeoutError::Disconnected) => {
                    panic!("stdout closed before the answer: {:#?}", self.seen)
                }
            }
        }
    }

    fn initialize(&mut self) {
        let answer = self.request(0, "initialize", json!({"protocolVersion": 1}));
        assert_eq!(answer["result"]["protocolVersion"], 1, "{answer}");
    }

    fn new_session(&mut self, id: u64, e: &ExecEnv) -> String {
        let answer = self.request(
            id,
            "session/new",
            json!({"cwd": path_str(&e.workspace), "mcpServers": []}),
        );
        answer["result"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("{answer}"))
            .to_owned()
    }

    /// Closes stdin and waits (bounded) for the exit; returns the status code, the rest of
    /// stdout, and stderr.
    fn close(mut self) -> (Option<i32>, Vec<String>, String) {
        drop(self.stdin.take());
        let deadline = Instant::now() + WAIT;
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            if Instant::now() >= deadline {
                let _ = self.child.kill();
                panic!("bridle acp did not exit after stdin closed");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let mut rest = std::mem::take(&mut self.seen);
        while let Ok(line) = self.lines.recv_timeout(Duration::from_secs(2)) {
            rest.push(line);
        }
        let mut stderr = String::new();
        if let Some(mut err) = self.child.stderr.take() {
            let _ = std::io::Read::read_to_string(&mut err, &mut stderr);
        }
        (status.code(), rest, stderr)
    }
}

fn error_code(answer: &Value) -> i64 {
    answer["error"]["code"]
        .as_i64()
        .unwrap_or_else(|| panic!("not an error: {answer}"))
}

/// Malformed JSON, an unknown method, a prompt for an unknown session, a dangerous workspace
/// and MCP servers each get a JSON-RPC error, and the agent keeps serving.
#[test]
fn bad_requests_get_protocol_errors_and_the_agent_keeps_serving() {
    let e = ExecEnv::new();
    let mut wire = Wire::start(&e, &[], "- text: fine\n");
    wire.initialize();
    wire.send("{not json");
    let parse = wire.answer_matching(|v| v.get("error").is_some() && v["id"].is_null());
    assert_eq!(error_code(&parse), -32700, "{parse}");
    let unknown = wire.request(1, "session/frobnicate", json!({}));
    assert_eq!(error_code(&unknown), -32601, "{unknown}");
    let nobody = wire.request(
        2,
        "session/prompt",
        json!({"sessionId": "no-such-session", "prompt": [{"type": "text", "text": "hi"}]}),
    );
    assert_eq!(error_code(&nobody), -32002, "{nobody}");
    let root = wire.request(3, "session/new", json!({"cwd": "/", "mcpServers": []}));
    assert!(
        root["error"]["data"]
            .as_str()
            .is_some_and(|d| d.contains("refusing")),
        "{root}"
    );
    let mcp = wire.request(
        4,
        "session/new",
        json!({"cwd": path_str(&e.workspace), "mcpServers": [
            {"name": "x", "command": "/bin/true", "args": [], "env": []}
        ]}),
    );
    assert!(
        mcp["error"]["data"]
            .as_str()
            .is_some_and(|d| d.contains("MCP")),
        "{mcp}"
    );
    let load = wire.request(
        5,
        "session/load",
        json!({"sessionId": "no-such-session", "cwd": path_str(&e.workspace), "mcpServers": []}),
    );
    assert!(load.get("error").is_some(), "{load}");
    // Still serving: a session opens and a turn runs.
    let session = wire.new_session(6, &e);
    let answer = wire.request(
        7,
        "session/prompt",
        json!({"sessionId": session, "prompt": [{"type": "text", "text": "hi"}]}),
    );
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let (code, _, stderr) = wire.close();
    assert_eq!(code, Some(0), "{stderr}");
}

/// `bridle acp` with a session whose turn runs a bash call that sleeps (its processes carry
/// `mark`), once those processes run.
fn sleeping_turn(e: &ExecEnv, mark: &str) -> (Wire, String) {
    let script = format!(
        "- tool_calls:\n    - name: bash\n      arguments: {{command: \"sh -c 'sleep 60; : {mark}' & sleep 60 # {mark}\"}}\n- text: never\n"
    );
    let mut wire = Wire::start(e, &[], &script);
    wire.initialize();
    let session = wire.new_session(1, e);
    wire.send(
        &json!({"jsonrpc": "2.0", "id": 2, "method": "session/prompt",
            "params": {"sessionId": session, "prompt": [{"type": "text", "text": "sleep"}]}})
        .to_string(),
    );
    assert!(
        super::support::wait_until(Duration::from_secs(20), || {
            !super::support::processes_with(mark).is_empty()
        }),
        "the tool never started"
    );
    (wire, session)
}

/// After bridle ended mid-turn: the tools' processes (carrying `mark`) are gone, the log
/// verifies, and it ends with the turn's end; returns who cancelled the turn.
fn ended_cleanly(e: &ExecEnv, mark: &str, session: &str, what: &str) -> Option<String> {
    assert!(
        super::support::wait_until(Duration::from_secs(10), || {
            super::support::processes_with(mark).is_empty()
        }),
        "the tool outlived bridle ({what})"
    );
    super::support::assert_no_survivor(mark, what);
    let verify = super::support::run_bounded(
        e.bridle()
            .args(["log", "verify", session, "--session-dir"])
            .arg(e.home.join("sessions")),
    );
    verify.assert_code(0);
    match super::run_cli::events(e, session).pop() {
        Some(bridle_agent::log::Event::TurnEnd { cancelled_by, .. }) => cancelled_by,
        other => panic!("the log does not end with the turn's end: {other:?}"),
    }
}

/// A client that closes stdin mid-turn: the turn is cancelled, the tools' processes killed,
/// bridle exits 0, and the log verifies with the turn ended.
#[test]
fn stdin_closed_mid_turn_exits_cleanly_and_the_log_verifies() {
    let e = ExecEnv::new();
    let mark = super::support::token("acp-eof");
    let (wire, session) = sleeping_turn(&e, &mark);
    let started = Instant::now();
    let (code, _, stderr) = wire.close();
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(
        ended_cleanly(&e, &mark, &session, "ACP client gone mid-turn").as_deref(),
        Some("the ACP client closed the connection")
    );
}

/// SIGTERM to `bridle acp` mid-turn: the turn is cancelled and says by what, the tools'
/// processes are killed, the log verifies with the turn ended, and bridle dies of the signal.
#[test]
fn sigterm_mid_turn_cancels_kills_the_tools_closes_the_log_and_bridle_dies_of_it() {
    use std::os::unix::process::ExitStatusExt;

    let e = ExecEnv::new();
    let mark = super::support::token("acp-sigterm");
    let (mut wire, session) = sleeping_turn(&e, &mark);
    let pid = nix::unistd::Pid::from_raw(i32::try_from(wire.child.id()).unwrap());
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
    let deadline = Instant::now() + Duration::from_secs(15);
    let status = loop {
        if let Some(status) = wire.child.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "bridle acp outlived SIGTERM");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(status.signal(), Some(15), "{status:?}");
    assert_eq!(
        ended_cleanly(&e, &mark, &session, "bridle acp terminated mid-turn").as_deref(),
        Some("signal SIGTERM")
    );
}

/// Nothing but protocol lines reaches stdout: not a tool's flood of output, not a sandboxed
/// process writing to /dev/stdout or fd 1 of its parent, not the terminal, not tracing.
#[test]
fn nothing_but_protocol_lines_reach_stdout() {
    let e = ExecEnv::new();
    let script = r#"
- tool_calls:
    - name: bash
      arguments: {command: "seq 1 20000; echo leak-a > /dev/stdout; echo leak-b > /proc/$PPID/fd/1; echo leak-c > /dev/tty; true"}
    - name: terminal
      arguments: {input: "echo leak-d > /dev/stdout; echo leak-e\n", wait_ms: 500}
- text: done
"#;
    let mut wire = Wire::start(&e, &["-vv"], script);
    wire.initialize();
    let session = wire.new_session(1, &e);
    let answer = wire.request(
        2,
        "session/prompt",
        json!({"sessionId": session, "prompt": [{"type": "text", "text": "print"}]}),
    );
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let (code, lines, stderr) = wire.close();
    assert_eq!(code, Some(0), "{stderr}");
    assert!(lines.len() > 3, "{lines:#?}");
    for line in &lines {
        let v: Value = serde_json::from_str(line)
            .unwrap_or_else(|_| panic!("a non-protocol line on stdout: {line:?}"));
        assert_eq!(v["jsonrpc"], "2.0", "{line}");
    }
    // The tools' output reached the client inside the protocol, never beside it.
    assert!(
        lines
            .iter()
            .filter(|l| l.contains("tool_call_update"))
            .count()
            >= 2,
        "{lines:#?}"
    );
}

/// A request whose envelope is not JSON-RPC 2.0, or whose params do not fit its method, is
/// answered with its own id (-32600, -32602), each with one short, true line on stderr.
#[test]
fn envelope_and_params_errors_carry_the_request_id_and_say_one_short_line() {
    let e = ExecEnv::new();
    let mut wire = Wire::start(&e, &[], "- text: fine\n");
    wire.send(r#"{"jsonrpc":"1.0","id":14,"method":"initialize","params":{"protocolVersion":1}}"#);
    assert_eq!(error_code(&wire.answer(14)), -32600);
    wire.send(r#"{"jsonrpc":"2.0","id":15,"method":"initialize","params":"oops"}"#);
    assert_eq!(error_code(&wire.answer(15)), -32602);
    wire.initialize();
    let cwd = wire.request(16, "session/new", json!({"cwd": 5, "mcpServers": []}));
    assert_eq!(error_code(&cwd), -32602, "{cwd}");
    wire.send(r#"{"jsonrpc":"2.0","id":17,"method":"session/prompt","params":"x"}"#);
    assert_eq!(error_code(&wire.answer(17)), -32602);
    let (code, _, stderr) = wire.close();
    assert_eq!(code, Some(0), "{stderr}");
    assert!(!stderr.contains("-32603"), "{stderr}");
    for line in stderr.lines() {
        assert!(line.len() < 300, "a long line on stderr: {line}");
    }
    assert_eq!(
        stderr
            .lines()
            .filter(|l| l.contains("refused with"))
            .count(),
        4,
        "{stderr}"
    );
}

/// A `session/new` refused for its `additionalDirectories` leaves no session log behind.
#[test]
fn a_refused_session_new_leaves_no_session_log() {
    let e = ExecEnv::new();
    let secret = e.home.join(".ssh");
    std::fs::create_dir_all(&secret).unwrap();
    let mut wire = Wire::start(&e, &[], "- text: fine\n");
    wire.initialize();
    for (id, dir) in [(1, secret.clone()), (2, e.home.join("no-such-dir"))] {
        let answer = wire.request(
            id,
            "session/new",
            json!({"cwd": path_str(&e.workspace), "additionalDirectories": [path_str(&dir)],
                "mcpServers": []}),
        );
        assert_eq!(error_code(&answer), -32602, "{answer}");
        assert!(
            answer["error"]["data"]
                .as_str()
                .is_some_and(|d| d.contains("additionalDirectories")),
            "{answer}"
        );
    }
    let (code, _, stderr) = wire.close();
    assert_eq!(code, Some(0), "{stderr}");
    let logs: Vec<_> = std::fs::read_dir(e.home.join("sessions"))
        .map(|d| d.flatten().map(|f| f.file_name()).collect())
        .unwrap_or_default();
    assert!(
        !logs.iter().any(|n| n.to_string_lossy().ends_with(".jsonl")),
        "{logs:?}"
    );
}

/// A prompt that steers a turn, then `session/cancel` (or the client going away): both
/// prompts answer `cancelled` and no turn starts on its own to run the steering's tools.
#[test]
fn a_steering_prompt_never_runs_after_a_cancel_or_a_disconnect() {
    for disconnect in [false, true] {
        let e = ExecEnv::new();
        let mark = super::support::token("acp-steer");
        let script = format!(
            "- tool_calls:\n    - name: bash\n      arguments: {{command: \"exec -a {mark} sleep 60\"}}\n\
             - tool_calls:\n    - name: bash\n      arguments: {{command: \"echo ran > after.txt\"}}\n\
             - text: after\n"
        );
        let mut wire = Wire::start(&e, &[], &script);
        wire.initialize();
        let session = wire.new_session(1, &e);
        let prompt = |id: u64, text: &str| {
            json!({"jsonrpc": "2.0", "id": id, "method": "session/prompt",
                "params": {"sessionId": session, "prompt": [{"type": "text", "text": text}]}})
            .to_string()
        };
        wire.send(&prompt(2, "long"));
        assert!(
            super::support::wait_until(Duration::from_secs(20), || {
                !super::support::processes_with(&mark).is_empty()
            }),
            "the tool never started"
        );
        wire.send(&prompt(3, "then write the file"));
        if !disconnect {
            wire.send(
                &json!({"jsonrpc": "2.0", "method": "session/cancel",
                    "params": {"sessionId": session}})
                .to_string(),
            );
            for id in [2, 3] {
                let answer = wire.answer(id);
                assert_eq!(answer["result"]["stopReason"], "cancelled", "{answer}");
            }
            // Time for a turn that should not start to run its bash call.
            std::thread::sleep(Duration::from_secs(2));
        }
        let (code, _, stderr) = wire.close();
        assert_eq!(code, Some(0), "{stderr}");
        assert!(
            !e.workspace.join("after.txt").exists(),
            "the steering ran (disconnect: {disconnect})"
        );
        let turns = super::run_cli::events(&e, &session)
            .iter()
            .filter(|e| matches!(e, bridle_agent::log::Event::TurnStart { .. }))
            .count();
        assert_eq!(turns, 1, "disconnect: {disconnect}");
    }
}
