//! Table tests (pure), compiled-program tests (a small classic-BPF interpreter runs the program
//! against the table), and install tests in forked children (style C.23).

#![allow(unsafe_code, reason = "install tests fork and make raw syscalls")]

use std::io;

use bridle_policy::{Guarantee, SeccompProfile};
use nix::libc::{self, c_long};
use nix::sys::signal::Signal;
use nix::sys::wait::{WaitStatus, waitpid};
use nix::unistd::{ForkResult, fork};
use pretty_assertions::assert_eq;
use seccompiler::{BpfProgram, TargetArch, sock_filter};

use super::*;
use crate::SandboxError;

const CONFINED: [SeccompProfile; 2] = [SeccompProfile::Confined, SeccompProfile::ConfinedNoNetwork];

fn all_options() -> Vec<SeccompOptions> {
    let mut all = Vec::new();
    for network_off in [false, true] {
        for netns_isolates in [false, true] {
            for deny_unix_sockets in [false, true] {
                all.push(SeccompOptions {
                    network_off,
                    netns_isolates,
                    deny_unix_sockets,
                });
            }
        }
    }
    all
}

fn options(network_off: bool, netns_isolates: bool, deny_unix_sockets: bool) -> SeccompOptions {
    SeccompOptions {
        network_off,
        netns_isolates,
        deny_unix_sockets,
    }
}

fn args3(a0: u64, a1: u64, a2: u64) -> [u64; 6] {
    [a0, a1, a2, 0, 0, 0]
}

/// The errno the table returns for `nr(args)`, `None` when allowed.
fn denied(table: &[DenyRule], nr: c_long, args: [u64; 6]) -> Option<i32> {
    evaluate(table, nr, &args).map(|row| row.errno)
}

fn domain(af: i32) -> u64 {
    u64::from(af.cast_unsigned())
}

const EPERM: Option<i32> = Some(libc::EPERM);

// ---------------------------------------------------------------------------------------------
// The table
// ---------------------------------------------------------------------------------------------

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

/// Every domain the kernel can see (as an `int`), and a few with high bits set.
fn every_domain() -> impl Iterator<Item = u64> {
    (0..=300u64).chain([
        0x7fff_ffff,
        0xffff_ffff,
        u64::MAX,
        0x1_0000_0000,
        0x1_0000_0010,
    ])
}

fn socket_allowed_domains(table: &[DenyRule], nr: c_long, kind: u64, protocol: u64) -> Vec<u64> {
    every_domain()
        .filter(|&d| denied(table, nr, args3(d, kind, protocol)).is_none())
        .collect()
}

const STREAM: u64 = 1;

#[test]
fn network_off_without_netns_allows_only_unix_sockets() {
    for profile in CONFINED {
        let table = rules(profile, options(true, false, false));
        // 0x1_0000_0001 is socket(AF_UNIX) to the kernel, which reads the domain as an int.
        assert_eq!(
            socket_allowed_domains(&table, libc::SYS_socket, STREAM, 0),
            vec![1]
        );
        assert_eq!(
            socket_allowed_domains(&table, libc::SYS_socketpair, STREAM, 0),
            vec![1]
        );
        let inet = evaluate(
            &table,
            libc::SYS_socket,
            &args3(domain(libc::AF_INET), STREAM, 0),
        )
        .expect("denied");
        assert_eq!((inet.errno, inet.guarantee), (libc::EPERM, Guarantee::Net));
    }
}

#[test]
fn confined_no_network_turns_the_network_off_by_itself() {
    let table = rules(
        SeccompProfile::ConfinedNoNetwork,
        options(false, false, false),
    );
    assert_eq!(
        denied(
            &table,
            libc::SYS_socket,
            args3(domain(libc::AF_INET), STREAM, 0)
        ),
        EPERM
    );
    assert_eq!(
        denied(
            &table,
            libc::SYS_socket,
            args3(domain(libc::AF_UNIX), STREAM, 0)
        ),
        None
    );
}

#[test]
fn netns_isolation_allows_inet_and_netlink_route_only() {
    for profile in CONFINED {
        let table = rules(profile, options(true, true, false));
        let mut expected: Vec<u64> = [
            libc::AF_UNIX,
            libc::AF_INET,
            libc::AF_INET6,
            libc::AF_NETLINK,
        ]
        .map(domain)
        .into();
        // AF_NETLINK with the high half set: the kernel reads the domain as an int.
        expected.push(0x1_0000_0010);
        assert_eq!(
            socket_allowed_domains(&table, libc::SYS_socket, STREAM, 0),
            expected
        );
        let netlink = domain(libc::AF_NETLINK);
        assert_eq!(
            denied(&table, libc::SYS_socket, args3(netlink, 3, 0)),
            None,
            "NETLINK_ROUTE"
        );
        for protocol in [9, 4, 15, 16, 0x1_0000_0000 + 9] {
            assert_eq!(
                denied(&table, libc::SYS_socket, args3(netlink, 3, protocol)),
                EPERM,
                "netlink {protocol}"
            );
        }
        assert_eq!(
            socket_allowed_domains(&table, libc::SYS_socketpair, STREAM, 0),
            vec![1]
        );
    }
}

#[test]
fn vsock_packet_and_unknown_families_are_always_denied_when_network_is_off() {
    let families = [
        libc::AF_VSOCK,
        libc::AF_PACKET,
        libc::AF_BLUETOOTH,
        libc::AF_KEY,
        libc::AF_ALG,
        libc::AF_XDP,
        libc::AF_TIPC,
        libc::AF_CAN,
        45, // AF_MCTP
        46, // AF_MAX on 6.18: a family newer than this table
        100,
        -1,
    ];
    for profile in CONFINED {
        for netns_isolates in [false, true] {
            for deny_unix in [false, true] {
                let table = rules(profile, options(true, netns_isolates, deny_unix));
                for family in families {
                    let d = u64::from(family.cast_unsigned());
                    assert_eq!(
                        denied(&table, libc::SYS_socket, args3(d, STREAM, 0)),
                        EPERM,
                        "socket({family})"
                    );
                    assert_eq!(
                        denied(&table, libc::SYS_socketpair, args3(d, STREAM, 0)),
                        EPERM,
                        "socketpair({family})"
                    );
                }
            }
        }
    }
}

#[test]
fn network_on_leaves_socket_families_alone() {
    let table = rules(SeccompProfile::Confined, options(false, true, false));
    assert!(
        table
            .iter()
            .all(|row| row.syscall != "socket" && row.syscall != "socketpair")
    );
    assert_eq!(
        denied(
            &table,
            libc::SYS_socket,
            args3(domain(libc::AF_VSOCK), STREAM, 0)
        ),
        None
    );
}

#[test]
fn unix_sockets_are_denied_iff_deny_unix_sockets() {
    let unix = domain(libc::AF_UNIX);
    for profile in CONFINED {
        for options in all_options() {
            let table = rules(profile, options);
            let expected = options.deny_unix_sockets.then_some(libc::EPERM);
            for kind in [1, 2, 5, 0x80001] {
                assert_eq!(
                    denied(&table, libc::SYS_socket, args3(unix, kind, 0)),
                    expected,
                    "{options:?}"
                );
            }
            if options.deny_unix_sockets {
                let row = evaluate(&table, libc::SYS_socket, &args3(unix, 1, 0)).expect("denied");
                assert_eq!(row.guarantee, Guarantee::Ipc);
            }
        }
    }
}

#[test]
fn socketpair_unix_stream_and_seqpacket_are_always_allowed() {
    let unix = domain(libc::AF_UNIX);
    let cloexec = u64::from(libc::SOCK_CLOEXEC.cast_unsigned());
    let nonblock = u64::from(libc::SOCK_NONBLOCK.cast_unsigned());
    for profile in CONFINED {
        for options in all_options() {
            let table = rules(profile, options);
            for kind in [1, 5, 1 | cloexec, 5 | cloexec | nonblock] {
                assert_eq!(
                    denied(&table, libc::SYS_socketpair, args3(unix, kind, 0)),
                    None,
                    "{kind:#x} {options:?}"
                );
            }
        }
    }
}

#[test]
fn socketpair_unix_datagram_is_denied_iff_deny_unix_sockets() {
    let unix = domain(libc::AF_UNIX);
    let cloexec = u64::from(libc::SOCK_CLOEXEC.cast_unsigned());
    for profile in CONFINED {
        for options in all_options() {
            let table = rules(profile, options);
            let expected = options.deny_unix_sockets.then_some(libc::EPERM);
            for kind in [2, 3, 2 | cloexec, 3 | cloexec] {
                assert_eq!(
                    denied(&table, libc::SYS_socketpair, args3(unix, kind, 0)),
                    expected,
                    "{kind:#x} {options:?}"
                );
            }
        }
    }
}

#[test]
fn rows_serve_the_expected_guarantees() {
    let table = rules(SeccompProfile::ConfinedNoNetwork, options(true, true, true));
    let mut guarantees: Vec<Guarantee> = table.iter().map(|row| row.guarantee).collect();
    guarantees.sort();
    guarantees.dedup();
    assert_eq!(
        guarantees,
        vec![
            Guarantee::Net,
            Guarantee::Ipc,
            Guarantee::Proc,
            Guarantee::Priv,
            Guarantee::Tty
        ]
    );
    let table = rules(SeccompProfile::Confined, options(false, false, false));
    assert!(
        table
            .iter()
            .all(|row| row.guarantee != Guarantee::Net && row.guarantee != Guarantee::Ipc)
    );
}

#[test]
fn every_row_is_well_formed() {
    for profile in CONFINED {
        for options in all_options() {
            for row in rules(profile, options) {
                assert!(!row.syscall.starts_with("SYS_"), "{row:?}");
                assert!(
                    row.errno == libc::EPERM
                        || (matches!(row.syscall, "clone3" | "openat2")
                            && row.errno == libc::ENOSYS),
                    "{row:?}"
                );
                if let When::All(cmps) = &row.when {
                    assert!(!cmps.is_empty(), "{row:?}");
                    for cmp in cmps {
                        assert!(cmp.index <= 5, "{row:?}");
                        if let CmpOp::MaskedEq { mask, value } = cmp.op {
                            assert_eq!(value & !mask, 0, "{row:?}");
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn ordinary_syscalls_are_allowed() {
    for profile in CONFINED {
        for options in all_options() {
            let table = rules(profile, options);
            for nr in [
                libc::SYS_read,
                libc::SYS_write,
                libc::SYS_openat,
                libc::SYS_getpid,
                libc::SYS_execve,
                libc::SYS_kill,
            ] {
                assert_eq!(denied(&table, nr, [0; 6]), None);
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The compiled program
// ---------------------------------------------------------------------------------------------

#[test]
fn compile_succeeds_for_every_confined_combination() {
    for profile in CONFINED {
        for options in all_options() {
            let program = compile(profile, options).expect("compiles");
            assert!(
                program.len() <= BPF_MAXINSNS,
                "{} instructions",
                program.len()
            );
        }
    }
}

#[test]
fn compile_refuses_the_none_profile() {
    let error =
        compile(SeccompProfile::None, options(true, true, true)).expect_err("no filter for none");
    assert!(
        matches!(error, SandboxError::SeccompBuild { .. }),
        "{error:?}"
    );
    assert_eq!(
        error.to_string(),
        "building seccomp filter `none`: profile `none` has no filter; the launcher installs nothing for it"
    );
}

#[test]
fn compile_rejects_a_syscall_with_two_errnos() {
    let mut table = rules(SeccompProfile::Confined, options(false, false, false));
    let mut ptrace = table.first().expect("rows").clone();
    ptrace.errno = libc::ENOSYS;
    table.push(ptrace);
    let error = build_program(&table, TargetArch::x86_64, false).expect_err("inconsistent table");
    assert!(
        error.contains("`ptrace` is denied with two errnos"),
        "{error}"
    );
}

const AUDIT_ARCH_I386: u32 = 3 | 0x4000_0000;

fn native_audit_arch() -> u32 {
    if cfg!(target_arch = "x86_64") {
        AUDIT_ARCH_X86_64
    } else {
        AUDIT_ARCH_AARCH64
    }
}

#[test]
fn program_starts_with_an_architecture_check_that_kills_the_process() {
    let program =
        compile(SeccompProfile::Confined, options(false, false, false)).expect("compiles");
    assert_eq!(
        program.get(..3).expect("long enough"),
        &[
            sock_filter {
                code: 0x20,
                jt: 0,
                jf: 0,
                k: 4
            },
            sock_filter {
                code: 0x15,
                jt: 1,
                jf: 0,
                k: native_audit_arch()
            },
            sock_filter {
                code: 0x06,
                jt: 0,
                jf: 0,
                k: libc::SECCOMP_RET_KILL_PROCESS
            },
        ]
    );
    let getpid = data(libc::SYS_getpid, [0; 6]);
    assert_eq!(
        run(
            &program,
            &Data {
                arch: AUDIT_ARCH_I386,
                ..getpid
            }
        ),
        libc::SECCOMP_RET_KILL_PROCESS
    );
    assert_eq!(run(&program, &getpid), libc::SECCOMP_RET_ALLOW);
}

#[test]
#[cfg(target_arch = "x86_64")]
fn x32_syscalls_kill_the_process() {
    let program =
        compile(SeccompProfile::Confined, options(false, false, false)).expect("compiles");
    let x32 = u32::try_from(libc::SYS_getpid).expect("small") | X32_SYSCALL_BIT;
    let x32_ptrace = 521 | X32_SYSCALL_BIT;
    for nr in [
        x32,
        x32_ptrace,
        X32_SYSCALL_BIT,
        0x7fff_ffff,
        0x8000_0000,
        0xffff_fffe,
    ] {
        assert_eq!(
            run(
                &program,
                &Data {
                    nr,
                    arch: AUDIT_ARCH_X86_64,
                    args: [0; 6]
                }
            ),
            libc::SECCOMP_RET_KILL_PROCESS,
            "{nr:#x}"
        );
    }
    // -1 (a tracer skipping a syscall) goes on to the table and is allowed; the kernel says ENOSYS.
    assert_eq!(
        run(
            &program,
            &Data {
                nr: u32::MAX,
                arch: AUDIT_ARCH_X86_64,
                args: [0; 6]
            }
        ),
        libc::SECCOMP_RET_ALLOW
    );
}

/// The interesting argument values: families, requests, personas, clone flags, high bits.
fn probe_values() -> Vec<u64> {
    let mut values = vec![
        0,
        1,
        2,
        3,
        5,
        8,
        9,
        10,
        16,
        17,
        31,
        38,
        40,
        45,
        46,
        100,
        0x11,
        0x5401,
        0x5412,
        0x541B,
        0x541C,
        0x1_0000_5412,
        0xFFFF_FFFF_0000_541C,
        0x1_0000_0000,
        0x1_0000_0002,
        0x2_0000,
        0x2_0008,
        0x4_0000,
        0x8_0002,
        0x8_0801,
        0x3d_0f00,
        0x7fff_ffff,
        0xffff_ffff,
        u64::MAX,
        // F_SETLEASE, with high bits; modes with the setuid and setgid bits, and without.
        0x400,
        0x1_0000_0400,
        0o4755,
        0o2755,
        0o100_644,
        0o104_755,
        0x1_0000_0800,
    ];
    for (_, flag) in CLONE_NEW_FLAGS {
        values.extend([
            u64::from(flag),
            u64::from(flag) | 0x11,
            u64::from(flag) | 0x1_0000_0000,
        ]);
    }
    values
}

#[test]
fn compiled_program_agrees_with_the_table() {
    let values = probe_values();
    let mut conditional = vec![
        libc::SYS_clone,
        libc::SYS_ioctl,
        libc::SYS_personality,
        libc::SYS_socket,
        libc::SYS_socketpair,
        libc::SYS_fcntl,
        libc::SYS_prlimit64,
        libc::SYS_mknodat,
        libc::SYS_mkdirat,
        libc::SYS_fchmodat,
        libc::SYS_fchmod,
    ];
    #[cfg(target_arch = "x86_64")]
    conditional.extend([libc::SYS_mknod, libc::SYS_mkdir, libc::SYS_chmod]);
    for profile in CONFINED {
        for options in all_options() {
            let table = rules(profile, options);
            let program = compile(profile, options).expect("compiles");
            let expected = |nr: c_long, args: [u64; 6]| match denied(&table, nr, args) {
                Some(errno) => libc::SECCOMP_RET_ERRNO | errno.cast_unsigned(),
                None => libc::SECCOMP_RET_ALLOW,
            };
            let mut others: Vec<c_long> = table.iter().map(|row| row.nr).collect();
            others.extend([
                libc::SYS_getpid,
                libc::SYS_read,
                libc::SYS_write,
                libc::SYS_connect,
                libc::SYS_kill,
            ]);
            for nr in others {
                for args in [[0; 6], [u64::MAX; 6], args3(1, 0x5412, 9)] {
                    assert_eq!(
                        run(&program, &data(nr, args)),
                        expected(nr, args),
                        "{nr} {args:?}"
                    );
                }
            }
            for &nr in &conditional {
                for &a0 in &values {
                    for &a1 in &values {
                        for a2 in [0, 9, 0o4755, 0o2000, 0o100_644] {
                            let args = args3(a0, a1, a2);
                            assert_eq!(
                                run(&program, &data(nr, args)),
                                expected(nr, args),
                                "{profile:?} {options:?} nr {nr} args {args:x?}"
                            );
                        }
                    }
                }
            }
        }
    }
}

/// `struct seccomp_data` as the kernel passes it to the filter.
#[derive(Clone, Copy)]
struct Data {
    nr: u32,
    arch: u32,
    args: [u64; 6],
}

fn data(nr: c_long, args: [u64; 6]) -> Data {
    Data {
        nr: u32::try_from(nr).expect("syscall numbers are small"),
        arch: native_audit_arch(),
        args,
    }
}

fn load(data: &Data, offset: u32) -> u32 {
    match offset {
        0 => data.nr,
        4 => data.arch,
        16..=63 if offset.is_multiple_of(4) => {
            let index = usize::try_from((offset - 16) / 8).expect("small");
            let arg = data.args[index];
            if offset.is_multiple_of(8) {
                low32(arg)
            } else {
                low32(arg >> 32)
            }
        }
        other => panic!("unexpected load offset {other}"),
    }
}

/// A classic-BPF interpreter for the instructions seccompiler and `compile` emit.
fn run(program: &[sock_filter], data: &Data) -> u32 {
    let mut acc = 0u32;
    let mut pc = 0usize;
    loop {
        let instruction = program
            .get(pc)
            .unwrap_or_else(|| panic!("fell off the program at {pc}"));
        pc += 1;
        let (jt, jf) = (usize::from(instruction.jt), usize::from(instruction.jf));
        let k = instruction.k;
        match instruction.code {
            0x20 => acc = load(data, k),                      // LD W ABS
            0x54 => acc &= k,                                 // ALU AND K
            0x05 => pc += usize::try_from(k).expect("small"), // JA
            0x15 => pc += if acc == k { jt } else { jf },     // JEQ K
            0x25 => pc += if acc > k { jt } else { jf },      // JGT K
            0x35 => pc += if acc >= k { jt } else { jf },     // JGE K
            0x06 => return k,                                 // RET K
            other => panic!("unexpected opcode {other:#x} at {}", pc - 1),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Installing (forked children and a spawned thread)
// ---------------------------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------------------------
// Network allow-list
// ---------------------------------------------------------------------------------------------

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
