//! The inbox of a live session: inputs that arrived and the commands waiting for the idle
//! agent, shared between the handle (any thread) and the session's own thread.

use std::collections::VecDeque;
use std::sync::{Condvar, Mutex, MutexGuard};

use crate::log::DropReason;

/// How an input joins the session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputKind {
    /// Opens a turn (refused while one runs).
    Prompt,
    /// Joins the next step of the running turn; wakes an idle agent.
    Steer,
    /// Becomes the next turn.
    Queue,
    /// Joins the next step without waking an idle agent.
    Inject,
}

impl InputKind {
    /// As logged.
    pub fn name(self) -> &'static str {
        match self {
            InputKind::Prompt => "prompt",
            InputKind::Steer => "steer",
            InputKind::Queue => "queue",
            InputKind::Inject => "inject",
        }
    }
}

/// One input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Input {
    /// Its id (stable, logged).
    pub id: String,
    pub kind: InputKind,
    pub text: String,
    /// The turn that was running when it arrived.
    pub arrived_during: Option<u64>,
    /// Its `input/received` is logged.
    pub received_logged: bool,
}

/// An input taken out of the inbox before any step included it, waiting for the session's
/// thread to log why (`input/dropped`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Dropped {
    pub input: Input,
    /// The turn running when it was dropped.
    pub turn: Option<u64>,
    pub reason: DropReason,
}

/// A command waiting for the idle agent, and where its reply goes.
pub(crate) type PendingCommand = (String, std::sync::mpsc::Sender<Result<String, String>>);

#[derive(Debug, Default)]
pub(crate) struct State {
    pub items: VecDeque<Input>,
    /// Inputs dropped and not yet logged as such.
    pub dropped: Vec<Dropped>,
    pub commands: VecDeque<PendingCommand>,
    /// The turn running, if one is.
    pub running: Option<u64>,
    pub cancel: Option<String>,
    pub closed: bool,
    pub next_id: u64,
}

impl State {
    /// Takes the inputs `which` selects out of the inbox, to be logged as dropped for
    /// `reason` by the session's thread; returns their ids.
    pub(crate) fn drop_inputs(
        &mut self,
        which: impl Fn(&Input) -> bool,
        reason: DropReason,
    ) -> Vec<String> {
        let (gone, kept): (VecDeque<Input>, VecDeque<Input>) =
            self.items.drain(..).partition(|i| which(i));
        self.items = kept;
        let turn = self.running;
        let ids = gone.iter().map(|i| i.id.clone()).collect();
        self.dropped.extend(gone.into_iter().map(|input| Dropped {
            input,
            turn,
            reason,
        }));
        ids
    }
}

/// Shared by the handle and the session thread.
#[derive(Debug, Default)]
pub struct Inbox {
    state: Mutex<State>,
    wake: Condvar,
}

impl Inbox {
    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub(crate) fn notify(&self) {
        self.wake.notify_all();
    }

    /// Waits until `ready` holds for the state.
    pub(crate) fn wait_until(&self, ready: impl Fn(&State) -> bool) -> MutexGuard<'_, State> {
        let mut state = self.lock();
        while !ready(&state) {
            state = self
                .wake
                .wait(state)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
        }
        state
    }

    /// The inputs a step of `turn` includes (steering and injected ones), taken out, with
    /// every input not yet received-logged (for `input/received`).
    pub(crate) fn take_for_step(&self) -> (Vec<(String, InputKind)>, Vec<Input>) {
        let mut state = self.lock();
        let mut received = Vec::new();
        for item in state.items.iter_mut().filter(|i| !i.received_logged) {
            item.received_logged = true;
            received.push((item.id.clone(), item.kind));
        }
        let mut included = Vec::new();
        let mut kept = VecDeque::new();
        for item in state.items.drain(..) {
            if matches!(item.kind, InputKind::Steer | InputKind::Inject) {
                included.push(item);
            } else {
                kept.push_back(item);
            }
        }
        state.items = kept;
        (received, included)
    }

    /// Who cancelled the running turn, once it is cancelled.
    pub(crate) fn cancelled(&self) -> Option<String> {
        self.lock().cancel.clone()
    }
}
