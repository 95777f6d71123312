//! A launched command while it runs: its pipes, the launcher's status as the run starts, the
//! exec supervisor's reports, and how the run ends ([`Running`], [`Finished`]).

use std::io::{BufRead, BufReader};
use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, mpsc};
use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::sys::wait::{WaitStatus, waitpid};
use nix::unistd::Pid;

use super::protocol::{ReadyReport, StatusLine};
use super::termination::Controller;
use super::{ExecFailure, Outcome, Refusal, refusal};
use crate::mounts::{self, Inspection, Inspector};
use crate::sys;

/// Pipes to the command, when the launch asked for them.
#[derive(Debug, Default)]
pub(super) struct ChildIo {
    pub(super) stdin: Option<std::process::ChildStdin>,
    pub(super) stdout: Option<std::process::ChildStdout>,
    pub(super) stderr: Option<std::process::ChildStderr>,
}

#[derive(Debug)]
pub(super) enum StatusEnd {
    Refused(Refusal),
    ExecFailed(ExecFailure),
}

/// Reads the launcher's status until the pipe closes (the command's exec succeeded, or the
/// launcher ended); `on_ready` is told of the ready report as soon as it is read.
pub(super) fn read_status(
    fd: OwnedFd,
    mut on_ready: impl FnMut(&ReadyReport),
) -> Result<ReadyReport, StatusEnd> {
    let mut ready = None;
    let mut outcome = None;
    let reader = BufReader::new(std::fs::File::from(fd));
    for line in reader.lines() {
        let Ok(line) = line else { break };
        match StatusLine::parse(&line) {
            Some(StatusLine::Ready(report)) => {
                on_ready(&report);
                ready = Some(report);
            }
            Some(StatusLine::Fail { guarantee, cause }) => {
                outcome.get_or_insert(StatusEnd::Refused(refusal(guarantee, cause)));
            }
            Some(StatusLine::ExecFailed { code, cause }) => {
                outcome.get_or_insert(StatusEnd::ExecFailed(ExecFailure {
                    code,
                    cause,
                    denied: Vec::new(),
                }));
            }
            None => {
                outcome.get_or_insert(StatusEnd::Refused(refusal(
                    None,
                    format!("malformed launcher status `{line}`"),
                )));
            }
        }
    }
    match (outcome, ready) {
        (Some(end), _) => Err(end),
        (None, Some(ready)) => Ok(ready),
        (None, None) => Err(StatusEnd::Refused(refusal(
            None,
            "the launcher exited without reporting",
        ))),
    }
}

/// A confined command that is running.
#[derive(Debug)]
pub struct Running {
    pub(super) pid: Pid,
    pub(super) io: ChildIo,
    pub(super) ready: Option<ReadyReport>,
    /// Removed when the run is over (dropped after the wait).
    pub(super) pids_group: Option<crate::cgroup::PidsGroup>,
    /// Swept when the run is over (see [`mounts::sweep_planted`]).
    pub(super) must_stay_absent: Vec<PathBuf>,
    /// The sandbox's network counters, when the network is off or an allow-list (see
    /// [`Running::take_net_watch`]).
    pub(super) net_watch: Option<crate::net_watch::NetWatch>,
    /// Run when the run is over (see [`mounts::inspect`]).
    pub(super) inspector: Option<Box<Inspector>>,
    /// What the exec supervisor reports, and (in [`Running::finish_observed`]) the launcher's
    /// end.
    pub(super) events: Option<mpsc::Receiver<Wake>>,
    pub(super) events_tx: mpsc::Sender<Wake>,
    /// Reads the exec supervisor's channel, when the spec has command rules.
    pub(super) reader: Option<std::thread::JoinHandle<()>>,
}

/// What a run's exec supervisor reports, taken out of the run for a thread of its own (see
/// [`Running::take_exec_events`]).
#[derive(Debug)]
pub struct ExecEvents {
    events: mpsc::Receiver<Wake>,
}

impl ExecEvents {
    /// Hands every report to `observer` until the run is over and its supervisor gone.
    pub fn run(self, observer: &mut dyn crate::supervisor::ExecObserver) {
        while let Ok(wake) = self.events.recv() {
            if let Wake::Exec(message) = wake {
                crate::supervisor::record::observe(message, observer, &|| false);
            }
        }
    }
}

/// What the thread waiting for a run wakes up for.
#[derive(Debug)]
pub(super) enum Wake {
    /// The launcher was reaped.
    Exited(nix::Result<WaitStatus>),
    /// The exec supervisor reported something.
    Exec(crate::supervisor::record::FromSupervisor),
    /// The launcher's status while the run starts (ignored once it is running).
    Status(StatusWake),
    /// Look again (a thread observing in the background is asked to stop).
    Nudge,
}

/// The launcher's status, read on its own thread while the supervisor may already report.
#[derive(Debug)]
pub(super) enum StatusWake {
    /// The command is about to exec.
    Ready(ReadyReport),
    /// The status pipe closed: how the start ended.
    Ended(Result<ReadyReport, StatusEnd>),
}

/// How a supervised run's start ended.
pub(super) enum Startup {
    /// The status pipe closed.
    Ended(Result<ReadyReport, StatusEnd>),
    /// The command's own exec waits for a person's answer, which only the observer of the
    /// running command can give: the run is handed over running, the question first.
    Asking(ReadyReport),
}

impl Running {
    /// Waits for the launcher's status of a supervised run. The status pipe closes only once
    /// the command's exec went through, and the supervisor decides that exec first: a question
    /// about it would wait forever for an observer that exists only after the start.
    pub(super) fn await_status(&mut self, status_read: OwnedFd) -> Startup {
        let tx = self.events_tx.clone();
        std::thread::spawn(move || {
            let ready = |report: &ReadyReport| {
                let _ = tx.send(Wake::Status(StatusWake::Ready(report.clone())));
            };
            let ended = read_status(status_read, ready);
            let _ = tx.send(Wake::Status(StatusWake::Ended(ended)));
        });
        let Some(events) = &self.events else {
            return Startup::Ended(Err(StatusEnd::Refused(refusal(None, "no event channel"))));
        };
        let mut ready = None;
        // The command's pid once its ready report is in (it execs right after writing it).
        let mut command = None;
        let mut held = Vec::new();
        // The supervisor's denials of the command's own exec: released at once (the exec
        // fails when the supervisor has its answer; nothing else runs meanwhile), and handed
        // over with the failure they cause.
        let mut denied = Vec::new();
        let startup = loop {
            if let Some(pid) = command {
                held.retain_mut(|m| match m {
                    crate::supervisor::record::FromSupervisor::Decided(record, delivered)
                        if record.pid == pid =>
                    {
                        let _ = delivered.send(true);
                        denied.push(record.clone());
                        false
                    }
                    _ => true,
                });
            }
            match events.recv() {
                // A question may come before the status line saying the command started (the
                // command's own first exec asks): then it is handed over as soon as that line is
                // in, or nobody would ever show the question.
                Ok(Wake::Status(StatusWake::Ready(report))) => {
                    command = Some(report.command_pid_inside);
                    let asked = held
                        .iter()
                        .any(|m| matches!(m, crate::supervisor::record::FromSupervisor::Ask(..)));
                    if asked {
                        break Startup::Asking(report);
                    }
                    ready = Some(report);
                }
                Ok(Wake::Status(StatusWake::Ended(Err(StatusEnd::ExecFailed(mut failure))))) => {
                    if let Some(first) = denied.first() {
                        failure.cause = first.message();
                    }
                    failure.denied = std::mem::take(&mut denied);
                    break Startup::Ended(Err(StatusEnd::ExecFailed(failure)));
                }
                Ok(Wake::Status(StatusWake::Ended(ended))) => break Startup::Ended(ended),
                Ok(Wake::Exec(ask @ crate::supervisor::record::FromSupervisor::Ask(..))) => {
                    held.push(ask);
                    if let Some(report) = ready.take() {
                        break Startup::Asking(report);
                    }
                }
                Ok(Wake::Exec(decided)) => held.push(decided),
                Ok(Wake::Exited(_) | Wake::Nudge) => {}
                Err(_) => {
                    break Startup::Ended(Err(StatusEnd::Refused(refusal(
                        None,
                        "the launcher's status was lost",
                    ))));
                }
            }
        };
        // What came during the start goes to the observer first (nothing else can come
        // meanwhile for the process that waits for its answer); a denial of an exec the
        // command made again after its first (`exec` in a shell) too, released already.
        for record in denied {
            let (delivered, _) = mpsc::channel();
            held.push(crate::supervisor::record::FromSupervisor::Decided(
                record, delivered,
            ));
        }
        for message in held {
            let _ = self.events_tx.send(Wake::Exec(message));
        }
        startup
    }
}

/// How a run ended, and what bridle found in the writable roots afterwards.
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use]
pub struct Finished {
    /// How the command ended.
    pub outcome: Outcome,
    /// What the command left in repositories that git on the host would run, now moved aside
    /// (report every [`Inspection::messages`] line to the user).
    pub inspection: Inspection,
}

impl Running {
    /// What the launcher reported it enforced.
    pub fn report(&self) -> Option<&ReadyReport> {
        self.ready.as_ref()
    }

    /// Whether an exec supervisor decides this run's execs (its spec has command rules).
    pub fn is_supervised(&self) -> bool {
        self.reader.is_some()
    }

    /// The launcher's pid (signal it with SIGTERM to kill the whole tree).
    pub fn launcher_pid(&self) -> u32 {
        u32::try_from(self.pid.as_raw()).unwrap_or(0)
    }

    /// The command's stdin, when [`Launch::command`](super::Launch::command) had `Stdio::piped()` for it.
    pub fn take_stdin(&mut self) -> Option<std::process::ChildStdin> {
        self.io.stdin.take()
    }

    /// The command's stdout, when piped.
    pub fn take_stdout(&mut self) -> Option<std::process::ChildStdout> {
        self.io.stdout.take()
    }

    /// The command's stderr, when piped.
    pub fn take_stderr(&mut self) -> Option<std::process::ChildStderr> {
        self.io.stderr.take()
    }

    /// The sandbox's count of attempts to reach the network directly, when the network is off
    /// or an allow-list and the sandbox has its own network namespace. It stays readable after
    /// [`Running::wait`].
    pub fn take_net_watch(&mut self) -> Option<crate::net_watch::NetWatch> {
        self.net_watch.take()
    }

    /// A handle that can signal this run from another thread, even after [`Running::wait`]
    /// took it (through a pidfd: never a recycled pid).
    pub fn controller(&self) -> Result<Controller, Refusal> {
        let fd = sys::pidfd_open(self.pid.as_raw())
            .map_err(|e| refusal(None, format!("pidfd_open: {e}")))?;
        Ok(Controller {
            pidfd: std::sync::Arc::new(fd),
        })
    }

    /// Asks the command to terminate (SIGTERM to the command, delivered through the launcher);
    /// follow with [`Running::kill_tree`] after a grace period.
    pub fn terminate_gracefully(&self) {
        let _ = kill(self.pid, Signal::SIGUSR1);
    }

    /// Kills the whole process tree now.
    pub fn kill_tree(&self) {
        let _ = kill(self.pid, Signal::SIGTERM);
    }

    /// Makes SIGTERM and SIGHUP to the calling process kill this run's tree instead of the
    /// process, so that [`Running::wait`] still returns and sweeps (for a process that runs one
    /// sandbox at a time, such as `bridle exec`). One that came while it was held
    /// ([`hold_termination`](super::hold_termination)) kills the tree now.
    pub fn forward_termination(&self) {
        let _ = sys::forward_termination(self.pid.as_raw());
    }

    /// Hands what the exec supervisor reported to `observer` (denials; questions, which it
    /// answers), waiting up to `wait` for the first report. For callers that keep a run going
    /// between their own steps (the terminal); [`Running::finish_observed`] does this until the
    /// run ends.
    pub fn pump_exec_events(
        &self,
        observer: &mut dyn crate::supervisor::ExecObserver,
        wait: Duration,
    ) {
        let Some(events) = &self.events else { return };
        let mut next = events.recv_timeout(wait);
        while let Ok(wake) = next {
            match wake {
                Wake::Exec(message) => {
                    crate::supervisor::record::observe(message, observer, &|| false);
                }
                // Not sent before `finish_observed` starts its waiter; the status is over.
                Wake::Exited(_) | Wake::Status(_) | Wake::Nudge => {}
            }
            next = events
                .try_recv()
                .map_err(|_| mpsc::RecvTimeoutError::Timeout);
        }
    }

    /// Takes what the exec supervisor reports out of this run, for a thread that handles it
    /// while this one does something else until the run ends (then [`Running::finish`] waits
    /// for the launcher only). `None` when taken already.
    pub fn take_exec_events(&mut self) -> Option<ExecEvents> {
        self.events.take().map(|events| ExecEvents { events })
    }

    /// Like [`Running::finish`], for callers that do not report the inspection themselves: its
    /// findings go to the log as warnings.
    pub fn wait(self, timeout: Option<Duration>) -> Outcome {
        let finished = self.finish(timeout);
        for line in finished.inspection.messages() {
            tracing::warn!("{line}");
        }
        finished.outcome
    }

    /// Waits for the command (and so its whole tree) to end, killing the tree when `timeout`
    /// passes. When this returns, no process of the tree is left, nothing the run must not
    /// leave behind is there ([`Outcome::Stopped`] says what was moved aside), and what the
    /// command left in repositories that would run code on the host has been moved aside
    /// ([`Finished::inspection`] says what).
    pub fn finish(self, timeout: Option<Duration>) -> Finished {
        self.finish_observed(timeout, &mut crate::supervisor::Unobserved)
    }

    /// Like [`Running::finish`]; meanwhile, what the exec supervisor reports goes to
    /// `observer` (on this thread): each denial, and each `ask`, which waits for its answer.
    pub fn finish_observed(
        self,
        timeout: Option<Duration>,
        observer: &mut dyn crate::supervisor::ExecObserver,
    ) -> Finished {
        let Running {
            pid,
            pids_group,
            must_stay_absent,
            inspector,
            events,
            events_tx,
            reader,
            ..
        } = self;
        // With the reports taken elsewhere, the launcher's end comes on a channel of its own.
        let (tx, rx, reader) = match events {
            Some(rx) => (events_tx, rx, reader),
            None => {
                drop(events_tx);
                let (tx, rx) = mpsc::channel();
                (tx, rx, None)
            }
        };
        // Set once the run is over for its questions: the launcher is gone or the timeout
        // passed. A question still open then is withdrawn (its answer would come too late).
        let over = Arc::new(AtomicBool::new(false));
        // Whether the launcher has ended; the timer signals it only while it has not (under
        // this lock, so never a reaped pid that may have been reused).
        let ended = Arc::new(std::sync::Mutex::new(false));
        let waiter = {
            let (over, ended) = (over.clone(), ended.clone());
            std::thread::spawn(move || {
                // Once the launcher is dead but before it is reaped (its pid cannot be reused
                // yet), signals to this process stop being passed on to that pid.
                while let Err(nix::errno::Errno::EINTR) = nix::sys::wait::waitid(
                    nix::sys::wait::Id::Pid(pid),
                    nix::sys::wait::WaitPidFlag::WEXITED | nix::sys::wait::WaitPidFlag::WNOWAIT,
                ) {}
                let mut ended = ended
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                *ended = true;
                over.store(true, Ordering::SeqCst);
                sys::stop_forwarding_to(pid.as_raw());
                let status = loop {
                    match waitpid(pid, None) {
                        Err(nix::errno::Errno::EINTR) => continue,
                        other => break other,
                    }
                };
                drop(ended);
                let _ = tx.send(Wake::Exited(status));
            })
        };
        // The timeout is kept on a thread of its own: this one may be waiting for a person's
        // answer to a question when it passes.
        let timed_out = Arc::new(AtomicBool::new(false));
        let (stop_timer, timer_stopped) = mpsc::channel::<()>();
        let timer = timeout.map(|timeout| {
            let (over, timed_out, ended) = (over.clone(), timed_out.clone(), ended.clone());
            std::thread::spawn(move || {
                if let Err(mpsc::RecvTimeoutError::Timeout) = timer_stopped.recv_timeout(timeout) {
                    let ended = ended
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner);
                    if !*ended {
                        timed_out.store(true, Ordering::SeqCst);
                        over.store(true, Ordering::SeqCst);
                        let _ = kill(pid, Signal::SIGTERM);
                    }
                }
            })
        });
        let withdrawn = || over.load(Ordering::SeqCst);
        let mut observing = crate::supervisor::record::Observing::new(observer);
        let status = loop {
            match rx.recv() {
                Ok(Wake::Exited(status)) => break Some(status),
                Ok(Wake::Exec(message)) => observing.pass(message, &withdrawn),
                Ok(Wake::Status(_) | Wake::Nudge) => {}
                Err(_) => break None,
            }
        };
        drop(stop_timer);
        if let Some(timer) = timer {
            let _ = timer.join();
        }
        let timed_out = timed_out.load(Ordering::SeqCst);
        let outcome = match (status, timed_out) {
            (_, true) => Some(Outcome::TimedOut),
            (Some(status), false) => Some(exit_outcome(status)),
            (None, false) => None,
        };
        let _ = waiter.join();
        // The channel closes once the sandbox is gone: what it still reported is passed on;
        // a question about a process that no longer exists is answered no.
        if let Some(reader) = reader {
            loop {
                match rx.recv_timeout(Duration::from_millis(10)) {
                    Ok(Wake::Exec(message)) => observing.pass(message, &|| true),
                    Ok(Wake::Exited(_) | Wake::Status(_) | Wake::Nudge) => {}
                    Err(_) if reader.is_finished() => break,
                    Err(_) => {}
                }
            }
            let _ = reader.join();
            while let Ok(wake) = rx.try_recv() {
                if let Wake::Exec(message) = wake {
                    observing.pass(message, &|| true);
                }
            }
        }
        observing.settle(if timed_out {
            "the run timed out"
        } else {
            "the run ended"
        });
        drop(pids_group);
        let moved = mounts::sweep_planted(&must_stay_absent);
        let inspection = inspector.map(|i| i.finish()).unwrap_or_default();
        let outcome = match moved.first() {
            Some((path, to)) => Outcome::Stopped(mounts::planted_message(path, to.as_deref())),
            None => outcome.unwrap_or(Outcome::Exited(125)),
        };
        Finished {
            outcome,
            inspection,
        }
    }
}

fn exit_outcome(status: nix::Result<WaitStatus>) -> Outcome {
    match status {
        Ok(WaitStatus::Exited(_, code)) => Outcome::Exited(code),
        Ok(WaitStatus::Signaled(_, sig, _)) => Outcome::Exited(128 + sig as i32),
        _ => Outcome::Exited(125),
    }
}
