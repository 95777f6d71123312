use std::sync::atomic::{AtomicBool, Ordering};

use super::*;

struct Yes<'a>(&'a AtomicBool);

impl Answerer for Yes<'static> {
    fn answer(&self, _request: &ApprovalRequest) -> ApprovalOutcome {
        self.0.store(true, Ordering::SeqCst);
        ApprovalOutcome::AllowedOnce
    }
}

fn request() -> ApprovalRequest {
    ApprovalRequest {
        tool: "bash".into(),
        arguments: serde_json::json!({"command": "git push"}),
        reason: "rule".into(),
        justification: None,
        escalation: None,
        call_id: None,
    }
}

#[test]
fn policy_never_rejects_without_asking_any_answerer() {
    static ASKED: AtomicBool = AtomicBool::new(false);
    let seam = Approvals::new(ApprovalPolicy::Never, Box::new(Yes(&ASKED)));
    assert_eq!(seam.ask(&request()), ApprovalOutcome::Rejected);
    assert!(
        !ASKED.load(Ordering::SeqCst),
        "an answerer was consulted under `never`"
    );
}

#[test]
fn policy_ask_consults_the_answerer() {
    static ASKED: AtomicBool = AtomicBool::new(false);
    let seam = Approvals::new(ApprovalPolicy::Ask, Box::new(Yes(&ASKED)));
    assert_eq!(seam.ask(&request()), ApprovalOutcome::AllowedOnce);
    assert!(ASKED.load(Ordering::SeqCst));
}

#[test]
fn no_answerer_is_unavailable_and_every_denial_is_distinct() {
    let seam = Approvals::new(ApprovalPolicy::Ask, Box::new(NoAnswerer));
    assert_eq!(seam.ask(&request()), ApprovalOutcome::Unavailable);
    let texts: Vec<String> = [
        (ApprovalOutcome::Rejected, ApprovalPolicy::Ask),
        (ApprovalOutcome::Rejected, ApprovalPolicy::Never),
        (ApprovalOutcome::Cancelled, ApprovalPolicy::Ask),
        (ApprovalOutcome::Unavailable, ApprovalPolicy::Ask),
    ]
    .iter()
    .map(|(o, p)| o.denial(*p).unwrap())
    .collect();
    for (i, a) in texts.iter().enumerate() {
        for b in &texts[i + 1..] {
            assert_ne!(a, b);
        }
    }
    assert_eq!(
        ApprovalOutcome::AllowedOnce.denial(ApprovalPolicy::Ask),
        None
    );
}

#[test]
fn an_observed_seam_reports_questions_answers_and_decisions() {
    let notes = std::sync::Mutex::new(Vec::new());
    let observer = |n: PipelineNote| -> Result<(), String> {
        notes.lock().unwrap().push(n);
        Ok(())
    };
    let seam = Approvals::new(ApprovalPolicy::Ask, Box::new(NoAnswerer));
    let observed = seam.observed(&observer);
    assert_eq!(observed.ask(&request()), ApprovalOutcome::Unavailable);
    observed
        .decided(Decision::Deny, "approval unavailable")
        .unwrap();
    let notes = notes.into_inner().unwrap();
    assert_eq!(
        notes,
        vec![
            PipelineNote::ApprovalAsked {
                question: "bash: rule".into()
            },
            PipelineNote::ApprovalDecided {
                answer: "unavailable".into(),
                by: "nobody (no terminal to ask on)".into()
            },
            PipelineNote::Decided {
                decision: Decision::Deny,
                by: "approval unavailable".into()
            },
        ]
    );
}

#[test]
fn a_question_asked_for_a_call_names_that_call_unless_it_names_its_own() {
    type Seen = std::sync::Arc<std::sync::Mutex<Vec<Option<String>>>>;
    struct Named(Seen);
    impl Answerer for Named {
        fn answer(&self, request: &ApprovalRequest) -> ApprovalOutcome {
            self.0.lock().unwrap().push(request.call_id.clone());
            ApprovalOutcome::Rejected
        }
    }
    let seen = Seen::default();
    let seam = Approvals::new(ApprovalPolicy::Ask, Box::new(Named(seen.clone())));
    let observer = |_: PipelineNote| -> Result<(), String> { Ok(()) };
    seam.ask(&request());
    seam.for_call(&observer, Some("call_7")).ask(&request());
    let own = ApprovalRequest {
        call_id: Some("call_1".into()),
        ..request()
    };
    seam.for_call(&observer, Some("call_7")).ask(&own);
    assert_eq!(
        *seen.lock().unwrap(),
        [None, Some("call_7".to_owned()), Some("call_1".to_owned())]
    );
}

#[test]
fn a_seam_that_cannot_record_never_approves() {
    static ASKED: AtomicBool = AtomicBool::new(false);
    let failing = |_: PipelineNote| -> Result<(), String> { Err("disk full".into()) };
    let seam = Approvals::new(ApprovalPolicy::Ask, Box::new(Yes(&ASKED)));
    let observed = seam.observed(&failing);
    assert_eq!(observed.ask(&request()), ApprovalOutcome::Unavailable);
    assert!(
        !ASKED.load(Ordering::SeqCst),
        "asked although it could not be recorded"
    );
    assert!(observed.decided(Decision::Allow, "x").is_err());
    // The unobserved seam it came from still works.
    assert_eq!(seam.ask(&request()), ApprovalOutcome::AllowedOnce);
}
