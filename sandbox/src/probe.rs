//! What this host can enforce, found out by trying (in a throwaway child for anything with side
//! effects), once per process.

use std::ffi::CString;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::OnceLock;

use nix::errno::Errno;
use nix::fcntl::OFlag;
use nix::libc;
use nix::sched::CloneFlags;
use nix::sys::wait::{WaitStatus, waitpid};
use nix::unistd::{ForkResult, Pid, getegid, geteuid};
use serde::Serialize;

use crate::sys;

/// The Landlock ABI whose access rights bridle builds its rulesets for. Raising it is a
/// reviewed change (new rights must be tested on a kernel that has them).
pub const PINNED_LANDLOCK_ABI: i32 = 6;

/// The result of probing the host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HostProbe {
    /// Whether the namespace results were actually tried in a throwaway child (`false` for
    /// [`quick`], whose namespace results are assumptions the launch itself verifies).
    pub verified: bool,
    /// Whether bridle runs with euid 0.
    pub root: bool,
    /// The kernel's Landlock ABI, or why it is unavailable.
    pub landlock_abi: Result<i32, String>,
    /// Filesystem rights the kernel's Landlock ABI handles (names).
    pub landlock_fs_rights: Vec<&'static str>,
    /// Whether seccomp filters can be installed (SECCOMP_GET_ACTION_AVAIL for ERRNO).
    pub seccomp: Result<(), String>,
    /// Whether no_new_privs can be set.
    pub no_new_privs: Result<(), String>,
    /// Creating a user namespace (and mapping our ids) worked in a throwaway child.
    pub user_ns: Result<(), String>,
    /// Creating a mount namespace worked.
    pub mount_ns: Result<(), String>,
    /// The new mount API (open_tree, mount_setattr, move_mount) worked inside it.
    pub mount_api: Result<(), String>,
    /// Creating a PID namespace (and a PID 1 inside it) worked.
    pub pid_ns: Result<(), String>,
    /// Creating a network namespace and bringing its loopback up worked.
    pub net_ns: Result<(), String>,
    /// Creating an IPC namespace worked.
    pub ipc_ns: Result<(), String>,
    /// Where a pids cgroup can be created (the process limit for root, which RLIMIT_NPROC does
    /// not bind).
    pub cgroup_pids: Result<std::path::PathBuf, String>,
}

impl HostProbe {
    /// Whether Landlock supports every right of [`PINNED_LANDLOCK_ABI`].
    pub fn landlock_pinned(&self) -> bool {
        matches!(self.landlock_abi, Ok(v) if v >= PINNED_LANDLOCK_ABI)
    }
}

/// Probes the host once per process and caches the result.
pub fn probe() -> &'static HostProbe {
    static PROBE: OnceLock<HostProbe> = OnceLock::new();
    PROBE.get_or_init(probe_uncached)
}

/// Probes the host without the cache (tests, and `bridle probe` after a fault was injected).
pub fn probe_uncached() -> HostProbe {
    let landlock_abi = sys::landlock_abi_version().map_err(|e| describe(&e));
    let landlock_fs_rights = match landlock_abi {
        Ok(v) => crate::landlock_rules::fs_right_names(v),
        Err(_) => Vec::new(),
    };
    let ns = probe_namespaces();
    HostProbe {
        verified: true,
        root: geteuid().is_root(),
        landlock_abi,
        landlock_fs_rights,
        seccomp: probe_seccomp(),
        no_new_privs: ns.no_new_privs,
        user_ns: ns.user,
        mount_ns: ns.mount,
        mount_api: ns.mount_api,
        pid_ns: ns.pid,
        net_ns: ns.net,
        ipc_ns: ns.ipc,
        cgroup_pids: crate::cgroup::pids_parent(),
    }
}

/// A probe without the throwaway child: Landlock and seccomp are queried (cheap syscalls), the
/// namespaces are assumed to work. Used on the launch path, where the launcher actually creates
/// them: if one fails, the launch is refused and the caller re-plans with the full [`probe`].
/// An assumption can therefore cost a retry, never confinement.
pub fn quick() -> HostProbe {
    let landlock_abi = sys::landlock_abi_version().map_err(|e| describe(&e));
    let landlock_fs_rights = match landlock_abi {
        Ok(v) => crate::landlock_rules::fs_right_names(v),
        Err(_) => Vec::new(),
    };
    HostProbe {
        verified: false,
        root: geteuid().is_root(),
        landlock_abi,
        landlock_fs_rights,
        seccomp: probe_seccomp(),
        no_new_privs: Ok(()),
        user_ns: Ok(()),
        mount_ns: Ok(()),
        mount_api: Ok(()),
        pid_ns: Ok(()),
        net_ns: Ok(()),
        ipc_ns: Ok(()),
        cgroup_pids: crate::cgroup::pids_parent(),
    }
}

fn describe(err: &std::io::Error) -> String {
    match err.raw_os_error() {
        Some(libc::ENOSYS) => "not supported by this kernel (ENOSYS)".to_owned(),
        Some(libc::EOPNOTSUPP) => "disabled on this host (EOPNOTSUPP)".to_owned(),
        Some(libc::EPERM) => "not permitted (EPERM)".to_owned(),
        _ => err.to_string(),
    }
}

fn probe_seccomp() -> Result<(), String> {
    sys::seccomp_action_available(libc::SECCOMP_RET_ERRNO).map_err(|e| describe(&e))
}

/// One bit per step of the namespace probe, reported by the throwaway child.
mod bit {
    pub const USER: u16 = 1 << 0;
    pub const MOUNT: u16 = 1 << 1;
    pub const MOUNT_API: u16 = 1 << 2;
    pub const NET: u16 = 1 << 3;
    pub const IPC: u16 = 1 << 4;
    pub const PID: u16 = 1 << 5;
    pub const NNP: u16 = 1 << 6;
}

#[derive(Debug)]
struct NamespaceProbe {
    user: Result<(), String>,
    mount: Result<(), String>,
    mount_api: Result<(), String>,
    pid: Result<(), String>,
    net: Result<(), String>,
    ipc: Result<(), String>,
    no_new_privs: Result<(), String>,
}

/// Everything the child needs, prepared before fork so the child does not allocate.
struct ChildPlan {
    uid_map: Vec<u8>,
    gid_map: Vec<u8>,
    probe_path: CString,
    report: OwnedFd,
}

#[expect(
    unsafe_code,
    reason = "the probe forks in a possibly multi-threaded process; its child only makes raw syscalls"
)]
fn probe_namespaces() -> NamespaceProbe {
    let failed = |why: String| NamespaceProbe {
        user: Err(why.clone()),
        mount: Err(why.clone()),
        mount_api: Err(why.clone()),
        pid: Err(why.clone()),
        net: Err(why.clone()),
        ipc: Err(why.clone()),
        no_new_privs: Err(why),
    };
    let (read, write) = match nix::unistd::pipe2(OFlag::O_CLOEXEC) {
        Ok(p) => p,
        Err(e) => return failed(format!("cannot create probe pipe: {e}")),
    };
    let uid = geteuid().as_raw();
    let gid = getegid().as_raw();
    let plan = ChildPlan {
        uid_map: format!("{uid} {uid} 1\n").into_bytes(),
        gid_map: format!("{gid} {gid} 1\n").into_bytes(),
        probe_path: CString::from(c"/proc"),
        report: write,
    };
    // SAFETY: the child runs `probe_child`, which only makes raw syscalls on data prepared
    // above (no allocation, no locks) and ends with `_exit`.
    let pid = match unsafe { sys::fork() } {
        Ok(ForkResult::Child) => probe_child(&plan),
        Ok(ForkResult::Parent { child }) => child,
        Err(e) => return failed(format!("cannot fork probe child: {e}")),
    };
    drop(plan);
    let mut buf = [0u8; 2];
    let got = read_exact_or_eof(&read, &mut buf);
    let _ = waitpid(pid, None);
    if !got {
        return failed("the probe child died before reporting".to_owned());
    }
    let bits = u16::from_le_bytes(buf);
    let step = |b: u16, what: &str| {
        if bits & b != 0 {
            Ok(())
        } else {
            Err(format!("{what} failed in a probe child"))
        }
    };
    NamespaceProbe {
        user: step(bit::USER, "unshare(CLONE_NEWUSER) with an id map"),
        mount: step(bit::MOUNT, "unshare(CLONE_NEWNS)"),
        mount_api: step(bit::MOUNT_API, "open_tree/mount_setattr"),
        pid: step(bit::PID, "unshare(CLONE_NEWPID) and fork"),
        net: step(bit::NET, "unshare(CLONE_NEWNET) with loopback up"),
        ipc: step(bit::IPC, "unshare(CLONE_NEWIPC)"),
        no_new_privs: step(bit::NNP, "prctl(PR_SET_NO_NEW_PRIVS)"),
    }
}

fn read_exact_or_eof(fd: &OwnedFd, buf: &mut [u8]) -> bool {
    let mut filled = 0;
    while filled < buf.len() {
        match nix::unistd::read(fd, &mut buf[filled..]) {
            Ok(0) => return false,
            Ok(n) => filled += n,
            Err(Errno::EINTR) => {}
            Err(_) => return false,
        }
    }
    true
}

fn write_proc_file(path: &std::ffi::CStr, content: &[u8]) -> bool {
    let Ok(fd) = nix::fcntl::open(
        path,
        OFlag::O_WRONLY | OFlag::O_CLOEXEC,
        nix::sys::stat::Mode::empty(),
    ) else {
        return false;
    };
    sys::write_all_raw(fd.as_raw_fd(), content).is_ok()
}

/// The throwaway child: tries each namespace step the launcher uses, reports a bit mask, exits.
fn probe_child(plan: &ChildPlan) -> ! {
    let mut bits: u16 = 0;
    if nix::sched::unshare(CloneFlags::CLONE_NEWUSER).is_ok() {
        let ok = write_proc_file(c"/proc/self/setgroups", b"deny")
            && write_proc_file(c"/proc/self/uid_map", &plan.uid_map)
            && write_proc_file(c"/proc/self/gid_map", &plan.gid_map);
        if ok {
            bits |= bit::USER;
        }
    }
    if nix::sched::unshare(CloneFlags::CLONE_NEWNS).is_ok() {
        bits |= bit::MOUNT;
        let private = nix::mount::mount(
            None::<&str>,
            "/",
            None::<&str>,
            nix::mount::MsFlags::MS_REC | nix::mount::MsFlags::MS_PRIVATE,
            None::<&str>,
        );
        if private.is_ok()
            && let Ok(tree) = sys::open_tree_clone(&plan.probe_path)
            && sys::mount_setattr_fd(std::os::fd::AsFd::as_fd(&tree), sys::MOUNT_ATTR_RDONLY, 0)
                .is_ok()
        {
            bits |= bit::MOUNT_API;
        }
    }
    if nix::sched::unshare(CloneFlags::CLONE_NEWNET).is_ok() {
        use nix::sys::socket::{AddressFamily, SockFlag, SockType, socket};
        if let Ok(sock) = socket(
            AddressFamily::Inet,
            SockType::Datagram,
            SockFlag::SOCK_CLOEXEC,
            None,
        ) {
            use std::os::fd::AsFd;
            if sys::loopback_up(sock.as_fd()).is_ok() {
                bits |= bit::NET;
            }
        }
    }
    if nix::sched::unshare(CloneFlags::CLONE_NEWIPC).is_ok() {
        bits |= bit::IPC;
    }
    if nix::sched::unshare(CloneFlags::CLONE_NEWPID).is_ok() {
        // The probe child is single-threaded (a fork keeps only the calling thread).
        match sys::fork_for_probe() {
            Ok(ForkResult::Child) => sys::exit_now(if nix::unistd::getpid() == Pid::from_raw(1) {
                0
            } else {
                1
            }),
            Ok(ForkResult::Parent { child }) => {
                if matches!(waitpid(child, None), Ok(WaitStatus::Exited(_, 0))) {
                    bits |= bit::PID;
                }
            }
            Err(_) => {}
        }
    }
    if nix::sys::prctl::set_no_new_privs().is_ok() {
        bits |= bit::NNP;
    }
    let _ = sys::write_all_raw(plan.report.as_raw_fd(), &bits.to_le_bytes());
    sys::exit_now(0)
}
