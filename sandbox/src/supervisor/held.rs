//! An exec held for a person's answer (at its notification or its exec event), asked without
//! holding the supervisor, and what becomes of it once answered.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use nix::sys::wait::WaitStatus;
use nix::unistd::Pid;

use super::reporting::{Asked, Question};
use super::{ExecOutcome, Supervisor, Traced};
use crate::sys;

/// An exec held for a person's answer, and what becomes of it once answered.
#[derive(Debug)]
pub(super) struct Held {
    pub(super) question: Question,
    pub(super) then: Then,
}

#[derive(Debug)]
pub(super) enum Then {
    /// Waiting at its notification: on to its exec event if approved, refused otherwise.
    Notification {
        notification: sys::notify::Notification,
        seen: Box<Traced>,
        /// For [`Supervisor::last_refused`].
        again: (i32, Vec<String>),
    },
    /// Stopped at its exec event: let go if approved, killed otherwise.
    ExecEvent { pid: Pid, tree: bool },
}

impl Held {
    /// Asks (without the supervisor: see [`Question`]) while the process still waits: at its
    /// notification, while that is valid (`listener`, the filter's listener); at its exec
    /// event, until it exits (killed meanwhile).
    pub(super) fn ask(&mut self, listener: Option<std::os::fd::BorrowedFd<'_>>) -> Asked {
        self.ask_while(listener, &|| true)
    }

    /// [`Held::ask`], withdrawn also once `alive` says the process is gone.
    fn ask_while(
        &mut self,
        listener: Option<std::os::fd::BorrowedFd<'_>>,
        alive: &dyn Fn() -> bool,
    ) -> Asked {
        let then = &self.then;
        let waits = || {
            alive()
                && match then {
                    Then::Notification { notification, .. } => {
                        listener.is_some_and(|l| sys::notify::id_valid(l, notification.id))
                    }
                    Then::ExecEvent { pid, .. } => still_stopped(*pid),
                }
        };
        self.question.ask(&waits)
    }

    /// The process held.
    fn pid(&self) -> Pid {
        match &self.then {
            Then::Notification { notification, .. } => Pid::from_raw(notification.tid),
            Then::ExecEvent { pid, .. } => *pid,
        }
    }
}

/// A question at an exec event while the launcher traces the whole tree (no seccomp filter),
/// asked on a thread of its own while the tracing thread goes on with the tree's other stops
/// and signals, then handed back to that thread: only the tracer may let the process go.
#[derive(Debug)]
pub(crate) struct TreeQuestion {
    held: Box<Held>,
    asked: Asked,
    /// Set by the tracing thread once it has reaped the process: the question is withdrawn,
    /// and its answer lets nothing go (the pid may be another process's by then).
    reaped: Arc<AtomicBool>,
}

impl TreeQuestion {
    /// The process held (stopped at its exec event until answered).
    pub(crate) fn pid(&self) -> Pid {
        self.held.pid()
    }

    /// What the tracing thread sets once it has reaped the process.
    pub(crate) fn reaped(&self) -> Arc<AtomicBool> {
        self.reaped.clone()
    }

    /// Asks, until answered or the process is gone.
    pub(crate) fn ask(&mut self) {
        let reaped = self.reaped.clone();
        self.asked = self
            .held
            .ask_while(None, &|| !reaped.load(Ordering::SeqCst));
    }
}

impl Supervisor {
    /// Reports what was answered about `held` and lets it go on, refuses or kills it. True
    /// when this thread seized the caller (at a notification: see [`Supervisor::answer`]).
    pub(super) fn answered(&mut self, held: Box<Held>, asked: Asked, spare: bool) -> bool {
        let Held { question, then } = *held;
        match then {
            Then::Notification {
                notification,
                seen,
                again,
            } => match asked {
                // Approved: for the caller that asked, still waiting (its tid may belong to
                // another task by now).
                Asked::Yes if self.valid(&notification) => {
                    self.report_answered(question, true, ExecOutcome::Refused);
                    self.let_exec(&notification, *seen, spare)
                }
                Asked::Yes => {
                    self.report_approved_too_late(question);
                    false
                }
                Asked::No => {
                    self.report_answered(question, false, ExecOutcome::Refused);
                    self.last_refused = Some(again);
                    self.respond(
                        &notification,
                        sys::notify::Response::Fail(nix::libc::EACCES),
                    );
                    false
                }
                // Nothing waits for an answer; an exec made again (after a signal) is a new
                // question, not a repeated refusal.
                Asked::Withdrawn => {
                    self.report_answered(question, false, ExecOutcome::Refused);
                    false
                }
            },
            Then::ExecEvent { pid, tree } => {
                let yes = asked == Asked::Yes;
                self.report_answered(question, yes, ExecOutcome::Killed);
                self.let_go(pid, yes, tree);
                false
            }
        }
    }

    /// Handles one stop of the whole tree's tracing and lets it go on (or kills it); an exec
    /// event that needs a person's answer is handed back, to ask on another thread
    /// ([`TreeQuestion::ask`], then [`Supervisor::tree_answered`], on this thread).
    pub(crate) fn on_tree_stop(&mut self, status: WaitStatus) -> Option<TreeQuestion> {
        Some(TreeQuestion {
            held: self.on_stop(status)?,
            // Until asked: a question nobody asked is not approved.
            asked: Asked::No,
            reaped: Arc::default(),
        })
    }

    /// Reports what was answered about `question` and lets its process go on or kills it
    /// (only once approved and still there).
    pub(crate) fn tree_answered(&mut self, question: TreeQuestion) {
        let TreeQuestion {
            held,
            asked,
            reaped,
        } = question;
        let reaped = reaped.load(Ordering::SeqCst);
        if !reaped && asked != Asked::Withdrawn {
            self.answered(held, asked, false);
            return;
        }
        let Held { question, then } = *held;
        if asked == Asked::Yes {
            self.report_approved_too_late(question);
        } else {
            // Killed by someone else, not for this answer: refused, as the exec never ran.
            self.report_answered(question, false, ExecOutcome::Refused);
        }
        // Withdrawn while still there (it cannot be, having exited): killed, never let go.
        if !reaped && let Then::ExecEvent { pid, tree } = then {
            self.let_go(pid, false, tree);
        }
    }

    /// Refuses `question` without asking (see [`Supervisor::cannot_ask`]): no thread can ask it.
    pub(crate) fn tree_cannot_ask(&mut self, question: TreeQuestion) {
        self.cannot_ask(question.held);
    }

    /// Refuses `held` without asking: no thread of the supervisor would be left at the
    /// listener meanwhile (its threads all busy, or the process limit), and every other exec
    /// of the sandbox would wait unseen. The caller's exec fails with `EAGAIN`, reported.
    pub(super) fn cannot_ask(&mut self, held: Box<Held>) {
        let Held { mut question, then } = *held;
        question.record.answer = Some(
            "unavailable: the exec supervisor has no thread free to wait for an answer (the \
             process limit, or too many execs or questions at once); try again"
                .into(),
        );
        match then {
            Then::Notification { notification, .. } => {
                self.report_answered(question, false, ExecOutcome::Refused);
                self.respond(
                    &notification,
                    sys::notify::Response::Fail(nix::libc::EAGAIN),
                );
            }
            Then::ExecEvent { pid, tree } => {
                self.report_answered(question, false, ExecOutcome::Killed);
                self.let_go(pid, false, tree);
            }
        }
    }
}

/// Whether tracee `pid`, stopped at its exec event, has not exited (been killed) since. From
/// any thread of the tracer's process (no `__WNOTHREAD`): a question of the whole tree's
/// tracing is asked on a thread of its own.
fn still_stopped(pid: Pid) -> bool {
    use nix::sys::wait::{Id, WaitPidFlag, waitid};
    let flags =
        WaitPidFlag::WEXITED | WaitPidFlag::WNOHANG | WaitPidFlag::WNOWAIT | WaitPidFlag::__WALL;
    matches!(waitid(Id::Pid(pid), flags), Ok(WaitStatus::StillAlive))
}
