//! What the persistent terminal's exec supervisor reports while no call reads the terminal: a
//! process a call left running in the background (`make &`, `(sleep 5; git push) &`) goes on
//! execing between calls. Each exec is decided when it happens, not when the next call
//! happens to look: a denial is kept for the next call (or the end of the session) to report,
//! and a question is answered no at once, because nobody is asked about a process the person
//! did not just see started (run it in a call to be asked).

use bridle_policy::Decision;
use bridle_sandbox::{ExecObserver, ExecOutcome, ExecRecord};

/// The answer an exec between calls gets when a rule says `ask`.
pub const NOBODY_ASKED: &str =
    "nobody was asked: no call of the terminal was running (run it in a call to be asked)";

/// The observer between calls: keeps every record, answers every question no.
#[derive(Debug, Default)]
pub struct BetweenCalls {
    /// What the supervisor reported, in order.
    records: Vec<ExecRecord>,
    /// The execs this observer answered no (pid, argv): their records say why.
    refused: Vec<(i32, Vec<String>)>,
}

impl BetweenCalls {
    /// What was reported since the observer started, in order.
    pub fn into_records(self) -> Vec<ExecRecord> {
        self.records
    }
}

impl ExecObserver for BetweenCalls {
    fn decided(&mut self, record: &ExecRecord) {
        let mut record = record.clone();
        let key = (record.pid, record.argv.clone());
        if record.decision == Decision::Ask
            && record.outcome != ExecOutcome::Approved
            && self.refused.contains(&key)
        {
            record.answer = Some(NOBODY_ASKED.to_owned());
        }
        self.records.push(record);
    }

    fn approve(&mut self, record: &ExecRecord, _withdrawn: &dyn Fn() -> bool) -> bool {
        self.refused.push((record.pid, record.argv.clone()));
        false
    }
}

/// The line the tool result adds for an exec decided between calls.
pub fn note(records: &[ExecRecord]) -> String {
    records
        .iter()
        .map(|r| format!("\n[bridle: between calls: {}]", r.message()))
        .collect()
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
    fn a_question_between_calls_is_answered_no_and_its_record_says_nobody_was_asked() {
        let mut observer = BetweenCalls::default();
        let asked = record(Decision::Ask, ExecOutcome::Refused);
        assert!(!observer.approve(&asked, &|| false));
        observer.decided(&asked);
        let records = observer.into_records();
        assert_eq!(records[0].answer.as_deref(), Some(NOBODY_ASKED));
        assert!(
            note(&records).contains("[bridle: between calls: rule ask-push needs approval"),
            "{records:?}"
        );
    }

    #[test]
    fn a_question_answered_in_a_call_keeps_its_answer_when_its_record_comes_between_calls() {
        let mut observer = BetweenCalls::default();
        observer.decided(&record(Decision::Ask, ExecOutcome::Refused));
        let records = observer.into_records();
        assert_eq!(records[0].answer.as_deref(), Some("not approved"));
    }
}
