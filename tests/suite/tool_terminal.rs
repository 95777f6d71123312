//! The persistent terminal: bash in a pseudo-terminal under the session's spec.

use std::time::{Duration, Instant};

use bridle_exec::terminal::Terminal;
use serde_json::{Value, json};

use super::support::{Env, assert_no_survivor, run, spec_for, token};

fn tool(env: &Env, profile: &str, args: &Value) -> Value {
    let mut cmd = env.bridle();
    cmd.args(["--profile", profile, "tool", "terminal", &args.to_string()])
        .stdin(std::process::Stdio::null());
    let r = run(&mut cmd);
    serde_json::from_str(r.stdout.trim())
        .unwrap_or_else(|e| panic!("{e}: {}\n{}", r.stdout, r.stderr))
}

#[test]
fn terminal_runs_commands_with_a_working_dev_tty() {
    let env = Env::new();
    let v = tool(
        &env,
        "workspace-write",
        &json!({"input": "echo $((6*7)); echo via-tty > /dev/tty; touch made-in-terminal\n"}),
    );
    assert_eq!(v["ok"], true, "{v}");
    let content = v["content"].as_str().unwrap();
    assert!(
        content.contains("42") && content.contains("via-tty") && content.ends_with("$ "),
        "{content:?}"
    );
    assert!(env.workspace.join("made-in-terminal").exists());
}

#[test]
fn tiocsti_inside_the_terminal_cannot_inject() {
    let env = Env::new();
    let code = "import fcntl, termios, sys\ntry:\n    fcntl.ioctl(0, termios.TIOCSTI, b'x')\n    print('INJECTED')\nexcept OSError as e:\n    print('errno', e.errno)\n";
    let v = tool(
        &env,
        "workspace-write",
        &json!({"input": format!("/usr/bin/python3 -c \"{}\"\n", code.replace('"', "\\\""))}),
    );
    let content = v["content"].as_str().unwrap();
    assert!(
        content.contains("errno 1") && !content.contains("INJECTED\n"),
        "{content}"
    );
}

#[test]
fn terminal_input_is_checked_by_the_command_rules() {
    let env = Env::new();
    let v = tool(
        &env,
        "ci-locked",
        &json!({"input": "cd . && git push origin main\n"}),
    );
    assert_eq!(v["denied_by"], "rule", "{v}");
}

#[test]
fn interrupt_reaches_the_foreground_job_and_close_leaves_nothing_behind() {
    let env = Env::new();
    let spec = spec_for(&env);
    let mut term = Terminal::start(
        &spec,
        env!("CARGO_BIN_EXE_bridle").into(),
        &env.workspace,
        24,
        80,
    )
    .unwrap();
    term.input("sleep 100; echo not-interrupted\n").unwrap();
    let _ = term.read(Duration::from_millis(300), Duration::from_millis(300));
    let start = Instant::now();
    term.interrupt().unwrap();
    let out = term.read(Duration::from_secs(5), Duration::from_secs(5));
    assert!(
        start.elapsed() < Duration::from_secs(4),
        "Ctrl-C did not stop the foreground job: {out:?}"
    );
    assert!(
        !out.contains("not-interrupted") && out.ends_with("$ "),
        "{out:?}"
    );
    let tok = token("terminal");
    term.input(&format!(
        "setsid sleep 300 & sleep 300 & : {tok}; echo started-{tok}\n"
    ))
    .unwrap();
    let out = term.read(Duration::from_secs(5), Duration::from_millis(500));
    assert!(out.contains(&format!("started-{tok}")), "{out:?}");
    term.close();
    assert_no_survivor(&tok, "terminal close");
}

#[test]
fn writes_through_the_terminal_are_confined_like_bash() {
    let env = super::support::ExecEnv::new();
    let victim = env.outside_file("victim.txt", "original");
    let input = format!(
        "echo x > {}; echo rc=$?; echo y > inside.txt\n",
        victim.display()
    );
    let v = tool(&env, "workspace-write", &json!({"input": input}));
    let content = v["content"].as_str().unwrap();
    assert!(
        content.contains("rc=1") || content.contains("rc=2"),
        "{content}"
    );
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "original");
    assert!(env.workspace.join("inside.txt").exists());
}
