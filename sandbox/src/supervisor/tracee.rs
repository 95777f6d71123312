//! Reading what a stopped tracee is about to exec, or has just exec'd.
//!
//! Before the exec (the seccomp stop at `execve`/`execveat` entry) the arguments are pointers
//! into the caller's memory, read with `process_vm_readv`; another thread sharing that memory
//! can change them afterwards, so this reading is advisory (it lets the caller get `EACCES`).
//! After the exec (`PTRACE_EVENT_EXEC`, the new program loaded and not yet run, its process
//! single-threaded with a memory of its own) its arguments, `/proc/PID/environ` and `exe` are
//! final: nothing else can write them, and this reading decides.
//!
//! Before the exec the caller's memory is read by [`super::remote`]; after it the arguments come
//! from the new stack ([`super::stack`]).

use std::collections::BTreeMap;
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use nix::unistd::Pid;

use super::settled::{Interpreter, Settler};

use super::remote::{
    PAGE, argv_within_pages, finish_string, first_pointers, in_pages, page_rest, read_pages,
    read_vector,
};

/// The most bytes of arguments plus environment read from one exec (the kernel's own limit is
/// a quarter of the stack limit; 2 MiB covers the default 8 MiB stack).
pub const MAX_ARG_BYTES: usize = 4 << 20;
/// The most pointers read from one argument or environment vector.
pub const MAX_POINTERS: usize = 1 << 17;

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

pub(super) fn lossy(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A process's environment: by name, and every entry in order.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Environment {
    first: BTreeMap<String, String>,
    entries: Vec<(String, String)>,
}

impl Environment {
    /// Each name with its first value, which is the one `getenv` returns (git reads its
    /// variables so); found by review on 2026-12-07, when a second `PATH` entry could have
    /// named a directory git never looks in.
    pub fn first(&self) -> &BTreeMap<String, String> {
        &self.first
    }

    /// The first value of `name`.
    pub fn get(&self, name: &str) -> Option<&String> {
        self.first.get(name)
    }

    /// Every entry, a name given twice each time: a program reading its environment into a
    /// map keeps the last (cargo's `CARGO_ALIAS_*`, found by a red-team pass on 2026-12-07).
    pub fn entries(&self) -> &[(String, String)] {
        &self.entries
    }
}

fn parse_env(entries: impl IntoIterator<Item = Vec<u8>>) -> Environment {
    let mut env = Environment::default();
    for entry in entries {
        let text = lossy(&entry);
        if let Some((name, value)) = text.split_once('=') {
            env.first
                .entry(name.to_owned())
                .or_insert_with(|| value.to_owned());
            env.entries.push((name.to_owned(), value.to_owned()));
        }
    }
    env
}

/// The working directory of `pid`.
pub fn cwd_of(pid: Pid) -> Result<PathBuf, Unreadable> {
    std::fs::read_link(format!("/proc/{pid}/cwd"))
        .map_err(|e| Unreadable(format!("the working directory of pid {pid}: {e}")))
}

/// A program the notification found at a path that names it for good (see
/// [`super::settled::Settler::fixed_program`]): the path, and the file's `stat`.
#[derive(Debug, Clone)]
pub struct FixedProgram {
    pub path: PathBuf,
    pub file: std::fs::Metadata,
    /// Its program interpreter, if it names one (a fixed file too).
    pub interpreter: Option<Interpreter>,
}

/// The exec `pid` has just made (stopped at `PTRACE_EVENT_EXEC`), and what the executed file
/// is. The arguments come from the new stack ([`super::stack`]), or from `/proc/PID/cmdline`
/// where that stack is not laid out as the ELF loader lays it (`scratch` is reused from exec
/// to exec). The file is `fixed`'s where the new stack says the kernel opened `fixed`'s path
/// (`AT_EXECFN`, the kernel's own copy of the path, which nobody can have rewritten): that
/// path names that file for every process of the sandbox, which none of them can change, and
/// the kernel runs it itself ([`super::settled::Settler::fixed_program`]). Otherwise it is
/// `stat` of `/proc/PID/exe`, the file the kernel mapped (a lookup that makes the new pid's
/// `/proc` entries: about a tenth of the cost the supervisor adds to an exec).
pub fn after_exec(
    pid: Pid,
    scratch: &mut super::stack::Scratch,
    fixed: Option<&FixedProgram>,
) -> Result<AfterExec, Unreadable> {
    let (argv, execfn) = match super::stack::argv_at_exec(pid, scratch)? {
        Some(at) => (at.argv, at.execfn),
        None => (cmdline(pid)?, None),
    };
    let ran_fixed = fixed.filter(|f| {
        execfn
            .as_deref()
            .is_some_and(|opened| opened == f.path.as_os_str().as_bytes())
    });
    let (exe, interpreter) = match ran_fixed {
        Some(f) => (f.file.clone(), Some(f.interpreter.clone())),
        None => (
            std::fs::metadata(proc_path(pid, "exe").as_path())
                .map_err(|e| Unreadable(format!("/proc/{pid}/exe: {e}")))?,
            None,
        ),
    };
    Ok(AfterExec {
        read: ExecRead {
            path: PathBuf::new(),
            argv,
            cwd: None,
            envp: 0,
        },
        file: exe,
        interpreter,
    })
}

/// What [`after_exec`] found.
#[derive(Debug)]
pub struct AfterExec {
    pub read: ExecRead,
    /// The executed file.
    pub file: std::fs::Metadata,
    /// Its program interpreter where the program is a fixed one (`Some(None)`: it names
    /// none); `None` where it is still to be found ([`interpreters`]).
    pub interpreter: Option<Option<Interpreter>>,
}

/// The program interpreters the kernel loaded with the program `pid` just exec'd (stopped at
/// its exec event), whose file is `exe`: none for a program the kernel runs itself, and
/// nearly always the dynamic loader otherwise. Read from the program's file (`PT_INTERP`:
/// nothing can write a file being run), and, where that path names a file for good
/// (`settler`), that file; otherwise the files `/proc/PID/maps` shows mapped besides the
/// program, the kernel's own account of what it loaded (a relative interpreter path is opened
/// from the caller's working directory, and one through a writable directory may have been
/// swapped; and without a settler, where the whole tree is traced from outside any sandbox).
pub fn interpreters(
    pid: Pid,
    exe: &std::fs::Metadata,
    settler: Option<&mut Settler>,
) -> Result<Vec<Interpreter>, Unreadable> {
    let same = |m: &std::fs::Metadata| (m.dev(), m.ino()) == (exe.dev(), exe.ino());
    let named = super::facts::open_program(proc_path(pid, "exe").as_path())
        .ok()
        .filter(|f| f.metadata().is_ok_and(|m| same(&m)))
        .and_then(|mut f| super::elf::interpreter(&mut f).ok());
    match (&named, settler) {
        (Some(None), _) => return Ok(Vec::new()),
        (Some(Some(path)), Some(settler)) => {
            let path = PathBuf::from(std::ffi::OsStr::from_bytes(path));
            if let Some(found) = settler.stable_interpreter(&path) {
                return Ok(vec![found]);
            }
        }
        // Tracing the whole tree there is no view to rely on: what the maps show, as for a
        // path through writable directories (the path the process resolved, with its own
        // root, working directory and `/proc/self`, is not the one this process would).
        (Some(Some(_)), None) | (None, _) => {}
    }
    // Read whole: a seq_file gives whole lines per read, so a short read is not its end.
    let maps = std::fs::read(proc_path(pid, "maps").as_path())
        .map_err(|e| Unreadable(format!("/proc/{pid}/maps: {e}")))?;
    let mut found: Vec<Interpreter> = Vec::new();
    for line in maps.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
        let Some((device, inode, path)) = mapped_file(line) else {
            return Err(Unreadable(format!(
                "/proc/{pid}/maps: a line not understood: {}",
                String::from_utf8_lossy(line)
            )));
        };
        if inode == 0
            || (device, inode) == (exe.dev(), exe.ino())
            || found
                .iter()
                .any(|i| (i.file.dev(), i.file.ino()) == (device, inode))
        {
            continue;
        }
        let path = Path::new(std::ffi::OsStr::from_bytes(path));
        found.push(opened_interpreter(path, Some((device, inode)))?);
    }
    // A file that names an interpreter has one mapped at its exec event.
    if found.is_empty() && matches!(named, Some(Some(_))) {
        return Err(Unreadable(format!(
            "/proc/{pid}/maps shows no program interpreter, which the program names"
        )));
    }
    Ok(found)
}

/// The program interpreter at `path`, opened once (what is decided is what was opened: a
/// path renamed over afterwards changes nothing), where it is the file the kernel mapped,
/// `mapped` (device, inode), when that is known.
fn opened_interpreter(path: &Path, mapped: Option<(u64, u64)>) -> Result<Interpreter, Unreadable> {
    let not_it = |why: String| {
        Unreadable(format!(
            "the program interpreter loaded at this exec, `{}`: {why}",
            path.display()
        ))
    };
    let opened = super::facts::open_program(path).map_err(|e| not_it(e.to_string()))?;
    let file = opened.metadata().map_err(|e| not_it(e.to_string()))?;
    if mapped.is_some_and(|id| id != (file.dev(), file.ino())) {
        return Err(not_it("not the file of that name".into()));
    }
    Ok(Interpreter {
        path: path.to_path_buf(),
        file,
        opened: Some(std::sync::Arc::new(opened)),
    })
}

/// The device (as `stat` gives it), inode and path of one line of `/proc/PID/maps`
/// (`START-END PERMS OFFSET MAJOR:MINOR INODE PATH`); inode 0 for memory no file backs.
fn mapped_file(line: &[u8]) -> Option<(u64, u64, &[u8])> {
    let mut rest = line;
    let mut field = || {
        let start = rest.iter().position(|b| *b != b' ')?;
        rest = &rest[start..];
        let end = rest.iter().position(|b| *b == b' ').unwrap_or(rest.len());
        let (word, tail) = rest.split_at(end);
        rest = tail;
        Some(word)
    };
    let (_range, _perms, _offset) = (field()?, field()?, field()?);
    let device = std::str::from_utf8(field()?).ok()?;
    let inode: u64 = std::str::from_utf8(field()?).ok()?.parse().ok()?;
    let (major, minor) = device.split_once(':')?;
    let major = u64::from_str_radix(major, 16).ok()?;
    let minor = u64::from_str_radix(minor, 16).ok()?;
    let path = rest.trim_ascii_start();
    Some((nix::sys::stat::makedev(major, minor), inode, path))
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
pub fn env_after_exec(pid: Pid) -> Result<Environment, Unreadable> {
    Ok(parse_env(split_nul(&read_proc(pid, "environ")?)))
}

/// The environment `pid` passes to the exec it is about to make (see [`ExecRead::envp`]).
pub fn env_before_exec(pid: Pid, envp: u64) -> Result<Environment, Unreadable> {
    let mut budget = MAX_ARG_BYTES;
    let first = first_pointers(pid, envp)?;
    Ok(parse_env(read_vector(pid, envp, first, &[], &mut budget)?))
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::supervisor::remote::tests::{Guarded, me};
    use crate::supervisor::stack::Scratch;

    #[test]
    fn environment_entries_split_at_the_first_equals() {
        let env = parse_env([b"A=b=c".to_vec(), b"NOEQUALS".to_vec(), b"E=".to_vec()]);
        assert_eq!(env.get("A").map(String::as_str), Some("b=c"));
        assert_eq!(env.get("E").map(String::as_str), Some(""));
        assert_eq!(env.first().len(), 2);
    }

    #[test]
    fn a_name_given_twice_keeps_its_first_value_as_getenv_does() {
        let env = parse_env([b"PATH=/usr/bin".to_vec(), b"PATH=/planted".to_vec()]);
        assert_eq!(env.get("PATH").map(String::as_str), Some("/usr/bin"));
        assert_eq!(env.entries().len(), 2);
    }

    /// `execve` with `args` read from this process, its file taken to be there.
    fn read_before(args: [u64; 6]) -> Result<ExecRead, Unreadable> {
        match before_exec(me(), false, args, &mut Scratch::default(), |_| Ok(()))? {
            Pending::Exec(read, ()) => Ok(read),
            Pending::NoFile(_) => panic!("the file check passes"),
        }
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
        let after = after_exec(pid, &mut Scratch::default(), None).unwrap();
        let (read, exe) = (after.read, after.file);
        assert!(!read.argv.is_empty());
        assert!(exe.is_file());
        assert!(after.interpreter.is_none(), "not a fixed program");
        assert_eq!(read.cwd(pid).unwrap(), std::env::current_dir().unwrap());
        assert_eq!(read.program(pid), std::env::current_exe().unwrap());
        // Without a settler (the whole tree traced): the file its `PT_INTERP` names, opened.
        let loader = super::super::elf::interpreter(
            &mut std::fs::File::open(std::env::current_exe().unwrap()).unwrap(),
        )
        .unwrap()
        .expect("the test binary is dynamically linked");
        let loader = std::fs::metadata(std::ffi::OsStr::from_bytes(&loader)).unwrap();
        let found = interpreters(pid, &exe, None).unwrap();
        assert!(
            found
                .iter()
                .any(|i| (i.file.dev(), i.file.ino()) == (loader.dev(), loader.ino())),
            "{found:?}"
        );
    }

    #[test]
    fn a_line_of_the_maps_gives_its_device_inode_and_path() {
        let line = b"7f2a1c000000-7f2a1c028000 r--p 00000000 fd:01 1835020                    /usr/lib/x86_64-linux-gnu/ld with space.so";
        let (device, inode, path) = mapped_file(line).unwrap();
        assert_eq!(device, nix::sys::stat::makedev(0xfd, 1));
        assert_eq!(inode, 1_835_020);
        assert_eq!(path, b"/usr/lib/x86_64-linux-gnu/ld with space.so");
        let (_, inode, path) =
            mapped_file(b"7ffd1000-7ffd3000 r-xp 00000000 00:00 0  [vdso]").unwrap();
        assert_eq!((inode, path), (0, &b"[vdso]"[..]));
        assert!(mapped_file(b"garbage").is_none());
    }
}
