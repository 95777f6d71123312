//! Reading the caller's memory at its notification: the path, argv and envp of the exec it is
//! about to make, with `process_vm_readv` (see [`super::tracee`] for why this reading is
//! advisory).
//!
//! Reads are batched, since each is a syscall at every exec: the pages of the path and of the
//! pointer vector in one `process_vm_readv` (strings that start in those pages need no other
//! read), then the start of every other string in one more; only a string longer than its
//! first read, or one that could not be read in the batch, is read on its own.

use std::io::IoSliceMut;

use nix::sys::uio::{RemoteIoVec, process_vm_readv};
use nix::unistd::Pid;

use super::tracee::{MAX_POINTERS, Unreadable, lossy};

/// Remote reads never cross a boundary of this size, so that one region is either all mapped
/// or not at all (every page size is a multiple of it).
pub(super) const PAGE: u64 = 4096;
/// The first read of a string reads at most this many bytes (most arguments are shorter).
const FIRST_READ: u64 = 256;
/// The most pointers read in the first batch (more follow page by page).
const FIRST_POINTERS: u64 = 128;
/// The most regions in one `process_vm_readv` (below `IOV_MAX`).
const BATCH: usize = 512;

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
pub(super) fn read_pages<'a>(
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
pub(super) fn finish_string(
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
pub(super) type Pages<'a> = &'a [(u64, &'a [u8])];

/// The bytes from `at` to the end of its page, when that page is one of `pages`.
pub(super) fn page_rest(pages: Pages<'_>, at: u64) -> Option<&[u8]> {
    let (base, bytes) = pages.iter().find(|(base, _)| at - at % PAGE == *base)?;
    bytes.get(usize::try_from(at - base).ok()?..)
}

/// The string at `at` up to its NUL (included), or to the end of its page, when that page is
/// one of `pages`.
pub(super) fn in_pages(pages: Pages<'_>, at: u64) -> Option<Vec<u8>> {
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

pub(super) fn first_pointers(pid: Pid, addr: u64) -> Result<Option<Vec<u8>>, Unreadable> {
    if addr == 0 {
        return Ok(Some(Vec::new()));
    }
    read_one(pid, addr, FIRST_POINTERS * 8)
}

/// A NULL-terminated vector of string pointers at `addr` (argv or envp; `0` is empty), whose
/// first bytes are `first` (read already: up to the end of its page, or [`first_pointers`]).
pub(super) fn read_vector(
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

/// The string at `at` up to its NUL (excluded), when it ends within its page, one of `pages`.
fn whole_in_pages(pages: Pages<'_>, at: u64) -> Option<&[u8]> {
    let rest = page_rest(pages, at)?;
    rest.get(..rest.iter().position(|b| *b == 0)?)
}

/// The usual argv, read with no more than the pages of the path and of argv: the pointer
/// vector and every argument lie in `pages`. `None` for anything else, which the general
/// reading handles (and reports on).
pub(super) fn argv_within_pages(pages: Pages<'_>, argv_at: u64) -> Option<Vec<String>> {
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
pub(super) mod tests {
    use super::*;
    use crate::supervisor::tracee::MAX_ARG_BYTES;

    /// Two pages of this process's memory, the second inaccessible: a read running into it
    /// fails as a read into unmapped memory does.
    pub(in crate::supervisor) struct Guarded {
        base: *mut u8,
        pub(in crate::supervisor) page: usize,
    }

    #[allow(
        unsafe_code,
        reason = "a test mapping whose second page is inaccessible"
    )]
    impl Guarded {
        pub(in crate::supervisor) fn new() -> Guarded {
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
        pub(in crate::supervisor) fn first(&mut self) -> &mut [u8] {
            // SAFETY: the first page of the mapping is readable and writable, and this struct
            // is its only user.
            unsafe { std::slice::from_raw_parts_mut(self.base, self.page) }
        }

        /// The address of byte `at` of the accessible page.
        pub(in crate::supervisor) fn addr(&self, at: usize) -> u64 {
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

    pub(in crate::supervisor) fn me() -> Pid {
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
}
