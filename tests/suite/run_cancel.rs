//! A cancel that comes while a command is being started: the runner asks the session's cancel
//! check once the run is listed, so the run cannot slip between the cancel's flag and its kill.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use bridle_exec::run::{CancelCheck, RunRequest, RunStatus, Runner, SandboxRunner};

use super::support::{ExecEnv, assert_no_survivor, processes_with, spec_for, token};

fn request(e: &ExecEnv, command: &str) -> RunRequest {
    RunRequest {
        argv: vec!["bash".into(), "-c".into(), command.into()],
        cwd: e.workspace.clone(),
        spec: spec_for(e),
        timeout: Some(Duration::from_secs(60)),
        stdin: Vec::new(),
        output_cap: 4096,
        spill_dir: e.home.join("session-tmp"),
    }
}

/// A check that says "not cancelled" the first `calls` times it is asked, then "cancelled".
fn cancelled_after(calls: u32) -> (CancelCheck, Arc<AtomicU32>) {
    let asked = Arc::new(AtomicU32::new(0));
    let counter = Arc::clone(&asked);
    let check = CancelCheck(Arc::new(move || {
        counter.fetch_add(1, Ordering::SeqCst) >= calls
    }));
    (check, asked)
}

#[test]
fn a_cancel_that_comes_while_the_command_starts_kills_it_once_it_is_listed() {
    let e = ExecEnv::new();
    let mark = token("cancel-starting");
    let runner = SandboxRunner::new(env!("CARGO_BIN_EXE_bridle").into());
    // Asked before the launch (not yet cancelled), then when the run is listed (cancelled by
    // then): the state a cancel leaves when it killed the listed runs before this one was.
    let (check, asked) = cancelled_after(1);
    runner.cancel_with(check);
    let started = Instant::now();
    let result = runner
        .run(&request(
            &e,
            &format!("sh -c 'sleep 60; : {mark}' & sleep 60 # {mark}"),
        ))
        .unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "the cancelled command ran on: {:?}",
        started.elapsed()
    );
    assert!(
        !matches!(result.status, RunStatus::Exited(0)),
        "{:?}",
        result.status
    );
    assert_eq!(
        asked.load(Ordering::SeqCst),
        2,
        "asked before and once listed"
    );
    assert!(processes_with(&mark).is_empty());
    assert_no_survivor(&mark, "a command cancelled while it started");
}

#[test]
fn a_command_of_a_turn_cancelled_already_is_not_started() {
    let e = ExecEnv::new();
    let runner = SandboxRunner::new(env!("CARGO_BIN_EXE_bridle").into());
    let (check, _) = cancelled_after(0);
    runner.cancel_with(check);
    let result = runner.run(&request(&e, "touch ran-anyway")).unwrap();
    match &result.status {
        RunStatus::Refused(r) => assert!(r.cause.contains("cancelled"), "{r:?}"),
        other => panic!("a cancelled turn's command ran: {other:?}"),
    }
    assert!(!e.workspace.join("ran-anyway").exists());
}

#[test]
fn without_a_cancel_the_check_changes_nothing() {
    let e = ExecEnv::new();
    let runner = SandboxRunner::new(env!("CARGO_BIN_EXE_bridle").into());
    let (check, asked) = cancelled_after(u32::MAX);
    runner.cancel_with(check);
    let result = runner.run(&request(&e, "touch ran; echo fine")).unwrap();
    assert_eq!(result.status, RunStatus::Exited(0), "{:?}", result.stderr);
    assert!(e.workspace.join("ran").exists());
    assert_eq!(asked.load(Ordering::SeqCst), 2);
}
