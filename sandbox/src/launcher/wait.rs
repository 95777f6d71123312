//! How init's loop waits for work: a signal (the command's exit, a tracee's stop, a request
//! to stop) or an exec at the supervisor's listener, which is answered here.

use std::os::fd::AsFd;

use nix::sys::signal::Signal;
use nix::sys::signalfd::SignalFd;

use crate::supervisor::Supervisor;

/// How the loop waits: with an exec supervisor, an epoll set of the signalfd and the listener,
/// made once; otherwise, or where the set cannot be made, `poll`. (`poll` registers on both
/// descriptors' wait queues, queries both and unregisters at each of the two wake-ups per exec;
/// the set queries a descriptor only when it is ready, and the listener's query takes the
/// mutex under which the exec'ing task queues its notification.)
pub(super) struct Waiter {
    epoll: Option<nix::sys::epoll::Epoll>,
    /// The listener is in the set (it leaves it when it is closed).
    listening: bool,
}

/// The scheduler slice of the supervising thread: the shortest the kernel takes. An exec the
/// supervisor answers wakes a task that, with the default slice, preempted the supervisor on
/// its CPU before it got back to waiting (its answer is the last thing it does): the
/// supervisor then stayed runnable there until the program exited, and the woken program's
/// parent, woken by that exit, was moved to the other CPU, an idle one that had to be woken
/// first. With a short slice the supervisor's deadline comes first: where the woken program
/// still preempts it, the supervisor runs first when the program exits, goes back to waiting
/// at once, and the parent runs on the CPU it was woken on (fork + exec + wait of `/bin/true`:
/// 45 to 70 µs less per exec; `bench/RESULTS.md`). What the thread forks or spawns gets the
/// default slice back.
const SUPERVISOR_SLICE_NS: u64 = 100_000;

/// The epoll data of the signalfd and of the listener.
const SIGNALS: u64 = 0;
const LISTENER: u64 = 1;

impl Waiter {
    pub(super) fn new(signals: &SignalFd, supervised: bool) -> Waiter {
        use nix::sys::epoll::{Epoll, EpollCreateFlags, EpollEvent, EpollFlags};
        if supervised {
            // A hint only: without it execs are answered as well, a little later.
            let _ = crate::sys::sched::set_fair_slice(SUPERVISOR_SLICE_NS);
        }
        let epoll = supervised
            .then(|| Epoll::new(EpollCreateFlags::EPOLL_CLOEXEC).ok())
            .flatten()
            .filter(|epoll| {
                epoll
                    .add(signals, EpollEvent::new(EpollFlags::EPOLLIN, SIGNALS))
                    .is_ok()
            });
        Waiter {
            epoll,
            listening: false,
        }
    }

    /// Blocks until a signal of `signals` is pending or the supervisor's listener has an exec
    /// waiting (which is answered here); returns the signals taken.
    pub(super) fn wait(
        &mut self,
        signals: &SignalFd,
        supervisor: Option<&mut Supervisor>,
    ) -> Vec<Signal> {
        let Some(s) = supervisor else {
            return wait_for_work(signals, None);
        };
        let Some(epoll) = &self.epoll else {
            return wait_for_work(signals, Some(s));
        };
        use nix::sys::epoll::{EpollEvent, EpollFlags, EpollTimeout};
        match s.listener() {
            Some(listener) if !self.listening => {
                if epoll
                    .add(listener, EpollEvent::new(EpollFlags::EPOLLIN, LISTENER))
                    .is_err()
                {
                    return wait_for_work(signals, Some(s));
                }
                self.listening = true;
            }
            // In the set already, or gone (`listener_closed` took it out first).
            _ => {}
        }
        let mut events = [EpollEvent::empty(); 2];
        let ready = match epoll.wait(&mut events, EpollTimeout::NONE) {
            Ok(n) => &events[..n],
            Err(nix::errno::Errno::EINTR) => return Vec::new(),
            // Never spin on a failing wait: `poll` instead, from now on.
            Err(_) => {
                self.epoll = None;
                return wait_for_work(signals, Some(s));
            }
        };
        let of = |data: u64| {
            ready
                .iter()
                .filter(|e| e.data() == data)
                .fold(EpollFlags::empty(), |all, e| all | e.events())
        };
        let listener = of(LISTENER);
        if listener.contains(EpollFlags::EPOLLIN) {
            s.on_notification();
        } else if listener.intersects(EpollFlags::EPOLLHUP | EpollFlags::EPOLLERR) {
            // Out of the set before it is closed (epoll drops it itself only when the last
            // reference to the listener goes, which this need not rely on).
            if let Some(l) = s.listener() {
                let _ = epoll.delete(l);
            }
            self.listening = false;
            s.listener_closed();
        }
        if of(SIGNALS).contains(EpollFlags::EPOLLIN) {
            read_signals(signals)
        } else {
            Vec::new()
        }
    }
}

/// Blocks until a signal of `signals` is pending or the supervisor's listener has an exec
/// waiting (which is answered here); returns the signals taken.
fn wait_for_work(signals: &SignalFd, supervisor: Option<&mut Supervisor>) -> Vec<Signal> {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    let (signalled, notified, hung_up) = {
        let listener = supervisor.as_deref().and_then(Supervisor::listener);
        // No allocation: this runs twice per exec of a supervised sandbox.
        let mut all = [
            PollFd::new(signals.as_fd(), PollFlags::POLLIN),
            PollFd::new(listener.unwrap_or(signals.as_fd()), PollFlags::POLLIN),
        ];
        let fds = &mut all[..if listener.is_some() { 2 } else { 1 }];
        match poll(fds, PollTimeout::NONE) {
            Ok(_) => {}
            Err(nix::errno::Errno::EINTR) => return Vec::new(),
            // Never spin on a failing poll: wait for the signals alone.
            Err(_) => {
                std::thread::sleep(std::time::Duration::from_millis(10));
                return signals
                    .read_signal()
                    .ok()
                    .flatten()
                    .and_then(|info| Signal::try_from(i32::try_from(info.ssi_signo).ok()?).ok())
                    .into_iter()
                    .collect();
            }
        }
        let ready = |fd: &PollFd<'_>| fd.revents().unwrap_or(PollFlags::empty());
        let notified = fds
            .get(1)
            .is_some_and(|fd| ready(fd).contains(PollFlags::POLLIN));
        let hung_up = fds
            .get(1)
            .is_some_and(|fd| ready(fd).intersects(PollFlags::POLLHUP | PollFlags::POLLERR));
        (
            ready(&fds[0]).contains(PollFlags::POLLIN),
            notified,
            hung_up,
        )
    };
    if let Some(s) = supervisor {
        if notified {
            s.on_notification();
        } else if hung_up {
            s.listener_closed();
        }
    }
    if signalled {
        read_signals(signals)
    } else {
        Vec::new()
    }
}

/// The signals pending on `signals` (a non-blocking signalfd), taken in one read.
fn read_signals(signals: &SignalFd) -> Vec<Signal> {
    // `struct signalfd_siginfo` is 128 bytes, its signal number the first u32.
    const INFO: usize = 128;
    let mut buf = [0u8; INFO * 8];
    let Ok(n) = nix::unistd::read(signals.as_fd(), &mut buf) else {
        return Vec::new();
    };
    buf[..n]
        .chunks_exact(INFO)
        .filter_map(|info| {
            let signo = u32::from_ne_bytes([info[0], info[1], info[2], info[3]]);
            Signal::try_from(i32::try_from(signo).ok()?).ok()
        })
        .collect()
}
