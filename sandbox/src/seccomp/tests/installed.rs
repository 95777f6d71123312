//! The filter installed in forked children (and a spawned thread): what the kernel then refuses.

use pretty_assertions::assert_eq;

use super::*;

/// A check run in the child after the filter is installed: a description and a predicate.
type Check = (&'static str, fn() -> bool);

/// The errno of a failed raw syscall, 0 when it succeeded (its result is then dropped).
fn errno_of(ret: c_long) -> i32 {
    if ret == -1 {
        io::Error::last_os_error().raw_os_error().unwrap_or(-1)
    } else {
        0
    }
}

/// Forks, installs `program` in the child (after setting no_new_privs), runs `checks` there and
/// exits with 0 or the 1-based index of the first failing check. The child allocates nothing on
/// its success path and never returns into the test harness.
fn in_forked_child(program: &BpfProgram, checks: &[Check]) -> WaitStatus {
    // SAFETY: the child only makes raw syscalls, reads `program` and `checks` (already built) and
    // ends with `_exit`; it neither allocates on its success path nor unwinds, so the state of
    // other test threads (locks held at fork time) cannot be observed.
    match unsafe { fork() }.expect("fork") {
        ForkResult::Child => {
            let code = child_main(program, checks);
            // SAFETY: `_exit` ends the child immediately, without running the harness's atexit
            // handlers or returning into the forked copy of the test.
            unsafe { libc::_exit(code) }
        }
        ForkResult::Parent { child } => waitpid(child, None).expect("waitpid"),
    }
}

fn child_main(program: &BpfProgram, checks: &[Check]) -> i32 {
    // SAFETY: prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) takes integers only.
    if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
        return 200;
    }
    if install_on_current_thread(program, "test").is_err() {
        return 201;
    }
    for (index, (_, check)) in checks.iter().enumerate() {
        if !check() {
            return i32::try_from(index + 1).unwrap_or(199);
        }
    }
    0
}

fn assert_all_checks_pass(profile: SeccompProfile, options: SeccompOptions, checks: &[Check]) {
    let program = compile(profile, options).expect("compiles");
    let status = in_forked_child(&program, checks);
    let WaitStatus::Exited(_, code) = status else {
        panic!("child did not exit normally: {status:?}");
    };
    let failed = usize::try_from(code)
        .ok()
        .and_then(|code| code.checked_sub(1))
        .and_then(|index| checks.get(index));
    assert_eq!(
        code,
        0,
        "failed check: {:?} ({profile:?} {options:?})",
        failed.map(|check| check.0)
    );
}

/// `/proc/thread-self/status` contains `needle` (read into a stack buffer: no allocation).
fn status_contains(needle: &[u8]) -> bool {
    let mut buf = [0u8; 8192];
    // SAFETY: the path is a NUL-terminated literal; the returned fd is closed below.
    let fd = unsafe {
        libc::open(
            c"/proc/thread-self/status".as_ptr(),
            libc::O_RDONLY | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return false;
    }
    let mut len = 0;
    while let Some(rest) = buf.get_mut(len..).filter(|rest| !rest.is_empty()) {
        // SAFETY: `rest` is a live, writable stack buffer of `rest.len()` bytes.
        let n = unsafe { libc::read(fd, rest.as_mut_ptr().cast(), rest.len()) };
        match usize::try_from(n) {
            Ok(0) | Err(_) => break,
            Ok(n) => len += n,
        }
    }
    // SAFETY: `fd` was opened above and is not used afterwards.
    unsafe { libc::close(fd) };
    buf.get(..len)
        .is_some_and(|text| text.windows(needle.len()).any(|window| window == needle))
}

/// `syscall(nr, a0, a1, a2)` with integer arguments only, returning its errno (0 on success).
/// Any descriptor the call returns stays open until the child exits.
///
/// # Safety
///
/// The arguments must make the kernel touch no memory of the caller except through valid
/// pointers, and the call must not return twice (no fork-like calls: see `clone_new_user_fails`).
unsafe fn errno_of_call(nr: c_long, a0: c_long, a1: c_long, a2: c_long) -> i32 {
    // SAFETY: forwarded to the caller.
    errno_of(unsafe { libc::syscall(nr, a0, a1, a2, ZERO, ZERO, ZERO) })
}

fn socket_errno(family: i32, kind: i32, protocol: i32) -> i32 {
    // SAFETY: socket() takes integers only and returns a descriptor or -1.
    errno_of(c_long::from(unsafe {
        libc::socket(family, kind, protocol)
    }))
}

fn socketpair_errno(family: i32, kind: i32) -> i32 {
    let mut fds = [-1; 2];
    // SAFETY: `fds` is a live array of two ints, as socketpair() requires.
    let ret = unsafe { libc::socketpair(family, kind, 0, fds.as_mut_ptr()) };
    errno_of(c_long::from(ret))
}

/// A stream socketpair carries a byte (ordinary read and write keep working).
fn socketpair_round_trip() -> bool {
    let mut fds = [-1; 2];
    // SAFETY: `fds` is a live array of two ints, as socketpair() requires.
    if unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_STREAM | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    } != 0
    {
        return false;
    }
    let [a, b] = fds;
    let mut byte = [0u8; 1];
    // SAFETY: writes one byte from a live one-byte buffer to a descriptor we own.
    let written = unsafe { libc::write(a, b"x".as_ptr().cast(), 1) };
    // SAFETY: reads at most one byte into a live one-byte buffer from a descriptor we own.
    let read = unsafe { libc::read(b, byte.as_mut_ptr().cast(), 1) };
    written == 1 && read == 1 && byte == *b"x"
}

/// clone(CLONE_NEWUSER | SIGCHLD) fails with EPERM. Should the filter let it through, the new
/// child exits at once and the check fails.
fn clone_new_user_fails() -> bool {
    let flags = c_long::from(libc::CLONE_NEWUSER | libc::SIGCHLD);
    // SAFETY: with a null stack clone() behaves like fork(); the child branch below `_exit`s
    // immediately, touching nothing.
    let ret = unsafe { libc::syscall(libc::SYS_clone, flags, ZERO, ZERO, ZERO, ZERO) };
    if ret == 0 {
        // SAFETY: ends the unexpected child at once.
        unsafe { libc::_exit(0) };
    }
    if ret > 0 {
        let Ok(pid) = i32::try_from(ret) else {
            return false;
        };
        // SAFETY: waits for the child we just created; status pointer may be null.
        unsafe { libc::waitpid(pid, std::ptr::null_mut(), 0) };
        return false;
    }
    errno_of(ret) == libc::EPERM
}

const TIOCSTI_HIGH: c_long = 0x1_0000_5412;
const ZERO: c_long = 0;

const COMMON_CHECKS: &[Check] = &[
    ("getpid works", || {
        // SAFETY: getpid takes no arguments.
        unsafe { libc::syscall(libc::SYS_getpid) > 0 }
    }),
    ("Seccomp: 2 in /proc/thread-self/status", || {
        status_contains(b"Seccomp:\t2\n")
    }),
    ("NoNewPrivs: 1 in /proc/thread-self/status", || {
        status_contains(b"NoNewPrivs:\t1\n")
    }),
    ("a stream socketpair carries a byte", socketpair_round_trip),
    ("ptrace(PTRACE_TRACEME) fails with EPERM", || {
        // SAFETY: PTRACE_TRACEME ignores pid, addr and data.
        unsafe { errno_of_call(libc::SYS_ptrace, 0, 0, 0) == libc::EPERM }
    }),
    ("unshare(CLONE_NEWUSER) fails with EPERM", || {
        // SAFETY: unshare takes a flags integer.
        unsafe {
            errno_of_call(libc::SYS_unshare, c_long::from(libc::CLONE_NEWUSER), 0, 0) == libc::EPERM
        }
    }),
    (
        "clone(CLONE_NEWUSER) fails with EPERM",
        clone_new_user_fails,
    ),
    (
        "clone3 fails with ENOSYS (EINVAL without the filter)",
        || {
            // SAFETY: a null clone_args with size 0 is rejected before any memory is read.
            unsafe { errno_of_call(libc::SYS_clone3, 0, 0, 0) == libc::ENOSYS }
        },
    ),
    (
        "io_uring_setup fails with EPERM (EFAULT without the filter)",
        || {
            // SAFETY: a null params pointer is rejected with EFAULT by the kernel without the filter.
            unsafe { errno_of_call(libc::SYS_io_uring_setup, 1, 0, 0) == libc::EPERM }
        },
    ),
    (
        "ioctl(TIOCSTI | 1 << 32) fails with EPERM (EBADF without the filter)",
        || {
            // SAFETY: fd -1 is rejected before the argument pointer (null) is used.
            unsafe { errno_of_call(libc::SYS_ioctl, -1, TIOCSTI_HIGH, 0) == libc::EPERM }
        },
    ),
    ("ioctl(TIOCSTI) fails with EPERM", || {
        // SAFETY: fd -1 is rejected before the argument pointer (null) is used.
        unsafe { errno_of_call(libc::SYS_ioctl, -1, 0x5412, 0) == libc::EPERM }
    }),
    ("ioctl(TIOCLINUX) fails with EPERM", || {
        // SAFETY: fd -1 is rejected before the argument pointer (null) is used.
        unsafe { errno_of_call(libc::SYS_ioctl, -1, 0x541C, 0) == libc::EPERM }
    }),
    (
        "ioctl(FIONREAD) on a bad fd still reaches the kernel (EBADF)",
        || {
            // SAFETY: fd -1 is rejected before the argument pointer (null) is used.
            unsafe { errno_of_call(libc::SYS_ioctl, -1, 0x541B, 0) == libc::EBADF }
        },
    ),
    ("mount fails with EPERM", || {
        // SAFETY: null source, target and type; the filter answers before the kernel reads them.
        unsafe { errno_of_call(libc::SYS_mount, 0, 0, 0) == libc::EPERM }
    }),
    ("bpf fails with EPERM", || {
        // SAFETY: a null attr with size 0.
        unsafe { errno_of_call(libc::SYS_bpf, 0, 0, 0) == libc::EPERM }
    }),
    ("perf_event_open fails with EPERM", || {
        // SAFETY: a null attr is rejected with EFAULT without the filter.
        unsafe { errno_of_call(libc::SYS_perf_event_open, 0, 0, -1) == libc::EPERM }
    }),
    ("userfaultfd fails with EPERM", || {
        // SAFETY: takes a flags integer.
        unsafe {
            errno_of_call(libc::SYS_userfaultfd, c_long::from(libc::O_CLOEXEC), 0, 0) == libc::EPERM
        }
    }),
    ("keyctl fails with EPERM", || {
        // SAFETY: KEYCTL_GET_KEYRING_ID takes integers only.
        unsafe { errno_of_call(libc::SYS_keyctl, 0, -3, 0) == libc::EPERM }
    }),
    (
        "mknodat(S_IFREG | 04755) fails with EPERM (EFAULT without the filter)",
        || {
            // SAFETY: a null path is rejected with EFAULT; nothing is created.
            unsafe {
                errno_of_call(
                    libc::SYS_mknodat,
                    -1,
                    0,
                    c_long::from(libc::S_IFREG | 0o4755),
                ) == libc::EPERM
            }
        },
    ),
    (
        "mkdirat(02755) fails with EPERM (EFAULT without the filter)",
        || {
            // SAFETY: a null path is rejected with EFAULT; nothing is created.
            unsafe { errno_of_call(libc::SYS_mkdirat, -1, 0, 0o2755) == libc::EPERM }
        },
    ),
    ("mkdirat(0755) still reaches the kernel (EFAULT)", || {
        // SAFETY: a null path is rejected with EFAULT; nothing is created.
        unsafe { errno_of_call(libc::SYS_mkdirat, -1, 0, 0o755) == libc::EFAULT }
    }),
    (
        "openat2 fails with ENOSYS (EFAULT without the filter)",
        || {
            // SAFETY: a null open_how and path are rejected with EFAULT; nothing is opened.
            unsafe { errno_of_call(libc::SYS_openat2, -1, 0, 0) == libc::ENOSYS }
        },
    ),
    (
        "fcntl(F_SETLEASE) fails with EPERM (EBADF without the filter)",
        || {
            // SAFETY: fcntl takes integers; fd -1 is rejected by the kernel.
            unsafe {
                errno_of_call(libc::SYS_fcntl, -1, c_long::from(libc::F_SETLEASE), 0) == libc::EPERM
            }
        },
    ),
    (
        "fcntl(F_GETFD) on a bad fd still reaches the kernel (EBADF)",
        || {
            // SAFETY: fcntl takes integers; fd -1 is rejected by the kernel.
            unsafe {
                errno_of_call(libc::SYS_fcntl, -1, c_long::from(libc::F_GETFD), 0) == libc::EBADF
            }
        },
    ),
    ("prlimit64(1, ...) fails with EPERM", || {
        // SAFETY: null new and old limits: nothing is read or written.
        unsafe {
            errno_of_call(libc::SYS_prlimit64, 1, c_long::from(libc::RLIMIT_NOFILE), 0)
                == libc::EPERM
        }
    }),
    ("prlimit64(0, ...) works (getrlimit, setrlimit)", || {
        // SAFETY: null new and old limits: nothing is read or written.
        unsafe { errno_of_call(libc::SYS_prlimit64, 0, c_long::from(libc::RLIMIT_NOFILE), 0) == 0 }
    }),
    ("personality query works", || {
        // SAFETY: takes an integer.
        unsafe { errno_of_call(libc::SYS_personality, 0xffff_ffff, 0, 0) == 0 }
    }),
    ("personality(ADDR_NO_RANDOMIZE) fails with EPERM", || {
        // SAFETY: takes an integer.
        unsafe {
            errno_of_call(
                libc::SYS_personality,
                c_long::from(libc::ADDR_NO_RANDOMIZE),
                0,
                0,
            ) == libc::EPERM
        }
    }),
];

#[test]
fn installed_confined_filter_denies_privileged_calls_in_a_forked_child() {
    assert_all_checks_pass(
        SeccompProfile::Confined,
        options(false, false, false),
        COMMON_CHECKS,
    );
}

#[test]
fn installed_no_network_filter_denies_sockets_in_a_forked_child() {
    const CHECKS: &[Check] = &[
        ("socket(AF_INET) fails with EPERM", || {
            socket_errno(libc::AF_INET, libc::SOCK_STREAM, 0) == libc::EPERM
        }),
        ("socket(AF_INET6) fails with EPERM", || {
            socket_errno(libc::AF_INET6, libc::SOCK_DGRAM, 0) == libc::EPERM
        }),
        ("socket(AF_NETLINK) fails with EPERM", || {
            socket_errno(libc::AF_NETLINK, libc::SOCK_RAW, 0) == libc::EPERM
        }),
        ("socket(AF_VSOCK) fails with EPERM", || {
            socket_errno(libc::AF_VSOCK, libc::SOCK_STREAM, 0) == libc::EPERM
        }),
        ("socket(AF_PACKET) fails with EPERM", || {
            socket_errno(libc::AF_PACKET, libc::SOCK_RAW, 0) == libc::EPERM
        }),
        (
            "socket(100) fails with EPERM (EAFNOSUPPORT without the filter)",
            || socket_errno(100, libc::SOCK_STREAM, 0) == libc::EPERM,
        ),
        ("socket(AF_UNIX) fails with EPERM", || {
            socket_errno(libc::AF_UNIX, libc::SOCK_STREAM, 0) == libc::EPERM
        }),
        ("socketpair(AF_UNIX, SOCK_STREAM) works", || {
            socketpair_errno(libc::AF_UNIX, libc::SOCK_STREAM) == 0
        }),
        ("socketpair(AF_UNIX, SOCK_SEQPACKET) works", || {
            socketpair_errno(libc::AF_UNIX, libc::SOCK_SEQPACKET) == 0
        }),
        ("socketpair(AF_UNIX, SOCK_DGRAM) fails with EPERM", || {
            socketpair_errno(libc::AF_UNIX, libc::SOCK_DGRAM) == libc::EPERM
        }),
        ("socketpair(AF_INET) fails with EPERM", || {
            socketpair_errno(libc::AF_INET, libc::SOCK_STREAM) == libc::EPERM
        }),
    ];
    for profile in CONFINED {
        let options = options(true, false, true);
        assert_all_checks_pass(profile, options, CHECKS);
        assert_all_checks_pass(profile, options, COMMON_CHECKS);
    }
}

#[test]
fn installed_netns_filter_allows_inet_and_netlink_route_in_a_forked_child() {
    const CHECKS: &[Check] = &[
        ("socket(AF_INET) works", || {
            socket_errno(libc::AF_INET, libc::SOCK_STREAM, 0) == 0
        }),
        ("socket(AF_INET6) is not denied by the filter", || {
            socket_errno(libc::AF_INET6, libc::SOCK_STREAM, 0) != libc::EPERM
        }),
        ("socket(AF_NETLINK, NETLINK_ROUTE) works", || {
            socket_errno(libc::AF_NETLINK, libc::SOCK_RAW, 0) == 0
        }),
        ("socket(AF_NETLINK, NETLINK_AUDIT) fails with EPERM", || {
            socket_errno(libc::AF_NETLINK, libc::SOCK_RAW, 9) == libc::EPERM
        }),
        ("socket(AF_VSOCK) fails with EPERM", || {
            socket_errno(libc::AF_VSOCK, libc::SOCK_STREAM, 0) == libc::EPERM
        }),
        ("socket(AF_PACKET) fails with EPERM", || {
            socket_errno(libc::AF_PACKET, libc::SOCK_RAW, 0) == libc::EPERM
        }),
        ("socket(AF_ALG) fails with EPERM", || {
            socket_errno(libc::AF_ALG, libc::SOCK_SEQPACKET, 0) == libc::EPERM
        }),
        ("socket(100) fails with EPERM", || {
            socket_errno(100, libc::SOCK_STREAM, 0) == libc::EPERM
        }),
        ("socket(AF_UNIX) works", || {
            socket_errno(libc::AF_UNIX, libc::SOCK_STREAM, 0) == 0
        }),
        ("socketpair(AF_UNIX, SOCK_DGRAM) works", || {
            socketpair_errno(libc::AF_UNIX, libc::SOCK_DGRAM) == 0
        }),
        ("ptrace still fails with EPERM", || {
            // SAFETY: PTRACE_TRACEME ignores pid, addr and data.
            unsafe { errno_of_call(libc::SYS_ptrace, 0, 0, 0) == libc::EPERM }
        }),
    ];
    for profile in CONFINED {
        assert_all_checks_pass(profile, options(true, true, false), CHECKS);
    }
}

#[test]
fn installed_filter_with_network_on_and_unix_denied_in_a_forked_child() {
    const CHECKS: &[Check] = &[
        ("socket(AF_INET) works", || {
            socket_errno(libc::AF_INET, libc::SOCK_STREAM, 0) == 0
        }),
        ("socket(100) reaches the kernel (EAFNOSUPPORT)", || {
            socket_errno(100, libc::SOCK_STREAM, 0) == libc::EAFNOSUPPORT
        }),
        ("socket(AF_UNIX) fails with EPERM", || {
            socket_errno(libc::AF_UNIX, libc::SOCK_STREAM, 0) == libc::EPERM
        }),
        (
            "socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC) works",
            || socketpair_errno(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_CLOEXEC) == 0,
        ),
        (
            "socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC) fails with EPERM",
            || {
                socketpair_errno(libc::AF_UNIX, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC)
                    == libc::EPERM
            },
        ),
    ];
    assert_all_checks_pass(
        SeccompProfile::Confined,
        options(false, false, true),
        CHECKS,
    );
}

#[test]
#[cfg(target_arch = "x86_64")]
fn installed_filter_kills_an_x32_syscall_in_a_forked_child() {
    const CHECKS: &[Check] = &[("an x32 getpid kills the process", || {
        let no_core = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: `no_core` is a live rlimit; a zero core limit keeps SIGSYS from dumping core.
        unsafe { libc::setrlimit(libc::RLIMIT_CORE, &no_core) };
        // SAFETY: getpid takes no arguments; under the filter the process dies here.
        unsafe { libc::syscall(libc::SYS_getpid | 0x4000_0000) };
        false
    })];
    let program =
        compile(SeccompProfile::Confined, options(false, false, false)).expect("compiles");
    let status = in_forked_child(&program, CHECKS);
    assert!(
        matches!(status, WaitStatus::Signaled(_, Signal::SIGSYS, _)),
        "{status:?}"
    );
}

#[test]
fn install_affects_only_the_calling_thread() {
    let program = compile(
        SeccompProfile::ConfinedNoNetwork,
        options(true, false, false),
    )
    .expect("compiles");
    // socket(100) is EPERM under the filter and EAFNOSUPPORT without it; harmless either way.
    let filtered = std::thread::spawn(move || {
        install_on_current_thread(&program, "confined-no-network").expect("installs");
        (
            socket_errno(100, libc::SOCK_STREAM, 0),
            status_contains(b"Seccomp:\t2\n"),
        )
    })
    .join()
    .expect("thread");
    assert_eq!(filtered, (libc::EPERM, true));
    // Neither this thread nor a new sibling is filtered.
    let sibling = std::thread::spawn(|| socket_errno(100, libc::SOCK_STREAM, 0))
        .join()
        .expect("thread");
    assert_eq!(
        (socket_errno(100, libc::SOCK_STREAM, 0), sibling),
        (libc::EAFNOSUPPORT, libc::EAFNOSUPPORT)
    );
}

#[test]
fn install_rejects_an_empty_program() {
    let error = install_on_current_thread(&Vec::new(), "confined").expect_err("empty");
    let SandboxError::SeccompInstall { profile, source } = error else {
        panic!("unexpected error {error:?}");
    };
    assert_eq!(
        (profile.as_str(), source.kind()),
        ("confined", io::ErrorKind::InvalidInput)
    );
}
