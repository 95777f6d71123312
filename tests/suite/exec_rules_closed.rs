//! The exec supervisor fails closed: only a sandbox with command rules has one and nothing
//! stays traced after it; a supervisor that dies takes its sandbox with it; the command can
//! neither signal, trace nor rob it.

use super::exec_rules::{assert_attributed, assert_nothing_pushed, script, with_remote};
use super::support::{ExecEnv, run_bounded};

/// Whether a process of the sandbox holds a seccomp listener (init, the parent of the sandboxed
/// `marker` process, must not: `bridle-execs`, another child of it, does), and whether the
/// marker process is traced, while `profile` runs it.
fn listener_and_tracer(e: &ExecEnv, profile: &str) -> (bool, i32) {
    use super::support::{token, wait_until};
    use std::time::Duration;
    let marker = token("listened");
    let mut child = e
        .exec_cmd(
            &["--profile", profile],
            &[],
            &["bash", "-c", &format!("exec -a {marker} sleep 30")],
        )
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn bridle exec");
    let mut pid = 0;
    assert!(
        wait_until(Duration::from_secs(20), || {
            pid = processes_named(&marker).first().copied().unwrap_or(0);
            pid != 0
        }),
        "{profile}: the sandboxed process never showed up"
    );
    let init: i32 = status_field(pid, "PPid").parse().unwrap_or(0);
    let listens = |p: i32| {
        std::fs::read_dir(format!("/proc/{p}/fd"))
            .map(|fds| {
                fds.flatten().any(|fd| {
                    std::fs::read_link(fd.path())
                        .is_ok_and(|to| to.to_string_lossy() == "anon_inode:seccomp notify")
                })
            })
            .unwrap_or(false)
    };
    assert!(
        !listens(init),
        "{profile}: init keeps no copy of the listener"
    );
    let siblings: Vec<i32> = std::fs::read_dir("/proc")
        .map(|d| {
            d.flatten()
                .filter_map(|e| e.file_name().to_str()?.parse().ok())
                .filter(|p| status_field(*p, "PPid").parse() == Ok(init))
                .collect()
        })
        .unwrap_or_default();
    let holders: Vec<String> = siblings
        .iter()
        .filter(|p| listens(**p))
        .map(|p| status_field(*p, "Name"))
        .collect();
    assert!(
        holders.iter().all(|name| name == "bridle-execs"),
        "{profile}: the listener is held by {holders:?}"
    );
    let listens = !holders.is_empty();
    // The marker's command line shows from its exec event on, while it is still stopped there
    // (traced) until the supervisor decided: what must not happen is that it stays traced.
    let mut tracer = tracer_of(pid);
    wait_until(Duration::from_secs(10), || {
        tracer = tracer_of(pid);
        tracer == 0
    });
    let _ = child.kill();
    let _ = child.wait();
    // The sandbox dies with bridle (parent-death signals), a moment later.
    wait_until(Duration::from_secs(10), || {
        super::support::processes_with(&marker).is_empty()
    });
    super::support::assert_no_survivor(&marker, profile);
    (listens, tracer)
}

#[test]
fn only_a_sandbox_with_command_rules_is_supervised_and_nothing_stays_traced() {
    let e = ExecEnv::new();
    // The shipped workspace-write profile has no command rule: no supervisor, no listener.
    assert_eq!(listener_and_tracer(&e, "workspace-write"), (false, 0));
    // ci-locked has: the supervisor's own process holds the listener of every exec; a process
    // that exec'd is no longer traced (the supervisor let go of it at its exec event).
    assert_eq!(listener_and_tracer(&e, "ci-locked"), (true, 0));
}

/// Live processes whose `argv[0]` is `name`.
fn processes_named(name: &str) -> Vec<i32> {
    super::support::processes_with(name)
        .into_iter()
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| c.split(|b| *b == 0).next() == Some(name.as_bytes()))
        })
        .collect()
}

/// A field of `/proc/PID/status` (empty when the process is gone).
fn status_field(pid: i32, field: &str) -> String {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .map(|v| v.trim().to_owned())
        .unwrap_or_default()
}

/// The host pid of the tracer of `pid` (`TracerPid` in its status), 0 for none.
fn tracer_of(pid: i32) -> i32 {
    status_field(pid, "TracerPid").parse().unwrap_or(0)
}

/// `pid` runs and is not on its way out (a zombie, or `SIGKILL` pending).
fn runs_on(pid: i32) -> bool {
    let dying = |field: &str| {
        u64::from_str_radix(&status_field(pid, field), 16).is_ok_and(|mask| mask & (1 << 8) != 0)
    };
    // A process the kernel is already tearing down (PF_EXITING, 0x4 in the flags of
    // /proc/PID/stat) has dequeued its SIGKILL and lost its tracer, but runs nothing more.
    let exiting = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            let after = stat.rsplit_once(')')?.1.to_owned();
            after.split_whitespace().nth(6)?.parse::<u64>().ok()
        })
        .is_none_or(|flags| flags & 0x4 != 0);
    let state = status_field(pid, "State");
    !exiting
        && !state.is_empty()
        && !state.starts_with('Z')
        && !state.starts_with('X')
        && !dying("SigPnd")
        && !dying("ShdPnd")
}

#[test]
fn a_supervisor_that_dies_takes_the_sandbox_with_it() {
    use super::support::{assert_no_survivor, token, wait_until};
    use std::time::Duration;
    // Under seccomp user notification the supervisor is a process of its own (`bridle-execs`,
    // a child of init), and init's end ends everything; under danger-full-access it is the
    // launcher.
    let cases = [
        (&[][..], false),
        (&[][..], true),
        (&["--mode", "danger-full-access"][..], false),
    ];
    for (mode, execs) in cases {
        let e = ExecEnv::new();
        let marker = token("supervised");
        // A loop that execs a program every 20 ms: left running without its supervisor, it would
        // exec unsupervised (or, under the filter, fail with ENOSYS and say so).
        let inner = "while :; do /bin/true || echo exec-failed; sleep 0.02; done";
        let mut child = e
            .exec_cmd(
                &["--profile", "ci-locked"],
                mode,
                &["bash", "-c", &format!("exec -a {marker} bash -c '{inner}'")],
            )
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("spawn bridle exec");
        // The loop is the command: its parent is the supervisor (init, or the launcher), or
        // init's child `bridle-execs` is.
        let mut supervisor = 0;
        assert!(
            wait_until(Duration::from_secs(20), || {
                supervisor = processes_named(&marker).first().map_or(0, |p| {
                    if execs {
                        supervisor_of(*p)
                    } else {
                        status_field(*p, "PPid").parse().unwrap_or(0)
                    }
                });
                supervisor != 0
            }),
            "{mode:?}: the supervisor of the loop never showed up"
        );
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(supervisor),
            nix::sys::signal::Signal::SIGKILL,
        )
        .expect("kill the supervisor");
        // The loop is gone at once, never seen running on, and bridle ends.
        let mut untraced = Vec::new();
        let gone = wait_until(Duration::from_secs(5), || {
            let left = processes_named(&marker);
            // Seen running twice, 50 ms apart: a process being killed is caught between
            // losing its supervisor and exiting for less than that; one that escaped runs on.
            let first: Vec<i32> = left.iter().copied().filter(|p| runs_on(*p)).collect();
            if !first.is_empty() {
                std::thread::sleep(Duration::from_millis(50));
                untraced.extend(first.into_iter().filter(|p| runs_on(*p)));
            }
            left.is_empty()
        });
        let ended = wait_until(Duration::from_secs(20), || {
            matches!(child.try_wait(), Ok(Some(_)))
        });
        if !ended {
            let _ = child.kill();
        }
        let out = child.wait_with_output().expect("wait for bridle");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_no_survivor(&marker, "the sandbox of a dead supervisor");
        assert!(gone, "{mode:?}: the loop outlived its supervisor");
        assert!(
            untraced.is_empty(),
            "{mode:?}: processes ran on after their supervisor died: {untraced:?}"
        );
        assert!(ended, "{mode:?}: bridle did not end with its sandbox");
        assert!(!out.status.success(), "{mode:?}: {:?}", out.status);
        if execs {
            // Its listener gone, an exec fails (ENOSYS) until init, told, stops the sandbox.
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(
                stderr
                    .contains("the exec supervisor was killed by SIGKILL; the sandbox was stopped"),
                "{stderr}"
            );
            assert_eq!(out.status.code(), Some(137), "{stderr}");
        } else {
            assert!(
                !stdout.contains("exec-failed"),
                "{mode:?}: the loop ran on without its supervisor:\n{stdout}"
            );
        }
    }
}

/// The supervisor's own process of a running sandbox: a child of the command's parent (init)
/// named `bridle-execs`; 0 until it shows.
fn supervisor_of(command: i32) -> i32 {
    let init: i32 = status_field(command, "PPid").parse().unwrap_or(0);
    std::fs::read_dir("/proc")
        .expect("/proc")
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .find(|p| {
            init != 0
                && status_field(*p, "PPid").parse() == Ok(init)
                && status_field(*p, "Name") == "bridle-execs"
        })
        .unwrap_or(0)
}

#[test]
fn the_supervisor_ends_with_its_sandbox() {
    use super::support::{assert_no_survivor, token, wait_until};
    use std::time::Duration;
    // The command ends on its own, or bridle is killed (`SIGKILL`, nothing to clean up with).
    for killed in [false, true] {
        let e = ExecEnv::new();
        let marker = token("ends");
        let seconds = if killed { "30" } else { "2" };
        let mut child = e
            .exec_cmd(
                &["--profile", "ci-locked"],
                &[],
                &["bash", "-c", &format!("exec -a {marker} sleep {seconds}")],
            )
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("spawn bridle exec");
        let (mut command, mut supervisor) = (0, 0);
        assert!(
            wait_until(Duration::from_secs(20), || {
                command = processes_named(&marker).first().copied().unwrap_or(0);
                supervisor = if command == 0 {
                    0
                } else {
                    supervisor_of(command)
                };
                supervisor != 0
            }),
            "killed {killed}: the supervisor never showed up"
        );
        if killed {
            nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap()),
                nix::sys::signal::Signal::SIGKILL,
            )
            .expect("kill bridle");
        }
        let _ = child.wait();
        let gone =
            |pid: i32| !std::path::Path::new(&format!("/proc/{pid}")).exists() || !runs_on(pid);
        // Every process of it, bridle's own forks (launcher, init) included, which carry the
        // marker in their command line: the chain of parent-death signals takes a moment.
        assert!(
            wait_until(Duration::from_secs(10), || gone(supervisor)
                && gone(command)
                && super::support::processes_with(&marker).is_empty()),
            "killed {killed}: the supervisor ({supervisor}), the command ({command}) or another \
             process of the sandbox outlived it: {:?}",
            super::support::processes_with(&marker)
        );
        assert_no_survivor(&marker, "a sandbox that ended");
    }
}

/// The supervisor's own process is in the sandbox's PID namespace, where the command can see
/// it, but not signal it (Landlock's signal scope), trace it, or open its descriptors: the
/// execs after the attempts are still decided.
#[test]
fn the_command_cannot_signal_trace_or_rob_the_supervisor() {
    let e = with_remote();
    let name = script(
        &e,
        "rob.sh",
        r#"for p in /proc/[0-9]*; do
  [ "$(cat $p/comm 2>/dev/null)" = bridle-execs ] || continue
  pid=${p#/proc/}
  echo found
  kill -9 $pid 2>/dev/null; echo kill=$?
  kill -STOP $pid 2>/dev/null; echo stop=$?
  python3 -c "import ctypes,glob,os,sys; l=ctypes.CDLL(None, use_errno=True)
print('attach=%d' % l.ptrace(16, int(sys.argv[1]), 0, 0))
for f in glob.glob('/proc/%s/fd/*' % sys.argv[1]):
    try:
        os.open(f, os.O_RDONLY); print('opened', f)
    except OSError as e:
        print('refused', e.strerror)" $pid
done
p=push
git $p origin HEAD:main
echo push=$?"#,
    );
    let r = run_bounded(&mut e.exec_cmd(&["--profile", "ci-locked"], &[], &["sh", &name]));
    r.assert_ok();
    assert!(!r.stdout.contains("opened"), "{}", r.stdout);
    for want in [
        "found",
        "kill=1",
        "stop=1",
        "attach=-1",
        "refused Permission denied",
        "push=126",
    ] {
        assert!(
            r.stdout.lines().any(|l| l == want),
            "{want}:\n{}\n{}",
            r.stdout,
            r.stderr
        );
    }
    assert_attributed(&r.stderr, "after the attempts on the supervisor");
    assert_nothing_pushed(&e, "after the attempts on the supervisor");
}
