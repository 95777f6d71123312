//! What `bridle run` takes before a turn: the session it continues (`--resume`, `--fork`: an
//! id, a prefix, `last`), the model and the task (checked before any session exists), a
//! plan-mode command as the task, and how `--json` reports all of it on stdout.

use std::io::Read;
use std::process::Stdio;
use std::time::Duration;

use bridle_agent::log::Event;
use serde_json::Value;

use super::run_cli::{agent, agent_cmd, events, session_id};
use super::support::{ExecEnv, path_str, run_bounded};

/// The session ids in the test's session directory.
fn ids(e: &ExecEnv) -> Vec<String> {
    match bridle_agent::log::SessionDir::existing(&e.home.join("sessions")) {
        Ok(dir) => dir.ids().unwrap().into_iter().map(|(id, _)| id).collect(),
        Err(_) => Vec::new(),
    }
}

fn json_lines(stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l:?}")))
        .collect()
}

#[test]
fn resume_and_fork_take_a_prefix_or_last_and_refuse_an_ambiguous_prefix() {
    let e = ExecEnv::new();
    let first = agent(&e, "- text: one\n", &[], "first");
    first.assert_code(0);
    let a = session_id(&first);
    let second = agent(&e, "- text: two\n", &[], "second");
    second.assert_code(0);
    let b = session_id(&second);

    let by_prefix = agent(
        &e,
        "- text: more\n",
        &["--resume", &a[..a.len() - 2]],
        "more",
    );
    by_prefix.assert_code(0);
    assert_eq!(session_id(&by_prefix), a);
    let last = agent(&e, "- text: more\n", &["--resume", "last"], "more");
    last.assert_code(0);
    assert_eq!(session_id(&last), b);

    // Both ids start with the date: several sessions, listed, exit 2, nothing created.
    let before = ids(&e).len();
    let ambiguous = agent(&e, "- text: x\n", &["--fork", &a[..8]], "again");
    ambiguous.assert_code(2);
    assert!(
        ambiguous.stderr.contains(&a) && ambiguous.stderr.contains(&b),
        "{}",
        ambiguous.stderr
    );
    assert_eq!(ids(&e).len(), before);
    let forked = agent(&e, "- text: x\n", &["--fork", "last"], "again");
    forked.assert_code(0);
    assert!(
        events(&e, &session_id(&forked)).contains(&Event::SessionForked {
            from: b.clone(),
            seq: events(&e, &b).len() as u64 - 1,
        })
    );
}

#[test]
fn a_bad_model_or_an_empty_task_is_a_usage_error_that_leaves_no_session() {
    let e = ExecEnv::new();
    let broken = e.home.join("broken.yaml");
    std::fs::write(&broken, "- text: [unclosed\n").unwrap();
    let models = [
        "foo:bar".to_owned(),
        "script:/nonexistent.yaml".to_owned(),
        "script:".to_owned(),
        format!("script:{}", path_str(&broken)),
    ];
    for model in &models {
        let r = run_bounded(
            e.bridle()
                .args(["run", "--model", model, "--session-dir"])
                .arg(e.home.join("sessions"))
                .arg("do it"),
        );
        r.assert_code(2);
        assert!(r.stderr.contains("model"), "{model}: {}", r.stderr);
        assert!(!r.stderr.contains("bridle: session "), "{}", r.stderr);
    }
    let empty = agent(&e, "- text: x\n", &[], "  ");
    empty.assert_code(2);
    assert!(empty.stderr.contains("task is empty"), "{}", empty.stderr);
    assert_eq!(ids(&e), Vec::<String>::new());
}

#[test]
fn run_json_reports_a_failure_as_one_object_on_stdout() {
    let e = ExecEnv::new();
    let bad_profile = e.home.join("bad.yaml");
    std::fs::write(&bad_profile, "mode: sideways\n").unwrap();
    let cases: [(&[&str], i64); 3] = [
        (&["--model", "foo:bar"], 2),
        (&["--resume", "nosuch"], 1),
        (&["--profile", path_str(&bad_profile)], 2),
    ];
    for (extra, code) in cases {
        let mut args = vec!["--json"];
        args.extend_from_slice(extra);
        let r = agent(&e, "- text: x\n", &args, "task");
        r.assert_code(i32::try_from(code).unwrap());
        let lines = json_lines(&r.stdout);
        let last = lines
            .last()
            .unwrap_or_else(|| panic!("{extra:?}: nothing on stdout"));
        assert_eq!(last["ok"], false, "{extra:?}: {last}");
        assert_eq!(last["exit_code"], code, "{extra:?}: {last}");
        assert!(last["error"].as_str().is_some_and(|s| !s.is_empty()));
    }
}

/// The task `/plan`, `/plan MSG` and `/plan off` are what they are in `bridle chat`; with
/// `--json`, a run with no turn still ends with its `final` line.
#[test]
fn plan_commands_as_the_task_switch_plan_mode_and_plan_msg_sends_the_message() {
    let e = ExecEnv::new();
    let planned = agent(&e, "- text: planning\n", &[], "/plan write a plan");
    planned.assert_code(0);
    let id = session_id(&planned);
    let log = events(&e, &id);
    let on = log
        .iter()
        .position(|e| *e == Event::PlanMode { active: true })
        .unwrap_or_else(|| panic!("plan mode never turned on: {log:#?}"));
    let sent = log
        .iter()
        .position(|e| matches!(e, Event::UserMessage { text, .. } if text == "write a plan"))
        .unwrap_or_else(|| panic!("the message was not sent: {log:#?}"));
    assert!(on < sent);
    assert!(
        !log.iter()
            .any(|e| matches!(e, Event::UserMessage { text, .. } if text.starts_with("/plan"))),
        "{log:#?}"
    );

    let off = agent(
        &e,
        "- text: unused\n",
        &["--resume", &id, "--json"],
        "/plan off",
    );
    off.assert_code(0);
    let lines = json_lines(&off.stdout);
    let last = lines.last().unwrap();
    assert_eq!(last["event"], "final", "{lines:?}");
    assert_eq!(last["session"], id.as_str());
    assert!(last["turn"].is_null() && last["reason"].is_null(), "{last}");
    assert_eq!(last["command"], "/plan off");

    let turns = |id: &str| {
        events(&e, id)
            .iter()
            .filter(|e| matches!(e, Event::TurnStart { .. }))
            .count()
    };
    let again = agent(&e, "- text: unused\n", &["--resume", &id], "/plan");
    again.assert_code(0);
    assert_eq!(turns(&id), 1);
    assert_eq!(
        events(&e, &id).last(),
        Some(&Event::PlanMode { active: true })
    );
}

/// A `/plan` task the command would refuse is a usage error (exit 2, naming the task) before
/// any session is created, or appended to when one is resumed.
#[test]
fn a_plan_task_with_bad_arguments_exits_2_and_leaves_no_session() {
    let e = ExecEnv::new();
    let bad = agent(&e, "- text: unused\n", &[], "/plan -x");
    bad.assert_code(2);
    assert!(
        bad.stderr.contains("`/plan -x`: usage: `/plan`"),
        "{}",
        bad.stderr
    );
    assert!(!bad.stderr.contains("session"), "{}", bad.stderr);
    assert_eq!(ids(&e), Vec::<String>::new());

    let first = agent(&e, "- text: one\n", &[], "first");
    first.assert_code(0);
    let id = session_id(&first);
    let before = events(&e, &id);
    let resumed = agent(&e, "- text: unused\n", &["--resume", &id], "/plan on");
    resumed.assert_code(2);
    assert!(resumed.stderr.contains("`/plan on`"), "{}", resumed.stderr);
    assert_eq!(
        events(&e, &id),
        before,
        "the resumed session was appended to"
    );
    assert_eq!(ids(&e), vec![id]);
}

/// A reader that closes stdout early (`| head -c 10`) ends the run quietly, with the status
/// its turn gives.
#[test]
fn a_closed_stdout_ends_a_run_quietly_with_the_turns_status() {
    let e = ExecEnv::new();
    let script = "- tool_calls:\n    - name: bash\n      arguments: {command: \"sleep 1\"}\n\
                  - text: done\n";
    let mut child = agent_cmd(&e, script, &["--json"], "wait")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut first = [0u8; 10];
    stdout.read_exact(&mut first).unwrap();
    drop(stdout);
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(std::time::Instant::now() < deadline, "bridle run hangs");
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert!(!stderr.contains("Broken pipe"), "{stderr}");
}
