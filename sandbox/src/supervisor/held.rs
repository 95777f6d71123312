//! An exec held for a person's answer (at its notification or its exec event), asked without
//! holding the supervisor, and what becomes of it once answered.

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
        let then = &self.then;
        let waits = || match then {
            Then::Notification { notification, .. } => {
                listener.is_some_and(|l| sys::notify::id_valid(l, notification.id))
            }
            Then::ExecEvent { pid, .. } => still_stopped(*pid),
        };
        self.question.ask(&waits)
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

    /// Refuses `held` without asking: no thread of the supervisor would be left at the
    /// listener meanwhile (its threads all busy, or the process limit), and every other exec
    /// of the sandbox would wait unseen. The caller's exec fails with `EAGAIN`, reported.
    pub(super) fn cannot_ask(&mut self, held: Box<Held>) {
        let Held { mut question, then } = *held;
        question.record.answer = Some(
            "unavailable: the exec supervisor has no thread free to wait for an answer (the \
             process limit, or its 256 threads busy with other execs); try again"
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

/// Whether tracee `pid`, stopped at its exec event, has not exited (been killed) since.
fn still_stopped(pid: Pid) -> bool {
    use nix::sys::wait::{Id, WaitPidFlag, waitid};
    let flags = WaitPidFlag::WEXITED
        | WaitPidFlag::WNOHANG
        | WaitPidFlag::WNOWAIT
        | WaitPidFlag::__WALL
        | WaitPidFlag::__WNOTHREAD;
    matches!(waitid(Id::Pid(pid), flags), Ok(WaitStatus::StillAlive))
}
