#![allow(unsafe_code, reason = "tests fork children whose memory they inspect")]

use std::os::unix::fs::symlink;

use nix::libc;
use nix::sys::wait::waitpid;
use nix::unistd::{ForkResult, fork};

use super::*;

/// A settler whose read-only mounts are everything outside `/tmp` and the test's directory.
fn settler_with_writable(writable: &'static Path) -> Settler {
    thread_local! { static WRITABLE: std::cell::RefCell<Option<PathBuf>> = const { std::cell::RefCell::new(None) }; }
    WRITABLE.with(|w| *w.borrow_mut() = Some(writable.to_path_buf()));
    fn view(path: &Path) -> bool {
        WRITABLE.with(|w| !w.borrow().as_ref().is_some_and(|dir| path.starts_with(dir)))
    }
    let mut settler = Settler::new(Vec::new());
    settler.read_only = view;
    // One read-only mount of everything: nothing is shown writable elsewhere.
    settler.mounts = Some(mounts::parse(b"1 0 1:1 / / ro - ext4 /dev/x ro\n"));
    settler
}

fn leaked_tempdir() -> &'static Path {
    let dir = tempfile::tempdir().unwrap();
    let path = std::fs::canonicalize(dir.path()).unwrap();
    std::mem::forget(dir);
    Box::leak(path.into_boxed_path())
}

#[test]
fn a_program_reached_through_read_only_directories_and_symlinks_resolves_to_its_file() {
    let ws = leaked_tempdir();
    let mut settler = settler_with_writable(ws);
    let sh = std::fs::metadata("/bin/sh").unwrap();
    // /bin is a symlink on merged-usr systems, /bin/sh one to dash: both followed.
    match settler.resolve(Path::new("/bin/sh")).unwrap() {
        Found::File(id) => assert_eq!(id, (sh.dev(), sh.ino())),
        Found::Fails(_) => panic!("/bin/sh resolves"),
    }
    match settler.resolve(Path::new("/usr/../bin/./sh")).unwrap() {
        Found::File(id) => assert_eq!(id, (sh.dev(), sh.ino())),
        Found::Fails(_) => panic!("/usr/../bin/./sh resolves"),
    }
}

#[test]
fn a_path_through_a_writable_directory_is_not_settled() {
    let ws = leaked_tempdir();
    std::fs::copy("/bin/true", ws.join("true")).unwrap();
    symlink("/bin/true", ws.join("link")).unwrap();
    let mut settler = settler_with_writable(ws);
    for path in [ws.join("true"), ws.join("link"), ws.join("missing")] {
        assert!(settler.resolve(&path).is_err(), "{}", path.display());
    }
    // A symlink from a read-only place into the writable one is followed into it: the
    // lookup there is what is refused.
    assert!(settler.resolve(&ws.join("link")).is_err());
}

#[test]
fn a_missing_file_in_a_read_only_directory_fails_in_the_kernel_too() {
    let ws = leaked_tempdir();
    let mut settler = settler_with_writable(ws);
    for path in ["/usr/bin/no-such-program-here", "/etc/passwd/x", "/usr/bin"] {
        assert!(
            matches!(settler.resolve(Path::new(path)), Ok(Found::Fails(_))),
            "{path}"
        );
    }
}

/// The errno of a real exec of `path` by this process.
fn exec_error(path: &Path) -> Option<i32> {
    std::process::Command::new(path)
        .spawn()
        .map(|mut child| {
            let _ = child.wait();
        })
        .err()
        .and_then(|e| e.raw_os_error())
}

#[test]
fn a_missing_step_is_answered_with_the_error_the_kernels_exec_gives() {
    let ws = leaked_tempdir();
    let mut settler = settler_with_writable(ws);
    for (path, errno) in [
        ("/usr/bin/no-such-program-here", libc::ENOENT),
        ("/no/such/dir/program", libc::ENOENT),
        ("/etc/passwd/x", libc::ENOTDIR),
        ("/usr/../usr/bin/no-such-program-here", libc::ENOENT),
    ] {
        let path = Path::new(path);
        assert_eq!(settler.failure(path), Some(errno), "{}", path.display());
        assert_eq!(exec_error(path), Some(errno), "{}", path.display());
    }
    // A directory (EACCES), a program that is there, a path in a writable place, below /proc,
    // relative, or longer than the kernel takes: left to the kernel.
    let long = format!("/{}", "a/".repeat(2100));
    for path in [
        "/usr/bin",
        "/bin/sh",
        &format!("{}/missing", ws.display()),
        "/proc/self/fd/99",
        "bin/missing",
        &long,
    ] {
        assert_eq!(settler.failure(Path::new(path)), None, "{path}");
    }
}

#[test]
fn a_missing_step_below_a_directory_others_cannot_search_is_left_to_the_kernel() {
    use std::os::unix::fs::PermissionsExt;
    let ws = leaked_tempdir();
    // Outside the writable one: read-only in this settler's view.
    let closed = leaked_tempdir();
    let open = leaked_tempdir();
    std::fs::set_permissions(closed, std::fs::Permissions::from_mode(0o710)).unwrap();
    std::fs::set_permissions(open, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut settler = settler_with_writable(ws);
    // A caller outside the directory's owner and group gets EACCES from the kernel, not ENOENT.
    assert_eq!(settler.failure(&closed.join("program")), None);
    assert_eq!(settler.failure(&open.join("program")), Some(libc::ENOENT));
}

#[test]
fn a_directory_a_writable_mount_also_shows_is_not_settled() {
    let ws = leaked_tempdir();
    let mut settler = settler_with_writable(ws);
    // `/usr` shown read-only, and writable again at `/srv/usr` (a bind mount of it).
    settler.mounts = Some(mounts::parse(
        b"1 0 1:1 / / ro - ext4 /dev/x ro\n2 1 1:1 /usr /srv/usr rw - ext4 /dev/x rw\n",
    ));
    assert_eq!(
        settler.resolve(Path::new("/usr/bin/env")).err(),
        Some(NotSettled("a writable mount shows the same directory"))
    );
}

#[test]
fn relative_paths_and_paths_below_proc_are_not_settled() {
    let ws = leaked_tempdir();
    let mut settler = settler_with_writable(ws);
    for path in ["bin/true", "/proc/self/exe", "/proc/self/fd/0", "/dev/fd/0"] {
        assert!(settler.resolve(Path::new(path)).is_err(), "{path}");
    }
}

#[test]
fn on_this_hosts_own_writable_root_nothing_is_settled() {
    // Outside a sandbox's view the root is writable (the test host), so the real check
    // refuses the same program the view above takes.
    if read_only(Path::new("/")) {
        return;
    }
    let mut settler = Settler::new(Vec::new());
    assert!(settler.resolve(Path::new("/bin/sh")).is_err());
}

#[test]
fn the_stat_line_is_read_after_the_commands_last_parenthesis() {
    let line = b"42 (a) (b c) S 7 42 42 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 3 0 123 \
                 4096 100 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n";
    assert_eq!(process::parse_stat(line), Some((3, 7)));
    assert_eq!(process::parse_stat(b"42 (x"), None);
}

/// A child forked from this process, stopped in `read` until dropped: its memory is a copy of
/// this process's at the fork (the same addresses), and it has one thread.
struct Child {
    pid: Pid,
    release: std::os::fd::OwnedFd,
}

impl Child {
    fn fork() -> Child {
        let (read_end, write_end) = nix::unistd::pipe().unwrap();
        // SAFETY: the child only makes the async-signal-safe calls read and _exit.
        match unsafe { fork() }.unwrap() {
            ForkResult::Child => {
                let mut byte = 0u8;
                // SAFETY: reads one byte into a live local from the pipe's read end.
                unsafe {
                    libc::read(
                        std::os::fd::AsRawFd::as_raw_fd(&read_end),
                        (&raw mut byte).cast(),
                        1,
                    );
                    libc::_exit(0)
                }
            }
            ForkResult::Parent { child } => Child {
                pid: child,
                release: write_end,
            },
        }
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        let _ = nix::unistd::write(&self.release, b"x");
        let _ = waitpid(self.pid, None);
    }
}

#[test]
fn strings_on_a_single_threaded_processs_heap_and_stack_are_settled() {
    let heap = b"/usr/bin/true\0".to_vec();
    let stack = *b"--version\0";
    let child = Child::fork();
    let extents = [
        (heap.as_ptr() as u64, heap.len() as u64),
        (stack.as_ptr() as u64, stack.len() as u64),
    ];
    let mut settler = Settler::new(Vec::new());
    assert_eq!(settler.memory_settled(child.pid, &extents, || true), Ok(()));
    // A literal of this program: a private mapping of the running executable, which cannot
    // be opened for writing while it runs.
    let literal = "a string in the program's file";
    let extent = (literal.as_ptr() as u64, literal.len() as u64);
    assert_eq!(
        settler.memory_settled(child.pid, &[extent], || true),
        Ok(())
    );
}

#[test]
fn strings_in_shared_file_or_kernel_written_memory_are_not_settled() {
    // SAFETY: a new shared anonymous mapping of one page; nothing else refers to it.
    let shared = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            4096,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    assert_ne!(shared, libc::MAP_FAILED);
    // A private mapping of a file that can be written (here: by this process).
    let file = tempfile::tempfile().unwrap();
    file.set_len(4096).unwrap();
    // SAFETY: a new private read-only mapping of a file this test owns.
    let private = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            4096,
            libc::PROT_READ,
            libc::MAP_PRIVATE,
            std::os::fd::AsRawFd::as_raw_fd(&file),
            0,
        )
    };
    assert_ne!(private, libc::MAP_FAILED);
    // SAFETY: getauxval reads this process's auxiliary vector; it takes an integer only.
    let vdso = unsafe { libc::getauxval(libc::AT_SYSINFO_EHDR) };
    let heap = Box::new([1u8; 64]);
    let child = Child::fork();
    for (what, extent) in [
        ("shared", (shared as u64, 16)),
        ("a writable file", (private as u64, 16)),
        ("vdso", (vdso, 16)),
        ("unmapped", (8, 16)),
        (
            "heap running into nothing",
            (heap.as_ptr() as u64, u64::MAX / 2),
        ),
    ] {
        let mut settler = Settler::new(Vec::new());
        assert!(
            settler
                .memory_settled(child.pid, &[extent], || true)
                .is_err(),
            "{what}"
        );
    }
    drop(child);
    // SAFETY: unmaps exactly the shared mapping made above; nothing refers to it any more.
    unsafe { libc::munmap(shared, 4096) };
    // SAFETY: likewise for the private mapping of the file.
    unsafe { libc::munmap(private, 4096) };
}

#[test]
fn arguments_that_changed_since_they_were_read_are_not_settled() {
    let heap = b"/usr/bin/true\0".to_vec();
    let child = Child::fork();
    let extent = (heap.as_ptr() as u64, heap.len() as u64);
    assert_eq!(
        Settler::new(Vec::new()).memory_settled(child.pid, &[extent], || false),
        Err(NotSettled("the arguments changed since they were read"))
    );
}

#[test]
fn the_arguments_are_read_again_only_once_nobody_else_can_write_them() {
    let heap = Box::new([1u8; 64]);
    let _other = std::thread::spawn(|| std::thread::sleep(std::time::Duration::from_secs(2)));
    let asked = std::cell::Cell::new(false);
    let result =
        Settler::new(Vec::new()).memory_settled(Pid::this(), &[(heap.as_ptr() as u64, 64)], || {
            asked.set(true);
            true
        });
    assert_eq!(result, Err(NotSettled("the process has other threads")));
    assert!(!asked.get(), "read again while another thread could write");
}

#[test]
fn a_process_with_other_threads_is_not_settled() {
    // This test process runs the harness's threads.
    let heap = Box::new([1u8; 64]);
    let _other = std::thread::spawn(|| std::thread::sleep(std::time::Duration::from_secs(2)));
    let me = Pid::this();
    assert_eq!(
        Settler::new(Vec::new()).memory_settled(me, &[(heap.as_ptr() as u64, 64)], || true),
        Err(NotSettled("the process has other threads"))
    );
}

#[test]
fn a_single_threaded_processs_parent_is_found_by_its_pidfd_and_its_stat_alike() {
    let child = Child::fork();
    let me = Pid::this().as_raw();
    let process = process::Process::open(child.pid.as_raw()).unwrap();
    assert_eq!(process.one_thread(), Ok(true));
    let lacks = crate::host_lacks("pidfd-info");
    assert!(
        process::parent_by_pidfd(child.pid.as_raw()) == Some(me) || lacks,
        "PIDFD_GET_INFO (Linux 6.13) found no parent (set BRIDLE_HOST_LACKS=pidfd-info on hosts without it)"
    );
    // The stat fallback, for kernels without PIDFD_GET_INFO, reads the same.
    let dir = nix::fcntl::open(
        format!("/proc/{}", child.pid).as_str(),
        nix::fcntl::OFlag::O_PATH | nix::fcntl::OFlag::O_DIRECTORY,
        nix::sys::stat::Mode::empty(),
    )
    .unwrap();
    assert_eq!(
        process::threads_and_parent_at(std::os::fd::AsFd::as_fd(&dir)),
        Ok((1, me))
    );
    let pidfd = crate::sys::pidfd_open(child.pid.as_raw()).unwrap();
    match crate::sys::memory::parent_of(std::os::fd::AsFd::as_fd(&pidfd)) {
        Ok(parent) => assert_eq!(parent, me),
        Err(e) => assert!(
            lacks,
            "PIDFD_GET_INFO (Linux 6.13) failed: {e} (set BRIDLE_HOST_LACKS=pidfd-info on hosts without it)"
        ),
    }
}

#[test]
fn the_thread_count_comes_from_the_task_directory() {
    let _other = std::thread::spawn(|| std::thread::sleep(std::time::Duration::from_secs(2)));
    let me = process::Process::open(Pid::this().as_raw()).unwrap();
    assert_eq!(me.one_thread(), Ok(false));
    assert!(me.threads_and_parent().unwrap().0 > 1);
}
