//! How init's loop waits for work: a signal (the command's exit, a tracee's stop under whole-tree
//! tracing, a request to stop). Execs under seccomp user notification are answered by the
//! supervisor's own process ([`crate::supervisor::serve`]), not here.

use std::os::fd::{AsFd, BorrowedFd};

use nix::sys::signal::Signal;
use nix::sys::signalfd::SignalFd;

/// Blocks until a signal of `signals` is pending, or `also` is readable; returns the signals
/// taken.
pub(super) fn wait_for_signals(signals: &SignalFd, also: Option<BorrowedFd<'_>>) -> Vec<Signal> {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    let mut fds: Vec<PollFd<'_>> = std::iter::once(signals.as_fd())
        .chain(also)
        .map(|fd| PollFd::new(fd, PollFlags::POLLIN))
        .collect();
    match poll(&mut fds, PollTimeout::NONE) {
        Ok(_) => read_signals(signals),
        Err(nix::errno::Errno::EINTR) => Vec::new(),
        // Never spin on a failing poll.
        Err(_) => {
            std::thread::sleep(std::time::Duration::from_millis(10));
            read_signals(signals)
        }
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
