//! Reporting decisions to bridle and asking it (over the channel, or on stderr without one),
//! with the processes above the one that made the exec.

use std::io::{BufRead, Write};
use std::os::fd::AsFd;

use bridle_policy::rules::ExecFacts;
use bridle_policy::{DecidedBy, Verdict};
use nix::unistd::Pid;

use super::record::{Answer, ToBridle};
use super::tracee::{self, ExecRead};
use super::{Channel, ExecAncestor, ExecOutcome, ExecRecord, Supervisor, short};
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
        let rule = match &verdict.by {
            DecidedBy::Rule { id, .. } => Some(id.clone()),
            _ => None,
        };
        ExecRecord {
            pid: pid.as_raw(),
            program: read.program(pid).display().to_string(),
            argv: read.argv.clone(),
            decision: verdict.decision,
            rule,
            reason: verdict.reason.clone(),
            same_as: facts.same_as.clone(),
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
        let Some(channel) = &mut self.channel else {
            let line = format!("bridle: {}\n", record.message());
            let _ = sys::write_all_raw(2, line.as_bytes());
            return;
        };
        if channel
            .exchange(|id| ToBridle::Decided { id, record })
            .is_none()
        {
            self.channel = None;
        }
    }

    /// Asks about `record` and reports it with the answer: `Approved`, or `no` as its outcome.
    /// Whether the person approved.
    pub(super) fn ask_and_report(&mut self, mut record: ExecRecord, no: ExecOutcome) -> bool {
        let yes = self.ask(&mut record);
        record.outcome = if yes { ExecOutcome::Approved } else { no };
        self.report(record);
        yes
    }

    /// Asks bridle whether `record` may run; the process stays stopped meanwhile. No channel,
    /// a channel that closes, or a request to stop the sandbox: no.
    pub(super) fn ask(&mut self, record: &mut ExecRecord) -> bool {
        let Some(channel) = &mut self.channel else {
            record.answer = Some("unavailable: nobody can be asked".into());
            return false;
        };
        let question = record.clone();
        match channel.exchange(|id| ToBridle::Ask {
            id,
            record: question,
        }) {
            Some(yes) => {
                record.answer = Some(if yes { "approved" } else { "not approved" }.into());
                yes
            }
            None => {
                record.answer = Some(if sys::ptrace::termination_pending() {
                    "cancelled: the sandbox is being stopped".into()
                } else {
                    "unavailable: bridle does not answer".into()
                });
                false
            }
        }
    }
}

impl Channel {
    /// Sends the message `make` builds with a fresh id and waits for bridle's answer to it:
    /// `Some(approve)`; `None` when the channel is gone or the sandbox is being stopped.
    pub(super) fn exchange(&mut self, make: impl FnOnce(u64) -> ToBridle) -> Option<bool> {
        self.next_id += 1;
        let id = self.next_id;
        let mut text = serde_json::to_string(&make(id)).unwrap_or_default();
        text.push('\n');
        self.writer.write_all(text.as_bytes()).ok()?;
        loop {
            if sys::ptrace::termination_pending() {
                return None;
            }
            if self.reader.buffer().is_empty() {
                let fd = self.reader.get_ref().as_fd();
                let mut poll = [nix::poll::PollFd::new(fd, nix::poll::PollFlags::POLLIN)];
                match nix::poll::poll(&mut poll, nix::poll::PollTimeout::from(100u16)) {
                    Ok(0) | Err(nix::errno::Errno::EINTR) => continue,
                    Ok(_) => {}
                    Err(_) => return None,
                }
            }
            let mut line = String::new();
            match self.reader.read_line(&mut line) {
                Ok(0) | Err(_) => return None,
                Ok(_) => {
                    if let Ok(answer) = serde_json::from_str::<Answer>(&line)
                        && answer.id == id
                    {
                        return Some(answer.approve);
                    }
                }
            }
        }
    }
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
