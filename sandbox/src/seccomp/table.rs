//! The deny-list table as data: the kernel ABI values it compares against, the syscalls denied
//! always, and [`rules`], which picks the rows for a profile and its options (the module docs of
//! [`super`] give the table in prose).

use bridle_policy::{Guarantee, SeccompProfile};
use nix::libc;

use super::{ArgCmp, CmpOp, DenyRule, SeccompOptions, When};

// Kernel ABI values (include/uapi/linux/{socket,netlink,sched,personality}.h, asm-generic/ioctls.h);
// the tests check them against `libc` where it has them.
pub(super) const AF_UNIX: u32 = 1;
pub(super) const AF_INET: u32 = 2;
pub(super) const AF_INET6: u32 = 10;
pub(super) const AF_NETLINK: u32 = 16;
pub(super) const NETLINK_ROUTE: u32 = 0;
pub(super) const SOCK_DGRAM: u32 = 2;
pub(super) const SOCK_RAW: u32 = 3;
/// `SOCK_TYPE_MASK`: the type without `SOCK_NONBLOCK`/`SOCK_CLOEXEC`.
pub(super) const SOCK_TYPE_MASK: u32 = 0xf;
pub(super) const TIOCSTI: u32 = 0x5412;
pub(super) const S_ISUID: u32 = 0o4000;
pub(super) const S_ISGID: u32 = 0o2000;
/// `F_SETLEASE` (`F_LINUX_SPECIFIC_BASE + 0`).
pub(super) const F_SETLEASE: u32 = 1024;
/// `fchmodat2` (Linux 6.6) has the same number on x86_64 and aarch64.
pub(super) const SYS_FCHMODAT2: i64 = 452;
pub(super) const TIOCLINUX: u32 = 0x541C;
pub(super) const PER_LINUX: u32 = 0;
pub(super) const PER_LINUX32: u32 = 0x0008;
pub(super) const UNAME26: u32 = 0x0002_0000;
pub(super) const PERSONALITY_QUERY: u32 = 0xffff_ffff;
/// Every namespace flag `clone` accepts.
pub(super) const CLONE_NEW_FLAGS: [(&str, u32); 8] = [
    ("CLONE_NEWTIME", 0x0000_0080),
    ("CLONE_NEWNS", 0x0002_0000),
    ("CLONE_NEWCGROUP", 0x0200_0000),
    ("CLONE_NEWUTS", 0x0400_0000),
    ("CLONE_NEWIPC", 0x0800_0000),
    ("CLONE_NEWUSER", 0x1000_0000),
    ("CLONE_NEWPID", 0x2000_0000),
    ("CLONE_NEWNET", 0x4000_0000),
];

/// `(name, number)` of a syscall of the architecture this crate is built for; a name missing from
/// that architecture's table is a compile error.
macro_rules! sys {
    ($name:ident) => {
        (stringify!($name), libc::$name)
    };
}

/// `(name, number, guarantee)` of a syscall denied whatever its arguments.
macro_rules! deny {
    ($name:ident, $guarantee:expr) => {
        (stringify!($name), libc::$name, $guarantee)
    };
}

/// Denied whatever the arguments, on every supported architecture.
pub(super) const ALWAYS_DENIED: &[(&str, i64, Guarantee)] = &[
    deny!(SYS_ptrace, Guarantee::Proc),
    deny!(SYS_process_vm_readv, Guarantee::Proc),
    deny!(SYS_process_vm_writev, Guarantee::Proc),
    deny!(SYS_pidfd_getfd, Guarantee::Proc),
    deny!(SYS_mount, Guarantee::Priv),
    deny!(SYS_umount2, Guarantee::Priv),
    deny!(SYS_pivot_root, Guarantee::Priv),
    deny!(SYS_chroot, Guarantee::Priv),
    deny!(SYS_move_mount, Guarantee::Priv),
    deny!(SYS_open_tree, Guarantee::Priv),
    deny!(SYS_fsopen, Guarantee::Priv),
    deny!(SYS_fsconfig, Guarantee::Priv),
    deny!(SYS_fsmount, Guarantee::Priv),
    deny!(SYS_fspick, Guarantee::Priv),
    deny!(SYS_mount_setattr, Guarantee::Priv),
    deny!(SYS_unshare, Guarantee::Priv),
    deny!(SYS_setns, Guarantee::Priv),
    deny!(SYS_bpf, Guarantee::Priv),
    deny!(SYS_perf_event_open, Guarantee::Priv),
    deny!(SYS_userfaultfd, Guarantee::Priv),
    deny!(SYS_keyctl, Guarantee::Priv),
    deny!(SYS_add_key, Guarantee::Priv),
    deny!(SYS_request_key, Guarantee::Priv),
    deny!(SYS_kexec_load, Guarantee::Priv),
    deny!(SYS_kexec_file_load, Guarantee::Priv),
    deny!(SYS_init_module, Guarantee::Priv),
    deny!(SYS_finit_module, Guarantee::Priv),
    deny!(SYS_delete_module, Guarantee::Priv),
    deny!(SYS_open_by_handle_at, Guarantee::Priv),
    deny!(SYS_name_to_handle_at, Guarantee::Priv),
    deny!(SYS_io_uring_setup, Guarantee::Priv),
    deny!(SYS_io_uring_enter, Guarantee::Priv),
    deny!(SYS_io_uring_register, Guarantee::Priv),
    deny!(SYS_acct, Guarantee::Priv),
    deny!(SYS_swapon, Guarantee::Priv),
    deny!(SYS_swapoff, Guarantee::Priv),
    deny!(SYS_reboot, Guarantee::Priv),
    deny!(SYS_quotactl, Guarantee::Priv),
    deny!(SYS_quotactl_fd, Guarantee::Priv),
    deny!(SYS_lookup_dcookie, Guarantee::Priv),
    deny!(SYS_nfsservctl, Guarantee::Priv),
    deny!(SYS_vhangup, Guarantee::Priv),
];

/// Denied whatever the arguments, x86_64 only (aarch64 never had these syscalls).
#[cfg(target_arch = "x86_64")]
pub(super) const ALWAYS_DENIED_ARCH: &[(&str, i64, Guarantee)] = &[
    deny!(SYS_uselib, Guarantee::Priv),
    deny!(SYS_iopl, Guarantee::Priv),
    deny!(SYS_ioperm, Guarantee::Priv),
];
#[cfg(not(target_arch = "x86_64"))]
pub(super) const ALWAYS_DENIED_ARCH: &[(&str, i64, Guarantee)] = &[];

/// [`SeccompProfile::MountLock`]: a command escalated to full access (root included) keeps the
/// mount view that holds the protected paths read-only and bridle's own directories hidden.
/// Everything that changes, detaches or re-attaches a mount is denied (so no bind can be
/// undone, remounted writable or cloned without its read-only children), and so is what
/// reaches a file past the mount view: `open_by_handle_at` opens an inode by its handle
/// through any mount of its filesystem (the writable `/`), `setns` enters another mount
/// namespace from a descriptor, and kernel modules and kexec run code no view confines.
/// `bpf` too: a BPF object pinned on the host (`BPF_OBJ_GET`) is checked only by its file's
/// permissions, which uid 0 passes in any user namespace, and host programs' maps (firewalls,
/// security agents) would be writable.
pub(super) const MOUNT_LOCK_DENIED: &[(&str, i64, Guarantee)] = &[
    deny!(SYS_mount, Guarantee::FsProtect),
    deny!(SYS_umount2, Guarantee::FsProtect),
    deny!(SYS_move_mount, Guarantee::FsProtect),
    deny!(SYS_open_tree, Guarantee::FsProtect),
    deny!(SYS_fsopen, Guarantee::FsProtect),
    deny!(SYS_fsmount, Guarantee::FsProtect),
    deny!(SYS_fsconfig, Guarantee::FsProtect),
    deny!(SYS_fspick, Guarantee::FsProtect),
    deny!(SYS_mount_setattr, Guarantee::FsProtect),
    deny!(SYS_pivot_root, Guarantee::FsProtect),
    deny!(SYS_open_by_handle_at, Guarantee::FsProtect),
    deny!(SYS_setns, Guarantee::FsProtect),
    deny!(SYS_init_module, Guarantee::FsProtect),
    deny!(SYS_finit_module, Guarantee::FsProtect),
    deny!(SYS_kexec_load, Guarantee::FsProtect),
    deny!(SYS_kexec_file_load, Guarantee::FsProtect),
    deny!(SYS_bpf, Guarantee::FsProtect),
];

/// What the exec supervisor's argument needs denied in a command it supervises (see
/// `supervisor`, "The race"): nobody writes another process's memory or takes init's
/// listener. The confined profiles deny these anyway; a mount-lock command under command rules
/// gets them added.
pub(super) const SUPERVISED_DENIED: &[(&str, i64, Guarantee)] = &[
    deny!(SYS_ptrace, Guarantee::Proc),
    deny!(SYS_process_vm_writev, Guarantee::Proc),
    deny!(SYS_pidfd_getfd, Guarantee::Proc),
];

/// The table of [`SeccompProfile::MountLock`] (see [`MOUNT_LOCK_DENIED`]).
#[must_use]
pub fn mount_lock_rules() -> Vec<DenyRule> {
    MOUNT_LOCK_DENIED
        .iter()
        .map(|&(name, nr, guarantee)| row((name, nr), When::Always, libc::EPERM, guarantee))
        .collect()
}

/// The part of a syscall's name after `SYS_`.
pub(super) fn bare(name: &'static str) -> &'static str {
    name.strip_prefix("SYS_").unwrap_or(name)
}

pub(super) fn row(
    (syscall, nr): (&'static str, i64),
    when: When,
    errno: i32,
    guarantee: Guarantee,
) -> DenyRule {
    DenyRule {
        syscall: bare(syscall),
        nr,
        when,
        errno,
        guarantee,
    }
}

pub(super) fn arg(index: u8, op: CmpOp) -> ArgCmp {
    ArgCmp { index, op }
}

/// The rule table for `profile` under `options`, for the architecture this crate is built for.
/// Empty for [`SeccompProfile::None`], whatever the options. The network is off (socket rows
/// present) when the profile is [`SeccompProfile::ConfinedNoNetwork`] or
/// [`SeccompOptions::network_off`] is set.
#[must_use]
pub fn rules(profile: SeccompProfile, options: SeccompOptions) -> Vec<DenyRule> {
    let network_off = match profile {
        SeccompProfile::None => return Vec::new(),
        SeccompProfile::MountLock => return mount_lock_rules(),
        SeccompProfile::Confined => options.network_off,
        // The allow-list keeps the socket rows of network off: inet is allowed only because
        // the sandbox's network namespace has nothing but loopback (the relay listens there).
        SeccompProfile::ConfinedNoNetwork | SeccompProfile::ConfinedAllowList => true,
    };
    let SeccompOptions {
        network_off: _,
        netns_isolates,
        deny_unix_sockets,
    } = options;
    let eperm = libc::EPERM;

    let mut table: Vec<DenyRule> = ALWAYS_DENIED
        .iter()
        .chain(ALWAYS_DENIED_ARCH)
        .map(|&(name, nr, guarantee)| row((name, nr), When::Always, eperm, guarantee))
        .collect();

    for (_, flag) in CLONE_NEW_FLAGS {
        let flag_set = CmpOp::MaskedEq {
            mask: flag,
            value: flag,
        };
        table.push(row(
            sys!(SYS_clone),
            When::All(vec![arg(0, flag_set)]),
            eperm,
            Guarantee::Priv,
        ));
    }
    table.push(row(
        sys!(SYS_clone3),
        When::Always,
        libc::ENOSYS,
        Guarantee::Priv,
    ));

    for request in [TIOCSTI, TIOCLINUX] {
        table.push(row(
            sys!(SYS_ioctl),
            When::All(vec![arg(1, CmpOp::Eq(request))]),
            eperm,
            Guarantee::Tty,
        ));
    }

    // No set-user-id or set-group-id files: a sandboxed uid 0 could otherwise leave a
    // setuid-root binary in a writable root for anyone on the host to run. Covers changing a
    // mode and every call that creates a file with one (`openat2`, whose mode the filter
    // cannot read, is refused below).
    for bit in [S_ISUID, S_ISGID] {
        let set = CmpOp::MaskedEq {
            mask: bit,
            value: bit,
        };
        let mut mode_args = vec![
            (sys!(SYS_fchmod), 1),
            (sys!(SYS_fchmodat), 2),
            (sys!(SYS_openat), 3),
            (sys!(SYS_mknodat), 2),
            (sys!(SYS_mkdirat), 2),
        ];
        #[cfg(target_arch = "x86_64")]
        mode_args.extend([
            (sys!(SYS_chmod), 1),
            (sys!(SYS_open), 2),
            (sys!(SYS_creat), 1),
            (sys!(SYS_mknod), 1),
            (sys!(SYS_mkdir), 1),
        ]);
        mode_args.push((("SYS_fchmodat2", SYS_FCHMODAT2), 2));
        for (call, index) in mode_args {
            table.push(row(
                call,
                When::All(vec![arg(index, set)]),
                eperm,
                Guarantee::Priv,
            ));
        }
    }

    table.push(row(
        sys!(SYS_openat2),
        When::Always,
        libc::ENOSYS,
        Guarantee::Priv,
    ));

    // A lease stalls host programs that open the file for writing; the kernel grants one to the
    // file's owner, so a command can take one on any host file it can read and owns.
    table.push(row(
        sys!(SYS_fcntl),
        When::All(vec![arg(1, CmpOp::Eq(F_SETLEASE))]),
        eperm,
        Guarantee::Proc,
    ));
    // Only the caller's own limits (pid 0): never those of the sandbox's init or a sibling.
    table.push(row(
        sys!(SYS_prlimit64),
        When::All(vec![arg(0, CmpOp::Ne(0))]),
        eperm,
        Guarantee::Proc,
    ));

    let personas = [
        PER_LINUX,
        PER_LINUX32,
        UNAME26,
        PER_LINUX32 | UNAME26,
        PERSONALITY_QUERY,
    ];
    let other_persona = personas
        .into_iter()
        .map(|persona| arg(0, CmpOp::Ne(persona)))
        .collect();
    table.push(row(
        sys!(SYS_personality),
        When::All(other_persona),
        eperm,
        Guarantee::Priv,
    ));

    if network_off {
        let mut allowed = vec![AF_UNIX];
        if netns_isolates {
            allowed.extend([AF_INET, AF_INET6, AF_NETLINK]);
        }
        let other_domain = allowed
            .into_iter()
            .map(|domain| arg(0, CmpOp::Ne(domain)))
            .collect();
        table.push(row(
            sys!(SYS_socket),
            When::All(other_domain),
            eperm,
            Guarantee::Net,
        ));
        if netns_isolates {
            let netlink_not_route = vec![
                arg(0, CmpOp::Eq(AF_NETLINK)),
                arg(2, CmpOp::Ne(NETLINK_ROUTE)),
            ];
            table.push(row(
                sys!(SYS_socket),
                When::All(netlink_not_route),
                eperm,
                Guarantee::Net,
            ));
        }
        table.push(row(
            sys!(SYS_socketpair),
            When::All(vec![arg(0, CmpOp::Ne(AF_UNIX))]),
            eperm,
            Guarantee::Net,
        ));
    }

    if deny_unix_sockets {
        table.push(row(
            sys!(SYS_socket),
            When::All(vec![arg(0, CmpOp::Eq(AF_UNIX))]),
            eperm,
            Guarantee::Ipc,
        ));
        for kind in [SOCK_DGRAM, SOCK_RAW] {
            let unix_datagram = vec![
                arg(0, CmpOp::Eq(AF_UNIX)),
                arg(
                    1,
                    CmpOp::MaskedEq {
                        mask: SOCK_TYPE_MASK,
                        value: kind,
                    },
                ),
            ];
            table.push(row(
                sys!(SYS_socketpair),
                When::All(unix_datagram),
                eperm,
                Guarantee::Ipc,
            ));
        }
    }

    table
}

/// The name of a profile as it appears in policy files and error messages.
#[must_use]
pub fn profile_name(profile: SeccompProfile) -> &'static str {
    match profile {
        SeccompProfile::None => "none",
        SeccompProfile::Confined => "confined",
        SeccompProfile::ConfinedNoNetwork => "confined-no-network",
        SeccompProfile::ConfinedAllowList => "confined-allow-list",
        SeccompProfile::MountLock => "mount-lock",
    }
}
