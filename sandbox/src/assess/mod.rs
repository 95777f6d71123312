//! Which mechanism provides each guarantee a spec requires, on this host; and the refusal when
//! a required guarantee has none.

use bridle_policy::{Guarantee, Network, SandboxMode, SandboxSpec, UnixSockets};
use serde::{Deserialize, Serialize};

use crate::probe::HostProbe;

/// A kernel mechanism bridle can apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mechanism {
    /// Read-only mount view with writable binds (mount namespace).
    MountView,
    /// Landlock filesystem rules.
    Landlock,
    /// Landlock scoping of abstract unix sockets and signals.
    LandlockScopes,
    /// Landlock TCP bind/connect denial.
    LandlockTcp,
    /// A private network namespace with only loopback.
    NetNamespace,
    /// A private IPC namespace (SysV IPC, POSIX message queues).
    IpcNamespace,
    /// seccomp denial of non-unix socket families.
    SeccompSockets,
    /// seccomp denial of `socket(AF_UNIX)`.
    SeccompUnixSockets,
    /// Outside daemons' socket directories hidden in the mount view.
    HiddenSocketDirs,
    /// A PID namespace with the launcher's init as PID 1.
    PidNamespace,
    /// seccomp denial of ptrace and process_vm_*.
    SeccompPtrace,
    /// The seccomp privilege filter (namespaces, mounts, bpf, perf, keyctl, modules, ...).
    SeccompPrivileges,
    /// All capability sets and the bounding set cleared, securebits locked.
    CapabilityDrop,
    /// no_new_privs.
    NoNewPrivs,
    /// seccomp denial of TIOCSTI and TIOCLINUX.
    SeccompTty,
    /// A child subreaper that kills every descendant.
    Subreaper,
    /// Parent-death signals along the launcher chain.
    ParentDeathSignal,
    /// Descriptors above 2 closed before exec.
    CloseRange,
    /// The environment built from the spec alone.
    EnvFilter,
    /// setrlimit.
    Rlimits,
    /// A pids cgroup (the process limit for root).
    CgroupPids,
    /// The parent's wall-clock timer.
    WallTimer,
    /// Network `allow-list`: bridle's proxy outside the sandbox decides each connection by
    /// host and port; a relay listener on the sandbox's loopback is the only way to it.
    AllowListProxy,
    /// seccomp denial of the mount family (and what reaches past a mount view) for a command
    /// escalated to full access, which keeps its mount view.
    SeccompMountLock,
    /// Root escalated to full access: a user namespace that maps every id to itself, so root
    /// keeps its power over files and has none over the host (device nodes, BPF, modules, raw
    /// I/O, the host's mounts).
    RootInUserNamespace,
}

/// How one guarantee fares on this host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GuaranteeStatus {
    /// The guarantee.
    pub guarantee: Guarantee,
    /// The mechanisms that will provide it.
    pub provided_by: Vec<Mechanism>,
    /// Why it cannot be provided (when `provided_by` is empty), or what is reduced.
    pub note: Option<String>,
    /// The profile accepts it missing.
    pub accepted_missing: bool,
}

impl GuaranteeStatus {
    /// Whether no mechanism provides it.
    pub fn missing(&self) -> bool {
        self.provided_by.is_empty()
    }
}

/// What the launcher applies, decided by the parent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct MechanismPlan {
    /// Confine at all (false for danger-full-access).
    pub confine: bool,
    /// Create a user namespace first.
    pub user_ns: bool,
    /// Build the mount view in a mount namespace.
    pub mount_view: bool,
    /// Use a PID namespace (otherwise a subreaper).
    pub pid_ns: bool,
    /// Use a network namespace.
    pub net_ns: bool,
    /// Use an IPC namespace.
    pub ipc_ns: bool,
    /// Apply Landlock.
    pub landlock: bool,
    /// With Landlock, deny TCP bind/connect.
    pub landlock_deny_tcp: bool,
    /// Install the seccomp filter.
    pub seccomp: bool,
    /// With seccomp, deny non-unix socket families (network off).
    pub seccomp_network_off: bool,
    /// With seccomp, deny `socket(AF_UNIX)`.
    pub seccomp_deny_unix: bool,
    /// Drop capabilities and set no_new_privs.
    pub drop_privileges: bool,
    /// Enforce the process limit with a pids cgroup (root, where RLIMIT_NPROC does not bind).
    pub cgroup_pids: bool,
    /// Full access that keeps the protected paths (an escalated call): the full mount view in a
    /// PID namespace, the mount-lock filter, no other confinement.
    #[serde(default)]
    pub full_view: bool,
    /// With `user_ns`: map every id to itself (root escalated to full access), instead of the
    /// caller's own id only.
    #[serde(default)]
    pub map_every_id: bool,
}

/// The assessment of a spec on a host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Assessment {
    /// One entry per required guarantee, in spec order.
    pub guarantees: Vec<GuaranteeStatus>,
    /// What the launcher will do.
    pub plan: MechanismPlan,
}

impl Assessment {
    /// The first required guarantee that no mechanism provides and the profile does not accept
    /// as missing.
    pub fn refusal(&self) -> Option<&GuaranteeStatus> {
        self.guarantees
            .iter()
            .find(|g| g.missing() && !g.accepted_missing)
    }
}

/// Maps every required guarantee of `spec` to the mechanisms `probe` says are available.
pub fn assess(spec: &SandboxSpec, probe: &HostProbe) -> Assessment {
    let confine = spec.mode != SandboxMode::DangerFullAccess;
    // Full access that keeps the protected paths runs in a user namespace, root included:
    // anyone else owns the mount namespace through it and has no capabilities in it; root maps
    // every id to itself there, so it stays root over files but holds no capability over the
    // host (a device node, BPF, a module or raw I/O would reach around the view). The
    // mount-lock filter keeps either from undoing the view.
    let full_view = spec.protected_kept && !confine;
    let user_ns = (confine || full_view) && probe.user_ns.is_ok();
    let can_ns = user_ns || (probe.root && !full_view);
    let mount_view =
        (confine || full_view) && can_ns && probe.mount_ns.is_ok() && probe.mount_api.is_ok();
    let pid_ns = mount_view && probe.pid_ns.is_ok();
    let network_off = spec.network == Network::Off;
    let allow_list = spec.network == Network::AllowList;
    let net_ns = confine && (network_off || allow_list) && can_ns && probe.net_ns.is_ok();
    let ipc_ns = confine && can_ns && probe.ipc_ns.is_ok();
    let landlock = confine && probe.landlock_pinned();
    let seccomp = (confine || full_view) && probe.seccomp.is_ok() && probe.no_new_privs.is_ok();
    let nnp = confine && probe.no_new_privs.is_ok();
    let block_unix = spec.unix_sockets == UnixSockets::Block;
    let plan = MechanismPlan {
        confine,
        user_ns,
        mount_view,
        pid_ns,
        net_ns,
        ipc_ns,
        landlock,
        landlock_deny_tcp: landlock && network_off && !net_ns,
        seccomp,
        seccomp_network_off: network_off || allow_list,
        seccomp_deny_unix: block_unix,
        drop_privileges: confine || (full_view && !probe.root),
        cgroup_pids: probe.root && spec.limits.processes.is_some() && probe.cgroup_pids.is_ok(),
        full_view,
        map_every_id: full_view && user_ns && probe.root,
    };
    let why_ns = || {
        let mut reasons = Vec::new();
        if let Err(e) = &probe.user_ns {
            reasons.push(format!("user namespace: {e}"));
        }
        if let Err(e) = &probe.mount_ns {
            reasons.push(format!("mount namespace: {e}"));
        }
        if let Err(e) = &probe.mount_api {
            reasons.push(format!("mount API: {e}"));
        }
        if reasons.is_empty() {
            "no mount namespace available".to_owned()
        } else {
            reasons.join("; ")
        }
    };
    let seccomp_why = || match (&probe.seccomp, &probe.no_new_privs) {
        (Err(e), _) => format!("seccomp: {e}"),
        (_, Err(e)) => format!("no_new_privs: {e}"),
        _ => "seccomp unavailable".to_owned(),
    };
    let statuses = spec
        .guarantees
        .iter()
        .map(|&g| {
            let mut by = Vec::new();
            let mut note = None;
            match g {
                Guarantee::FsWrite => {
                    if mount_view {
                        by.push(Mechanism::MountView);
                        if landlock {
                            by.push(Mechanism::Landlock);
                        }
                    } else {
                        note = Some(format!(
                            "needs a read-only mount view (Landlock alone does not govern chmod, chown, utimes or xattr): {}",
                            why_ns()
                        ));
                    }
                }
                // An escalation to full access: the mount view holds only if nothing in the
                // sandbox can undo it or reach around it (host processes' /proc/PID/root).
                Guarantee::FsProtect | Guarantee::FsMask if full_view => {
                    if mount_view && pid_ns && seccomp {
                        by.extend([Mechanism::MountView, Mechanism::PidNamespace, Mechanism::SeccompMountLock]);
                        by.push(if probe.root {
                            Mechanism::RootInUserNamespace
                        } else {
                            Mechanism::CapabilityDrop
                        });
                    } else if !mount_view {
                        note = Some(format!("an escalation to full access keeps the protected paths only in a mount view: {}", why_ns()));
                    } else if !pid_ns {
                        note = Some(format!(
                            "an escalation to full access needs a PID namespace, or the host's processes' /proc/PID/root reach around the mount view: {}",
                            probe.pid_ns.as_ref().err().map_or("not available".to_string(), ToString::to_string)
                        ));
                    } else {
                        note = Some(format!("an escalation to full access needs seccomp to deny the mount calls that would undo its view: {}", seccomp_why()));
                    }
                }
                Guarantee::FsMask => {
                    if mount_view {
                        by.push(Mechanism::MountView);
                    } else {
                        note = Some(format!("needs a mount view: {}", why_ns()));
                    }
                }
                // Protected binds can be detached from the host side, and some paths must stay
                // absent: the sandbox's init (PID 1 of a PID namespace) watches both and stops
                // the sandbox, so without a PID namespace the protection is incomplete.
                Guarantee::FsProtect => {
                    if mount_view && pid_ns {
                        by.push(Mechanism::MountView);
                        by.push(Mechanism::PidNamespace);
                    } else if mount_view {
                        note = Some(format!(
                            "needs a PID namespace, whose init watches the protected paths: {}",
                            probe
                                .pid_ns
                                .as_ref()
                                .err()
                                .map_or("not available".to_string(), ToString::to_string)
                        ));
                    } else {
                        note = Some(format!("needs a mount view: {}", why_ns()));
                    }
                }
                // The allow-list needs the empty namespace: its seccomp rows allow inet
                // sockets only because nothing but loopback (the relay) exists there.
                Guarantee::Net if allow_list => {
                    if net_ns && seccomp {
                        by.extend([Mechanism::NetNamespace, Mechanism::SeccompSockets, Mechanism::AllowListProxy]);
                    } else if !net_ns {
                        note = Some(format!(
                            "network allow-list needs a private network namespace: {}",
                            probe.net_ns.as_ref().err().cloned().unwrap_or_else(why_ns)
                        ));
                    } else {
                        note = Some(format!("network allow-list needs seccomp: {}", seccomp_why()));
                    }
                }
                Guarantee::Net => {
                    if net_ns {
                        by.push(Mechanism::NetNamespace);
                    }
                    if seccomp {
                        by.push(Mechanism::SeccompSockets);
                    }
                    if landlock && !net_ns {
                        by.push(Mechanism::LandlockTcp);
                    }
                    if !net_ns && seccomp {
                        note = Some("no network namespace: loopback servers inside the sandbox are blocked too".to_owned());
                    }
                    if by.is_empty() {
                        note = Some(format!("needs a network namespace or seccomp: {}", seccomp_why()));
                    }
                }
                Guarantee::Ipc => {
                    if block_unix {
                        if seccomp {
                            by.push(Mechanism::SeccompUnixSockets);
                        } else {
                            note = Some(format!("needs seccomp to deny unix sockets: {}", seccomp_why()));
                        }
                    }
                    if !by.is_empty() || !block_unix {
                        if mount_view {
                            by.push(Mechanism::HiddenSocketDirs);
                        }
                        if net_ns {
                            by.push(Mechanism::NetNamespace);
                        }
                        if landlock {
                            by.push(Mechanism::LandlockScopes);
                        }
                        if ipc_ns {
                            by.push(Mechanism::IpcNamespace);
                        }
                    }
                    if !block_unix {
                        if mount_view && (net_ns || landlock) {
                            note = Some("reduced by `unix_sockets: allow`: a daemon socket outside /run, /var/run and /tmp (for example in the workspace) is reachable".to_owned());
                        } else {
                            by.clear();
                            note = Some(format!("`unix_sockets: allow` needs the mount view and abstract-socket isolation: {}", why_ns()));
                        }
                    }
                }
                Guarantee::Proc => {
                    // A PID namespace hides outside processes by pid, but kill(0) and
                    // kill(-pgid) still reach bridle's own process group: Landlock's signal
                    // scope is what stops that, so it is required.
                    if landlock && (pid_ns || seccomp) {
                        if pid_ns {
                            by.push(Mechanism::PidNamespace);
                        }
                        by.push(Mechanism::LandlockScopes);
                        if seccomp {
                            by.push(Mechanism::SeccompPtrace);
                        }
                    } else {
                        note = Some(
                            "needs Landlock signal scoping (ABI >= 6): a PID namespace alone does not stop kill(0) reaching bridle's process group".to_owned(),
                        );
                    }
                }
                Guarantee::Priv => {
                    if seccomp && nnp {
                        by.extend([Mechanism::SeccompPrivileges, Mechanism::CapabilityDrop, Mechanism::NoNewPrivs]);
                    } else {
                        note = Some(seccomp_why());
                    }
                }
                Guarantee::Tty => {
                    if seccomp {
                        by.push(Mechanism::SeccompTty);
                    } else {
                        note = Some(seccomp_why());
                    }
                }
                Guarantee::Tree => {
                    by.push(if pid_ns { Mechanism::PidNamespace } else { Mechanism::Subreaper });
                    by.push(Mechanism::ParentDeathSignal);
                }
                Guarantee::Fd => by.push(Mechanism::CloseRange),
                Guarantee::Env => by.push(Mechanism::EnvFilter),
                Guarantee::Res => {
                    if probe.root && spec.limits.processes.is_some() {
                        match &probe.cgroup_pids {
                            Ok(_) => by.extend([Mechanism::Rlimits, Mechanism::CgroupPids, Mechanism::WallTimer]),
                            Err(e) => {
                                note = Some(format!(
                                    "the process limit cannot be enforced for root: the kernel never applies RLIMIT_NPROC to uid 0, and {e}"
                                ));
                            }
                        }
                    } else {
                        by.extend([Mechanism::Rlimits, Mechanism::WallTimer]);
                    }
                }
            }
            GuaranteeStatus { guarantee: g, provided_by: by, note, accepted_missing: spec.accept_missing.contains(&g) }
        })
        .collect();
    Assessment {
        guarantees: statuses,
        plan,
    }
}

#[cfg(test)]
mod tests;
