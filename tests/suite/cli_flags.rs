//! The command-line conventions every subcommand shares: the confinement flags of `exec`,
//! `shell`, `tool` and `run`, `--env`, durations, exit codes, JSON errors, completions and the
//! manual page (issue 8, section 4).

use crate::suite::support::{Env, ExecEnv, path_str, run, run_bounded};

#[test]
fn exec_runs_a_command_given_without_a_double_dash() {
    let env = ExecEnv::new();
    let r = run_bounded(env.bridle().args(["exec", "echo", "-n", "plain"]));
    r.assert_ok();
    assert_eq!(r.stdout, "plain");
    // Options after the command belong to the command.
    let r = run_bounded(env.bridle().args(["exec", "sh", "-c", "echo $0", "--mode"]));
    r.assert_ok();
    assert_eq!(r.stdout.trim(), "--mode");
}

#[test]
fn an_argument_that_is_not_utf8_is_a_usage_error_naming_it() {
    use std::os::unix::ffi::OsStrExt;
    let env = ExecEnv::new();
    let bad = std::ffi::OsStr::from_bytes(b"caf\xe9");
    let r = run_bounded(env.bridle().arg("exec").arg("echo").arg(bad));
    r.assert_code(2);
    assert!(
        r.stderr
            .starts_with("bridle: argument 3 (\"caf\u{fffd}\") is not valid UTF-8"),
        "{}",
        r.stderr
    );
    let r = run_bounded(env.bridle().args(["tool", "--json", "bash"]).arg(bad));
    r.assert_code(2);
}

#[test]
fn timeouts_take_durations_as_in_profiles() {
    let env = ExecEnv::new();
    run_bounded(env.bridle().args(["exec", "--timeout", "2m", "true"])).assert_ok();
    let r = run_bounded(
        env.bridle()
            .args(["exec", "--timeout", "1s", "sleep", "30"]),
    );
    r.assert_code(124);
    assert!(r.elapsed.as_secs() < 10, "{:?}", r.elapsed);
    let r = run_bounded(
        env.bridle()
            .args(["exec", "--timeout", "2 fortnights", "true"]),
    );
    r.assert_code(2);
    assert!(r.stderr.contains("2 fortnights"), "{}", r.stderr);
    // Out of range: the message names the flag and says what is accepted.
    for bad in ["0", "0s", "9000h", "inf"] {
        let r = run_bounded(env.bridle().args(["exec", "--timeout", bad, "true"]));
        r.assert_code(2);
        assert!(
            r.stderr.contains("--timeout")
                && r.stderr.contains("greater than 0 and at most one year"),
            "{bad}: {}",
            r.stderr
        );
    }
}

#[test]
fn usage_and_profile_errors_exit_2_and_sandbox_refusals_125() {
    let env = ExecEnv::new();
    // An unknown option is an error, not the command to run.
    let r = run_bounded(env.bridle().args(["exec", "--bogus", "true"]));
    r.assert_code(2);
    let r = run_bounded(env.bridle().args(["exec", "--bogus", "--", "true"]));
    r.assert_code(2);
    let r = run_bounded(env.bridle().args(["--profile", "nope", "exec", "true"]));
    r.assert_code(2);
    assert!(
        r.stderr.starts_with("bridle: unknown profile `nope`"),
        "{}",
        r.stderr
    );
    let broken = env.profile("broken.yaml", "mode: workspace-write\nbogus_key: 1\n");
    let r = run_bounded(env.bridle().args(["--profile", &broken, "exec", "true"]));
    r.assert_code(2);
    assert!(r.stderr.contains("bogus_key"), "{}", r.stderr);
    let r = run_bounded(env.bridle().args([
        "--profile",
        &broken,
        "tool",
        "bash",
        r#"{"command":"true"}"#,
    ]));
    r.assert_code(2);
    let r = run_bounded(
        env.bridle()
            .args(["--workspace", "/nonexistent/dir", "exec", "true"]),
    );
    r.assert_code(2);
    // `probe` answers whether the profile can be enforced: a profile that does not load cannot.
    let r = run_bounded(env.bridle().args(["--profile", "nope", "probe"]));
    r.assert_code(125);
}

#[test]
fn errors_are_json_on_stdout_under_json() {
    let env = Env::new();
    for args in [
        vec!["--profile", "nope", "policy", "show", "--json"],
        vec!["probe", "--json", "--bogus"],
        vec!["--profile", "nope", "probe", "--json"],
    ] {
        let r = run(env.bridle().args(&args));
        assert_ne!(r.code, Some(0), "{args:?}");
        let line = r.stdout.trim();
        assert_eq!(line.lines().count(), 1, "{args:?}: {}", r.stdout);
        let value: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("{args:?}: {e}: {line}"));
        assert_eq!(value["ok"], false, "{args:?}");
        assert!(
            value["error"].as_str().is_some_and(|e| !e.is_empty()),
            "{args:?}"
        );
        assert_eq!(
            value["exit_code"].as_i64(),
            r.code.map(i64::from),
            "{args:?}"
        );
    }
}

#[test]
fn a_usage_error_is_json_only_where_json_was_a_flag() {
    let env = Env::new();
    // `exec` has no `--json`: refusing it in JSON would say two things at once.
    let r = run(env.bridle().args(["--json", "exec", "--", "false"]));
    r.assert_code(2);
    assert!(r.stdout.is_empty(), "{}", r.stdout);
    assert!(
        r.stderr.contains("unexpected argument '--json'"),
        "{}",
        r.stderr
    );
    // After `--` the words are the command's, not bridle's.
    let r = run(env.bridle().args(["exec", "--bogus", "--", "x", "--json"]));
    r.assert_code(2);
    assert!(r.stdout.is_empty(), "{}", r.stdout);
    // The JSON error names the missing argument, not only the sentence that leads to it.
    let r = run(env.bridle().args(["policy", "explain", "bash", "--json"]));
    r.assert_code(2);
    let value: serde_json::Value = serde_json::from_str(r.stdout.trim()).unwrap();
    assert_eq!(
        value["error"],
        "the following required arguments were not provided: <COMMAND_LINE>"
    );
}

#[test]
fn a_reader_that_goes_away_is_no_error_and_probe_still_answers() {
    let env = Env::new();
    for args in [&["probe"][..], &["policy", "show"], &["probe", "--json"]] {
        let mut child = env
            .bridle()
            .args(args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // Closed before bridle writes a byte (it takes milliseconds to start).
        drop(child.stdout.take());
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {stderr}");
        assert!(!stderr.contains("Broken pipe"), "{args:?}: {stderr}");
    }
}

#[test]
fn exec_starts_in_the_workspace_unless_started_inside_it() {
    let env = Env::new();
    let ws = std::fs::canonicalize(&env.workspace).unwrap();
    std::fs::create_dir_all(ws.join("sub")).unwrap();
    let pwd = |dir: &std::path::Path| {
        let r = run(env.bridle().current_dir(dir).args([
            "--workspace",
            path_str(&ws),
            "exec",
            "--",
            "pwd",
        ]));
        r.assert_code(0);
        r.stdout.trim().to_owned()
    };
    // Started elsewhere (which the sandbox shows read-only): the workspace.
    assert_eq!(pwd(&env.home), path_str(&ws));
    // Started in a directory of the workspace: there.
    assert_eq!(pwd(&ws.join("sub")), path_str(&ws.join("sub")));
}

#[test]
fn completions_and_the_manual_page_are_generated() {
    let env = Env::new();
    for (shell, marker) in [
        ("bash", "complete -F"),
        ("zsh", "#compdef bridle"),
        ("fish", "complete -c bridle"),
    ] {
        let r = run(env.bridle().args(["completions", shell]));
        r.assert_ok();
        assert!(
            r.stdout.contains(marker),
            "{shell}: {}",
            &r.stdout[..r.stdout.len().min(200)]
        );
        assert!(
            r.stdout.contains("allow-write"),
            "{shell} completes exec's flags"
        );
    }
    run(env.bridle().args(["completions", "tcsh"])).assert_code(2);
    let r = run(env.bridle().arg("man"));
    r.assert_ok();
    assert!(r.stdout.contains(".TH bridle 1"), "{}", &r.stdout[..200]);
}

#[test]
fn env_flags_pass_and_set_variables_and_refuse_scrubbed_ones() {
    let env = ExecEnv::new();
    let r = run_bounded(
        env.bridle()
            .env("BUILD_FLAVOUR", "release")
            .env("OTHER_HOST_VAR", "hidden")
            .args(["exec", "--env", "BUILD_FLAVOUR", "--env", "STAGE=two", "--"])
            .args([
                "sh",
                "-c",
                "echo flavour=$BUILD_FLAVOUR stage=$STAGE other=$OTHER_HOST_VAR",
            ]),
    );
    r.assert_ok();
    assert_eq!(r.stdout.trim(), "flavour=release stage=two other=");
    let r = run_bounded(env.bridle().env("GITHUB_TOKEN", "ghp_x").args([
        "exec",
        "--env",
        "GITHUB_TOKEN",
        "--",
        "true",
    ]));
    r.assert_code(2);
    assert!(r.stderr.contains("`*TOKEN*`"), "{}", r.stderr);
    let r = run_bounded(env.bridle().args(["exec", "--env", "1BAD=x", "--", "true"]));
    r.assert_code(2);
    // -v names every variable that is dropped, and why.
    let r = run_bounded(
        env.bridle()
            .env("OTHER_HOST_VAR", "hidden")
            .env("AWS_SECRET_ACCESS_KEY", "x")
            .args(["-v", "exec", "--", "true"]),
    );
    r.assert_ok();
    assert!(
        r.stderr
            .contains("dropping `OTHER_HOST_VAR`: not in `environment.allow`"),
        "{}",
        r.stderr
    );
    assert!(
        r.stderr
            .contains("dropping `AWS_SECRET_ACCESS_KEY`: scrubbed by `"),
        "{}",
        r.stderr
    );
}

#[test]
fn tool_takes_the_confinement_flags_of_exec() {
    let env = ExecEnv::new();
    let outside = env.outside.join("made-by-tool");
    let allow = env.outside.display().to_string();
    let command = format!(
        r#"{{"command": "touch {} && echo stage=$STAGE"}}"#,
        outside.display()
    );
    // Without the flag, the write outside the workspace is denied by the sandbox.
    let r = run_bounded(env.bridle().args(["tool", "bash", &command]));
    r.assert_code(1);
    assert!(!outside.exists());
    let r = run_bounded(env.bridle().args([
        "tool",
        "--allow-write",
        &allow,
        "--env",
        "STAGE=ci",
        "bash",
        &command,
    ]));
    r.assert_ok();
    assert!(outside.exists());
    assert!(r.stdout.contains("stage=ci"), "{}", r.stdout);
    // --mode read-only: the workspace is no longer writable.
    let r = run_bounded(env.bridle().args([
        "tool",
        "--mode",
        "read-only",
        "bash",
        r#"{"command": "touch in-workspace"}"#,
    ]));
    r.assert_code(1);
    assert!(!env.workspace.join("in-workspace").exists());
    // --timeout caps what the call asks for.
    let r = run_bounded(env.bridle().args([
        "tool",
        "--timeout",
        "1",
        "bash",
        r#"{"command": "sleep 30", "timeout_secs": 60}"#,
    ]));
    r.assert_code(1);
    let value: serde_json::Value = serde_json::from_str(r.stdout.trim()).unwrap();
    assert_eq!(value["timed_out"], true, "{}", r.stdout);
    assert!(r.elapsed.as_secs() < 15, "{:?}", r.elapsed);
}

#[test]
fn run_takes_the_confinement_flags_of_exec() {
    let env = ExecEnv::new();
    let script = env.profile(
        "script.yaml",
        r#"- tool_calls:
    - name: bash
      arguments: {command: "echo stage=$STAGE; touch /proc/x 2>/dev/null; touch made-by-run"}
- text: done
"#,
    );
    let r = run_bounded(env.bridle().args([
        "run",
        "--mode",
        "read-only",
        "--env",
        "STAGE=ci",
        "--session-dir",
        env.outside.to_str().unwrap(),
        "--model",
        &format!("script:{script}"),
        "go",
    ]));
    r.assert_ok();
    assert_eq!(r.stdout.trim(), "done");
    assert!(
        !env.workspace.join("made-by-run").exists(),
        "read-only held"
    );
    let log = std::fs::read_dir(&env.outside)
        .unwrap()
        .flatten()
        .find(|e| e.path().extension().is_some_and(|x| x == "jsonl"))
        .expect("a session log");
    let text = std::fs::read_to_string(log.path()).unwrap();
    assert!(text.contains("stage=ci"), "the tool saw --env");
}

#[test]
fn a_run_past_its_timeout_is_cancelled_and_exits_124() {
    let env = ExecEnv::new();
    let script = env.profile(
        "slow.yaml",
        r#"- tool_calls:
    - name: bash
      arguments: {command: "sleep 60", timeout_secs: 120}
- text: never reached
"#,
    );
    let r = run_bounded(env.bridle().args([
        "run",
        "--timeout",
        "2s",
        "--session-dir",
        env.outside.to_str().unwrap(),
        "--model",
        &format!("script:{script}"),
        "go",
    ]));
    r.assert_code(124);
    assert!(r.stderr.contains("timed out after 2s"), "{}", r.stderr);
    assert!(r.elapsed.as_secs() < 20, "{:?}", r.elapsed);
    let log = std::fs::read_dir(&env.outside)
        .unwrap()
        .flatten()
        .find(|e| e.path().extension().is_some_and(|x| x == "jsonl"))
        .expect("a session log");
    let text = std::fs::read_to_string(log.path()).unwrap();
    assert!(
        text.contains("--timeout 2s passed"),
        "the cancel cause is logged"
    );
}

#[test]
fn decisions_are_coloured_on_a_terminal_unless_no_color_is_set() {
    let env = Env::new();
    let explain = format!(
        "{} --profile ci-locked policy explain bash 'git push'",
        env!("CARGO_BIN_EXE_bridle")
    );
    let on_terminal = |no_color: bool| {
        let mut cmd = std::process::Command::new("script");
        cmd.args(["-qec", &explain, "/dev/null"])
            .env_clear()
            .env("HOME", &env.home)
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env("TERM", "xterm-256color")
            .current_dir(&env.workspace);
        if no_color {
            cmd.env("NO_COLOR", "1");
        }
        run(&mut cmd)
    };
    let r = on_terminal(false);
    assert!(
        r.stdout.contains("\u{1b}[31mdeny\u{1b}[0m"),
        "{:?}",
        r.stdout
    );
    let r = on_terminal(true);
    assert!(
        r.stdout.contains("deny:") && !r.stdout.contains('\u{1b}'),
        "{:?}",
        r.stdout
    );
    // A pipe gets plain text, and JSON is one line.
    let r = run(env.bridle().args([
        "--profile",
        "ci-locked",
        "policy",
        "explain",
        "bash",
        "git push",
    ]));
    assert!(
        r.stdout.starts_with("deny: ") && !r.stdout.contains('\u{1b}'),
        "{}",
        r.stdout
    );
    for args in [
        vec!["policy", "show", "--json"],
        vec![
            "--profile",
            "ci-locked",
            "policy",
            "explain",
            "bash",
            "git push",
            "--json",
        ],
        vec!["probe", "--json"],
        vec!["log", "list", "--json"],
    ] {
        let r = run(env.bridle().args(&args));
        assert_eq!(r.stdout.lines().count(), 1, "{args:?}: {}", r.stdout);
        serde_json::from_str::<serde_json::Value>(r.stdout.trim())
            .unwrap_or_else(|e| panic!("{args:?}: {e}"));
    }
}
