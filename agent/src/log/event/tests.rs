//! Every event kind agrees with its serialised type; older data still loads.

use super::*;

/// `kind()`, `KNOWN_KINDS` and the serialised `type` must agree for every variant.
#[test]
fn every_variant_kind_is_known_and_matches_its_serialised_type() {
    let samples = [
        Event::SessionHeader(SessionHeader {
            id: "s".into(),
            created: "t".into(),
            workspace: "/w".into(),
            profile: "p".into(),
            policy_digest: "d".into(),
        }),
        Event::SessionForked {
            from: "s".into(),
            seq: 1,
        },
        Event::TurnStart { turn: 0 },
        Event::TurnEnd {
            turn: 0,
            reason: TurnEndReason::Completed,
            detail: None,
            cancelled_by: None,
        },
        Event::StepStart { turn: 0, step: 0 },
        Event::StepEnd { turn: 0, step: 0 },
        Event::UserMessage {
            id: None,
            text: "hi".into(),
        },
        Event::AssistantChunk {
            text: "x".into(),
            reasoning: false,
        },
        Event::AssistantMessage {
            text: "x".into(),
            tool_calls: vec![],
            reasoning: String::new(),
            reply: None,
        },
        Event::RequestHeader(RequestHeader {
            sections: vec![],
            tools: vec![],
            model: "script:x".into(),
        }),
        Event::ToolCall(ToolCall {
            call_id: "c".into(),
            name: "bash".into(),
            arguments: "{}".into(),
        }),
        Event::ToolDecision {
            call_id: "c".into(),
            decision: Decision::Allow,
            by: "r".into(),
        },
        Event::ToolResult {
            call_id: "c".into(),
            ok: true,
            content: String::new(),
            sandbox: None,
        },
        Event::SandboxQuarantine {
            call_id: "c".into(),
            path: "/w/.git/config".into(),
            reason: "r".into(),
            moved_to: None,
        },
        Event::ExecDecision {
            call_id: "c".into(),
            exec: ExecDecision {
                pid: 7,
                program: "/usr/bin/git".into(),
                argv: vec!["git".into(), "push".into()],
                decision: Decision::Deny,
                rule: Some("deny-git-push".into()),
                reason: "r".into(),
                outcome: "refused".into(),
                same_as: vec![],
                ancestry: vec!["1 sh -c x".into()],
                answer: None,
                message: "rule deny-git-push denied exec of /usr/bin/git push (pid 7)".into(),
                between_calls: true,
            },
        },
        Event::NetDecision(NetDecision {
            call_id: "c".into(),
            host: "crates.io".into(),
            port: 443,
            decision: Decision::Allow,
            by: "`network.allow` entry `crates.io`".into(),
            error: None,
            connections: 1,
            sent: 10,
            received: 20,
            between_calls: true,
        }),
        Event::ApprovalAsked {
            call_id: "c".into(),
            question: "q".into(),
        },
        Event::ApprovalDecided {
            call_id: "c".into(),
            answer: "approved".into(),
            by: "b".into(),
        },
        Event::SandboxMode {
            mode: SandboxMode::ReadOnly,
        },
        Event::ApprovalPolicy {
            policy: ApprovalPolicy::Never,
        },
        Event::PlanMode { active: true },
        Event::InputReceived {
            input_id: "input-1".into(),
            kind: "steer".into(),
        },
        Event::InputIncluded {
            input_id: "input-1".into(),
            turn: 0,
            step: 1,
            carried: false,
        },
        Event::InputDropped {
            input_id: "input-2".into(),
            kind: "steer".into(),
            turn: Some(0),
            reason: DropReason::Cancelled,
        },
        Event::PolicyEffective(PolicySummary {
            digest: "d".into(),
            profile: "p".into(),
            mode: SandboxMode::ReadOnly,
            approval: ApprovalPolicy::Never,
            network: Network::Off,
            writable_roots: vec![],
            protected_paths: vec![],
            masked_paths: vec![],
            rules: vec![],
        }),
        Event::ContextCompacted {
            before: 3,
            summary: "s".into(),
            by: "b".into(),
        },
    ];
    assert_eq!(samples.len(), KNOWN_KINDS.len());
    for event in &samples {
        let value = serde_json::to_value(event).unwrap();
        assert_eq!(value["type"], event.kind());
        assert!(Event::is_known_kind(event.kind()), "{}", event.kind());
    }
}

/// Logs written before `turn/end` carried its detail and `assistant/message` the model's
/// report still load, and the new fields are left out when empty.
#[test]
fn older_turn_end_and_assistant_message_data_still_load() {
    let old: Event = serde_json::from_value(serde_json::json!({
        "type": "turn/end", "data": {"turn": 3, "reason": "error"}
    }))
    .unwrap();
    let Event::TurnEnd {
        detail,
        cancelled_by,
        ..
    } = &old
    else {
        panic!("{old:?}")
    };
    assert_eq!((detail, cancelled_by), (&None, &None));
    assert_eq!(
        serde_json::to_value(&old).unwrap()["data"],
        serde_json::json!({"turn": 3, "reason": "error"})
    );
    let old: Event = serde_json::from_value(serde_json::json!({
        "type": "assistant/message", "data": {"text": "hi"}
    }))
    .unwrap();
    assert_eq!(
        old,
        Event::AssistantMessage {
            text: "hi".into(),
            tool_calls: vec![],
            reasoning: String::new(),
            reply: None,
        }
    );
    assert_eq!(
        serde_json::to_value(&old).unwrap()["data"],
        serde_json::json!({"text": "hi"})
    );
}
