//! Observing a run's exec supervisor on a thread of its own while nobody else does: a run that
//! lives across its caller's steps (the persistent terminal) keeps running between them, and
//! its processes' denials are reported as they happen, not when the next step happens to look.
//! A question is another matter: only the caller's next step has someone to ask, so the thread
//! keeps it unanswered (its process waits in its exec) and hands it back with the reports; the
//! next step asks it, or, when the run is closed first, its observer answers no.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use std::panic::AssertUnwindSafe;

use super::running::{Running, Wake};
use crate::supervisor::ExecObserver;
use crate::supervisor::record::FromSupervisor;

/// What the thread gives back: the reports, the observer, and the questions it kept.
type GivenBack<O> = (mpsc::Receiver<Wake>, O, Vec<Wake>);

/// A thread handing a run's exec reports to an observer until [`Running::end_background`].
#[derive(Debug)]
pub struct Background<O> {
    stop: Arc<AtomicBool>,
    nudge: mpsc::Sender<Wake>,
    thread: Option<JoinHandle<Option<GivenBack<O>>>>,
}

impl<O> Drop for Background<O> {
    fn drop(&mut self) {
        if self.thread.is_none() {
            return;
        }
        // Not ended by the run (the run went away first): the thread must still end.
        self.stop.store(true, Ordering::Release);
        let _ = self.nudge.send(Wake::Nudge);
    }
}

impl Running {
    /// Hands the exec supervisor's reports of denials to `observer` on a thread of its own
    /// until [`Running::end_background`] gives it back; questions wait there unanswered (their
    /// processes wait in their exec) and go back to this run with the reports. An error
    /// (another observer has the reports already; no thread could be started) leaves the
    /// reports with this run, for [`Running::pump_exec_events`].
    pub fn observe_in_background<O>(&mut self, observer: O) -> std::io::Result<Background<O>>
    where
        O: ExecObserver + Send + 'static,
    {
        let Some(events) = self.events.take() else {
            return Err(std::io::Error::other(
                "the exec supervisor's reports are observed already",
            ));
        };
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = Arc::clone(&stop);
        // Handed to the thread through a slot, so that a thread that cannot start leaves both
        // here.
        let slot = Arc::new(Mutex::new(Some((events, observer))));
        let handed = Arc::clone(&slot);
        let spawned = std::thread::Builder::new()
            .name("exec-background".into())
            .spawn(move || {
                let (events, mut observer) = lock(&handed).take()?;
                let mut kept = Vec::new();
                while let Ok(wake) = events.recv() {
                    match wake {
                        ask @ Wake::Exec(FromSupervisor::Ask(..)) => kept.push(ask),
                        Wake::Exec(message) => {
                            // An observer that panics must not take the reports with it: the
                            // run's next observer still needs them (the rest of this record is
                            // lost, and said so).
                            let observed = std::panic::catch_unwind(AssertUnwindSafe(|| {
                                crate::supervisor::record::observe(message, &mut observer, &|| {
                                    false
                                });
                            }));
                            if observed.is_err() {
                                tracing::warn!("an exec report was lost: its observer panicked");
                            }
                        }
                        Wake::Nudge if stopping.load(Ordering::Acquire) => break,
                        Wake::Nudge | Wake::Exited(_) | Wake::Status(_) => {}
                    }
                }
                Some((events, observer, kept))
            });
        match spawned {
            Ok(thread) => Ok(Background {
                stop,
                nudge: self.events_tx.clone(),
                thread: Some(thread),
            }),
            Err(e) => {
                // A thread that did not start took nothing.
                if let Some((events, _)) = lock(&slot).take() {
                    self.events = Some(events);
                }
                Err(e)
            }
        }
    }

    /// Stops the thread [`Running::observe_in_background`] started once it has handed over
    /// every report that came before this call, and gives the reports (and the observer)
    /// back to this run; the questions it kept come first among them, for the run's next
    /// observer to answer.
    pub fn end_background<O>(&mut self, mut background: Background<O>) -> Option<O> {
        background.stop.store(true, Ordering::Release);
        let _ = background.nudge.send(Wake::Nudge);
        let thread = background.thread.take()?;
        match thread.join() {
            Ok(Some((events, observer, kept))) => {
                // Behind whatever came after the nudge: those are other processes' (each
                // process that asked waits for its answer), so nothing of one process is
                // reordered.
                for ask in kept {
                    let _ = self.events_tx.send(ask);
                }
                self.events = Some(events);
                Some(observer)
            }
            Ok(None) => None,
            Err(_) => {
                tracing::warn!("the thread observing the exec supervisor panicked");
                None
            }
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}
