//! What the exec supervisor of a tool call's command reports, on the bridle side: each
//! denial goes to the session log (through the approvals seam's observer) and into the tool
//! result; each exec an `ask` rule matched goes to the approvals seam, like a call's own
//! question (headless: unavailable, so denied).

use bridle_policy::Decision;
use bridle_sandbox::{ExecObserver, ExecRecord};
use serde::{Deserialize, Serialize};

use crate::approvals::{ApprovalOutcome, ApprovalRequest, Approvals};

/// What the exec supervisor decided about one exec, as plain data: the pipeline's note of it
/// and the session log's `exec/decision` event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExecDecision {
    /// The process, by its pid inside the sandbox.
    pub pid: i32,
    /// The file that runs (or would have).
    pub program: String,
    /// Its arguments.
    pub argv: Vec<String>,
    /// What the rules decided.
    pub decision: Decision,
    /// The rule that decided.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    /// The rule engine's reason.
    pub reason: String,
    /// `refused` (the exec failed with `EACCES`), `killed` (at the exec, before the program
    /// ran) or `approved`.
    pub outcome: String,
    /// What the program is besides its own name (`git` for a renamed copy of git).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub same_as: Vec<String>,
    /// The processes above it, nearest first (`PID COMMAND`), up to the call's command.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ancestry: Vec<String>,
    /// For an exec that was asked about: the answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<String>,
    /// The line a person reads (`rule deny-git-push denied exec of ... (pid 7)`).
    pub message: String,
    /// The exec happened while no call was running (a process the persistent terminal's shell
    /// left running): it is reported with the next call, or when the session ends, and is
    /// not that call's doing.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub between_calls: bool,
}

impl From<&ExecRecord> for ExecDecision {
    fn from(record: &ExecRecord) -> ExecDecision {
        ExecDecision {
            pid: record.pid,
            program: record.program.clone(),
            argv: record.argv.clone(),
            decision: record.decision,
            rule: record.rule.clone(),
            reason: record.reason.clone(),
            outcome: serde_json::to_value(record.outcome)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default(),
            same_as: record.same_as.clone(),
            ancestry: record
                .ancestry
                .iter()
                .map(|a| format!("{} {}", a.pid, a.command))
                .collect(),
            answer: record.answer.clone(),
            message: record.message(),
            between_calls: false,
        }
    }
}

impl ExecDecision {
    /// The decision about an exec made while no call was running (see
    /// [`ExecDecision::between_calls`](ExecDecision#structfield.between_calls)).
    pub fn between_calls(record: &ExecRecord) -> ExecDecision {
        ExecDecision {
            between_calls: true,
            ..ExecDecision::from(record)
        }
    }
}

/// The observer of one tool call's command.
pub struct CallExecs<'a> {
    approvals: &'a Approvals<'a>,
    /// Exact command lines a person already approved: not asked about again.
    approved: Vec<Vec<String>>,
    /// The execs asked about so far (pid, argv): the supervisor asks again about one only when
    /// the file it runs is not the one first asked about (a path swapped meanwhile), and that
    /// question goes to the person whatever was approved.
    asked: Vec<(i32, Vec<String>)>,
    /// What was reported, in order.
    pub records: Vec<ExecRecord>,
}

impl std::fmt::Debug for CallExecs<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallExecs")
            .field("records", &self.records.len())
            .finish_non_exhaustive()
    }
}

impl<'a> CallExecs<'a> {
    /// Reports to `approvals` (and its observer).
    pub fn new(approvals: &'a Approvals<'a>) -> CallExecs<'a> {
        CallExecs {
            approvals,
            approved: Vec::new(),
            asked: Vec::new(),
            records: Vec::new(),
        }
    }

    /// Does not ask again about an exec of exactly one of `approved` (what the person already
    /// approved for the call), or of a command one of them runs through wrappers and scripts
    /// ([`bridle_policy::rules::runs_of`]: `env git push` runs `git push`); any other exec an
    /// `ask` rule matches is still asked about.
    pub fn approving(mut self, approved: &[Vec<String>]) -> CallExecs<'a> {
        for argv in approved {
            self.approve_runs_of(argv);
        }
        self
    }

    fn approve_runs_of(&mut self, argv: &[String]) {
        for run in bridle_policy::rules::runs_of(argv) {
            if !self.approved.contains(&run) {
                self.approved.push(run);
            }
        }
    }

    /// Whether a question this observer answered still waits for the supervisor's record of
    /// what came of it (it comes right after the answer).
    pub fn awaiting_decision(&self) -> bool {
        self.asked.iter().any(|(pid, argv)| {
            !self
                .records
                .iter()
                .any(|r| r.pid == *pid && r.argv == *argv && r.decision == Decision::Ask)
        })
    }

    /// The lines the tool result adds for what was reported (empty when nothing was).
    pub fn note(&self) -> String {
        result_note(&self.records)
    }
}

/// The question about the exec `record` is of, for `reason`.
pub fn exec_question(record: &ExecRecord, reason: String) -> ApprovalRequest {
    ApprovalRequest {
        tool: "exec".into(),
        arguments: serde_json::json!({
            "program": record.program,
            "argv": record.argv,
            "pid": record.pid,
        }),
        reason,
        justification: None,
        escalation: None,
        call_id: None,
    }
}

/// One `[bridle: ...]` line per record, each on its own line.
pub fn result_note(records: &[ExecRecord]) -> String {
    records
        .iter()
        .map(|r| format!("\n[bridle: {}]", r.message()))
        .collect()
}

impl ExecObserver for CallExecs<'_> {
    fn decided(&mut self, record: &ExecRecord) {
        // The process was already stopped or killed: a record the log cannot keep still
        // reaches the model.
        if let Err(e) = self.approvals.exec_decided(record) {
            tracing::warn!("the session log could not record an exec decision: {e}");
        }
        self.records.push(record.clone());
    }

    fn approve(&mut self, record: &ExecRecord, withdrawn: &dyn Fn() -> bool) -> bool {
        let key = (record.pid, record.argv.clone());
        let swapped = self.asked.contains(&key);
        if !swapped {
            self.asked.push(key);
            if self.approved.contains(&record.argv) {
                return true;
            }
        }
        let request = exec_question(record, record.reason.clone());
        let yes = self.approvals.ask_unless(&request, withdrawn) == ApprovalOutcome::AllowedOnce;
        // What the approved program runs through its wrappers (`env git push`) is approved
        // with it: its own exec is not asked about again. Wrappers are known by the file that
        // ran, not by the `argv[0]` its caller chose (git run as `env` wraps nothing).
        if yes {
            if !self.approved.contains(&record.argv) {
                self.approved.push(record.argv.clone());
            }
            if let Some((_, args)) = record.argv.split_first()
                && !record.program.is_empty()
            {
                let ran: Vec<String> = std::iter::once(record.program.clone())
                    .chain(args.iter().cloned())
                    .collect();
                self.approve_runs_of(&ran);
            }
        }
        yes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::approvals::NoAnswerer;
    use bridle_policy::ApprovalPolicy;
    use bridle_sandbox::ExecOutcome;

    #[test]
    fn a_question_answered_awaits_its_record_until_the_supervisor_sends_it() {
        let approvals = Approvals::new(ApprovalPolicy::Ask, Box::new(NoAnswerer));
        let mut execs = CallExecs::new(&approvals);
        let mut record = ExecRecord {
            pid: 7,
            program: "/usr/bin/git".into(),
            argv: vec!["git".into(), "push".into()],
            decision: Decision::Ask,
            rule: Some("ask-git-push".into()),
            reason: "r".into(),
            same_as: Vec::new(),
            seen_as: None,
            ancestry: Vec::new(),
            outcome: ExecOutcome::Refused,
            answer: None,
        };
        assert!(!execs.awaiting_decision());
        assert!(!execs.approve(&record, &|| false));
        assert!(execs.awaiting_decision());
        record.answer = Some("not approved".into());
        execs.decided(&record);
        assert!(!execs.awaiting_decision());
    }
}
