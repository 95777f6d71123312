//! What the persistent terminal's exec supervisor reports while no call reads the terminal: a
//! process a call left running (in the background, or in the foreground past the call's wait)
//! goes on execing between calls. Each denial is reported when it happens and kept for the
//! next call (or the end of the session), marked as not that call's doing. A question waits,
//! its process held in its exec, for the next call, which asks it; when the terminal is
//! closed first, it is answered no ([`CLOSED_UNASKED`]). The network proxy's decisions for
//! those processes are kept by the proxy as they come, and taken apart the same way.

use bridle_policy::Decision;
use bridle_sandbox::{ExecObserver, ExecOutcome, ExecRecord};

/// The answer of a question the terminal's closing left unasked.
pub const CLOSED_UNASKED: &str = "withdrawn: the terminal was closed before anyone was asked";

/// Records kept between two calls; past it only their number is (a background loop of denied
/// execs must not fill memory, the next result and the log).
const KEPT: usize = 1000;

/// The observer between calls: keeps the records (the first [`KEPT`], then counts).
#[derive(Debug, Default)]
pub struct BetweenCalls {
    records: Vec<ExecRecord>,
    not_kept: u64,
}

impl BetweenCalls {
    /// What was reported since the observer started, in order, and how many more records
    /// were not kept.
    pub fn into_records(self) -> (Vec<ExecRecord>, u64) {
        (self.records, self.not_kept)
    }
}

impl ExecObserver for BetweenCalls {
    fn decided(&mut self, record: &ExecRecord) {
        if self.records.len() < KEPT {
            self.records.push(record.clone());
        } else {
            if self.not_kept == 0 {
                tracing::warn!(
                    "more than {KEPT} exec decisions between two terminal calls: only their number is kept"
                );
            }
            self.not_kept += 1;
        }
    }

    /// Not reached: the thread between calls keeps questions for the next call. Should one
    /// come, the answer is no.
    fn approve(&mut self, _record: &ExecRecord, _withdrawn: &dyn Fn() -> bool) -> bool {
        false
    }
}

/// The observer while a terminal is closed: keeps every record, answers every question no,
/// saying why in the record.
#[derive(Debug, Default)]
pub struct Closing {
    records: Vec<ExecRecord>,
    /// The execs answered no (pid, argv).
    refused: Vec<(i32, Vec<String>)>,
}

impl Closing {
    /// What was reported, in order.
    pub fn into_records(self) -> Vec<ExecRecord> {
        self.records
    }
}

impl ExecObserver for Closing {
    fn decided(&mut self, record: &ExecRecord) {
        let mut record = record.clone();
        let key = (record.pid, record.argv.clone());
        if record.decision == Decision::Ask
            && record.outcome != ExecOutcome::Approved
            && let Some(at) = self.refused.iter().position(|k| *k == key)
        {
            self.refused.swap_remove(at);
            record.answer = Some(CLOSED_UNASKED.to_owned());
        }
        self.records.push(record);
    }

    fn approve(&mut self, record: &ExecRecord, _withdrawn: &dyn Fn() -> bool) -> bool {
        self.refused.push((record.pid, record.argv.clone()));
        false
    }
}

/// `decisions` marked as made between calls.
pub fn network(decisions: Vec<crate::net::NetDecision>) -> Vec<crate::net::NetDecision> {
    decisions
        .into_iter()
        .map(|d| crate::net::NetDecision {
            between_calls: true,
            ..d
        })
        .collect()
}

/// The lines the tool result adds for the execs decided between calls.
pub fn note(records: &[ExecRecord], not_kept: u64) -> String {
    let mut out: String = records
        .iter()
        .map(|r| format!("\n[bridle: between calls: {}]", r.message()))
        .collect();
    if not_kept > 0 {
        out.push_str(&format!(
            "\n[bridle: between calls: {not_kept} more exec decisions, not kept]"
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(decision: Decision, outcome: ExecOutcome) -> ExecRecord {
        ExecRecord {
            pid: 7,
            program: "/usr/bin/git".into(),
            argv: vec!["git".into(), "push".into()],
            decision,
            rule: Some("ask-push".into()),
            reason: "rule ask-push".into(),
            same_as: Vec::new(),
            ancestry: Vec::new(),
            outcome,
            answer: Some("not approved".into()),
        }
    }

    #[test]
    fn a_question_at_close_is_answered_no_and_its_record_says_nobody_was_asked() {
        let mut observer = Closing::default();
        let asked = record(Decision::Ask, ExecOutcome::Refused);
        assert!(!observer.approve(&asked, &|| false));
        observer.decided(&asked);
        let records = observer.into_records();
        assert_eq!(records[0].answer.as_deref(), Some(CLOSED_UNASKED));
    }

    #[test]
    fn a_question_answered_earlier_keeps_its_answer_when_its_record_comes_at_close() {
        let mut observer = Closing::default();
        observer.decided(&record(Decision::Ask, ExecOutcome::Refused));
        let records = observer.into_records();
        assert_eq!(records[0].answer.as_deref(), Some("not approved"));
    }

    #[test]
    fn records_between_calls_past_the_bound_are_counted_and_said() {
        let mut observer = BetweenCalls::default();
        let denied = record(Decision::Deny, ExecOutcome::Refused);
        for _ in 0..KEPT + 5 {
            observer.decided(&denied);
        }
        let (records, not_kept) = observer.into_records();
        assert_eq!((records.len(), not_kept), (KEPT, 5));
        assert!(note(&records, not_kept).ends_with("5 more exec decisions, not kept]"));
    }
}
