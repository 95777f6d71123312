//! The committed-event feed: each subscriber gets every event once the log made it durable
//! (after a barrier), in order, never an uncommitted one.

use std::sync::Mutex;

use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};

use crate::log::Event;

/// One committed event.
#[derive(Debug, Clone, PartialEq)]
pub struct Committed {
    /// Its sequence number in the log.
    pub seq: u64,
    /// The event.
    pub event: Event,
}

/// The subscribers, and the first sequence number not yet published.
#[derive(Debug, Default)]
pub struct Feed {
    state: Mutex<FeedState>,
}

#[derive(Debug, Default)]
struct FeedState {
    next: u64,
    subscribers: Vec<UnboundedSender<Committed>>,
}

impl Feed {
    /// A feed whose first event is `next` (events before it were committed before anyone
    /// could subscribe: read them from the log).
    pub fn starting_at(next: u64) -> Feed {
        Feed {
            state: Mutex::new(FeedState {
                next,
                subscribers: Vec::new(),
            }),
        }
    }

    /// A new subscriber: every event committed from now on. The receiver works from a thread
    /// (`blocking_recv`, `try_recv`) and from tokio (`recv().await`).
    pub fn subscribe(&self) -> UnboundedReceiver<Committed> {
        let (tx, rx) = unbounded_channel();
        self.lock().subscribers.push(tx);
        rx
    }

    /// Publishes the events of `events` (the log, in order) not yet published; called right
    /// after a barrier made them durable.
    pub fn publish(&self, events: &[(u64, Event)]) {
        let mut state = self.lock();
        let first = events.partition_point(|(seq, _)| *seq < state.next);
        let new = &events[first..];
        let Some((last, _)) = new.last() else {
            return;
        };
        state.next = last + 1;
        state.subscribers.retain(|tx| {
            new.iter().all(|(seq, event)| {
                tx.send(Committed {
                    seq: *seq,
                    event: event.clone(),
                })
                .is_ok()
            })
        });
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, FeedState> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}
