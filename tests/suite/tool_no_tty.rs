//! What an agent runs cannot reach the terminal bridle runs on: its commands have no
//! controlling terminal (`/dev/tty` fails with ENXIO), so they can neither print a fake line
//! or a title there nor change its modes (`stty intr undef`). `bridle exec` keeps the terminal
//! by design; the `terminal` tool's shell has its own pty.

use std::path::Path;
use std::process::Command;

use super::support::{Env, path_str, run};

/// What a command would do to the person's terminal through `/dev/tty`. The texts looked for
/// are put together when it runs: `bridle run` shows the command line itself on stderr.
const PROBE: &str = "echo INJ$(echo ECTED)-LINE > /dev/tty; echo tty=$?; stty intr undef -echo < /dev/tty; echo stty=$?; printf '\\033]2;PW%s\\007' NED > /dev/tty";

/// Runs `sh -c SCRIPT` as the session leader of a new pty, then prints that pty's `intr` and
/// `echo` settings (`stty -a`): what the person's terminal is left with. Returns everything
/// the pty showed.
fn in_pty(script: &str, home: &Path, cwd: &Path) -> String {
    const DRIVER: &str = r#"
import os, pty, sys, select, time
pid, fd = pty.fork()
if pid == 0:
    os.execv("/bin/sh", ["sh", "-c", sys.argv[1] + "; echo; stty -a"])
out = b""
start = time.time()
while time.time() - start < 60:
    r, _, _ = select.select([fd], [], [], 0.1)
    if fd in r:
        try:
            chunk = os.read(fd, 4096)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
os.waitpid(pid, 0)
sys.stdout.write(out.decode(errors="replace"))
"#;
    let r = run(Command::new("/usr/bin/python3")
        .args(["-c", DRIVER, script])
        .env_clear()
        .env("HOME", home)
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("TERM", "dumb")
        .env("BRIDLE", env!("CARGO_BIN_EXE_bridle"))
        .current_dir(cwd));
    r.stdout
}

#[track_caller]
fn assert_terminal_untouched(shown: &str) {
    assert!(!shown.contains("INJECTED-LINE"), "{shown}");
    assert!(!shown.contains("PWNED"), "{shown}");
    assert!(shown.contains("intr = ^C"), "intr was changed: {shown}");
    assert!(
        shown.split_whitespace().any(|w| w == "echo"),
        "echo was turned off: {shown}"
    );
}

#[test]
fn a_bash_tool_command_has_no_controlling_terminal() {
    let env = Env::new();
    let args = serde_json::json!({ "command": PROBE }).to_string();
    let quoted = args.replace('\'', r"'\''");
    let shown = in_pty(
        &format!("\"$BRIDLE\" tool bash '{quoted}' </dev/null"),
        &env.home,
        &env.workspace,
    );
    assert_terminal_untouched(&shown);
    assert!(
        shown.contains("tty=1") && shown.contains("stty=1"),
        "{shown}"
    );
    assert!(shown.contains("No such device or address"), "{shown}");
}

#[test]
fn a_command_of_a_run_has_no_controlling_terminal() {
    let env = Env::new();
    let script = env.home.join("script.yaml");
    let call = serde_json::json!([
        {"tool_calls": [{"name": "bash", "arguments": {"command": PROBE}}]},
        {"text": "done"},
    ]);
    std::fs::write(&script, call.to_string()).unwrap();
    let sessions = env.home.join("sessions");
    let shown = in_pty(
        &format!(
            "\"$BRIDLE\" run --model script:{} --session-dir {} probe",
            path_str(&script),
            path_str(&sessions)
        ),
        &env.home,
        &env.workspace,
    );
    assert!(shown.contains("done"), "{shown}");
    assert_terminal_untouched(&shown);
}

#[test]
fn bridle_exec_keeps_the_persons_terminal() {
    let env = Env::new();
    let shown = in_pty(
        "\"$BRIDLE\" exec -- sh -c 'echo KEPT > /dev/tty; echo tty=$?'",
        &env.home,
        &env.workspace,
    );
    assert!(shown.contains("KEPT") && shown.contains("tty=0"), "{shown}");
}
