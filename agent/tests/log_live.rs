//! Reading a session while `bridle run` appends to it: `verify` (and everything that loads a
//! log) must never take a log that is growing for one that was tampered with.

#![cfg(test)]

use std::sync::atomic::{AtomicBool, Ordering};

use bridle_agent::log::{Backend, Event, NewSession, SessionDir};

/// Appends `events` events to a new session, making a batch durable every few events, while
/// another thread verifies the session over and over. Returns how many checks ran and the
/// distinct event counts they saw.
fn verify_while_appending(backend: Backend, events: u64) -> (u64, Vec<u64>) {
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
    let id = log.id().to_owned();
    let done = AtomicBool::new(false);
    std::thread::scope(|scope| {
        let checker = scope.spawn(|| {
            let mut checks = 0u64;
            let mut seen = Vec::new();
            loop {
                let finished = done.load(Ordering::SeqCst);
                let v = dir.verify(&id).unwrap();
                assert_eq!(v.problem, None, "check {checks} of a live session");
                if seen.last() != Some(&v.intact) {
                    seen.push(v.intact);
                }
                checks += 1;
                if finished {
                    return (checks, seen);
                }
            }
        });
        for n in 0..events {
            log.append(Event::UserMessage {
                id: None,
                text: format!("message {n}"),
            })
            .unwrap();
            if n.is_multiple_of(5) {
                log.barrier().unwrap();
            }
        }
        log.barrier().unwrap();
        done.store(true, Ordering::SeqCst);
        checker.join().unwrap()
    })
}

fn check(backend: Backend) {
    let events = 3000;
    let (checks, seen) = verify_while_appending(backend, events);
    // The checks overlapped the appends (they saw the log at several lengths) and the last
    // one, after the writer stopped, saw all of it.
    assert!(seen.len() > 3, "{checks} checks saw only {seen:?}");
    assert_eq!(seen.last(), Some(&(events + 1)));
}

#[test]
fn jsonl_a_session_being_appended_never_verifies_as_tampered() {
    check(Backend::Jsonl);
}

#[test]
fn sqlite_a_session_being_appended_never_verifies_as_tampered() {
    check(Backend::Sqlite);
}
