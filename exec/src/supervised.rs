//! What the exec supervisor of a tool call's command reports, on the bridle side: each
//! denial goes to the session log (through the approvals seam's observer) and into the tool
//! result; each exec an `ask` rule matched goes to the approvals seam, like a call's own
//! question (headless: unavailable, so denied).

use bridle_sandbox::{ExecObserver, ExecRecord};

use crate::approvals::{ApprovalOutcome, ApprovalRequest, Approvals};

/// The observer of one tool call's command.
pub struct CallExecs<'a> {
    approvals: &'a Approvals<'a>,
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
            records: Vec::new(),
        }
    }

    /// The lines the tool result adds for what was reported (empty when nothing was).
    pub fn note(&self) -> String {
        result_note(&self.records)
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

    fn approve(&mut self, record: &ExecRecord) -> bool {
        let request = ApprovalRequest {
            tool: "exec".into(),
            arguments: serde_json::json!({
                "program": record.program,
                "argv": record.argv,
                "pid": record.pid,
            }),
            reason: record.reason.clone(),
            justification: None,
            escalation: None,
        };
        self.approvals.ask(&request) == ApprovalOutcome::AllowedOnce
    }
}
