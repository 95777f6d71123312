//! PID 1 of the sandbox's PID namespace (or the launcher as a subreaper without one): it
//! reaps, watches the exec supervisor's process and stops the sandbox when it dies (under
//! whole-tree tracing, hands the tracees' stops to the supervisor in this process), and stops
//! what is left when the command exits.

use bridle_policy::Guarantee;
use nix::sys::signal::{SigSet, Signal, kill};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::{Pid, getpid};

use super::asking::Asking;
use super::protocol::{LaunchConfig, STATUS_FD};
use super::wait::wait_for_signals;
use crate::supervisor::Supervisor;
use crate::{mounts, sys};

use super::child::{Fail, fail};
use super::command::fork_command;

/// PID 1 of the sandbox's PID namespace.
pub(super) fn init(
    config: &LaunchConfig,
    program: Option<&seccompiler::BpfProgram>,
    launcher_alive: std::os::fd::OwnedFd,
    mut supervisor: Option<&mut Supervisor>,
) -> Result<i32, Fail> {
    nix::sys::prctl::set_pdeathsig(Signal::SIGKILL)
        .map_err(|e| fail(Guarantee::Tree, format!("init parent-death signal: {e}")))?;
    // The launcher may have died before the parent-death signal was armed: then the pipe is
    // already at end-of-file.
    nix::fcntl::fcntl(
        &launcher_alive,
        nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::O_NONBLOCK),
    )
    .map_err(|e| fail(Guarantee::Tree, format!("liveness pipe: {e}")))?;
    let mut probe = [0u8; 1];
    if matches!(nix::unistd::read(&launcher_alive, &mut probe), Ok(0)) {
        return Err(fail(
            Guarantee::Tree,
            "the launcher exited before init started",
        ));
    }
    drop(launcher_alive);
    mounts::mount_proc().map_err(|e| fail(e.guarantee, e.cause))?;
    let (child, execs) = fork_command(config, program, supervisor.as_deref_mut())?;
    sys::close_raw_fd(STATUS_FD);
    if execs.is_some() {
        supervisor = None;
    }
    if config.mechanisms.mount_view {
        mounts::watch_protected(
            config.mounts.protected.clone(),
            config.mounts.must_stay_absent.clone(),
        );
    }
    Ok(supervise(child, false, supervisor, execs))
}

/// Waits for `command`; on SIGTERM/SIGHUP kills the tree; on SIGUSR1 asks the command to
/// terminate (SIGTERM), passing the request down through init. Returns the exit code to pass up:
/// the command's own, or 128+N when it died of signal N. With `subreaper`, kills every
/// remaining descendant before returning. With an exec `supervisor` tracing the whole tree, the
/// stops of its tracees are handed to it, in one loop with the signals (a question it asks is
/// asked on a thread of its own, [`Asking`], and its answer taken back here). `execs`: the exec
/// supervisor's own process (under seccomp user notification), whose end while the command
/// runs stops the sandbox.
pub(super) fn supervise(
    command: Pid,
    subreaper: bool,
    mut supervisor: Option<&mut Supervisor>,
    execs: Option<Pid>,
) -> i32 {
    // Traced tasks include threads, which only `__WALL` reports.
    let flags = if supervisor.is_some() {
        WaitPidFlag::WNOHANG | WaitPidFlag::__WALL
    } else {
        WaitPidFlag::WNOHANG
    };
    let mut waited = SigSet::empty();
    for s in [
        Signal::SIGCHLD,
        Signal::SIGTERM,
        Signal::SIGHUP,
        Signal::SIGUSR1,
    ] {
        waited.add(s);
    }
    let signals =
        match SignalFd::with_flags(&waited, SfdFlags::SFD_NONBLOCK | SfdFlags::SFD_CLOEXEC) {
            Ok(fd) => fd,
            Err(e) => {
                // Fail closed: without it nothing here can wait for the command or answer its execs.
                return stop_sandbox(
                    command,
                    subreaper,
                    &format!(
                        "the sandbox cannot wait for its command (signalfd: {e}); it was stopped"
                    ),
                    125,
                );
            }
        };
    if supervisor.is_some() {
        // A hint only: without it stops are handled as well, a little later.
        let _ = sys::sched::set_fair_slice(crate::supervisor::SUPERVISOR_SLICE_NS);
    }
    // Under whole-tree tracing a question is asked on a thread of its own, so that the tree's
    // other stops and the signals are not held while a person answers (without an eventfd to
    // be woken by, none is asked: refused, reported).
    let mut asking = supervisor.as_ref().and_then(|_| Asking::new().ok());
    let mut result: Option<i32> = None;
    // Every change a wait reports (an exit, a tracee's stop) raises SIGCHLD first (orphans
    // reparented here exit with SIGCHLD too), so the loop waits only after one.
    let mut reap = true;
    loop {
        // Reap everything that has exited; remember the command's status.
        while reap {
            let status = waitpid(None::<Pid>, Some(flags));
            if let (Some(s), Ok(WaitStatus::Exited(pid, _) | WaitStatus::Signaled(pid, _, _))) =
                (supervisor.as_deref_mut(), &status)
            {
                s.forget(*pid);
                if let Some(asking) = asking.as_mut() {
                    asking.reaped(*pid);
                }
            }
            match status {
                Ok(WaitStatus::Exited(pid, code)) if pid == command => result = Some(code),
                Ok(WaitStatus::Signaled(pid, sig, _)) if pid == command => {
                    result = Some(128 + sig as i32)
                }
                Ok(gone @ (WaitStatus::Exited(pid, _) | WaitStatus::Signaled(pid, _, _)))
                    if Some(pid) == execs && result.is_none() =>
                {
                    // No exec can run now (the listener is gone), and whatever waits at one
                    // would wait for ever: stop the sandbox, saying why.
                    let how = match gone {
                        WaitStatus::Signaled(_, sig, _) => format!("was killed by {sig}"),
                        _ => "ended".to_owned(),
                    };
                    return stop_sandbox(
                        command,
                        subreaper,
                        &format!("the exec supervisor {how}; the sandbox was stopped"),
                        // The command ran, and was killed: 128 + SIGKILL, as for any command
                        // killed by a signal.
                        128 + Signal::SIGKILL as i32,
                    );
                }
                Ok(WaitStatus::StillAlive) | Err(_) => reap = false,
                Ok(
                    stopped @ (WaitStatus::Stopped(..)
                    | WaitStatus::PtraceEvent(..)
                    | WaitStatus::PtraceSyscall(_)),
                ) => {
                    if let Some(s) = supervisor.as_deref_mut()
                        && let Some(question) = s.on_tree_stop(stopped)
                    {
                        match asking.as_mut() {
                            Some(asking) => asking.start(s, question),
                            None => s.tree_cannot_ask(question),
                        }
                    }
                }
                Ok(_) => {}
            }
        }
        // After the reaping: an answer about a process that died meanwhile finds it reaped.
        if let (Some(s), Some(asking)) = (supervisor.as_deref_mut(), asking.as_mut()) {
            asking.finish(s);
        }
        if let Some(code) = result {
            if subreaper {
                kill_descendants();
            }
            return code;
        }
        for signal in wait_for_signals(&signals, asking.as_ref().map(Asking::woken)) {
            match signal {
                Signal::SIGCHLD => reap = true,
                Signal::SIGUSR1 => {
                    // Graceful cancel: the launcher passes it on to init, which (like a
                    // subreaper launcher) asks the command to terminate; a SIGTERM to the
                    // launcher follows if it does not.
                    let forward = if subreaper || getpid().as_raw() == 1 {
                        Signal::SIGTERM
                    } else {
                        Signal::SIGUSR1
                    };
                    let _ = kill(command, forward);
                }
                Signal::SIGTERM | Signal::SIGHUP => {
                    let _ = kill(command, Signal::SIGKILL);
                    if subreaper {
                        // This also reaps the command (its status is not seen by the loop
                        // above any more), so return now: waiting for it again would wait
                        // forever, and the launcher would outlive the tree it was told to end.
                        kill_descendants();
                        return 128 + Signal::SIGKILL as i32;
                    } else if getpid().as_raw() == 1 {
                        // Returning from init kills the whole namespace.
                        return 128 + Signal::SIGKILL as i32;
                    }
                }
                _ => {}
            }
        }
    }
}

/// Says `why` on stderr (the command's), kills the command (and, as a subreaper, every
/// descendant) and gives `code` back.
fn stop_sandbox(command: Pid, subreaper: bool, why: &str, code: i32) -> i32 {
    let _ = sys::write_all_raw(2, format!("bridle: {why}\n").as_bytes());
    let _ = kill(command, Signal::SIGKILL);
    if subreaper {
        kill_descendants();
    }
    code
}

/// Kills and reaps every descendant (orphans are reparented to us, the subreaper, so they
/// show up as direct children on the next scan).
pub(crate) fn kill_descendants() {
    for _ in 0..10_000 {
        let children = direct_children();
        if children.is_empty() {
            return;
        }
        for pid in &children {
            let _ = kill(*pid, Signal::SIGKILL);
        }
        for pid in children {
            let _ = waitpid(pid, None);
        }
    }
}

/// Our direct children, from `/proc/self/task/*/children`, or by scanning `/proc/*/stat` for
/// our pid as parent when the kernel lacks that file.
fn direct_children() -> Vec<Pid> {
    let me = getpid();
    let mut out = Vec::new();
    let mut have_children_file = false;
    if let Ok(tasks) = std::fs::read_dir("/proc/self/task") {
        for task in tasks.flatten() {
            if let Ok(text) = std::fs::read_to_string(task.path().join("children")) {
                have_children_file = true;
                out.extend(
                    text.split_whitespace()
                        .filter_map(|p| p.parse().ok())
                        .map(Pid::from_raw),
                );
            }
        }
    }
    if have_children_file {
        return out;
    }
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return out;
    };
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<i32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // The parent pid is the second field after the parenthesised command name.
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse::<i32>().ok());
        if ppid == Some(me.as_raw()) {
            out.push(Pid::from_raw(pid));
        }
    }
    out
}
