//! Compiling the table ([`super::rules`]) into a BPF program for the running architecture (the
//! architecture check and the x32 guard of the module docs first), and installing it.

use std::io;

use bridle_policy::SeccompProfile;
use nix::libc;
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch, sock_filter,
};

use super::{
    ArgCmp, CmpOp, DenyRule, SUPERVISED_DENIED, SeccompOptions, When, profile_name, row, rules,
};
use crate::SandboxError;

/// Compiles the table of `profile` under `options` for the running architecture (x86_64 or
/// aarch64; any other architecture is an error), with the architecture check and the x32 guard
/// described in the module docs.
///
/// # Errors
///
/// [`SandboxError::SeccompBuild`] for [`SeccompProfile::None`] (no filter: install nothing), on an
/// unsupported architecture, or when the table cannot be compiled (a bug in the table).
pub fn compile(
    profile: SeccompProfile,
    options: SeccompOptions,
) -> Result<BpfProgram, SandboxError> {
    let build_error = build_error(profile);
    match profile {
        SeccompProfile::None => {
            return Err(build_error(
                "profile `none` has no filter; the launcher installs nothing for it".to_owned(),
            ));
        }
        SeccompProfile::Confined
        | SeccompProfile::ConfinedNoNetwork
        | SeccompProfile::ConfinedAllowList
        | SeccompProfile::MountLock => {}
    }
    let arch = running_arch().map_err(build_error)?;
    build_program(&rules(profile, options), arch, false).map_err(build_error)
}

/// The error of building `profile`'s program, with `message` saying why.
fn build_error(profile: SeccompProfile) -> impl Fn(String) -> SandboxError + Copy {
    let name = profile_name(profile);
    move |message| SandboxError::SeccompBuild {
        profile: name.to_owned(),
        message,
    }
}

/// The syscalls that start a program: under an exec supervisor, the filter returns
/// `SECCOMP_RET_USER_NOTIF` for them (see [`compile_supervised`]).
pub const EXEC_SYSCALLS: [(&str, i64); 2] = [sys!(SYS_execve), sys!(SYS_execveat)];

/// Like [`compile`], for a sandbox with an exec supervisor (command rules): `execve` and
/// `execveat` return `SECCOMP_RET_USER_NOTIF` (they are in no row of the table, so nothing else
/// changes), and so does `ptrace`, ahead of the table's row that denies it: the supervisor
/// refuses every such call ([`PTRACE_SYSCALL`]). Installed with [`install_with_listener`],
/// every exec then waits for the supervisor, which holds the listener, before the kernel reads its arguments; with no
/// listener left the kernel fails it with `ENOSYS`, so an exec is never unsupervised.
///
/// # Errors
///
/// As [`compile`].
pub fn compile_supervised(
    profile: SeccompProfile,
    options: SeccompOptions,
) -> Result<BpfProgram, SandboxError> {
    let build_error = build_error(profile);
    // The checks of `compile` (no filter for `none`, a supported architecture) first.
    compile(profile, options)?;
    let arch = running_arch().map_err(build_error)?;
    build_program(&supervised_rules(profile, options), arch, true).map_err(build_error)
}

/// The rule table of [`compile_supervised`]: [`rules`], plus what the exec supervisor needs
/// denied where the profile does not deny it already (mount-lock).
#[must_use]
pub fn supervised_rules(profile: SeccompProfile, options: SeccompOptions) -> Vec<DenyRule> {
    let mut table = rules(profile, options);
    if profile == SeccompProfile::MountLock {
        table.extend(
            SUPERVISED_DENIED.iter().map(|&(name, nr, guarantee)| {
                row((name, nr), When::Always, libc::EPERM, guarantee)
            }),
        );
    }
    table
}

/// `ptrace`, which the supervised filter also sends to the supervisor: it refuses every call
/// (`EPERM`, as the table would) and says why on the command's stderr, so that a debugger or
/// `strace` inside does not fail with a bare "Operation not permitted". With no listener the
/// kernel fails it with `ENOSYS`: refused either way.
pub const PTRACE_SYSCALL: (&str, i64) = sys!(SYS_ptrace);

/// `SECCOMP_RET_USER_NOTIF` for the syscalls of [`EXEC_SYSCALLS`] and [`PTRACE_SYSCALL`],
/// placed right after the architecture check and the x32 guard.
pub(super) fn exec_notify() -> Vec<sock_filter> {
    let [(_, execve), (_, execveat)] = EXEC_SYSCALLS;
    let (_, ptrace) = PTRACE_SYSCALL;
    let nr = |n: i64| u32::try_from(n).unwrap_or(u32::MAX);
    vec![
        stmt(BPF_LD_W_ABS, SECCOMP_DATA_NR),
        jump(BPF_JMP_JEQ_K, nr(execve), 3, 0),
        jump(BPF_JMP_JEQ_K, nr(execveat), 2, 0),
        jump(BPF_JMP_JEQ_K, nr(ptrace), 1, 0),
        stmt(BPF_JMP_JA, 1),
        ret(libc::SECCOMP_RET_USER_NOTIF),
    ]
}

/// The architecture this process makes syscalls with.
pub(super) fn running_arch() -> Result<TargetArch, String> {
    match std::env::consts::ARCH {
        "x86_64" => Ok(TargetArch::x86_64),
        "aarch64" => Ok(TargetArch::aarch64),
        other => Err(format!(
            "unsupported architecture `{other}` (bridle supports x86_64 and aarch64)"
        )),
    }
}

/// `seccompiler` compiles one action per filter, so the table is split by errno into one
/// `SeccompFilter` per errno, each compiled separately; the bodies are then chained into one
/// program in which the "allow" of one body falls through to the next body.
pub(super) fn build_program(
    table: &[DenyRule],
    arch: TargetArch,
    notify_execs: bool,
) -> Result<BpfProgram, String> {
    let mut groups: Vec<(i32, Vec<&DenyRule>)> = Vec::new();
    for rule in table {
        if let Some(other) = table
            .iter()
            .find(|other| other.nr == rule.nr && other.errno != rule.errno)
        {
            return Err(format!(
                "syscall `{}` is denied with two errnos ({} and {})",
                rule.syscall, rule.errno, other.errno
            ));
        }
        match groups.iter_mut().find(|(errno, _)| *errno == rule.errno) {
            Some((_, rows)) => rows.push(rule),
            None => groups.push((rule.errno, vec![rule])),
        }
    }

    let mut program = arch_check(arch)?;
    program.extend(abi_guard(arch));
    if notify_execs {
        program.extend(exec_notify());
    }
    for (errno, rows) in groups {
        let body = compile_group(errno, &rows, arch)?;
        let prefix = body
            .get(..ARCH_CHECK_LEN)
            .ok_or("seccompiler returned a truncated program")?;
        if prefix != arch_check(arch)?.as_slice() {
            return Err("seccompiler's architecture check is not the expected one".to_owned());
        }
        program.extend(fall_through_on_allow(
            body.get(ARCH_CHECK_LEN..).unwrap_or_default(),
        )?);
    }
    program.push(ret(libc::SECCOMP_RET_ALLOW));

    if program.len() > BPF_MAXINSNS {
        return Err(format!(
            "the filter has {} instructions, more than the kernel's {BPF_MAXINSNS}",
            program.len()
        ));
    }
    Ok(program)
}

/// The kernel's limit on the length of a seccomp program.
pub(super) const BPF_MAXINSNS: usize = 4096;

/// Compiles the rows of one errno with `seccompiler` (mismatch: allow; match: that errno).
pub(super) fn compile_group(
    errno: i32,
    rows: &[&DenyRule],
    arch: TargetArch,
) -> Result<BpfProgram, String> {
    let errno_u32 = u32::try_from(errno).map_err(|_| format!("errno {errno} is negative"))?;
    let mut chains: std::collections::BTreeMap<i64, Option<Vec<SeccompRule>>> =
        std::collections::BTreeMap::new();
    for rule in rows {
        let chain = chains.entry(rule.nr).or_insert_with(|| Some(Vec::new()));
        match &rule.when {
            // An empty rule vector means "whatever the arguments" to seccompiler, and dominates
            // any conditional row of the same syscall (OR).
            When::Always => *chain = None,
            When::All(cmps) => {
                if let Some(chain) = chain {
                    chain.push(seccomp_rule(rule.syscall, cmps)?);
                }
            }
        }
    }
    let chains = chains
        .into_iter()
        .map(|(nr, chain)| (nr, chain.unwrap_or_default()))
        .collect();
    let filter = SeccompFilter::new(
        chains,
        SeccompAction::Allow,
        SeccompAction::Errno(errno_u32),
        arch,
    )
    .map_err(|error| error.to_string())?;
    BpfProgram::try_from(filter).map_err(|error| error.to_string())
}

pub(super) fn seccomp_rule(syscall: &str, cmps: &[ArgCmp]) -> Result<SeccompRule, String> {
    let conditions = cmps
        .iter()
        .map(|cmp| {
            let op = match cmp.op {
                CmpOp::Eq(value) => (SeccompCmpOp::Eq, value),
                CmpOp::Ne(value) => (SeccompCmpOp::Ne, value),
                CmpOp::MaskedEq { mask, value } => (SeccompCmpOp::MaskedEq(u64::from(mask)), value),
            };
            SeccompCondition::new(cmp.index, SeccompCmpArgLen::Dword, op.0, u64::from(op.1))
        })
        .collect::<Result<Vec<_>, _>>()
        .map_err(|error| format!("row for `{syscall}`: {error}"))?;
    SeccompRule::new(conditions).map_err(|error| format!("row for `{syscall}`: {error}"))
}

// Classic BPF opcodes and seccomp_data offsets (include/uapi/linux/{filter,bpf_common,seccomp}.h).
pub(super) const BPF_LD_W_ABS: u16 = 0x20;
pub(super) const BPF_JMP_JA: u16 = 0x05;
pub(super) const BPF_JMP_JEQ_K: u16 = 0x15;
pub(super) const BPF_JMP_JGE_K: u16 = 0x35;
pub(super) const BPF_RET_K: u16 = 0x06;
pub(super) const SECCOMP_DATA_NR: u32 = 0;
pub(super) const SECCOMP_DATA_ARCH: u32 = 4;
pub(super) const AUDIT_ARCH_X86_64: u32 = 62 | 0x8000_0000 | 0x4000_0000;
pub(super) const AUDIT_ARCH_AARCH64: u32 = 183 | 0x8000_0000 | 0x4000_0000;
/// `__X32_SYSCALL_BIT`.
pub(super) const X32_SYSCALL_BIT: u32 = 0x4000_0000;
pub(super) const ARCH_CHECK_LEN: usize = 3;

pub(super) fn stmt(code: u16, k: u32) -> sock_filter {
    sock_filter {
        code,
        jt: 0,
        jf: 0,
        k,
    }
}

pub(super) fn jump(code: u16, k: u32, jt: u8, jf: u8) -> sock_filter {
    sock_filter { code, jt, jf, k }
}

pub(super) fn ret(action: u32) -> sock_filter {
    stmt(BPF_RET_K, action)
}

/// What `seccompiler` puts first in every program (checked against its output): load the arch,
/// skip the kill if it is ours, kill the process otherwise.
pub(super) fn arch_check(arch: TargetArch) -> Result<BpfProgram, String> {
    let audit_arch = match arch {
        TargetArch::x86_64 => AUDIT_ARCH_X86_64,
        TargetArch::aarch64 => AUDIT_ARCH_AARCH64,
        TargetArch::riscv64 => return Err("unsupported architecture `riscv64`".to_owned()),
    };
    Ok(vec![
        stmt(BPF_LD_W_ABS, SECCOMP_DATA_ARCH),
        jump(BPF_JMP_JEQ_K, audit_arch, 1, 0),
        ret(libc::SECCOMP_RET_KILL_PROCESS),
    ])
}

/// x86_64 only: kill the process on an x32 syscall number (bit 30 set), except -1.
pub(super) fn abi_guard(arch: TargetArch) -> Vec<sock_filter> {
    match arch {
        TargetArch::x86_64 => vec![
            stmt(BPF_LD_W_ABS, SECCOMP_DATA_NR),
            jump(BPF_JMP_JGE_K, X32_SYSCALL_BIT, 0, 2),
            jump(BPF_JMP_JEQ_K, u32::MAX, 1, 0),
            ret(libc::SECCOMP_RET_KILL_PROCESS),
        ],
        TargetArch::aarch64 | TargetArch::riscv64 => Vec::new(),
    }
}

/// Rewrites every "return allow" of a compiled body into a jump just past the body's end, so the
/// next body (or the final allow) decides. `seccompiler`'s jumps never leave the body, so the
/// rewritten body is well formed; its match actions (errno) still return.
pub(super) fn fall_through_on_allow(body: &[sock_filter]) -> Result<Vec<sock_filter>, String> {
    let allow = ret(libc::SECCOMP_RET_ALLOW);
    let len = body.len();
    body.iter()
        .enumerate()
        .map(|(index, instruction)| {
            if *instruction == allow {
                let distance = len - index - 1;
                let distance =
                    u32::try_from(distance).map_err(|_| "filter body too long".to_owned())?;
                Ok(stmt(BPF_JMP_JA, distance))
            } else {
                Ok(instruction.clone())
            }
        })
        .collect()
}

/// Installs a compiled program on the calling thread only (no thread sync): that thread and
/// everything it forks or execs from now on run under the filter; other threads of the process
/// do not. Irreversible.
///
/// `seccompiler` sets `PR_SET_NO_NEW_PRIVS` on the calling thread before installing (the kernel
/// requires it, or `CAP_SYS_ADMIN`); the launcher sets it earlier anyway and verifies
/// `NoNewPrivs: 1` and `Seccomp: 2` in `/proc/self/status` afterwards. Allocates only on error, so
/// it is usable between `fork` and `exec`.
///
/// # Errors
///
/// [`SandboxError::SeccompInstall`] when the program is empty or longer than the kernel allows,
/// or when `prctl` or `seccomp` fails.
pub fn install_on_current_thread(
    program: &[sock_filter],
    profile_name: &str,
) -> Result<(), SandboxError> {
    let install_error = |source: io::Error| SandboxError::SeccompInstall {
        profile: profile_name.to_owned(),
        source,
    };
    check_length(program).map_err(install_error)?;
    seccompiler::apply_filter(program).map_err(|error| {
        install_error(match error {
            seccompiler::Error::Prctl(source) | seccompiler::Error::Seccomp(source) => source,
            other => io::Error::other(other.to_string()),
        })
    })
}

/// Like [`install_on_current_thread`], for a program from [`compile_supervised`]: installs it
/// with `SECCOMP_FILTER_FLAG_NEW_LISTENER` and returns its listener (close-on-exec), which the
/// exec supervisor must hold (see the module docs). Sets `PR_SET_NO_NEW_PRIVS` first.
///
/// # Errors
///
/// [`SandboxError::SeccompInstall`] as [`install_on_current_thread`].
pub fn install_with_listener(
    program: &[sock_filter],
    profile_name: &str,
) -> Result<std::os::fd::OwnedFd, SandboxError> {
    let install_error = |source: io::Error| SandboxError::SeccompInstall {
        profile: profile_name.to_owned(),
        source,
    };
    check_length(program).map_err(install_error)?;
    nix::sys::prctl::set_no_new_privs().map_err(|e| install_error(e.into()))?;
    crate::sys::notify::install_filter_with_listener(&to_kernel(program)).map_err(install_error)
}

/// A program the kernel takes: 1 to `BPF_MAXINSNS` instructions (allocates only on error).
pub(super) fn check_length(program: &[sock_filter]) -> io::Result<()> {
    if program.is_empty() || program.len() > BPF_MAXINSNS {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "program has {} instructions; 1 to {BPF_MAXINSNS} are allowed",
                program.len()
            ),
        ));
    }
    Ok(())
}

/// `program` as the kernel's `struct sock_filter`s (seccompiler has its own type of the same
/// layout).
pub(crate) fn to_kernel(program: &[sock_filter]) -> Vec<libc::sock_filter> {
    program
        .iter()
        .map(|i| libc::sock_filter {
            code: i.code,
            jt: i.jt,
            jf: i.jf,
            k: i.k,
        })
        .collect()
}
