//! What the settler reads of a waiting caller through its `/proc/PID` directory, opened once
//! per check: every entry is then one lookup in that directory, not a walk from `/proc` (the
//! first lookup of a new pid makes its entries, which is most of what they cost).

use std::io::Read;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use nix::fcntl::{AtFlags, OFlag, openat};
use nix::sys::stat::{Mode, fstatat};

use super::NotSettled;
use crate::sys::{self, memory};

/// A process's `/proc/PID` directory, and what was read of it.
pub(super) struct Process {
    dir: OwnedFd,
    /// The device and inode of its executable, once looked up (`None` inside: unreadable).
    exe: Option<Option<(u64, u64)>>,
}

const UNREADABLE: NotSettled = NotSettled("the process's status cannot be read");

impl Process {
    pub(super) fn open(pid: i32) -> Result<Process, NotSettled> {
        let dir = nix::fcntl::open(
            format!("/proc/{pid}").as_str(),
            OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .map_err(|_| UNREADABLE)?;
        Ok(Process { dir, exe: None })
    }

    /// Whether its thread group has one thread: the link count of `task` is two, and one per
    /// thread (the kernel adds the count of the thread group when it reports it), which is
    /// cheaper than making and reading `stat`.
    pub(super) fn one_thread(&self) -> Result<bool, NotSettled> {
        let task = fstatat(self.dir.as_fd(), "task", AtFlags::empty()).map_err(|_| UNREADABLE)?;
        Ok(task.st_nlink == 3)
    }

    /// Its thread count and parent from `stat`, where [`parent_by_pidfd`] finds none.
    pub(super) fn threads_and_parent(&self) -> Result<(u64, i32), NotSettled> {
        threads_and_parent_at(self.dir.as_fd())
    }

    /// Its `maps`, for `PROCMAP_QUERY`.
    pub(super) fn maps(&self) -> Result<OwnedFd, NotSettled> {
        openat(
            self.dir.as_fd(),
            "maps",
            OFlag::O_RDONLY | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .map_err(|_| NotSettled("the process's mappings cannot be read"))
    }

    /// The device and inode of the file it runs (`exe`, followed), looked up once.
    pub(super) fn exe(&mut self) -> Option<(u64, u64)> {
        let dir = self.dir.as_fd();
        *self.exe.get_or_insert_with(|| {
            fstatat(dir, "exe", AtFlags::empty())
                .ok()
                .map(|st| (st.st_dev, st.st_ino))
        })
    }
}

/// The parent of `pid` from a pidfd (`PIDFD_GET_INFO`, Linux 6.13): `None` where the kernel
/// has not that request or `pid` names no thread-group leader.
pub(super) fn parent_by_pidfd(pid: i32) -> Option<i32> {
    sys::pidfd_open(pid)
        .and_then(|fd| memory::parent_of(fd.as_fd()))
        .ok()
}

/// The longest `stat` line read: 52 fields of at most 20 digits and a command of at most 64
/// bytes fit.
const STAT_MAX: usize = 2048;

pub(super) fn threads_and_parent_at(dir: BorrowedFd<'_>) -> Result<(u64, i32), NotSettled> {
    let fd = openat(
        dir,
        "stat",
        OFlag::O_RDONLY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(|_| UNREADABLE)?;
    let mut file = std::fs::File::from(fd);
    // One read returns the whole line (it is made at the first read), which ends in a
    // newline: no second read to see the end.
    let mut line = [0u8; STAT_MAX];
    let mut len = 0;
    while !line[..len].ends_with(b"\n") {
        match file.read(&mut line[len..]) {
            Ok(0) | Err(_) => return Err(UNREADABLE),
            Ok(n) => len += n,
        }
        if len == line.len() {
            return Err(UNREADABLE);
        }
    }
    parse_stat(&line[..len]).ok_or(UNREADABLE)
}

/// `(num_threads, ppid)` of a `/proc/PID/stat` line: after the command's closing parenthesis,
/// state, ppid, then 15 fields, then num_threads.
pub(super) fn parse_stat(stat: &[u8]) -> Option<(u64, i32)> {
    let close = stat.iter().rposition(|b| *b == b')')?;
    let rest = std::str::from_utf8(stat.get(close + 2..)?).ok()?;
    let mut fields = rest.split_ascii_whitespace();
    let parent = fields.nth(1)?.parse().ok()?;
    let threads = fields.nth(15)?.parse().ok()?;
    Some((threads, parent))
}
