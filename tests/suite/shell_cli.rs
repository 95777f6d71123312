//! `bridle shell`: an interactive bash in a pseudo-terminal, confined like `bridle exec`.

use std::process::Command;

use super::support::{ExecEnv, path_str, run};

/// Runs `bridle shell` in a pty (python's `pty.fork`), types `input` once the shell started,
/// and returns (output, exit status).
fn in_pty(env: &ExecEnv, input: &str) -> (String, i32) {
    let script = r#"
import os, pty, sys, select, time
argv = sys.argv[2:]
pid, fd = pty.fork()
if pid == 0:
    os.execv(argv[0], argv)
out = b""
sent = False
start = time.time()
while time.time() - start < 20:
    r, _, _ = select.select([fd], [], [], 0.1)
    if fd in r:
        try:
            chunk = os.read(fd, 4096)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    if not sent and time.time() - start > 1.0:
        os.write(fd, sys.argv[1].encode())
        sent = True
_, status = os.waitpid(pid, 0)
sys.stdout.write(out.decode(errors="replace"))
sys.exit(os.waitstatus_to_exitcode(status))
"#;
    let mut cmd = Command::new("/usr/bin/python3");
    cmd.arg("-c")
        .arg(script)
        .arg(input)
        .arg(env!("CARGO_BIN_EXE_bridle"))
        .arg("shell")
        .env_clear()
        .env("HOME", &env.home)
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("TERM", "dumb")
        .current_dir(&env.workspace);
    let r = run(&mut cmd);
    (r.stdout, r.code.unwrap_or(-1))
}

#[test]
fn shell_is_interactive_confined_and_exits_with_its_status() {
    let e = ExecEnv::new();
    let victim = e.outside_file("victim.txt", "original");
    let input = format!(
        "echo sum=$((3+4)); echo x > {}; echo write=$?; touch made-in-shell; sleep 30 & jobs; exit 3\n",
        path_str(&victim)
    );
    let (out, code) = in_pty(&e, &input);
    assert_eq!(code, 3, "{out}");
    assert!(out.contains("sum=7") && out.contains("Running"), "{out}");
    assert!(!out.contains("write=0"), "{out}");
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "original");
    assert!(e.workspace.join("made-in-shell").exists());
}

#[test]
fn shell_without_a_terminal_is_a_usage_error() {
    let e = ExecEnv::new();
    let r = run(e.bridle().arg("shell").stdin(std::process::Stdio::null()));
    r.assert_code(2);
    assert!(r.stderr.contains("needs a terminal"), "{}", r.stderr);
}
