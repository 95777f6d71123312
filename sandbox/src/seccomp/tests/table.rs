//! The deny table (pure): which syscalls and arguments each profile denies, and with what.

use pretty_assertions::assert_eq;

use super::*;

#[test]
fn none_profile_has_an_empty_table() {
    for options in all_options() {
        assert_eq!(rules(SeccompProfile::None, options), Vec::new());
    }
}

#[test]
fn always_denied_syscalls_are_denied_with_eperm_in_every_confined_table() {
    let mut expected = vec![
        libc::SYS_ptrace,
        libc::SYS_process_vm_readv,
        libc::SYS_process_vm_writev,
        libc::SYS_pidfd_getfd,
        libc::SYS_mount,
        libc::SYS_umount2,
        libc::SYS_pivot_root,
        libc::SYS_chroot,
        libc::SYS_move_mount,
        libc::SYS_open_tree,
        libc::SYS_fsopen,
        libc::SYS_fsconfig,
        libc::SYS_fsmount,
        libc::SYS_fspick,
        libc::SYS_mount_setattr,
        libc::SYS_unshare,
        libc::SYS_setns,
        libc::SYS_bpf,
        libc::SYS_perf_event_open,
        libc::SYS_userfaultfd,
        libc::SYS_keyctl,
        libc::SYS_add_key,
        libc::SYS_request_key,
        libc::SYS_kexec_load,
        libc::SYS_kexec_file_load,
        libc::SYS_init_module,
        libc::SYS_finit_module,
        libc::SYS_delete_module,
        libc::SYS_open_by_handle_at,
        libc::SYS_name_to_handle_at,
        libc::SYS_io_uring_setup,
        libc::SYS_io_uring_enter,
        libc::SYS_io_uring_register,
        libc::SYS_acct,
        libc::SYS_swapon,
        libc::SYS_swapoff,
        libc::SYS_reboot,
        libc::SYS_quotactl,
        libc::SYS_quotactl_fd,
        libc::SYS_lookup_dcookie,
        libc::SYS_nfsservctl,
        libc::SYS_vhangup,
    ];
    #[cfg(target_arch = "x86_64")]
    expected.extend([libc::SYS_uselib, libc::SYS_iopl, libc::SYS_ioperm]);
    for profile in CONFINED {
        for options in all_options() {
            let table = rules(profile, options);
            for &nr in &expected {
                for args in [[0; 6], [u64::MAX; 6], args3(1, 2, 3)] {
                    assert_eq!(
                        denied(&table, nr, args),
                        EPERM,
                        "syscall {nr} in {profile:?} {options:?}"
                    );
                }
            }
        }
    }
}

#[test]
fn ptrace_is_denied_for_process_isolation_in_every_confined_table() {
    for profile in CONFINED {
        for options in all_options() {
            let table = rules(profile, options);
            let row = evaluate(&table, libc::SYS_ptrace, &[0; 6]).expect("ptrace is denied");
            assert_eq!(
                (row.syscall, row.errno, row.guarantee),
                ("ptrace", libc::EPERM, Guarantee::Proc)
            );
        }
    }
}

#[test]
fn clone3_is_denied_with_enosys_so_runtimes_fall_back_to_clone() {
    for profile in CONFINED {
        for options in all_options() {
            let table = rules(profile, options);
            assert_eq!(denied(&table, libc::SYS_clone3, [0; 6]), Some(libc::ENOSYS));
        }
    }
}

#[test]
fn openat2_is_denied_with_enosys_so_callers_fall_back_to_openat() {
    for profile in CONFINED {
        for options in all_options() {
            let table = rules(profile, options);
            for args in [[0; 6], [u64::MAX; 6]] {
                assert_eq!(denied(&table, libc::SYS_openat2, args), Some(libc::ENOSYS));
            }
        }
    }
}

#[test]
fn creating_a_setuid_or_setgid_node_or_directory_is_denied() {
    let table = rules(SeccompProfile::Confined, options(false, false, false));
    let s_ifreg = u64::from(libc::S_IFREG);
    let mut calls = vec![(libc::SYS_mknodat, 2), (libc::SYS_mkdirat, 2)];
    #[cfg(target_arch = "x86_64")]
    calls.extend([(libc::SYS_mknod, 1), (libc::SYS_mkdir, 1)]);
    for (nr, index) in calls {
        let with_mode = |mode: u64| {
            let mut args = [3, 0, 0, 0, 0, 0];
            args[index] = mode;
            args
        };
        for mode in [
            s_ifreg | 0o4755,
            s_ifreg | 0o2755,
            0o6777,
            0o2000,
            0x1_0000_0000 | 0o4000,
        ] {
            assert_eq!(denied(&table, nr, with_mode(mode)), EPERM, "{nr} {mode:o}");
        }
        for mode in [
            s_ifreg | 0o644,
            0o755,
            0o1777,
            u64::from(libc::S_IFIFO) | 0o600,
        ] {
            assert_eq!(denied(&table, nr, with_mode(mode)), None, "{nr} {mode:o}");
        }
    }
}

#[test]
fn file_leases_are_denied_but_locks_and_other_fcntls_are_not() {
    for profile in CONFINED {
        for options in all_options() {
            let table = rules(profile, options);
            let lease = u64::from(F_SETLEASE);
            for args in [
                args3(3, lease, 0),
                args3(3, lease, 2),
                args3(3, lease | (1 << 32), 1),
            ] {
                let row = evaluate(&table, libc::SYS_fcntl, &args).expect("F_SETLEASE denied");
                assert_eq!((row.errno, row.guarantee), (libc::EPERM, Guarantee::Proc));
            }
            for cmd in [
                libc::F_GETLEASE,
                libc::F_SETLK,
                libc::F_SETLKW,
                libc::F_OFD_SETLK,
                libc::F_SETFL,
                libc::F_DUPFD_CLOEXEC,
                libc::F_NOTIFY,
            ] {
                let args = args3(3, u64::from(cmd.cast_unsigned()), 0);
                assert_eq!(denied(&table, libc::SYS_fcntl, args), None, "fcntl {cmd}");
            }
        }
    }
}

#[test]
fn prlimit_is_allowed_only_on_the_caller_itself() {
    for profile in CONFINED {
        for options in all_options() {
            let table = rules(profile, options);
            assert_eq!(denied(&table, libc::SYS_prlimit64, args3(0, 7, 0)), None);
            assert_eq!(
                denied(&table, libc::SYS_prlimit64, args3(1 << 32, 7, 0)),
                None,
                "the kernel reads pid as a 32-bit int: 0"
            );
            for pid in [1, 2, 0xffff_ffff, u64::MAX] {
                let row = evaluate(&table, libc::SYS_prlimit64, &args3(pid, 7, 0))
                    .expect("prlimit on another pid is denied");
                assert_eq!((row.errno, row.guarantee), (libc::EPERM, Guarantee::Proc));
            }
        }
    }
}

#[test]
fn clone_with_any_namespace_flag_is_denied() {
    let table = rules(SeccompProfile::Confined, options(false, false, false));
    let sigchld = u64::from(libc::SIGCHLD.cast_unsigned());
    for (name, flag) in CLONE_NEW_FLAGS {
        let flag = u64::from(flag);
        assert_eq!(
            denied(&table, libc::SYS_clone, args3(flag, 0, 0)),
            EPERM,
            "{name}"
        );
        assert_eq!(
            denied(&table, libc::SYS_clone, args3(flag | sigchld, 0, 0)),
            EPERM,
            "{name}|SIGCHLD"
        );
        assert_eq!(
            denied(
                &table,
                libc::SYS_clone,
                args3(flag | 0xffff_0000_0000_0000, 0, 0)
            ),
            EPERM,
            "{name} with high bits"
        );
    }
    let all_namespaces = CLONE_NEW_FLAGS
        .iter()
        .fold(0u64, |acc, (_, flag)| acc | u64::from(*flag));
    assert_eq!(
        denied(&table, libc::SYS_clone, args3(all_namespaces, 0, 0)),
        EPERM
    );
}

#[test]
fn clone_for_fork_and_threads_is_allowed() {
    let table = rules(
        SeccompProfile::ConfinedNoNetwork,
        options(true, false, true),
    );
    let sigchld = u64::from(libc::SIGCHLD.cast_unsigned());
    // glibc's fork() and pthread_create() flags.
    let fork = u64::from((libc::CLONE_CHILD_SETTID | libc::CLONE_CHILD_CLEARTID).cast_unsigned())
        | sigchld;
    let thread = u64::from(
        (libc::CLONE_VM
            | libc::CLONE_FS
            | libc::CLONE_FILES
            | libc::CLONE_SIGHAND
            | libc::CLONE_THREAD
            | libc::CLONE_SYSVSEM
            | libc::CLONE_SETTLS
            | libc::CLONE_PARENT_SETTID
            | libc::CLONE_CHILD_CLEARTID)
            .cast_unsigned(),
    );
    let vfork = u64::from((libc::CLONE_VM | libc::CLONE_VFORK).cast_unsigned()) | sigchld;
    for flags in [sigchld, fork, thread, vfork] {
        assert_eq!(
            denied(&table, libc::SYS_clone, args3(flags, 0, 0)),
            None,
            "flags {flags:#x}"
        );
    }
}

#[test]
fn clone_namespace_flag_values_match_libc() {
    let from_libc = [
        libc::CLONE_NEWTIME,
        libc::CLONE_NEWNS,
        libc::CLONE_NEWCGROUP,
        libc::CLONE_NEWUTS,
        libc::CLONE_NEWIPC,
        libc::CLONE_NEWUSER,
        libc::CLONE_NEWPID,
        libc::CLONE_NEWNET,
    ]
    .map(i32::cast_unsigned);
    assert_eq!(CLONE_NEW_FLAGS.map(|(_, flag)| flag), from_libc);
}

#[test]
fn kernel_constants_match_libc() {
    assert_eq!(
        [AF_UNIX, AF_INET, AF_INET6, AF_NETLINK, SOCK_DGRAM, SOCK_RAW],
        [
            libc::AF_UNIX,
            libc::AF_INET,
            libc::AF_INET6,
            libc::AF_NETLINK,
            libc::SOCK_DGRAM,
            libc::SOCK_RAW
        ]
        .map(i32::cast_unsigned)
    );
    assert_eq!(u64::from(TIOCSTI), libc::TIOCSTI);
    assert_eq!(u64::from(TIOCLINUX), libc::TIOCLINUX);
    assert_eq!(UNAME26, libc::UNAME26.cast_unsigned());
    assert_eq!(F_SETLEASE, libc::F_SETLEASE.cast_unsigned());
    assert_eq!([S_ISUID, S_ISGID], [libc::S_ISUID, libc::S_ISGID]);
}

#[test]
fn tiocsti_and_tioclinux_are_denied_even_with_high_bits_set() {
    for profile in CONFINED {
        for options in all_options() {
            let table = rules(profile, options);
            for request in [u64::from(TIOCSTI), u64::from(TIOCLINUX)] {
                for high in [0, 1 << 32, 0xffff_ffff_0000_0000] {
                    let row = evaluate(&table, libc::SYS_ioctl, &args3(0, request | high, 0))
                        .expect("denied");
                    assert_eq!((row.errno, row.guarantee), (libc::EPERM, Guarantee::Tty));
                }
            }
            assert_eq!(
                denied(&table, libc::SYS_ioctl, args3(0, 0x1_0000_5412, 0)),
                EPERM
            );
        }
    }
}

#[test]
fn ordinary_ioctls_are_allowed() {
    let table = rules(
        SeccompProfile::ConfinedNoNetwork,
        options(true, false, true),
    );
    for request in [
        libc::TCGETS,
        libc::TIOCGWINSZ,
        libc::FIONREAD,
        libc::TIOCSWINSZ,
        libc::FIONBIO,
    ] {
        assert_eq!(
            denied(&table, libc::SYS_ioctl, args3(0, request, 0)),
            None,
            "request {request:#x}"
        );
    }
}

#[test]
fn personality_allows_linux_personas_and_the_query_but_not_aslr_off() {
    let table = rules(SeccompProfile::Confined, options(false, false, false));
    for allowed in [0, 8, 0x20000, 0x20008, 0xffff_ffff, 0xffff_ffff_ffff_ffff] {
        assert_eq!(
            denied(&table, libc::SYS_personality, args3(allowed, 0, 0)),
            None,
            "{allowed:#x}"
        );
    }
    let no_aslr = u64::from(libc::ADDR_NO_RANDOMIZE.cast_unsigned());
    let read_implies_exec = u64::from(libc::READ_IMPLIES_EXEC.cast_unsigned());
    for denied_persona in [no_aslr, read_implies_exec, 1, 0x0400_0000] {
        assert_eq!(
            denied(&table, libc::SYS_personality, args3(denied_persona, 0, 0)),
            EPERM,
            "{denied_persona:#x}"
        );
    }
}
