//! `bridle run --json` and the progress lines of `bridle run`: what a script or a person
//! watching sees of a session while it runs, checked against the session's log.

use bridle_agent::log::SessionDir;
use pretty_assertions::assert_eq;
use serde_json::Value;

use super::run_cli::{agent, session_id};
use super::support::{ExecEnv, path_str};

fn script(outside: &str) -> String {
    format!(
        r#"
- text: Looking.
  tool_calls:
    - name: bash
      arguments: {{command: "echo hi > made.txt"}}
    - name: write_file
      arguments: {{path: "{outside}", content: nope}}
    - name: read_file
      arguments: "{{not json"
- text: Done here.
"#
    )
}

#[test]
fn run_json_prints_one_line_per_committed_event_matching_the_log_and_the_answer_last() {
    let e = ExecEnv::new();
    let outside = e.outside.join("victim.txt");
    let r = agent(&e, &script(path_str(&outside)), &["--json"], "make a file");
    r.assert_code(0);
    let lines: Vec<Value> = r
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l:?}")))
        .collect();
    assert!(lines.iter().all(|l| l["v"] == 1), "{lines:?}");
    let last = lines.last().unwrap();
    assert_eq!(last["event"], "final");
    assert_eq!(last["answer"], "Done here.");
    assert_eq!(last["reason"], "completed");
    let id = session_id(&r);
    assert_eq!(last["session"], id.as_str());
    assert_eq!(lines[0]["event"], "session");
    assert_eq!(lines[0]["id"], id.as_str());

    // Every line but the last names a log event by its seq, in order, and says what it says.
    let dir = SessionDir::existing(&e.home.join("sessions")).unwrap();
    let records = dir.read(&id).unwrap();
    let mut previous = None;
    for line in &lines[..lines.len() - 1] {
        let seq = line["seq"].as_u64().unwrap_or_else(|| panic!("{line}"));
        assert!(previous < Some(seq), "out of order: {line}");
        previous = Some(seq);
        let record = &records[usize::try_from(seq).unwrap()];
        let event = record.event().unwrap().unwrap();
        let expected = bridle_agent::front::json::json_line(seq, &event).unwrap();
        assert_eq!(line, &expected);
    }
    // And no event a script needs is missing.
    let needed: Vec<u64> = records
        .iter()
        .filter(|r| {
            let e = r.event().unwrap().unwrap();
            bridle_agent::front::json::json_line(r.seq, &e).is_some()
        })
        .map(|r| r.seq)
        .collect();
    let shown: Vec<u64> = lines[..lines.len() - 1]
        .iter()
        .map(|l| l["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(shown, needed);
    let names: Vec<&str> = lines.iter().map(|l| l["event"].as_str().unwrap()).collect();
    for name in [
        "turn_start",
        "step_start",
        "tool_call",
        "tool_decision",
        "tool_result",
        "turn_end",
    ] {
        assert!(names.contains(&name), "{name} missing: {names:?}");
    }
    let decisions: Vec<&str> = lines
        .iter()
        .filter(|l| l["event"] == "tool_decision")
        .map(|l| l["decision"].as_str().unwrap())
        .collect();
    // The call with malformed arguments never reaches a decision.
    assert_eq!(decisions, ["allow", "deny"]);
    let raw = lines
        .iter()
        .find(|l| l["event"] == "tool_call" && l["name"] == "read_file")
        .unwrap();
    assert_eq!(raw["arguments"], "{not json");
    // No progress lines on stderr with --json.
    assert!(!r.stderr.contains(" → "), "{}", r.stderr);
}

#[test]
fn run_prints_one_progress_line_per_tool_call_with_its_decision_and_none_with_quiet() {
    let e = ExecEnv::new();
    let outside = e.outside.join("victim.txt");
    let r = agent(&e, &script(path_str(&outside)), &[], "make a file");
    r.assert_code(0);
    assert_eq!(r.stdout.trim(), "Done here.");
    let progress: Vec<&str> = r.stderr.lines().filter(|l| l.contains(" → ")).collect();
    assert_eq!(progress.len(), 3, "{}", r.stderr);
    assert!(
        progress[2].starts_with("bridle: read_file: {not json → not run: "),
        "{progress:?}"
    );
    assert!(
        progress[0].starts_with("bridle: bash: echo hi > made.txt → allow"),
        "{progress:?}"
    );
    assert!(
        progress[1].starts_with(&format!(
            "bridle: write_file: {} → deny",
            path_str(&outside)
        )),
        "{progress:?}"
    );
    assert!(
        progress[1].contains("outside every writable root"),
        "{progress:?}"
    );

    let quiet = agent(&e, &script(path_str(&outside)), &["-q"], "again");
    quiet.assert_code(0);
    assert!(!quiet.stderr.contains(" → "), "{}", quiet.stderr);
}
