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

use std::ffi::CString;
use std::io::Read;
use std::os::fd::AsFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use bridle_policy::{Guarantee, SandboxSpec};
use nix::libc;
use nix::sched::CloneFlags;
use nix::sys::resource::{Resource, setrlimit};
use nix::sys::signal::{SigSet, SigmaskHow, Signal, kill, sigprocmask};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::{ForkResult, Pid, getpid, getppid};

use super::protocol::{
    CONFIG_FD, LaunchConfig, RELAY_FD, ReadyReport, STATUS_FD, SUPERVISOR_FD, StatusLine,
};
use super::wait::wait_for_signals;
use crate::supervisor::Supervisor;
use crate::{landlock_rules, mounts, privileges, relay, seccomp, sys};

/// A setup failure: which guarantee, and why.
struct Fail {
    guarantee: Option<Guarantee>,
    cause: String,
}

fn fail(guarantee: Guarantee, cause: impl Into<String>) -> Fail {
    Fail {
        guarantee: Some(guarantee),
        cause: cause.into(),
    }
}

/// Reports a setup failure on the status pipe; returns the launcher's exit status for it.
fn refused(f: Fail) -> i32 {
    report(&StatusLine::Fail {
        guarantee: f.guarantee,
        cause: f.cause,
    });
    125
}

fn report(line: &StatusLine) {
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

enum Never {}

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
        config.notes.extend(view.cache_notes);
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

/// PID 1 of the sandbox's PID namespace.
fn init(
    config: &LaunchConfig,
    program: Option<&seccompiler::BpfProgram>,
    launcher_alive: std::os::fd::OwnedFd,
    mut supervisor: Option<&mut Supervisor>,
) -> Result<i32, Fail> {
    nix::sys::prctl::set_pdeathsig(Signal::SIGKILL)
        .map_err(|e| fail(Guarantee::Tree, format!("init parent-death signal: {e}")))?;
    // The launcher may have died before the parent-death signal was armed: then the pipe is
    // already at end-of-file.
    nix::fcntl::fcntl(
        &launcher_alive,
        nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::O_NONBLOCK),
    )
    .map_err(|e| fail(Guarantee::Tree, format!("liveness pipe: {e}")))?;
    let mut probe = [0u8; 1];
    if matches!(nix::unistd::read(&launcher_alive, &mut probe), Ok(0)) {
        return Err(fail(
            Guarantee::Tree,
            "the launcher exited before init started",
        ));
    }
    drop(launcher_alive);
    mounts::mount_proc().map_err(|e| fail(e.guarantee, e.cause))?;
    let (child, execs) = fork_command(config, program, supervisor.as_deref_mut())?;
    sys::close_raw_fd(STATUS_FD);
    if execs.is_some() {
        supervisor = None;
    }
    if config.mechanisms.mount_view {
        mounts::watch_protected(
            config.mounts.protected.clone(),
            config.mounts.must_stay_absent.clone(),
        );
    }
    Ok(supervise(child, false, supervisor, execs))
}

/// Waits for `command`; on SIGTERM/SIGHUP kills the tree; on SIGUSR1 asks the command to
/// terminate (SIGTERM), passing the request down through init. Returns the exit code to pass up:
/// the command's own, or 128+N when it died of signal N. With `subreaper`, kills every
/// remaining descendant before returning. With an exec `supervisor` tracing the whole tree, the
/// stops of its tracees are handed to it, in one loop with the signals. `execs`: the exec
/// supervisor's own process (under seccomp user notification), whose end while the command
/// runs stops the sandbox.
fn supervise(
    command: Pid,
    subreaper: bool,
    mut supervisor: Option<&mut Supervisor>,
    execs: Option<Pid>,
) -> i32 {
    // Traced tasks include threads, which only `__WALL` reports.
    let flags = if supervisor.is_some() {
        WaitPidFlag::WNOHANG | WaitPidFlag::__WALL
    } else {
        WaitPidFlag::WNOHANG
    };
    let mut waited = SigSet::empty();
    for s in [
        Signal::SIGCHLD,
        Signal::SIGTERM,
        Signal::SIGHUP,
        Signal::SIGUSR1,
    ] {
        waited.add(s);
    }
    let signals =
        match SignalFd::with_flags(&waited, SfdFlags::SFD_NONBLOCK | SfdFlags::SFD_CLOEXEC) {
            Ok(fd) => fd,
            Err(e) => {
                // Fail closed: without it nothing here can wait for the command or answer its execs.
                return stop_sandbox(
                    command,
                    subreaper,
                    &format!(
                        "the sandbox cannot wait for its command (signalfd: {e}); it was stopped"
                    ),
                    125,
                );
            }
        };
    if supervisor.is_some() {
        // A hint only: without it stops are handled as well, a little later.
        let _ = sys::sched::set_fair_slice(crate::supervisor::SUPERVISOR_SLICE_NS);
    }
    let mut result: Option<i32> = None;
    // Every change a wait reports (an exit, a tracee's stop) raises SIGCHLD first (orphans
    // reparented here exit with SIGCHLD too), so the loop waits only after one.
    let mut reap = true;
    loop {
        // Reap everything that has exited; remember the command's status.
        while reap {
            let status = waitpid(None::<Pid>, Some(flags));
            if let (Some(s), Ok(WaitStatus::Exited(pid, _) | WaitStatus::Signaled(pid, _, _))) =
                (supervisor.as_deref_mut(), &status)
            {
                s.forget(*pid);
            }
            match status {
                Ok(WaitStatus::Exited(pid, code)) if pid == command => result = Some(code),
                Ok(WaitStatus::Signaled(pid, sig, _)) if pid == command => {
                    result = Some(128 + sig as i32)
                }
                Ok(gone @ (WaitStatus::Exited(pid, _) | WaitStatus::Signaled(pid, _, _)))
                    if Some(pid) == execs && result.is_none() =>
                {
                    // No exec can run now (the listener is gone), and whatever waits at one
                    // would wait for ever: stop the sandbox, saying why.
                    let how = match gone {
                        WaitStatus::Signaled(_, sig, _) => format!("was killed by {sig}"),
                        _ => "ended".to_owned(),
                    };
                    return stop_sandbox(
                        command,
                        subreaper,
                        &format!("the exec supervisor {how}; the sandbox was stopped"),
                        // The command ran, and was killed: 128 + SIGKILL, as for any command
                        // killed by a signal.
                        128 + Signal::SIGKILL as i32,
                    );
                }
                Ok(WaitStatus::StillAlive) | Err(_) => reap = false,
                Ok(
                    stopped @ (WaitStatus::Stopped(..)
                    | WaitStatus::PtraceEvent(..)
                    | WaitStatus::PtraceSyscall(_)),
                ) => {
                    if let Some(s) = supervisor.as_deref_mut() {
                        s.on_stop(stopped);
                    }
                }
                Ok(_) => {}
            }
        }
        if let Some(code) = result {
            if subreaper {
                kill_descendants();
            }
            return code;
        }
        for signal in wait_for_signals(&signals) {
            match signal {
                Signal::SIGCHLD => reap = true,
                Signal::SIGUSR1 => {
                    // Graceful cancel: the launcher passes it on to init, which (like a
                    // subreaper launcher) asks the command to terminate; a SIGTERM to the
                    // launcher follows if it does not.
                    let forward = if subreaper || getpid().as_raw() == 1 {
                        Signal::SIGTERM
                    } else {
                        Signal::SIGUSR1
                    };
                    let _ = kill(command, forward);
                }
                Signal::SIGTERM | Signal::SIGHUP => {
                    let _ = kill(command, Signal::SIGKILL);
                    if subreaper {
                        // This also reaps the command (its status is not seen by the loop
                        // above any more), so return now: waiting for it again would wait
                        // forever, and the launcher would outlive the tree it was told to end.
                        kill_descendants();
                        return 128 + Signal::SIGKILL as i32;
                    } else if getpid().as_raw() == 1 {
                        // Returning from init kills the whole namespace.
                        return 128 + Signal::SIGKILL as i32;
                    }
                }
                _ => {}
            }
        }
    }
}

/// Says `why` on stderr (the command's), kills the command (and, as a subreaper, every
/// descendant) and gives `code` back.
fn stop_sandbox(command: Pid, subreaper: bool, why: &str, code: i32) -> i32 {
    let _ = sys::write_all_raw(2, format!("bridle: {why}\n").as_bytes());
    let _ = kill(command, Signal::SIGKILL);
    if subreaper {
        kill_descendants();
    }
    code
}

/// Kills and reaps every descendant (orphans are reparented to us, the subreaper, so they
/// show up as direct children on the next scan).
pub(crate) fn kill_descendants() {
    for _ in 0..10_000 {
        let children = direct_children();
        if children.is_empty() {
            return;
        }
        for pid in &children {
            let _ = kill(*pid, Signal::SIGKILL);
        }
        for pid in children {
            let _ = waitpid(pid, None);
        }
    }
}

/// Our direct children, from `/proc/self/task/*/children`, or by scanning `/proc/*/stat` for
/// our pid as parent when the kernel lacks that file.
fn direct_children() -> Vec<Pid> {
    let me = getpid();
    let mut out = Vec::new();
    let mut have_children_file = false;
    if let Ok(tasks) = std::fs::read_dir("/proc/self/task") {
        for task in tasks.flatten() {
            if let Ok(text) = std::fs::read_to_string(task.path().join("children")) {
                have_children_file = true;
                out.extend(
                    text.split_whitespace()
                        .filter_map(|p| p.parse().ok())
                        .map(Pid::from_raw),
                );
            }
        }
    }
    if have_children_file {
        return out;
    }
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return out;
    };
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<i32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // The parent pid is the second field after the parenthesised command name.
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse::<i32>().ok());
        if ppid == Some(me.as_raw()) {
            out.push(Pid::from_raw(pid));
        }
    }
    out
}

/// Forks the command; with an exec supervisor under seccomp user notification, also the
/// supervisor's own process once the command handed over its listener (its pid second).
fn fork_command(
    config: &LaunchConfig,
    program: Option<&seccompiler::BpfProgram>,
    supervisor: Option<&mut Supervisor>,
) -> Result<(Pid, Option<Pid>), Fail> {
    // Under an exec supervisor with a seccomp filter, the command hands the filter's listener
    // over a socket pair; without a filter, the command waits until it is traced (nothing it
    // does, its first exec included, happens untraced).
    let notify = supervisor.is_some() && program.is_some();
    let handover = if notify {
        Some(std::os::unix::net::UnixStream::pair().map_err(|e| {
            fail(
                Guarantee::Proc,
                format!("creating the exec supervisor's socket pair: {e}"),
            )
        })?)
    } else {
        None
    };
    let gate = match (&supervisor, notify) {
        (Some(_), false) => Some(
            nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)
                .map_err(|e| fail(Guarantee::Proc, format!("creating the trace gate: {e}")))?,
        ),
        _ => None,
    };
    match sys::fork_single_threaded()
        .map_err(|e| fail(Guarantee::Tree, format!("forking the command: {e}")))?
    {
        ForkResult::Child => {
            if let Some((read, write)) = gate {
                drop(write);
                let mut byte = [0u8; 1];
                if !matches!(nix::unistd::read(&read, &mut byte), Ok(1)) {
                    // The supervisor could not trace us and said so itself.
                    sys::exit_now(125);
                }
            }
            let handover = handover.map(|(_, ours)| ours);
            let f = match command_stage(config, program, handover) {
                Ok(never) => match never {},
                Err(f) => f,
            };
            sys::exit_now(refused(f))
        }
        ForkResult::Parent { child } => {
            let Some(supervisor) = supervisor else {
                return Ok((child, None));
            };
            if let Some((read, write)) = gate {
                drop(read);
                if let Err(cause) = supervisor.attach_tree(child) {
                    let _ = kill(child, Signal::SIGKILL);
                    let _ = waitpid(child, None);
                    return Err(Fail {
                        guarantee: None,
                        cause,
                    });
                }
                let _ = nix::unistd::write(&write, b"g");
            } else if let Some((ours, theirs)) = handover {
                drop(theirs);
                // None: the command failed its setup before it installed the filter, and
                // exits saying why; it never execs.
                if let Some(listener) = receive_listener(&ours) {
                    drop(ours);
                    match start_execs(supervisor, listener) {
                        Ok(execs) => return Ok((child, Some(execs))),
                        Err(f) => {
                            // Its first exec waits for an answer nobody would give.
                            let _ = kill(child, Signal::SIGKILL);
                            let _ = waitpid(child, None);
                            return Err(f);
                        }
                    }
                }
            }
            Ok((child, None))
        }
    }
}

/// Forks the exec supervisor's own process (see [`crate::supervisor::serve`]), which takes
/// `listener` and the supervisor's channel to bridle and closes every other descriptor; this
/// process keeps no copy of the listener.
fn start_execs(supervisor: &mut Supervisor, listener: std::os::fd::OwnedFd) -> Result<Pid, Fail> {
    use std::os::fd::AsRawFd;
    let parent = getpid();
    match sys::fork_single_threaded()
        .map_err(|e| fail(Guarantee::Proc, format!("forking the exec supervisor: {e}")))?
    {
        ForkResult::Child => {
            if nix::sys::prctl::set_pdeathsig(Signal::SIGKILL).is_err()
                || nix::unistd::getppid() != parent
            {
                sys::exit_now(125);
            }
            let _ = nix::sys::prctl::set_name(c"bridle-execs");
            let mut keep = supervisor.descriptors();
            keep.extend([0, 1, 2, listener.as_raw_fd()]);
            close_all_but(&keep);
            crate::supervisor::serve(supervisor, listener)
        }
        ForkResult::Parent { child } => Ok(child),
    }
}

/// Closes every descriptor of this process not in `keep` (a freshly forked one: nothing else
/// owns them), with `close_range` over the gaps between them: nothing to read that could fail
/// and leave a descriptor open.
fn close_all_but(keep: &[std::os::fd::RawFd]) {
    let mut kept: Vec<u32> = keep
        .iter()
        .filter_map(|fd| u32::try_from(*fd).ok())
        .collect();
    kept.sort_unstable();
    kept.dedup();
    let mut first = 0u32;
    for fd in kept {
        if fd > first {
            sys::close_fd_range(first, fd - 1);
        }
        first = fd.saturating_add(1);
    }
    sys::close_fd_range(first, u32::MAX);
}

/// The listener the command sends over `socket` once it installed its filter (`None` when it
/// closed the socket without).
fn receive_listener(socket: &std::os::unix::net::UnixStream) -> Option<std::os::fd::OwnedFd> {
    use nix::sys::socket::{ControlMessageOwned, MsgFlags, recvmsg};
    use std::os::fd::AsRawFd;
    let mut byte = [0u8; 1];
    let mut iov = [std::io::IoSliceMut::new(&mut byte)];
    let mut space = nix::cmsg_space!([std::os::fd::RawFd; 1]);
    let msg = loop {
        match recvmsg::<()>(
            socket.as_raw_fd(),
            &mut iov,
            Some(&mut space),
            MsgFlags::MSG_CMSG_CLOEXEC,
        ) {
            Err(nix::errno::Errno::EINTR) => {}
            Err(_) => return None,
            Ok(msg) => break msg,
        }
    };
    let mut listener = None;
    for cmsg in msg.cmsgs().ok()? {
        if let ControlMessageOwned::ScmRights(fds) = cmsg {
            for fd in fds {
                match listener {
                    None => listener = sys::take_raw_fd(fd).ok(),
                    Some(_) => sys::close_raw_fd(fd),
                }
            }
        }
    }
    listener
}

/// Sends the filter's `listener` to the supervisor over `socket`.
fn send_listener(
    socket: &std::os::unix::net::UnixStream,
    listener: &std::os::fd::OwnedFd,
) -> Result<(), Fail> {
    use nix::sys::socket::{ControlMessage, MsgFlags, sendmsg};
    use std::os::fd::AsRawFd;
    let fds = [listener.as_raw_fd()];
    let iov = [std::io::IoSlice::new(b"l")];
    sendmsg::<()>(
        socket.as_raw_fd(),
        &iov,
        &[ControlMessage::ScmRights(&fds)],
        MsgFlags::empty(),
        None,
    )
    .map(drop)
    .map_err(|e| {
        fail(
            Guarantee::Proc,
            format!("handing the exec listener to the supervisor: {e}"),
        )
    })
}

/// The command process: applies the rest of the confinement, verifies it, execs.
fn command_stage(
    config: &LaunchConfig,
    program: Option<&seccompiler::BpfProgram>,
    handover: Option<std::os::unix::net::UnixStream>,
) -> Result<Never, Fail> {
    let m = config.mechanisms;
    let spec = &config.spec;
    // Default signal handling and an empty mask for the command.
    for s in [
        Signal::SIGINT,
        Signal::SIGQUIT,
        Signal::SIGTERM,
        Signal::SIGHUP,
        Signal::SIGCHLD,
        Signal::SIGPIPE,
    ] {
        let _ = sys::default_signal(s);
    }
    sigprocmask(SigmaskHow::SIG_SETMASK, Some(&SigSet::empty()), None)
        .map_err(|e| fail(Guarantee::Tree, format!("resetting the signal mask: {e}")))?;
    nix::unistd::chdir(&config.cwd).map_err(|e| {
        fail(
            Guarantee::FsWrite,
            format!(
                "entering the working directory `{}` inside the sandbox: {e}",
                config.cwd.display()
            ),
        )
    })?;
    apply_rlimits(spec, m.cgroup_pids && config.cgroup_procs.is_some())?;
    nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(0o022));

    let mut landlock_abi = None;
    if m.landlock {
        // The private /dev/shm of the mount view is writable like the private /tmp (POSIX shared
        // memory lives there); the host's is not, so only with the view.
        let mut writable = spec.writable_roots.clone();
        if m.mount_view && config.mounts.private_tmp {
            writable.push(PathBuf::from("/dev/shm"));
        }
        writable.extend(
            config
                .mounts
                .cache_overlays
                .iter()
                .map(|o| o.target.clone()),
        );
        let request = landlock_rules::LandlockRequest {
            readable: &spec.readable_roots,
            writable: &writable,
            deny_tcp: m.landlock_deny_tcp,
            masked: &spec.masked_paths,
        };
        let done = landlock_rules::restrict_current_thread(&request)
            .map_err(|e| fail(Guarantee::FsWrite, e.to_string()))?;
        landlock_abi = Some(done.abi);
    }
    if m.drop_privileges {
        privileges::drop_all(true).map_err(|e| fail(Guarantee::Priv, e))?;
    }
    if let Some(program) = program {
        let name = format!("{:?}", spec.seccomp);
        match handover {
            // Every exec from here on, this process's own included, waits for the supervisor.
            Some(socket) => {
                let listener = seccomp::install_with_listener(program, &name)
                    .map_err(|e| fail(Guarantee::Priv, e.to_string()))?;
                send_listener(&socket, &listener)?;
            }
            None => seccomp::install_on_current_thread(program, &name)
                .map_err(|e| fail(Guarantee::Priv, e.to_string()))?,
        }
    }
    // Keep only 0, 1, 2 and the status pipe (close-on-exec) open.
    sys::close_fds_from(u32::try_from(STATUS_FD + 1).unwrap_or(5))
        .map_err(|e| fail(Guarantee::Fd, format!("close_range: {e}")))?;
    sys::close_fd_range(3, u32::try_from(STATUS_FD - 1).unwrap_or(3));
    if m.confine || m.full_view {
        let status = std::fs::read_to_string("/proc/self/status").map_err(|e| {
            fail(
                Guarantee::Priv,
                format!("reading /proc/self/status to verify: {e}"),
            )
        })?;
        let expected = privileges::Expected {
            seccomp: m.seccomp,
            no_new_privs: m.drop_privileges,
            no_capabilities: m.drop_privileges,
        };
        privileges::verify_status(&status, expected).map_err(|e| {
            fail(
                Guarantee::Priv,
                format!("verification from inside failed: {e}"),
            )
        })?;
    }
    let (path, argv, envp) = resolve_command(config)?;
    report(&StatusLine::Ready(ReadyReport {
        mechanisms: m,
        landlock_abi,
        command_pid_inside: getpid().as_raw(),
        notes: config.notes.clone(),
    }));
    let err = nix::unistd::execve(&path, &argv, &envp).err();
    let errno = err.map_or(0, |e| e as i32);
    let code = if errno == libc::ENOENT { 127 } else { 126 };
    report(&StatusLine::ExecFailed {
        code,
        cause: format!(
            "cannot run `{}`: {}",
            config.argv[0],
            std::io::Error::from_raw_os_error(errno)
        ),
    });
    sys::exit_now(code)
}

/// `pids_cgroup`: the launcher joined a pids cgroup that enforces `limits.processes`.
fn apply_rlimits(spec: &SandboxSpec, pids_cgroup: bool) -> Result<(), Fail> {
    let l = &spec.limits;
    // The kernel never applies RLIMIT_NPROC to a real uid of 0 (the root user is exempt whatever
    // its capabilities), so for root a process limit needs the pids cgroup; without it, refuse
    // (unless the profile accepts G-RES missing), whatever the parent assessed.
    if l.processes.is_some()
        && nix::unistd::getuid().is_root()
        && !pids_cgroup
        && !spec.accept_missing.contains(&Guarantee::Res)
    {
        return Err(fail(
            Guarantee::Res,
            "the process limit cannot be enforced for uid 0: the kernel never applies RLIMIT_NPROC to root; run bridle as an unprivileged user or accept G-RES missing",
        ));
    }
    for (resource, value, name) in [
        (Resource::RLIMIT_NPROC, l.processes, "processes"),
        (Resource::RLIMIT_AS, l.memory_bytes, "memory"),
        (Resource::RLIMIT_FSIZE, l.file_size_bytes, "file_size"),
        (Resource::RLIMIT_NOFILE, l.open_files, "open_files"),
        (Resource::RLIMIT_CPU, l.cpu_time_secs, "cpu_time"),
    ] {
        if let Some(v) = value {
            setrlimit(resource, v, v)
                .map_err(|e| fail(Guarantee::Res, format!("setrlimit {name}={v}: {e}")))?;
        }
    }
    Ok(())
}

type Resolved = (CString, Vec<CString>, Vec<CString>);

fn resolve_command(config: &LaunchConfig) -> Result<Resolved, Fail> {
    let bad = |what: &str| Fail {
        guarantee: None,
        cause: format!("{what} contains a NUL byte"),
    };
    let argv: Vec<CString> = config
        .argv
        .iter()
        .map(|a| CString::new(a.as_bytes()).map_err(|_| bad("an argument")))
        .collect::<Result<_, _>>()?;
    let envp: Vec<CString> = config
        .spec
        .env
        .iter()
        .map(|(k, v)| CString::new(format!("{k}={v}")).map_err(|_| bad("an environment variable")))
        .collect::<Result<_, _>>()?;
    let Some(first) = config.argv.first() else {
        return Err(Fail {
            guarantee: None,
            cause: "empty command".into(),
        });
    };
    let path: PathBuf = if first.contains('/') {
        PathBuf::from(first)
    } else {
        let search = config
            .spec
            .env
            .get("PATH")
            .map_or("/usr/local/bin:/usr/bin:/bin", String::as_str);
        match search
            .split(':')
            .filter(|d| !d.is_empty())
            .map(|d| Path::new(d).join(first))
            .find(|p| is_executable(p))
        {
            Some(p) => p,
            None => {
                report(&StatusLine::ExecFailed {
                    code: 127,
                    cause: format!("command not found: `{first}`"),
                });
                sys::exit_now(127);
            }
        }
    };
    let path = CString::new(path.as_os_str().as_bytes()).map_err(|_| bad("the program path"))?;
    Ok((path, argv, envp))
}

fn is_executable(path: &Path) -> bool {
    nix::unistd::access(path, nix::unistd::AccessFlags::X_OK).is_ok() && path.is_file()
}
