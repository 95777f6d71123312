//! Pre-step listeners: asked, in registration order, before each step's request is derived
//! (including the first step of a turn and a retry). Each may accept, add messages to the step,
//! or block it (the turn ends `blocked`). After every listener accepted, each is told so in the
//! same order ([`PreStep::accepted`]); that is where a listener appends what must only be
//! logged for a step that goes ahead (plan mode's pending choice, PM8). A listener that panics
//! fails its step with a logged error; the process goes on.

use crate::log::Event;

/// What a listener sees of the step about to be requested.
#[derive(Debug)]
pub struct StepView<'a> {
    /// The turn and step.
    pub turn: u64,
    pub step: u64,
    /// The session log so far (committed or not).
    pub events: &'a [(u64, Event)],
    /// `user/message` texts to add to this step, in order.
    pub add_messages: Vec<String>,
    /// Other events to append before the request (the listener's own event types).
    pub append: Vec<Event>,
}

/// A listener's verdict on a step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StepVerdict {
    /// The step may go ahead.
    Accept,
    /// The step must not run; the turn ends `blocked`, with this reason.
    Block(String),
}

/// A pre-step listener.
pub trait PreStep: Send + Sync {
    /// Its name (logged when it blocks or fails).
    fn name(&self) -> &str;

    /// Decides on a candidate step.
    fn before_step(&self, view: &mut StepView<'_>) -> StepVerdict;

    /// Every listener accepted the step, and it was not cancelled.
    fn accepted(&self, view: &mut StepView<'_>) {
        let _ = view;
    }

    /// An event this listener put in [`StepView::append`] could not be logged (`reason`);
    /// the step goes on without it.
    fn append_failed(&self, event: &Event, reason: &str) {
        let _ = (event, reason);
    }
}
