//! Signal dispositions: SIGTERM and SIGHUP held (recorded, then passed on to a launcher) so
//! that what a run sets up on the host is always undone before the process dies of them.

use std::io;

use nix::libc;

fn set_disposition(
    signal: nix::sys::signal::Signal,
    handler: nix::sys::signal::SigHandler,
) -> io::Result<()> {
    use nix::sys::signal::{SaFlags, SigAction, SigSet, sigaction};
    let action = SigAction::new(handler, SaFlags::empty(), SigSet::empty());
    // SAFETY: SIG_IGN and SIG_DFL install no Rust code as a handler, so no signal-safety
    // requirement applies.
    unsafe { sigaction(signal, &action) }
        .map(drop)
        .map_err(io::Error::from)
}

/// The launcher [`forward_termination`] passes SIGTERM and SIGHUP on to (0: none).
static FORWARD_TO: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

/// The first signal [`forward_termination`] passed on (0: none yet).
static FORWARDED: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

extern "C" fn forward_signal(signal: libc::c_int) {
    use std::sync::atomic::Ordering::SeqCst;
    let _ = FORWARDED.compare_exchange(0, signal, SeqCst, SeqCst);
    let pid = FORWARD_TO.load(SeqCst);
    if pid > 0 {
        // SAFETY: kill is async-signal-safe; it only sends a signal.
        unsafe { libc::kill(pid, libc::SIGTERM) };
    }
}

/// From now on SIGTERM and SIGHUP to this process are recorded instead of ending it (and
/// passed on once [`forward_termination`] names a launcher), so that host state a run sets up
/// (locks, placeholders) is always undone before the process dies of the signal.
pub fn hold_termination() -> io::Result<()> {
    hold_signals(&[
        nix::sys::signal::Signal::SIGTERM,
        nix::sys::signal::Signal::SIGHUP,
    ])
}

/// Like [`hold_termination`], for `signals`.
pub fn hold_signals(signals: &[nix::sys::signal::Signal]) -> io::Result<()> {
    use nix::sys::signal::{SaFlags, SigAction, SigHandler, SigSet, sigaction};
    let action = SigAction::new(
        SigHandler::Handler(forward_signal),
        SaFlags::SA_RESTART,
        SigSet::empty(),
    );
    for &signal in signals {
        // SAFETY: `forward_signal` only uses atomics and calls kill(2), both
        // async-signal-safe.
        let old = unsafe { sigaction(signal, &action) }.map_err(io::Error::from)?;
        // A signal this process was started with ignored (`nohup`, `&` in a script) stays
        // ignored: whoever started it asked for that.
        if matches!(old.handler(), SigHandler::SigIgn) {
            // SAFETY: restores SIG_IGN, which installs no code as a handler.
            unsafe { sigaction(signal, &old) }.map_err(io::Error::from)?;
        }
    }
    Ok(())
}

/// Whether SIGTERM or SIGHUP came since [`hold_termination`].
pub fn termination_requested() -> bool {
    FORWARDED.load(std::sync::atomic::Ordering::SeqCst) != 0
}

/// The first held signal that came, if one did.
pub fn termination_signal() -> Option<nix::sys::signal::Signal> {
    let signal = FORWARDED.load(std::sync::atomic::Ordering::SeqCst);
    (signal != 0)
        .then(|| nix::sys::signal::Signal::try_from(signal).ok())
        .flatten()
}

/// From now on SIGTERM and SIGHUP to this process kill the sandbox of `launcher` (SIGTERM to
/// it) instead of ending this process, which then sees the run end as usual. A signal that
/// came earlier (held by [`hold_termination`]) is passed on now.
pub fn forward_termination(launcher: i32) -> io::Result<()> {
    use std::sync::atomic::Ordering::SeqCst;
    FORWARD_TO.store(launcher, SeqCst);
    hold_termination()?;
    // The handler records before it reads the target, and this stores before it reads the
    // record (all sequentially consistent): a signal racing with this is passed on at least
    // once; twice is harmless.
    if FORWARDED.load(SeqCst) != 0 {
        // SAFETY: kill only sends a signal to the launcher this run started.
        unsafe { libc::kill(launcher, libc::SIGTERM) };
    }
    Ok(())
}

/// Stops passing signals on to `launcher` (it is dead, and its pid must not be signalled once
/// it is reaped and may be reused). Later signals are still recorded.
pub fn stop_forwarding_to(launcher: i32) {
    use std::sync::atomic::Ordering::SeqCst;
    let _ = FORWARD_TO.compare_exchange(launcher, 0, SeqCst, SeqCst);
}

/// After the run a forwarded signal ended: dies of that signal, as the caller of this process
/// expects from sending it (the default action, restored first). Returns when none came.
pub fn die_of_forwarded_signal() {
    let signal = FORWARDED.load(std::sync::atomic::Ordering::SeqCst);
    let Ok(signal) = nix::sys::signal::Signal::try_from(signal) else {
        return;
    };
    let _ = default_signal(signal);
    let _ = nix::sys::signal::raise(signal);
}

/// Ignores `signal` (SIG_IGN).
pub fn ignore_signal(signal: nix::sys::signal::Signal) -> io::Result<()> {
    set_disposition(signal, nix::sys::signal::SigHandler::SigIgn)
}

/// Restores the default action for `signal` (SIG_DFL).
pub fn default_signal(signal: nix::sys::signal::Signal) -> io::Result<()> {
    set_disposition(signal, nix::sys::signal::SigHandler::SigDfl)
}
