//! The deny table for sockets: which families each network setting leaves, and unix sockets.

use pretty_assertions::assert_eq;

use super::*;

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

pub(super) const STREAM: u64 = 1;

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
