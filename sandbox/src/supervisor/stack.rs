//! The argv of a process stopped at its exec event, read from its new stack: the registers'
//! stack pointer (`PTRACE_GETREGSET`), then `process_vm_readv` of what it points at, instead of
//! `open`, `read` and `close` of `/proc/PID/cmdline` (the first `/proc` lookup of a new pid
//! and the read through `access_remote_vm` were a fifth of the supervisor's time per exec).
//!
//! The ELF loader (`create_elf_tables`, run before `start_thread` and before the exec event is
//! reported) leaves the stack pointer at `argc`, followed by `argc` pointers to the argument
//! strings, a null pointer, the environment's pointers and a null pointer. The argument
//! strings are contiguous from `mm->arg_start`, each right after the previous one's NUL, and
//! end where the first environment string starts (`mm->arg_end`): exactly the bytes
//! `/proc/PID/cmdline` shows. A stack not laid out so (another binary format, a 32-bit task)
//! is not guessed at: [`argv_at_exec`] says `None` and the caller reads `/proc/PID/cmdline`.
//!
//! Why this reading is as final as `/proc/PID/cmdline`: both read the same memory of the same
//! `mm`, the fresh one the exec made, which no other task shares (`de_thread` killed the other
//! threads; a `vfork` parent got its own memory back; a `CLONE_VM` sibling of the old image
//! shares the old `mm`, not this one), which nothing in the sandbox can write (see the module
//! docs of [`super`]), and which the process itself has not run a single instruction to change.
//! The stack pointer is the one the kernel set: only the tracer (the supervisor) can change a
//! stopped tracee's registers.

use nix::sys::uio::{RemoteIoVec, process_vm_readv};
use nix::unistd::Pid;

use super::tracee::{MAX_ARG_BYTES, MAX_POINTERS, Unreadable};
use crate::sys;

/// The first read from the stack pointer: the pointer vectors, the auxiliary vector and,
/// for an ordinary environment, the strings too (a read stops at the end of the stack).
const FIRST_READ: usize = 16 << 10;
/// The most bytes one argument can have (the kernel's `MAX_ARG_STRLEN`, 32 pages).
const MAX_ARG_STRLEN: usize = 32 * 4096;

/// A buffer reused from exec to exec (allocated and zeroed once, not per exec: zeroing fresh
/// buffers for each remote read was a few per cent of the supervisor's time).
#[derive(Debug, Default)]
pub struct Scratch {
    buf: Vec<u8>,
}

impl Scratch {
    /// The first `len` bytes of the buffer (grown, and zeroed, only when it is shorter).
    pub fn get(&mut self, len: usize) -> &mut [u8] {
        if self.buf.len() < len {
            self.buf.resize(len, 0);
        }
        &mut self.buf[..len]
    }
}

/// Reads `buf.len()` bytes at `at` of `pid`: how many were read (fewer where the mapping ends:
/// the kernel copies page by page and stops at the first one that is not mapped). Any error
/// reads nothing, so the caller falls back to `/proc/PID/cmdline`: a non-dumpable image (an
/// execute-only file of an owner the sandbox's user namespace does not map) refuses
/// `process_vm_readv` even to its tracer, where `/proc` may still answer.
fn read_at(pid: Pid, at: u64, buf: &mut [u8]) -> Result<usize, Unreadable> {
    let base = usize::try_from(at).map_err(|_| Unreadable("an address out of range".into()))?;
    let remote = [RemoteIoVec {
        base,
        len: buf.len(),
    }];
    Ok(process_vm_readv(pid, &mut [std::io::IoSliceMut::new(buf)], &remote).unwrap_or(0))
}

fn word(bytes: &[u8], index: usize) -> Option<u64> {
    let at = index.checked_mul(8)?;
    let raw: [u8; 8] = bytes.get(at..at.checked_add(8)?)?.try_into().ok()?;
    Some(u64::from_ne_bytes(raw))
}

/// What the new stack of a process stopped at its exec event says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AtExec {
    /// The arguments.
    pub argv: Vec<String>,
    /// The path the kernel opened for this exec (`AT_EXECFN`: its own copy of the path the
    /// exec named, made before it opened it, or `/dev/fd/N/...` for a path relative to a
    /// descriptor), where the first read holds it.
    pub execfn: Option<Vec<u8>>,
}

/// The arguments of `pid`, stopped at its exec event, from its stack (see the module docs):
/// `Ok(None)` when the stack is not laid out as the ELF loader lays it, or is larger than
/// this reads (more than [`MAX_POINTERS`] arguments or [`MAX_ARG_BYTES`] of them): the caller
/// then reads `/proc/PID/cmdline`, which decides the same, only slower.
pub fn argv_at_exec(pid: Pid, scratch: &mut Scratch) -> Result<Option<AtExec>, Unreadable> {
    // Registers that cannot be read (the process is gone): `/proc` says why, or fails too.
    let Ok(Some(sp)) = sys::ptrace::stack_pointer(pid) else {
        return Ok(None);
    };
    if !sp.is_multiple_of(8) {
        return Ok(None);
    }
    let got = read_at(pid, sp, scratch.get(FIRST_READ))?;
    let first = &scratch.buf[..got];
    let Some(argc) = word(first, 0).and_then(|n| usize::try_from(n).ok()) else {
        return Ok(None);
    };
    if argc > MAX_POINTERS {
        return Ok(None);
    }
    let execfn = execfn(first, sp, argc);
    // argc, the argument pointers, their null, and the first environment pointer (or null).
    let words = argc + 3;
    let more;
    let vector: &[u8] = if words * 8 <= first.len() {
        first
    } else {
        let mut bytes = vec![0u8; words * 8];
        if read_at(pid, sp, &mut bytes)? < bytes.len() {
            return Ok(None);
        }
        more = bytes;
        &more
    };
    let pointer = |i: usize| word(vector, 1 + i).unwrap_or(0);
    if argc == 0 {
        // Only before Linux 5.18, which gives an exec without arguments an empty `argv[0]`.
        return Ok(Some(AtExec {
            argv: Vec::new(),
            execfn,
        }));
    }
    if pointer(argc) != 0 {
        return Ok(None);
    }
    let start = pointer(0);
    let env = pointer(argc + 1);
    // The strings lie above the pointer vectors; anything else (an x32 task's 32-bit words
    // read as 64-bit ones) is not guessed at.
    if start < sp.saturating_add(u64::try_from(words * 8).unwrap_or(u64::MAX)) {
        return Ok(None);
    }
    // Where the strings end: at the environment's first string; without an environment, at
    // most one string's length past the last argument.
    let len = if env != 0 {
        match env.checked_sub(start).and_then(|n| usize::try_from(n).ok()) {
            Some(n) if n <= MAX_ARG_BYTES => n,
            _ => return Ok(None),
        }
    } else {
        match pointer(argc - 1)
            .checked_sub(start)
            .and_then(|n| usize::try_from(n).ok())
        {
            Some(n) if n <= MAX_ARG_BYTES => n + MAX_ARG_STRLEN,
            _ => return Ok(None),
        }
    };
    // The strings, from the first read when it holds them (nearly always), or read now.
    let in_first = start
        .checked_sub(sp)
        .and_then(|off| usize::try_from(off).ok())
        .filter(|off| off.checked_add(len).is_some_and(|end| end <= got));
    let read;
    let strings: &[u8] = match in_first {
        Some(off) => &scratch.buf[off..off + len],
        None => {
            let mut bytes = vec![0u8; len];
            let n = read_at(pid, start, &mut bytes)?;
            if env != 0 && n < len {
                return Ok(None);
            }
            bytes.truncate(n);
            read = bytes;
            &read
        }
    };
    let argv = split(strings, argc, |i| pointer(i).wrapping_sub(start), env != 0)?;
    Ok(argv.map(|argv| AtExec { argv, execfn }))
}

/// `AT_EXECFN` of the auxiliary vector, which follows the environment's pointers and their
/// null, in `first` (read at `sp`, where `argc` is); `None` where the vector or the string it
/// points at is not whole in `first`.
fn execfn(first: &[u8], sp: u64, argc: usize) -> Option<Vec<u8>> {
    const AT_EXECFN: u64 = nix::libc::AT_EXECFN;
    // argc, the argument pointers and their null; then the environment's up to their null.
    let mut at = argc.checked_add(2)?;
    while word(first, at)? != 0 {
        at += 1;
    }
    at += 1;
    loop {
        let (kind, value) = (word(first, at)?, word(first, at + 1)?);
        match kind {
            0 => return None,
            AT_EXECFN => {
                let off = usize::try_from(value.checked_sub(sp)?).ok()?;
                let rest = first.get(off..)?;
                let len = rest.iter().position(|b| *b == 0)?;
                return Some(rest[..len].to_vec());
            }
            _ => at += 2,
        }
    }
}

/// The `argc` strings of `area`, where the `i`th starts at offset `offset(i)`: each must start
/// right after the previous one's NUL, and with `whole`, the last must end the area.
fn split(
    area: &[u8],
    argc: usize,
    offset: impl Fn(usize) -> u64,
    whole: bool,
) -> Result<Option<Vec<String>>, Unreadable> {
    let mut argv = Vec::with_capacity(argc);
    let mut at = 0usize;
    for i in 0..argc {
        if usize::try_from(offset(i)).ok() != Some(at) {
            return Ok(None);
        }
        let Some(len) = area[at..].iter().position(|b| *b == 0) else {
            return Ok(None);
        };
        argv.push(String::from_utf8_lossy(&area[at..at + len]).into_owned());
        at += len + 1;
    }
    if whole && at != area.len() {
        return Ok(None);
    }
    Ok(Some(argv))
}

#[cfg(test)]
mod tests {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::process::CommandExt;

    use nix::sys::wait::{WaitStatus, waitpid};

    use super::*;
    use crate::supervisor::tracee::cmdline;

    /// Runs `/bin/true` with `argv` (and `env`, or none), traced by this thread, and reads its
    /// arguments from its stack where it stops right after its exec, before its first
    /// instruction (the stop `PTRACE_TRACEME` makes there is where the exec event is).
    fn read_at_exec(
        argv: &[Vec<u8>],
        env: Option<&[(&str, &str)]>,
    ) -> (Option<Vec<String>>, Vec<String>) {
        let mut command = std::process::Command::new("/bin/true");
        command
            .arg0(OsStr::from_bytes(&argv[0]))
            .args(argv[1..].iter().map(|a| OsStr::from_bytes(a)));
        match env {
            Some(env) => {
                command.env_clear().envs(env.iter().copied());
            }
            None => {
                command.env_clear();
            }
        }
        #[allow(unsafe_code, reason = "the child asks to be traced before its exec")]
        // SAFETY: the closure runs in the forked child before its exec and makes one
        // async-signal-safe syscall (ptrace), touching no memory of the parent's threads.
        unsafe {
            command.pre_exec(|| nix::sys::ptrace::traceme().map_err(std::io::Error::from));
        }
        let mut child = command.spawn().expect("spawn /bin/true");
        let pid = Pid::from_raw(i32::try_from(child.id()).unwrap());
        let status = waitpid(pid, None).unwrap();
        assert!(
            matches!(
                status,
                WaitStatus::Stopped(_, nix::sys::signal::Signal::SIGTRAP)
            ),
            "{status:?}"
        );
        let from_stack = argv_at_exec(pid, &mut Scratch::default()).unwrap();
        // Run by its path, so the kernel's copy of the path is `/bin/true`; not read where
        // the arguments fill more than the first read.
        if let Some(execfn) = from_stack.as_ref().and_then(|at| at.execfn.as_ref()) {
            assert_eq!(execfn, b"/bin/true");
        }
        let small = argv.iter().map(Vec::len).sum::<usize>() < 1000;
        if small {
            let execfn = from_stack.as_ref().and_then(|at| at.execfn.as_deref());
            assert_eq!(
                execfn,
                Some(&b"/bin/true"[..]),
                "the path the kernel opened"
            );
        }
        let from_stack = from_stack.map(|at| at.argv);
        let from_proc = cmdline(pid).unwrap();
        let _ = child.kill();
        let _ = child.wait();
        (from_stack, from_proc)
    }

    fn lossy(argv: &[Vec<u8>]) -> Vec<String> {
        argv.iter()
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect()
    }

    #[test]
    fn odd_arguments_are_read_from_the_stack_as_they_run() {
        // Empty strings, bytes that are not UTF-8, a long one (over a page, under the kernel's
        // limit for one), spaces and newlines; with an environment and without.
        let argv: Vec<Vec<u8>> = vec![
            b"tr\xffue".to_vec(),
            Vec::new(),
            b"\xff\xfe\x80".to_vec(),
            b"a b\nc".to_vec(),
            vec![b'x'; 100_000],
            Vec::new(),
        ];
        let env = [("PATH", "/usr/bin:/bin"), ("LONG", "y")];
        for env in [Some(&env[..]), None] {
            let (stack, proc) = read_at_exec(&argv, env);
            assert_eq!(
                stack.as_deref(),
                Some(&lossy(&argv)[..]),
                "from the stack, env {env:?}"
            );
            assert_eq!(proc, lossy(&argv), "from /proc, env {env:?}");
        }
    }

    #[test]
    fn the_path_the_kernel_opened_is_read_from_the_stack_with_the_arguments() {
        let argv = vec![b"true".to_vec(), b"x".to_vec()];
        let (stack, _) = read_at_exec(&argv, Some(&[("K", "v")]));
        assert_eq!(stack, Some(lossy(&argv)));
    }

    #[test]
    fn a_hundred_thousand_arguments_are_read_from_the_stack() {
        let mut argv: Vec<Vec<u8>> = (0..100_000).map(|i| format!("a{i}").into_bytes()).collect();
        argv[50_000] = Vec::new();
        argv[99_999] = b"last\xff".to_vec();
        let (stack, proc) = read_at_exec(&argv, Some(&[("K", "v")]));
        let want = lossy(&argv);
        assert_eq!(stack.as_ref().map(Vec::len), Some(want.len()));
        assert!(
            stack.as_deref() == Some(&want[..]),
            "the stack's argv differs"
        );
        assert!(proc == want, "/proc's argv differs");
    }

    #[test]
    fn the_path_the_kernel_opened_is_found_only_whole_in_what_was_read() {
        let sp = 0x7000_0000u64;
        // argc, one argument pointer, null, one environment pointer, null, the auxiliary
        // vector (`kind`, value pairs up to a null kind), then the string at byte 120.
        let layout = |execfn_at: u64, tail: &[u8]| {
            let words = [1, sp + 200, 0, sp + 210, 0, 6, 4096, 31, execfn_at, 0, 0];
            let mut bytes: Vec<u8> = words.iter().flat_map(|w| w.to_ne_bytes()).collect();
            bytes.resize(120, 0);
            bytes.extend_from_slice(tail);
            bytes
        };
        let whole = layout(sp + 120, b"/usr/bin/git\0");
        assert_eq!(execfn(&whole, sp, 1), Some(b"/usr/bin/git".to_vec()));
        // Pointing below what was read, past it, or at a string cut off by its end.
        assert_eq!(execfn(&layout(sp - 8, b"/x\0"), sp, 1), None);
        assert_eq!(execfn(&layout(sp + 4096, b"/x\0"), sp, 1), None);
        assert_eq!(execfn(&layout(sp + 120, b"/usr/bin/gi"), sp, 1), None);
        // No `AT_EXECFN` before the null kind, or a vector cut off.
        let mut none = whole.clone();
        none[7 * 8..8 * 8].copy_from_slice(&0u64.to_ne_bytes());
        assert_eq!(execfn(&none, sp, 1), None);
        assert_eq!(execfn(&whole[..60], sp, 1), None);
    }

    #[test]
    fn strings_that_do_not_follow_each_other_are_not_guessed_at() {
        let area = b"ab\0\0c\0";
        let offsets = [0u64, 3, 4];
        assert_eq!(
            split(area, 3, |i| offsets[i], true).unwrap(),
            Some(vec!["ab".to_owned(), String::new(), "c".to_owned()])
        );
        // A pointer into the middle of a string, a gap, an area with bytes left, no NUL.
        assert_eq!(split(area, 2, |i| [0u64, 2][i], false).unwrap(), None);
        assert_eq!(split(area, 2, |i| [0u64, 4][i], false).unwrap(), None);
        assert_eq!(split(area, 2, |i| offsets[i], true).unwrap(), None);
        assert_eq!(split(b"ab", 1, |_| 0, false).unwrap(), None);
    }
}
