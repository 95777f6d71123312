//! The ptrace requests of the exec supervisor that `nix` does not cover, or covers only behind
//! a union, and the signal check it makes while it waits for an answer.

use std::ffi::c_void;
use std::io;

use nix::libc;
use nix::unistd::Pid;

use super::check;

/// The syscall number and arguments of a tracee in a seccomp stop
/// (`PTRACE_GET_SYSCALL_INFO`).
pub fn seccomp_stop(pid: Pid) -> io::Result<(u64, [u64; 6])> {
    let info = nix::sys::ptrace::syscall_info(pid).map_err(io::Error::from)?;
    if info.op != libc::PTRACE_SYSCALL_INFO_SECCOMP {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("pid {pid} is not in a seccomp stop (op {})", info.op),
        ));
    }
    // SAFETY: `op` is PTRACE_SYSCALL_INFO_SECCOMP, so the kernel filled in the union's
    // `seccomp` member (ptrace(2)); the union is plain integers, valid for any bytes.
    let seccomp = unsafe { info.u.seccomp };
    Ok((seccomp.nr, seccomp.args))
}

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
