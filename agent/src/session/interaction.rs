//! The user-interaction seam for front ends: the pipeline's [`Answerer`] that hands each
//! question (an approval, a plan review) to whoever holds the [`Questions`] receiver and waits
//! for the answer. Usable from another thread (`blocking_recv`) and from tokio
//! (`recv().await`); answering never blocks. No front end, or one that drops a question:
//! `unavailable` / dismissed, so everything fails closed.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bridle_exec::approvals::{Answerer, ApprovalOutcome, ApprovalRequest, PlanReview};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};

/// What a front end is asked.
#[derive(Debug)]
pub enum Question {
    /// Allow this one call? (`reason` says why it needs approval, and whether a guard denies
    /// it whatever the answer.)
    Approval {
        /// The request, as the pipeline asks it.
        request: ApprovalRequest,
        /// Where the answer goes.
        reply: Reply<ApprovalOutcome>,
    },
    /// Approve this plan, or keep planning with feedback?
    PlanReview {
        /// The plan (markdown).
        plan: String,
        /// Where the answer goes.
        reply: Reply<PlanReview>,
    },
}

/// Where one answer goes (dropping it unanswered dismisses the question).
#[derive(Debug)]
pub struct Reply<T>(std::sync::mpsc::Sender<T>);

impl<T> Reply<T> {
    /// Answers; an answer after the question was given up is ignored.
    pub fn send(self, answer: T) {
        let _ = self.0.send(answer);
    }
}

/// The receiving end of the questions.
pub type Questions = UnboundedReceiver<Question>;

/// The answerer that forwards questions to a front end.
#[derive(Debug, Clone)]
pub struct ChannelAnswerer {
    tx: UnboundedSender<Question>,
    /// Set when the session is cancelled: a pending question is given up (`cancelled`).
    cancelled: Arc<AtomicBool>,
}

impl ChannelAnswerer {
    /// An answerer and the receiver its questions arrive on.
    pub fn new() -> (ChannelAnswerer, Questions) {
        let (tx, rx) = unbounded_channel();
        (
            ChannelAnswerer {
                tx,
                cancelled: Arc::default(),
            },
            rx,
        )
    }

    /// Gives up every pending and future question of the running turn until [`Self::resume`].
    pub fn cancel(&self) {
        self.cancelled.store(true, Ordering::SeqCst);
    }

    /// Answers questions again (a new turn).
    pub fn resume(&self) {
        self.cancelled.store(false, Ordering::SeqCst);
    }

    fn ask<T>(&self, make: impl FnOnce(Reply<T>) -> Question) -> Option<T> {
        let (tx, rx) = std::sync::mpsc::channel();
        self.tx.send(make(Reply(tx))).ok()?;
        loop {
            if self.cancelled.load(Ordering::SeqCst) {
                return None;
            }
            match rx.recv_timeout(Duration::from_millis(50)) {
                Ok(answer) => return Some(answer),
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => return None,
            }
        }
    }
}

impl Answerer for ChannelAnswerer {
    fn answer(&self, request: &ApprovalRequest) -> ApprovalOutcome {
        if self.tx.is_closed() {
            return ApprovalOutcome::Unavailable;
        }
        self.ask(|reply| Question::Approval {
            request: request.clone(),
            reply,
        })
        .unwrap_or(ApprovalOutcome::Cancelled)
    }

    fn review_plan(&self, plan: &str) -> PlanReview {
        if self.tx.is_closed() {
            return PlanReview::Unavailable;
        }
        self.ask(|reply| Question::PlanReview {
            plan: plan.to_owned(),
            reply,
        })
        .unwrap_or(PlanReview::Dismissed)
    }

    fn who(&self) -> &'static str {
        "the person at the front end"
    }
}
