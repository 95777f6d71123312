//! Questions of the whole tree's tracing (no seccomp filter), each asked on a thread of its
//! own: the process asked about waits, stopped at its exec event, while init's loop goes on
//! with the tree's other stops and signals, and takes the answer back when the thread wakes
//! it (only the tracing thread may let a tracee go).

use std::collections::HashMap;
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use nix::sys::eventfd::{EfdFlags, EventFd};
use nix::unistd::Pid;

use crate::supervisor::{Supervisor, TreeQuestion};

/// An answered question, and whether its process was reaped meanwhile.
type Answered = (TreeQuestion, Arc<AtomicBool>);

/// The questions being asked.
pub(super) struct Asking {
    /// Pid → set once init's loop has reaped it: its question is withdrawn, and what is
    /// answered lets nothing go (the pid may be another process's by then).
    open: HashMap<i32, Arc<AtomicBool>>,
    answered: Arc<Mutex<Vec<Answered>>>,
    /// Written by a thread once its question is answered: wakes init's loop.
    wake: Arc<EventFd>,
}

impl Asking {
    pub(super) fn new() -> nix::Result<Asking> {
        Ok(Asking {
            open: HashMap::new(),
            answered: Arc::default(),
            wake: Arc::new(EventFd::from_flags(
                EfdFlags::EFD_CLOEXEC | EfdFlags::EFD_NONBLOCK,
            )?),
        })
    }

    /// What init's loop also waits on: readable once an answer is back.
    pub(super) fn woken(&self) -> BorrowedFd<'_> {
        self.wake.as_fd()
    }

    /// Asks `question` on a thread of its own; where no thread can be started, here (the
    /// tree then waits for the answer).
    pub(super) fn start(&mut self, supervisor: &mut Supervisor, question: TreeQuestion) {
        let reaped = Arc::new(AtomicBool::new(false));
        self.open.insert(question.pid().as_raw(), reaped.clone());
        // Shared with the thread, so that a thread that cannot start gives the question back.
        let slot = Arc::new(Mutex::new(Some(question)));
        let (answered, wake, flag, taken) = (
            self.answered.clone(),
            self.wake.clone(),
            reaped.clone(),
            slot.clone(),
        );
        let started = std::thread::Builder::new()
            .name("bridle-question".into())
            .spawn(move || {
                let Some(mut question) = lock(&taken).take() else {
                    return;
                };
                question.ask(&|| flag.load(Ordering::SeqCst));
                lock(&answered).push((question, flag));
                let _ = wake.write(1);
            });
        if started.is_err()
            && let Some(mut question) = lock(&slot).take()
        {
            question.ask(&|| false);
            self.open.remove(&question.pid().as_raw());
            supervisor.tree_answered(question, false);
        }
    }

    /// Init's loop reaped `pid`: a question about it is withdrawn.
    pub(super) fn reaped(&mut self, pid: Pid) {
        if let Some(flag) = self.open.remove(&pid.as_raw()) {
            flag.store(true, Ordering::SeqCst);
        }
    }

    /// Hands the answers back to `supervisor`, which lets each process go on or kills it.
    pub(super) fn finish(&mut self, supervisor: &mut Supervisor) {
        let _ = self.wake.read();
        let answered = std::mem::take(&mut *lock(&self.answered));
        for (question, reaped) in answered {
            let reaped = reaped.load(Ordering::SeqCst);
            if !reaped {
                self.open.remove(&question.pid().as_raw());
            }
            supervisor.tree_answered(question, reaped);
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
