//! When what an exec's notification read is final: the conditions under which nothing can
//! change the exec's path, argv or program between the supervisor's answer and the kernel's
//! reading of them, so that an exec allowed at its notification needs no exec event.
//!
//! Memory: the kernel copies the path and argv from the caller's memory after the answer. The
//! caller waits in the kernel meanwhile, so only another task can change them, and:
//! - nobody shares the caller's memory when it is checked: its thread group has one thread
//!   (the link count of `/proc/PID/task`), and its parent does not share it (`kcmp(KCMP_VM)`
//!   with the parent from `PIDFD_GET_INFO`, which must have a memory of its own: a leader that
//!   exited before its threads compares as sharing nothing). The command's filter refuses
//!   `clone` with `CLONE_VM` unless `CLONE_THREAD` or `CLONE_VFORK` is set, and with
//!   `CLONE_PARENT`, so no process but a `vfork` parent can share it. A `vfork` child is not
//!   settled: its parent is suspended, but it can die meanwhile (any fatal signal, an alarm it
//!   set itself), and a dying task that shares its memory writes to it (its `clear_child_tid`,
//!   its robust futex list). Once nobody shares it, nobody can start to: a waiting caller
//!   creates nothing;
//! - what the notification read is read again after that check, and is the same
//!   ([`Settler::exec`]'s `read_again`): a thread that rewrote it and exited before the count
//!   is gone from the count, not from the memory;
//! - every byte of the path, of the pointer vector and of each argument lies in private
//!   memory nothing else changes (`PROCMAP_QUERY`): anonymous, or a private mapping of the
//!   caller's running executable (`ETXTBSY`) or of a file that resolves as a stable program
//!   does (below); not `MAP_SHARED`, not a writable file's pages (which another process could
//!   write through the file), not a special mapping such as `[vvar]`;
//! - nothing writes that memory asynchronously: io_uring, `userfaultfd`, ptrace,
//!   `process_vm_writev` are denied, and so are, in supervised commands, AIO (`io_setup`),
//!   lazily freed memory (`MADV_FREE`, by `madvise` or `process_madvise`) and droppable memory
//!   (`MAP_DROPPABLE`), whose pages read back as zeros once reclaimed; `/proc/PID/mem` does not
//!   open for writing under Landlock.
//!
//! Program: the kernel resolves the path again after the answer. It resolves to the same file
//! when every directory the resolution walks (symlinks followed, as the kernel does) and the
//! file itself are on read-only mounts (the mount view makes everything but the writable roots
//! read-only, and the command cannot mount or unmount), none of them is also shown by a
//! writable mount of the same filesystem (a host bind mount of a writable root elsewhere:
//! `/proc/self/mountinfo`), the path is absolute and not below
//! `/proc` (whose `self` and `fd` links name other things in the supervisor), and the file has
//! one link (no name in a writable root for the same inode). Such a file cannot be written
//! either, so what it is (a native ELF program that no `binfmt_misc` entry claims: not a
//! script, whose interpreter the kernel reads from it) holds. A path that names nothing there
//! (a try of a `PATH` search) fails in the kernel too; where the error is the same for every
//! caller ([`Settler::failure`]) the supervisor answers it with that error, and the caller's
//! memory, which the kernel then never reads, needs no check.
//!
//! Everything else goes to the exec event, as before.

use std::collections::{HashMap, HashSet};
use std::io::Read;
use std::os::fd::AsFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};

use nix::sys::statvfs::{FsFlags, statvfs};
use nix::unistd::Pid;

mod mounts;
mod process;

use super::formats::{self, Entry};
use super::tracee::ExecRead;
use crate::sys::memory;
use process::Process;

/// Why an exec goes on to its exec event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NotSettled(pub &'static str);

/// The most symlinks one resolution follows (the kernel's limit).
const MAX_LINKS: usize = 40;
/// The most mappings looked up for one exec.
const MAX_QUERIES: usize = 256;

/// The supervisor's memory of what it found settled.
#[derive(Debug)]
pub struct Settler {
    /// The `binfmt_misc` entries (see [`formats::registered`]).
    formats: Vec<Entry>,
    /// Directories found on read-only mounts (their entries cannot change), and whether
    /// anyone may search them (the execute bit for others).
    stable_dirs: HashMap<PathBuf, bool>,
    /// What the resolution of a path found: a stable file (device, inode), a stable absence,
    /// or why it is not settled. A path resolved through directories that cannot change
    /// resolves the same way for the whole session, and one that could is never settled: so
    /// every outcome is kept (up to [`MAX_KEPT`] paths).
    resolved: HashMap<PathBuf, Result<Found, NotSettled>>,
    /// Files found to be native programs (device, inode).
    native: HashSet<(u64, u64)>,
    /// Whether the mount of a path is read-only (tests put a view of their own here).
    read_only: fn(&Path) -> bool,
    /// The view's mounts, read at the first check (the view is complete by then, and mounts
    /// cannot change in the sandbox); `None` until then, or when unreadable.
    mounts: Option<Option<mounts::Mounts>>,
}

/// The most resolutions kept.
const MAX_KEPT: usize = 4096;

/// What the resolution of a path found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Found {
    /// A regular file, on a read-only mount, with one link.
    File((u64, u64)),
    /// Nothing the kernel can run: it fails the exec; with the error it fails with for any
    /// caller, where that is known (see [`Settler::failure`]).
    Fails(Option<i32>),
}

impl Settler {
    pub fn new(formats: Vec<Entry>) -> Settler {
        Settler {
            formats,
            stable_dirs: HashMap::new(),
            resolved: HashMap::new(),
            native: HashSet::new(),
            read_only,
            mounts: None,
        }
    }

    /// Whether the exec `read`, whose file the notification found to be `file`, is final as
    /// read (see the module docs). `read_again` reads the exec's arguments again from the
    /// caller's memory, after it is shown that nobody else can write it.
    pub fn exec(
        &mut self,
        pid: Pid,
        read: &ExecRead,
        file: &std::fs::Metadata,
        read_again: impl FnOnce() -> Option<ExecRead>,
    ) -> Result<(), NotSettled> {
        let id = match self.resolve(&read.path)? {
            Found::File(id) => id,
            Found::Fails(_) => return Err(NotSettled("the file changed since it was found")),
        };
        if id != (file.dev(), file.ino()) {
            return Err(NotSettled("the file changed since it was found"));
        }
        if !self.native.contains(&id) {
            let head = head_of(&read.path).ok_or(NotSettled("the file cannot be read"))?;
            if !formats::native_elf(&head) {
                return Err(NotSettled("not a native ELF program"));
            }
            self.native.insert(id);
        }
        // An extension entry matches the path as named; a magic one, checked with the file's
        // identity above, the content.
        let path = read.path.as_os_str().as_bytes();
        if self
            .formats
            .iter()
            .any(|e| matches!(e, Entry::Extension(_)) && e.claims(path, &[]))
        {
            return Err(NotSettled("a binfmt_misc entry claims the file"));
        }
        if self
            .formats
            .iter()
            .any(|e| matches!(e, Entry::Magic { .. }))
        {
            let head = head_of(&read.path).ok_or(NotSettled("the file cannot be read"))?;
            if self.formats.iter().any(|e| e.claims(path, &head)) {
                return Err(NotSettled("a binfmt_misc entry claims the file"));
            }
        }
        self.memory_settled(pid, &read.extents, || {
            read_again().is_some_and(|again| {
                (&again.path, &again.argv, &again.extents)
                    == (&read.path, &read.argv, &read.extents)
            })
        })
    }

    /// Whether an exec of `path`, which the notification did not find, fails in the kernel
    /// too, whatever else the caller passed: the path cannot change (`extent` is where it is
    /// in the caller's memory) and names nothing that can come into existence. `read_again`
    /// reads the path and its extent again, as [`Settler::exec`]'s does.
    pub fn missing(
        &mut self,
        pid: Pid,
        path: &Path,
        extent: (u64, u64),
        read_again: impl FnOnce() -> Option<(PathBuf, (u64, u64))>,
    ) -> Result<(), NotSettled> {
        match self.resolve(path)? {
            Found::Fails(_) => self.memory_settled(pid, &[extent], || {
                read_again().is_some_and(|(p, e)| p == path && e == extent)
            }),
            Found::File(_) => Err(NotSettled("the file appeared since it was looked for")),
        }
    }

    /// The error the kernel's exec of `path`, which the notification did not find, fails with
    /// for any caller, where the supervisor may answer it with that error instead of letting
    /// the call go on: the path names nothing, through directories that cannot change and
    /// that anyone may search, at a step that is missing (`ENOENT`) or not a directory
    /// (`ENOTDIR`). Failing an exec runs nothing, so the caller's memory does not matter: the
    /// kernel never reads it. Other failures (a directory, a device, a loop of symlinks) are
    /// left to the kernel.
    pub fn failure(&mut self, path: &Path) -> Option<i32> {
        // A longer path fails before any lookup (`ENAMETOOLONG`).
        let limit = usize::try_from(nix::libc::PATH_MAX).unwrap_or(0);
        if path.as_os_str().len() >= limit {
            return None;
        }
        match self.resolve(path) {
            Ok(Found::Fails(errno)) => errno,
            Ok(Found::File(_)) | Err(_) => None,
        }
    }

    /// Resolves `path` as the kernel will, if every step is on a read-only mount.
    fn resolve(&mut self, path: &Path) -> Result<Found, NotSettled> {
        if !path.is_absolute() {
            return Err(NotSettled("a relative path"));
        }
        if let Some(&found) = self.resolved.get(path) {
            return found;
        }
        let found = self.walk(path);
        if self.resolved.len() < MAX_KEPT {
            self.resolved.insert(path.to_path_buf(), found);
        }
        found
    }

    fn walk(&mut self, path: &Path) -> Result<Found, NotSettled> {
        let mut at = PathBuf::from("/");
        let mut todo: Vec<std::ffi::OsString> = components(path);
        let mut links = 0;
        // Whether every directory walked so far may be searched by anyone: then a step that
        // is missing fails the same way for every caller.
        let mut searchable = true;
        while let Some(name) = todo.pop() {
            match name.as_bytes() {
                b"." => continue,
                b".." => {
                    at.pop();
                    continue;
                }
                _ => {}
            }
            searchable &= self.stable_dir(&at)?;
            let next = at.join(&name);
            let meta = match std::fs::symlink_metadata(&next) {
                Ok(meta) => meta,
                Err(e) => {
                    return match e.raw_os_error() {
                        Some(errno @ (nix::libc::ENOENT | nix::libc::ENOTDIR)) => {
                            Ok(Found::Fails(searchable.then_some(errno)))
                        }
                        _ => Err(NotSettled("a step of the path cannot be looked up")),
                    };
                }
            };
            if meta.file_type().is_symlink() {
                links += 1;
                if links > MAX_LINKS {
                    return Ok(Found::Fails(None));
                }
                let target = std::fs::read_link(&next)
                    .map_err(|_| NotSettled("a symlink cannot be read"))?;
                if target.is_absolute() {
                    at = PathBuf::from("/");
                }
                todo.extend(components(&target));
            } else if meta.is_dir() {
                at = next;
            } else if !todo.is_empty() {
                // A file in the middle of the path: the kernel fails with ENOTDIR.
                return Ok(Found::Fails(searchable.then_some(nix::libc::ENOTDIR)));
            } else if !meta.is_file() {
                return Ok(Found::Fails(None));
            } else {
                if !(self.read_only)(&next) {
                    return Err(NotSettled("the file is on a writable mount"));
                }
                self.not_writable_elsewhere(&next)?;
                if meta.nlink() != 1 {
                    return Err(NotSettled("the file has more than one link"));
                }
                return Ok(Found::File((meta.dev(), meta.ino())));
            }
        }
        // The path ends at a directory: the kernel fails with EACCES.
        Ok(Found::Fails(None))
    }

    /// Whether `dir` is on a read-only mount (its entries cannot change), and then whether
    /// anyone may search it.
    fn stable_dir(&mut self, dir: &Path) -> Result<bool, NotSettled> {
        if let Some(&searchable) = self.stable_dirs.get(dir) {
            return Ok(searchable);
        }
        if dir.starts_with("/proc") {
            return Err(NotSettled("a path below /proc"));
        }
        if !(self.read_only)(dir) {
            return Err(NotSettled("a directory of the path is on a writable mount"));
        }
        self.not_writable_elsewhere(dir)?;
        // Searchable by others, and no ACL that could grant a named user less.
        let searchable = std::fs::metadata(dir).is_ok_and(|m| m.mode() & 0o001 != 0)
            && std::ffi::CString::new(dir.as_os_str().as_bytes())
                .is_ok_and(|c| crate::sys::has_access_acl(&c).is_ok_and(|acl| !acl));
        self.stable_dirs.insert(dir.to_path_buf(), searchable);
        Ok(searchable)
    }

    /// A read-only mount's view of a directory or file that a writable mount also shows (a
    /// bind mount, on the host, of a writable root) can change through that mount.
    fn not_writable_elsewhere(&mut self, path: &Path) -> Result<(), NotSettled> {
        let mounts = self
            .mounts
            .get_or_insert_with(mounts::Mounts::of_this_process);
        match mounts {
            Some(mounts) if !mounts.writable_elsewhere(path) => Ok(()),
            Some(_) => Err(NotSettled("a writable mount shows the same directory")),
            None => Err(NotSettled("the mounts cannot be read")),
        }
    }
}

/// The components of `path` after its root, last first (a stack to pop).
fn components(path: &Path) -> Vec<std::ffi::OsString> {
    let mut out: Vec<std::ffi::OsString> = path
        .components()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(n.to_os_string()),
            Component::ParentDir => Some("..".into()),
            Component::CurDir | Component::RootDir | Component::Prefix(_) => None,
        })
        .collect();
    out.reverse();
    out
}

fn read_only(path: &Path) -> bool {
    statvfs(path).is_ok_and(|s| s.flags().contains(FsFlags::ST_RDONLY))
}

/// The first [`formats::HEAD`] bytes of the file at `path` (never blocking on a FIFO).
fn head_of(path: &Path) -> Option<Vec<u8>> {
    let mut file = super::open_program(path).ok()?;
    let mut head = Vec::with_capacity(formats::HEAD);
    file.by_ref()
        .take(formats::HEAD as u64)
        .read_to_end(&mut head)
        .ok()?;
    Some(head)
}

impl Settler {
    /// Whether nothing but `pid` can write `extents` of its memory while it waits, and they
    /// still hold what was read (`unchanged`, asked once nobody else can write them; see the
    /// module docs).
    fn memory_settled(
        &mut self,
        pid: Pid,
        extents: &[(u64, u64)],
        unchanged: impl FnOnce() -> bool,
    ) -> Result<(), NotSettled> {
        let caller_pid = pid.as_raw();
        // The parent first, from a pidfd: a vfork child is told without making the `/proc`
        // entries of a new pid.
        let parent = process::parent_by_pidfd(caller_pid);
        if let Some(parent) = parent {
            not_shared_with(caller_pid, parent)?;
        }
        let mut caller = Process::open(caller_pid)?;
        if !caller.one_thread()? {
            return Err(NotSettled("the process has other threads"));
        }
        if parent.is_none() {
            let (threads, parent) = caller.threads_and_parent()?;
            if threads != 1 {
                return Err(NotSettled("the process has other threads"));
            }
            not_shared_with(caller_pid, parent)?;
        }
        // Nobody else can write it from now on; before, a thread may have, and exited.
        if !unchanged() {
            return Err(NotSettled("the arguments changed since they were read"));
        }
        let maps = caller.maps()?;
        // The mappings found so far, each checked once: the strings of an exec are often in
        // two (a program's constants, the stack), alternating.
        let mut found: Vec<memory::Mapping> = Vec::new();
        let mut queries = 0;
        for &(start, len) in extents {
            let end = start
                .checked_add(len)
                .ok_or(NotSettled("an argument wraps"))?;
            let mut at = start;
            while at < end {
                if let Some(m) = found.iter().find(|m| m.start <= at && at < m.end) {
                    at = m.end;
                    continue;
                }
                queries += 1;
                if queries > MAX_QUERIES {
                    return Err(NotSettled("the arguments span too many mappings"));
                }
                let mapping = memory::mapping_at(maps.as_fd(), at)
                    .map_err(|_| NotSettled("the process's mappings cannot be read"))?
                    .filter(|m| m.start <= at)
                    .ok_or(NotSettled("an argument is not mapped"))?;
                if !private_anonymous(&mapping) && !self.unwritable_file(&mut caller, &mapping) {
                    return Err(NotSettled("an argument is in memory others can write"));
                }
                at = mapping.end;
                found.push(mapping);
            }
        }
        Ok(())
    }

    /// Whether `mapping` of `caller` is a private mapping of a file nothing can write, so that
    /// its pages (the file's, or the process's own copies once written) cannot change: the
    /// process's own executable (which cannot be opened for writing while it runs: `ETXTBSY`),
    /// or a file whose name resolves through read-only directories to the same file with one
    /// link (a library: the strings of `system`'s `sh -c`).
    fn unwritable_file(&mut self, caller: &mut Process, mapping: &memory::Mapping) -> bool {
        use nix::sys::stat::{major, minor};
        if mapping.shared || !mapping.file_backed {
            return false;
        }
        let same = |(dev, ino): (u64, u64)| {
            (
                u32::try_from(major(dev)).ok(),
                u32::try_from(minor(dev)).ok(),
            ) == (Some(mapping.device.0), Some(mapping.device.1))
                && ino == mapping.inode
        };
        // A file that resolves through read-only directories to one link cannot be written
        // (the resolution is kept: no syscall after the first), whatever its name is now.
        let name = Path::new(std::ffi::OsStr::from_bytes(&mapping.name));
        if name.is_absolute() && matches!(self.resolve(name), Ok(Found::File(id)) if same(id)) {
            return true;
        }
        caller.exe().is_some_and(same)
    }
}

/// Whether the memory of `pid` is not shared with its parent `parent` (0: outside the PID
/// namespace). The parent reported is a thread group, and `kcmp` compares its leader, so the
/// leader must have a memory (not one that exited before its threads).
fn not_shared_with(pid: i32, parent: i32) -> Result<(), NotSettled> {
    if parent <= 0 {
        return Ok(());
    }
    match memory::same_memory(pid, parent) {
        Ok(false) if memory::has_memory(parent).unwrap_or(false) => Ok(()),
        Ok(true) => Err(NotSettled("a vfork child shares its parent's memory")),
        Ok(false) | Err(_) => Err(NotSettled("the parent's memory cannot be compared")),
    }
}

/// Memory only its process (and the processes it was forked into, copy on write) has.
fn private_anonymous(mapping: &memory::Mapping) -> bool {
    let name = mapping.name.as_slice();
    !mapping.shared
        && !mapping.file_backed
        && (name.is_empty()
            || name == b"[heap]"
            || name == b"[stack]"
            || name.starts_with(b"[anon:"))
}

#[cfg(test)]
mod tests;
