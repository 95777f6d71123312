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

impl Question {
    /// Whether the asking side gave this question up (see [`Reply::given_up`]).
    pub fn given_up(&self) -> bool {
        match self {
            Question::Approval { reply, .. } => reply.given_up(),
            Question::PlanReview { reply, .. } => reply.given_up(),
        }
    }
}

/// Where one answer goes (dropping it unanswered dismisses the question).
#[derive(Debug)]
pub struct Reply<T> {
    tx: std::sync::mpsc::Sender<T>,
    given_up: Arc<GivenUp>,
}

/// Set once by the asking side; a front end may wait for it.
#[derive(Debug, Default)]
struct GivenUp {
    set: AtomicBool,
    notify: tokio::sync::Notify,
}

impl<T> Reply<T> {
    /// Answers; an answer after the question was given up is ignored.
    pub fn send(self, answer: T) {
        let _ = self.tx.send(answer);
    }

    /// Whether the asking side gave the question up (it was withdrawn: what it was about
    /// ended, or the turn was cancelled): a front end stops showing it.
    pub fn given_up(&self) -> bool {
        self.given_up.set.load(Ordering::SeqCst)
    }

    /// Waits until the asking side gives the question up (for ever, if it never does).
    pub async fn wait_given_up(&self) {
        loop {
            let notified = self.given_up.notify.notified();
            if self.given_up() {
                return;
            }
            notified.await;
        }
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

    /// Asks and waits for the answer: `Err(true)` when `withdrawn` gave the question up,
    /// `Err(false)` when it was dismissed (the turn cancelled, the front end dropped it).
    fn ask<T>(
        &self,
        make: impl FnOnce(Reply<T>) -> Question,
        withdrawn: &dyn Fn() -> bool,
    ) -> Result<T, bool> {
        let (tx, rx) = std::sync::mpsc::channel();
        let given_up = Arc::new(GivenUp::default());
        let reply = Reply {
            tx,
            given_up: given_up.clone(),
        };
        self.tx.send(make(reply)).map_err(|_| false)?;
        let give_up = |why| {
            given_up.set.store(true, Ordering::SeqCst);
            given_up.notify.notify_waiters();
            Err(why)
        };
        loop {
            if self.cancelled.load(Ordering::SeqCst) {
                return give_up(false);
            }
            if withdrawn() {
                return give_up(true);
            }
            match rx.recv_timeout(Duration::from_millis(50)) {
                Ok(answer) => return Ok(answer),
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => return Err(false),
            }
        }
    }
}

impl Answerer for ChannelAnswerer {
    fn answer(&self, request: &ApprovalRequest) -> ApprovalOutcome {
        self.answer_unless(request, &|| false)
    }

    fn answer_unless(
        &self,
        request: &ApprovalRequest,
        withdrawn: &dyn Fn() -> bool,
    ) -> ApprovalOutcome {
        if self.tx.is_closed() {
            return ApprovalOutcome::Unavailable;
        }
        let asked = self.ask(
            |reply| Question::Approval {
                request: request.clone(),
                reply,
            },
            withdrawn,
        );
        match asked {
            Ok(answer) => answer,
            Err(true) => ApprovalOutcome::Withdrawn,
            Err(false) => ApprovalOutcome::Cancelled,
        }
    }

    fn review_plan(&self, plan: &str) -> PlanReview {
        if self.tx.is_closed() {
            return PlanReview::Unavailable;
        }
        self.ask(
            |reply| Question::PlanReview {
                plan: plan.to_owned(),
                reply,
            },
            &|| false,
        )
        .unwrap_or(PlanReview::Dismissed)
    }

    fn who(&self) -> &'static str {
        "the person at the front end"
    }
}
