//! What the exec supervisor asks the kernel about another process's memory: whether two
//! processes share it (`kcmp`), which mapping holds an address (`PROCMAP_QUERY`), and which
//! process is a process's parent (`PIDFD_GET_INFO`), the one that may share it after `vfork`.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

use nix::libc;

use super::check;

/// `KCMP_VM` (include/uapi/linux/kcmp.h).
const KCMP_VM: libc::c_int = 1;
/// `_IOWR('f', 17, struct procmap_query)` (include/uapi/linux/fs.h, Linux 6.11).
const PROCMAP_QUERY: libc::c_ulong = 0xC068_6611;
/// `PROCMAP_QUERY_VMA_SHARED`.
const VMA_SHARED: u64 = 0x08;

/// Whether processes `a` and `b` share one memory (`kcmp(a, b, KCMP_VM)`).
pub fn same_memory(a: i32, b: i32) -> io::Result<bool> {
    // SAFETY: kcmp with KCMP_VM compares two processes' `mm` and takes no pointers (idx1 and
    // idx2 are unused for this type); it reads and writes no memory of the caller.
    let ret = unsafe { libc::syscall(libc::SYS_kcmp, a, b, KCMP_VM, 0usize, 0usize) };
    Ok(check(ret)? == 0)
}

/// Whether process `pid` has a memory (`mm`) at all: a thread-group leader that has exited
/// while its other threads run on has none, and `kcmp` then finds it sharing nobody's, whatever
/// its threads share. Told by reading one byte at address 0 of it (`process_vm_readv`): the
/// kernel looks the memory up before the address, so `ESRCH` means none (or no such process),
/// and a fault (or, where page 0 is mapped, the byte) means one.
pub fn has_memory(pid: i32) -> io::Result<bool> {
    let mut byte = 0u8;
    let local = libc::iovec {
        iov_base: (&raw mut byte).cast(),
        iov_len: 1,
    };
    let remote = libc::iovec {
        iov_base: std::ptr::null_mut(),
        iov_len: 1,
    };
    // SAFETY: process_vm_readv writes at most `local.iov_len` (1) bytes to `local.iov_base`,
    // the live `byte`, and reads the other process's memory only; `remote` is not
    // dereferenced here.
    let ret = unsafe { libc::process_vm_readv(pid, &raw const local, 1, &raw const remote, 1, 0) };
    match check(ret as libc::c_long) {
        Ok(_) => Ok(true),
        Err(e) => match e.raw_os_error() {
            Some(libc::EFAULT) => Ok(true),
            Some(libc::ESRCH) => Ok(false),
            _ => Err(e),
        },
    }
}

/// `PIDFD_GET_INFO`: `_IOWR(0xFF, 11, struct pidfd_info)` of its first version (64 bytes,
/// Linux 6.13).
const PIDFD_GET_INFO: libc::c_ulong = 0xC040_FF0B;
/// `PIDFD_INFO_PID`: the pid, tgid and ppid fields are wanted.
const PIDFD_INFO_PID: u64 = 0x01;

/// `struct pidfd_info`, its first version.
#[repr(C)]
#[derive(Default)]
struct PidfdInfo {
    mask: u64,
    cgroupid: u64,
    pid: u32,
    tgid: u32,
    ppid: u32,
    ids: [u32; 8],
    exit_code: i32,
}

const _: () = assert!(std::mem::size_of::<PidfdInfo>() == 64);

/// The parent of the process whose pidfd is `pidfd` (`PIDFD_GET_INFO`; `ENOTTY` or `EINVAL`
/// before Linux 6.13, `ESRCH` once it has exited).
pub fn parent_of(pidfd: BorrowedFd<'_>) -> io::Result<i32> {
    let mut info = PidfdInfo {
        mask: PIDFD_INFO_PID,
        ..PidfdInfo::default()
    };
    // SAFETY: PIDFD_GET_INFO reads the `mask` of and writes at most the size the request
    // encodes (64 bytes, the size of `PidfdInfo`) to the live `info`.
    let ret = unsafe { libc::ioctl(pidfd.as_raw_fd(), PIDFD_GET_INFO, &raw mut info) };
    check(ret.into())?;
    if info.mask & PIDFD_INFO_PID == 0 {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    i32::try_from(info.ppid).map_err(|_| io::Error::from_raw_os_error(libc::ERANGE))
}

/// `struct procmap_query`.
#[repr(C)]
#[derive(Default)]
struct ProcmapQuery {
    size: u64,
    query_flags: u64,
    query_addr: u64,
    vma_start: u64,
    vma_end: u64,
    vma_flags: u64,
    vma_page_size: u64,
    vma_offset: u64,
    inode: u64,
    dev_major: u32,
    dev_minor: u32,
    vma_name_size: u32,
    build_id_size: u32,
    vma_name_addr: u64,
    build_id_addr: u64,
}

/// A mapping of another process, as `PROCMAP_QUERY` describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mapping {
    /// Its first address and the one after its last.
    pub start: u64,
    pub end: u64,
    /// `MAP_SHARED` (or shared memory).
    pub shared: bool,
    /// A file backs it (its inode, or a device: any file, special or not).
    pub file_backed: bool,
    /// The backing file's device (major, minor) and inode, when `file_backed`.
    pub device: (u32, u32),
    /// See `device`.
    pub inode: u64,
    /// The kernel's name for it: `[heap]`, `[stack]`, `[vdso]`, `[anon:NAME]`, a path, or empty.
    pub name: Vec<u8>,
}

/// The mapping holding `addr` in the process whose `/proc/PID/maps` is `maps`; `None` when no
/// mapping holds it.
pub fn mapping_at(maps: BorrowedFd<'_>, addr: u64) -> io::Result<Option<Mapping>> {
    const NAME: u32 = 256;
    let mut name = [0u8; NAME as usize];
    let mut query = ProcmapQuery {
        size: std::mem::size_of::<ProcmapQuery>() as u64,
        query_addr: addr,
        vma_name_size: NAME,
        vma_name_addr: name.as_mut_ptr() as u64,
        ..ProcmapQuery::default()
    };
    // SAFETY: PROCMAP_QUERY reads `size` bytes of the live `query` and writes its out fields,
    // and writes at most `vma_name_size` bytes to `name`, a live local buffer of that length;
    // no build id is asked for (size 0, null address).
    let ret = unsafe { libc::ioctl(maps.as_raw_fd(), PROCMAP_QUERY, &mut query) };
    match check(ret.into()) {
        Ok(_) => {}
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(None),
        Err(e) => return Err(e),
    }
    let len = usize::try_from(query.vma_name_size)
        .unwrap_or(0)
        .min(name.len());
    // The size counts the terminating NUL.
    let name = name[..len]
        .split(|b| *b == 0)
        .next()
        .unwrap_or(&[])
        .to_vec();
    Ok(Some(Mapping {
        start: query.vma_start,
        end: query.vma_end,
        shared: query.vma_flags & VMA_SHARED != 0,
        file_backed: query.inode != 0 || query.dev_major != 0 || query.dev_minor != 0,
        device: (query.dev_major, query.dev_minor),
        inode: query.inode,
        name,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_running_process_has_a_memory_and_one_that_has_exited_has_none() {
        use nix::sys::wait::{Id, WaitPidFlag, waitid};
        assert!(has_memory(i32::try_from(std::process::id()).unwrap()).unwrap());
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = i32::try_from(child.id()).unwrap();
        // Exited and not reaped: a zombie, whose memory is gone.
        waitid(
            Id::Pid(nix::unistd::Pid::from_raw(pid)),
            WaitPidFlag::WEXITED | WaitPidFlag::WNOWAIT,
        )
        .unwrap();
        assert!(!has_memory(pid).unwrap());
        child.wait().unwrap();
    }

    #[test]
    fn the_query_struct_has_the_kernels_size() {
        assert_eq!(std::mem::size_of::<ProcmapQuery>(), 0x68);
    }
}
