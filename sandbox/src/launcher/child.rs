//! The launcher: the `bridle` binary re-executed with a hidden subcommand. It confines itself
//! and execs the command. All of this runs in a fresh, single-threaded process, so forking and
//! allocating here is safe.
//!
//! Process tree (confined, with a PID namespace):
//!
//! ```text
//! bridle (parent)                      waits; reads the status pipe; enforces --timeout
//! └─ launcher           pdeathsig=KILL user+mount+net+ipc namespaces, mount view, loopback up
//!    └─ init (PID 1)    pdeathsig=KILL mounts /proc, reaps; when the command exits, exits
//!       └─ command                     rlimits, Landlock, capabilities dropped, no_new_privs,
//!                                      seccomp, fds closed, verified, exec
//! ```
//!
//! When init exits the kernel kills everything left in the PID namespace (setsid and
//! double-forked daemons included); when the parent dies (even by SIGKILL) the launcher gets
//! SIGKILL, then init, then the namespace. Without a PID namespace (or for danger-full-access)
//! the launcher is a child subreaper that kills every remaining descendant when the command
//! exits, and its parent-death signal is SIGTERM so it can do that before exiting.

use std::io::Read;
use std::os::fd::AsFd;

use bridle_policy::Guarantee;
use nix::sched::CloneFlags;
use nix::sys::signal::{SigSet, SigmaskHow, Signal, sigprocmask};
use nix::sys::wait::{WaitStatus, waitpid};
use nix::unistd::{ForkResult, getpid, getppid};

use super::command::fork_command;
use super::init::{init, supervise};
use super::protocol::{CONFIG_FD, LaunchConfig, RELAY_FD, STATUS_FD, SUPERVISOR_FD, StatusLine};
use crate::supervisor::Supervisor;
use crate::{mounts, relay, seccomp, sys};

/// A setup failure: which guarantee, and why.
pub(super) struct Fail {
    pub(super) guarantee: Option<Guarantee>,
    pub(super) cause: String,
}

pub(super) fn fail(guarantee: Guarantee, cause: impl Into<String>) -> Fail {
    Fail {
        guarantee: Some(guarantee),
        cause: cause.into(),
    }
}

/// Reports a setup failure on the status pipe; returns the launcher's exit status for it.
pub(super) fn refused(f: Fail) -> i32 {
    report(&StatusLine::Fail {
        guarantee: f.guarantee,
        cause: f.cause,
    });
    125
}

pub(super) fn report(line: &StatusLine) {
    let mut text = line.render();
    text.push('\n');
    let _ = sys::write_all_raw(STATUS_FD, text.as_bytes());
}

/// Entry point of the hidden launcher subcommand. Never returns.
pub fn launcher_main() -> ! {
    // The status pipe must not leak into the command.
    let _ = sys::set_cloexec(STATUS_FD);
    let code = match read_config().and_then(run) {
        Ok(never) => match never {},
        Err(f) => refused(f),
    };
    sys::exit_now(code)
}

/// Entry point of a launcher forked (not re-executed) from a single-threaded bridle process:
/// the same code path as [`launcher_main`] after the config has been read. `status` becomes
/// the status pipe at [`STATUS_FD`], `relay` the relay channel at [`RELAY_FD`], and
/// `supervisor_channel` the exec supervisor's at [`SUPERVISOR_FD`]. Never returns.
pub(crate) fn run_forked(
    config: LaunchConfig,
    status: std::os::fd::OwnedFd,
    relay: Option<std::os::fd::OwnedFd>,
    supervisor_channel: Option<std::os::fd::OwnedFd>,
) -> ! {
    // Out of the way first, so that moving one to its number cannot clobber another.
    let high = |fd: &std::os::fd::OwnedFd| {
        nix::fcntl::fcntl(fd, nix::fcntl::FcntlArg::F_DUPFD_CLOEXEC(64))
            .unwrap_or_else(|_| sys::exit_now(125))
    };
    let status_high = high(&status);
    let relay_high = relay.as_ref().map(high);
    let channel_high = supervisor_channel.as_ref().map(high);
    drop(status);
    drop(relay);
    drop(supervisor_channel);
    for (fd, target) in [
        (Some(status_high), STATUS_FD),
        (relay_high, RELAY_FD),
        (channel_high, SUPERVISOR_FD),
    ] {
        if let Some(fd) = fd {
            if sys::dup2_raw(fd, target).is_err() {
                sys::exit_now(125);
            }
            sys::close_raw_fd(fd);
        }
    }
    let _ = sys::set_cloexec(STATUS_FD);
    // Everything else the parent had open stays with the parent: a pipe end held here would
    // keep its reader from ever seeing end-of-file.
    sys::close_fd_range(3, u32::try_from(STATUS_FD - 1).unwrap_or(3));
    // The relay channel and the supervisor's, when there are, stay (see `crate::relay` and
    // `take_supervisor`).
    let _ = sys::close_fds_from(u32::try_from(SUPERVISOR_FD + 1).unwrap_or(7));
    if config.spec.network != bridle_policy::Network::AllowList {
        sys::close_raw_fd(RELAY_FD);
    }
    if config.supervisor.is_none() {
        sys::close_raw_fd(SUPERVISOR_FD);
    }
    // Never unwind into the parent's stack frames (their destructors belong to the parent, e.g.
    // placeholder cleanup): a panic here ends this process at once.
    let code = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run(config))) {
        Ok(Ok(never)) => match never {},
        Ok(Err(f)) => refused(f),
        Err(_) => {
            report(&StatusLine::Fail {
                guarantee: None,
                cause: "the launcher panicked".into(),
            });
            125
        }
    };
    sys::exit_now(code)
}

/// The exec supervisor of this launch, with its channel to bridle, when the spec has command
/// rules.
fn take_supervisor(config: &LaunchConfig) -> Result<Option<Supervisor>, Fail> {
    let Some(supervisor) = config.supervisor.clone() else {
        return Ok(None);
    };
    let _ = sys::set_cloexec(SUPERVISOR_FD);
    let channel = sys::take_raw_fd(SUPERVISOR_FD).map_err(|e| Fail {
        guarantee: None,
        cause: format!("the launcher has no channel for the exec supervisor: {e}"),
    })?;
    Ok(Some(Supervisor::new(supervisor, Some(channel))))
}

fn read_config() -> Result<LaunchConfig, Fail> {
    let fd = sys::take_raw_fd(CONFIG_FD).map_err(|e| Fail {
        guarantee: None,
        cause: format!("launcher has no config pipe: {e}"),
    })?;
    let mut file = std::fs::File::from(fd);
    let mut text = String::new();
    file.read_to_string(&mut text).map_err(|e| Fail {
        guarantee: None,
        cause: format!("reading launcher config: {e}"),
    })?;
    serde_json::from_str(&text).map_err(|e| Fail {
        guarantee: None,
        cause: format!("parsing launcher config: {e}"),
    })
}

pub(super) enum Never {}

fn run(config: LaunchConfig) -> Result<Never, Fail> {
    let m = config.mechanisms;
    let death_signal = if m.pid_ns {
        Signal::SIGKILL
    } else {
        Signal::SIGTERM
    };
    nix::sys::prctl::set_pdeathsig(death_signal).map_err(|e| {
        fail(
            Guarantee::Tree,
            format!("setting the parent-death signal: {e}"),
        )
    })?;
    if getppid().as_raw() != config.parent_pid {
        return Err(fail(
            Guarantee::Tree,
            "the parent exited before the launcher started",
        ));
    }
    // Detached from the caller's terminal before anything of the command runs: with it, a
    // command could open /dev/tty and set the person's terminal modes, title or clipboard.
    if config.new_session {
        nix::unistd::setsid().map_err(|e| {
            fail(
                Guarantee::Tty,
                format!("starting a session without the caller's terminal (setsid): {e}"),
            )
        })?;
    }
    // The run's pids cgroup (the process limit for root): join it before anything is forked,
    // and while still in the host's user namespace, which owns the cgroup files.
    if let Some(procs) = &config.cgroup_procs {
        std::fs::write(procs, "0\n").map_err(|e| {
            fail(
                Guarantee::Res,
                format!("joining the pids cgroup `{}`: {e}", procs.display()),
            )
        })?;
    }
    // Signals the launcher and init handle synchronously; the command resets them.
    let mut handled = SigSet::empty();
    for s in [
        Signal::SIGCHLD,
        Signal::SIGTERM,
        Signal::SIGHUP,
        Signal::SIGUSR1,
    ] {
        handled.add(s);
    }
    sigprocmask(SigmaskHow::SIG_BLOCK, Some(&handled), None)
        .map_err(|e| fail(Guarantee::Tree, format!("blocking signals: {e}")))?;
    for s in [Signal::SIGINT, Signal::SIGQUIT] {
        // The terminal delivers these to the command directly; the launcher must not die of
        // them (nor forward them twice).
        let _ = sys::ignore_signal(s);
    }

    let program = if m.seccomp {
        let options = seccomp::SeccompOptions {
            network_off: m.seccomp_network_off,
            netns_isolates: m.net_ns,
            deny_unix_sockets: m.seccomp_deny_unix,
        };
        // Under command rules every exec stops for the supervisor.
        let compiled = if config.supervisor.is_some() {
            seccomp::compile_supervised(config.spec.seccomp, options)
        } else {
            seccomp::compile(config.spec.seccomp, options)
        };
        Some(compiled.map_err(|e| fail(Guarantee::Priv, e.to_string()))?)
    } else {
        None
    };
    let mut supervisor = take_supervisor(&config)?;

    if m.user_ns && m.map_every_id {
        enter_user_ns_mapping_every_id()?;
    } else if m.user_ns {
        nix::sched::unshare(CloneFlags::CLONE_NEWUSER)
            .map_err(|e| fail(Guarantee::FsWrite, format!("unshare(CLONE_NEWUSER): {e}")))?;
        write_id_maps(config.uid, config.gid)?;
    }
    let mut flags = CloneFlags::empty();
    if m.mount_view {
        flags |= CloneFlags::CLONE_NEWNS;
    }
    if m.net_ns {
        flags |= CloneFlags::CLONE_NEWNET;
    }
    if m.ipc_ns {
        // A private hostname too: sethostname would otherwise change the host's.
        flags |= CloneFlags::CLONE_NEWIPC | CloneFlags::CLONE_NEWUTS;
    }
    if !flags.is_empty() {
        nix::sched::unshare(flags)
            .map_err(|e| fail(Guarantee::FsWrite, format!("unshare({flags:?}): {e}")))?;
    }
    let mut config = config;
    if m.mount_view {
        let view = mounts::build_view(&config.mounts).map_err(|e| fail(e.guarantee, e.cause))?;
        // Only the cache overlays that are mounted become writable (Landlock, below).
        config
            .mounts
            .cache_overlays
            .retain(|o| view.cache_writable.contains(&o.target));
        config.notes.extend(view.notes);
    }
    if m.net_ns {
        use nix::sys::socket::{AddressFamily, SockFlag, SockType, socket};
        let sock = socket(
            AddressFamily::Inet,
            SockType::Datagram,
            SockFlag::SOCK_CLOEXEC,
            None,
        )
        .map_err(|e| fail(Guarantee::Net, format!("socket for loopback setup: {e}")))?;
        sys::loopback_up(sock.as_fd())
            .map_err(|e| fail(Guarantee::Net, format!("bringing loopback up: {e}")))?;
    }
    relay_hook(&config)?;
    if m.pid_ns {
        nix::sched::unshare(CloneFlags::CLONE_NEWPID)
            .map_err(|e| fail(Guarantee::Tree, format!("unshare(CLONE_NEWPID): {e}")))?;
        // Only the launcher holds the write end: init sees end-of-file on the read end once the
        // launcher is gone (getppid() is 0 inside the new PID namespace, so it cannot ask).
        let (alive_read, alive_write) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)
            .map_err(|e| fail(Guarantee::Tree, format!("creating the liveness pipe: {e}")))?;
        match sys::fork_single_threaded()
            .map_err(|e| fail(Guarantee::Tree, format!("forking init: {e}")))?
        {
            ForkResult::Child => {
                drop(alive_write);
                let code = match init(&config, program.as_ref(), alive_read, supervisor.as_mut()) {
                    Ok(code) => code,
                    Err(f) => refused(f),
                };
                // Not while the protected-path watch is stopping the sandbox: it exits init.
                mounts::exit_init(code)
            }
            ForkResult::Parent { child } => {
                drop(alive_read);
                // Init supervises; its channel is init's alone.
                drop(supervisor);
                sys::close_raw_fd(STATUS_FD);
                let code = supervise(child, false, None, None);
                drop(alive_write);
                sys::exit_now(code)
            }
        }
    }
    nix::sys::prctl::set_child_subreaper(true)
        .map_err(|e| fail(Guarantee::Tree, format!("becoming a child subreaper: {e}")))?;
    let (child, execs) = fork_command(&config, program.as_ref(), supervisor.as_mut())?;
    sys::close_raw_fd(STATUS_FD);
    let code = match execs {
        // Supervised by its own process: this one keeps no part of it.
        Some(_) => {
            drop(supervisor);
            supervise(child, true, None, execs)
        }
        None => supervise(child, true, supervisor.as_mut(), None),
    };
    sys::exit_now(code)
}

/// Network `allow-list`: inside the new network namespace (loopback up), the relay listener
/// goes to bridle's proxy (see [`crate::relay`]). Refused without a private network namespace:
/// inet sockets would then reach the host's network.
fn relay_hook(config: &LaunchConfig) -> Result<(), Fail> {
    let spec = &config.spec;
    if spec.network != bridle_policy::Network::AllowList {
        return Ok(());
    }
    if !config.mechanisms.net_ns {
        return Err(fail(
            Guarantee::Net,
            "network allow-list needs a private network namespace",
        ));
    }
    let port = spec
        .allow_list
        .as_ref()
        .map_or(bridle_policy::RELAY_PORT, |l| l.relay_port);
    relay::hand_over_listener(port).map_err(|cause| fail(Guarantee::Net, cause))
}

fn write_id_maps(uid: u32, gid: u32) -> Result<(), Fail> {
    let write = |path: &str, text: String| {
        std::fs::write(path, text)
            .map_err(|e| fail(Guarantee::FsWrite, format!("writing {path}: {e}")))
    };
    write("/proc/self/setgroups", "deny".to_owned())?;
    write("/proc/self/uid_map", format!("{uid} {uid} 1\n"))?;
    write("/proc/self/gid_map", format!("{gid} {gid} 1\n"))
}

/// Root escalated to full access: a new user namespace in which every id maps to itself, so
/// root stays root over every file but holds no capability over the host (`mknod` of a disk,
/// modules, raw I/O are checked against the host's user namespace). A process cannot write
/// such a map for itself (that needs `CAP_SETUID` over the parent namespace, which it left),
/// so a helper forked before the unshare, still in the parent namespace, writes it.
fn enter_user_ns_mapping_every_id() -> Result<(), Fail> {
    use std::io::Write;
    let why = |what: &str, e: &dyn std::fmt::Display| {
        fail(
            Guarantee::FsProtect,
            format!("mapping every id in root's user namespace: {what}: {e}"),
        )
    };
    let (go_read, go_write) =
        nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(|e| why("creating a pipe", &e))?;
    let (report_read, report_write) =
        nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(|e| why("creating a pipe", &e))?;
    let maps = ["uid_map", "gid_map"].map(|map| {
        std::fs::read_to_string(format!("/proc/self/{map}"))
            .map_err(|e| e.to_string())
            .and_then(|text| super::id_map::identity_of(&text))
            .map(|identity| (map, identity))
            .map_err(|e| why(&format!("reading /proc/self/{map}"), &e))
    });
    let [uid_map, gid_map] = maps;
    let maps = [uid_map?, gid_map?];
    let launcher = getpid();
    match sys::fork_single_threaded().map_err(|e| why("forking the helper", &e))? {
        ForkResult::Child => {
            drop(go_write);
            drop(report_read);
            let mut go = [0u8; 1];
            let result = match std::fs::File::from(go_read).read(&mut go) {
                Ok(1) => maps.iter().try_for_each(|(map, identity)| {
                    let path = format!("/proc/{launcher}/{map}");
                    std::fs::write(&path, identity).map_err(|e| format!("writing {path}: {e}"))
                }),
                // The launcher failed before unsharing: nothing to map.
                _ => Err("the launcher did not enter its user namespace".to_owned()),
            };
            if let Err(message) = &result {
                let _ = std::fs::File::from(report_write).write_all(message.as_bytes());
            }
            sys::exit_now(i32::from(result.is_err()))
        }
        ForkResult::Parent { child } => {
            drop(go_read);
            drop(report_write);
            let unshared = nix::sched::unshare(CloneFlags::CLONE_NEWUSER);
            if unshared.is_ok() {
                let _ = nix::unistd::write(&go_write, b"1");
            }
            drop(go_write);
            let mut report = String::new();
            let _ = std::fs::File::from(report_read).read_to_string(&mut report);
            let status = waitpid(child, None);
            unshared.map_err(|e| why("unshare(CLONE_NEWUSER)", &e))?;
            match status {
                Ok(WaitStatus::Exited(_, 0)) if report.is_empty() => Ok(()),
                Ok(_) if !report.is_empty() => Err(why("the helper", &report)),
                other => Err(why("the helper", &format!("{other:?}"))),
            }
        }
    }
}
