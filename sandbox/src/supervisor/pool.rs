//! The supervisor's own process, and its threads: how execs reach [`Supervisor`] under
//! seccomp user notification.
//!
//! Init forks this process once the command handed over its filter's listener, before the
//! command runs anything, and keeps no copy of the listener. A thread of it waits in the
//! kernel for the next notification (`SECCOMP_IOCTL_NOTIF_RECV`, blocking), answers it, and,
//! when it seized the caller, waits for that thread's exec event itself (`waitid` on its own
//! tracees only, `__WNOTHREAD`), then goes back to the listener, or, when enough threads wait
//! there already (one per CPU, at most [`MAX_LISTENING`]), waits on a condition variable
//! until one is needed there. A thread that is about to wait for an exec event first makes
//! sure another one is at the listener or on its way there (the thread it seized may make
//! another exec first, a `PATH` search's next try, which someone must answer): a waiting
//! thread called, or a new one.
//!
//! Why a process and threads, not init's loop: init's loop, one thread for every exec, every
//! stop and every signal of the sandbox, was woken through a signalfd and epoll and served one
//! exec at a time; here a tracee's stop wakes the one thread waiting for it (a synchronous
//! wake-up, on the stopping task's CPU), and a notification the threads at the listener, of
//! which the one on the CPU the caller just left usually runs first. `make -j2` of 200 files,
//! against the same build without rules, alternating: 1.04 against 1.09 for init's loop
//! (`bench/RESULTS.md`). A process of its own, because tracees of a thread of init that are
//! also init's children (the command, orphans) would show their ptrace stops to init's own
//! `wait` as well, which would take them.
//!
//! Failing closed: this process dies with its parent (`PR_SET_PDEATHSIG`), its parent stops the
//! sandbox when it dies (the listener is then gone, so every exec fails with `ENOSYS`, and
//! `PTRACE_O_EXITKILL` kills whatever a thread of it had seized), and the command cannot signal
//! it (Landlock's signal scope) or trace it. A thread that panics, or a listener that fails,
//! ends the process.

use std::collections::HashSet;
use std::os::fd::{AsFd, OwnedFd};
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::thread::Scope;

use nix::errno::Errno;
use nix::sys::wait::{Id, WaitPidFlag, WaitStatus, waitid, waitpid};

use super::notify::{Step, is_exec};
use super::wake::WakePlacement;
use super::{Supervisor, tracee};
use crate::sys;
use crate::sys::notify::{self as unotify, Notification};

/// The most threads the process runs: one per exec between its notification and its exec
/// event at once, and those at the listener or waiting to be called there. Past it (or when
/// the kernel refuses a thread: they count against the user's process limit, as the
/// command's processes do), an exec that would need another fails with `EAGAIN` instead of
/// waiting for ever.
const MAX_THREADS: usize = 256;

/// Threads waiting to be called to the listener beyond which one that finds the listener full
/// ends instead (the process's main thread never does, so it may be one more): a burst of
/// parallel execs leaves no crowd behind; fewer than this, threads stay, since starting and
/// ending one per exec cost more context switches than the execs.
const SPARE_THREADS: usize = 8;

/// The most threads waiting at the listener at once, whatever the number of CPUs. The kernel
/// wakes every one of them at each notification (its wait is not exclusive), each where it
/// last ran: one per CPU lets the one on the CPU the caller just left answer there, and more
/// are woken for nothing (an interrupt to another CPU, on the caller's path). With every thread
/// back from an exec event at the listener, `make -j2` of 200 files ran at 1.07 to 1.10 of the
/// build without rules, with at most two 1.04 to 1.07, in the same alternating runs
/// (`bench/RESULTS.md`).
const MAX_LISTENING: usize = 4;

/// The stack of a thread: the supervisor's work is shallow (the rules, a few reads).
const STACK: usize = 256 * 1024;

/// The shared state of the threads.
struct Pool<'a> {
    supervisor: Mutex<&'a mut Supervisor>,
    /// A descriptor of the listener for the threads' blocking receives (the supervisor holds
    /// its own for answers).
    listener: OwnedFd,
    /// Threads waiting at the listener now. The kernel wakes all of them at every notification
    /// (and every answer), and the first to run takes it: usually the one woken on the CPU the
    /// caller just left, so the caller's exec is answered there, with no idle CPU to wake. (One
    /// thread at the listener at a time, the others waiting their turn on a lock, built at
    /// 1.10 against 1.04 with every idle thread there: `bench/RESULTS.md`.) At most
    /// [`Pool::listening`].
    idle: AtomicUsize,
    /// Threads running.
    threads: AtomicUsize,
    /// Threads at most at the listener: the parallelism this process had when it started
    /// (its CPUs, or its cgroup's CPU quota), at most [`MAX_LISTENING`].
    listening: usize,
    /// Threads waiting to be called to the listener, and calls not yet taken.
    parked: Mutex<Parked>,
    called: Condvar,
    /// Tids whose exit a thread saw and is about to reap, for the next holder of `supervisor`
    /// to forget (see [`Pool::follow`]).
    gone: Mutex<Vec<i32>>,
    /// The command lines told why their `ptrace` was refused (see [`Pool::refuse_tracing`]).
    told_of_tracing: Mutex<HashSet<String>>,
    /// Where the kernel wakes the threads at a notification and the caller at its answer.
    wake: WakePlacement,
}

/// Threads waiting on [`Pool::called`].
#[derive(Default)]
struct Parked {
    /// Threads waiting to be called.
    waiting: usize,
    /// Calls made and not yet taken (at most `waiting`).
    calls: usize,
    /// Threads called and not yet back at the top of their loop.
    coming: usize,
}

/// Runs `supervisor` on `listener` in the calling process, a fresh fork of init (or of the
/// launcher) that is single-threaded and has closed everything else; never returns.
pub(crate) fn serve(supervisor: &mut Supervisor, listener: OwnedFd) -> ! {
    let receiver = match listener.try_clone() {
        Ok(fd) => fd,
        Err(e) => fatal(&format!("duplicating the exec listener: {e}")),
    };
    supervisor.listen(listener);
    // Ancestry stops where the sandbox's tree starts: the process that forked this one.
    supervisor.root = nix::unistd::getppid().as_raw();
    let wake = WakePlacement::new(receiver.as_fd());
    let pool = Pool {
        supervisor: Mutex::new(supervisor),
        listener: receiver,
        idle: AtomicUsize::new(0),
        threads: AtomicUsize::new(1),
        listening: std::thread::available_parallelism()
            .map_or(1, std::num::NonZeroUsize::get)
            .min(MAX_LISTENING),
        parked: Mutex::new(Parked::default()),
        called: Condvar::new(),
        gone: Mutex::new(Vec::new()),
        told_of_tracing: Mutex::new(HashSet::new()),
        wake,
    };
    std::thread::scope(|scope| guarded(|| pool.work(scope, true)));
    fatal("the exec supervisor's threads stopped")
}

/// Runs `f`; a panic ends the process (its parent then stops the sandbox).
fn guarded(f: impl FnOnce()) {
    if std::panic::catch_unwind(AssertUnwindSafe(f)).is_err() {
        fatal("an exec supervisor thread panicked");
    }
}

/// Ends the process with `why` on stderr (the command's): its parent stops the sandbox.
fn fatal(why: &str) -> ! {
    let _ = sys::write_all_raw(
        2,
        format!("bridle: {why}; stopping the sandbox\n").as_bytes(),
    );
    sys::exit_now(125)
}

impl<'a> Pool<'a> {
    /// The supervisor, with every exit seen so far forgotten.
    fn lock(&self) -> MutexGuard<'_, &'a mut Supervisor> {
        // A thread that panicked ended the process, so a poisoned lock is never seen alive.
        let mut supervisor = self
            .supervisor
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let gone = std::mem::take(
            &mut *self
                .gone
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        );
        for tid in gone {
            supervisor.forget(nix::unistd::Pid::from_raw(tid));
        }
        supervisor
    }

    /// One thread's loop: a notification, its answer, and the exec event of a thread it
    /// seized. `first`: the process's main thread, which never ends.
    fn work<'s>(&'s self, scope: &'s Scope<'s, '_>, first: bool) {
        let _ = sys::sched::set_fair_slice(super::SUPERVISOR_SLICE_NS);
        let mut called = false;
        loop {
            // One thread per CPU at the listener: the others wait to be called there.
            let listens = self
                .idle
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                    (n < self.listening).then_some(n + 1)
                })
                .is_ok();
            if called {
                // At the listener now, or it was full: either way no longer on its way.
                self.parked().coming -= 1;
                called = false;
            }
            if !listens {
                if self.wait_to_be_called(first) {
                    called = true;
                    continue;
                }
                self.threads.fetch_sub(1, Ordering::SeqCst);
                return;
            }
            let received = unotify::receive(self.listener.as_fd());
            self.idle.fetch_sub(1, Ordering::SeqCst);
            let notification = match received {
                Ok(n) => n,
                // The caller went away since it queued, or a signal for this process.
                Err(e)
                    if matches!(e.raw_os_error(), Some(nix::libc::ENOENT | nix::libc::EINTR)) =>
                {
                    continue;
                }
                Err(e) => fatal(&format!("receiving from the exec listener: {e}")),
            };
            if !is_exec(notification.nr) {
                self.refuse_tracing(&notification);
                continue;
            }
            let spare = self.spare(scope);
            let step = self.lock().answer(&notification, spare);
            let seized = match step {
                Step::Done(seized) => seized,
                // Asked without the supervisor: the sandbox's other execs go on meanwhile,
                // answered by the others at the listener; with none there, not asked.
                Step::Ask(held) if !spare => {
                    self.lock().cannot_ask(held);
                    false
                }
                Step::Ask(mut held) => {
                    let asked = held.ask(Some(self.listener.as_fd()));
                    let spare = self.spare(scope);
                    self.lock().answered(held, asked, spare)
                }
            };
            if seized {
                self.follow();
            }
            // Last: a caller seized waits at its exec event until `follow` takes it.
            self.wake.follow_load(self.listener.as_fd());
        }
    }

    /// Refuses a call of the filter's that is not an exec (`ptrace`: a debugger or `strace`)
    /// with `EPERM`, as the filter of an unsupervised sandbox does, and says why on the
    /// sandbox's stderr, once per command line (a debugger tries several requests, from
    /// several of its processes); without the supervisor's lock, so that a stderr nobody
    /// reads holds no exec.
    fn refuse_tracing(&self, notification: &Notification) {
        const TOLD_AT_MOST: usize = 256;
        let tid = notification.tid;
        let command = tracee::cmdline(nix::unistd::Pid::from_raw(tid))
            .map(|argv| super::short(&argv.join(" ")))
            .unwrap_or_default();
        let pid = super::status_number(tid, "Tgid").unwrap_or(tid);
        // Said only while the caller waits: its tid names it, and what was read is its.
        if unotify::id_valid(self.listener.as_fd(), notification.id) {
            let first = {
                let mut told = self
                    .told_of_tracing
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                if told.len() >= TOLD_AT_MOST {
                    told.clear();
                }
                told.insert(command.clone())
            };
            if first {
                let line = format!(
                    "bridle: ptrace refused to `{command}` (pid {pid}): in a sandbox with \
                     command rules no process may trace another (the exec supervisor decides \
                     every exec and must be the only tracer), so debuggers and strace cannot \
                     run here\n"
                );
                let _ = sys::write_all_raw(2, line.as_bytes());
            }
        }
        let _ = unotify::respond(
            self.listener.as_fd(),
            notification.id,
            unotify::Response::Fail(nix::libc::EPERM),
        );
    }

    /// Makes sure someone is at the listener (or on the way there) while this thread waits
    /// for an exec event it lets on: the thread it seizes may make another exec first (a
    /// `PATH` search's next try). False when nobody can be: then it seizes nothing new.
    fn spare<'s>(&'s self, scope: &'s Scope<'s, '_>) -> bool {
        self.idle.load(Ordering::SeqCst) > 0 || self.call() || self.spawn(scope)
    }

    /// Waits until a thread is needed at the listener. False: enough threads wait already,
    /// and this one ends (never `first`, the process's main thread).
    fn wait_to_be_called(&self, first: bool) -> bool {
        let mut parked = self.parked();
        if !first && parked.waiting >= SPARE_THREADS {
            return false;
        }
        parked.waiting += 1;
        while parked.calls == 0 {
            parked = self
                .called
                .wait(parked)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
        }
        parked.calls -= 1;
        parked.waiting -= 1;
        parked.coming += 1;
        true
    }

    /// Makes sure a thread is on its way to the listener: one called already and not there
    /// yet, or a waiting one called now; false when there is none. (A thread on its way
    /// reaches the listener, or finds it full; either way someone is there, and whoever then
    /// receives makes sure of the next one: one on its way is enough for any number of
    /// threads that follow an exec meanwhile.)
    fn call(&self) -> bool {
        let mut parked = self.parked();
        if parked.calls > 0 || parked.coming > 0 {
            return true;
        }
        if parked.waiting > 0 {
            parked.calls += 1;
            self.called.notify_one();
            return true;
        }
        false
    }

    fn parked(&self) -> MutexGuard<'_, Parked> {
        self.parked
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Starts another thread, for the listener (at most [`MAX_THREADS`]); whether it did.
    fn spawn<'s>(&'s self, scope: &'s Scope<'s, '_>) -> bool {
        if self.threads.fetch_add(1, Ordering::SeqCst) >= MAX_THREADS {
            self.threads.fetch_sub(1, Ordering::SeqCst);
            return false;
        }
        let started = std::thread::Builder::new()
            .name("bridle-execs".into())
            .stack_size(STACK)
            .spawn_scoped(scope, move || guarded(|| self.work(scope, false)));
        if started.is_err() {
            self.threads.fetch_sub(1, Ordering::SeqCst);
        }
        started.is_ok()
    }

    /// Waits for the stops and exits of this thread's tracees and hands them to the supervisor
    /// until it traces nothing (`ECHILD`).
    fn follow(&self) {
        let mine = WaitPidFlag::__WALL | WaitPidFlag::__WNOTHREAD;
        loop {
            // Looked at first and taken after: an exit is forgotten before its tid is freed,
            // so a new process with the same tid is never taken for one already seized.
            let seen = match waitid(
                Id::All,
                mine | WaitPidFlag::WEXITED | WaitPidFlag::WSTOPPED | WaitPidFlag::WNOWAIT,
            ) {
                Ok(status) => status,
                Err(Errno::EINTR) => continue,
                Err(_) => return,
            };
            let Some(pid) = seen.pid() else { continue };
            if matches!(seen, WaitStatus::Exited(..) | WaitStatus::Signaled(..)) {
                // Queued for the supervisor's next holder, without waiting for it: a thread
                // that holds it may be waiting in the kernel for this very reap (seizing a
                // thread of a process whose exec waits for its other threads to be gone).
                self.gone
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .push(pid.as_raw());
                let _ = waitpid(pid, Some(mine | WaitPidFlag::WNOHANG));
                continue;
            }
            match waitpid(
                pid,
                Some(mine | WaitPidFlag::WUNTRACED | WaitPidFlag::WNOHANG),
            ) {
                Ok(
                    stopped @ (WaitStatus::Stopped(..)
                    | WaitStatus::PtraceEvent(..)
                    | WaitStatus::PtraceSyscall(_)),
                ) => {
                    let held = self.lock().on_stop(stopped);
                    if let Some(mut held) = held {
                        let asked = held.ask(None);
                        self.lock().answered(held, asked, false);
                    }
                }
                Ok(WaitStatus::Exited(..) | WaitStatus::Signaled(..)) => {
                    self.gone
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .push(pid.as_raw());
                }
                _ => {}
            }
        }
    }
}
