//! The network allow-list's filter, and the supervised filter whose listener decides execs.

use pretty_assertions::assert_eq;

use super::program::{data, probe_values, run};
use super::sockets::STREAM;
use super::*;

/// The allow-list's filter is the filter of network off: inet is allowed only with the private
/// network namespace (where nothing but loopback and the relay exist), every other family and
/// io_uring stay denied.
#[test]
fn the_allow_list_filter_is_the_network_off_filter() {
    for options in all_options() {
        let allow_list = rules(SeccompProfile::ConfinedAllowList, options);
        assert_eq!(
            allow_list,
            rules(SeccompProfile::ConfinedNoNetwork, options),
            "{options:?}"
        );
        let compiled = |p| compile(p, options).expect("compiles");
        assert_eq!(
            compiled(SeccompProfile::ConfinedAllowList),
            compiled(SeccompProfile::ConfinedNoNetwork),
            "{options:?}"
        );
        let inet = denied(
            &allow_list,
            libc::SYS_socket,
            args3(domain(libc::AF_INET), STREAM, 0),
        );
        assert_eq!(inet.is_none(), options.netns_isolates, "{options:?}");
        for family in [libc::AF_PACKET, libc::AF_VSOCK, libc::AF_ALG] {
            assert_eq!(
                denied(
                    &allow_list,
                    libc::SYS_socket,
                    args3(domain(family), STREAM, 0)
                ),
                EPERM
            );
        }
        assert_eq!(denied(&allow_list, libc::SYS_io_uring_setup, [0; 6]), EPERM);
    }
    assert_eq!(
        profile_name(SeccompProfile::ConfinedAllowList),
        "confined-allow-list"
    );
}

/// Exit code of a forked child that sets `PR_SET_NO_NEW_PRIVS`, installs the supervised
/// confined filter with a listener (200, 201: it could not) and returns what `check` makes of
/// that listener. `check` runs in the child: raw syscalls on data built before the fork only, no
/// allocation, no unwinding.
fn in_a_child_with_a_listener(check: impl FnOnce(std::os::fd::OwnedFd) -> i32) -> i32 {
    let program = compile_supervised(SeccompProfile::Confined, options(false, false, false))
        .expect("compiles");
    // Converted before the fork: the child allocates nothing.
    let raw = to_kernel(&program);
    // SAFETY: the child only makes raw syscalls on data built before the fork and ends with
    // `_exit`; it neither allocates nor unwinds.
    match unsafe { fork() }.expect("fork") {
        ForkResult::Child => {
            let code = (|| {
                // SAFETY: prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) takes integers only.
                if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
                    return 200;
                }
                let Ok(listener) = crate::sys::notify::install_filter_with_listener(&raw) else {
                    return 201;
                };
                // A `check` that panics ends the child with 202, never unwinds into the
                // harness's copy.
                let guard = ExitOnUnwind;
                let code = check(listener);
                std::mem::forget(guard);
                code
            })();
            // SAFETY: `_exit` ends the child without returning into the harness.
            unsafe { libc::_exit(code) }
        }
        ForkResult::Parent { child } => match waitpid(child, None).expect("waitpid") {
            WaitStatus::Exited(_, code) => code,
            other => panic!("the child ended {other:?}"),
        },
    }
}

/// Ends a forked child with 202 when dropped (by an unwinding panic).
struct ExitOnUnwind;

impl Drop for ExitOnUnwind {
    fn drop(&mut self) {
        // SAFETY: `_exit` ends the process at once; it takes an integer only.
        unsafe { libc::_exit(202) }
    }
}

/// The supervisor sets and clears its listener's synchronous wake-up flag as the machine's
/// load changes (`supervisor::wake`): the kernel takes both on a real listener.
#[test]
fn a_supervised_filter_s_listener_takes_the_sync_wake_up_flag_and_its_clearing() {
    use std::os::fd::AsFd;
    // Before 6.6 the kernel refuses the flag and the supervisor goes on without it.
    let lacks = crate::host_lacks("sync-wake-up");
    let code = in_a_child_with_a_listener(|listener| {
        let set = |on| {
            crate::sys::notify::set_sync_wake_up(listener.as_fd(), on).map_err(|e| e.raw_os_error())
        };
        let einval = Err(Some(libc::EINVAL));
        match (set(true), set(false), set(true)) {
            (Ok(()), Ok(()), Ok(())) => 0,
            (a, b, c) if lacks && a == einval && b == einval && c == einval => 0,
            (Err(_), ..) => 10,
            (_, Err(_), _) => 11,
            _ => 12,
        }
    });
    assert_eq!(
        code, 0,
        "10: setting the flag failed (set BRIDLE_HOST_LACKS=sync-wake-up on kernels before \
         6.6; only EINVAL then), 11: clearing it, 12: setting it again; 200/201: no filter; \
         202: the check panicked"
    );
}

/// The supervised filter with nobody holding its listener (the supervisor gone): every exec
/// (and `ptrace`, which the supervisor refuses) fails with `ENOSYS`, so nothing runs
/// unsupervised; other syscalls are not affected.
#[test]
fn a_supervised_filter_whose_listener_is_gone_fails_every_exec_with_enosys() {
    let code = in_a_child_with_a_listener(|listener| {
        drop(listener);
        let argv = [c"true".as_ptr(), std::ptr::null()];
        let envp = [std::ptr::null::<libc::c_char>()];
        // SAFETY: NUL-terminated literals and NULL-terminated vectors that outlive
        // the call; on success the process image is replaced.
        unsafe { libc::execve(c"/bin/true".as_ptr(), argv.as_ptr(), envp.as_ptr()) };
        let execve = io::Error::last_os_error().raw_os_error().unwrap_or(-1);
        // SAFETY: as above; execveat(AT_FDCWD, path, argv, envp, 0).
        unsafe {
            libc::syscall(
                libc::SYS_execveat,
                libc::AT_FDCWD,
                c"/bin/true".as_ptr(),
                argv.as_ptr(),
                envp.as_ptr(),
                0,
            )
        };
        let execveat = io::Error::last_os_error().raw_os_error().unwrap_or(-1);
        // SAFETY: ptrace(PTRACE_TRACEME, 0, NULL, NULL) takes integers only.
        unsafe { libc::ptrace(libc::PTRACE_TRACEME, 0, 0, 0) };
        let ptrace = io::Error::last_os_error().raw_os_error().unwrap_or(-1);
        // SAFETY: getppid takes no arguments.
        let other = unsafe { libc::getppid() } > 0;
        match (
            execve == libc::ENOSYS,
            execveat == libc::ENOSYS,
            ptrace == libc::ENOSYS,
            other,
        ) {
            (true, true, true, true) => 0,
            (false, ..) => 10,
            (_, false, ..) => 11,
            (_, _, false, _) => 13,
            _ => 12,
        }
    });
    assert_eq!(
        code, 0,
        "10: execve, 11: execveat, 13: ptrace did not fail with ENOSYS; 12: getppid failed"
    );
}

/// The compiled supervised program (the exec notification first) agrees with its table.
#[test]
fn the_compiled_supervised_program_agrees_with_its_table() {
    let mut values = probe_values();
    values.extend([
        0x100, 0x4100, 0x8100, 0x1_0100, 0xc100, 0x1_8100, 0x4111, 0x111,
    ]);
    for profile in CONFINED {
        let options = options(false, false, false);
        let table = supervised_rules(profile, options);
        let program = compile_supervised(profile, options).expect("compiles");
        let agrees = |nr: c_long, args: [u64; 6]| {
            let expected = match denied(&table, nr, args) {
                Some(errno) => libc::SECCOMP_RET_ERRNO | errno.cast_unsigned(),
                None => libc::SECCOMP_RET_ALLOW,
            };
            assert_eq!(
                run(&program, &data(nr, args)),
                expected,
                "nr {nr} {args:x?}"
            );
        };
        // The program begins with the exec notification; these syscalls come after it.
        for nr in [libc::SYS_clone, libc::SYS_madvise, libc::SYS_io_setup] {
            for &a0 in &values {
                for &a2 in &values {
                    agrees(nr, args3(a0, 0, a2));
                }
            }
        }
        // process_madvise's advice and mmap's flags are the fourth argument.
        for nr in [libc::SYS_mmap, libc::SYS_process_madvise] {
            for &a3 in values.iter().chain(&[0x08, 0x18, 0x28, 0x0a, 0x22, 0x4022]) {
                agrees(nr, [0, 0, 0, a3, 0, 0]);
            }
        }
    }
}

/// The supervised program sends `execve`, `execveat` and `ptrace` to the listener, ahead of the
/// table (which denies `ptrace`); the syscalls next to them are the table's.
#[test]
fn the_supervised_program_notifies_execs_and_ptrace_only() {
    for profile in CONFINED {
        let options = options(false, false, false);
        let table = supervised_rules(profile, options);
        let program = compile_supervised(profile, options).expect("compiles");
        for nr in [libc::SYS_execve, libc::SYS_execveat, libc::SYS_ptrace] {
            assert_eq!(
                run(&program, &data(nr, [0; 6])),
                libc::SECCOMP_RET_USER_NOTIF,
                "{profile:?}: nr {nr}"
            );
        }
        for nr in [
            libc::SYS_ptrace - 1,
            libc::SYS_ptrace + 1,
            libc::SYS_execve - 1,
            libc::SYS_execve + 1,
            libc::SYS_execveat + 1,
        ] {
            let expected = match denied(&table, nr, [0; 6]) {
                Some(errno) => libc::SECCOMP_RET_ERRNO | errno.cast_unsigned(),
                None => libc::SECCOMP_RET_ALLOW,
            };
            assert_eq!(
                run(&program, &data(nr, [0; 6])),
                expected,
                "{profile:?}: nr {nr}"
            );
        }
    }
}
