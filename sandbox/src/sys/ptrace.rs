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

/// `NT_PRSTATUS`: the general registers' regset (`libc` does not export it for every target).
const NT_PRSTATUS: libc::c_int = 1;

/// The stack pointer of the stopped tracee `pid` (`PTRACE_GETREGSET` of its general registers).
/// `Ok(None)` when the tracee's registers are not this architecture's 64-bit layout (a 32-bit
/// compat task reports a shorter set).
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
pub fn stack_pointer(pid: Pid) -> io::Result<Option<u64>> {
    // SAFETY: `user_regs_struct` is plain integers, for which all zeroes is a valid value.
    let mut regs: libc::user_regs_struct = unsafe { std::mem::zeroed() };
    let size = std::mem::size_of::<libc::user_regs_struct>();
    let mut iov = libc::iovec {
        iov_base: (&raw mut regs).cast::<c_void>(),
        iov_len: size,
    };
    // SAFETY: GETREGSET writes at most `iov_len` bytes to `iov_base`, which points at `regs`,
    // exactly that large, and stores the length written back into `iov`; nothing else is
    // touched.
    let ret = unsafe {
        libc::ptrace(
            libc::PTRACE_GETREGSET,
            pid.as_raw(),
            NT_PRSTATUS as usize as *mut c_void,
            (&raw mut iov).cast::<c_void>(),
        )
    };
    check(ret)?;
    if iov.iov_len != size {
        return Ok(None);
    }
    #[cfg(target_arch = "x86_64")]
    let sp = regs.rsp;
    #[cfg(target_arch = "aarch64")]
    let sp = regs.sp;
    Ok(Some(sp))
}

/// On other architectures the stack is not read: `Ok(None)`.
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
pub fn stack_pointer(_pid: Pid) -> io::Result<Option<u64>> {
    Ok(None)
}
