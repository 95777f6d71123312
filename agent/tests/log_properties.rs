//! Properties of the session log over generated events: whatever is recorded comes back
//! unchanged from either backend, and no single changed byte in a stored JSONL log goes
//! unnoticed.

#![cfg(test)]

use bridle_agent::log::{Backend, Event, NewSession, SessionDir, ToolCall, TurnEndReason};
use proptest::prelude::*;

fn text() -> impl Strategy<Value = String> {
    // Any Unicode, including quotes, newlines and escapes that JSON must carry.
    proptest::collection::vec(any::<char>(), 0..40).prop_map(|c| c.into_iter().collect())
}

fn event() -> impl Strategy<Value = Event> {
    prop_oneof![
        (any::<u64>()).prop_map(|turn| Event::TurnStart { turn }),
        (any::<u64>(), any::<u64>()).prop_map(|(turn, step)| Event::StepStart { turn, step }),
        (proptest::option::of("[a-z0-9]{1,8}"), text())
            .prop_map(|(id, text)| Event::UserMessage { id, text }),
        (text(), any::<bool>())
            .prop_map(|(text, reasoning)| Event::AssistantChunk { text, reasoning }),
        ("[a-z0-9]{1,8}", "[a-z_]{1,10}", text()).prop_map(|(call_id, name, arguments)| {
            Event::ToolCall(ToolCall {
                call_id,
                name,
                arguments,
            })
        }),
        ("[a-z0-9]{1,8}", any::<bool>(), text(), any::<i64>()).prop_map(
            |(call_id, ok, content, n)| Event::ToolResult {
                call_id,
                ok,
                content,
                sandbox: Some(serde_json::json!({"exit": n, "denied": []})),
            }
        ),
        any::<bool>().prop_map(|active| Event::PlanMode { active }),
        any::<u64>().prop_map(|turn| Event::TurnEnd {
            turn,
            reason: TurnEndReason::MaxTokens,
            detail: None,
            cancelled_by: None,
        }),
    ]
}

fn record_all(backend: Backend, events: &[Event]) -> (tempfile::TempDir, SessionDir, String) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = SessionDir::open(tmp.path()).unwrap();
    let mut log = dir
        .create(
            backend,
            &NewSession {
                workspace: "/w".into(),
                profile: "p".into(),
                policy_digest: "d".into(),
            },
        )
        .unwrap();
    for event in events {
        log.append(event.clone()).unwrap();
    }
    let id = log.id().to_owned();
    drop(log);
    (tmp, dir, id)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    #[test]
    fn recorded_events_read_back_unchanged(
        events in proptest::collection::vec(event(), 0..20),
        sqlite in any::<bool>(),
    ) {
        let backend = if sqlite { Backend::Sqlite } else { Backend::Jsonl };
        let (_tmp, dir, id) = record_all(backend, &events);
        let verification = dir.verify(&id).unwrap();
        prop_assert_eq!(verification.problem, None);
        let back: Vec<Event> = dir
            .read(&id)
            .unwrap()
            .iter()
            .skip(1)
            .map(|r| r.event().unwrap().unwrap())
            .collect();
        prop_assert_eq!(back, events);
    }

    #[test]
    fn any_changed_byte_of_a_stored_jsonl_log_is_noticed(
        events in proptest::collection::vec(event(), 1..8),
        position in any::<prop::sample::Index>(),
        replacement in any::<u8>(),
    ) {
        let (_tmp, dir, id) = record_all(Backend::Jsonl, &events);
        let path = dir.locate(&id).unwrap().1;
        let mut bytes = std::fs::read(&path).unwrap();
        let i = position.index(bytes.len());
        prop_assume!(bytes[i] != replacement);
        bytes[i] = replacement;
        std::fs::write(&path, &bytes).unwrap();
        // Either the log no longer parses (an error naming it), or verification fails, or the
        // change only tore the last line (nothing after the change is trusted).
        match dir.verify(&id) {
            Err(e) => prop_assert!(e.to_string().contains(&id), "{}", e),
            Ok(v) => prop_assert!(
                v.problem.is_some() || v.torn.is_some(),
                "byte {} changed to {:#04x} and the log still verifies",
                i,
                replacement
            ),
        }
    }
}
