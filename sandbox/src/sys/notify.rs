//! Seccomp user notification (`seccomp_unotify(2)`): installing a filter that has a listener,
//! and the listener's requests. The exec supervisor uses them (see `crate::supervisor`).

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

use nix::libc;

use super::check;

/// Installs `program` on the calling thread (no thread sync) with
/// `SECCOMP_FILTER_FLAG_NEW_LISTENER`: the returned descriptor (close-on-exec, as the kernel
/// makes it) receives the notifications its `SECCOMP_RET_USER_NOTIF` rows raise. Also with
/// `SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV` where the kernel has it (5.19): a call whose
/// notification was received waits for its answer killably only, so a signal does not fail
/// the exec with `EINTR` while bridle asks a person. The caller must have set
/// `PR_SET_NO_NEW_PRIVS` (or hold `CAP_SYS_ADMIN`).
pub fn install_filter_with_listener(program: &[libc::sock_filter]) -> io::Result<OwnedFd> {
    let flags = libc::SECCOMP_FILTER_FLAG_NEW_LISTENER;
    match install(
        program,
        flags | libc::SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV,
    ) {
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => install(program, flags),
        other => other,
    }
}

fn install(program: &[libc::sock_filter], flags: libc::c_ulong) -> io::Result<OwnedFd> {
    let len = u16::try_from(program.len())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "seccomp program too long"))?;
    let fprog = libc::sock_fprog {
        len,
        filter: program.as_ptr().cast_mut(),
    };
    // SAFETY: `fprog` points at `len` instructions that live until the call returns; the
    // kernel copies the program and writes nothing to our memory.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            flags,
            &raw const fprog,
        )
    };
    let raw =
        RawFd::try_from(check(ret)?).map_err(|_| io::Error::other("listener fd out of range"))?;
    // SAFETY: the kernel just returned `raw` as a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(raw) })
}

/// One notification: the id to answer, the calling thread (in the receiver's PID namespace),
/// and the syscall with its arguments.
#[derive(Debug, Clone, Copy)]
pub struct Notification {
    /// The id [`respond`] and [`id_valid`] take.
    pub id: u64,
    /// The thread that made the call.
    pub tid: i32,
    /// The syscall number.
    pub nr: i32,
    /// Its arguments.
    pub args: [u64; 6],
}

/// `SECCOMP_IOCTL_NOTIF_RECV`: the next pending notification (blocks when there is none).
/// `ENOENT`: the caller went away meanwhile.
pub fn receive(listener: BorrowedFd<'_>) -> io::Result<Notification> {
    // The kernel refuses a buffer that is not zeroed.
    let mut notif = libc::seccomp_notif {
        id: 0,
        pid: 0,
        flags: 0,
        data: libc::seccomp_data {
            nr: 0,
            arch: 0,
            instruction_pointer: 0,
            args: [0; 6],
        },
    };
    // SAFETY: RECV writes one `struct seccomp_notif` into the buffer, which is exactly that
    // struct (the request's size is encoded from it); nothing else is touched.
    let ret = unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_RECV,
            &raw mut notif,
        )
    };
    check(ret.into())?;
    Ok(Notification {
        id: notif.id,
        tid: i32::try_from(notif.pid).unwrap_or(0),
        nr: notif.data.nr,
        args: notif.data.args,
    })
}

/// `SECCOMP_IOCTL_NOTIF_ID_VALID`: whether the caller of notification `id` still waits for its
/// answer (so its tid still names it: it cannot have exited and been recycled).
pub fn id_valid(listener: BorrowedFd<'_>, id: u64) -> bool {
    // SAFETY: ID_VALID reads one u64 from the pointer, which points at `id`; no writes.
    let ret = unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_ID_VALID,
            &raw const id,
        )
    };
    ret == 0
}

/// How a notification is answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Response {
    /// The syscall goes on as if no filter had stopped it (`SECCOMP_USER_NOTIF_FLAG_CONTINUE`).
    Continue,
    /// The syscall fails with this errno, without running.
    Fail(i32),
}

/// `SECCOMP_IOCTL_NOTIF_SEND`. `ENOENT`: the caller no longer waits (it went away, or a signal
/// interrupted the call, which it then makes again).
pub fn respond(listener: BorrowedFd<'_>, id: u64, response: Response) -> io::Result<()> {
    let (error, flags) = match response {
        Response::Continue => (0, libc::SECCOMP_USER_NOTIF_FLAG_CONTINUE),
        Response::Fail(errno) => (-errno, 0),
    };
    let mut resp = libc::seccomp_notif_resp {
        id,
        val: 0,
        error,
        flags: u32::try_from(flags).unwrap_or(0),
    };
    // SAFETY: SEND reads one `struct seccomp_notif_resp` from the pointer, which points at
    // exactly that struct.
    let ret = unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_SEND,
            &raw mut resp,
        )
    };
    check(ret.into()).map(drop)
}

/// `SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP` (Linux 6.6; not in `libc`).
const SYNC_WAKE_UP: libc::c_ulong = 1;

/// `SECCOMP_IOCTL_NOTIF_SET_FLAGS`: whether the kernel wakes a receiver at a notification, and
/// the caller at its answer, on the waker's own CPU (`SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP`,
/// 6.6). `EINVAL` on a kernel without the flag; `EINTR` when a signal came while the
/// kernel's lock was taken.
pub fn set_sync_wake_up(listener: BorrowedFd<'_>, on: bool) -> io::Result<()> {
    let flags: libc::c_ulong = if on { SYNC_WAKE_UP } else { 0 };
    // SAFETY: SET_FLAGS takes the flags as the ioctl's argument itself, not a pointer: the
    // kernel touches none of our memory.
    let ret = unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_SET_FLAGS,
            flags,
        )
    };
    check(ret.into()).map(drop)
}
