//! Thin wrappers, one syscall each, for what `nix` does not cover safely. This is the only
//! module (besides the seccomp installer and fault injection) where `unsafe` is allowed; every
//! block names the invariant that makes it sound, and every return code becomes an
//! `io::Error` immediately through [`check`].

#![allow(unsafe_code)]

use std::ffi::{CStr, c_int, c_long, c_ulong};
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

use nix::libc;

pub mod notify;
pub mod ptrace;
pub mod sched;
mod signals;

pub use signals::{
    default_signal, die_of_forwarded_signal, forward_termination, hold_signals, hold_termination,
    ignore_signal, stop_forwarding_to, termination_requested, termination_signal,
};

/// Converts a raw syscall return into `io::Result`.
fn check(ret: c_long) -> io::Result<c_long> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

const LANDLOCK_CREATE_RULESET_VERSION: c_ulong = 1;

/// The Landlock ABI version the running kernel supports (`landlock_create_ruleset` with the
/// VERSION flag). `Err` with ENOSYS or EOPNOTSUPP when Landlock is absent or disabled.
pub fn landlock_abi_version() -> io::Result<i32> {
    // SAFETY: with LANDLOCK_CREATE_RULESET_VERSION the kernel requires attr == NULL and size 0;
    // it reads and writes no memory and returns the version or -1 with errno.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    let version = check(ret)?;
    i32::try_from(version).map_err(|_| io::Error::other("landlock ABI version out of range"))
}

/// Whether seccomp filters can return `action` (`seccomp(SECCOMP_GET_ACTION_AVAIL)`): a real
/// query of the syscall the launcher uses, without side effects.
pub fn seccomp_action_available(action: u32) -> io::Result<()> {
    const SECCOMP_GET_ACTION_AVAIL: libc::c_uint = 2;
    // SAFETY: the kernel reads one u32 through the pointer, which refers to a live local.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            SECCOMP_GET_ACTION_AVAIL,
            0u32,
            &action as *const u32,
        )
    };
    check(ret).map(drop)
}

/// `open_tree` flags.
pub const OPEN_TREE_CLONE: u32 = 1;
const AT_RECURSIVE: u32 = 0x8000;
const AT_EMPTY_PATH: u32 = 0x1000;
const MOVE_MOUNT_F_EMPTY_PATH: u32 = 0x4;
/// `mount_setattr` attribute: read-only.
pub const MOUNT_ATTR_RDONLY: u64 = 0x1;

#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

/// Clones the mount tree at `path` (recursively) into a detached mount, returned as an fd.
pub fn open_tree_clone(path: &CStr) -> io::Result<OwnedFd> {
    let flags = OPEN_TREE_CLONE | AT_RECURSIVE | u32::try_from(libc::O_CLOEXEC).unwrap_or(0);
    // SAFETY: `path` is a valid NUL-terminated string that outlives the call; the kernel reads
    // it and returns a new fd (or -1), touching no other memory.
    let ret = unsafe { libc::syscall(libc::SYS_open_tree, libc::AT_FDCWD, path.as_ptr(), flags) };
    let fd =
        RawFd::try_from(check(ret)?).map_err(|_| io::Error::other("open_tree fd out of range"))?;
    // SAFETY: the kernel just returned `fd` as a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Sets and clears mount attributes, recursively, on the tree at `path`.
pub fn mount_setattr_path(path: &CStr, set: u64, clear: u64) -> io::Result<()> {
    let attr = MountAttr {
        attr_set: set,
        attr_clr: clear,
        propagation: 0,
        userns_fd: 0,
    };
    // SAFETY: `path` is NUL-terminated and `attr` is a properly laid out `struct mount_attr`
    // whose size we pass; both outlive the call, which only reads them.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            libc::AT_FDCWD,
            path.as_ptr(),
            AT_RECURSIVE,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    };
    check(ret).map(drop)
}

/// Sets and clears mount attributes, recursively, on the detached tree `fd`.
pub fn mount_setattr_fd(fd: BorrowedFd<'_>, set: u64, clear: u64) -> io::Result<()> {
    let attr = MountAttr {
        attr_set: set,
        attr_clr: clear,
        propagation: 0,
        userns_fd: 0,
    };
    // SAFETY: the empty path with AT_EMPTY_PATH makes the kernel operate on `fd`, which is
    // borrowed for the duration of the call; `attr` is a valid `struct mount_attr`.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            fd.as_raw_fd(),
            c"".as_ptr(),
            AT_RECURSIVE | AT_EMPTY_PATH,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    };
    check(ret).map(drop)
}

/// Attaches the detached mount `fd` at `target`.
pub fn move_mount_to(fd: BorrowedFd<'_>, target: &CStr) -> io::Result<()> {
    // SAFETY: `fd` is a live mount fd borrowed for the call; both strings are NUL-terminated
    // and outlive the call.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_move_mount,
            fd.as_raw_fd(),
            c"".as_ptr(),
            libc::AT_FDCWD,
            target.as_ptr(),
            MOVE_MOUNT_F_EMPTY_PATH,
        )
    };
    check(ret).map(drop)
}

/// Closes every descriptor from `first` upwards (`close_range`).
pub fn close_fds_from(first: u32) -> io::Result<()> {
    // SAFETY: close_range takes plain integers; closing descriptors cannot violate memory
    // safety. Callers run this right before exec, when no Rust object still owns those fds.
    let ret = unsafe { libc::syscall(libc::SYS_close_range, first, u32::MAX, 0u32) };
    check(ret).map(drop)
}

/// Whether the file at `path` (not followed if a symlink) has a POSIX access ACL
/// (`lgetxattr` of `system.posix_acl_access` asking its size: `ENODATA` when there is none).
/// An ACL may grant a named user less than its mode grants others.
pub fn has_access_acl(path: &CStr) -> io::Result<bool> {
    // SAFETY: both strings are NUL-terminated and outlive the call; a null buffer of size 0
    // asks for the value's size only, so the kernel writes no memory.
    let ret = unsafe {
        libc::lgetxattr(
            path.as_ptr(),
            c"system.posix_acl_access".as_ptr(),
            std::ptr::null_mut(),
            0,
        )
    };
    match check(c_long::try_from(ret).unwrap_or(-1)) {
        Ok(_) => Ok(true),
        Err(e) if matches!(e.raw_os_error(), Some(libc::ENODATA | libc::EOPNOTSUPP)) => Ok(false),
        Err(e) => Err(e),
    }
}

/// Clears the close-on-exec flag so `fd` survives exec (used in a `pre_exec` hook; no
/// allocation).
pub fn clear_cloexec(fd: RawFd) -> io::Result<()> {
    // SAFETY: F_SETFD with 0 only changes the descriptor flags of `fd`; no memory is passed.
    let ret = unsafe { libc::fcntl(fd, libc::F_SETFD, 0) };
    check(c_long::from(ret)).map(drop)
}

/// `dup2` for use in a `pre_exec` hook (no allocation).
pub fn dup2_raw(old: RawFd, new: RawFd) -> io::Result<()> {
    // SAFETY: dup2 takes plain integers; in the child between fork and exec no Rust object
    // owns `new`, so replacing it cannot invalidate an owner.
    let ret = unsafe { libc::dup2(old, new) };
    check(c_long::from(ret)).map(drop)
}

/// Drops capability `cap` from the bounding set.
pub fn capbset_drop(cap: c_ulong) -> io::Result<()> {
    // SAFETY: PR_CAPBSET_DROP takes an integer capability number; no memory is passed.
    let ret = unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) };
    check(c_long::from(ret)).map(drop)
}

/// Whether capability `cap` is in the bounding set (`Err(EINVAL)` past the last capability).
pub fn capbset_read(cap: c_ulong) -> io::Result<bool> {
    // SAFETY: PR_CAPBSET_READ takes an integer; no memory is passed.
    let ret = unsafe { libc::prctl(libc::PR_CAPBSET_READ, cap, 0, 0, 0) };
    check(c_long::from(ret)).map(|v| v == 1)
}

/// Clears the ambient capability set.
pub fn cap_ambient_clear_all() -> io::Result<()> {
    // SAFETY: PR_CAP_AMBIENT_CLEAR_ALL takes only integers; no memory is passed.
    let ret = unsafe {
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL,
            0,
            0,
            0,
        )
    };
    check(c_long::from(ret)).map(drop)
}

/// Sets the securebits.
pub fn set_securebits(bits: c_ulong) -> io::Result<()> {
    // SAFETY: PR_SET_SECUREBITS takes an integer bit set; no memory is passed.
    let ret = unsafe { libc::prctl(libc::PR_SET_SECUREBITS, bits, 0, 0, 0) };
    check(c_long::from(ret)).map(drop)
}

#[repr(C)]
struct CapHeader {
    version: u32,
    pid: c_int,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

const LINUX_CAPABILITY_VERSION_3: u32 = 0x2008_0522;

/// Empties the effective, permitted and inheritable capability sets of the calling thread.
pub fn capset_clear() -> io::Result<()> {
    let mut header = CapHeader {
        version: LINUX_CAPABILITY_VERSION_3,
        pid: 0,
    };
    let data = [CapData {
        effective: 0,
        permitted: 0,
        inheritable: 0,
    }; 2];
    // SAFETY: version 3 requires a header and an array of two `__user_cap_data_struct`s; both
    // are live, correctly laid out and outlive the call.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_capset,
            &mut header as *mut CapHeader,
            data.as_ptr(),
        )
    };
    check(ret).map(drop)
}

#[repr(C)]
struct IfReqFlags {
    name: [u8; libc::IFNAMSIZ],
    flags: libc::c_short,
    _pad: [u8; 22],
}

/// Brings the loopback interface of the current network namespace up, through `socket`, a
/// datagram socket of any family.
pub fn loopback_up(socket: BorrowedFd<'_>) -> io::Result<()> {
    let mut req = IfReqFlags {
        name: [0; libc::IFNAMSIZ],
        flags: 0,
        _pad: [0; 22],
    };
    req.name[..2].copy_from_slice(b"lo");
    // SAFETY: SIOCGIFFLAGS reads the name and writes `flags` inside `req`, a live `struct
    // ifreq`-sized buffer (40 bytes) that outlives the call.
    let ret = unsafe {
        libc::ioctl(
            socket.as_raw_fd(),
            libc::SIOCGIFFLAGS,
            &mut req as *mut IfReqFlags,
        )
    };
    check(c_long::from(ret))?;
    req.flags |= libc::c_short::try_from(libc::IFF_UP).unwrap_or(1);
    // SAFETY: as above; SIOCSIFFLAGS only reads `req`.
    let ret = unsafe {
        libc::ioctl(
            socket.as_raw_fd(),
            libc::SIOCSIFFLAGS,
            &req as *const IfReqFlags,
        )
    };
    check(c_long::from(ret)).map(drop)
}

/// Forks the calling process.
///
/// # Safety
///
/// In a multi-threaded process the child may only call async-signal-safe functions until it
/// execs or exits: no allocation, no locks. Callers document what their child does.
pub unsafe fn fork() -> io::Result<nix::unistd::ForkResult> {
    // SAFETY: forwarded to the caller's contract above.
    unsafe { nix::unistd::fork() }.map_err(io::Error::from)
}

/// Forks a process that is known to be single-threaded (checked in `/proc/self/status`), so
/// the child may allocate and do anything the parent could.
pub fn fork_single_threaded() -> io::Result<nix::unistd::ForkResult> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    let threads = status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .map(str::trim);
    if threads != Some("1") {
        return Err(io::Error::other(format!(
            "refusing to fork a process with {} threads",
            threads.unwrap_or("?")
        )));
    }
    // SAFETY: the process has exactly one thread, so no lock or allocator state can be held by
    // another thread at the time of the fork.
    unsafe { fork() }
}

/// Forks from the probe's throwaway child, which has a single thread by construction (fork
/// copies only the calling thread) but cannot read /proc to prove it without allocating.
pub fn fork_for_probe() -> io::Result<nix::unistd::ForkResult> {
    // SAFETY: only called in the probe child, itself the product of fork(), which has exactly
    // one thread; the grandchild calls only getpid and _exit.
    unsafe { fork() }
}

/// Writes all of `buf` to `fd` with raw `write(2)` calls (async-signal-safe; for forked
/// children).
pub fn write_all_raw(fd: RawFd, mut buf: &[u8]) -> io::Result<()> {
    while !buf.is_empty() {
        // SAFETY: `buf` is a live slice; write reads at most `buf.len()` bytes from it.
        let ret = unsafe { libc::write(fd, buf.as_ptr().cast(), buf.len()) };
        if ret < 0 {
            let err = io::Error::last_os_error();
            if err.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(err);
        }
        let written = usize::try_from(ret).unwrap_or(0);
        buf = buf.get(written..).unwrap_or(&[]);
    }
    Ok(())
}

/// Exits immediately without running destructors or atexit handlers (for forked children).
pub fn exit_now(code: i32) -> ! {
    // SAFETY: _exit is async-signal-safe and never returns.
    unsafe { libc::_exit(code) }
}

/// Sets close-on-exec on `fd`.
pub fn set_cloexec(fd: RawFd) -> io::Result<()> {
    // SAFETY: F_SETFD only changes descriptor flags; no memory is passed.
    let ret = unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
    check(c_long::from(ret)).map(drop)
}

/// Takes ownership of an inherited descriptor by number, after checking it is open.
pub fn take_raw_fd(fd: RawFd) -> io::Result<OwnedFd> {
    // SAFETY: F_GETFD only reads descriptor flags; it fails with EBADF for a closed fd.
    let ret = unsafe { libc::fcntl(fd, libc::F_GETFD) };
    check(c_long::from(ret))?;
    // SAFETY: `fd` is open (checked above) and was handed to this process by its parent for
    // exactly this purpose; nothing else in the process owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Closes `fd` (errors ignored: the fd may already be closed).
pub fn close_raw_fd(fd: RawFd) {
    // SAFETY: closing a descriptor number that no Rust object owns (inherited protocol fds)
    // cannot invalidate an owner.
    let _ = unsafe { libc::close(fd) };
}

/// Closes every descriptor in `first..=last` (errors ignored; empty range allowed).
pub fn close_fd_range(first: u32, last: u32) {
    if first > last {
        return;
    }
    // SAFETY: close_range takes integers; used right before exec, or in a fresh fork that
    // never returns to the frames owning them (the exec supervisor's process), so no Rust
    // object that owns one of those descriptors closes it again.
    let _ = unsafe { libc::syscall(libc::SYS_close_range, first, last, 0u32) };
}

/// Arranges for `command`'s child to have each `(from, to)` descriptor at number `to`
/// (inheritable), through a `pre_exec` hook that only makes allocation-free syscalls.
pub fn set_child_fds<const N: usize>(
    command: &mut std::process::Command,
    pairs: [(RawFd, RawFd); N],
    controlling_tty: bool,
) {
    use std::os::unix::process::CommandExt;
    let hook = move || -> io::Result<()> {
        if controlling_tty {
            // A new session whose controlling terminal is stdin (a pty slave).
            // SAFETY: setsid takes no arguments and touches no memory.
            check(c_long::from(unsafe { libc::setsid() }))?;
            // SAFETY: TIOCSCTTY takes an integer argument (0: do not steal); no memory is passed.
            check(c_long::from(unsafe { libc::ioctl(0, libc::TIOCSCTTY, 0) }))?;
        }
        // Move every source out of the way first, so a target number that equals another
        // pair's source cannot clobber it.
        let mut moved = [0 as RawFd; N];
        for (slot, (from, _)) in moved.iter_mut().zip(pairs) {
            // SAFETY: F_DUPFD_CLOEXEC duplicates `from` to a free number ≥ 64; no memory is
            // passed and the child owns no Rust objects for these numbers.
            let ret = unsafe { libc::fcntl(from, libc::F_DUPFD_CLOEXEC, 64) };
            *slot = RawFd::try_from(check(c_long::from(ret))?).unwrap_or(-1);
        }
        for (tmp, (_, to)) in moved.into_iter().zip(pairs) {
            dup2_raw(tmp, to)?;
            clear_cloexec(to)?;
        }
        Ok(())
    };
    // SAFETY: the hook runs between fork and exec in the child; it only calls fcntl and dup2,
    // which are async-signal-safe, and allocates nothing.
    unsafe {
        command.pre_exec(hook);
    }
}

/// The window size (rows, columns) of the terminal `fd`.
pub fn terminal_size(fd: BorrowedFd<'_>) -> io::Result<(u16, u16)> {
    let mut ws = libc::winsize {
        ws_row: 0,
        ws_col: 0,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCGWINSZ writes one `struct winsize` into `ws`, a live local of that type.
    let ret = unsafe {
        libc::ioctl(
            fd.as_raw_fd(),
            libc::TIOCGWINSZ,
            &mut ws as *mut libc::winsize,
        )
    };
    check(c_long::from(ret))?;
    Ok((ws.ws_row, ws.ws_col))
}

/// Sets the window size of the terminal `fd`.
pub fn set_terminal_size(fd: BorrowedFd<'_>, rows: u16, cols: u16) -> io::Result<()> {
    let ws = libc::winsize {
        ws_row: rows,
        ws_col: cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCSWINSZ reads one `struct winsize` from `ws`, a live local of that type.
    let ret = unsafe {
        libc::ioctl(
            fd.as_raw_fd(),
            libc::TIOCSWINSZ,
            &ws as *const libc::winsize,
        )
    };
    check(c_long::from(ret)).map(drop)
}

/// Clones the mount tree at the already-open `fd` (an `O_PATH` descriptor) into a detached
/// mount: no path is resolved again, so nothing can be swapped in between.
pub fn open_tree_clone_fd(fd: BorrowedFd<'_>) -> io::Result<OwnedFd> {
    let flags = OPEN_TREE_CLONE
        | AT_RECURSIVE
        | AT_EMPTY_PATH
        | u32::try_from(libc::O_CLOEXEC).unwrap_or(0);
    // SAFETY: the empty path with AT_EMPTY_PATH makes the kernel use `fd`, borrowed for the call.
    let ret = unsafe { libc::syscall(libc::SYS_open_tree, fd.as_raw_fd(), c"".as_ptr(), flags) };
    let raw =
        RawFd::try_from(check(ret)?).map_err(|_| io::Error::other("open_tree fd out of range"))?;
    // SAFETY: the kernel just returned `raw` as a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(raw) })
}

/// Attaches the detached mount `tree` on the already-open target `target` (an `O_PATH` fd).
pub fn move_mount_to_fd(tree: BorrowedFd<'_>, target: BorrowedFd<'_>) -> io::Result<()> {
    const MOVE_MOUNT_T_EMPTY_PATH: u32 = 0x40;
    // SAFETY: both descriptors are borrowed for the call; the empty paths with the EMPTY_PATH
    // flags make the kernel use them directly.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_move_mount,
            tree.as_raw_fd(),
            c"".as_ptr(),
            target.as_raw_fd(),
            c"".as_ptr(),
            MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH,
        )
    };
    check(ret).map(drop)
}

/// A pidfd for `pid` (which must be our unreaped child, so it cannot have been recycled).
pub fn pidfd_open(pid: i32) -> io::Result<OwnedFd> {
    // SAFETY: pidfd_open takes a pid and flags; no memory is passed.
    let ret = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0u32) };
    let raw = RawFd::try_from(check(ret)?).map_err(|_| io::Error::other("pidfd out of range"))?;
    // SAFETY: the kernel just returned `raw` as a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(raw) })
}

/// Sends `signal` to the process behind `pidfd` (never to a recycled pid).
pub fn pidfd_send_signal(pidfd: BorrowedFd<'_>, signal: i32) -> io::Result<()> {
    // SAFETY: a null siginfo is allowed (the kernel fills it in as for kill); no other memory.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            pidfd.as_raw_fd(),
            signal,
            std::ptr::null::<libc::siginfo_t>(),
            0u32,
        )
    };
    check(ret).map(drop)
}
