//! How the exec supervisor is scheduled: the sandbox's init, which answers every exec when
//! there are command rules, asks the kernel for its shortest slice, and nothing it starts
//! inherits that (`bench/RESULTS.md` has what it is for).

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

/// The slices of the command and of init (`/proc/self/sched`, `/proc/1/sched`) in a sandbox
/// of `profile`.
fn slices_inside(e: &ExecEnv, profile: &str) -> (Option<u64>, Option<u64>) {
    let r = run_bounded(&mut e.exec_cmd(
        &["--profile", profile],
        &[],
        &[
            "sh",
            "-c",
            "cat /proc/self/sched; echo ===; cat /proc/1/sched",
        ],
    ));
    r.assert_ok();
    let (command, init) = r.stdout.split_once("===").expect("both texts");
    (slice(command), slice(init))
}

#[test]
fn the_supervisor_runs_in_short_slices_and_what_it_starts_keeps_the_default() {
    let e = ExecEnv::new();
    let outside = run(Command::new("cat").arg("/proc/self/sched"));
    let default =
        slice(&outside.stdout).expect("se.slice in /proc/self/sched (kernel 6.6 or later)");
    let (command, init) = slices_inside(&e, "ci-locked");
    assert_eq!(command, Some(default), "the command under command rules");
    // Kernels before 6.12 have no slice per task; a host that says so is checked for the rest.
    if !host_lacks("custom-slice") {
        assert_eq!(
            init,
            Some(100_000),
            "init, supervising (set BRIDLE_HOST_LACKS=custom-slice on kernels before 6.12)"
        );
    }
    // Without command rules there is no supervisor, and init is left as it is.
    let norules = e.profile(
        "norules.yaml",
        "extends: ci-locked\nrules:\n  commands: {replace: []}\n",
    );
    let (command, init) = slices_inside(&e, &norules);
    assert_eq!(command, Some(default), "the command without command rules");
    assert_eq!(init, Some(default), "init without a supervisor");
}
