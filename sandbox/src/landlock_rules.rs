//! The Landlock layer: a ruleset for the pinned ABI built from a `SandboxSpec`, applied to the
//! calling thread, with "fully enforced" as the only acceptable outcome.
//!
//! Rights: everything readable gets read + execute; writable roots get every filesystem right of
//! the pinned ABI; a few device nodes (null, zero, full, random, urandom, tty, ptmx, pts) get
//! read, write and device ioctls. On ABI ≥ 6 abstract unix sockets and signals are scoped to the
//! sandbox. TCP bind/connect are denied only when asked (network off without a network
//! namespace): with a private network namespace loopback servers inside must keep working.
//!
//! Limits (why Landlock is one layer, not the whole wall): it does not govern metadata changes
//! (chmod, chown, utimes, xattr), cannot deny a sub-path of an allowed tree (protected and masked
//! paths), and before ABI 9 does not govern connecting to pathname unix sockets. The mount view
//! and seccomp cover those.

use std::path::{Path, PathBuf};

use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, PathBeneath, PathFd,
    Ruleset, RulesetAttr, RulesetCreatedAttr, RulesetStatus, Scope,
};

use crate::error::SandboxError;
use crate::probe::PINNED_LANDLOCK_ABI;
use crate::real_path::{real_path, with_real_paths};

const PINNED: ABI = ABI::V6;

/// Device nodes a confined command may open read-write (terminals, /dev/null and friends).
pub const DEVICE_NODES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/tty",
    "/dev/ptmx",
    "/dev/pts",
];

/// The names of the filesystem rights a kernel with Landlock ABI `abi` handles.
pub fn fs_right_names(abi: i32) -> Vec<&'static str> {
    let abi = match abi {
        i32::MIN..=0 => return Vec::new(),
        1 => ABI::V1,
        2 => ABI::V2,
        3 => ABI::V3,
        4 => ABI::V4,
        5 => ABI::V5,
        6 => ABI::V6,
        7 => ABI::V7,
        8 => ABI::V8,
        _ => ABI::V9,
    };
    AccessFs::from_all(abi).iter().map(fs_right_name).collect()
}

fn fs_right_name(right: AccessFs) -> &'static str {
    match right {
        AccessFs::Execute => "execute",
        AccessFs::WriteFile => "write_file",
        AccessFs::ReadFile => "read_file",
        AccessFs::ReadDir => "read_dir",
        AccessFs::RemoveDir => "remove_dir",
        AccessFs::RemoveFile => "remove_file",
        AccessFs::MakeChar => "make_char",
        AccessFs::MakeDir => "make_dir",
        AccessFs::MakeReg => "make_reg",
        AccessFs::MakeSock => "make_sock",
        AccessFs::MakeFifo => "make_fifo",
        AccessFs::MakeBlock => "make_block",
        AccessFs::MakeSym => "make_sym",
        AccessFs::Refer => "refer",
        AccessFs::Truncate => "truncate",
        AccessFs::IoctlDev => "ioctl_dev",
        _ => "other",
    }
}

/// What the Landlock layer enforces for one launch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LandlockRequest<'a> {
    /// Read + execute below these.
    pub readable: &'a [std::path::PathBuf],
    /// Every right below these.
    pub writable: &'a [std::path::PathBuf],
    /// Deny TCP bind and connect (network off without a network namespace).
    pub deny_tcp: bool,
    /// Masked paths: left out of the readable set (see [`readable_rules`]).
    pub masked: &'a [std::path::PathBuf],
}

/// What was enforced, for the launcher's report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub struct LandlockReport {
    /// The pinned ABI the rights were built for.
    pub abi: i32,
    /// Whether TCP was restricted.
    pub tcp_denied: bool,
}

fn landlock_err(what: &str, err: impl std::fmt::Display) -> SandboxError {
    SandboxError::Landlock {
        stage: what.to_owned(),
        message: err.to_string(),
    }
}

/// Builds the ruleset and restricts the calling thread (and its future children). Anything short
/// of "fully enforced" for the pinned ABI is an error.
pub fn restrict_current_thread(req: &LandlockRequest<'_>) -> Result<LandlockReport, SandboxError> {
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(AccessFs::from_all(PINNED))
        .map_err(|e| landlock_err("handling filesystem rights", e))?
        .scope(Scope::AbstractUnixSocket | Scope::Signal)
        .map_err(|e| landlock_err("scoping abstract sockets and signals", e))?;
    if req.deny_tcp {
        ruleset = ruleset
            .handle_access(AccessNet::BindTcp | AccessNet::ConnectTcp)
            .map_err(|e| landlock_err("handling TCP rights", e))?;
    }
    let mut created = ruleset
        .create()
        .map_err(|e| landlock_err("creating the ruleset", e))?;
    let read = AccessFs::from_read(PINNED);
    let all = AccessFs::from_all(PINNED);
    let device = AccessFs::ReadFile | AccessFs::WriteFile | AccessFs::IoctlDev | AccessFs::Truncate;
    let (full, list_only) = readable_rules(req.readable, req.masked);
    for path in &full {
        created = add_path(created, path, read)?;
    }
    for path in &list_only {
        created = add_path(created, path, AccessFs::ReadDir.into())?;
    }
    for path in req.writable {
        created = add_path(created, path, all)?;
    }
    for dev in DEVICE_NODES {
        let path = Path::new(dev);
        if path.exists() {
            created = add_path(created, path, device | AccessFs::ReadDir)?;
        }
    }
    let status = created
        .restrict_self()
        .map_err(|e| landlock_err("restricting self", e))?;
    if status.ruleset != RulesetStatus::FullyEnforced {
        return Err(landlock_err(
            "checking the result",
            format!("ruleset is {:?}, not fully enforced", status.ruleset),
        ));
    }
    Ok(LandlockReport {
        abi: PINNED_LANDLOCK_ABI,
        tcp_denied: req.deny_tcp,
    })
}

/// The readable set with masked paths carved out, so a masked path stays unreadable whatever
/// happens to the bind mount that hides it (a host-side rename detaches a bind; a masked file
/// created after the start has no bind at all): returns the paths granted read + execute, and
/// the directories on the way to a masked path, granted listing only. Each directory that holds
/// a masked path is granted entry by entry, skipping the masked entry and symlinks (whose
/// targets are reached through their own grants, if any). An entry created there later is not
/// readable: the cost of the carve-out.
///
/// The walk visits real paths only (it starts from the resolved readable roots and never
/// enters a symlink), so masked paths are compared in their resolved form too: a masked
/// `~/.ssh` below a symlinked `/home`, or one that is itself a symlink, carves out the
/// directory the kernel actually reaches.
pub fn readable_rules(readable: &[PathBuf], masked: &[PathBuf]) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let masked = with_real_paths(masked);
    let mut full = Vec::new();
    let mut list_only = Vec::new();
    let mut stack: Vec<PathBuf> = readable.iter().map(|p| real_path(p)).collect();
    while let Some(path) = stack.pop() {
        if masked.iter().any(|m| m == &path) {
            continue;
        }
        if !masked.iter().any(|m| m.starts_with(&path)) {
            full.push(path);
            continue;
        }
        // An ancestor of a masked path: grant its entries one by one.
        list_only.push(path.clone());
        let Ok(entries) = std::fs::read_dir(&path) else {
            continue;
        };
        for entry in entries.flatten() {
            if entry.file_type().is_ok_and(|t| t.is_symlink()) {
                continue;
            }
            stack.push(entry.path());
        }
    }
    full.sort();
    list_only.sort();
    (full, list_only)
}

fn add_path(
    created: landlock::RulesetCreated,
    path: &Path,
    access: BitFlags<AccessFs>,
) -> Result<landlock::RulesetCreated, SandboxError> {
    let fd = match PathFd::new(path) {
        Ok(fd) => fd,
        // A root that does not exist grants nothing; skipping it cannot widen anything.
        Err(_) if !path.exists() => return Ok(created),
        Err(e) => return Err(landlock_err(&format!("opening `{}`", path.display()), e)),
    };
    let access = if path.is_dir() {
        access
    } else {
        access & AccessFs::from_file(PINNED)
    };
    created
        .add_rule(PathBeneath::new(fd, access))
        .map_err(|e| landlock_err(&format!("adding a rule for `{}`", path.display()), e))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// No granted path holds `target`, and `target` lies below no granted path.
    fn not_granted(full: &[PathBuf], target: &Path) -> bool {
        full.iter()
            .all(|p| !target.starts_with(p) && !p.starts_with(target))
    }

    #[test]
    fn a_mask_below_a_symlinked_home_carves_out_the_real_directory() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::create_dir_all(root.join("realhome/u/.ssh")).unwrap();
        std::fs::create_dir_all(root.join("realhome/u/src")).unwrap();
        std::os::unix::fs::symlink("realhome", root.join("link")).unwrap();
        let (full, list_only) =
            readable_rules(std::slice::from_ref(&root), &[root.join("link/u/.ssh")]);
        assert!(
            not_granted(&full, &root.join("realhome/u/.ssh")),
            "{full:?}"
        );
        assert!(full.contains(&root.join("realhome/u/src")), "{full:?}");
        assert!(
            list_only.contains(&root.join("realhome/u")),
            "{list_only:?}"
        );
    }

    #[test]
    fn a_mask_that_is_a_symlink_carves_out_its_target() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::create_dir_all(root.join("home/keys")).unwrap();
        std::fs::create_dir_all(root.join("home/src")).unwrap();
        std::os::unix::fs::symlink("keys", root.join("home/.ssh")).unwrap();
        // A readable root named through a symlink is resolved too.
        std::os::unix::fs::symlink("home", root.join("alias")).unwrap();
        let (full, _) = readable_rules(&[root.join("alias")], &[root.join("home/.ssh")]);
        assert!(not_granted(&full, &root.join("home/keys")), "{full:?}");
        assert!(full.contains(&root.join("home/src")), "{full:?}");
    }
}
