//! Reading what a stopped tracee is about to exec, or has just exec'd.
//!
//! Before the exec (the seccomp stop at `execve`/`execveat` entry) the arguments are pointers
//! into the caller's memory, read with `process_vm_readv`; another thread sharing that memory
//! can change them afterwards, so this reading is advisory (it lets the caller get `EACCES`).
//! After the exec (`PTRACE_EVENT_EXEC`, the new program loaded and not yet run, its process
//! single-threaded with a memory of its own) `/proc/PID/cmdline`, `environ` and `exe` are
//! final: nothing else can write them, and this reading decides.

use std::collections::BTreeMap;
use std::io::IoSliceMut;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use nix::sys::uio::{RemoteIoVec, process_vm_readv};
use nix::unistd::Pid;

/// The most bytes of arguments plus environment read from one exec (the kernel's own limit is
/// a quarter of the stack limit; 2 MiB covers the default 8 MiB stack).
pub const MAX_ARG_BYTES: usize = 4 << 20;
/// The most pointers read from one argument or environment vector.
const MAX_POINTERS: usize = 1 << 17;

/// One exec, as read from the tracee.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExecRead {
    /// The file: the path as named (before) or `/proc/PID/exe` (after).
    pub path: PathBuf,
    /// The arguments.
    pub argv: Vec<String>,
    /// The working directory.
    pub cwd: PathBuf,
    /// Where the environment vector is in the caller's memory (before the exec; read it
    /// with [`env_before_exec`] when needed); 0 after the exec ([`env_after_exec`]).
    pub envp: u64,
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

/// The exec `pid` has just made (stopped at `PTRACE_EVENT_EXEC`).
pub fn after_exec(pid: Pid) -> Result<(ExecRead, std::fs::File), Unreadable> {
    let read = |what: &str| {
        std::fs::read(format!("/proc/{pid}/{what}"))
            .map_err(|e| Unreadable(format!("/proc/{pid}/{what}: {e}")))
    };
    let argv = split_nul(&read("cmdline")?)
        .iter()
        .map(|a| lossy(a))
        .collect();
    let exe = std::fs::File::open(format!("/proc/{pid}/exe"))
        .map_err(|e| Unreadable(format!("/proc/{pid}/exe: {e}")))?;
    let path = std::fs::read_link(format!("/proc/{pid}/exe"))
        .map_err(|e| Unreadable(format!("/proc/{pid}/exe: {e}")))?;
    Ok((
        ExecRead {
            path,
            argv,
            cwd: cwd_of(pid)?,
            envp: 0,
        },
        exe,
    ))
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
    let bytes = std::fs::read(format!("/proc/{pid}/environ"))
        .map_err(|e| Unreadable(format!("/proc/{pid}/environ: {e}")))?;
    Ok(parse_env(split_nul(&bytes)))
}

/// The environment `pid` passes to the exec it is about to make (see [`ExecRead::envp`]).
pub fn env_before_exec(pid: Pid, envp: u64) -> Result<BTreeMap<String, String>, Unreadable> {
    let mut budget = MAX_ARG_BYTES;
    Ok(parse_env(read_vector(pid, envp, &mut budget)?))
}

/// Reads `len` bytes at `addr` of `pid`; fewer at the end of its mapped memory.
fn read_memory(pid: Pid, addr: u64, len: usize) -> Result<Vec<u8>, Unreadable> {
    let mut buf = vec![0u8; len];
    let base = usize::try_from(addr).map_err(|_| Unreadable("an address out of range".into()))?;
    let got = {
        let mut local = [IoSliceMut::new(&mut buf)];
        let remote = [RemoteIoVec { base, len }];
        process_vm_readv(pid, &mut local, &remote)
            .map_err(|e| Unreadable(format!("reading the memory of pid {pid}: {e}")))?
    };
    buf.truncate(got);
    Ok(buf)
}

/// A NUL-terminated string at `addr`, read page by page so a string ending right before an
/// unmapped page is still read whole.
fn read_string(pid: Pid, addr: u64, budget: &mut usize) -> Result<Vec<u8>, Unreadable> {
    const PAGE: u64 = 4096;
    let mut out = Vec::new();
    let mut at = addr;
    loop {
        let to_page_end = usize::try_from(PAGE - at % PAGE).unwrap_or(4096);
        let chunk = read_memory(pid, at, to_page_end)?;
        if chunk.is_empty() {
            return Err(Unreadable("a string runs into unmapped memory".into()));
        }
        if let Some(end) = chunk.iter().position(|b| *b == 0) {
            out.extend_from_slice(&chunk[..end]);
            break;
        }
        out.extend_from_slice(&chunk);
        if out.len() > *budget {
            return Err(Unreadable("the arguments are too long to read".into()));
        }
        at += u64::try_from(chunk.len()).unwrap_or(PAGE);
    }
    *budget = budget.saturating_sub(out.len() + 1);
    Ok(out)
}

/// A NULL-terminated vector of string pointers at `addr` (argv or envp); `0` is empty.
fn read_vector(pid: Pid, addr: u64, budget: &mut usize) -> Result<Vec<Vec<u8>>, Unreadable> {
    let mut out = Vec::new();
    if addr == 0 {
        return Ok(out);
    }
    let mut at = addr;
    for _ in 0..MAX_POINTERS {
        let word = read_memory(pid, at, 8)?;
        let bytes: [u8; 8] = word
            .try_into()
            .map_err(|_| Unreadable("a pointer vector runs into unmapped memory".into()))?;
        let pointer = u64::from_ne_bytes(bytes);
        if pointer == 0 {
            return Ok(out);
        }
        out.push(read_string(pid, pointer, budget)?);
        at += 8;
    }
    Err(Unreadable("too many arguments to read".into()))
}

/// `AT_FDCWD`.
const AT_FDCWD: i64 = -100;
/// `AT_EMPTY_PATH`.
const AT_EMPTY_PATH: u64 = 0x1000;

/// The exec `pid` is about to make: `execve(path, argv, envp)` or `execveat(dirfd, path,
/// argv, envp, flags)`, from the syscall's arguments (`execveat` tells which).
pub fn before_exec(pid: Pid, execveat: bool, args: [u64; 6]) -> Result<ExecRead, Unreadable> {
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
    let named = read_string(pid, path_at, &mut budget)?;
    let argv = read_vector(pid, argv_at, &mut budget)?;
    let cwd = cwd_of(pid)?;
    let named = Path::new(std::ffi::OsStr::from_bytes(&named));
    // Where the file is, as the supervisor (same mount view) can open it.
    let path = if named.as_os_str().is_empty() && flags & AT_EMPTY_PATH != 0 {
        PathBuf::from(format!("/proc/{pid}/fd/{dirfd}"))
    } else if named.is_absolute() {
        named.to_path_buf()
    } else if dirfd == AT_FDCWD {
        cwd.join(named)
    } else {
        PathBuf::from(format!("/proc/{pid}/fd/{dirfd}")).join(named)
    };
    Ok(ExecRead {
        path,
        argv: argv.iter().map(|a| lossy(a)).collect(),
        cwd,
        envp: envp_at,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn environment_entries_split_at_the_first_equals() {
        let env = parse_env([b"A=b=c".to_vec(), b"NOEQUALS".to_vec(), b"E=".to_vec()]);
        assert_eq!(env.get("A").map(String::as_str), Some("b=c"));
        assert_eq!(env.get("E").map(String::as_str), Some(""));
        assert_eq!(env.len(), 2);
    }

    #[test]
    fn the_own_process_can_be_read_after_its_exec() {
        let (read, exe) = after_exec(nix::unistd::getpid()).unwrap();
        assert!(!read.argv.is_empty());
        assert!(exe.metadata().unwrap().is_file());
        assert_eq!(read.cwd, std::env::current_dir().unwrap());
    }
}
