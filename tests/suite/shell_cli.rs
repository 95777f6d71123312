//! `bridle shell`: an interactive bash in a pseudo-terminal, confined like `bridle exec`.

use super::support::{ExecEnv, path_str, run};

/// Runs `bridle shell` in a pty, types `input` once the shell started, and returns (output, exit
/// status).
fn in_pty(env: &ExecEnv, input: &str) -> (String, i32) {
    let r = super::support::bridle_in_pty(&["shell"], &env.home, &env.workspace, None, Some(input));
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

#[test]
fn shell_takes_the_confinement_flags_of_exec() {
    let e = ExecEnv::new();
    let outside = e.outside.display().to_string();
    let input = format!("touch {outside}/from-shell; echo wrote=$?; echo stage=$STAGE; exit 0\n");
    let r = super::support::bridle_in_pty(
        &["shell", "--allow-write", &outside, "--env", "STAGE=ci"],
        &e.home,
        &e.workspace,
        None,
        Some(&input),
    );
    assert_eq!(r.code, Some(0), "{}", r.stdout);
    assert!(
        r.stdout.contains("wrote=0") && r.stdout.contains("stage=ci"),
        "{}",
        r.stdout
    );
    assert!(e.outside.join("from-shell").exists());
}

#[test]
fn a_shell_past_its_timeout_is_killed_with_its_tree() {
    let e = ExecEnv::new();
    let r = super::support::bridle_in_pty(
        &["shell", "--timeout", "2s"],
        &e.home,
        &e.workspace,
        None,
        Some("sleep 60\n"),
    );
    assert_eq!(r.code, Some(124), "{}", r.stdout);
    assert!(r.stdout.contains("timed out after 2s"), "{}", r.stdout);
    assert!(r.elapsed.as_secs() < 15, "{:?}", r.elapsed);
}
