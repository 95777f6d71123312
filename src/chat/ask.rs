//! The answering side of the interaction seam in `bridle chat`: questions (approvals, plan
//! reviews) wait here in the order they came, the first one is shown above the prompt, and
//! the next line typed answers it. Only `y`/`yes` consents; an approval takes `n`/`no` as the
//! refusal and asks again on anything else; a plan review takes any other text as feedback.

use std::collections::VecDeque;
use std::sync::Mutex;

use bridle_agent::front::call_summary;
use bridle_agent::session::Question;
use bridle_exec::approvals::{ApprovalOutcome, PlanReview};
use bridle_exec::printable::printable;

use crate::log_cmd::brief;

/// The questions waiting for an answer, oldest first.
#[derive(Debug, Default)]
pub struct Asked {
    queue: Mutex<VecDeque<Question>>,
}

/// What a typed line did to the question it answered.
#[derive(Debug, PartialEq, Eq)]
pub enum Answered {
    /// The question is answered (`what` for the person) and the next one's lines, if any.
    Done { what: String, next: Vec<String> },
    /// The line does not answer it; say this and ask again.
    Again(&'static str),
}

impl Asked {
    /// Adds `question`; returns its lines when it is the first waiting (to be shown now).
    pub fn push(&self, question: Question) -> Option<Vec<String>> {
        let mut queue = self.lock();
        queue.push_back(question);
        (queue.len() == 1).then(|| lines(&queue[0]))
    }

    /// Whether a question waits.
    pub fn waiting(&self) -> bool {
        !self.lock().is_empty()
    }

    /// Drops the questions the session gave up (what they were about ended before an
    /// answer); returns what the person must be told: that the shown one is gone, and the next
    /// one's lines. Empty when the shown question still waits.
    pub fn prune(&self) -> Vec<String> {
        let mut queue = self.lock();
        let shown_gone = queue.front().is_some_and(Question::given_up);
        let mut out = Vec::new();
        if let Some(front) = queue.front().filter(|_| shown_gone) {
            out.push(format!(
                "  question withdrawn (what it was about ended before an answer): {}",
                summary(front)
            ));
        }
        queue.retain(|q| !q.given_up());
        if shown_gone && let Some(next) = queue.front() {
            out.extend(lines(next));
        }
        out
    }

    /// Whether the first waiting question is a plan review.
    pub fn reviewing(&self) -> bool {
        matches!(self.lock().front(), Some(Question::PlanReview { .. }))
    }

    /// Answers the first waiting question with `line`.
    pub fn answer(&self, line: &str) -> Answered {
        let mut queue = self.lock();
        let Some(question) = queue.pop_front() else {
            return Answered::Again("no question waits");
        };
        let what = match question {
            Question::Approval { request, reply } => match approval(line) {
                Some(outcome) => {
                    reply.send(outcome);
                    format!("{} {}", request.tool, outcome.name())
                }
                None => {
                    queue.push_front(Question::Approval { request, reply });
                    return Answered::Again("answer y (allow this call once) or n (refuse it)");
                }
            },
            Question::PlanReview { plan, reply } => match review(line) {
                Some(answer) => {
                    let what = match &answer {
                        PlanReview::Approved => "plan approved".to_owned(),
                        PlanReview::KeepPlanning { feedback: None } => "keep planning".to_owned(),
                        _ => "keep planning, with your feedback".to_owned(),
                    };
                    reply.send(answer);
                    what
                }
                None => {
                    queue.push_front(Question::PlanReview { plan, reply });
                    return Answered::Again(
                        "answer y (approve the plan), n (keep planning) or type feedback",
                    );
                }
            },
        };
        Answered::Done {
            what,
            next: queue.front().map(lines).unwrap_or_default(),
        }
    }

    /// Gives up every waiting question (the turn was cancelled: the session no longer waits
    /// for them); returns how many.
    pub fn give_up(&self) -> usize {
        let mut queue = self.lock();
        let n = queue.len();
        // Dropping a reply unanswered dismisses its question (fails closed).
        queue.clear();
        n
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<Question>> {
        self.queue
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// An approval answer: `y`/`yes` allows once, `n`/`no` refuses; anything else is no answer.
pub fn approval(line: &str) -> Option<ApprovalOutcome> {
    match line.trim().to_ascii_lowercase().as_str() {
        "y" | "yes" => Some(ApprovalOutcome::AllowedOnce),
        "n" | "no" => Some(ApprovalOutcome::Rejected),
        _ => None,
    }
}

/// A plan-review answer: `y`/`yes` approves (the only consent), `n`/`no` keeps planning,
/// other text keeps planning with that text as feedback; a blank line is no answer.
pub fn review(line: &str) -> Option<PlanReview> {
    let text = line.trim();
    match text.to_ascii_lowercase().as_str() {
        "" => None,
        "y" | "yes" => Some(PlanReview::Approved),
        "n" | "no" => Some(PlanReview::KeepPlanning { feedback: None }),
        _ => Some(PlanReview::KeepPlanning {
            feedback: Some(text.to_owned()),
        }),
    }
}

/// One line naming `question` (escaped).
fn summary(question: &Question) -> String {
    match question {
        Question::Approval { request, .. } => printable(&call_summary(
            &request.tool,
            &request.arguments.to_string(),
            120,
        )),
        Question::PlanReview { .. } => "the plan review".to_owned(),
    }
}

/// What the person reads of `question` (escaped: nothing the model wrote drives the terminal).
pub fn lines(question: &Question) -> Vec<String> {
    match question {
        Question::Approval { request, .. } => {
            let mut out = vec![format!("? approve {}", summary(question))];
            out.push(format!("  why: {}", brief(&request.reason, 200)));
            if let Some(mode) = request.escalation
                && !request.reason.contains(&mode.to_string())
            {
                out.push(format!("  it asks to run with sandbox mode `{mode}`"));
            }
            if let Some(j) = &request.justification {
                out.push(format!("  the agent says: {}", brief(j, 200)));
            }
            out.push("  allow this call once? [y/n]".to_owned());
            out
        }
        Question::PlanReview { plan, .. } => crate::chat::render::plan_review(plan),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_yes_consents_and_an_approval_needs_a_clear_answer() {
        assert_eq!(approval(" Y "), Some(ApprovalOutcome::AllowedOnce));
        assert_eq!(approval("no"), Some(ApprovalOutcome::Rejected));
        assert_eq!(approval("sure"), None);
        assert_eq!(approval(""), None);
        assert_eq!(review("yes"), Some(PlanReview::Approved));
        assert_eq!(
            review("n"),
            Some(PlanReview::KeepPlanning { feedback: None })
        );
        assert_eq!(
            review(" add tests first "),
            Some(PlanReview::KeepPlanning {
                feedback: Some("add tests first".into())
            })
        );
        assert_eq!(review("  "), None);
    }

    /// A question the session withdraws (its command timed out) stops waiting: the person is
    /// told, and the next question is shown; the asking side gets `withdrawn`.
    #[test]
    fn a_withdrawn_question_is_dropped_and_the_next_one_shown() {
        use bridle_exec::approvals::Answerer;
        let (answerer, mut questions) = bridle_agent::session::ChannelAnswerer::new();
        let asked = Asked::default();
        let request = |command: &str| bridle_exec::approvals::ApprovalRequest {
            tool: "bash".into(),
            arguments: serde_json::json!({ "command": command }),
            reason: "rule `ask-rm` asks".into(),
            justification: None,
            escalation: None,
            call_id: None,
        };
        let over = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let first = {
            let (answerer, over, request) = (answerer.clone(), over.clone(), request("rm -rf a"));
            std::thread::spawn(move || {
                answerer.answer_unless(&request, &|| over.load(std::sync::atomic::Ordering::SeqCst))
            })
        };
        assert!(asked.push(questions.blocking_recv().unwrap()).is_some());
        let second = {
            let (answerer, request) = (answerer.clone(), request("rm -rf b"));
            std::thread::spawn(move || answerer.answer(&request))
        };
        assert!(asked.push(questions.blocking_recv().unwrap()).is_none());
        assert!(asked.prune().is_empty(), "nothing withdrawn yet");
        over.store(true, std::sync::atomic::Ordering::SeqCst);
        assert_eq!(first.join().unwrap(), ApprovalOutcome::Withdrawn);
        let told = asked.prune();
        assert!(
            told[0].contains("question withdrawn") && told[0].contains("rm -rf a"),
            "{told:?}"
        );
        assert!(
            told[1].contains("rm -rf b"),
            "the next question is shown: {told:?}"
        );
        assert!(matches!(asked.answer("y"), Answered::Done { .. }));
        assert_eq!(second.join().unwrap(), ApprovalOutcome::AllowedOnce);
    }

    /// Answers go to the question in front; a line that answers nothing keeps it waiting;
    /// giving up drops the rest unanswered (the asking side sees them dismissed).
    #[test]
    fn questions_are_answered_in_order_and_given_up_on_cancel() {
        let (answerer, mut questions) = bridle_agent::session::ChannelAnswerer::new();
        let asked = std::sync::Arc::new(Asked::default());
        let request = bridle_exec::approvals::ApprovalRequest {
            tool: "bash".into(),
            arguments: serde_json::json!({"command": "rm -rf build\u{1b}]52;x\u{7}"}),
            reason: "rule `ask-rm` asks".into(),
            justification: None,
            escalation: None,
            call_id: None,
        };
        let asking = {
            let answerer = answerer.clone();
            let request = request.clone();
            std::thread::spawn(move || {
                use bridle_exec::approvals::Answerer;
                (
                    answerer.answer(&request),
                    answerer.review_plan("# Plan\nstep"),
                )
            })
        };
        let first = asked.push(questions.blocking_recv().unwrap()).unwrap();
        assert!(first[0].contains("rm -rf build"), "{first:?}");
        assert!(
            first.iter().all(|l| !l.contains('\u{1b}')),
            "escaped: {first:?}"
        );
        assert!(asked.waiting() && !asked.reviewing());
        assert_eq!(
            asked.answer("maybe"),
            Answered::Again("answer y (allow this call once) or n (refuse it)")
        );
        let Answered::Done { what, .. } = asked.answer("y") else {
            panic!()
        };
        assert_eq!(what, "bash approved");
        assert!(asked.push(questions.blocking_recv().unwrap()).is_some());
        assert!(asked.reviewing());
        assert_eq!(asked.give_up(), 1);
        assert!(!asked.waiting());
        let (approval, review) = asking.join().unwrap();
        assert_eq!(approval, ApprovalOutcome::AllowedOnce);
        assert_eq!(review, PlanReview::Dismissed);
    }
}
