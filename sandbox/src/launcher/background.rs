//! Observing a run's exec supervisor on a thread of its own while nobody else does: a run that
//! lives across its caller's steps (the persistent terminal) keeps running between them, and
//! its processes' execs are decided as they happen, not when the next step happens to look.

use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use super::running::{Running, Wake};
use crate::supervisor::ExecObserver;

/// What the thread gives back: the reports and the observer.
type GivenBack<O> = (mpsc::Receiver<Wake>, O);

/// A thread handing a run's exec reports to an observer until [`Running::end_background`].
#[derive(Debug)]
pub struct Background<O> {
    stop: Arc<AtomicBool>,
    /// Gives up a question being asked (the run is being closed).
    withdraw: Arc<AtomicBool>,
    nudge: mpsc::Sender<Wake>,
    thread: Option<JoinHandle<Option<GivenBack<O>>>>,
}

impl<O> Drop for Background<O> {
    fn drop(&mut self) {
        if self.thread.is_none() {
            return;
        }
        // Not ended by the run (the run went away first): the thread must still end.
        self.withdraw.store(true, Ordering::Release);
        self.stop.store(true, Ordering::Release);
        let _ = self.nudge.send(Wake::Nudge);
    }
}

impl Running {
    /// Hands what the exec supervisor reports to `observer` on a thread of its own (denials;
    /// questions, which it answers) until [`Running::end_background`] gives it back. An error
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
        let withdraw = Arc::new(AtomicBool::new(false));
        let withdrawing = Arc::clone(&withdraw);
        // Handed to the thread through a slot, so that a thread that cannot start leaves both
        // here.
        let slot = Arc::new(Mutex::new(Some((events, observer))));
        let handed = Arc::clone(&slot);
        let spawned = std::thread::Builder::new()
            .name("exec-background".into())
            .spawn(move || {
                let (events, mut observer) = lock(&handed).take()?;
                while let Ok(wake) = events.recv() {
                    match wake {
                        Wake::Exec(message) => {
                            // An observer that panics must not take the reports with it: the
                            // run's next observer still needs them (the rest of this record is
                            // lost, and said so).
                            let observed = std::panic::catch_unwind(AssertUnwindSafe(|| {
                                crate::supervisor::record::observe(message, &mut observer, &|| {
                                    withdrawing.load(Ordering::Acquire)
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
                Some((events, observer))
            });
        match spawned {
            Ok(thread) => Ok(Background {
                stop,
                withdraw,
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
    /// every report that came before this call (a question being asked waits for its
    /// answer), and gives the reports (and the observer) back to this run.
    pub fn end_background<O>(&mut self, background: Background<O>) -> Option<O> {
        self.stop_background(background, false)
    }

    /// Like [`Running::end_background`], giving up a question being asked (`withdrawn`):
    /// for a run about to be closed, whose processes nobody will answer for.
    pub fn withdraw_background<O>(&mut self, background: Background<O>) -> Option<O> {
        self.stop_background(background, true)
    }

    fn stop_background<O>(&mut self, mut background: Background<O>, withdraw: bool) -> Option<O> {
        if withdraw {
            background.withdraw.store(true, Ordering::Release);
        }
        background.stop.store(true, Ordering::Release);
        let _ = background.nudge.send(Wake::Nudge);
        let thread = background.thread.take()?;
        match thread.join() {
            Ok(Some((events, observer))) => {
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
