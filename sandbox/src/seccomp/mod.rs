//! The seccomp filter of bridle's launcher: a deny-list table, compiled with `seccompiler` for
//! the running architecture and installed on the calling thread only.
//!
//! Seccomp is defence in depth here. Capabilities are dropped and no_new_privs is set (G-PRIV), a
//! private network namespace or this filter provides G-NET, and Landlock provides the file
//! guarantees; the filter closes the kernel interfaces that those mechanisms do not cover, or that
//! are too dangerous to leave to a single mechanism.
//!
//! # The table
//!
//! [`rules`] returns plain data, one [`DenyRule`] row per (syscall, condition). A row matches when
//! its syscall number matches and every comparison of its [`When`] holds (AND); several rows for
//! one syscall are alternatives (OR). That is exactly how `seccompiler` combines the conditions of
//! a `SeccompRule` (AND) and the rules of one syscall (OR), so the table and the compiled program
//! agree by construction; a test runs the compiled program in a small BPF interpreter and checks
//! it against the table for hundreds of thousands of argument vectors.
//! Every argument comparison reads the low 32 bits of the argument only (`seccompiler`'s `Dword`):
//! each inspected argument is an `int` or `unsigned int` in the kernel (or, for `clone`'s flags,
//! truncated by it with `lower_32_bits`), so the filter sees exactly what the kernel acts on and
//! setting the high half cannot smuggle a value past it (the CVE-2019-10063 `TIOCSTI` bypass).
//!
//! Default action: allow. A matched row returns its errno: `EPERM`, except `clone3` and
//! `openat2`, which return `ENOSYS` so that glibc and other runtimes fall back to `clone` and
//! `openat`, whose flags and mode the filter can inspect (`clone3` and `openat2` pass them behind
//! a pointer, which seccomp cannot read).
//!
//! For [`SeccompProfile::Confined`] and [`SeccompProfile::ConfinedNoNetwork`]:
//!
//! | syscall | denied when | guarantee | why |
//! |---|---|---|---|
//! | `ptrace`, `process_vm_readv`, `process_vm_writev`, `pidfd_getfd` | always | G-PROC | tracing, reading or writing another process's memory, stealing its descriptors |
//! | `mount`, `umount2`, `pivot_root`, `chroot`, `move_mount`, `open_tree`, `fsopen`, `fsconfig`, `fsmount`, `fspick`, `mount_setattr` | always | G-PRIV | no changes to the mount view the launcher built |
//! | `unshare`, `setns` | always | G-PRIV | no new (user) namespaces, no entering others |
//! | `clone` | `flags` has any of `CLONE_NEWNS`, `CLONE_NEWCGROUP`, `CLONE_NEWUTS`, `CLONE_NEWIPC`, `CLONE_NEWUSER`, `CLONE_NEWPID`, `CLONE_NEWNET`, `CLONE_NEWTIME` (one row per flag) | G-PRIV | as `unshare`; ordinary `fork` and thread creation keep working |
//! | `clone3` (`ENOSYS`) | always | G-PRIV | its flags are behind a pointer |
//! | `bpf`, `perf_event_open`, `userfaultfd`, `keyctl`, `add_key`, `request_key` | always | G-PRIV | large kernel attack surface, kernel keyrings shared with the host session |
//! | `kexec_load`, `kexec_file_load`, `init_module`, `finit_module`, `delete_module`, `reboot`, `acct`, `swapon`, `swapoff`, `quotactl`, `quotactl_fd`, `vhangup`, `lookup_dcookie`, `nfsservctl` | always | G-PRIV | kernel and host administration |
//! | `uselib`, `iopl`, `ioperm` (x86_64 only; aarch64 has no such syscalls) | always | G-PRIV | legacy loader, raw port I/O |
//! | `open_by_handle_at`, `name_to_handle_at` | always | G-PRIV | file handles bypass path-based confinement ("shocker") |
//! | `io_uring_setup`, `io_uring_enter`, `io_uring_register` | always | G-PRIV | io_uring operations (sockets, opens) bypass this filter entirely; large attack surface. Load-bearing for G-NET too |
//! | `ioctl` | request (low 32 bits) is `TIOCSTI` or `TIOCLINUX` | G-TTY | injecting input into a terminal outside the sandbox |
//! | `chmod`, `fchmod`, `fchmodat`, `fchmodat2`, `open`, `openat`, `creat`, `mknod`, `mknodat`, `mkdir`, `mkdirat` | the mode sets `S_ISUID` or `S_ISGID` | G-PRIV | a sandboxed uid 0 leaving a setuid-root binary for the host (cost: `chmod u+s`/`g+s` fails inside, including on directories; so does `mkdir` with either bit, which the kernel would drop anyway) |
//! | `openat2` (`ENOSYS`) | always | G-PRIV | its mode is behind a pointer (`struct open_how`); glibc, coreutils, git, Python, tar and Rust's std do not call it (checked with strace), and `ENOSYS` is what kernels before 5.6 answer, so callers that use it must fall back to `openat` |
//! | `fcntl` | the command is `F_SETLEASE` | G-PROC | a lease on a host file (the kernel grants one on any file the caller owns: every file of the user it can read) stalls every host program opening it for writing for the lease-break time (`/proc/sys/fs/lease-break-time`, 45 s by default), again and again; `flock` and POSIX locks stay allowed (see SECURITY.md) |
//! | `prlimit64` | `pid` is not 0 (the caller itself) | G-PROC | lowering the limits of the sandbox's init or of another process; glibc's `getrlimit`/`setrlimit` (and so `ulimit`) pass 0 (cost: `prlimit --pid N` fails, even for the caller's own pid) |
//! | `personality` | persona is not one of `PER_LINUX` (0), `PER_LINUX32` (8), `UNAME26` (0x20000), `PER_LINUX32\|UNAME26`, or the query 0xffffffff | G-PRIV | `ADDR_NO_RANDOMIZE`, `READ_IMPLIES_EXEC` and friends weaken the hardening of the programs we exec; the allowed set is Docker's default |
//!
//! Sockets, when network is off ([`SeccompProfile::ConfinedNoNetwork`], or
//! [`SeccompOptions::network_off`] with either confined profile; either one turns it off):
//!
//! | syscall | denied when | guarantee |
//! |---|---|---|
//! | `socket` | domain is not in the allowed set: `AF_UNIX`, plus `AF_INET`, `AF_INET6` and `AF_NETLINK` when [`SeccompOptions::netns_isolates`] | G-NET |
//! | `socket` | domain is `AF_NETLINK` and protocol is not `NETLINK_ROUTE` (only when `netns_isolates`) | G-NET |
//! | `socketpair` | domain is not `AF_UNIX` | G-NET |
//!
//! [`SeccompProfile::ConfinedAllowList`] (network `allow-list`) has exactly these rows too: the
//! launcher refuses the allow-list without a private network namespace, so inet sockets reach
//! only the sandbox's loopback, where the relay to bridle's proxy listens.
//!
//! The allowed set is one row whose conditions are "domain ≠ a" for every allowed `a` (AND), so
//! every other value is denied, including families newer than this table, values above
//! `AF_MAX`, and negative ones: new families are denied by default without enumerating them.
//! `AF_VSOCK`, `AF_PACKET`, `AF_BLUETOOTH`, `AF_KEY`, `AF_ALG`, `AF_XDP` and the rest are therefore
//! always denied when network is off. `socketcall` does not exist on x86_64 or aarch64 (a 32-bit
//! caller is killed by the architecture check), and io_uring's `IORING_OP_SOCKET` is closed by the
//! io_uring rows, so `socket` and `socketpair` are the only ways to create a socket.
//!
//! With [`SeccompOptions::deny_unix_sockets`] (G-IPC on kernels where Landlock cannot scope
//! pathname unix sockets), independent of the network:
//!
//! | syscall | denied when | guarantee |
//! |---|---|---|
//! | `socket` | domain is `AF_UNIX` | G-IPC |
//! | `socketpair` | domain is `AF_UNIX` and type is `SOCK_DGRAM` or `SOCK_RAW` (which the kernel turns into `SOCK_DGRAM`) | G-IPC |
//!
//! A datagram unix socket can be re-`connect`ed, or `sendto` a named address, even when it came
//! from `socketpair`, so it would reach `/dev/log`, journald or the systemd notify socket. Stream
//! and seqpacket pairs cannot (`EISCONN`; seqpacket ignores a destination address), so they stay
//! allowed: pipes-with-credentials, `subprocess`-style IPC and most event loops keep working.
//!
//! Usability cost of `deny_unix_sockets`: every program that creates a unix socket fails with
//! `EPERM`: git's fsmonitor daemon and credential-cache, gpg-agent and ssh-agent (and their
//! clients), the docker CLI, Python's `multiprocessing.Manager` and `multiprocessing` with the
//! `forkserver` start method, language servers listening on unix sockets, D-Bus clients, X11 and
//! Wayland clients, `syslog(3)`, and anything that binds a socket in `$TMPDIR` to talk to itself.
//! IPC built on `socketpair` (stream or seqpacket) keeps working.
//!
//! # Exec supervision
//!
//! A sandbox whose spec has command rules gets its filter from [`compile_supervised`]: `execve`
//! and `execveat` return `SECCOMP_RET_USER_NOTIF`, and the filter is installed with
//! [`install_with_listener`] (`SECCOMP_FILTER_FLAG_NEW_LISTENER`), whose listener the exec
//! supervisor (see `crate::supervisor`) holds: each exec waits in the kernel until the
//! supervisor answers it. With no listener left (the supervisor gone) the kernel fails them with
//! `ENOSYS`. A process of the sandbox cannot install a listener of its own (the kernel refuses a
//! second listener in a filter chain with `EBUSY`), and a filter it adds cannot weaken the
//! notification (`SECCOMP_RET_USER_NOTIF` takes precedence over `TRACE`, `LOG` and `ALLOW`).
//!
//! | syscall | action | why |
//! |---|---|---|
//! | `execve`, `execveat` | `SECCOMP_RET_USER_NOTIF` (supervised sandboxes only) | command rules at every exec |
//!
//! # Architecture check
//!
//! `seccompiler` starts every program with a check of `seccomp_data.arch`: a syscall made with any
//! other ABI than the one the filter was compiled for (on x86_64, the i386 ABI through `int 0x80`;
//! on aarch64, AArch32 compat) gets `SECCOMP_RET_KILL_PROCESS`: the whole process dies of
//! `SIGSYS`. `seccompiler` does not guard x86_64's x32 ABI, which shares `AUDIT_ARCH_X86_64` and
//! sets bit 30 (`__X32_SYSCALL_BIT`) of the syscall number: without a guard, the x32 numbers of
//! denied syscalls would match no row and be allowed on kernels built with `CONFIG_X86_X32_ABI`.
//! [`compile`] therefore inserts, right after the architecture check, a kill for every syscall
//! number with that bit set (except -1, which tracers use to skip a syscall and the kernel rejects
//! with `ENOSYS` anyway), so the x32 ABI is treated exactly like a foreign architecture.
//!
//! # Profile `none`
//!
//! [`SeccompProfile::None`] (danger-full-access) has an empty table and no filter: [`compile`]
//! refuses it with [`SandboxError::SeccompBuild`](crate::SandboxError::SeccompBuild) rather than returning an "allow everything"
//! program, because even that program would kill 32-bit syscalls through the architecture check.
//! The launcher installs nothing for `none`.
//!
//! # Scope
//!
//! [`install_on_current_thread`] affects the calling thread only (no `SECCOMP_FILTER_FLAG_TSYNC`)
//! and everything it later forks or execs. It is irreversible for that thread.

use bridle_policy::{Guarantee, SeccompProfile};
use nix::libc;

/// Which socket families and unix-socket behaviour the filter enforces; decided by the launcher
/// from the `SandboxSpec` and the host probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SeccompOptions {
    /// Network is off: deny `socket()`/`socketpair()` for every family except `AF_UNIX`, and,
    /// when `netns_isolates` is true, also allow `AF_INET`/`AF_INET6` (a private network namespace
    /// with only loopback already isolates them, and loopback servers inside must keep working)
    /// and `AF_NETLINK` with protocol `NETLINK_ROUTE` (route and address queries inside the
    /// private namespace: `getifaddrs`, `getaddrinfo` with `AI_ADDRCONFIG`, `ip addr`).
    /// `AF_VSOCK`, `AF_PACKET`, `AF_BLUETOOTH`, `AF_KEY`, `AF_ALG` etc. are always denied when the
    /// network is off. [`SeccompProfile::ConfinedNoNetwork`] turns the network off by itself.
    pub network_off: bool,
    /// The sandbox runs in a private network namespace with only loopback (see `network_off`).
    pub netns_isolates: bool,
    /// Deny `socket(AF_UNIX, ...)` so no pathname or abstract unix socket of an outside daemon can
    /// be connected (G-IPC on kernels without Landlock pathname-socket scope). `socketpair` keeps
    /// working for stream and seqpacket pairs; datagram pairs are denied (see the module docs).
    pub deny_unix_sockets: bool,
}

/// One comparison on the low 32 bits of a syscall argument.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArgCmp {
    /// Argument index, 0 to 5.
    pub index: u8,
    /// The comparison.
    pub op: CmpOp,
}

/// A comparison of the low 32 bits of an argument (`seccompiler`'s `Dword` length).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CmpOp {
    /// `arg == value`.
    Eq(u32),
    /// `arg != value`.
    Ne(u32),
    /// `arg & mask == value & mask`; with `value == mask`: every bit of `mask` is set.
    MaskedEq {
        /// The bits compared.
        mask: u32,
        /// The expected value of those bits.
        value: u32,
    },
}

/// When a row denies its syscall.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum When {
    /// Whatever the arguments.
    Always,
    /// When every comparison holds (AND; never empty).
    All(Vec<ArgCmp>),
}

/// One row of the table: deny `syscall` with `errno` when `when` holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DenyRule {
    /// The syscall's name.
    pub syscall: &'static str,
    /// Its number on the architecture this crate was built for.
    pub nr: i64,
    /// What is denied.
    pub when: When,
    /// What the denied call returns (`EPERM`, or `ENOSYS` for `clone3` and `openat2`).
    pub errno: i32,
    /// The guarantee this row serves.
    pub guarantee: Guarantee,
}

impl ArgCmp {
    /// Whether the comparison holds for the raw arguments `args` of a syscall.
    #[must_use]
    pub fn holds(&self, args: &[u64; 6]) -> bool {
        let Some(&arg) = args.get(usize::from(self.index)) else {
            return false;
        };
        let arg = low32(arg);
        match self.op {
            CmpOp::Eq(value) => arg == value,
            CmpOp::Ne(value) => arg != value,
            CmpOp::MaskedEq { mask, value } => arg & mask == value & mask,
        }
    }
}

impl DenyRule {
    /// Whether this row denies syscall `nr` called with the raw arguments `args`.
    #[must_use]
    pub fn matches(&self, nr: i64, args: &[u64; 6]) -> bool {
        self.nr == nr
            && match &self.when {
                When::Always => true,
                When::All(cmps) => cmps.iter().all(|cmp| cmp.holds(args)),
            }
    }
}

/// The first row of `table` that denies syscall `nr` with arguments `args`, if any: what the
/// compiled filter does, as data (used to attribute a denial to its row and guarantee).
#[must_use]
pub fn evaluate<'a>(table: &'a [DenyRule], nr: i64, args: &[u64; 6]) -> Option<&'a DenyRule> {
    table.iter().find(|row| row.matches(nr, args))
}

#[expect(
    clippy::cast_possible_truncation,
    reason = "the kernel reads every inspected argument as a 32-bit int; keeping the low half is the point"
)]
fn low32(arg: u64) -> u32 {
    arg as u32
}

// Kernel ABI values (include/uapi/linux/{socket,netlink,sched,personality}.h, asm-generic/ioctls.h);
// the tests check them against `libc` where it has them.
const AF_UNIX: u32 = 1;
const AF_INET: u32 = 2;
const AF_INET6: u32 = 10;
const AF_NETLINK: u32 = 16;
const NETLINK_ROUTE: u32 = 0;
const SOCK_DGRAM: u32 = 2;
const SOCK_RAW: u32 = 3;
/// `SOCK_TYPE_MASK`: the type without `SOCK_NONBLOCK`/`SOCK_CLOEXEC`.
const SOCK_TYPE_MASK: u32 = 0xf;
const TIOCSTI: u32 = 0x5412;
const S_ISUID: u32 = 0o4000;
const S_ISGID: u32 = 0o2000;
/// `F_SETLEASE` (`F_LINUX_SPECIFIC_BASE + 0`).
const F_SETLEASE: u32 = 1024;
/// `fchmodat2` (Linux 6.6) has the same number on x86_64 and aarch64.
const SYS_FCHMODAT2: i64 = 452;
const TIOCLINUX: u32 = 0x541C;
const PER_LINUX: u32 = 0;
const PER_LINUX32: u32 = 0x0008;
const UNAME26: u32 = 0x0002_0000;
const PERSONALITY_QUERY: u32 = 0xffff_ffff;
/// Every namespace flag `clone` accepts.
const CLONE_NEW_FLAGS: [(&str, u32); 8] = [
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
const ALWAYS_DENIED: &[(&str, i64, Guarantee)] = &[
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
const ALWAYS_DENIED_ARCH: &[(&str, i64, Guarantee)] = &[
    deny!(SYS_uselib, Guarantee::Priv),
    deny!(SYS_iopl, Guarantee::Priv),
    deny!(SYS_ioperm, Guarantee::Priv),
];
#[cfg(not(target_arch = "x86_64"))]
const ALWAYS_DENIED_ARCH: &[(&str, i64, Guarantee)] = &[];

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
const MOUNT_LOCK_DENIED: &[(&str, i64, Guarantee)] = &[
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
const SUPERVISED_DENIED: &[(&str, i64, Guarantee)] = &[
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
fn bare(name: &'static str) -> &'static str {
    name.strip_prefix("SYS_").unwrap_or(name)
}

fn row(
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

fn arg(index: u8, op: CmpOp) -> ArgCmp {
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

mod program;

#[cfg(test)]
use program::*;
pub use program::{
    EXEC_SYSCALLS, compile, compile_supervised, install_on_current_thread, install_with_listener,
    supervised_rules,
};

#[cfg(test)]
mod tests;
