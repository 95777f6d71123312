//! `bridle chat` driven in a real terminal (tmux): streamed text, approvals answered inline,
//! steering typed mid-turn, plan review, Ctrl-C, resize, Ctrl-D.

use super::chat_support::{Tmux, chat_args, exported_events, sessions};
use super::support::{ExecEnv, assert_no_survivor, path_str, processes_with, token, wait_until};

fn start(e: &ExecEnv, script: &str, extra: &[&str], env: &[(&str, &str)]) -> Tmux {
    let args = chat_args(e, script, extra);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    Tmux::start(e, &args, env, (80, 24))
}

/// The texts of the session's user messages, in order.
fn user_messages(events: &[serde_json::Value]) -> Vec<String> {
    of_type(events, "user/message")
        .iter()
        .map(|d| d["text"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// The events of type `kind`, their data.
fn of_type(events: &[serde_json::Value], kind: &str) -> Vec<serde_json::Value> {
    events
        .iter()
        .filter(|e| e["type"] == kind)
        .map(|e| e["data"].clone())
        .collect()
}

/// A chat whose turn runs `sleep 60` (its argv[0] a fresh marker), once the sleep runs.
fn running_sleep(e: &ExecEnv, tag: &str) -> (Tmux, String) {
    let marker = token(tag);
    let script = format!(
        "- tool_calls:\n    - name: bash\n      arguments: {{command: \"exec -a {marker} sleep 60\"}}\n- text: never\n"
    );
    let chat = start(e, &script, &[], &[("NO_COLOR", "1")]);
    chat.wait_for("you ›");
    chat.line("sleep");
    assert!(
        wait_until(super::chat_support::STEP, || !processes_with(&marker)
            .is_empty()),
        "the sleep never started:\n{}",
        chat.screen()
    );
    (chat, marker)
}

#[test]
fn chat_streams_text_and_asks_approvals_inline() {
    let e = ExecEnv::new();
    let yes = e.home.join("approved.txt");
    let no = e.home.join("refused.txt");
    // Writing outside the workspace needs an escalation, which a person must approve.
    let script = format!(
        r#"
- text: "Hello from the model.\nA second line, streamed."
  tool_calls:
    - name: bash
      arguments: {{command: "echo yes > {yes}", sandbox_permissions: danger-full-access, justification: "write the first file"}}
- tool_calls:
    - name: bash
      arguments: {{command: "echo no > {no}", sandbox_permissions: danger-full-access, justification: "write the second file"}}
- text: All done.
"#,
        yes = path_str(&yes),
        no = path_str(&no)
    );
    let chat = start(&e, &script, &[], &[("NO_COLOR", "1")]);
    chat.wait_for("you ›");
    chat.line("write two files");
    chat.wait_for("write the first file");
    let screen = chat.wait_for("allow this call once? [y/n]");
    assert!(screen.contains("y/n ›"), "{screen}");
    chat.line("maybe");
    chat.wait_for("answer y (allow this call once) or n (refuse it)");
    chat.line("y");
    chat.wait_for("write the second file");
    chat.line("n");
    let screen = chat.wait_for("All done.");
    assert!(screen.contains("Hello from the model."), "{screen}");
    assert!(screen.contains("A second line, streamed."), "{screen}");
    assert!(
        screen.contains("approval approved by the person at the front end"),
        "{screen}"
    );
    assert!(
        screen.contains("approval rejected by the person at the front end"),
        "{screen}"
    );
    assert!(screen.contains("⎿ ok"), "{screen}");
    // NO_COLOR: not one colour or attribute on the screen.
    assert!(
        !chat.screen_with_attributes().contains("\u{1b}["),
        "{:?}",
        chat.screen_with_attributes()
    );
    chat.key("C-d");
    assert_eq!(chat.exit_status(), 0);
    assert_eq!(std::fs::read_to_string(&yes).unwrap(), "yes\n");
    assert!(!no.exists(), "a refused call ran");
    let events = exported_events(&e, &sessions(&e));
    let answers: Vec<_> = of_type(&events, "approval/decided")
        .iter()
        .map(|d| d["answer"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(answers, ["approved", "rejected"], "{events:?}");
}

#[test]
fn typing_during_a_turn_steers_it_and_the_receipt_is_logged() {
    let e = ExecEnv::new();
    let script = r#"
- tool_calls:
    - name: bash
      arguments: {command: "sleep 3"}
- text: Steered as asked.
- text: The queued turn ran.
"#;
    let chat = start(&e, script, &[], &[("NO_COLOR", "1")]);
    chat.wait_for("you ›");
    chat.line("wait a bit");
    chat.wait_for("your message joined turn 0, step 0");
    chat.line("and then say so");
    chat.line("/queue and afterwards this");
    chat.wait_for("queued: it runs as the next turn");
    chat.wait_for("your message joined turn 0, step 1");
    chat.wait_for("Steered as asked.");
    chat.wait_for("your message was carried to turn 1, step 0");
    chat.wait_for("The queued turn ran.");
    // Idle again: the prompt says so.
    assert!(
        wait_until(super::chat_support::STEP, || {
            chat.screen().lines().rev().find(|l| !l.trim().is_empty()) == Some("   you › ")
        }),
        "{}",
        chat.screen()
    );
    chat.key("C-d");
    assert_eq!(chat.exit_status(), 0);
    let events = exported_events(&e, &sessions(&e));
    let received = of_type(&events, "input/received");
    assert_eq!(received[1]["kind"], "steer", "{received:?}");
    let steer = received[1]["input_id"].clone();
    let receipt = of_type(&events, "input/included")
        .into_iter()
        .find(|d| d["input_id"] == steer)
        .expect("a receipt for the steer");
    assert_eq!(
        (receipt["turn"].as_u64(), receipt["step"].as_u64()),
        (Some(0), Some(1))
    );
    assert!(
        receipt.get("carried").is_none_or(|c| c == false),
        "{receipt}"
    );
    let messages = user_messages(&events);
    assert!(
        messages.contains(&"and then say so".to_owned()),
        "{messages:?}"
    );
}

#[test]
fn a_plan_is_sent_back_with_feedback_then_approved() {
    let e = ExecEnv::new();
    let script = r##"
- tool_calls:
    - name: exit_plan_mode
      arguments: {plan: "# Plan A\n- edit the parser"}
- tool_calls:
    - name: exit_plan_mode
      arguments: {plan: "# Plan B\n- write the tests\n- edit the parser"}
- text: Carrying out plan B.
"##;
    let chat = start(&e, script, &[], &[("NO_COLOR", "1")]);
    chat.wait_for("you ›");
    chat.line("/plan");
    chat.wait_for("[plan mode: on");
    chat.line("refactor the parser");
    chat.wait_for("│ # Plan A");
    let screen = chat.wait_for("review ›");
    assert!(screen.contains("│ - edit the parser"), "{screen}");
    chat.line("write the tests first");
    chat.wait_for("keep planning, with your feedback");
    chat.wait_for("│ # Plan B");
    chat.line("y");
    chat.wait_for("plan approved");
    chat.wait_for("Carrying out plan B.");
    let screen = chat.wait_for("[plan mode: off]");
    assert!(!screen.contains("[the turn ended"), "{screen}");
    // `/plan MSG` enters plan mode and sends the message; `/plan off` leaves it.
    chat.line("/plan off");
    chat.wait_for("already inactive");
    chat.key("C-d");
    assert_eq!(chat.exit_status(), 0);
    let events = exported_events(&e, &sessions(&e));
    let results: Vec<_> = of_type(&events, "tool/result")
        .iter()
        .map(|d| {
            (
                d["ok"].as_bool(),
                d["content"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect();
    assert_eq!(results[0].0, Some(false), "{results:?}");
    assert!(
        results[0].1.contains("write the tests first"),
        "{results:?}"
    );
    assert_eq!(results[1].0, Some(true), "{results:?}");
    let modes: Vec<_> = of_type(&events, "plan/mode")
        .iter()
        .map(|d| d["active"].as_bool().unwrap())
        .collect();
    assert_eq!(modes, [true, false], "{events:?}");
}

#[test]
fn plan_with_a_message_enters_plan_mode_and_sends_it() {
    let e = ExecEnv::new();
    let chat = start(&e, "- text: Planning now.\n", &[], &[("NO_COLOR", "1")]);
    chat.wait_for("you ›");
    chat.line("/plan look at the parser");
    chat.wait_for("[plan mode: on");
    chat.wait_for("Planning now.");
    chat.line("/plan off");
    chat.wait_for("[plan mode: off]");
    chat.line("/bogus");
    chat.wait_for("unknown command `/bogus`");
    chat.key("C-d");
    assert_eq!(chat.exit_status(), 0);
    let events = exported_events(&e, &sessions(&e));
    let messages = user_messages(&events);
    assert!(
        messages.contains(&"look at the parser".to_owned()),
        "{messages:?}"
    );
}

#[test]
fn ctrl_c_cancels_a_running_sleep_drops_a_typed_line_and_exits_at_an_empty_prompt() {
    let e = ExecEnv::new();
    let (chat, marker) = running_sleep(&e, "chat-sleep");
    chat.key("C-c");
    chat.wait_for("[the turn ended aborted");
    assert!(
        wait_until(std::time::Duration::from_secs(10), || processes_with(
            &marker
        )
        .is_empty()),
        "the sleep outlived the cancel"
    );
    assert_no_survivor(&marker, "a cancelled chat turn");
    // Something typed: Ctrl-C drops it and stays (cli.md: only an empty prompt exits).
    chat.type_text("half typed");
    chat.wait_for("half typed");
    chat.key("C-c");
    std::thread::sleep(std::time::Duration::from_secs(1));
    assert!(
        !chat.screen().contains("[bridle chat exited"),
        "{}",
        chat.screen()
    );
    chat.key("C-c");
    assert_eq!(chat.exit_status(), 0);
    let events = exported_events(&e, &sessions(&e));
    let ends = of_type(&events, "turn/end");
    assert_eq!(ends[0]["reason"], "aborted", "{ends:?}");
    assert_eq!(ends.len(), 1, "the dropped line opened no turn: {ends:?}");
}

#[test]
fn the_terminal_follows_a_resize_and_ctrl_d_exits() {
    let e = ExecEnv::new();
    let chat = start(&e, "- text: Resized fine.\n", &[], &[]);
    chat.wait_for("you ›");
    // Colour when NO_COLOR is unset.
    assert!(
        chat.screen_with_attributes().contains("\u{1b}["),
        "{:?}",
        chat.screen_with_attributes()
    );
    chat.resize(44, 12);
    assert_eq!(chat.size(), (44, 12));
    // SIGWINCH reaches the editor asynchronously: give it a moment before typing.
    std::thread::sleep(std::time::Duration::from_millis(500));
    // A line wider than the window, then edited at its start: the editor can only move back
    // up a row and redraw it right if it knows the new width.
    let long = "please answer this rather long question that wraps";
    chat.type_text(long);
    chat.key("C-a");
    chat.type_text("X");
    chat.key("Enter");
    chat.wait_for("Resized fine.");
    let rows = chat.rows();
    let first_row = format!("   you › X{}", &long[..44 - 10]);
    assert!(
        rows.lines().any(|l| l == first_row),
        "no row {first_row:?}:\n{rows}"
    );
    chat.line("/help");
    chat.wait_for("/queue TEXT");
    chat.resize(100, 30);
    chat.line("/help");
    chat.wait_for_n("/queue TEXT", 2);
    chat.key("C-d");
    assert_eq!(chat.exit_status(), 0);
    let events = exported_events(&e, &sessions(&e));
    let messages = user_messages(&events);
    assert_eq!(messages, [format!("X{long}")], "{messages:?}");
}

#[test]
fn resume_switches_to_the_newest_other_session_of_the_workspace() {
    let e = ExecEnv::new();
    let first = start(&e, "- text: First answer.\n", &[], &[("NO_COLOR", "1")]);
    first.wait_for("you ›");
    first.line("hello");
    first.wait_for("First answer.");
    first.key("C-d");
    assert_eq!(first.exit_status(), 0);
    let id = exported_events(&e, &sessions(&e))[0]["data"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    drop(first);
    let second = start(&e, "- text: Back again.\n", &[], &[("NO_COLOR", "1")]);
    second.wait_for("you ›");
    second.line("/resume");
    second.wait_for(&format!("session {id}: /help"));
    // Only what happens from now on is shown; the history is in the log.
    let screen = second.wait_for(&format!("bridle log show {id}"));
    assert!(!screen.contains("First answer."), "{screen}");
    second.line("continue");
    // Its turn numbers continue: this is the resumed session's second turn.
    second.wait_for("your message joined turn 1, step 0");
    second.wait_for("Back again.");
    second.key("C-d");
    assert_eq!(second.exit_status(), 0);
}

#[test]
fn sigterm_cancels_the_turn_kills_its_tools_and_bridle_dies_of_it() {
    let e = ExecEnv::new();
    let (chat, marker) = running_sleep(&e, "chat-term");
    let pid = chat.bridle_pid();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    assert_eq!(chat.exit_status(), 128 + 15);
    assert_no_survivor(&marker, "a chat turn cancelled by SIGTERM");
    let events = exported_events(&e, &sessions(&e));
    let ends = of_type(&events, "turn/end");
    assert_eq!(ends[0]["reason"], "aborted", "{ends:?}");
    // The log says what ended it: the signal, not the person.
    assert_eq!(ends[0]["cancelled_by"], "signal SIGTERM", "{ends:?}");
}

#[test]
fn without_a_terminal_chat_refuses_and_says_to_use_run() {
    let e = ExecEnv::new();
    let r = super::support::run(e.bridle().args(["chat", "--model", "script:none.yaml"]));
    r.assert_code(2);
    assert!(
        r.stderr.contains("needs a terminal") && r.stderr.contains("bridle run"),
        "{}",
        r.stderr
    );
}

/// Steering typed while a tool runs, then Ctrl-C: the cancel drops it (the notice says so)
/// and no turn starts on its own to send it.
#[test]
fn ctrl_c_drops_steering_no_step_took_and_no_turn_runs_it() {
    let e = ExecEnv::new();
    let (chat, marker) = running_sleep(&e, "chat-steer");
    chat.line("and then run more");
    std::thread::sleep(std::time::Duration::from_millis(500));
    chat.key("C-c");
    chat.wait_for("not yet sent to the model is dropped");
    chat.wait_for("[the turn ended aborted");
    assert!(
        wait_until(std::time::Duration::from_secs(10), || processes_with(
            &marker
        )
        .is_empty()),
        "the sleep outlived the cancel"
    );
    // Time for a turn that must not start.
    std::thread::sleep(std::time::Duration::from_secs(2));
    chat.key("C-d");
    assert_eq!(chat.exit_status(), 0);
    let events = exported_events(&e, &sessions(&e));
    assert_eq!(of_type(&events, "turn/start").len(), 1, "{events:#?}");
    assert_eq!(user_messages(&events), ["sleep"]);
    // The log, not only the notice, says the steering was received and then dropped.
    let received = of_type(&events, "input/received");
    let steer = received
        .iter()
        .find(|r| r["kind"] == "steer")
        .unwrap_or_else(|| panic!("the steering was never received: {events:#?}"));
    let dropped = of_type(&events, "input/dropped");
    assert_eq!(dropped.len(), 1, "{events:#?}");
    assert_eq!(dropped[0]["input_id"], steer["input_id"]);
    assert_eq!(dropped[0]["kind"], "steer");
    assert_eq!(dropped[0]["turn"], 0);
    assert_eq!(dropped[0]["reason"], "cancelled");
}

/// `/resume` with an id that names no session is an error line; the chat stays.
#[test]
fn resume_to_an_unknown_session_is_an_error_line_and_the_chat_stays() {
    let e = ExecEnv::new();
    let chat = start(&e, "- text: Still here.\n", &[], &[("NO_COLOR", "1")]);
    chat.wait_for("you ›");
    chat.line("/resume 19990101-nosuch");
    chat.wait_for("bridle: no session");
    chat.line("hello");
    chat.wait_for("Still here.");
    chat.key("C-d");
    assert_eq!(chat.exit_status(), 0);
}
