//! The supervisor's side of seccomp user notification: an exec waiting for its answer (see the
//! module docs of [`super`]). Denials are decided here, early; what is allowed is let on to its
//! exec event, where [`Supervisor::after_exec`](super::Supervisor) decides; a try of a `PATH`
//! search that names nothing may be answered here with the kernel's own error
//! ([`super::settled`]).

use std::os::fd::AsFd;

use bridle_policy::rules::ExecFacts;
use bridle_policy::{DecidedBy, Decision, Verdict};
use nix::sys::ptrace::{self, Options};
use nix::unistd::Pid;

use super::tracee::{FixedProgram, Pending};
use super::{
    Approved, ExecRead, Held, Mode, Stage, Supervisor, Then, Traced, open_program, program_file,
    tracee,
};
use crate::sys::notify::{self as unotify, Notification, Response};

/// What becomes of an exec waiting at its notification.
enum Answer {
    /// On to its exec event, with what it found there.
    Proceed(Box<Traced>),
    /// It fails with `EACCES`.
    Refuse,
    /// It fails with this error, the one the kernel would fail it with (it names nothing).
    Fail(i32),
    /// The caller no longer waits: nothing to answer.
    Gone,
    /// A person is to be asked first (without holding the supervisor).
    Ask(Box<Held>),
}

/// Where an exec at its notification is after [`Supervisor::answer`].
pub(super) enum Step {
    /// Answered: true when this thread seized the caller.
    Done(bool),
    /// Held for a person's answer: ask it ([`Held::ask`]), then [`Supervisor::answered`].
    Ask(Box<Held>),
}

/// What a notification found, for its exec event: what a person `approved`, the `facts`
/// with their `verdict` unless they are opaque, and the program where its path names it for
/// good (see [`Traced`]).
fn seen(
    approved: Option<Approved>,
    facts: ExecFacts,
    verdict: Verdict,
    fixed: Option<FixedProgram>,
) -> Box<Traced> {
    Box::new(Traced {
        approved,
        decided: facts.opaque.is_none().then_some((facts, verdict)),
        fixed,
    })
}

impl Supervisor {
    /// Answers `notification`, or hands it back held when a person must be asked first.
    /// Answered, true when this thread seized the caller for it: its exec event (or exit) is
    /// then this thread's to wait for ([`super::pool`]). `spare`: another thread will be at
    /// the listener meanwhile; without one, an exec that needs seizing fails with `EAGAIN`
    /// (reported) rather than wait.
    pub(super) fn answer(&mut self, notification: &Notification, spare: bool) -> Step {
        // The pool refuses the filter's other calls (`ptrace`) before they get here; anything
        // that is not an exec is refused here too, never let on.
        if !is_exec(notification.nr) {
            self.respond(notification, Response::Fail(nix::libc::EPERM));
            return Step::Done(false);
        }
        Step::Done(match self.at_notification(notification) {
            Answer::Proceed(seen) => self.let_exec(notification, *seen, spare),
            Answer::Refuse => {
                self.respond(notification, Response::Fail(nix::libc::EACCES));
                false
            }
            Answer::Fail(errno) => {
                self.respond(notification, Response::Fail(errno));
                false
            }
            Answer::Gone => false,
            Answer::Ask(held) => return Step::Ask(held),
        })
    }

    pub(super) fn valid(&self, notification: &Notification) -> bool {
        match &self.mode {
            Mode::Notify(listener) => unotify::id_valid(listener.as_fd(), notification.id),
            Mode::NoListener | Mode::Tree => false,
        }
    }

    /// Answers `notification`; a caller gone meanwhile needs nothing (a signal interrupted its
    /// exec, which it makes again, or it died).
    pub(super) fn respond(&self, notification: &Notification, response: Response) {
        if let Mode::Notify(listener) = &self.mode {
            let _ = unotify::respond(listener.as_fd(), notification.id, response);
        }
    }

    /// The check at the notification: advisory (see the module docs).
    fn at_notification(&mut self, notification: &Notification) -> Answer {
        let pid = Pid::from_raw(notification.tid);
        let execveat = i64::from(notification.nr) == nix::libc::SYS_execveat;
        let pending = tracee::before_exec(
            pid,
            execveat,
            notification.args,
            &mut self.scratch,
            program_file,
        );
        let (read, file) = match pending {
            Ok(Pending::Exec(read, file)) => (read, file),
            // A try of a `PATH` search, answered with the kernel's own error: the call then
            // never reads the caller's memory, so nothing about it needs checking.
            Ok(Pending::NoFile(missing))
                if !missing.relative
                    && let Some(errno) =
                        self.settler.as_mut().and_then(|s| s.failure(&missing.path)) =>
            {
                return Answer::Fail(errno);
            }
            // What cannot be read here is decided at the exec event, if the exec happens. A
            // file that is not there is not run either (the kernel fails the exec), or is
            // decided at the exec event. (Not answered here with the error the supervisor's
            // `stat` saw: the path is resolved in this process, where `/proc/self/fd/N`,
            // `/dev/fd/N` or a symlink to them name other files than in the caller.)
            Ok(Pending::NoFile(_)) | Err(_) => return Answer::Proceed(Box::default()),
        };
        let facts = self.facts(
            pid,
            &read,
            &file,
            || open_program(&read.path),
            &[],
            Stage::Before,
        );
        let verdict = self.decide(pid, &read, &facts);
        if verdict.decision == Decision::Allow {
            // Whether `read` was of the caller does not matter here: `let_exec`'s `CONTINUE`
            // only succeeds while the caller still waits, and allows nothing by itself.
            let fixed = self.fixed_program(&read, &file);
            return Answer::Proceed(seen(None, facts, verdict, fixed));
        }
        // A refusal or a question is reported: what was read is of the caller only while it
        // still waits (its tid not recycled).
        if !self.valid(notification) {
            return Answer::Gone;
        }
        let again = (pid.as_raw(), read.argv.clone());
        let approved_now = Approved::of(&read.argv, &file);
        let approved_before = self
            .traced
            .get(&pid.as_raw())
            .and_then(|t| t.approved.as_ref());
        match verdict.decision {
            Decision::Allow => {
                let fixed = self.fixed_program(&read, &file);
                Answer::Proceed(seen(None, facts, verdict, fixed))
            }
            // Approved already, and the exec made again (a signal interrupted it).
            Decision::Ask if approved_before == Some(&approved_now) => {
                let fixed = self.fixed_program(&read, &file);
                Answer::Proceed(seen(Some(approved_now), facts, verdict, fixed))
            }
            // A shell searching `PATH` tries the same exec in every directory: decided once.
            _ if self.last_refused.as_ref() == Some(&again) => Answer::Refuse,
            Decision::Deny => {
                let record = self.record(pid, &read, &facts, &verdict);
                self.report(record);
                self.last_refused = Some(again);
                Answer::Refuse
            }
            Decision::Ask => {
                let record = self.record(pid, &read, &facts, &verdict);
                let fixed = self.fixed_program(&read, &file);
                Answer::Ask(Box::new(Held {
                    question: self.question(record),
                    then: Then::Notification {
                        notification: *notification,
                        seen: seen(Some(approved_now), facts, verdict, fixed),
                        again,
                    },
                }))
            }
        }
    }

    /// The program `read` names, where its path names it for good (only for an exec that goes
    /// on: a refused one needs no exec event).
    fn fixed_program(&mut self, read: &ExecRead, file: &std::fs::Metadata) -> Option<FixedProgram> {
        let interpreter = self.settler.as_mut()?.fixed_program(&read.path, file)?;
        Some(FixedProgram {
            path: read.path.clone(),
            file: file.clone(),
            interpreter,
        })
    }

    /// Lets an exec go on to its exec event: seizes the caller (unless it is already), checks
    /// the notification is still its, and continues the call. A caller that cannot be seized
    /// gets `EPERM`, reported: it must not exec unchecked. True when this thread seized the
    /// caller now (`spare`: see [`Supervisor::answer`]).
    ///
    /// Nothing follows the answer: the caller usually runs its exec at once, on this CPU,
    /// and stops at its exec event before this thread runs again, so whatever this thread did
    /// next (such as looking up `/proc/PID/exe` early, to spare the exec event the making of
    /// a new pid's `/proc` entries) would hold the stopped program longer, not shorter
    /// (`bench/RESULTS.md`, fifteenth pass).
    pub(super) fn let_exec(
        &mut self,
        notification: &Notification,
        seen: Traced,
        spare: bool,
    ) -> bool {
        let tid = notification.tid;
        let pid = Pid::from_raw(tid);
        // An entry counts only while the thread is still traced from here: a thread that took
        // over its leader's id in an exec and was killed before its exec event leaves its
        // former tid behind, which a new task may get.
        let seized = !(self.traced.contains_key(&tid) && traced_from_here(tid));
        if seized {
            self.traced.remove(&tid);
            let options = Options::PTRACE_O_TRACEEXEC | Options::PTRACE_O_EXITKILL;
            let attached = if spare {
                ptrace::seize(pid, options)
            } else {
                Err(nix::errno::Errno::EAGAIN)
            };
            if let Err(e) = attached {
                if self.valid(notification) {
                    let (errno, why) = if spare {
                        (
                            nix::libc::EPERM,
                            format!("could not trace the process to check its exec (ptrace: {e})"),
                        )
                    } else {
                        (
                            nix::libc::EAGAIN,
                            "has no thread free to follow the exec (the process limit, or its 256 threads busy with other execs); try again".to_owned(),
                        )
                    };
                    self.report_unseizable(pid, &why);
                    self.respond(notification, Response::Fail(errno));
                }
                return false;
            }
        }
        // What this notification found replaces what an earlier one of the thread found
        // (an `execvp` trying `PATH`), except an approval, which a repeated exec keeps.
        let entry = self.traced.entry(tid).or_default();
        if seen.approved.is_some() {
            entry.approved = seen.approved;
        }
        entry.decided = seen.decided;
        entry.fixed = seen.fixed;
        // `CONTINUE` succeeds only while the caller still waits, and a waiting caller keeps
        // its tid: so if it succeeds, the thread seized is the caller, with no
        // `SECCOMP_IOCTL_NOTIF_ID_VALID` first (one syscall less at every exec). If it fails,
        // the caller went away before or after the seize, and whatever now has its tid stays
        // seized: its stops are passed on and any exec of it is decided at its exec event, as
        // every exec is.
        self.respond(notification, Response::Continue);
        seized
    }

    /// Reports an exec refused because the supervisor cannot follow it: `why` what it could
    /// not do.
    fn report_unseizable(&mut self, pid: Pid, why: &str) {
        let verdict = Verdict {
            decision: Decision::Deny,
            by: DecidedBy::Default,
            reason: format!("the exec supervisor {why}"),
        };
        let read = ExecRead::default();
        let record = self.record(pid, &read, &ExecFacts::default(), &verdict);
        self.report(record);
    }
}

/// Whether the filter's notification of syscall `nr` is of an exec (`execve`, `execveat`): only
/// those may ever be let on (`CONTINUE`); every other call the filter sends (`ptrace`) is
/// refused.
pub(super) fn is_exec(nr: i32) -> bool {
    let nr = i64::from(nr);
    nr == nix::libc::SYS_execve || nr == nix::libc::SYS_execveat
}

/// Whether thread `tid` is traced by a thread of this process (`TracerPid` in its status,
/// a task of ours). The thread waits at its notification, so this cannot change meanwhile.
fn traced_from_here(tid: i32) -> bool {
    super::status_number(tid, "TracerPid").is_some_and(|tracer| {
        tracer > 0 && std::path::Path::new(&format!("/proc/self/task/{tracer}")).exists()
    })
}

#[cfg(test)]
mod tests {
    use super::is_exec;

    #[test]
    fn only_execve_and_execveat_are_execs() {
        let nr = |n: i64| i32::try_from(n).unwrap();
        assert!(is_exec(nr(nix::libc::SYS_execve)));
        assert!(is_exec(nr(nix::libc::SYS_execveat)));
        for other in [
            nix::libc::SYS_ptrace,
            nix::libc::SYS_execve + 1,
            nix::libc::SYS_execve - 1,
            nix::libc::SYS_execveat + 1,
            0,
            -1,
        ] {
            assert!(!is_exec(nr(other)), "{other}");
        }
    }
}
