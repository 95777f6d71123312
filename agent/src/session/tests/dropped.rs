//! Inputs the session accepted and never delivered: each gets `input/dropped` in the log,
//! after its `input/received`, with the turn and the reason.

use super::*;
use crate::log::{DropReason, Entry, SessionDir};

/// How many `input/received` name `id`.
fn received(events: &[Event], id: &str) -> usize {
    events
        .iter()
        .filter(|e| matches!(e, Event::InputReceived { input_id, .. } if input_id == id))
        .count()
}

/// Where `wanted` is in `events`.
fn at(events: &[Event], wanted: &Event) -> usize {
    events
        .iter()
        .position(|e| e == wanted)
        .unwrap_or_else(|| panic!("{wanted:?} missing: {events:#?}"))
}

/// A steer and an injected message pending at the cancel are logged as dropped (received
/// first, once), the log verifies, and the timeline `log show` prints says so. The queued
/// turn still runs: its input is received once and its receipt says it was carried.
#[test]
fn steering_pending_at_a_cancel_is_logged_as_dropped_and_the_log_verifies() {
    let script = "- tool_calls: [{name: wait, arguments: {}}]\n- text: queued turn\n";
    let f = fixture(script, SessionConfig::default());
    let mut reports = f.session.reports().unwrap();
    f.session.prompt("one").unwrap();
    f.started.recv_timeout(Duration::from_secs(10)).unwrap();
    let steer = f.session.steer("and then run this").unwrap();
    let injected = f.session.inject("context").unwrap();
    let queued = f.session.queue("next").unwrap();
    assert_eq!(f.session.cancel(), vec![steer.clone(), injected.clone()]);
    f.release.send(()).unwrap();
    assert_eq!(
        reports.blocking_recv().unwrap().reason,
        TurnEndReason::Aborted
    );
    assert_eq!(reports.blocking_recv().unwrap().answer, "queued turn");
    let log = f.session.close().unwrap();
    let events = events(&log);
    for (id, kind) in [(&steer, "steer"), (&injected, "inject")] {
        assert_eq!(received(&events, id), 1, "{id}: {events:#?}");
        let arrived = at(
            &events,
            &Event::InputReceived {
                input_id: id.clone(),
                kind: kind.into(),
            },
        );
        let dropped = at(
            &events,
            &Event::InputDropped {
                input_id: id.clone(),
                kind: kind.into(),
                turn: Some(0),
                reason: DropReason::Cancelled,
            },
        );
        assert!(arrived < dropped, "{events:#?}");
    }
    assert_eq!(received(&events, &queued), 1, "{events:#?}");
    at(
        &events,
        &Event::InputIncluded {
            input_id: queued.clone(),
            turn: 1,
            step: 0,
            carried: true,
        },
    );
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, Event::InputDropped { input_id, .. } if *input_id == queued)),
        "{events:#?}"
    );
    let dir = SessionDir::open(log.path().parent().unwrap()).unwrap();
    let verified = dir.verify(log.id()).unwrap();
    assert_eq!(verified.problem, None);
    assert_eq!(verified.intact, events.len() as u64);
    let shown = crate::log::timeline(log.events().iter().map(|(seq, e)| (*seq, "t", e)));
    let lines: Vec<&str> = shown
        .entries
        .iter()
        .filter_map(|entry| match entry {
            Entry::Switch(s) if s.what == "input" => Some(s.to.as_str()),
            _ => None,
        })
        .collect();
    let said = format!("{steer} (steer) dropped, never sent to the model: turn 0 was cancelled");
    assert!(lines.contains(&said.as_str()), "{lines:#?}");
}

/// A front end that leaves during a turn drops what is pending; a close drops the injected
/// context no step took. Both are logged as dropped because the session closed.
#[test]
fn inputs_left_when_the_session_closes_are_logged_as_dropped() {
    let script = "- tool_calls: [{name: wait, arguments: {}}]\n- text: first\n";
    let f = fixture(script, SessionConfig::default());
    let mut reports = f.session.reports().unwrap();
    f.session.prompt("one").unwrap();
    f.started.recv_timeout(Duration::from_secs(10)).unwrap();
    let queued = f.session.queue("two").unwrap();
    assert_eq!(f.session.discard_pending(), vec![queued.clone()]);
    f.release.send(()).unwrap();
    assert_eq!(reports.blocking_recv().unwrap().answer, "first");
    // Idle: injected context waits for a step that never comes.
    let injected = f.session.inject("context").unwrap();
    let log = f.session.close().unwrap();
    let events = events(&log);
    for (id, kind, turn) in [(&queued, "queue", Some(0)), (&injected, "inject", None)] {
        assert_eq!(received(&events, id), 1, "{id}: {events:#?}");
        at(
            &events,
            &Event::InputDropped {
                input_id: id.clone(),
                kind: kind.into(),
                turn,
                reason: DropReason::SessionClosed,
            },
        );
    }
    assert!(matches!(events.last(), Some(Event::InputDropped { .. })));
}
