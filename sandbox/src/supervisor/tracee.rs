//! Reading what a stopped tracee is about to exec, or has just exec'd.
//!
//! Before the exec (the seccomp stop at `execve`/`execveat` entry) the arguments are pointers
//! into the caller's memory, read with `process_vm_readv`; another thread sharing that memory
//! can change them afterwards, so this reading is advisory (it lets the caller get `EACCES`).
//! After the exec (`PTRACE_EVENT_EXEC`, the new program loaded and not yet run, its process
//! single-threaded with a memory of its own) its arguments, `/proc/PID/environ` and `exe` are
//! final: nothing else can write them, and this reading decides.
//!
//! Reads are batched, since each is a syscall at every exec: the pages of the path and of the
//! pointer vector in one `process_vm_readv` (strings that start in those pages need no other
//! read), then the start of every other string in one more; only a string longer than its
//! first read, or one that could not be read in the batch, is read on its own. After the exec
//! the arguments come from the new stack ([`super::stack`]).

use std::collections::BTreeMap;
use std::io::{IoSliceMut, Read};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use nix::sys::uio::{RemoteIoVec, process_vm_readv};
use nix::unistd::Pid;

/// The most bytes of arguments plus environment read from one exec (the kernel's own limit is
/// a quarter of the stack limit; 2 MiB covers the default 8 MiB stack).
pub const MAX_ARG_BYTES: usize = 4 << 20;
/// The most pointers read from one argument or environment vector.
pub const MAX_POINTERS: usize = 1 << 17;
/// Remote reads never cross a boundary of this size, so that one region is either all mapped
/// or not at all (every page size is a multiple of it).
const PAGE: u64 = 4096;
/// The first read of a string reads at most this many bytes (most arguments are shorter).
const FIRST_READ: u64 = 256;
/// The most pointers read in the first batch (more follow page by page).
const FIRST_POINTERS: u64 = 128;
/// The most regions in one `process_vm_readv` (below `IOV_MAX`).
const BATCH: usize = 512;

/// One exec, as read from the tracee.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExecRead {
    /// The file: the path as named (before), resolved against the working directory when
    /// relative; after the exec empty until [`ExecRead::program`] asks (only a record needs
    /// it).
    pub path: PathBuf,
    /// The arguments.
    pub argv: Vec<String>,
    /// The working directory, when it was read (a relative path needed it); see
    /// [`ExecRead::cwd`].
    pub cwd: Option<PathBuf>,
    /// Where the environment vector is in the caller's memory (before the exec; read it
    /// with [`env_before_exec`] when needed); 0 after the exec ([`env_after_exec`]).
    pub envp: u64,
}

impl ExecRead {
    /// The working directory of `pid`, which made this exec.
    pub fn cwd(&self, pid: Pid) -> Result<PathBuf, Unreadable> {
        match &self.cwd {
            Some(cwd) => Ok(cwd.clone()),
            None => cwd_of(pid),
        }
    }

    /// The file, for a record: the path the exec named, or what `/proc/PID/exe` is.
    pub fn program(&self, pid: Pid) -> PathBuf {
        if self.path.as_os_str().is_empty() {
            std::fs::read_link(format!("/proc/{pid}/exe")).unwrap_or_default()
        } else {
            self.path.clone()
        }
    }
}

/// Why a tracee could not be read.
#[derive(Debug)]
pub struct Unreadable(pub String);

fn lossy(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn parse_env(entries: impl IntoIterator<Item = Vec<u8>>) -> BTreeMap<String, String> {
    entries
        .into_iter()
        .filter_map(|e| {
            let text = lossy(&e);
            text.split_once('=')
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
        })
        .collect()
}

/// The working directory of `pid`.
pub fn cwd_of(pid: Pid) -> Result<PathBuf, Unreadable> {
    std::fs::read_link(format!("/proc/{pid}/cwd"))
        .map_err(|e| Unreadable(format!("the working directory of pid {pid}: {e}")))
}

/// The exec `pid` has just made (stopped at `PTRACE_EVENT_EXEC`), and what the executed file
/// is (`stat` of `/proc/PID/exe`: the file the kernel mapped). The arguments come from the new
/// stack ([`super::stack`]), or from `/proc/PID/cmdline` where that stack is not laid out as
/// the ELF loader lays it (`scratch` is reused from exec to exec).
pub fn after_exec(
    pid: Pid,
    scratch: &mut super::stack::Scratch,
) -> Result<(ExecRead, std::fs::Metadata), Unreadable> {
    let argv = match super::stack::argv_at_exec(pid, scratch)? {
        Some(argv) => argv,
        None => cmdline(pid)?,
    };
    let exe = proc_path(pid, "exe");
    let exe = std::fs::metadata(exe.as_path())
        .map_err(|e| Unreadable(format!("/proc/{pid}/exe: {e}")))?;
    Ok((
        ExecRead {
            path: PathBuf::new(),
            argv,
            cwd: None,
            envp: 0,
        },
        exe,
    ))
}

/// `/proc/PID/WHAT` without an allocation (it is made at every exec).
pub struct ProcPath {
    bytes: [u8; 48],
    len: usize,
}

impl ProcPath {
    pub fn as_path(&self) -> &Path {
        Path::new(std::ffi::OsStr::from_bytes(&self.bytes[..self.len]))
    }
}

/// `/proc/PID/WHAT` (`what` is one of this module's short names).
pub fn proc_path(pid: Pid, what: &str) -> ProcPath {
    use std::io::Write;
    let mut bytes = [0u8; 48];
    let len = {
        let mut out = &mut bytes[..];
        // A pid has at most 10 digits and `what` is short: it always fits.
        let _ = write!(out, "/proc/{pid}/{what}");
        48 - out.len()
    };
    ProcPath { bytes, len }
}

/// The arguments of `pid` (`/proc/PID/cmdline`).
pub fn cmdline(pid: Pid) -> Result<Vec<String>, Unreadable> {
    let bytes = read_proc(pid, "cmdline")?;
    Ok(split_nul(&bytes).iter().map(|a| lossy(a)).collect())
}

/// The first read of a `/proc` file: most command lines fit, and a read that does not fill the
/// buffer has reached the end (these files fill a read as far as they go). Small, since the
/// buffer is zeroed at every exec (64 KiB of it were 6 % of the supervisor's CPU).
const FIRST_PROC_READ: usize = 4 << 10;

/// `/proc/PID/WHAT`, read whole: usually one read (no size query first: `/proc` files say 0).
fn read_proc(pid: Pid, what: &str) -> Result<Vec<u8>, Unreadable> {
    let fail = |e: std::io::Error| Unreadable(format!("/proc/{pid}/{what}: {e}"));
    let mut file = std::fs::File::open(proc_path(pid, what).as_path()).map_err(fail)?;
    let mut out = vec![0u8; FIRST_PROC_READ];
    let mut len = 0;
    loop {
        match file.read(&mut out[len..]) {
            Ok(0) => break,
            Ok(n) => {
                len += n;
                if len < out.len() {
                    break;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(fail(e)),
        }
        if len > MAX_ARG_BYTES {
            return Err(Unreadable(format!("/proc/{pid}/{what}: too long to read")));
        }
        if len == out.len() {
            out.resize(out.len() * 2, 0);
        }
    }
    out.truncate(len);
    Ok(out)
}

fn split_nul(bytes: &[u8]) -> Vec<Vec<u8>> {
    let mut parts: Vec<Vec<u8>> = bytes.split(|b| *b == 0).map(<[u8]>::to_vec).collect();
    if parts.last().is_some_and(Vec::is_empty) {
        parts.pop();
    }
    parts
}

/// The environment of `pid`, stopped right after its exec.
pub fn env_after_exec(pid: Pid) -> Result<BTreeMap<String, String>, Unreadable> {
    Ok(parse_env(split_nul(&read_proc(pid, "environ")?)))
}

/// The environment `pid` passes to the exec it is about to make (see [`ExecRead::envp`]).
pub fn env_before_exec(pid: Pid, envp: u64) -> Result<BTreeMap<String, String>, Unreadable> {
    let mut budget = MAX_ARG_BYTES;
    let first = first_pointers(pid, envp)?;
    Ok(parse_env(read_vector(pid, envp, first, &[], &mut budget)?))
}

/// A region of the tracee's memory, within one [`PAGE`].
#[derive(Debug, Clone, Copy)]
struct Region {
    at: u64,
    len: usize,
}

/// The region from `at` of at most `most` bytes that stays within `at`'s page.
fn region(at: u64, most: u64) -> Region {
    let to_page_end = PAGE - at % PAGE;
    Region {
        at,
        len: usize::try_from(to_page_end.min(most)).unwrap_or(0),
    }
}

/// Reads `regions` of `pid` with one `process_vm_readv`: the bytes of each, or `None` for
/// each region from the first one that is not mapped (the kernel stops there).
fn read_regions(pid: Pid, regions: &[Region]) -> Result<Vec<Option<Vec<u8>>>, Unreadable> {
    let mut bufs: Vec<Vec<u8>> = regions.iter().map(|r| vec![0u8; r.len]).collect();
    let mut remote = Vec::with_capacity(regions.len());
    for r in regions {
        let base =
            usize::try_from(r.at).map_err(|_| Unreadable("an address out of range".into()))?;
        remote.push(RemoteIoVec { base, len: r.len });
    }
    let got = {
        let mut local: Vec<IoSliceMut<'_>> = bufs.iter_mut().map(|b| IoSliceMut::new(b)).collect();
        match process_vm_readv(pid, &mut local, &remote) {
            Ok(n) => n,
            // The first region is not mapped.
            Err(nix::errno::Errno::EFAULT) => 0,
            Err(e) => return Err(Unreadable(format!("reading the memory of pid {pid}: {e}"))),
        }
    };
    // A region within one page is read whole or not at all, so the count says which were.
    let mut left = got;
    Ok(bufs
        .into_iter()
        .map(|b| {
            if left >= b.len() {
                left -= b.len();
                Some(b)
            } else {
                left = 0;
                None
            }
        })
        .collect())
}

/// Reads the whole pages at `starts` of `pid` into `scratch` with one `process_vm_readv`: those
/// read, until the first that is not mapped.
fn read_pages<'a>(
    pid: Pid,
    starts: &[u64],
    scratch: &'a mut super::stack::Scratch,
) -> Result<Vec<(u64, &'a [u8])>, Unreadable> {
    let page = usize::try_from(PAGE).unwrap_or(4096);
    let buf = scratch.get(starts.len() * page);
    let mut remote = Vec::with_capacity(starts.len());
    for &at in starts {
        let base = usize::try_from(at).map_err(|_| Unreadable("an address out of range".into()))?;
        remote.push(RemoteIoVec { base, len: page });
    }
    let got = {
        let mut local: Vec<IoSliceMut<'_>> = buf.chunks_mut(page).map(IoSliceMut::new).collect();
        match process_vm_readv(pid, &mut local, &remote) {
            Ok(n) => n,
            Err(nix::errno::Errno::EFAULT) => 0,
            Err(e) => return Err(Unreadable(format!("reading the memory of pid {pid}: {e}"))),
        }
    };
    // A page is read whole or not at all.
    Ok(starts
        .iter()
        .copied()
        .zip(buf.chunks(page))
        .take(got / page)
        .collect())
}

/// Reads `len` bytes at `addr` of `pid` within its page; `None` when that page is not mapped.
fn read_one(pid: Pid, at: u64, most: u64) -> Result<Option<Vec<u8>>, Unreadable> {
    Ok(read_regions(pid, &[region(at, most)])?.pop().flatten())
}

/// Finishes the NUL-terminated string that `start` (read at `addr`) begins, reading page by
/// page from where `start` ended, and charges it to `budget`.
fn finish_string(
    pid: Pid,
    addr: u64,
    start: Option<Vec<u8>>,
    budget: &mut usize,
) -> Result<Vec<u8>, Unreadable> {
    let mut out = Vec::new();
    let mut chunk = start;
    let mut at = addr;
    loop {
        let Some(bytes) = chunk
            .take()
            .map_or_else(|| read_one(pid, at, PAGE), |c| Ok(Some(c)))?
        else {
            return Err(Unreadable("a string runs into unmapped memory".into()));
        };
        if let Some(end) = bytes.iter().position(|b| *b == 0) {
            out.extend_from_slice(&bytes[..end]);
            break;
        }
        out.extend_from_slice(&bytes);
        if out.len() > *budget {
            return Err(Unreadable("the arguments are too long to read".into()));
        }
        at += u64::try_from(bytes.len()).unwrap_or(PAGE);
    }
    if out.len() > *budget {
        return Err(Unreadable("the arguments are too long to read".into()));
    }
    *budget = budget.saturating_sub(out.len() + 1);
    Ok(out)
}

/// Pages of the tracee read already, whole (their first address, their bytes): strings that
/// start in one are not read again.
type Pages<'a> = &'a [(u64, &'a [u8])];

/// The bytes from `at` to the end of its page, when that page is one of `pages`.
fn page_rest(pages: Pages<'_>, at: u64) -> Option<&[u8]> {
    let (base, bytes) = pages.iter().find(|(base, _)| at - at % PAGE == *base)?;
    bytes.get(usize::try_from(at - base).ok()?..)
}

/// The string at `at` up to its NUL (included), or to the end of its page, when that page is
/// one of `pages`.
fn in_pages(pages: Pages<'_>, at: u64) -> Option<Vec<u8>> {
    let rest = page_rest(pages, at)?;
    let end = rest
        .iter()
        .position(|b| *b == 0)
        .map_or(rest.len(), |nul| nul + 1);
    Some(rest[..end].to_vec())
}

/// The strings at `pointers`, their starts taken from `pages` or read in batches.
fn read_strings(
    pid: Pid,
    pointers: &[u64],
    pages: Pages<'_>,
    budget: &mut usize,
) -> Result<Vec<Vec<u8>>, Unreadable> {
    let mut out = Vec::with_capacity(pointers.len());
    for batch in pointers.chunks(BATCH) {
        let known: Vec<Option<Vec<u8>>> = batch.iter().map(|&p| in_pages(pages, p)).collect();
        let regions: Vec<Region> = batch
            .iter()
            .zip(&known)
            .filter(|(_, k)| k.is_none())
            .map(|(&p, _)| region(p, FIRST_READ))
            .collect();
        let mut starts = if regions.is_empty() {
            Vec::new()
        } else {
            read_regions(pid, &regions)?
        }
        .into_iter();
        for (&pointer, known) in batch.iter().zip(known) {
            let start = match known {
                Some(bytes) => Some(bytes),
                None => starts.next().flatten(),
            };
            out.push(finish_string(pid, pointer, start, budget)?);
        }
    }
    Ok(out)
}

fn first_pointers(pid: Pid, addr: u64) -> Result<Option<Vec<u8>>, Unreadable> {
    if addr == 0 {
        return Ok(Some(Vec::new()));
    }
    read_one(pid, addr, FIRST_POINTERS * 8)
}

/// A NULL-terminated vector of string pointers at `addr` (argv or envp; `0` is empty), whose
/// first bytes are `first` (read already: up to the end of its page, or [`first_pointers`]).
fn read_vector(
    pid: Pid,
    addr: u64,
    first: Option<Vec<u8>>,
    pages: Pages<'_>,
    budget: &mut usize,
) -> Result<Vec<Vec<u8>>, Unreadable> {
    if addr == 0 {
        return Ok(Vec::new());
    }
    if !addr.is_multiple_of(8) {
        return Err(Unreadable("a pointer vector that is not aligned".into()));
    }
    let mut pointers = Vec::new();
    let mut chunk = first;
    let mut at = addr;
    'read: loop {
        let Some(bytes) = chunk
            .take()
            .map_or_else(|| read_one(pid, at, PAGE), |c| Ok(Some(c)))?
        else {
            return Err(Unreadable(
                "a pointer vector runs into unmapped memory".into(),
            ));
        };
        if bytes.len() < 8 {
            return Err(Unreadable(
                "a pointer vector runs into unmapped memory".into(),
            ));
        }
        for word in bytes.chunks_exact(8) {
            let mut raw = [0u8; 8];
            raw.copy_from_slice(word);
            let pointer = u64::from_ne_bytes(raw);
            if pointer == 0 {
                break 'read;
            }
            if pointers.len() >= MAX_POINTERS {
                return Err(Unreadable("too many arguments to read".into()));
            }
            pointers.push(pointer);
        }
        at += u64::try_from(bytes.len()).unwrap_or(PAGE);
    }
    read_strings(pid, &pointers, pages, budget)
}

/// `AT_FDCWD`.
const AT_FDCWD: i64 = -100;
/// `AT_EMPTY_PATH`.
const AT_EMPTY_PATH: u64 = 0x1000;

/// What an exec waiting at its notification names.
#[derive(Debug)]
pub enum Pending<T> {
    /// The exec, and what the check of its file found.
    Exec(ExecRead, T),
    /// The check of the file failed (as the supervisor resolves the path: `/proc/self/fd/N`
    /// names its own descriptor, not the caller's).
    NoFile(Missing),
}

/// An exec of a file the supervisor did not find.
#[derive(Debug)]
pub struct Missing {
    /// The path, as the supervisor resolved it.
    pub path: PathBuf,
    /// It was relative (resolved against the working directory).
    pub relative: bool,
}

/// The exec `pid` is about to make: `execve(path, argv, envp)` or `execveat(dirfd, path,
/// argv, envp, flags)`, from the syscall's arguments (`execveat` tells which), and what
/// `file` says of the file it names (`stat`). When `file` fails, the arguments are not read:
/// a shell or `execvp` searching `PATH` makes several execs of missing files for each one
/// that runs, and the arguments are most of the reading.
pub fn before_exec<T>(
    pid: Pid,
    execveat: bool,
    args: [u64; 6],
    scratch: &mut super::stack::Scratch,
    file: impl FnOnce(&Path) -> std::io::Result<T>,
) -> Result<Pending<T>, Unreadable> {
    let (dirfd, path_at, argv_at, envp_at, flags) = if execveat {
        (
            i64::from_ne_bytes(args[0].to_ne_bytes()),
            args[1],
            args[2],
            args[3],
            args[4],
        )
    } else {
        (AT_FDCWD, args[0], args[1], args[2], 0)
    };
    let mut budget = MAX_ARG_BYTES;
    // The pages of the path and of argv whole, in one read (a null argv is empty: nothing to
    // read): the strings are often in the same pages (a program's constants next to the path,
    // a shell's words next to their vector), which spares the second read.
    let page_of = |at: u64| at - at % PAGE;
    let first_page = page_of(path_at);
    let both = [first_page, page_of(argv_at)];
    let two = argv_at != 0 && argv_at.is_multiple_of(8) && both[1] != first_page;
    let pages = read_pages(pid, &both[..if two { 2 } else { 1 }], scratch)?;
    let named = finish_string(pid, path_at, in_pages(&pages, path_at), &mut budget)?;
    let named = Path::new(std::ffi::OsStr::from_bytes(&named));
    // Where the file is, as the supervisor (same mount view) can open it.
    let mut cwd = None;
    let path = if named.as_os_str().is_empty() && flags & AT_EMPTY_PATH != 0 {
        PathBuf::from(format!("/proc/{pid}/fd/{dirfd}"))
    } else if named.is_absolute() {
        named.to_path_buf()
    } else if dirfd == AT_FDCWD {
        let dir = cwd_of(pid)?;
        let path = dir.join(named);
        cwd = Some(dir);
        path
    } else {
        PathBuf::from(format!("/proc/{pid}/fd/{dirfd}")).join(named)
    };
    let Ok(file) = file(&path) else {
        return Ok(Pending::NoFile(Missing {
            relative: cwd.is_some(),
            path,
        }));
    };
    let argv = match argv_within_pages(&pages, argv_at) {
        Some(argv) => argv,
        None => {
            let first = page_rest(&pages, argv_at).map(<[u8]>::to_vec);
            read_vector(pid, argv_at, first, &pages, &mut budget)?
                .iter()
                .map(|a| lossy(a))
                .collect()
        }
    };
    Ok(Pending::Exec(
        ExecRead {
            path,
            argv,
            cwd,
            envp: envp_at,
        },
        file,
    ))
}

/// The string at `at` up to its NUL (excluded), when it ends within its page, one of `pages`.
fn whole_in_pages(pages: Pages<'_>, at: u64) -> Option<&[u8]> {
    let rest = page_rest(pages, at)?;
    rest.get(..rest.iter().position(|b| *b == 0)?)
}

/// The usual argv, read with no more than the pages of the path and of argv: the pointer
/// vector and every argument lie in `pages`. `None` for anything else, which the general
/// reading handles (and reports on).
fn argv_within_pages(pages: Pages<'_>, argv_at: u64) -> Option<Vec<String>> {
    if argv_at == 0 || !argv_at.is_multiple_of(8) {
        return None;
    }
    let mut argv = Vec::new();
    for word in page_rest(pages, argv_at)?.chunks_exact(8) {
        let pointer = u64::from_ne_bytes(word.try_into().ok()?);
        if pointer == 0 {
            return Some(argv);
        }
        argv.push(lossy(whole_in_pages(pages, pointer)?));
    }
    // The vector goes on past the pages read.
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::supervisor::stack::Scratch;

    #[test]
    fn environment_entries_split_at_the_first_equals() {
        let env = parse_env([b"A=b=c".to_vec(), b"NOEQUALS".to_vec(), b"E=".to_vec()]);
        assert_eq!(env.get("A").map(String::as_str), Some("b=c"));
        assert_eq!(env.get("E").map(String::as_str), Some(""));
        assert_eq!(env.len(), 2);
    }

    /// Two pages of this process's memory, the second inaccessible: a read running into it
    /// fails as a read into unmapped memory does.
    struct Guarded {
        base: *mut u8,
        page: usize,
    }

    #[allow(
        unsafe_code,
        reason = "a test mapping whose second page is inaccessible"
    )]
    impl Guarded {
        fn new() -> Guarded {
            use nix::libc;
            let page = nix::unistd::sysconf(nix::unistd::SysconfVar::PAGE_SIZE)
                .unwrap()
                .and_then(|p| usize::try_from(p).ok())
                .unwrap();
            // SAFETY: a new anonymous private mapping of two pages where the kernel chooses;
            // no existing memory is touched.
            let base = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    2 * page,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                    -1,
                    0,
                )
            };
            assert_ne!(base, libc::MAP_FAILED);
            let base = base.cast::<u8>();
            // SAFETY: the second page of the mapping just made, which nothing refers to.
            let ret = unsafe { libc::mprotect(base.add(page).cast(), page, libc::PROT_NONE) };
            assert_eq!(ret, 0);
            Guarded { base, page }
        }

        /// The accessible page.
        fn first(&mut self) -> &mut [u8] {
            // SAFETY: the first page of the mapping is readable and writable, and this struct
            // is its only user.
            unsafe { std::slice::from_raw_parts_mut(self.base, self.page) }
        }

        /// The address of byte `at` of the accessible page.
        fn addr(&self, at: usize) -> u64 {
            self.base as u64 + at as u64
        }
    }

    #[allow(unsafe_code, reason = "unmapping the test mapping")]
    impl Drop for Guarded {
        fn drop(&mut self) {
            // SAFETY: unmaps exactly the mapping `new` made; nothing refers to it any more.
            unsafe { nix::libc::munmap(self.base.cast(), 2 * self.page) };
        }
    }

    /// `execve` with `args` read from this process, its file taken to be there.
    fn read_before(args: [u64; 6]) -> Result<ExecRead, Unreadable> {
        match before_exec(me(), false, args, &mut Scratch::default(), |_| Ok(()))? {
            Pending::Exec(read, ()) => Ok(read),
            Pending::NoFile(_) => panic!("the file check passes"),
        }
    }

    fn me() -> Pid {
        nix::unistd::getpid()
    }

    fn vector(pointers: &[u64]) -> Result<Vec<Vec<u8>>, Unreadable> {
        let mut with_null = pointers.to_vec();
        with_null.push(0);
        let addr = with_null.as_ptr() as u64;
        let mut budget = MAX_ARG_BYTES;
        read_vector(me(), addr, first_pointers(me(), addr)?, &[], &mut budget)
    }

    #[test]
    fn many_short_and_long_arguments_are_read_as_written() {
        // More than one batch of regions, strings longer than their first read and than a
        // page, an empty one, and a pointer vector over several pages.
        let args: Vec<Vec<u8>> = (0..1300)
            .map(|i| {
                let len = [0, 1, 7, 255, 256, 257, 4095, 4097, 9000][i % 9];
                let mut s: Vec<u8> = (0..len)
                    .map(|j| b"abcdefghijklmnopqrstuvwxyz"[(i + j) % 26])
                    .collect();
                s.push(0);
                s
            })
            .collect();
        let pointers: Vec<u64> = args.iter().map(|a| a.as_ptr() as u64).collect();
        let read = vector(&pointers).unwrap();
        let want: Vec<&[u8]> = args.iter().map(|a| &a[..a.len() - 1]).collect();
        assert_eq!(read.iter().map(Vec::as_slice).collect::<Vec<_>>(), want);
    }

    #[test]
    fn a_string_ending_right_before_unmapped_memory_is_read_whole() {
        let mut g = Guarded::new();
        let page = g.page;
        g.first()[page - 6..].copy_from_slice(b"hello\0");
        g.first()[page - 9..page - 6].copy_from_slice(b"ok\0");
        let read = vector(&[g.addr(page - 6), g.addr(page - 9)]).unwrap();
        assert_eq!(read, vec![b"hello".to_vec(), b"ok".to_vec()]);
    }

    #[test]
    fn a_string_running_into_unmapped_memory_is_unreadable() {
        let mut g = Guarded::new();
        let page = g.page;
        g.first()[..3].copy_from_slice(b"ok\0");
        g.first()[page - 5..].copy_from_slice(b"xxxxx");
        // Whether it comes first in the batch or after a readable one.
        assert!(vector(&[g.addr(page - 5)]).is_err());
        assert!(vector(&[g.addr(0), g.addr(page - 5)]).is_err());
        // A pointer into the inaccessible page itself.
        assert!(vector(&[g.addr(0), g.addr(page) + 8]).is_err());
    }

    #[test]
    fn a_pointer_vector_running_into_unmapped_memory_is_unreadable() {
        let mut g = Guarded::new();
        let page = g.page;
        g.first()[..3].copy_from_slice(b"ok\0");
        let ok = g.addr(0).to_ne_bytes();
        // Two pointers at the end of the page, no NULL after them.
        g.first()[page - 16..page - 8].copy_from_slice(&ok);
        g.first()[page - 8..].copy_from_slice(&ok);
        let addr = g.addr(page - 16);
        let mut budget = MAX_ARG_BYTES;
        let first = first_pointers(me(), addr).unwrap();
        assert!(read_vector(me(), addr, first, &[], &mut budget).is_err());
        // With the NULL in the page, it reads.
        g.first()[page - 8..].copy_from_slice(&0u64.to_ne_bytes());
        let first = first_pointers(me(), addr).unwrap();
        let read = read_vector(me(), addr, first, &[], &mut budget).unwrap();
        assert_eq!(read, vec![b"ok".to_vec()]);
    }

    #[test]
    fn an_execve_is_read_from_its_arguments_and_a_relative_path_from_the_cwd() {
        let path = b"/bin/true\0";
        let rel = b"run.sh\0";
        let a0 = b"true\0";
        let a1 = b"--flag\0";
        let env = b"K=v\0";
        let argv = [a0.as_ptr() as u64, a1.as_ptr() as u64, 0];
        let envp = [env.as_ptr() as u64, 0];
        let args = |p: &[u8]| {
            [
                p.as_ptr() as u64,
                argv.as_ptr() as u64,
                envp.as_ptr() as u64,
                0,
                0,
                0,
            ]
        };
        let read = read_before(args(path)).unwrap();
        assert_eq!(read.path, Path::new("/bin/true"));
        assert_eq!(read.argv, ["true", "--flag"]);
        assert_eq!(
            read.cwd, None,
            "an absolute path needs no working directory"
        );
        let env = env_before_exec(me(), read.envp).unwrap();
        assert_eq!(env.get("K").map(String::as_str), Some("v"));
        let read = read_before(args(rel)).unwrap();
        let cwd = std::env::current_dir().unwrap();
        assert_eq!(read.path, cwd.join("run.sh"));
        assert_eq!(read.cwd, Some(cwd));
        // A null argv is empty.
        let mut no_argv = args(path);
        no_argv[1] = 0;
        assert!(read_before(no_argv).unwrap().argv.is_empty());
    }

    #[test]
    fn the_arguments_of_an_exec_whose_file_is_missing_are_not_read() {
        // An argv pointing into inaccessible memory: unreadable, unless the file check
        // failed first.
        let g = Guarded::new();
        let path = b"/no/such/program\0";
        let argv = [g.addr(g.page), 0];
        let args = [path.as_ptr() as u64, argv.as_ptr() as u64, 0, 0, 0, 0];
        let missing = before_exec(me(), false, args, &mut Scratch::default(), |p| {
            assert_eq!(p, Path::new("/no/such/program"));
            std::fs::metadata(p)
        });
        assert!(matches!(missing, Ok(Pending::NoFile(_))));
        assert!(read_before(args).is_err());
    }

    #[test]
    fn strings_in_the_pages_read_with_the_path_are_read_whole_across_their_end() {
        // The path, the vector and the strings in one page, one string running on into the
        // next page, one in the page after it; and a path running into unmapped memory.
        let mut buf = vec![0u8; 4 * 4096];
        let base = buf.as_ptr() as u64;
        let page = usize::try_from(PAGE - base % PAGE).unwrap();
        let put = |buf: &mut Vec<u8>, at: usize, bytes: &[u8]| {
            buf[at..at + bytes.len()].copy_from_slice(bytes);
            base + at as u64
        };
        let path = put(&mut buf, page, b"/bin/true\0");
        let a0 = put(&mut buf, page + 16, b"true\0");
        let across = put(&mut buf, page + 4096 - 3, b"across-the-end\0");
        let later = put(&mut buf, page + 2 * 4096 + 5, b"later\0");
        let mut vector = Vec::new();
        for p in [a0, across, later, 0] {
            vector.extend_from_slice(&p.to_ne_bytes());
        }
        let argv_at = put(&mut buf, page + 64, &vector);
        let read = read_before([path, argv_at, 0, 0, 0, 0]).unwrap();
        assert_eq!(read.path, Path::new("/bin/true"));
        assert_eq!(read.argv, ["true", "across-the-end", "later"]);
        let mut g = Guarded::new();
        let end = g.page;
        g.first()[end - 4..].copy_from_slice(b"/bin");
        let at = g.addr(end - 4);
        assert!(read_before([at, 0, 0, 0, 0, 0]).is_err());
    }

    #[test]
    fn a_command_line_longer_than_the_first_read_is_read_whole() {
        use std::io::Write;
        // Longer than the first read and than its first doubling, ending mid-buffer.
        let long = "x".repeat(3 * FIRST_PROC_READ + 17);
        let want = ["sh", "-c", "read line", "sh", long.as_str()];
        let mut child = std::process::Command::new("sh")
            .args(&want[1..])
            .stdin(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let pid = Pid::from_raw(i32::try_from(child.id()).unwrap());
        // Until the child has exec'd sh (before, its command line is this test's).
        let mut argv = Vec::new();
        for _ in 0..500 {
            argv = cmdline(pid).unwrap();
            if argv.first().map(String::as_str) == Some("sh") {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let _ = child.stdin.take().unwrap().write_all(b"\n");
        let _ = child.wait();
        assert_eq!(argv, want);
    }

    #[test]
    fn the_own_process_can_be_read_after_its_exec() {
        let pid = nix::unistd::getpid();
        // Not traced by itself: its registers cannot be read, so `/proc` is read.
        let (read, exe) = after_exec(pid, &mut Scratch::default()).unwrap();
        assert!(!read.argv.is_empty());
        assert!(exe.is_file());
        assert_eq!(read.cwd(pid).unwrap(), std::env::current_dir().unwrap());
        assert_eq!(read.program(pid), std::env::current_exe().unwrap());
    }
}
