//! A filesystem instance mounted nowhere: `fsopen`, `fsconfig(FSCONFIG_CMD_CREATE)`, `fsmount`,
//! for reading a kernel filesystem's state without changing any mount tree.

use std::ffi::CStr;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use nix::libc;

use super::check;

const FSOPEN_CLOEXEC: libc::c_uint = 1;
const FSCONFIG_CMD_CREATE: libc::c_uint = 6;
const FSMOUNT_CLOEXEC: libc::c_uint = 1;
const MOUNT_ATTR_RDONLY: libc::c_uint = 1;

fn owned(ret: libc::c_long, what: &str) -> io::Result<OwnedFd> {
    let fd = RawFd::try_from(check(ret)?)
        .map_err(|_| io::Error::other(format!("{what} fd out of range")))?;
    // SAFETY: the kernel just returned `fd` as a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// A read-only, detached mount of the filesystem type `fs_type` (the instance the kernel
/// gives this process's namespaces), as a descriptor of its root.
pub fn detached_mount(fs_type: &CStr) -> io::Result<OwnedFd> {
    // SAFETY: `fs_type` is NUL-terminated and outlives the call, which only reads it and
    // returns a new descriptor or -1.
    let ret = unsafe { libc::syscall(libc::SYS_fsopen, fs_type.as_ptr(), FSOPEN_CLOEXEC) };
    let context = owned(ret, "fsopen")?;
    // SAFETY: FSCONFIG_CMD_CREATE takes no key, value or aux (null, null, 0); it reads and
    // writes no memory of the caller.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_fsconfig,
            context.as_raw_fd(),
            FSCONFIG_CMD_CREATE,
            std::ptr::null::<libc::c_char>(),
            std::ptr::null::<libc::c_void>(),
            0,
        )
    };
    check(ret)?;
    // SAFETY: fsmount takes the context descriptor and two flag words; it returns a new
    // descriptor or -1 and touches no memory.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_fsmount,
            context.as_raw_fd(),
            FSMOUNT_CLOEXEC,
            MOUNT_ATTR_RDONLY,
        )
    };
    owned(ret, "fsmount")
}
