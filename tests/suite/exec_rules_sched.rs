//! How the exec supervisor is scheduled: each thread of its own process (`bridle-execs`), which
//! answers every exec when there are command rules, asks the kernel for its shortest slice, and
//! nothing it starts inherits that (`bench/RESULTS.md` has what it is for).

use std::process::Command;

use super::support::{ExecEnv, host_lacks, run, run_bounded};

/// The `se.slice` of a `/proc/PID/sched` text, in nanoseconds.
fn slice(sched: &str) -> Option<u64> {
    sched
        .lines()
        .find(|l| l.starts_with("se.slice"))
        .and_then(|l| l.split(':').nth(1))
        .and_then(|v| v.trim().parse().ok())
}

/// The slices of the command, of init and of every thread of the supervisor's process
/// (`/proc/self/sched`, `/proc/1/sched`, `/proc/PID/task/*/sched`) in a sandbox of `profile`.
fn slices_inside(e: &ExecEnv, profile: &str) -> (Option<u64>, Option<u64>, Vec<Option<u64>>) {
    let r = run_bounded(&mut e.exec_cmd(
        &["--profile", profile],
        &[],
        &[
            "sh",
            "-c",
            // A supervisor thread sets its slice as it starts: the threads are listed first,
            // and read a second later, so that one the pool is just starting (under load it
            // may wait that long for a CPU) has done so.
            "cat /proc/self/sched; echo ===; cat /proc/1/sched; tasks=; for p in /proc/[0-9]*; do \
             if [ \"$(cat $p/comm 2>/dev/null)\" = bridle-execs ]; then for t in $p/task/*; do \
             tasks=\"$tasks $t\"; done; fi; done; sleep 1; for t in $tasks; do [ -e $t/sched ] || continue; echo ===; \
             cat $t/sched; done",
        ],
    ));
    r.assert_ok();
    let mut texts = r.stdout.split("===");
    let command = slice(texts.next().unwrap_or_default());
    let init = slice(texts.next().expect("init's text"));
    (command, init, texts.map(slice).collect())
}

#[test]
fn the_supervisor_runs_in_short_slices_and_what_it_starts_keeps_the_default() {
    let e = ExecEnv::new();
    let outside = run(Command::new("cat").arg("/proc/self/sched"));
    let default =
        slice(&outside.stdout).expect("se.slice in /proc/self/sched (kernel 6.6 or later)");
    let (command, init, supervisor) = slices_inside(&e, "ci-locked");
    assert_eq!(command, Some(default), "the command under command rules");
    assert_eq!(init, Some(default), "init, which no longer answers execs");
    assert!(!supervisor.is_empty(), "no bridle-execs process");
    // Kernels before 6.12 have no slice per task; a host that says so is checked for the rest.
    if !host_lacks("custom-slice") {
        for thread in &supervisor {
            assert_eq!(
                *thread,
                Some(100_000),
                "a supervisor thread (set BRIDLE_HOST_LACKS=custom-slice on kernels before 6.12)"
            );
        }
    }
    // Without command rules there is no supervisor, and init is left as it is.
    let norules = e.profile(
        "norules.yaml",
        "extends: ci-locked\nrules:\n  commands: {replace: []}\n",
    );
    let (command, init, supervisor) = slices_inside(&e, &norules);
    assert_eq!(command, Some(default), "the command without command rules");
    assert_eq!(init, Some(default), "init without a supervisor");
    assert!(supervisor.is_empty(), "a supervisor without command rules");
}
