//! The persistent terminal's processes exec between calls: each exec is decided when it
//! happens (a question goes to the session's answerer at once), reported with the next call
//! marked as not that call's doing, or, when the session ends first, on record belonging to no
//! call.

use bridle_agent::log::Event;

use super::exec_rules::{assert_nothing_pushed, git, script, with_remote};
use super::run_cli::{agent, events, exec_events, session_id, tool_results};
use super::support::run_bounded;

fn call_ids(events: &[Event]) -> Vec<String> {
    events
        .iter()
        .filter_map(|ev| match ev {
            Event::ToolCall(call) => Some(call.call_id.clone()),
            _ => None,
        })
        .collect()
}

fn log_show(e: &super::support::ExecEnv, id: &str) -> String {
    let mut cmd = e.bridle();
    cmd.args(["log", "show", id, "--session-dir"])
        .arg(e.home.join("sessions"));
    let shown = run_bounded(&mut cmd);
    shown.assert_ok();
    shown.stdout
}

/// Runs a session under `profile` whose first `terminal` call leaves a push running in the
/// background (a second later; its status goes to `bg.txt`), then a `bash` call that waits
/// three seconds without touching the terminal and prints `bg.txt`, then `more` (script
/// steps).
fn push_in_the_background(
    profile: &str,
    more: &str,
) -> (super::support::ExecEnv, String, Vec<Event>) {
    let e = with_remote();
    let name = script(
        &e,
        "later.sh",
        "sleep 1; git push origin HEAD:main; echo bg=$? > ../bg.txt",
    );
    let steps = format!(
        r#"
- tool_calls:
    - name: terminal
      arguments: {{input: "{name} &\n", wait_ms: 2000}}
- tool_calls:
    - name: bash
      arguments: {{command: "sleep 3; cat bg.txt"}}
{more}- text: done
"#
    );
    let r = agent(
        &e,
        &steps,
        &["--profile", profile],
        "push in the background",
    );
    r.assert_code(0);
    let id = session_id(&r);
    let events = events(&e, &id);
    (e, id, events)
}

#[test]
fn a_background_exec_between_terminal_calls_is_decided_at_once_and_reported_with_the_next_call() {
    let (e, id, events) = push_in_the_background(
        "ci-locked",
        "- tool_calls:\n    - name: terminal\n      arguments: {input: \"echo next\\n\", wait_ms: 3000}\n",
    );
    let results = tool_results(&events);
    assert!(results[1].contains("bg=126"), "{results:?}");
    assert!(
        results[2].contains("[bridle: between calls: rule deny-git-push denied exec of"),
        "{results:?}"
    );
    assert!(
        !results[0].contains("deny-git-push"),
        "the call that started it returned first: {results:?}"
    );
    let calls = call_ids(&events);
    let execs = exec_events(&events);
    assert_eq!(execs.len(), 1, "{execs:?}");
    let (call_id, exec) = &execs[0];
    assert_eq!(*call_id, calls[2], "{execs:?}");
    assert!(exec.between_calls, "{exec:?}");
    assert_eq!(exec.rule.as_deref(), Some("deny-git-push"), "{exec:?}");
    assert_eq!(exec.outcome, "refused", "{exec:?}");
    assert!(exec.ancestry.iter().any(|a| a.contains("bash")), "{exec:?}");
    assert_nothing_pushed(&e, "background push");
    let shown = log_show(&e, &id);
    assert!(
        shown.contains("exec (between calls, before this call): rule deny-git-push denied exec of"),
        "{shown}"
    );
    // The refused exec's `Permission denied`, printed in the terminal, is the rule's doing.
    assert!(!shown.contains("denied by the sandbox"), "{shown}");
}

#[test]
fn an_exec_asked_about_between_calls_with_nobody_to_ask_is_refused_at_once_and_on_record_at_session_end()
 {
    // workstation asks before `git push`; headless, nobody can be asked, so the push is refused
    // at once; the session ends before any other terminal call.
    let (e, id, events) = push_in_the_background("workstation", "");
    let execs = exec_events(&events);
    assert_eq!(execs.len(), 1, "{execs:?}");
    let (call_id, exec) = &execs[0];
    assert_eq!(call_id, "", "belongs to no call: {execs:?}");
    assert!(exec.between_calls, "{exec:?}");
    assert_eq!(exec.rule.as_deref(), Some("ask-git-push"), "{exec:?}");
    assert!(
        exec.answer
            .as_deref()
            .is_some_and(|a| a.starts_with("unavailable by nobody")),
        "{exec:?}"
    );
    // The last event: nothing after the session's end is lost.
    assert!(
        matches!(events.last(), Some(Event::ExecDecision { .. })),
        "{events:?}"
    );
    let bash = tool_results(&events)[1].clone();
    assert!(bash.contains("bg=126"), "{bash}");
    assert_nothing_pushed(&e, "background push asked about");
    let shown = log_show(&e, &id);
    assert!(
        shown.contains("exec between calls: rule ask-git-push needs approval for exec of"),
        "{shown}"
    );
    assert!(shown.contains("unavailable by nobody"), "{shown}");
}

#[test]
fn a_question_of_a_command_that_outlives_its_call_is_asked_at_once_and_reported_with_the_next_call()
{
    let e = with_remote();
    // In the foreground, quiet past the call's wait: the call returns while it runs.
    let name = script(
        &e,
        "slow.sh",
        "sleep 1; git push origin HEAD:main; echo fg=$?",
    );
    let steps = format!(
        r#"
- tool_calls:
    - name: terminal
      arguments: {{input: "{name}\n", wait_ms: 300}}
- tool_calls:
    - name: bash
      arguments: {{command: "sleep 3"}}
- tool_calls:
    - name: terminal
      arguments: {{input: "echo next\n", wait_ms: 5000}}
- text: done
"#
    );
    let r = agent(&e, &steps, &["--profile", "workstation"], "push slowly");
    r.assert_code(0);
    let events = events(&e, &session_id(&r));
    let results = tool_results(&events);
    assert!(!results[0].contains("fg="), "{results:?}");
    assert!(results[2].contains("fg=126"), "{results:?}");
    assert!(
        results[2].contains("[bridle: between calls: rule ask-git-push needs approval for exec of"),
        "{results:?}"
    );
    let calls = call_ids(&events);
    let execs = exec_events(&events);
    assert_eq!(execs.len(), 1, "{execs:?}");
    assert_eq!(execs[0].0, calls[2], "{execs:?}");
    assert!(execs[0].1.between_calls, "{execs:?}");
    assert_nothing_pushed(&e, "a slow push");
}

#[test]
fn a_person_answers_a_question_between_calls_when_it_is_asked() {
    for (answer, pushed) in [("y", true), ("n", false)] {
        let e = with_remote();
        let name = script(
            &e,
            "later.sh",
            "sleep 1; git push -q origin HEAD:main; echo bg=$? > ../bg.txt",
        );
        let steps = format!(
            r#"
- tool_calls:
    - name: terminal
      arguments: {{input: "{name} &\n", wait_ms: 2000}}
- tool_calls:
    - name: bash
      arguments: {{command: "sleep 4; cat bg.txt"}}
- text: done
"#
        );
        let file = e.home.join("script.yaml");
        std::fs::write(&file, steps).unwrap();
        let model = format!("script:{}", super::support::path_str(&file));
        let sessions = e.home.join("sessions");
        let args = [
            "--profile",
            "workstation",
            "run",
            "--model",
            &model,
            "--session-dir",
            super::support::path_str(&sessions),
            "push in the background",
        ];
        // The person at bridle's terminal is asked while no call runs.
        let r = super::support::bridle_in_pty(&args, &e.home, &e.workspace, Some(answer), None);
        r.assert_code(0);
        assert!(
            r.stdout.contains("approval needed for tool `exec`")
                && r.stdout
                    .contains("a process an earlier terminal call left running"),
            "{answer}: {}",
            r.stdout
        );
        let refs = git(&e.workspace.join("remote.git"), &["for-each-ref"]);
        assert_eq!(!refs.trim().is_empty(), pushed, "{answer}: {}", r.stdout);
        let want = if pushed { "bg=0" } else { "bg=126" };
        let status = std::fs::read_to_string(e.workspace.join("bg.txt")).unwrap_or_default();
        assert_eq!(status.trim(), want, "{answer}: {}", r.stdout);
    }
}
