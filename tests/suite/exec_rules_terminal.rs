//! The persistent terminal under command rules: every evasion typed into it, several lines in
//! one call, and evasions split over calls, each denied at its exec and attributed to its call.

use bridle_agent::log::Event;

use super::exec_rules::{EVASIONS, assert_nothing_pushed, with_remote};
use super::run_cli::{agent, events, exec_events, session_id, tool_results};
use super::run_log_cli::show;

#[test]
fn the_terminal_denies_every_evasion_typed_line_by_line() {
    let e = with_remote();
    for (what, line) in EVASIONS {
        // A session of its own for each: what one leaves in the shell (a trap, an alias, a
        // directory) stays out of the next. A call per line, as a person types them (several
        // lines in one call: `a_terminal_call_of_several_lines_...` below).
        let mut script = String::new();
        for (i, part) in line.split('\n').enumerate() {
            let typed = if i == 0 {
                format!("cd repo && {part}\n")
            } else {
                format!("{part}\n")
            };
            let input = serde_json::to_string(&typed).unwrap();
            script.push_str(&format!(
                "- tool_calls:\n    - name: terminal\n      arguments: {{input: {input}, wait_ms: 5000}}\n"
            ));
        }
        script.push_str("- text: done\n");
        let r = agent(&e, &script, &["--profile", "ci-locked"], "push somehow");
        r.assert_code(0);
        let events = events(&e, &session_id(&r));
        // Refused before it was typed (the command-line rules saw it), or typed and refused at
        // an exec (a trap's push at the shell's exit, when the session ends, included).
        let refused_call = events.iter().any(|ev| {
            matches!(ev, Event::ToolDecision { decision, by, .. }
                if *decision == bridle_policy::Decision::Deny && by.contains("deny-git-push"))
        });
        let refused_exec = events.iter().any(|ev| {
            matches!(ev, Event::ExecDecision { exec, .. }
                if exec.rule.as_deref() == Some("deny-git-push") && exec.outcome == "refused")
        });
        assert!(refused_call || refused_exec, "{what}: {events:?}");
        assert_nothing_pushed(&e, what);
    }
}

#[test]
fn a_terminal_call_of_several_lines_returns_once_the_shell_has_read_them_all() {
    let e = with_remote();
    // Three commands, then a loop over three lines: every line's output and the push's denial
    // belong to the call that typed them, not to the next call or to none.
    let script = r#"
- tool_calls:
    - name: terminal
      arguments: {input: "cd repo && export GIT_CONFIG_GLOBAL=../gitconfig\ngit config --global alias.pp push\ngit pp origin HEAD:main; echo pp=$?\n", wait_ms: 10000}
- tool_calls:
    - name: terminal
      arguments: {input: "for i in 1 2\ndo echo n$i-done\ndone\n", wait_ms: 10000}
- text: done
"#;
    let r = agent(&e, script, &["--profile", "ci-locked"], "push somehow");
    r.assert_code(0);
    let events = events(&e, &session_id(&r));
    let results = tool_results(&events);
    assert!(
        results[0].contains("[bridle: rule deny-git-push denied exec of")
            && results[0].contains("pp=126"),
        "{results:?}"
    );
    assert!(
        results[1].contains("n1-done") && results[1].contains("n2-done"),
        "{results:?}"
    );
    let denials: Vec<_> = exec_events(&events)
        .into_iter()
        .map(|(call_id, exec)| (call_id, exec.between_calls))
        .collect();
    assert_eq!(denials, [("call_1".to_owned(), false)], "{events:?}");
    assert_nothing_pushed(&e, "several lines in one call");
}

#[test]
fn the_terminal_is_supervised_across_calls_and_the_log_records_each_denial() {
    let e = with_remote();
    // One evasion split over two calls each: `hash -p` in one call and its use in the next;
    // a line continued with a backslash; an alias; a script written in one call and run in the
    // next. What the command-line rules cannot see in one call (the alias's body, half a line)
    // runs, and the supervisor denies the exec it leads to in the next.
    let script = r#"
- tool_calls:
    - name: terminal
      arguments: {input: "cd repo && hash -p \"$(command -v git)\" p\n", wait_ms: 3000}
- tool_calls:
    - name: terminal
      arguments: {input: "p push origin HEAD:main; echo hash=$?\n", wait_ms: 5000}
- tool_calls:
    - name: terminal
      arguments: {input: "gi\\\n", wait_ms: 1000}
- tool_calls:
    - name: terminal
      arguments: {input: "t push origin HEAD:main; echo cont=$?\n", wait_ms: 5000}
- tool_calls:
    - name: terminal
      arguments: {input: "alias q='git push'\n", wait_ms: 1000}
- tool_calls:
    - name: terminal
      arguments: {input: "q origin HEAD:main; echo alias=$?\n", wait_ms: 5000}
- tool_calls:
    - name: terminal
      arguments: {input: "echo 'git push origin HEAD:main' > ../later.sh\n", wait_ms: 2000}
- tool_calls:
    - name: terminal
      arguments: {input: "bash ../later.sh; echo later=$?\n", wait_ms: 5000}
- text: done
"#;
    let r = agent(&e, script, &["--profile", "ci-locked"], "push somehow");
    r.assert_code(0);
    let id = session_id(&r);
    let events = events(&e, &id);
    let execs = exec_events(&events);
    assert!(execs.len() >= 2, "{execs:?}");
    for (_, exec) in &execs {
        assert_eq!(exec.rule.as_deref(), Some("deny-git-push"), "{exec:?}");
        assert_eq!(exec.outcome, "refused", "{exec:?}");
        assert!(!exec.ancestry.is_empty(), "{exec:?}");
    }
    // `hash -p` makes `p` the git binary: it is git by identity.
    assert!(
        execs
            .iter()
            .any(|(_, x)| x.argv.first().map(String::as_str) == Some("p") && x.same_as == ["git"]),
        "{execs:?}"
    );
    let results = tool_results(&events);
    let supervised = |r: &str| r.contains("[bridle: rule deny-git-push denied exec of");
    assert!(supervised(&results[1]), "{results:?}");
    assert!(supervised(&results[3]), "{results:?}");
    assert!(supervised(&results[5]), "{results:?}");
    assert!(supervised(&results[7]), "{results:?}");
    assert_nothing_pushed(&e, "terminal");
    // `log show` prints each decision with the processes above it.
    let shown = show(&e, &[&id]);
    assert!(
        shown
            .stdout
            .contains("exec: rule deny-git-push denied exec of"),
        "{}",
        shown.stdout
    );
    assert!(shown.stdout.contains("started by: "), "{}", shown.stdout);
}
