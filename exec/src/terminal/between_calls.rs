//! What the persistent terminal's exec supervisor reports while no call reads the terminal: a
//! process a call left running (in the background, or in the foreground past the call's wait)
//! goes on execing between calls. Each exec is decided when it happens, not when the next call
//! happens to look: a denial is kept for the next call (or the end of the session) to report,
//! marked as not that call's doing, and a question goes to the session's answerer at once, as
//! the network proxy's do (headless, or with no answerer: no). The network proxy's decisions
//! for those processes are kept by the proxy as they come, and taken apart the same way.

use std::sync::Arc;

use bridle_policy::{ApprovalPolicy, Decision};
use bridle_sandbox::{ExecObserver, ExecOutcome, ExecRecord};

use crate::approvals::{Answerer, ApprovalOutcome};

/// The answer of a question the terminal's closing left unasked.
pub const CLOSED_UNASKED: &str = "withdrawn: the terminal was closed before anyone was asked";

/// The answer of a question between calls when the terminal has nobody to ask.
pub const NOBODY_ASKED: &str =
    "unavailable: no call of the terminal was running and it has nobody to ask";

/// What the question about an exec between calls adds to its reason.
const WHY_NOW: &str = "a process an earlier terminal call left running";

/// Records kept between two calls; past it only their number is (a background loop of denied
/// execs must not fill memory, the next result and the log).
const KEPT: usize = 1000;

/// Who is asked between calls: the session's answerer, under its approval policy.
#[derive(Clone)]
pub struct Asker {
    /// The session's approval policy (`never`: nobody is asked).
    pub policy: ApprovalPolicy,
    /// The session's answerer.
    pub answerer: Arc<dyn Answerer>,
}

impl std::fmt::Debug for Asker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Asker")
            .field("policy", &self.policy)
            .field("who", &self.answerer.who())
            .finish()
    }
}

/// The observer between calls: keeps the records (the first [`KEPT`], then counts), asks
/// each question (see [`Asker`]), and writes its answer into the exec's record.
#[derive(Debug, Default)]
pub struct BetweenCalls {
    asker: Option<Asker>,
    /// The answer when there is nobody to ask (default: [`NOBODY_ASKED`]).
    unasked: Option<&'static str>,
    records: Vec<ExecRecord>,
    not_kept: u64,
    /// The questions answered here (pid, argv, the answer as the record says it).
    answered: Vec<(i32, Vec<String>, String)>,
}

impl BetweenCalls {
    /// Asks `asker` (nobody: every question is answered no).
    pub fn asking(asker: Option<Asker>) -> BetweenCalls {
        BetweenCalls {
            asker,
            ..BetweenCalls::default()
        }
    }

    /// For a terminal being closed: every question is answered no ([`CLOSED_UNASKED`]).
    pub fn closing() -> BetweenCalls {
        BetweenCalls {
            unasked: Some(CLOSED_UNASKED),
            ..BetweenCalls::default()
        }
    }

    /// What was reported since the observer started, in order, and how many more records
    /// were not kept.
    pub fn into_records(self) -> (Vec<ExecRecord>, u64) {
        (self.records, self.not_kept)
    }

    fn ask(&self, record: &ExecRecord, withdrawn: &dyn Fn() -> bool) -> (bool, String) {
        let Some(asker) = &self.asker else {
            return (false, self.unasked.unwrap_or(NOBODY_ASKED).to_owned());
        };
        if asker.policy == ApprovalPolicy::Never {
            return (false, "rejected: the approval policy is `never`".to_owned());
        }
        let request =
            crate::supervised::exec_question(record, format!("{} ({WHY_NOW})", record.reason));
        let outcome = asker.answerer.answer_unless(&request, withdrawn);
        (
            outcome == ApprovalOutcome::AllowedOnce,
            format!(
                "{} by {} between calls",
                outcome.name(),
                asker.answerer.who()
            ),
        )
    }
}

impl ExecObserver for BetweenCalls {
    fn decided(&mut self, record: &ExecRecord) {
        let mut record = record.clone();
        if record.decision == Decision::Ask
            && let Some(at) = self
                .answered
                .iter()
                .position(|(pid, argv, _)| *pid == record.pid && *argv == record.argv)
        {
            record.answer = Some(self.answered.swap_remove(at).2);
        }
        if self.records.len() < KEPT {
            self.records.push(record);
        } else {
            if self.not_kept == 0 {
                tracing::warn!(
                    "more than {KEPT} exec decisions between two terminal calls: only their number is kept"
                );
            }
            self.not_kept += 1;
        }
    }

    fn approve(&mut self, record: &ExecRecord, withdrawn: &dyn Fn() -> bool) -> bool {
        let (yes, answer) = self.ask(record, withdrawn);
        self.answered
            .push((record.pid, record.argv.clone(), answer));
        yes
    }
}

/// `decisions` marked as made between calls.
pub fn marked_between_calls(
    decisions: Vec<crate::net::NetDecision>,
) -> Vec<crate::net::NetDecision> {
    decisions
        .into_iter()
        .map(|d| crate::net::NetDecision {
            between_calls: true,
            ..d
        })
        .collect()
}

/// Whether any of `records` is an exec that did not run (its caller may print why).
pub fn refused(records: &[ExecRecord]) -> bool {
    records.iter().any(|r| r.outcome != ExecOutcome::Approved)
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
    use crate::approvals::ApprovalRequest;

    fn record(decision: Decision, outcome: ExecOutcome) -> ExecRecord {
        ExecRecord {
            pid: 7,
            program: "/usr/bin/git".into(),
            argv: vec!["git".into(), "push".into()],
            decision,
            rule: Some("ask-push".into()),
            reason: "rule ask-push".into(),
            same_as: Vec::new(),
            seen_as: None,
            ancestry: Vec::new(),
            outcome,
            answer: Some("not approved".into()),
        }
    }

    #[test]
    fn a_question_at_close_is_answered_no_and_its_record_says_nobody_was_asked() {
        let mut observer = BetweenCalls::closing();
        let asked = record(Decision::Ask, ExecOutcome::Refused);
        assert!(!observer.approve(&asked, &|| false));
        observer.decided(&asked);
        let (records, _) = observer.into_records();
        assert_eq!(records[0].answer.as_deref(), Some(CLOSED_UNASKED));
    }

    #[test]
    fn a_question_answered_earlier_keeps_its_answer_when_its_record_comes_at_close() {
        let mut observer = BetweenCalls::closing();
        observer.decided(&record(Decision::Ask, ExecOutcome::Refused));
        let (records, _) = observer.into_records();
        assert_eq!(records[0].answer.as_deref(), Some("not approved"));
    }

    struct Answers(ApprovalOutcome);

    impl Answerer for Answers {
        fn answer(&self, request: &ApprovalRequest) -> ApprovalOutcome {
            assert!(request.reason.contains(WHY_NOW), "{request:?}");
            self.0
        }
    }

    fn asked_between_calls(asker: Option<Asker>) -> (bool, ExecRecord) {
        let mut observer = BetweenCalls::asking(asker);
        let asked = record(Decision::Ask, ExecOutcome::Refused);
        let yes = observer.approve(&asked, &|| false);
        observer.decided(&asked);
        (yes, observer.into_records().0.remove(0))
    }

    #[test]
    fn a_question_between_calls_goes_to_the_sessions_answerer_and_its_answer_is_recorded() {
        let asker = |policy, outcome| Asker {
            policy,
            answerer: Arc::new(Answers(outcome)),
        };
        let (yes, _) = asked_between_calls(Some(asker(
            ApprovalPolicy::Ask,
            ApprovalOutcome::AllowedOnce,
        )));
        assert!(yes);
        let (yes, r) =
            asked_between_calls(Some(asker(ApprovalPolicy::Ask, ApprovalOutcome::Rejected)));
        assert!(!yes);
        assert!(r.answer.unwrap().starts_with("rejected by "));
        let (yes, r) = asked_between_calls(Some(asker(
            ApprovalPolicy::Never,
            ApprovalOutcome::AllowedOnce,
        )));
        assert!(!yes);
        assert!(r.answer.unwrap().contains("`never`"));
        let (yes, r) = asked_between_calls(None);
        assert!(!yes);
        assert_eq!(r.answer.as_deref(), Some(NOBODY_ASKED));
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
