use agent_client_protocol::v1::schema::RequestPermissionOutcome;
use bridle_policy::{ApprovalPolicy, Network, SandboxMode};

use super::*;
use crate::log::{Backend, NewSession, SessionDir, ToolCall as LoggedCall};
use serde_json::json;

fn call(id: &str, name: &str, args: Value) -> LoggedCall {
    LoggedCall {
        call_id: id.into(),
        name: name.into(),
        arguments: args.to_string(),
    }
}

fn ran(id: &str, ok: bool, content: &str) -> [Event; 2] {
    [
        Event::ToolDecision {
            call_id: id.into(),
            decision: Decision::Allow,
            by: "rule".into(),
        },
        Event::ToolResult {
            call_id: id.into(),
            ok,
            content: content.into(),
            sandbox: None,
        },
    ]
}

/// A session as the loop logs it: a turn that reads, edits and runs bash, a call never
/// dispatched, then plan mode and a plan under review. Returns the directory, the session
/// id and the events.
fn logged() -> (tempfile::TempDir, String, Vec<(u64, Event)>) {
    let dir = tempfile::tempdir().unwrap();
    let sessions = SessionDir::open(dir.path()).unwrap();
    let mut log = sessions
        .create(
            Backend::Jsonl,
            &NewSession {
                workspace: "/w".into(),
                profile: "workspace-write".into(),
                policy_digest: "d".into(),
            },
        )
        .unwrap();
    let read = call("r", "read_file", json!({"path": "src/a.rs", "offset": 3}));
    let edit = call(
        "e",
        "edit_file",
        json!({"path": "src/a.rs", "old_string": "one", "new_string": "two"}),
    );
    let bash = call("b", "bash", json!({"command": "cargo test"}));
    let never = call("n", "write_file", json!({"path": "/w/x", "content": "x"}));
    let plan = call(
        "p",
        "exit_plan_mode",
        json!({"plan": "# Fix it\n\n1. Read a.rs\n- [ ] Edit it\n* Test\n"}),
    );
    let mut events = vec![
        Event::TurnStart { turn: 0 },
        Event::UserMessage {
            id: None,
            text: "fix a.rs".into(),
        },
        Event::StepStart { turn: 0, step: 0 },
        Event::AssistantChunk {
            text: "hmm".into(),
            reasoning: true,
        },
        Event::AssistantChunk {
            text: "Reading ".into(),
            reasoning: false,
        },
        Event::AssistantChunk {
            text: "it.".into(),
            reasoning: false,
        },
        Event::AssistantMessage {
            text: "Reading it.".into(),
            tool_calls: vec![read.clone(), edit.clone(), bash.clone(), never.clone()],
            reasoning: "hmm".into(),
            reply: None,
        },
        Event::ToolCall(read),
    ];
    events.extend(ran("r", true, "fn one() {}"));
    events.push(Event::ToolCall(edit));
    events.extend(ran("e", true, "edited src/a.rs"));
    events.push(Event::ToolCall(bash));
    events.extend(ran("b", false, "exit 101"));
    events.extend([
        Event::ToolResult {
            call_id: "n".into(),
            ok: false,
            content: "aborted before dispatch: the turn was cancelled".into(),
            sandbox: None,
        },
        Event::StepEnd { turn: 0, step: 0 },
        Event::TurnEnd {
            turn: 0,
            reason: TurnEndReason::Aborted,
            detail: None,
            cancelled_by: Some("session/cancel".into()),
        },
        Event::PlanMode { active: true },
        Event::TurnStart { turn: 1 },
        Event::UserMessage {
            id: None,
            text: "plan".into(),
        },
        Event::StepStart { turn: 1, step: 0 },
        // A model that does not stream: the message alone.
        Event::AssistantMessage {
            text: "Here is the plan.".into(),
            tool_calls: vec![plan.clone()],
            reasoning: String::new(),
            reply: None,
        },
        Event::ToolCall(plan),
    ]);
    events.extend(ran("p", true, "{\"approved\": true}"));
    events.extend([
        Event::StepEnd { turn: 1, step: 0 },
        Event::PlanMode { active: false },
    ]);
    for event in events {
        log.append(event).unwrap();
    }
    let id = log.id().to_owned();
    let all = log.events().to_vec();
    (dir, id, all)
}

fn live_updates(events: &[(u64, Event)]) -> Vec<Value> {
    let mut fold = AcpUpdates::live();
    events
        .iter()
        .flat_map(|(_, e)| fold.updates(e))
        .map(|u| serde_json::to_value(u).unwrap())
        .collect()
}

fn kinds(updates: &[Value]) -> Vec<String> {
    updates
        .iter()
        .map(|u| u["sessionUpdate"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn a_read_edit_bash_turn_maps_to_chunks_tool_calls_and_updates() {
    let (_dir, _id, events) = logged();
    let updates = live_updates(&events);
    assert_eq!(
        kinds(&updates),
        [
            "agent_thought_chunk",
            "agent_message_chunk",
            "agent_message_chunk",
            "tool_call",
            "tool_call_update",
            "tool_call_update",
            "tool_call",
            "tool_call_update",
            "tool_call_update",
            "tool_call",
            "tool_call_update",
            "tool_call_update",
            "tool_call",
            "current_mode_update",
            "agent_message_chunk",
            "tool_call",
            "plan",
            "tool_call_update",
            "tool_call_update",
            "current_mode_update",
        ]
    );
    assert_eq!(
        updates[1]["content"],
        json!({"type": "text", "text": "Reading "})
    );
    let read = &updates[3];
    assert_eq!(read["toolCallId"], "r");
    assert_eq!(read["kind"], "read");
    assert_eq!(read["title"], "read_file: src/a.rs");
    assert_eq!(
        read["status"],
        json!(null),
        "pending is the default, left out"
    );
    assert_eq!(
        read["locations"],
        json!([{"path": "/w/src/a.rs", "line": 3}])
    );
    assert_eq!(read["rawInput"], json!({"path": "src/a.rs", "offset": 3}));
    assert_eq!(updates[4]["status"], "in_progress");
    assert_eq!(updates[5]["status"], "completed");
    // The edit: kind edit, and its result carries the diff.
    assert_eq!(updates[6]["kind"], "edit");
    assert_eq!(
        updates[8]["content"][0],
        json!({"type": "diff", "path": "/w/src/a.rs", "oldText": "one", "newText": "two"})
    );
    assert_eq!(
        updates[8]["content"][1]["content"]["text"],
        "edited src/a.rs"
    );
    assert_eq!(updates[9]["kind"], "execute");
    assert_eq!(updates[9]["title"], "bash: cargo test");
    assert_eq!(updates[11]["status"], "failed");
    // Never dispatched: announced once, already failed, with no diff.
    let never = &updates[12];
    assert_eq!(never["toolCallId"], "n");
    assert_eq!(never["status"], "failed");
    assert_eq!(never["kind"], "edit");
    assert_eq!(never["content"].as_array().unwrap().len(), 1);
    assert_eq!(updates[13]["currentModeId"], "plan");
    // The answer of a model that did not stream is sent whole.
    assert_eq!(updates[14]["content"]["text"], "Here is the plan.");
    assert_eq!(updates[15]["kind"], "switch_mode");
    let entries: Vec<&str> = updates[16]["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["content"].as_str().unwrap())
        .collect();
    assert_eq!(entries, ["Read a.rs", "Edit it", "Test"]);
    assert_eq!(updates[16]["entries"][0]["status"], "pending");
    assert_eq!(updates[19]["currentModeId"], "default");
}

#[test]
fn session_load_replays_the_same_updates_from_the_stored_log() {
    let (dir, id, events) = logged();
    let live = live_updates(&events);
    let sessions = SessionDir::open(dir.path()).unwrap();
    let (stored, _) = sessions.resume(&id).unwrap();
    let replayed: Vec<Value> = replay(stored.events().iter().map(|(_, e)| e))
        .into_iter()
        .map(|u| serde_json::to_value(u).unwrap())
        .collect();
    // The replay adds the user's messages; everything else is the same, in the same order.
    let without_user: Vec<Value> = replayed
        .iter()
        .filter(|u| u["sessionUpdate"] != "user_message_chunk")
        .cloned()
        .collect();
    assert_eq!(without_user, live);
    let users: Vec<&Value> = replayed
        .iter()
        .filter(|u| u["sessionUpdate"] == "user_message_chunk")
        .map(|u| &u["content"]["text"])
        .collect();
    assert_eq!(users, [&json!("fix a.rs"), &json!("plan")]);
}

#[test]
fn a_plan_without_a_list_is_one_entry_its_title() {
    let entries = plan_entries("# Rename the crate\n\nJust do it.");
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0].content, "Rename the crate");
}

#[test]
fn config_options_are_three_and_never_wider_than_the_profile() {
    let ceiling = Ceiling {
        mode: SandboxMode::WorkspaceWrite,
        network: Network::AllowList,
        approval: ApprovalPolicy::Never,
    };
    let current = Current {
        mode: SandboxMode::ReadOnly,
        network: Network::Off,
        approval: ApprovalPolicy::Never,
    };
    let options = serde_json::to_value(config_options(&ceiling, current)).unwrap();
    let ids: Vec<&str> = options
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["sandbox", "network", "approval"]);
    let values = |i: usize| -> Vec<String> {
        options[i]["options"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| o["value"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(values(0), ["read-only", "workspace-write"]);
    assert_eq!(values(1), ["off", "allow-list"]);
    assert_eq!(values(2), ["never"]);
    assert_eq!(options[0]["currentValue"], "read-only");
    assert_eq!(options[0]["type"], "select");

    assert_eq!(
        config_choice(&ceiling, "sandbox", "read-only"),
        Ok(ConfigChoice::Mode(SandboxMode::ReadOnly))
    );
    let wider = config_choice(&ceiling, "sandbox", "danger-full-access").unwrap_err();
    assert!(wider.contains("wider than the profile"), "{wider}");
    assert!(config_choice(&ceiling, "network", "on").is_err());
    assert!(config_choice(&ceiling, "approval", "ask").is_err());
    assert!(
        config_choice(&ceiling, "network", "sideways")
            .unwrap_err()
            .contains("unknown value")
    );
    assert!(
        config_choice(&ceiling, "colour", "red")
            .unwrap_err()
            .contains("unknown config option")
    );
}

#[test]
fn a_policy_change_updates_the_config_options_when_a_ceiling_is_known() {
    let ceiling = Ceiling {
        mode: SandboxMode::WorkspaceWrite,
        network: Network::On,
        approval: ApprovalPolicy::Ask,
    };
    let summary = crate::log::PolicySummary {
        digest: "d".into(),
        profile: "p".into(),
        mode: SandboxMode::ReadOnly,
        approval: ApprovalPolicy::Ask,
        network: Network::Off,
        writable_roots: vec![],
        protected_paths: vec![],
        masked_paths: vec![],
        rules: vec![],
    };
    let event = Event::PolicyEffective(summary);
    assert!(AcpUpdates::live().updates(&event).is_empty());
    let updates = AcpUpdates::live().with_ceiling(ceiling).updates(&event);
    let value = serde_json::to_value(&updates[0]).unwrap();
    assert_eq!(value["sessionUpdate"], "config_option_update");
    assert_eq!(value["configOptions"][0]["currentValue"], "read-only");
}

#[test]
fn stop_reasons_follow_how_the_turn_ended() {
    assert_eq!(
        stop_reason(TurnEndReason::Completed, None, false),
        Ok(StopReason::EndTurn)
    );
    assert_eq!(
        stop_reason(TurnEndReason::Aborted, None, true),
        Ok(StopReason::Cancelled)
    );
    assert_eq!(
        stop_reason(TurnEndReason::Aborted, None, false),
        Ok(StopReason::MaxTurnRequests)
    );
    assert_eq!(
        stop_reason(TurnEndReason::MaxTokens, None, false),
        Ok(StopReason::MaxTokens)
    );
    assert_eq!(
        stop_reason(TurnEndReason::Blocked, None, false),
        Ok(StopReason::Refusal)
    );
    assert_eq!(
        stop_reason(TurnEndReason::Error, Some("model: 401"), false),
        Err("model: 401".to_owned())
    );
}

#[test]
fn modes_and_commands_are_offered() {
    let modes = serde_json::to_value(modes(true)).unwrap();
    assert_eq!(modes["currentModeId"], "plan");
    assert_eq!(modes["availableModes"][0]["id"], "default");
    assert_eq!(parse_mode("plan"), Ok(true));
    assert!(parse_mode("yolo").is_err());
    let commands = serde_json::to_value(available_commands()).unwrap();
    assert_eq!(commands["sessionUpdate"], "available_commands_update");
    assert_eq!(commands["availableCommands"][0]["name"], "plan");
}

#[test]
fn permission_requests_offer_two_options_and_only_the_explicit_yes_allows() {
    use agent_client_protocol::v1::schema::SelectedPermissionOutcome;
    let request = permission_request(
        "s1",
        Question::Approval,
        "c1",
        "bash: curl x",
        "run with the network on?",
    );
    let value = serde_json::to_value(&request).unwrap();
    assert_eq!(value["sessionId"], "s1");
    assert_eq!(value["toolCall"]["toolCallId"], "c1");
    assert_eq!(value["options"][0]["kind"], "allow_once");
    assert_eq!(value["options"][1]["kind"], "reject_once");
    let chose = |id: &str| {
        Ok::<_, ()>(RequestPermissionOutcome::Selected(
            SelectedPermissionOutcome::new(id.to_owned()),
        ))
    };
    assert_eq!(
        answer_of(Question::Approval, chose(ALLOW_ONCE)),
        Answer::Yes
    );
    assert_eq!(
        answer_of(Question::Approval, chose(REJECT_ONCE)),
        Answer::No
    );
    // The plan review's yes is not the approval's, and the other way round.
    assert_eq!(
        answer_of(Question::Approval, chose(APPROVE_PLAN)),
        Answer::No
    );
    assert_eq!(
        answer_of(Question::PlanReview, chose(APPROVE_PLAN)),
        Answer::Yes
    );
    assert_eq!(
        answer_of(Question::PlanReview, chose(KEEP_PLANNING)),
        Answer::No
    );
    assert_eq!(
        answer_of(
            Question::Approval,
            Ok::<_, ()>(RequestPermissionOutcome::Cancelled)
        ),
        Answer::No
    );
    assert_eq!(
        answer_of(
            Question::Approval,
            Err::<RequestPermissionOutcome, _>("rpc error")
        ),
        Answer::No
    );
    let review = serde_json::to_value(permission_request(
        "s1",
        Question::PlanReview,
        "p",
        "exit_plan_mode",
        "# Plan",
    ))
    .unwrap();
    assert_eq!(review["options"][0]["optionId"], APPROVE_PLAN);
    assert_eq!(review["options"][1]["optionId"], KEEP_PLANNING);
}
