//! Reporting decisions to bridle and asking it (over the channel, or on stderr without one),
//! with the processes above the one that made the exec.

use std::sync::Arc;

use bridle_policy::rules::ExecFacts;
use bridle_policy::{DecidedBy, Verdict};
use nix::unistd::Pid;

use super::channel::{Channel, Exchanged};
use super::record::ToBridle;
use super::tracee::{self, ExecRead};
use super::{ExecAncestor, ExecOutcome, ExecRecord, Supervisor, short};
use crate::sys;

impl Supervisor {
    /// The record of a decision (its outcome is set by the caller).
    pub(super) fn record(
        &self,
        pid: Pid,
        read: &ExecRead,
        facts: &ExecFacts,
        verdict: &Verdict,
    ) -> ExecRecord {
        // What the supervisor cannot see (the file the dynamic loader opens) could be any of
        // several rules' programs: the reason names them all, and no one rule decided.
        let (rule, seen_as) = match &verdict.by {
            DecidedBy::Rule { id, seen_as, .. } => (Some(id.clone()), seen_as.clone()),
            _ => (None, None),
        };
        ExecRecord {
            pid: pid.as_raw(),
            // `/w/./gg` as `/w/gg` (`.` steps only: `..` could cross a symlink).
            program: read
                .program(pid)
                .components()
                .collect::<std::path::PathBuf>()
                .display()
                .to_string(),
            argv: read.argv.clone(),
            decision: verdict.decision,
            rule,
            reason: verdict.reason.clone(),
            same_as: facts.same_as.clone(),
            seen_as,
            ancestry: self.ancestry(pid.as_raw()),
            outcome: ExecOutcome::Refused,
            answer: None,
        }
    }

    /// The parents of `pid`, nearest first, up to the supervisor (exclusive): their pids from
    /// `/proc/PID/status` and commands from `/proc/PID/cmdline`, as they are now.
    pub(super) fn ancestry(&self, pid: i32) -> Vec<ExecAncestor> {
        let mut out = Vec::new();
        let mut at = parent_of(pid);
        while let Some(parent) = at {
            if parent <= 0
                || parent == self.root
                || out.len() >= 64
                || out.iter().any(|a: &ExecAncestor| a.pid == parent)
            {
                break;
            }
            let command = tracee::cmdline(Pid::from_raw(parent))
                .map(|argv| short(&argv.join(" ")))
                .unwrap_or_default();
            out.push(ExecAncestor {
                pid: parent,
                command,
            });
            at = parent_of(parent);
        }
        out
    }

    /// Sends `record` to bridle and waits until bridle has it (so that it is reported before
    /// anything the decision makes the process, or its parent, print), or, with no channel,
    /// writes it on this process's stderr (the command's).
    pub(super) fn report(&mut self, record: ExecRecord) {
        let Some(channel) = &self.channel else {
            let line = format!("bridle: {}\n", record.message());
            let _ = sys::write_all_raw(2, line.as_bytes());
            return;
        };
        if channel.exchange(|id| ToBridle::Decided { id, record }, &|| true) == Exchanged::Closed {
            self.channel = None;
        }
    }

    /// The question about `record`, to ask without holding the supervisor (see [`Question`]).
    pub(super) fn question(&self, record: ExecRecord) -> Question {
        Question {
            record,
            channel: self.channel.clone(),
        }
    }

    /// Reports a question's record with its answer: `Approved`, or `no` as its outcome.
    pub(super) fn report_answered(&mut self, mut question: Question, yes: bool, no: ExecOutcome) {
        question.record.outcome = if yes { ExecOutcome::Approved } else { no };
        self.report(question.record);
    }

    /// Reports a question that was approved once its process no longer waited: nothing ran.
    pub(super) fn report_approved_too_late(&mut self, mut question: Question) {
        question.record.outcome = ExecOutcome::Refused;
        question.record.answer =
            Some("approved after the process stopped waiting: nothing ran".into());
        self.report(question.record);
    }
}

/// An exec that waits for a person's answer (held at its notification or its exec event).
/// It is asked without the supervisor's lock: the other execs of the sandbox go on meanwhile.
#[derive(Debug)]
pub(super) struct Question {
    pub(super) record: ExecRecord,
    channel: Option<Arc<Channel>>,
}

impl Question {
    /// Asks bridle whether the exec may run, while `waits` says the process still waits for
    /// the answer (it may be killed meanwhile: the question is then withdrawn). No channel, a
    /// channel that closes, or a request to stop the sandbox: no. The answer is kept in the
    /// record.
    pub(super) fn ask(&mut self, waits: &dyn Fn() -> bool) -> Asked {
        let Some(channel) = &self.channel else {
            self.record.answer = Some("unavailable: nobody can be asked".into());
            return Asked::No;
        };
        let record = self.record.clone();
        let (asked, answer) = match channel.exchange(|id| ToBridle::Ask { id, record }, waits) {
            Exchanged::Answered(true) => (Asked::Yes, "approved"),
            Exchanged::Answered(false) => (Asked::No, "not approved"),
            Exchanged::Withdrawn => (Asked::Withdrawn, super::record::GONE),
            Exchanged::Closed if sys::ptrace::termination_pending() => {
                (Asked::No, "cancelled: the sandbox is being stopped")
            }
            Exchanged::Closed => (Asked::No, "unavailable: bridle does not answer"),
        };
        self.record.answer = Some(answer.into());
        asked
    }
}

/// What came of a [`Question`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Asked {
    /// Approved.
    Yes,
    /// Not approved, or nobody could answer.
    No,
    /// The process stopped waiting before an answer: it was not asked to the end.
    Withdrawn,
}

/// The parent of `pid` (`PPid` of `/proc/PID/status`).
pub(crate) fn parent_of(pid: i32) -> Option<i32> {
    status_number(pid, "PPid")
}

/// The number a `field` of `/proc/PID/status` holds (`PPid`, `TracerPid`, ...).
pub(super) fn status_number(pid: i32, field: &str) -> Option<i32> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))?
        .trim()
        .parse()
        .ok()
}
