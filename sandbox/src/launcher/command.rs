//! Forking the command and confining it in the last stage before its exec: rlimits, the exec
//! supervisor's listener handed over, descriptors closed, the program resolved.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use bridle_policy::{Guarantee, SandboxSpec};
use nix::libc;
use nix::sys::resource::{Resource, setrlimit};
use nix::sys::signal::{SigSet, SigmaskHow, Signal, kill, sigprocmask};
use nix::sys::wait::waitpid;
use nix::unistd::{ForkResult, Pid, getpid};

use super::protocol::{LaunchConfig, ReadyReport, STATUS_FD, StatusLine};
use crate::supervisor::Supervisor;
use crate::{landlock_rules, privileges, seccomp, sys};

use super::child::{Fail, Never, fail, refused, report};

/// Forks the command; with an exec supervisor under seccomp user notification, also the
/// supervisor's own process once the command handed over its listener (its pid second).
pub(super) fn fork_command(
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
        // A process's private writable memory (heap, private writable mappings), not address
        // space reserved without access: runtimes reserve far more than they use (a
        // WebAssembly memory reserves 10 GiB, which Node's `fetch` needs; a JVM its whole
        // `-Xmx`), and RLIMIT_AS failed them under ci-locked's 8 GiB (found by a UX pass on
        // 2026-12-07). Shared memory is not counted (nor was any total: README, G-RES).
        (Resource::RLIMIT_DATA, l.memory_bytes, "memory"),
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
