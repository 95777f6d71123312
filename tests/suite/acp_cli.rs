//! `bridle acp` driven by the official SDK's client over real pipes, with a scripted model:
//! turns, the updates they make, approvals and plan reviews through request_permission,
//! cancel, modes and session/load (acp.md "Proof").

use agent_client_protocol::v1::schema::{
    CancelNotification, ContentBlock, LoadSessionRequest, PromptRequest, SessionUpdate,
    SetSessionModeRequest, StopReason, TextContent, ToolCallContent, ToolCallStatus, ToolKind,
};
use bridle_agent::log::Event;

use super::acp_support::{Record, Reply, agent, converse, history, new_session};
use super::run_cli::{events, results};
use super::support::{ExecEnv, path_str};

fn prompt(session: &agent_client_protocol::v1::schema::SessionId, text: &str) -> PromptRequest {
    PromptRequest::new(
        session.clone(),
        vec![ContentBlock::Text(TextContent::new(text.to_owned()))],
    )
}

/// The agent's text, as the client got it.
fn text_of(updates: &[SessionUpdate]) -> String {
    updates
        .iter()
        .filter_map(|u| match u {
            SessionUpdate::AgentMessageChunk(c) => match &c.content {
                ContentBlock::Text(t) => Some(t.text.clone()),
                _ => None,
            },
            _ => None,
        })
        .collect()
}

/// A read, an edit and a bash call: each announced with its kind, then completed; the edit
/// carries its diff; the prompt answers end_turn once the turn ended. `session/load` of the
/// session in a new connection replays the same history, and the session continues.
#[test]
fn a_turn_reads_edits_and_runs_bash_and_load_replays_the_same_updates() {
    let e = ExecEnv::new();
    e.write("a.txt", "old line\n");
    let script = r#"
- text: "Looking."
  tool_calls:
    - name: read_file
      arguments: {path: a.txt}
    - name: edit_file
      arguments: {path: a.txt, old_string: "old line", new_string: "new line"}
    - name: bash
      arguments: {command: "echo ran > ran.txt"}
- text: "All done."
"#;
    let record = Record::default();
    let (id, stop) = converse(
        agent(&e, None, script, &record),
        &record,
        vec![],
        async |cx| {
            let session = new_session(&cx, &e).await?.session_id;
            let answer = cx
                .send_request(prompt(&session, "change a.txt"))
                .block_task()
                .await?;
            Ok((session, answer.stop_reason))
        },
    );
    assert_eq!(stop, StopReason::EndTurn);
    assert_eq!(
        std::fs::read_to_string(e.workspace.join("a.txt")).unwrap(),
        "new line\n"
    );
    assert!(e.workspace.join("ran.txt").exists());
    let live = record.updates();
    let calls: Vec<(String, ToolKind)> = live
        .iter()
        .filter_map(|u| match u {
            SessionUpdate::ToolCall(c) => Some((c.tool_call_id.0.to_string(), c.kind)),
            _ => None,
        })
        .collect();
    assert_eq!(
        calls.iter().map(|c| c.1).collect::<Vec<_>>(),
        vec![ToolKind::Read, ToolKind::Edit, ToolKind::Execute],
        "{live:#?}"
    );
    let completed: Vec<&agent_client_protocol::v1::schema::ToolCallUpdate> = live
        .iter()
        .filter_map(|u| match u {
            SessionUpdate::ToolCallUpdate(t)
                if t.fields.status == Some(ToolCallStatus::Completed) =>
            {
                Some(t)
            }
            _ => None,
        })
        .collect();
    assert_eq!(completed.len(), 3, "{live:#?}");
    let diff = completed
        .iter()
        .flat_map(|t| t.fields.content.iter().flatten())
        .find_map(|c| match c {
            ToolCallContent::Diff(d) => Some(d.clone()),
            _ => None,
        })
        .expect("the edit's diff");
    assert_eq!(diff.path, e.workspace.join("a.txt"));
    assert_eq!(diff.old_text.as_deref(), Some("old line"));
    assert_eq!(diff.new_text, "new line");
    assert_eq!(text_of(&live), "Looking.All done.");

    // A new connection loads the session: the same history, then it continues.
    let replayed = Record::default();
    let (stop, replay) = converse(
        agent(&e, None, "- text: \"Second turn.\"\n", &replayed),
        &replayed,
        vec![],
        async |cx| {
            cx.send_request(agent_client_protocol::v1::schema::InitializeRequest::new(
                agent_client_protocol::schema::ProtocolVersion::V1,
            ))
            .block_task()
            .await?;
            cx.send_request(LoadSessionRequest::new(id.clone(), e.workspace.clone()))
                .block_task()
                .await?;
            let replay = replayed.updates();
            let answer = cx.send_request(prompt(&id, "again")).block_task().await?;
            Ok((answer.stop_reason, replay))
        },
    );
    assert_eq!(history(&replay), history(&live));
    assert!(
        replay
            .iter()
            .any(|u| matches!(u, SessionUpdate::UserMessageChunk(_))),
        "the replay shows the user's prompt too"
    );
    assert_eq!(stop, StopReason::EndTurn);
    assert!(
        text_of(&replayed.updates()).ends_with("All done.Second turn."),
        "{:?}",
        text_of(&replayed.updates())
    );
}

/// An escalation is asked through session/request_permission: rejected (or the request
/// cancelled), nothing is written outside; allowed once, the call runs escalated.
#[test]
fn an_escalation_is_asked_of_the_client_and_only_an_explicit_allow_runs_it() {
    let e = ExecEnv::new();
    let escaped = e.home.join("escaped.txt");
    let script = format!(
        r#"
- tool_calls:
    - name: bash
      arguments: {{command: "echo x > {0}", sandbox_permissions: danger-full-access, justification: "write outside"}}
- text: "first"
- tool_calls:
    - name: bash
      arguments: {{command: "echo x > {0}", sandbox_permissions: danger-full-access, justification: "write outside"}}
- text: "second"
- tool_calls:
    - name: bash
      arguments: {{command: "echo x > {0}", sandbox_permissions: danger-full-access, justification: "write outside"}}
- text: "third"
"#,
        path_str(&escaped)
    );
    let record = Record::default();
    let id = converse(
        agent(&e, Some("workstation"), &script, &record),
        &record,
        vec![
            Reply::Option("reject-once"),
            Reply::Cancelled,
            Reply::Option("allow-once"),
        ],
        async |cx| {
            let session = new_session(&cx, &e).await?.session_id;
            for (task, written) in [("one", false), ("two", false), ("three", true)] {
                let answer = cx.send_request(prompt(&session, task)).block_task().await?;
                assert_eq!(answer.stop_reason, StopReason::EndTurn);
                assert_eq!(escaped.exists(), written, "after turn {task}");
            }
            Ok(session)
        },
    );
    let seen = record.0.lock().unwrap();
    assert_eq!(seen.asked.len(), 3);
    let first = &seen.asked[0];
    let options: Vec<String> = first
        .options
        .iter()
        .map(|o| o.option_id.0.to_string())
        .collect();
    assert_eq!(options, ["allow-once", "reject-once"]);
    // The question is about the call the client was shown.
    let announced = seen
        .updates
        .iter()
        .find_map(|u| match u {
            SessionUpdate::ToolCall(c) => Some(c.tool_call_id.clone()),
            _ => None,
        })
        .unwrap();
    assert_eq!(first.tool_call.tool_call_id, announced);
    let answers: Vec<String> = events(&e, &id.0)
        .iter()
        .filter_map(|ev| match ev {
            Event::ApprovalDecided { answer, .. } => Some(answer.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(answers, ["rejected", "cancelled", "approved"]);
}

/// Runs `script` in one turn under `profile`, answering its one question with `reply`; checks
/// the question named the turn's `bash` call. The results of the turn's calls.
fn one_question_about_the_bash_call(
    e: &ExecEnv,
    profile: Option<&str>,
    script: &str,
    reply: &'static str,
) -> Vec<(bool, String)> {
    let record = Record::default();
    let id = converse(
        agent(e, profile, script, &record),
        &record,
        vec![Reply::Option(reply)],
        async |cx| {
            let session = new_session(&cx, e).await?.session_id;
            let answer = cx.send_request(prompt(&session, "go")).block_task().await?;
            assert_eq!(answer.stop_reason, StopReason::EndTurn);
            Ok(session)
        },
    );
    let seen = record.0.lock().unwrap();
    assert_eq!(seen.asked.len(), 1, "{:?}", seen.asked);
    let bash_call = seen
        .updates
        .iter()
        .find_map(|u| match u {
            SessionUpdate::ToolCall(c) if c.kind == ToolKind::Execute => {
                Some(c.tool_call_id.clone())
            }
            _ => None,
        })
        .expect("the bash call was announced");
    assert_eq!(seen.asked[0].tool_call.tool_call_id, bash_call);
    results(&events(e, &id.0))
}

/// A workspace with `push.sh`, a script that runs `git push` and prints `pushed=STATUS`.
fn with_pusher() -> ExecEnv {
    use std::os::unix::fs::PermissionsExt;
    let e = ExecEnv::new();
    let pusher = e.write(
        "push.sh",
        "#!/bin/sh\ngit push origin HEAD:main\necho pushed=$?\n",
    );
    std::fs::set_permissions(&pusher, std::fs::Permissions::from_mode(0o755)).unwrap();
    e
}

/// The exec supervisor's question about a program a `bash` call's script runs is asked of the
/// client as part of that call (not of some other call, nor of none).
#[test]
fn an_exec_asked_about_inside_a_bash_call_names_that_call() {
    let e = with_pusher();
    // A read first, so the latest call of some other tool is on record too.
    let script = r#"
- tool_calls:
    - name: read_file
      arguments: {path: push.sh}
- tool_calls:
    - name: bash
      arguments: {command: "./push.sh"}
- text: done
"#;
    let ran = one_question_about_the_bash_call(&e, Some("workstation"), script, "reject-once");
    assert!(ran[1].1.contains("pushed=126"), "{ran:?}");
}

/// A question about an exec that nobody answers before the call's timeout is withdrawn from
/// the client (`$/cancel_request`): the call ends on time, the log says the question was
/// withdrawn and the exec refused, and the push did not happen.
#[test]
fn an_exec_question_open_at_the_calls_timeout_is_withdrawn_from_the_client() {
    let e = with_pusher();
    let script = r#"
- tool_calls:
    - name: bash
      arguments: {command: "./push.sh", timeout_secs: 2}
- text: done
"#;
    let record = Record::default();
    let (id, took) = converse(
        agent(&e, Some("workstation"), script, &record),
        &record,
        vec![Reply::Held],
        async |cx| {
            let session = new_session(&cx, &e).await?.session_id;
            let started = std::time::Instant::now();
            let answer = cx.send_request(prompt(&session, "go")).block_task().await?;
            assert_eq!(answer.stop_reason, StopReason::EndTurn);
            let took = started.elapsed();
            // The cancellation goes out on a task of its own, not ordered with the prompt's
            // answer: wait for it before the connection closes.
            for _ in 0..100 {
                let sent = record
                    .0
                    .lock()
                    .unwrap()
                    .stdout
                    .iter()
                    .any(|l| l.contains("$/cancel_request"));
                if sent {
                    break;
                }
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
            Ok((session, took))
        },
    );
    assert!(
        took < super::acp_support::HELD / 2,
        "the turn waited for the answer: {took:?}"
    );
    let seen = record.0.lock().unwrap();
    assert_eq!(seen.asked.len(), 1, "{:?}", seen.asked);
    assert!(
        seen.stdout.iter().any(|l| l.contains("$/cancel_request")),
        "no cancellation sent:\n{}",
        seen.stdout.join("\n")
    );
    let log = events(&e, &id.0);
    let answers: Vec<&str> = log
        .iter()
        .filter_map(|ev| match ev {
            Event::ApprovalDecided { answer, .. } => Some(answer.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(answers, ["withdrawn"]);
    let exec = log
        .iter()
        .find_map(|ev| match ev {
            Event::ExecDecision { exec, .. } => Some(exec),
            _ => None,
        })
        .expect("the exec's decision is on record");
    assert_eq!(
        exec.answer.as_deref(),
        Some("withdrawn: the run timed out before anyone answered")
    );
    let ran = results(&log);
    assert!(ran[0].1.contains("timed out"), "{ran:?}");
    assert!(!ran[0].1.contains("pushed="), "{ran:?}");
}

/// The network proxy's question (its allow-list is the session's, so it knows no call) is
/// asked as part of the latest call announced, here the command that connects.
#[test]
fn a_network_question_names_the_call_that_connects() {
    use super::net_support::{NetEnv, Outside};
    let probe = NetEnv::with_profile_tail(&[], &["asked.test"], "approval: ask\n");
    let root = probe.server_root("srv");
    std::fs::write(root.join("hello.txt"), "hello from outside\n").unwrap();
    let server = Outside::http(&root);
    let script = format!(
        r#"
- tool_calls:
    - name: read_file
      arguments: {{path: .}}
- tool_calls:
    - name: bash
      arguments: {{command: "curl -sS --fail http://asked.test:{}/hello.txt"}}
- text: done
"#,
        server.port
    );
    let ran = one_question_about_the_bash_call(&probe, Some(&probe.profile), &script, "allow-once");
    assert!(ran[1].1.contains("hello from outside"), "{ran:?}");
}

/// A script whose one call runs two `sleep 60`s marked `mark`, then answers "never reached".
fn sleeping_script(mark: &str) -> String {
    format!(
        r#"
- tool_calls:
    - name: bash
      arguments: {{command: "sh -c 'sleep 60; : {mark}' & sleep 60 # {mark}"}}
- text: never reached
"#
    )
}

/// session/cancel mid `sleep`: the prompt answers cancelled, the tool's processes are gone,
/// the log's turn ends aborted.
#[test]
fn cancel_mid_sleep_answers_cancelled_and_leaves_no_process() {
    let e = ExecEnv::new();
    let mark = super::support::token("acp-cancel");
    let script = sleeping_script(&mark);
    let record = Record::default();
    let mark2 = mark.clone();
    let (id, stop) = converse(
        agent(&e, None, &script, &record),
        &record,
        vec![],
        async |cx| {
            let session = new_session(&cx, &e).await?.session_id;
            let pending = cx.send_request(prompt(&session, "sleep"));
            let started = tokio::task::spawn_blocking(move || {
                super::support::wait_until(std::time::Duration::from_secs(20), || {
                    !super::support::processes_with(&mark2).is_empty()
                })
            })
            .await
            .unwrap();
            assert!(started, "the tool never started");
            cx.send_notification(CancelNotification::new(session.clone()))?;
            let answer = pending.block_task().await?;
            Ok((session, answer.stop_reason))
        },
    );
    assert_eq!(stop, StopReason::Cancelled);
    assert!(
        super::support::wait_until(std::time::Duration::from_secs(10), || {
            super::support::processes_with(&mark).is_empty()
        }),
        "the tool outlived the cancel"
    );
    super::support::assert_no_survivor(&mark, "cancelled ACP turn");
    let events = events(&e, &id.0);
    assert!(
        matches!(
            events.last(),
            Some(Event::TurnEnd {
                reason: bridle_agent::log::TurnEndReason::Aborted,
                ..
            })
        ),
        "{:?}",
        events.last()
    );
    assert!(!text_of(&record.updates()).contains("never reached"));
}

/// Two sessions on one connection: cancelling one kills its command's tree only; the other's
/// keeps running until it is cancelled in turn.
#[test]
fn cancelling_one_session_leaves_the_other_sessions_commands_running() {
    let e = ExecEnv::new();
    let mark = super::support::token("acp-cancel-one");
    let script = sleeping_script(&mark);
    let record = Record::default();
    let mark2 = mark.clone();
    let (_, (first, second, alive)) = converse(
        agent(&e, None, &script, &record),
        &record,
        vec![],
        async |cx| {
            let a = new_session(&cx, &e).await?.session_id;
            let b = new_session(&cx, &e).await?.session_id;
            let pending_a = cx.send_request(prompt(&a, "sleep"));
            let pending_b = cx.send_request(prompt(&b, "sleep"));
            let count = move || super::support::processes_with(&mark2).len();
            let counting = count.clone();
            let both = tokio::task::spawn_blocking(move || {
                let mut seen = 0;
                super::support::wait_until(std::time::Duration::from_secs(20), || {
                    seen = counting();
                    seen >= 4
                })
                .then_some(seen)
            })
            .await
            .unwrap();
            let both = both.expect("both sessions' commands never ran");
            cx.send_notification(CancelNotification::new(a.clone()))?;
            let first = pending_a.block_task().await?.stop_reason;
            let counting = count.clone();
            let alive = tokio::task::spawn_blocking(move || {
                std::thread::sleep(std::time::Duration::from_secs(2));
                counting()
            })
            .await
            .unwrap();
            assert!(
                alive > 0 && alive < both,
                "{alive} of {both} processes left"
            );
            cx.send_notification(CancelNotification::new(b.clone()))?;
            let second = pending_b.block_task().await?.stop_reason;
            Ok((a, (first, second, alive)))
        },
    );
    assert_eq!(first, StopReason::Cancelled);
    assert_eq!(
        second,
        StopReason::Cancelled,
        "{alive} processes were left after the first cancel"
    );
    assert!(
        super::support::wait_until(std::time::Duration::from_secs(10), || {
            super::support::processes_with(&mark).is_empty()
        }),
        "a tool outlived the cancels"
    );
    super::support::assert_no_survivor(&mark, "cancelled ACP turns");
}

/// set_mode plan: the mode change is an update, the next request carries the plan section,
/// and a plan presented for review is shown as a plan and approved through the client.
#[test]
fn plan_mode_from_set_mode_and_a_plan_approved_through_the_review() {
    let e = ExecEnv::new();
    let script = r##"
- tool_calls:
    - name: exit_plan_mode
      arguments: {plan: "# Plan\n1. read the code\n2. fix it"}
- text: "Approved, starting."
"##;
    let record = Record::default();
    let (id, stop) = converse(
        agent(&e, None, script, &record),
        &record,
        vec![Reply::Option("approve")],
        async |cx| {
            let session = new_session(&cx, &e).await?.session_id;
            cx.send_request(SetSessionModeRequest::new(session.clone(), "plan"))
                .block_task()
                .await?;
            let answer = cx
                .send_request(prompt(&session, "plan it"))
                .block_task()
                .await?;
            Ok((session, answer.stop_reason))
        },
    );
    assert_eq!(stop, StopReason::EndTurn);
    let updates = record.updates();
    let modes: Vec<String> = updates
        .iter()
        .filter_map(|u| match u {
            SessionUpdate::CurrentModeUpdate(m) => Some(m.current_mode_id.0.to_string()),
            _ => None,
        })
        .collect();
    assert_eq!(modes, ["plan", "default"], "{updates:#?}");
    let plan = updates
        .iter()
        .find_map(|u| match u {
            SessionUpdate::Plan(p) => Some(p.clone()),
            _ => None,
        })
        .expect("the plan update");
    let entries: Vec<&str> = plan.entries.iter().map(|e| e.content.as_str()).collect();
    assert_eq!(entries, ["read the code", "fix it"]);
    let seen = record.0.lock().unwrap();
    assert_eq!(seen.asked.len(), 1);
    let events = events(&e, &id.0);
    let header = events
        .iter()
        .find_map(|ev| match ev {
            Event::RequestHeader(h) => Some(h.clone()),
            _ => None,
        })
        .unwrap();
    assert!(
        header.sections.iter().any(|s| s.name == "plan:policy"),
        "{:?}",
        header.sections
    );
    assert!(events.contains(&Event::PlanMode { active: true }));
    assert!(events.contains(&Event::PlanMode { active: false }));
    let results = results(&events);
    assert!(results[0].0, "{results:?}");
}

/// The three config options never go wider than the profile; a narrower choice is logged as
/// a policy change and enforced from the next turn.
#[test]
fn config_options_narrow_within_the_profile_and_each_change_is_logged() {
    use agent_client_protocol::v1::schema::{
        SessionConfigKind, SessionConfigOptionValue, SessionConfigValueId,
        SetSessionConfigOptionRequest,
    };
    let e = ExecEnv::new();
    let script = r#"
- tool_calls:
    - name: write_file
      arguments: {path: w.txt, content: x}
- text: "tried"
"#;
    let record = Record::default();
    let choose = |session: &agent_client_protocol::v1::schema::SessionId, id: &str, v: &str| {
        SetSessionConfigOptionRequest::new(
            session.clone(),
            id.to_owned(),
            SessionConfigOptionValue::ValueId {
                value: SessionConfigValueId::new(v.to_owned()),
            },
        )
    };
    let (id, offered, wider, narrowed) = converse(
        agent(&e, None, script, &record),
        &record,
        vec![],
        async |cx| {
            let opened = new_session(&cx, &e).await?;
            let session = opened.session_id;
            let wider = cx
                .send_request(choose(&session, "sandbox", "danger-full-access"))
                .block_task()
                .await;
            let narrowed = cx
                .send_request(choose(&session, "sandbox", "read-only"))
                .block_task()
                .await?;
            cx.send_request(prompt(&session, "write"))
                .block_task()
                .await?;
            Ok((session, opened.config_options.unwrap(), wider, narrowed))
        },
    );
    let values = |options: &[agent_client_protocol::v1::schema::SessionConfigOption],
                  id: &str|
     -> (String, Vec<String>) {
        let option = options.iter().find(|o| o.id.0.as_ref() == id).unwrap();
        match &option.kind {
            SessionConfigKind::Select(s) => {
                let all = serde_json::to_value(&s.options).unwrap();
                let names = all
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|o| o["value"].as_str().unwrap().to_owned())
                    .collect();
                (s.current_value.0.to_string(), names)
            }
            other => panic!("{other:?}"),
        }
    };
    let ids: Vec<&str> = offered.iter().map(|o| o.id.0.as_ref()).collect();
    assert_eq!(ids, ["sandbox", "network", "approval"]);
    assert_eq!(
        values(&offered, "sandbox"),
        (
            "workspace-write".to_owned(),
            vec!["read-only".to_owned(), "workspace-write".to_owned()]
        )
    );
    let refused = wider.expect_err("wider than the profile");
    assert!(
        format!("{refused:?}").contains("wider than the profile"),
        "{refused:?}"
    );
    assert_eq!(
        values(&narrowed.config_options, "sandbox").0,
        "read-only".to_owned()
    );
    assert!(!e.workspace.join("w.txt").exists(), "read-only wrote");
    let events = events(&e, &id.0);
    assert!(events.contains(&Event::SandboxMode {
        mode: bridle_policy::SandboxMode::ReadOnly
    }));
    let policies = events
        .iter()
        .filter(|ev| matches!(ev, Event::PolicyEffective(_)))
        .count();
    assert_eq!(policies, 2, "the profile's, then the narrowed one");
}

/// A prompt sent while a turn runs steers it: it joins the turn's next step (logged as
/// steering, in the next request), and both prompts answer when that turn ends.
#[test]
fn a_prompt_during_a_turn_steers_it_and_both_answer_at_its_end() {
    let e = ExecEnv::new();
    let script = r#"
- tool_calls:
    - name: bash
      arguments: {command: "sleep 2"}
- text: "Done, with your note."
"#;
    let record = Record::default();
    let watched = record.clone();
    let (id, first, second) = converse(
        agent(&e, None, script, &record),
        &record,
        vec![],
        async |cx| {
            let session = new_session(&cx, &e).await?.session_id;
            let opening = cx.send_request(prompt(&session, "start"));
            // Once the call runs, the client sends another prompt.
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
            while !watched.updates().iter().any(|u| {
                matches!(u, SessionUpdate::ToolCallUpdate(t)
                    if t.fields.status == Some(ToolCallStatus::InProgress))
            }) {
                assert!(std::time::Instant::now() < deadline, "the call never ran");
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
            let steering = cx.send_request(prompt(&session, "also mind the tests"));
            let second = steering.block_task().await?.stop_reason;
            let first = opening.block_task().await?.stop_reason;
            Ok((session, first, second))
        },
    );
    assert_eq!((first, second), (StopReason::EndTurn, StopReason::EndTurn));
    let events = events(&e, &id.0);
    assert!(
        events
            .iter()
            .any(|ev| matches!(ev, Event::InputReceived { kind, .. } if kind == "steer")),
        "{events:#?}"
    );
    let turns = events
        .iter()
        .filter(|ev| matches!(ev, Event::TurnStart { .. }))
        .count();
    assert_eq!(turns, 1, "the steering joined the running turn");
    assert!(
        events.iter().any(
            |ev| matches!(ev, Event::UserMessage { text, .. } if text == "also mind the tests")
        )
    );
}
