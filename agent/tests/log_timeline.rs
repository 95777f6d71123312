//! The timeline `bridle log show` prints, built from a session's events: every result attaches
//! to its call (also the results of calls that never ran), escalations and denials are read
//! off the calls' arguments and sandbox facts, and a turn says why it ended.

#![cfg(test)]

use bridle_agent::log::{
    Backend, Entry, Escalation, Event, NOT_STARTED, NewSession, SessionDir, Timeline, ToolCall,
    TurnEndReason, timeline,
};
use bridle_policy::Decision;
use pretty_assertions::assert_eq;

fn listed(id: &str, arguments: &str) -> ToolCall {
    ToolCall {
        call_id: id.into(),
        name: "bash".into(),
        arguments: arguments.into(),
    }
}

fn answer(calls: Vec<ToolCall>) -> Event {
    Event::AssistantMessage {
        text: String::new(),
        tool_calls: calls,
        reasoning: String::new(),
        reply: None,
    }
}

fn result(id: &str, content: &str, sandbox: Option<serde_json::Value>) -> Event {
    Event::ToolResult {
        call_id: id.into(),
        ok: false,
        content: content.into(),
        sandbox,
    }
}

fn view(events: &[Event]) -> Timeline {
    timeline(
        (0u64..)
            .zip(events)
            .map(|(seq, e)| (seq, "2026-11-30T00:00:00.000Z", e)),
    )
}

fn only_turn(view: &Timeline) -> &bridle_agent::log::Turn {
    let turns: Vec<_> = view
        .entries
        .iter()
        .map(|e| match e {
            Entry::Turn(t) => t,
            other => panic!("not a turn: {other:?}"),
        })
        .collect();
    assert_eq!(turns.len(), 1, "{view:?}");
    turns[0]
}

#[test]
fn results_of_calls_that_never_ran_attach_to_their_calls() {
    let events = [
        Event::TurnStart { turn: 0 },
        Event::StepStart { turn: 0, step: 0 },
        answer(vec![listed("c1", "{}"), listed("c2", "{}")]),
        Event::ToolCall(listed("c1", "{}")),
        Event::ToolDecision {
            call_id: "c1".into(),
            decision: Decision::Allow,
            by: "mode workspace-write".into(),
        },
        result("c1", "killed", None),
        // Never dispatched: the turn was cancelled first.
        result(
            "c2",
            "aborted before dispatch: the turn was cancelled",
            None,
        ),
        Event::StepEnd { turn: 0, step: 0 },
        Event::TurnEnd {
            turn: 0,
            reason: TurnEndReason::Aborted,
            detail: Some("the turn was cancelled (signal SIGINT)".into()),
            cancelled_by: Some("signal SIGINT".into()),
        },
    ];
    let view = view(&events);
    let turn = only_turn(&view);
    let calls = &turn.steps[0].calls;
    assert_eq!(calls.len(), 2);
    assert!(calls[0].dispatched);
    assert_eq!(calls[0].seq, 3);
    assert_eq!(calls[0].decided_by.as_deref(), Some("mode workspace-write"));
    assert!(!calls[1].dispatched);
    assert_eq!(calls[1].seq, 2, "the answer that listed it");
    assert_eq!(
        calls[1].result.as_deref(),
        Some("aborted before dispatch: the turn was cancelled")
    );
    assert_eq!(turn.cancelled_by.as_deref(), Some("signal SIGINT"));
    assert_eq!(
        turn.detail.as_deref(),
        Some("the turn was cancelled (signal SIGINT)")
    );
}

#[test]
fn crash_repair_results_attach_to_calls_listed_but_never_recorded() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = SessionDir::open(tmp.path()).unwrap();
    let mut log = dir
        .create(
            Backend::Jsonl,
            &NewSession {
                workspace: "/w".into(),
                profile: "p".into(),
                policy_digest: "d".into(),
            },
        )
        .unwrap();
    for event in [
        Event::TurnStart { turn: 0 },
        Event::StepStart { turn: 0, step: 0 },
        answer(vec![listed("a", "{}"), listed("b", "{}")]),
        Event::ToolCall(listed("a", "{}")),
    ] {
        log.append(event).unwrap();
    }
    let id = log.id().to_owned();
    drop(log);
    drop(dir.resume(&id).unwrap());
    let events = dir.read_events(&id).unwrap();
    let view = timeline(events.iter().map(|(s, t, e)| (*s, t.as_str(), e)));
    let turn = only_turn(&view);
    assert_eq!(turn.ended, Some(TurnEndReason::Interrupted));
    let results: Vec<(bool, Option<&str>)> = turn.steps[0]
        .calls
        .iter()
        .map(|c| (c.dispatched, c.result.as_deref()))
        .collect();
    assert_eq!(
        results,
        vec![(true, Some(NOT_STARTED)), (false, Some(NOT_STARTED))]
    );
}

#[test]
fn escalations_and_sandbox_denials_are_read_off_the_call() {
    let wide = r#"{"command":"curl x","sandbox_permissions":"danger-full-access"}"#;
    let events = [
        Event::TurnStart { turn: 0 },
        Event::StepStart { turn: 0, step: 0 },
        answer(vec![
            listed("c1", wide),
            listed("c2", wide),
            listed("c3", "{}"),
        ]),
        Event::ToolCall(listed("c1", wide)),
        Event::ToolDecision {
            call_id: "c1".into(),
            decision: Decision::Allow,
            by: "approved escalation".into(),
        },
        result(
            "c1",
            "ran",
            Some(serde_json::json!({"mode": "danger-full-access", "escalated": true})),
        ),
        Event::ToolCall(listed("c2", wide)),
        Event::ToolDecision {
            call_id: "c2".into(),
            decision: Decision::Deny,
            by: "approval rejected".into(),
        },
        result(
            "c2",
            "denied",
            Some(
                serde_json::json!({"mode": "workspace-write", "escalated": false,
                "denied_by": "approval"}),
            ),
        ),
        Event::ToolCall(listed("c3", "{}")),
        Event::ToolDecision {
            call_id: "c3".into(),
            decision: Decision::Allow,
            by: "mode workspace-write".into(),
        },
        result(
            "c3",
            "Permission denied",
            Some(
                serde_json::json!({"mode": "workspace-write", "escalated": false,
                "denied_by_sandbox": "`/etc/x` is outside the writable roots"}),
            ),
        ),
    ];
    let view = view(&events);
    let calls = &only_turn(&view).steps[0].calls;
    assert_eq!(
        calls[0].escalation,
        Some(Escalation {
            asked: "danger-full-access".into(),
            ran_escalated: Some(true),
        })
    );
    assert_eq!(calls[1].refused_by.as_deref(), Some("approval"));
    assert_eq!(calls[2].escalation, None);
    assert_eq!(
        calls[2].denied_by_sandbox.as_deref(),
        Some("`/etc/x` is outside the writable roots")
    );
}

/// A compaction is shown where it happened, with what it replaced and its summary: outside a
/// turn at the top level, inside one among the turn's switches.
#[test]
fn a_compaction_is_shown_with_its_summary_where_it_happened() {
    let compacted = |before| Event::ContextCompacted {
        before,
        summary: "turn 0 listed the files".into(),
        by: "threshold".into(),
    };
    let events = [
        Event::TurnStart { turn: 0 },
        Event::TurnEnd {
            turn: 0,
            reason: TurnEndReason::Completed,
            detail: None,
            cancelled_by: None,
        },
        compacted(2),
        Event::TurnStart { turn: 1 },
        Event::StepStart { turn: 1, step: 0 },
        compacted(4),
    ];
    let view = view(&events);
    let Entry::Switch(top) = &view.entries[1] else {
        panic!("{view:?}")
    };
    assert_eq!((top.seq, top.what), (2, "context"));
    assert_eq!(
        top.to,
        "compacted: events before 2 replaced by a summary (threshold)"
    );
    assert_eq!(top.summary.as_deref(), Some("turn 0 listed the files"));
    let Entry::Turn(turn) = &view.entries[2] else {
        panic!("{view:?}")
    };
    assert_eq!(turn.switches.len(), 1);
    assert_eq!(turn.switches[0].seq, 5);
    let json = serde_json::to_value(&view).unwrap();
    assert_eq!(json["entries"][1]["summary"], "turn 0 listed the files");
}

/// A live session's inputs show where they arrived and where a request included them (the
/// receipt), in order with the steps; before, `log show` left them out.
#[test]
fn input_receipts_are_shown_where_they_happened() {
    let events = [
        Event::TurnStart { turn: 0 },
        Event::InputReceived {
            input_id: "input-1".into(),
            kind: "prompt".into(),
        },
        Event::UserMessage {
            id: Some("input-1".into()),
            text: "go".into(),
        },
        Event::StepStart { turn: 0, step: 0 },
        Event::InputIncluded {
            input_id: "input-1".into(),
            turn: 0,
            step: 0,
            carried: false,
        },
        Event::InputReceived {
            input_id: "input-2".into(),
            kind: "steer".into(),
        },
        Event::InputIncluded {
            input_id: "input-2".into(),
            turn: 0,
            step: 1,
            carried: true,
        },
    ];
    let view = view(&events);
    let turn = only_turn(&view);
    let shown: Vec<(u64, &str, &str)> = turn
        .switches
        .iter()
        .map(|s| (s.seq, s.what, s.to.as_str()))
        .collect();
    assert_eq!(
        shown,
        [
            (1, "input", "input-1 received (prompt)"),
            (4, "input", "input-1 included in turn 0 step 0"),
            (5, "input", "input-2 received (steer)"),
            (
                6,
                "input",
                "input-2 included in turn 0 step 1, carried from the turn it arrived in"
            ),
        ]
    );
}

#[test]
fn every_question_asked_about_a_call_is_kept_with_its_answer() {
    // The call's own question, then one per exec an `ask` rule matched: a reviewer must see
    // each answer, not only the last.
    let cmd = r#"{"command":"git push; make push"}"#;
    let asked = |q: &str| Event::ApprovalAsked {
        call_id: "c1".into(),
        question: q.into(),
    };
    let decided = |answer: &str| Event::ApprovalDecided {
        call_id: "c1".into(),
        answer: answer.into(),
        by: "the person at the terminal".into(),
    };
    let events = [
        Event::TurnStart { turn: 0 },
        Event::StepStart { turn: 0, step: 0 },
        answer(vec![listed("c1", cmd)]),
        Event::ToolCall(listed("c1", cmd)),
        asked("approve bash git push?"),
        decided("approved"),
        Event::ToolDecision {
            call_id: "c1".into(),
            decision: Decision::Allow,
            by: "approved".into(),
        },
        asked("approve exec git push origin sneaky?"),
        decided("rejected"),
        result("c1", "done", None),
    ];
    let view = view(&events);
    let call = &only_turn(&view).steps[0].calls[0];
    let answers: Vec<(&str, Option<&str>)> = call
        .approvals
        .iter()
        .map(|a| (a.question.as_str(), a.answer.as_deref()))
        .collect();
    assert_eq!(
        answers,
        vec![
            ("approve bash git push?", Some("approved")),
            ("approve exec git push origin sneaky?", Some("rejected")),
        ]
    );
}
