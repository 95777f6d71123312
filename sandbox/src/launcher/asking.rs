//! Questions of the whole tree's tracing (no seccomp filter), each asked on a thread of its
//! own: the process asked about waits, stopped at its exec event, while init's loop goes on
//! with the tree's other stops and signals, and takes the answer back when the thread wakes
//! it (only the tracing thread may let a tracee go).

use std::collections::HashMap;
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use nix::sys::eventfd::{EfdFlags, EventFd};
use nix::unistd::Pid;

use crate::supervisor::{Supervisor, TreeQuestion};

/// The most questions open at once; past it an exec that needs one is refused, reported
/// (as the pool refuses one with no thread free), rather than asked with the tree held.
const MAX_OPEN: usize = 64;

/// A question's thread waits on a socket: it needs little stack.
const STACK: usize = 256 * 1024;

/// The questions being asked.
pub(super) struct Asking {
    /// Pid → its question's `reaped` flag, until init's loop reaps it or takes the answer.
    open: HashMap<i32, Arc<AtomicBool>>,
    answered: Arc<Mutex<Vec<TreeQuestion>>>,
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

    /// Asks `question` on a thread of its own; with too many open, or no thread to be had,
    /// refuses it unasked (reported).
    pub(super) fn start(&mut self, supervisor: &mut Supervisor, question: TreeQuestion) {
        if self.open.len() >= MAX_OPEN {
            return supervisor.tree_cannot_ask(question);
        }
        let pid = question.pid().as_raw();
        let reaped = question.reaped();
        // Shared with the thread, so that a thread that cannot start gives the question back.
        let slot = Arc::new(Mutex::new(Some(question)));
        let (answered, wake, taken) = (self.answered.clone(), self.wake.clone(), slot.clone());
        let started = std::thread::Builder::new()
            .name("bridle-question".into())
            .stack_size(STACK)
            .spawn(move || {
                let Some(mut question) = lock(&taken).take() else {
                    return;
                };
                question.ask();
                lock(&answered).push(question);
                let _ = wake.write(1);
            });
        match started {
            Ok(_) => {
                self.open.insert(pid, reaped);
            }
            Err(_) => {
                if let Some(question) = lock(&slot).take() {
                    supervisor.tree_cannot_ask(question);
                }
            }
        }
    }

    /// Init's loop reaped `pid`: a question about it is withdrawn.
    pub(super) fn reaped(&mut self, pid: Pid) {
        if let Some(flag) = self.open.remove(&pid.as_raw()) {
            flag.store(true, Ordering::SeqCst);
        }
    }

    /// Hands the answers back to `supervisor`, which lets each process go on or kills it.
    /// Called after init's loop has reaped what exited (a question's thread sees its process
    /// gone only once the exit's `SIGCHLD` is queued), so an answer about a process that died
    /// meanwhile finds it reaped.
    pub(super) fn finish(&mut self, supervisor: &mut Supervisor) {
        let _ = self.wake.read();
        let answered = std::mem::take(&mut *lock(&self.answered));
        for question in answered {
            if !question.reaped().load(Ordering::SeqCst) {
                self.open.remove(&question.pid().as_raw());
            }
            supervisor.tree_answered(question);
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
