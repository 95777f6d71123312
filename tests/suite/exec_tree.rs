//! `bridle exec` and the process tree: G-TREE.
//!
//! Every daemon a test starts carries a unique token as argv[0] (`exec -a`), so survivors are
//! found by scanning the host's `/proc/*/cmdline`, wherever they were reparented to.

use std::path::Path;
use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use super::support::{
    ExecEnv, ProcId, assert_no_survivor, process_tree, processes_with, still_running, token,
    wait_until,
};

/// Starts four kinds of escapees carrying `token-*` as argv[0]: a `setsid` session leader that
/// ignores SIGTERM and SIGHUP, a double-forked `setsid` daemon, a nested double fork and a
/// `nohup` job. Waits until all four run, then writes `started` into the workspace.
fn daemons(token: &str) -> String {
    format!(
        "T={token}
         setsid bash -c \"trap '' TERM HUP; exec -a $T-setsid sleep 300\" < /dev/null > /dev/null 2>&1 &
         (setsid bash -c \"exec -a $T-double sleep 300\" < /dev/null > /dev/null 2>&1 &)
         sh -c \"(bash -c 'exec -a $T-nested sleep 300' < /dev/null > /dev/null 2>&1 &) &\"
         nohup bash -c \"exec -a $T-nohup sleep 300\" < /dev/null > /dev/null 2>&1 &
         n=0
         while [ \"$(pgrep -c -f \"^$T-\")\" -lt 4 ]; do
           n=$((n + 1)); [ $n -gt 500 ] && echo 'daemons never started' >&2 && exit 99
           sleep 0.01
         done
         echo > started"
    )
}

fn wait_started(workspace: &Path, child: &mut std::process::Child) {
    let started = wait_until(Duration::from_secs(10), || {
        workspace.join("started").exists() || matches!(child.try_wait(), Ok(Some(_)))
    });
    assert!(
        started && workspace.join("started").exists(),
        "the daemons never started"
    );
}

#[test]
fn daemons_do_not_survive_the_command() {
    let e = ExecEnv::new();
    let t = token("tree");
    let r = e.sh(&format!("{}\necho returned=0", daemons(&t)));
    r.assert_ok();
    r.assert_succeeded("returned");
    // No grace period: when `bridle exec` returns, nothing of the tree is left.
    assert_no_survivor(&t, "after the command exited");
}

#[test]
fn daemons_do_not_survive_a_failing_command() {
    let e = ExecEnv::new();
    let t = token("tree-fail");
    let r = e.sh(&format!("{}\nexit 3", daemons(&t)));
    r.assert_code(3);
    assert_no_survivor(&t, "after the command failed");
}

#[test]
fn timeout_kills_the_whole_tree() {
    let e = ExecEnv::new();
    let t = token("timeout");
    let r = e.sh_with(
        &[],
        &["--timeout", "1"],
        &format!(
            "{}\nexec bash -c \"exec -a $T-main sleep 300\"",
            daemons(&t)
        ),
    );
    r.assert_code(124);
    assert!(
        r.elapsed < Duration::from_secs(10),
        "the timeout took {:?}",
        r.elapsed
    );
    assert!(r.stderr.starts_with("bridle: "), "{}", r.stderr);
    assert!(e.workspace.join("started").exists());
    assert_no_survivor(&t, "after the timeout");
}

fn killed_bridle_leaves_no_survivor(mode: &[&str], signal: Signal) {
    let e = ExecEnv::new();
    let t = token("killed");
    let mut child = e
        .exec_cmd(
            &[],
            mode,
            &[
                "sh",
                "-c",
                &format!(
                    "{}\nexec bash -c \"exec -a $T-main sleep 300\"",
                    daemons(&t)
                ),
            ],
        )
        .spawn()
        .unwrap();
    wait_started(&e.workspace, &mut child);
    assert!(
        wait_until(Duration::from_secs(5), || processes_with(&format!(
            "{t}-main"
        ))
        .len()
            == 1),
        "the main process never started"
    );
    let raw = i32::try_from(child.id()).unwrap();
    // Everything bridle started, the launcher (and the sandbox's init) included, which carry no
    // token.
    let tree: Vec<ProcId> = process_tree(raw)
        .into_iter()
        .filter(|p| p.pid != raw)
        .collect();
    assert!(!tree.is_empty(), "bridle has no children");
    kill(Pid::from_raw(raw), signal).unwrap();
    let status = child.wait().unwrap();
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(signal as i32)
    );
    let gone = wait_until(Duration::from_secs(5), || {
        processes_with(&t).is_empty() && still_running(&tree).is_empty()
    });
    let left = still_running(&tree);
    for p in &left {
        let _ = kill(Pid::from_raw(p.pid), Signal::SIGKILL);
    }
    assert_no_survivor(&t, &format!("5 s after bridle died of {signal}"));
    remove_session_temp_dirs(raw);
    assert!(
        gone && left.is_empty(),
        "5 s after bridle died of {signal}, still running: {left:?}"
    );
}

/// A bridle killed outright cannot remove its session temp dir
/// (`/var/tmp/bridle-<uid>/run-<pid>-<nanos>`); the test does, so runs leave nothing behind.
fn remove_session_temp_dirs(bridle_pid: i32) {
    let base = std::path::PathBuf::from(format!("/var/tmp/bridle-{}", nix::unistd::geteuid()));
    let prefix = format!("run-{bridle_pid}-");
    if let Ok(entries) = std::fs::read_dir(&base) {
        for entry in entries.flatten() {
            if entry.file_name().to_string_lossy().starts_with(&prefix) {
                let _ = std::fs::remove_dir_all(entry.path());
            }
        }
    }
}

#[test]
fn sigkill_of_bridle_leaves_no_survivor() {
    killed_bridle_leaves_no_survivor(&[], Signal::SIGKILL);
}

#[test]
fn sigterm_of_bridle_leaves_no_survivor() {
    killed_bridle_leaves_no_survivor(&[], Signal::SIGTERM);
}

#[test]
fn danger_full_access_daemons_do_not_survive() {
    let e = ExecEnv::new();
    let t = token("danger-tree");
    let r = e.sh_with(
        &[],
        &["--mode", "danger-full-access"],
        &format!("{}\necho returned=0", daemons(&t)),
    );
    r.assert_ok();
    r.assert_succeeded("returned");
    assert_no_survivor(&t, "danger-full-access, after the command exited");
}

#[test]
fn danger_full_access_timeout_kills_the_whole_tree() {
    let e = ExecEnv::new();
    let t = token("danger-timeout");
    let r = e.sh_with(
        &[],
        &["--mode", "danger-full-access", "--timeout", "1"],
        &format!(
            "{}\nexec bash -c \"exec -a $T-main sleep 300\"",
            daemons(&t)
        ),
    );
    r.assert_code(124);
    assert!(r.elapsed < Duration::from_secs(10), "{:?}", r.elapsed);
    assert_no_survivor(&t, "danger-full-access, after the timeout");
}

#[test]
fn danger_full_access_sigkill_of_bridle_leaves_no_survivor() {
    killed_bridle_leaves_no_survivor(&["--mode", "danger-full-access"], Signal::SIGKILL);
}

#[test]
fn background_work_finishing_in_time_is_not_cut_short() {
    // Positive case: the tree is killed only once the command itself is done; what it waits for
    // completes.
    let e = ExecEnv::new();
    let r = e.sh("(sleep 0.2; echo late > late.txt) & wait; echo done=0");
    r.assert_ok();
    assert_eq!(
        std::fs::read_to_string(e.workspace.join("late.txt")).unwrap(),
        "late\n"
    );
}

#[test]
fn danger_full_access_tree_dies_even_when_the_command_kills_its_launcher() {
    let e = ExecEnv::new();
    let tok = token("killed-launcher");
    // The command kills its own (subreaper) launcher; bridle itself reaps what is left.
    let script = format!("setsid bash -c 'exec -a {tok} sleep 300' & sleep 0.5; kill -9 $PPID");
    let r = e.sh_with(&[], &["--mode", "danger-full-access"], &script);
    assert!(r.code.is_some(), "{}", r.stderr);
    assert_no_survivor(&tok, "danger-full-access after the launcher was killed");
}
