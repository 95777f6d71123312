//! What the exec supervisor tells bridle, and how: one JSON line per message on a stream
//! socket (a socketpair bridle makes for each launch; the launcher has it at
//! [`crate::launcher::protocol::SUPERVISOR_FD`], the command never does).
//!
//! - supervisor → bridle: `{"decided": {"id": N, "record": RECORD}}` for every exec it denied,
//!   and every exec it asked about once answered; `{"ask": {"id": N, "record": RECORD}}` for an
//!   `ask` rule; `{"withdraw": {"id": N}}` when the process a question is about stopped waiting
//!   before an answer (killed meanwhile): bridle stops asking it;
//! - bridle → supervisor: `{"id": N, "approve": BOOL}` for each decision and question, once it
//!   has the message (for a decision) or the answer (for a question). The process stays
//!   stopped until then, so a record reaches bridle before anything the decision makes run or
//!   print, except while a question is open: the observer is then with the person, and a
//!   decision is answered at once and shown after the question. Answers come in any order: a
//!   question waits for a person, and the decisions and questions of other processes are
//!   answered meanwhile (the supervisor's threads are not held by one question).
//!
//! A supervisor whose channel is gone (bridle closed it, or died) gets no answer: every
//! question is then answered "no".

use bridle_policy::Decision;
use serde::{Deserialize, Serialize};

/// What the supervisor did with one exec.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ExecOutcome {
    /// Stopped before the kernel ran it: the caller's `execve` failed with `EACCES`.
    Refused,
    /// Found at the exec itself (the new program loaded, not one instruction run): the process
    /// was killed (SIGKILL). This is what a program sees whose exec was decided differently
    /// once its arguments were final (another thread rewrote them during the call), and every
    /// denial where the call cannot be stopped before (no seccomp filter: danger-full-access).
    Killed,
    /// A person approved it (an `ask` rule); it ran.
    Approved,
}

/// One process above the one that exec'd, as the supervisor saw it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExecAncestor {
    /// Its pid inside the sandbox.
    pub pid: i32,
    /// The command it runs (its last exec), shortened.
    pub command: String,
}

/// One decision the supervisor enforced.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExecRecord {
    /// The pid of the process inside the sandbox (its PID namespace).
    pub pid: i32,
    /// The file that runs (or would have): the path the exec named, resolved, before the
    /// exec; the executed file (`/proc/PID/exe`) at it.
    pub program: String,
    /// The arguments.
    pub argv: Vec<String>,
    /// The rules' decision.
    pub decision: Decision,
    /// The rule that decided, or that a part the supervisor could not see could match.
    pub rule: Option<String>,
    /// The rule engine's reason.
    pub reason: String,
    /// What the program is besides its own name (`git` for a renamed copy of git).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub same_as: Vec<String>,
    /// What the rule matched, where that is not the argv (`git push` for `git -c
    /// alias.p=push p`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seen_as: Option<String>,
    /// Its parent first, up to the sandbox's command.
    #[serde(default)]
    pub ancestry: Vec<ExecAncestor>,
    /// What happened.
    pub outcome: ExecOutcome,
    /// For an `ask`: who answered and how, when known (`rejected`, `unavailable`...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<String>,
}

impl ExecRecord {
    /// One line for a person: `rule deny-git-push denied exec of /usr/bin/git push origin
    /// main (pid 7)`, and what happened when that is more than a refused exec.
    pub fn message(&self) -> String {
        let args: Vec<&str> = self.argv.iter().skip(1).map(String::as_str).collect();
        let mut what = crate::supervisor::short(&if self.program.is_empty() {
            "a program it could not read".to_owned()
        } else if args.is_empty() {
            self.program.clone()
        } else {
            format!("{} {}", self.program, args.join(" "))
        });
        // The name it was called by, where the file's own does not say it (`exec -a git-push
        // git`, an exec of a descriptor), and what it is besides.
        let base = |p: &str| p.rsplit('/').next().unwrap_or(p).to_owned();
        let mut notes = Vec::new();
        if let Some(called) = self.argv.first()
            && base(called) != base(&self.program)
            && !self.same_as.contains(&base(called))
        {
            notes.push(format!("called as {}", crate::supervisor::short(called)));
        }
        if let Some(name) = self.same_as.first() {
            notes.push(format!("it is {name}"));
        }
        if let Some(view) = &self.seen_as {
            notes.push(format!("as {view}"));
        }
        if !notes.is_empty() {
            what.push_str(&format!(" ({})", notes.join(", ")));
        }
        let rule = self.rule.as_deref().unwrap_or("the policy");
        let head = match (self.decision, self.outcome) {
            (_, ExecOutcome::Approved) => {
                format!(
                    "exec of {what} (pid {}) approved ({})",
                    self.pid, self.reason
                )
            }
            (Decision::Ask, _) if self.rule.is_none() => format!(
                "exec of {what} (pid {}) needs approval ({}): {}; denied",
                self.pid,
                self.reason,
                self.answer.as_deref().unwrap_or("not approved")
            ),
            (Decision::Ask, _) => format!(
                "rule {rule} needs approval for exec of {what} (pid {}): {}; denied",
                self.pid,
                self.answer.as_deref().unwrap_or("not approved")
            ),
            _ if self.rule.is_none() => {
                format!("exec of {what} (pid {}) denied: {}", self.pid, self.reason)
            }
            _ => format!("rule {rule} denied exec of {what} (pid {})", self.pid),
        };
        match self.outcome {
            ExecOutcome::Killed => {
                format!("{head}; the process was killed at the exec, before it ran")
            }
            ExecOutcome::Refused | ExecOutcome::Approved => head,
        }
    }
}

/// A message from the supervisor. bridle answers each with an [`Answer`] of the same id: a
/// decision once it is delivered (the supervisor waits for that before the process goes on),
/// a question with the person's answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum ToBridle {
    Decided { id: u64, record: ExecRecord },
    Ask { id: u64, record: ExecRecord },
    Withdraw { id: u64 },
}

/// bridle's answer to a message (for a decision, `approve` is false and means nothing).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Answer {
    pub id: u64,
    pub approve: bool,
}

/// Receives what the exec supervisor of a run reports (see [`crate::Running::finish_observed`]).
pub trait ExecObserver {
    /// An exec was denied (or asked about and answered): tell the person, record it.
    fn decided(&mut self, record: &ExecRecord);

    /// Whether `record` (an exec an `ask` rule matched, held stopped meanwhile) may run. The
    /// answer is recorded through [`ExecObserver::decided`] afterwards. `withdrawn` turns true
    /// once the answer no longer matters (the run timed out or ended): an observer still
    /// asking should then stop and answer no.
    fn approve(&mut self, record: &ExecRecord, withdrawn: &dyn Fn() -> bool) -> bool;
}

/// The observer of runs nobody watches: decisions go to the log (`tracing`), questions are
/// answered "no" (nobody can be asked).
#[derive(Debug, Clone, Copy, Default)]
pub struct Unobserved;

impl ExecObserver for Unobserved {
    fn decided(&mut self, record: &ExecRecord) {
        tracing::warn!("{}", record.message());
    }

    fn approve(&mut self, _record: &ExecRecord, _withdrawn: &dyn Fn() -> bool) -> bool {
        false
    }
}

mod reading;

pub(crate) use reading::{FromSupervisor, GONE, Observing, observe, read_channel};

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    pub(in crate::supervisor) fn record(decision: Decision, outcome: ExecOutcome) -> ExecRecord {
        ExecRecord {
            pid: 7,
            program: "/usr/bin/git".into(),
            argv: vec!["git".into(), "push".into(), "origin".into(), "main".into()],
            decision,
            rule: Some("deny-git-push".into()),
            reason: "r".into(),
            same_as: Vec::new(),
            seen_as: None,
            ancestry: Vec::new(),
            outcome,
            answer: None,
        }
    }

    #[test]
    fn messages_name_the_rule_the_program_and_the_pid() {
        assert_eq!(
            record(Decision::Deny, ExecOutcome::Refused).message(),
            "rule deny-git-push denied exec of /usr/bin/git push origin main (pid 7)"
        );
        let mut renamed = record(Decision::Deny, ExecOutcome::Killed);
        renamed.program = "/tmp/x".into();
        renamed.same_as = vec!["git".into()];
        let text = renamed.message();
        assert!(
            text.starts_with("rule deny-git-push denied exec of /tmp/x push origin main (it is git) (pid 7); the process was killed"),
            "{text}"
        );
        // Called by a name that is not the file's (a sixth red-team pass: the record read as a
        // denial of `git origin ...`).
        let mut dashed = record(Decision::Deny, ExecOutcome::Refused);
        dashed.argv = vec!["./git-push".into(), "origin".into()];
        assert_eq!(
            dashed.message(),
            "rule deny-git-push denied exec of /usr/bin/git origin (called as ./git-push) (pid 7)"
        );
        dashed.program = "/proc/5/fd/3".into();
        dashed.argv[0] = "git".into();
        assert!(
            dashed
                .message()
                .contains("/proc/5/fd/3 origin (called as git) (pid 7)")
        );
        // What the rule saw, where the argv does not say it.
        let mut aliased = record(Decision::Deny, ExecOutcome::Refused);
        aliased.argv = vec!["git".into(), "-c".into(), "alias.p=push".into(), "p".into()];
        aliased.seen_as = Some("git push".into());
        assert_eq!(
            aliased.message(),
            "rule deny-git-push denied exec of /usr/bin/git -c alias.p=push p (as git push) (pid 7)"
        );
        let mut asked = record(Decision::Ask, ExecOutcome::Refused);
        asked.answer = Some("unavailable".into());
        assert!(
            asked.message().contains("needs approval"),
            "{}",
            asked.message()
        );
    }

    #[test]
    fn a_kill_no_rule_decided_says_why() {
        let mut unreadable = record(Decision::Deny, ExecOutcome::Killed);
        unreadable.rule = None;
        unreadable.program = String::new();
        unreadable.argv = Vec::new();
        unreadable.reason = "the exec supervisor could not read what runs: eperm".into();
        assert_eq!(
            unreadable.message(),
            "exec of a program it could not read (pid 7) denied: the exec supervisor could not \
             read what runs: eperm; the process was killed at the exec, before it ran"
        );
    }

    #[test]
    fn messages_round_trip_on_the_wire() {
        let m = ToBridle::Ask {
            id: 3,
            record: record(Decision::Ask, ExecOutcome::Refused),
        };
        let text = serde_json::to_string(&m).unwrap();
        assert_eq!(serde_json::from_str::<ToBridle>(&text).unwrap(), m);
    }
}
