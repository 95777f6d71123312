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
//! | `ptrace`, `process_vm_readv`, `process_vm_writev`, `pidfd_getfd` | always | G-PROC | tracing, reading or writing another process's memory, stealing its descriptors (in a supervised sandbox `ptrace` goes to the supervisor instead, which refuses it: below) |
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
//! and `execveat` return `SECCOMP_RET_USER_NOTIF` (and `ptrace`, which the supervisor always
//! refuses with `EPERM`, saying why on the sandbox's stderr), and the filter is installed with
//! [`install_with_listener`] (`SECCOMP_FILTER_FLAG_NEW_LISTENER`), whose listener the exec
//! supervisor (see `crate::supervisor`) holds: each exec waits in the kernel until the
//! supervisor answers it. With no listener left (the supervisor gone) the kernel fails them (and
//! `ptrace`) with `ENOSYS`. A process of the sandbox cannot install a listener of its own (the kernel refuses a
//! second listener in a filter chain with `EBUSY`), and a filter it adds cannot weaken the
//! notification (`SECCOMP_RET_USER_NOTIF` takes precedence over `TRACE`, `LOG` and `ALLOW`).
//!
//! | syscall | action | why |
//! |---|---|---|
//! | `execve`, `execveat` | `SECCOMP_RET_USER_NOTIF` (supervised sandboxes only) | command rules at every exec |
//! | `ptrace` | `SECCOMP_RET_USER_NOTIF` (supervised sandboxes only), always refused | G-PROC, with a message saying why |
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

use bridle_policy::Guarantee;
#[cfg(doc)]
use bridle_policy::SeccompProfile;

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

// `table` first: its `sys!` macro is used by `program`.
#[macro_use]
mod table;
mod program;

#[cfg(test)]
use program::*;
pub use program::{
    EXEC_SYSCALLS, PTRACE_SYSCALL, compile, compile_supervised, install_on_current_thread,
    install_with_listener, supervised_rules,
};
#[cfg(test)]
use table::*;
use table::{SUPERVISED_DENIED, row};
pub use table::{mount_lock_rules, profile_name, rules};

#[cfg(test)]
mod tests;
