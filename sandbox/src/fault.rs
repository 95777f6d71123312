//! Fault injection for fail-closed tests (feature `test-support`): makes a kernel mechanism
//! unavailable to a child process and everything it starts, by installing a seccomp filter in
//! the child before it execs (for example before it execs `bridle`). It restricts only that
//! child; it cannot widen anything.

use std::collections::BTreeMap;
use std::process::Command;

use nix::libc;
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

use crate::error::SandboxError;

/// A mechanism to take away.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// The Landlock syscalls return ENOSYS (as on a kernel without Landlock).
    LandlockUnavailable,
    /// `seccomp()` and `prctl(PR_SET_SECCOMP)` fail with EINVAL (as without seccomp filters).
    SeccompUnavailable,
    /// Creating a user namespace fails with EPERM (as with user namespaces disabled).
    UserNamespacesDenied,
    /// `sendmsg` fails with EPERM: no descriptor can be passed over a unix socket (the relay
    /// of network `allow-list` cannot reach bridle).
    FdPassingDenied,
}

fn build_error(message: impl std::fmt::Display) -> SandboxError {
    SandboxError::SeccompBuild {
        profile: "fault-injection".into(),
        message: message.to_string(),
    }
}

fn target_arch() -> Result<TargetArch, SandboxError> {
    if cfg!(target_arch = "x86_64") {
        Ok(TargetArch::x86_64)
    } else if cfg!(target_arch = "aarch64") {
        Ok(TargetArch::aarch64)
    } else {
        Err(build_error(
            "fault injection supports x86_64 and aarch64 only",
        ))
    }
}

/// The filters to install, in order.
fn programs(fault: Fault) -> Result<Vec<BpfProgram>, SandboxError> {
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    let errno = match fault {
        Fault::LandlockUnavailable => {
            for nr in [
                libc::SYS_landlock_create_ruleset,
                libc::SYS_landlock_add_rule,
                libc::SYS_landlock_restrict_self,
            ] {
                rules.insert(nr, Vec::new());
            }
            libc::ENOSYS
        }
        Fault::SeccompUnavailable => {
            rules.insert(libc::SYS_seccomp, Vec::new());
            let cond = SeccompCondition::new(
                0,
                SeccompCmpArgLen::Dword,
                SeccompCmpOp::Eq,
                22, /* PR_SET_SECCOMP */
            )
            .map_err(build_error)?;
            rules.insert(
                libc::SYS_prctl,
                vec![SeccompRule::new(vec![cond]).map_err(build_error)?],
            );
            libc::EINVAL
        }
        Fault::UserNamespacesDenied => {
            let newuser = u64::try_from(libc::CLONE_NEWUSER).map_err(build_error)?;
            let masked = |arg| {
                SeccompCondition::new(
                    arg,
                    SeccompCmpArgLen::Qword,
                    SeccompCmpOp::MaskedEq(newuser),
                    newuser,
                )
                .and_then(|c| SeccompRule::new(vec![c]))
                .map_err(build_error)
            };
            rules.insert(libc::SYS_unshare, vec![masked(0)?]);
            rules.insert(libc::SYS_clone, vec![masked(0)?]);
            libc::EPERM
        }
        Fault::FdPassingDenied => {
            rules.insert(libc::SYS_sendmsg, Vec::new());
            libc::EPERM
        }
    };
    let errno = u32::try_from(errno).map_err(build_error)?;
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(errno),
        target_arch()?,
    )
    .map_err(build_error)?;
    let program: BpfProgram = filter.try_into().map_err(build_error)?;
    let mut out = vec![program];
    if fault == Fault::UserNamespacesDenied {
        // clone3 hides its flags in memory: make it unavailable so libc falls back to clone.
        let clone3 = SeccompFilter::new(
            BTreeMap::from([(libc::SYS_clone3, Vec::new())]),
            SeccompAction::Allow,
            SeccompAction::Errno(u32::try_from(libc::ENOSYS).map_err(build_error)?),
            target_arch()?,
        )
        .map_err(build_error)?;
        // A seccompiler filter has one match action, so ENOSYS needs a second filter.
        out.push(clone3.try_into().map_err(build_error)?);
    }
    Ok(out)
}

/// Makes `fault` hold for the process `command` starts and all its descendants.
pub fn inject(command: &mut Command, fault: Fault) -> Result<(), SandboxError> {
    use std::os::unix::process::CommandExt;
    let programs = programs(fault)?;
    let hook = move || -> std::io::Result<()> {
        for program in &programs {
            // apply_filter sets no_new_privs and installs; it allocates nothing on success.
            seccompiler::apply_filter(program)
                .map_err(|_| std::io::Error::from_raw_os_error(libc::EPERM))?;
        }
        Ok(())
    };
    #[expect(
        unsafe_code,
        reason = "pre_exec is unsafe; the hook only makes prctl/seccomp syscalls on prebuilt data"
    )]
    // SAFETY: the hook runs between fork and exec; it calls only prctl and seccomp on a buffer
    // built before the fork, and allocates nothing on success.
    unsafe {
        command.pre_exec(hook);
    }
    Ok(())
}
