//! Signals and the tree: holding and forwarding termination, killing what is left, and the
//! [`Controller`] another thread stops a run with.

use std::os::fd::OwnedFd;

use nix::sys::signal::Signal;

use super::init;
use crate::sys;

/// Makes SIGTERM and SIGHUP to the calling process be recorded instead of ending it, until
/// [`Running::forward_termination`](super::Running::forward_termination) passes them on to a run. Call it before preparing a
/// sandbox (which takes locks and makes placeholders on the host), so that a signal never
/// leaves them behind; check [`termination_requested`] before spawning.
pub fn hold_termination() {
    let _ = sys::hold_termination();
}

/// Like [`hold_termination`], for SIGINT, SIGTERM and SIGHUP: for a process that ends its own
/// work cleanly when asked to stop (`bridle run` cancels its turn), then dies of the signal
/// ([`die_of_forwarded_signal`]).
pub fn hold_interruption() {
    let _ = sys::hold_signals(&[Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP]);
}

/// Sends SIGTERM to every child process of this process: each confined run's launcher, which
/// then kills its whole tree.
pub fn terminate_children() {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return;
    };
    for task in tasks.flatten() {
        let Ok(children) = std::fs::read_to_string(task.path().join("children")) else {
            continue;
        };
        for pid in children
            .split_whitespace()
            .filter_map(|p| p.parse::<i32>().ok())
        {
            terminate_child(pid);
        }
    }
}

/// Sends SIGTERM to `pid` when it is (still) a child of this process: a confined run's
/// launcher, which then kills its whole tree. Pinned by a pidfd, then checked to still be our
/// child: a child reaped meanwhile, whose pid another process reuses, is never signalled.
pub fn terminate_child(pid: i32) {
    let Ok(pidfd) = sys::pidfd_open(pid) else {
        return;
    };
    if crate::supervisor::parent_of(pid).and_then(|p| u32::try_from(p).ok())
        == Some(std::process::id())
    {
        let _ = sys::pidfd_send_signal(std::os::fd::AsFd::as_fd(&pidfd), Signal::SIGTERM as i32);
    }
}

/// Whether a held signal (SIGTERM or SIGHUP, and SIGINT after [`hold_interruption`]) came.
pub fn termination_requested() -> bool {
    sys::termination_requested()
}

/// The name of the first held signal that came (`SIGINT`, ...), if one did: who cancelled.
pub fn termination_signal() -> Option<&'static str> {
    sys::termination_signal().map(nix::sys::signal::Signal::as_str)
}

/// Once a run ended because of a signal [`Running::forward_termination`](super::Running::forward_termination) passed on, and the run
/// was cleaned up: the calling process dies of that signal, as whoever sent it expects.
pub fn die_of_forwarded_signal() {
    sys::die_of_forwarded_signal();
}

/// Makes the calling process ignore SIGINT and SIGQUIT, which a terminal sends to the whole
/// foreground process group: the confined command gets them directly and decides; bridle must
/// not die of them first and take the tree down. Launchers reset them to the default.
pub fn ignore_terminal_signals() {
    let _ = sys::ignore_signal(Signal::SIGINT);
    let _ = sys::ignore_signal(Signal::SIGQUIT);
}

/// Makes the calling process a child subreaper: orphans of its descendants are reparented to it
/// (so [`kill_orphans`] can find them) instead of to init.
pub fn become_subreaper() {
    let _ = nix::sys::prctl::set_child_subreaper(true);
}

/// Kills and reaps every remaining child of the calling process (a subreaper after
/// [`become_subreaper`]). For a single-purpose process such as `bridle exec` once its run is over.
pub fn kill_orphans() {
    init::kill_descendants();
}

/// Whether the descriptor is a plain file, directory or block device: passing such a
/// descriptor to a confined command would let it change the file's metadata (`fchmod`,
/// `futimens`, `ftruncate`) outside the read-only view. Such stdio should be replaced by a pipe
/// the caller pumps.
pub fn needs_pipe(fd: std::os::fd::BorrowedFd<'_>) -> bool {
    use nix::sys::stat::SFlag;
    match nix::sys::stat::fstat(fd) {
        Ok(st) => {
            let kind = SFlag::from_bits_truncate(st.st_mode & SFlag::S_IFMT.bits());
            kind == SFlag::S_IFREG || kind == SFlag::S_IFDIR || kind == SFlag::S_IFBLK
        }
        Err(_) => false,
    }
}

/// Signals a run from any thread (see [`Running::controller`](super::Running::controller)).
#[derive(Debug, Clone)]
pub struct Controller {
    pub(super) pidfd: std::sync::Arc<OwnedFd>,
}

impl Controller {
    /// Asks the command to terminate (SIGTERM); follow with [`Controller::kill_tree`].
    pub fn terminate_gracefully(&self) {
        let _ = sys::pidfd_send_signal(
            std::os::fd::AsFd::as_fd(&*self.pidfd),
            Signal::SIGUSR1 as i32,
        );
    }

    /// Kills the whole process tree now.
    pub fn kill_tree(&self) {
        let _ = sys::pidfd_send_signal(
            std::os::fd::AsFd::as_fd(&*self.pidfd),
            Signal::SIGTERM as i32,
        );
    }
}
