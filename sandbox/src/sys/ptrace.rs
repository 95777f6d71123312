//! The ptrace request of the exec supervisor that `nix` does not cover, and the signal check it
//! makes while it waits for an answer.

use std::ffi::c_void;
use std::io;

use nix::libc;
use nix::unistd::Pid;

use super::check;

/// `PTRACE_LISTEN`: a tracee in a group-stop stays stopped but reports the next change (a
/// SIGCONT, another signal), as job control expects.
pub fn listen(pid: Pid) -> io::Result<()> {
    // SAFETY: PTRACE_LISTEN takes neither `addr` nor `data`; null is passed for both and no
    // memory is read or written.
    let ret = unsafe {
        libc::ptrace(
            libc::PTRACE_LISTEN,
            pid.as_raw(),
            std::ptr::null_mut::<c_void>(),
            std::ptr::null_mut::<c_void>(),
        )
    };
    check(ret).map(drop)
}

/// Whether SIGTERM or SIGHUP is pending for the calling thread (the launcher blocks them and
/// takes them synchronously).
pub fn termination_pending() -> bool {
    let mut set = std::mem::MaybeUninit::<libc::sigset_t>::uninit();
    // SAFETY: sigpending writes one sigset_t into the buffer it is given, which is exactly
    // that size; nothing else is touched.
    let ret = unsafe { libc::sigpending(set.as_mut_ptr()) };
    if ret != 0 {
        return false;
    }
    // SAFETY: sigpending returned 0, so it initialised `set`.
    let set = unsafe { set.assume_init() };
    [libc::SIGTERM, libc::SIGHUP].into_iter().any(|s| {
        // SAFETY: sigismember reads the initialised set; `s` is a valid signal number.
        unsafe { libc::sigismember(&set, s) == 1 }
    })
}
