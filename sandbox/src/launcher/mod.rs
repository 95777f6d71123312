//! Launching a confined command: the parent side ([`Sandbox`], [`Launch`], [`Running`]), the
//! wire protocol, and the launcher itself ([`launcher_main`]).
//!
//! One code path for every spawn: `bridle exec`, the one-shot bash tool, the PTY terminal and
//! the subprocess manager all build a [`Launch`] and spawn it; only stdio differs.

mod child;
mod id_map;
pub mod protocol;
mod wait;

use std::io::{BufRead, BufReader, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::mpsc;
use std::time::Duration;

use bridle_policy::{Guarantee, SandboxSpec};
use nix::fcntl::OFlag;
use nix::sys::signal::{Signal, kill};
use nix::sys::wait::{WaitStatus, waitpid};
use nix::unistd::{Pid, getegid, geteuid, getpid};

pub use child::launcher_main;
use protocol::{
    CONFIG_FD, LaunchConfig, RELAY_FD, ReadyReport, STATUS_FD, SUPERVISOR_FD, StatusLine,
};

use crate::assess::{Assessment, assess};
use crate::mounts::{self, Inspection, Inspector, MountPlan, Placeholders};
use crate::probe::HostProbe;
use crate::sys;

/// The hidden subcommand that runs the launcher.
pub const LAUNCHER_SUBCOMMAND: &str = "__bridle_launch";

/// Why a command could not be run confined. `bridle exec` prints
/// `bridle: sandbox unavailable: <guarantee> (<cause>)` and exits 125.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The guarantee that cannot be established, when one is to blame.
    pub guarantee: Option<Guarantee>,
    /// Why.
    pub cause: String,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.guarantee {
            Some(g) => write!(f, "sandbox unavailable: {g} ({})", self.cause),
            None => write!(f, "sandbox unavailable: {}", self.cause),
        }
    }
}

fn refusal(guarantee: Option<Guarantee>, cause: impl Into<String>) -> Refusal {
    Refusal {
        guarantee,
        cause: cause.into(),
    }
}

/// The refusal for a required guarantee that no mechanism provides.
fn missing_refusal(missing: &crate::assess::GuaranteeStatus) -> Refusal {
    refusal(
        Some(missing.guarantee),
        missing
            .note
            .clone()
            .unwrap_or_else(|| "no mechanism on this host".into()),
    )
}

/// A spec checked against the host and prepared for launches.
#[derive(Debug)]
pub struct Sandbox {
    spec: SandboxSpec,
    assessment: Assessment,
    /// Whether the assessment rests on a full probe (see [`crate::probe::quick`]).
    verified: bool,
    mounts: MountPlan,
    placeholders: Placeholders,
    /// Held while the sandbox lives: this run writes the workspace's cache home.
    _cache_lease: mounts::cache::CacheLease,
    launcher: PathBuf,
    /// The exec supervisor of every launch, when the spec has command rules (the programs the
    /// rules name resolved once, here).
    supervisor: Option<crate::supervisor::SupervisorConfig>,
}

impl Sandbox {
    /// Assesses `spec` on the host described by `probe` and prepares the mount plan. Refuses when
    /// a required guarantee has no mechanism (unless the profile accepts it missing). `launcher`
    /// is the `bridle` binary (usually `std::env::current_exe()`).
    pub fn prepare(
        spec: SandboxSpec,
        probe: &HostProbe,
        launcher: PathBuf,
    ) -> Result<Sandbox, Refusal> {
        let assessment = assess(&spec, probe);
        if let Some(missing) = assessment.refusal() {
            return Err(missing_refusal(missing));
        }
        let mut cache_lease = mounts::cache::CacheLease::default();
        let (mounts, placeholders) = if assessment.plan.mount_view {
            let (mut plan, placeholders) =
                mounts::prepare(&spec).map_err(|f| refusal(Some(f.guarantee), f.cause))?;
            if let Some(cache) = &spec.cache_home {
                let (overlays, lease, notes) = mounts::cache::prepare(cache, &spec.temp_dir);
                for note in notes {
                    tracing::info!("{note}");
                }
                plan.cache_overlays = overlays;
                cache_lease = lease;
            }
            (plan, placeholders)
        } else {
            std::fs::create_dir_all(&spec.temp_dir).map_err(|e| {
                refusal(
                    Some(Guarantee::FsWrite),
                    format!("creating the session temp dir: {e}"),
                )
            })?;
            (empty_mount_plan(&spec), Placeholders::default())
        };
        let supervisor = crate::supervisor::SupervisorConfig::for_spec(&spec);
        Ok(Sandbox {
            _cache_lease: cache_lease,
            supervisor,
            spec,
            assessment,
            verified: probe.verified,
            mounts,
            placeholders,
            launcher,
        })
    }

    /// The spec.
    pub fn spec(&self) -> &SandboxSpec {
        &self.spec
    }

    /// How each guarantee is provided.
    pub fn assessment(&self) -> &Assessment {
        &self.assessment
    }

    /// What to tell the user of an interactive or long session when this sandbox holds git's
    /// lock on repository configs (see [`mounts::ConfigLock`]): git outside cannot change them
    /// until the session ends. `None` when it holds none.
    pub fn config_locks_note(&self) -> Option<String> {
        let locks = self.placeholders.held_locks();
        let first = locks.first()?;
        let config = first.with_extension("");
        let more = match locks.len() {
            1 => String::new(),
            n => format!(" (and {} more)", n - 1),
        };
        Some(format!(
            "holding `{}`{more} for this sandboxed session (bridle pid {}): git outside the sandbox cannot change that repository's config (`git config`, `git remote add`, `git push -u`) until the session ends",
            config.display(),
            std::process::id()
        ))
    }

    /// Spawns `launch`. When the launch is refused and the assessment rested on assumptions
    /// ([`crate::probe::quick`]), probes the host for real and, if that changes which mechanisms
    /// apply and every required guarantee is still provided, tries once more with the new plan.
    /// Never runs anything with less than the spec requires.
    pub fn spawn(&mut self, mut launch: Launch) -> Result<Spawned, Refusal> {
        let first = launch.spawn_once();
        let Err(refused) = first else { return first };
        if self.verified {
            return Err(refused);
        }
        self.verified = true;
        let full = crate::probe::probe();
        let reassessed = assess(&self.spec, full);
        if reassessed.plan == self.assessment.plan {
            return Err(refused);
        }
        tracing::info!(first = %refused, "launch refused under assumed host features; retrying with the probed plan");
        self.assessment = reassessed;
        if let Some(missing) = self.assessment.refusal() {
            return Err(missing_refusal(missing));
        }
        launch.config.mechanisms = self.assessment.plan;
        launch.spawn_once()
    }

    /// A launch of `argv` in `cwd`. Set stdio on [`Launch::command`] before spawning.
    pub fn launch(&self, argv: Vec<String>, cwd: &Path) -> Launch {
        let mut command = Command::new(&self.launcher);
        command.arg(LAUNCHER_SUBCOMMAND);
        command.env_clear();
        let config = LaunchConfig {
            spec: self.spec.clone(),
            mechanisms: self.assessment.plan,
            mounts: self.mounts.clone(),
            argv,
            cwd: cwd.to_path_buf(),
            parent_pid: getpid().as_raw(),
            uid: geteuid().as_raw(),
            gid: getegid().as_raw(),
            cgroup_procs: None,
            notes: Vec::new(),
            supervisor: self.supervisor.clone(),
        };
        Launch {
            command,
            config,
            pids_group: None,
            in_process: false,
            controlling_tty: false,
            stdio: [None, None, None],
            relay: None,
        }
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        self.placeholders.remove();
    }
}

fn empty_mount_plan(spec: &SandboxSpec) -> MountPlan {
    MountPlan {
        writable: Vec::new(),
        writable_ids: Vec::new(),
        temp_dir: spec.temp_dir.clone(),
        private_tmp: false,
        read_only_in_tmp: Vec::new(),
        cache_overlays: Vec::new(),
        pins: Vec::new(),
        protected: Vec::new(),
        masked_dirs: Vec::new(),
        masked_files: Vec::new(),
        hidden: Vec::new(),
        keep_in_hidden: Vec::new(),
        must_stay_absent: Vec::new(),
        absent_at_end: Vec::new(),
        full_view: false,
    }
}

/// One launch, before it is spawned.
#[derive(Debug)]
pub struct Launch {
    /// The launcher command: set stdin/stdout/stderr here. Its arguments and environment are
    /// bridle's (the command's environment comes from the spec).
    pub command: Command,
    config: LaunchConfig,
    pids_group: Option<crate::cgroup::PidsGroup>,
    in_process: bool,
    controlling_tty: bool,
    /// Replacements for the command's stdin, stdout and stderr (forked launcher only; the
    /// re-executed one takes its stdio from [`Launch::command`]).
    stdio: [Option<OwnedFd>; 3],
    /// The launcher's end of the relay channel (network `allow-list`), passed at `RELAY_FD`.
    relay: Option<OwnedFd>,
}

/// How a launched command ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The command exited with this code (128+N when it died of signal N).
    Exited(i32),
    /// The wall-clock limit passed; the whole tree was killed.
    TimedOut,
    /// The command left something that must not exist after a run (a planted `commondir`, say):
    /// bridle moved it aside. Report it as exit 137 with the message.
    Stopped(String),
}

impl Outcome {
    /// The exit status a command-line caller reports: the command's own, 124 on timeout, 137
    /// when bridle stopped the run.
    pub fn code(&self) -> i32 {
        match self {
            Outcome::Exited(code) => *code,
            Outcome::TimedOut => 124,
            Outcome::Stopped(_) => 137,
        }
    }
}

/// What the launcher reported when it could not exec the command after confining.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecFailure {
    /// 126 (found but not runnable) or 127 (not found).
    pub code: i32,
    /// Why.
    pub cause: String,
}

/// The result of spawning: running, or the command could not be exec'd.
#[derive(Debug)]
pub enum Spawned {
    /// The command is running, confined.
    Running(Running),
    /// Confinement worked but the command could not be exec'd.
    ExecFailed(ExecFailure),
}

impl Launch {
    /// Forks the launcher from this process instead of re-executing the bridle binary: the
    /// same launcher code, one exec less. Only for a caller that is single-threaded when it
    /// spawns (checked; the spawn is refused otherwise) and passes its own stdio through;
    /// [`Launch::command`] is then not used.
    pub fn in_process(mut self) -> Launch {
        self.in_process = true;
        self
    }

    /// Starts the launcher in a new session whose controlling terminal is its stdin (which the
    /// caller set to a pseudo-terminal slave on [`Launch::command`]): the command then has job
    /// control on that terminal, and Ctrl-C on it is a real SIGINT to its foreground group.
    pub fn with_controlling_terminal(mut self) -> Launch {
        self.controlling_tty = true;
        self
    }

    /// Gives the command these descriptors as stdin, stdout and stderr instead of the caller's
    /// (for example pipes the caller pumps, when its own stdio is a regular file).
    pub fn with_stdio(mut self, stdio: [Option<OwnedFd>; 3]) -> Launch {
        self.stdio = stdio;
        self
    }

    /// Passes the launcher's end of a relay channel (see [`crate::relay::channel`]): with
    /// network `allow-list`, the launcher hands the relay listener to bridle's proxy over it.
    /// Without one, an `allow-list` launch is refused (`G-NET`).
    pub fn with_network_relay(mut self, launcher_end: OwnedFd) -> Launch {
        self.relay = Some(launcher_end);
        self
    }

    /// Adds or replaces an environment variable of the command (the spec's environment is the
    /// base).
    pub fn env(mut self, name: &str, value: &str) -> Launch {
        self.config
            .spec
            .env
            .insert(name.to_owned(), value.to_owned());
        self
    }

    /// The working directory the command will start in.
    pub fn cwd(&self) -> &Path {
        &self.config.cwd
    }

    /// Spawns the launcher, sends it the config and waits until it reports that the command
    /// was exec'd under verified confinement (or why not).
    pub fn spawn_once(&mut self) -> Result<Spawned, Refusal> {
        if self.config.mechanisms.cgroup_pids && self.pids_group.is_none() {
            let parent =
                crate::cgroup::pids_parent().map_err(|e| refusal(Some(Guarantee::Res), e))?;
            let max = self.config.spec.limits.processes.unwrap_or(u64::MAX);
            let group = crate::cgroup::PidsGroup::create(&parent, max)
                .map_err(|e| refusal(Some(Guarantee::Res), e))?;
            self.config.cgroup_procs = Some(group.procs_file());
            self.pids_group = Some(group);
        }
        // Started before the command can change anything.
        let inspector = self.inspector();
        let channel = match &self.config.supervisor {
            Some(_) => Some(
                std::os::unix::net::UnixStream::pair()
                    .map(|(ours, theirs)| (OwnedFd::from(ours), OwnedFd::from(theirs)))
                    .map_err(|e| {
                        refusal(None, format!("creating the exec supervisor's channel: {e}"))
                    })?,
            ),
            None => None,
        };
        let (ours, theirs) = channel.unzip();
        let spawned = if self.in_process {
            self.fork_launcher(theirs)
        } else {
            self.exec_launcher(theirs)
        };
        let (pid, status_read, io) = match spawned {
            Ok(spawned) => spawned,
            Err(refused) => {
                if let Some(inspector) = inspector {
                    inspector.discard();
                }
                return Err(refused);
            }
        };
        let (events_tx, events) = mpsc::channel();
        // After the fork: the forked launcher must be made by a single-threaded process.
        let reader = ours.map(|socket| {
            let tx = events_tx.clone();
            std::thread::spawn(move || {
                crate::supervisor::record::read_channel(socket, |m| tx.send(Wake::Exec(m)).is_ok());
            })
        });
        let mut running = Running {
            pid,
            ready: None,
            pids_group: self.pids_group.take(),
            io,
            must_stay_absent: self.config.mounts.must_stay_absent.clone(),
            net_watch: None,
            inspector: inspector.map(Box::new),
            events: Some(events),
            events_tx,
            reader,
        };
        let status = match &running.reader {
            None => read_status(status_read, |_| {}),
            Some(_) => match running.await_status(status_read) {
                Startup::Ended(status) => status,
                Startup::Asking(ready) => Ok(ready),
            },
        };
        let ended = match status {
            Ok(ready) => {
                for note in &ready.notes {
                    tracing::info!("{note}");
                }
                running.ready = Some(ready);
                // The launcher is in the sandbox's network namespace by now.
                if self.config.mechanisms.net_ns
                    && self.config.spec.network == bridle_policy::Network::Off
                {
                    running.net_watch = crate::net_watch::NetWatch::open(running.pid.as_raw());
                }
                return Ok(Spawned::Running(running));
            }
            Err(StatusEnd::ExecFailed(failure)) => Ok(Spawned::ExecFailed(failure)),
            Err(StatusEnd::Refused(r)) => Err(r),
        };
        let _ = waitpid(running.pid, None);
        if let Some(inspector) = running.inspector.take() {
            inspector.discard();
        }
        ended
    }

    /// The end-of-run inspection of repositories in the writable roots, when the spec protects
    /// git metadata (G-FS-PROTECT) and the command can write somewhere.
    fn inspector(&self) -> Option<Inspector> {
        let spec = &self.config.spec;
        let writes_roots =
            spec.mode == bridle_policy::SandboxMode::WorkspaceWrite || spec.protected_kept;
        if !writes_roots || !spec.guarantees.contains(&Guarantee::FsProtect) {
            return None;
        }
        Inspector::begin(
            self.config.mounts.writable.clone(),
            self.config.mounts.protected.clone(),
            self.config.mounts.absent_at_end.clone(),
        )
    }

    /// Re-executes the bridle binary as the launcher; the config goes over a pipe.
    fn exec_launcher(
        &mut self,
        supervisor_channel: Option<OwnedFd>,
    ) -> Result<(Pid, OwnedFd, ChildIo), Refusal> {
        let (config_read, config_write) = nix::unistd::pipe2(OFlag::O_CLOEXEC)
            .map_err(|e| refusal(None, format!("creating the config pipe: {e}")))?;
        let (status_read, status_write) = nix::unistd::pipe2(OFlag::O_CLOEXEC)
            .map_err(|e| refusal(None, format!("creating the status pipe: {e}")))?;
        let pipes = [
            (config_read.as_raw_fd(), CONFIG_FD),
            (status_write.as_raw_fd(), STATUS_FD),
        ];
        let relay = self.relay.as_ref().map(|r| (r.as_raw_fd(), RELAY_FD));
        let channel = supervisor_channel
            .as_ref()
            .map(|c| (c.as_raw_fd(), SUPERVISOR_FD));
        let tty = self.controlling_tty;
        match (relay, channel) {
            (Some(r), Some(c)) => {
                sys::set_child_fds(&mut self.command, [pipes[0], pipes[1], r, c], tty);
            }
            (Some(one), None) | (None, Some(one)) => {
                sys::set_child_fds(&mut self.command, [pipes[0], pipes[1], one], tty);
            }
            (None, None) => sys::set_child_fds(&mut self.command, pipes, tty),
        }
        let [stdin, stdout, stderr] = std::mem::take(&mut self.stdio);
        if let Some(fd) = stdin {
            self.command.stdin(std::process::Stdio::from(fd));
        }
        if let Some(fd) = stdout {
            self.command.stdout(std::process::Stdio::from(fd));
        }
        if let Some(fd) = stderr {
            self.command.stderr(std::process::Stdio::from(fd));
        }
        let mut child = self.command.spawn().map_err(|e| {
            refusal(
                None,
                format!(
                    "starting the launcher `{}`: {e}",
                    self.command.get_program().to_string_lossy()
                ),
            )
        })?;
        drop(config_read);
        drop(status_write);
        drop(supervisor_channel);
        // The launcher is waited for by pid (see `Running::wait`), not through `Child`.
        let pid = Pid::from_raw(i32::try_from(child.id()).unwrap_or(i32::MAX));
        let io = ChildIo {
            stdin: child.stdin.take(),
            stdout: child.stdout.take(),
            stderr: child.stderr.take(),
        };
        drop(child);
        let text = serde_json::to_vec(&self.config)
            .map_err(|e| refusal(None, format!("encoding the launcher config: {e}")))?;
        let mut pipe = std::fs::File::from(config_write);
        // A launcher that died early closes its end; its status line says why.
        let _ = pipe.write_all(&text);
        Ok((pid, status_read, io))
    }

    /// Forks the launcher from this (single-threaded) process.
    fn fork_launcher(
        &mut self,
        supervisor_channel: Option<OwnedFd>,
    ) -> Result<(Pid, OwnedFd, ChildIo), Refusal> {
        let (status_read, status_write) = nix::unistd::pipe2(OFlag::O_CLOEXEC)
            .map_err(|e| refusal(None, format!("creating the status pipe: {e}")))?;
        match sys::fork_single_threaded() {
            Ok(nix::unistd::ForkResult::Child) => {
                drop(status_read);
                for (target, fd) in self.stdio.iter().enumerate() {
                    if let Some(fd) = fd {
                        let target = i32::try_from(target).unwrap_or(0);
                        if sys::dup2_raw(fd.as_raw_fd(), target).is_err() {
                            sys::exit_now(125);
                        }
                    }
                }
                self.stdio = [None, None, None];
                let relay = self.relay.take();
                child::run_forked(self.config.clone(), status_write, relay, supervisor_channel)
            }
            Ok(nix::unistd::ForkResult::Parent { child }) => {
                drop(supervisor_channel);
                Ok((child, status_read, ChildIo::default()))
            }
            Err(e) => Err(refusal(None, format!("forking the launcher: {e}"))),
        }
    }
}

/// Pipes to the command, when the launch asked for them.
#[derive(Debug, Default)]
struct ChildIo {
    stdin: Option<std::process::ChildStdin>,
    stdout: Option<std::process::ChildStdout>,
    stderr: Option<std::process::ChildStderr>,
}

#[derive(Debug)]
enum StatusEnd {
    Refused(Refusal),
    ExecFailed(ExecFailure),
}

/// Reads the launcher's status until the pipe closes (the command's exec succeeded, or the
/// launcher ended); `on_ready` is told of the ready report as soon as it is read.
fn read_status(
    fd: OwnedFd,
    mut on_ready: impl FnMut(&ReadyReport),
) -> Result<ReadyReport, StatusEnd> {
    let mut ready = None;
    let mut outcome = None;
    let reader = BufReader::new(std::fs::File::from(fd));
    for line in reader.lines() {
        let Ok(line) = line else { break };
        match StatusLine::parse(&line) {
            Some(StatusLine::Ready(report)) => {
                on_ready(&report);
                ready = Some(report);
            }
            Some(StatusLine::Fail { guarantee, cause }) => {
                outcome.get_or_insert(StatusEnd::Refused(refusal(guarantee, cause)));
            }
            Some(StatusLine::ExecFailed { code, cause }) => {
                outcome.get_or_insert(StatusEnd::ExecFailed(ExecFailure { code, cause }));
            }
            None => {
                outcome.get_or_insert(StatusEnd::Refused(refusal(
                    None,
                    format!("malformed launcher status `{line}`"),
                )));
            }
        }
    }
    match (outcome, ready) {
        (Some(end), _) => Err(end),
        (None, Some(ready)) => Ok(ready),
        (None, None) => Err(StatusEnd::Refused(refusal(
            None,
            "the launcher exited without reporting",
        ))),
    }
}

/// A confined command that is running.
#[derive(Debug)]
pub struct Running {
    pid: Pid,
    io: ChildIo,
    ready: Option<ReadyReport>,
    /// Removed when the run is over (dropped after the wait).
    pids_group: Option<crate::cgroup::PidsGroup>,
    /// Swept when the run is over (see [`mounts::sweep_planted`]).
    must_stay_absent: Vec<PathBuf>,
    /// The sandbox's network counters, when the network is off (see [`Running::take_net_watch`]).
    net_watch: Option<crate::net_watch::NetWatch>,
    /// Run when the run is over (see [`mounts::inspect`]).
    inspector: Option<Box<Inspector>>,
    /// What the exec supervisor reports, and (in [`Running::finish_observed`]) the launcher's
    /// end.
    events: Option<mpsc::Receiver<Wake>>,
    events_tx: mpsc::Sender<Wake>,
    /// Reads the exec supervisor's channel, when the spec has command rules.
    reader: Option<std::thread::JoinHandle<()>>,
}

/// What a run's exec supervisor reports, taken out of the run for a thread of its own (see
/// [`Running::take_exec_events`]).
#[derive(Debug)]
pub struct ExecEvents {
    events: mpsc::Receiver<Wake>,
}

impl ExecEvents {
    /// Hands every report to `observer` until the run is over and its supervisor gone.
    pub fn run(self, observer: &mut dyn crate::supervisor::ExecObserver) {
        while let Ok(wake) = self.events.recv() {
            if let Wake::Exec(message) = wake {
                crate::supervisor::record::observe(message, observer);
            }
        }
    }
}

/// What the thread waiting for a run wakes up for.
#[derive(Debug)]
enum Wake {
    /// The launcher was reaped.
    Exited(nix::Result<WaitStatus>),
    /// The exec supervisor reported something.
    Exec(crate::supervisor::record::FromSupervisor),
    /// The launcher's status while the run starts (ignored once it is running).
    Status(StatusWake),
}

/// The launcher's status, read on its own thread while the supervisor may already report.
#[derive(Debug)]
enum StatusWake {
    /// The command is about to exec.
    Ready(ReadyReport),
    /// The status pipe closed: how the start ended.
    Ended(Result<ReadyReport, StatusEnd>),
}

/// How a supervised run's start ended.
enum Startup {
    /// The status pipe closed.
    Ended(Result<ReadyReport, StatusEnd>),
    /// The command's own exec waits for a person's answer, which only the observer of the
    /// running command can give: the run is handed over running, the question first.
    Asking(ReadyReport),
}

impl Running {
    /// Waits for the launcher's status of a supervised run. The status pipe closes only once
    /// the command's exec went through, and the supervisor decides that exec first: a question
    /// about it would wait forever for an observer that exists only after the start.
    fn await_status(&mut self, status_read: OwnedFd) -> Startup {
        let tx = self.events_tx.clone();
        std::thread::spawn(move || {
            let ready = |report: &ReadyReport| {
                let _ = tx.send(Wake::Status(StatusWake::Ready(report.clone())));
            };
            let ended = read_status(status_read, ready);
            let _ = tx.send(Wake::Status(StatusWake::Ended(ended)));
        });
        let Some(events) = &self.events else {
            return Startup::Ended(Err(StatusEnd::Refused(refusal(None, "no event channel"))));
        };
        let mut ready = None;
        let mut held = Vec::new();
        let startup = loop {
            match events.recv() {
                // A question may come before the status line saying the command started (the
                // command's own first exec asks): then it is handed over as soon as that line is
                // in, or nobody would ever show the question.
                Ok(Wake::Status(StatusWake::Ready(report))) => {
                    let asked = held
                        .iter()
                        .any(|m| matches!(m, crate::supervisor::record::FromSupervisor::Ask(..)));
                    if asked {
                        break Startup::Asking(report);
                    }
                    ready = Some(report);
                }
                Ok(Wake::Status(StatusWake::Ended(ended))) => break Startup::Ended(ended),
                Ok(Wake::Exec(ask @ crate::supervisor::record::FromSupervisor::Ask(..))) => {
                    held.push(ask);
                    if let Some(report) = ready.take() {
                        break Startup::Asking(report);
                    }
                }
                Ok(Wake::Exec(decided)) => held.push(decided),
                Ok(Wake::Exited(_)) => {}
                Err(_) => {
                    break Startup::Ended(Err(StatusEnd::Refused(refusal(
                        None,
                        "the launcher's status was lost",
                    ))));
                }
            }
        };
        // What came during the start goes to the observer first (nothing else can come
        // meanwhile for the process that waits for its answer).
        for message in held {
            let _ = self.events_tx.send(Wake::Exec(message));
        }
        startup
    }
}

/// How a run ended, and what bridle found in the writable roots afterwards.
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use]
pub struct Finished {
    /// How the command ended.
    pub outcome: Outcome,
    /// What the command left in repositories that git on the host would run, now moved aside
    /// (report every [`Inspection::messages`] line to the user).
    pub inspection: Inspection,
}

impl Running {
    /// What the launcher reported it enforced.
    pub fn report(&self) -> Option<&ReadyReport> {
        self.ready.as_ref()
    }

    /// The launcher's pid (signal it with SIGTERM to kill the whole tree).
    pub fn launcher_pid(&self) -> u32 {
        u32::try_from(self.pid.as_raw()).unwrap_or(0)
    }

    /// The command's stdin, when [`Launch::command`] had `Stdio::piped()` for it.
    pub fn take_stdin(&mut self) -> Option<std::process::ChildStdin> {
        self.io.stdin.take()
    }

    /// The command's stdout, when piped.
    pub fn take_stdout(&mut self) -> Option<std::process::ChildStdout> {
        self.io.stdout.take()
    }

    /// The command's stderr, when piped.
    pub fn take_stderr(&mut self) -> Option<std::process::ChildStderr> {
        self.io.stderr.take()
    }

    /// The sandbox's count of attempts to reach the network, when the network is off and the
    /// sandbox has its own network namespace. It stays readable after [`Running::wait`].
    pub fn take_net_watch(&mut self) -> Option<crate::net_watch::NetWatch> {
        self.net_watch.take()
    }

    /// A handle that can signal this run from another thread, even after [`Running::wait`]
    /// took it (through a pidfd: never a recycled pid).
    pub fn controller(&self) -> Result<Controller, Refusal> {
        let fd = sys::pidfd_open(self.pid.as_raw())
            .map_err(|e| refusal(None, format!("pidfd_open: {e}")))?;
        Ok(Controller {
            pidfd: std::sync::Arc::new(fd),
        })
    }

    /// Asks the command to terminate (SIGTERM to the command, delivered through the launcher);
    /// follow with [`Running::kill_tree`] after a grace period.
    pub fn terminate_gracefully(&self) {
        let _ = kill(self.pid, Signal::SIGUSR1);
    }

    /// Kills the whole process tree now.
    pub fn kill_tree(&self) {
        let _ = kill(self.pid, Signal::SIGTERM);
    }

    /// Makes SIGTERM and SIGHUP to the calling process kill this run's tree instead of the
    /// process, so that [`Running::wait`] still returns and sweeps (for a process that runs one
    /// sandbox at a time, such as `bridle exec`). One that came while it was held
    /// ([`hold_termination`]) kills the tree now.
    pub fn forward_termination(&self) {
        let _ = sys::forward_termination(self.pid.as_raw());
    }

    /// Hands what the exec supervisor reported to `observer` (denials; questions, which it
    /// answers), waiting up to `wait` for the first report. For callers that keep a run going
    /// between their own steps (the terminal); [`Running::finish_observed`] does this until the
    /// run ends.
    pub fn pump_exec_events(
        &self,
        observer: &mut dyn crate::supervisor::ExecObserver,
        wait: Duration,
    ) {
        let Some(events) = &self.events else { return };
        let mut next = events.recv_timeout(wait);
        while let Ok(wake) = next {
            match wake {
                Wake::Exec(message) => crate::supervisor::record::observe(message, observer),
                // Not sent before `finish_observed` starts its waiter; the status is over.
                Wake::Exited(_) | Wake::Status(_) => {}
            }
            next = events
                .try_recv()
                .map_err(|_| mpsc::RecvTimeoutError::Timeout);
        }
    }

    /// Takes what the exec supervisor reports out of this run, for a thread that handles it
    /// while this one does something else until the run ends (then [`Running::finish`] waits
    /// for the launcher only). `None` when taken already.
    pub fn take_exec_events(&mut self) -> Option<ExecEvents> {
        self.events.take().map(|events| ExecEvents { events })
    }

    /// Like [`Running::finish`], for callers that do not report the inspection themselves: its
    /// findings go to the log as warnings.
    pub fn wait(self, timeout: Option<Duration>) -> Outcome {
        let finished = self.finish(timeout);
        for line in finished.inspection.messages() {
            tracing::warn!("{line}");
        }
        finished.outcome
    }

    /// Waits for the command (and so its whole tree) to end, killing the tree when `timeout`
    /// passes. When this returns, no process of the tree is left, nothing the run must not
    /// leave behind is there ([`Outcome::Stopped`] says what was moved aside), and what the
    /// command left in repositories that would run code on the host has been moved aside
    /// ([`Finished::inspection`] says what).
    pub fn finish(self, timeout: Option<Duration>) -> Finished {
        self.finish_observed(timeout, &mut crate::supervisor::Unobserved)
    }

    /// Like [`Running::finish`]; meanwhile, what the exec supervisor reports goes to
    /// `observer` (on this thread): each denial, and each `ask`, which waits for its answer.
    pub fn finish_observed(
        self,
        timeout: Option<Duration>,
        observer: &mut dyn crate::supervisor::ExecObserver,
    ) -> Finished {
        let Running {
            pid,
            pids_group,
            must_stay_absent,
            inspector,
            events,
            events_tx,
            reader,
            ..
        } = self;
        // With the reports taken elsewhere, the launcher's end comes on a channel of its own.
        let (tx, rx, reader) = match events {
            Some(rx) => (events_tx, rx, reader),
            None => {
                drop(events_tx);
                let (tx, rx) = mpsc::channel();
                (tx, rx, None)
            }
        };
        let waiter = std::thread::spawn(move || {
            // Once the launcher is dead but before it is reaped (its pid cannot be reused
            // yet), signals to this process stop being passed on to that pid.
            while let Err(nix::errno::Errno::EINTR) = nix::sys::wait::waitid(
                nix::sys::wait::Id::Pid(pid),
                nix::sys::wait::WaitPidFlag::WEXITED | nix::sys::wait::WaitPidFlag::WNOWAIT,
            ) {}
            sys::stop_forwarding_to(pid.as_raw());
            let status = loop {
                match waitpid(pid, None) {
                    Err(nix::errno::Errno::EINTR) => continue,
                    other => break other,
                }
            };
            let _ = tx.send(Wake::Exited(status));
        });
        let deadline = timeout.map(|t| std::time::Instant::now() + t);
        let mut timed_out = false;
        let status = loop {
            let wake = match deadline {
                Some(d) if !timed_out => {
                    rx.recv_timeout(d.saturating_duration_since(std::time::Instant::now()))
                }
                _ => rx.recv().map_err(|_| mpsc::RecvTimeoutError::Disconnected),
            };
            match wake {
                Ok(Wake::Exited(status)) => break Some(status),
                // Once the tree is being killed nobody is asked any more.
                Ok(Wake::Exec(crate::supervisor::record::FromSupervisor::Ask(..))) if timed_out => {
                }
                Ok(Wake::Exec(message)) => crate::supervisor::record::observe(message, observer),
                Ok(Wake::Status(_)) => {}
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    timed_out = true;
                    let _ = kill(pid, Signal::SIGTERM);
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => break None,
            }
        };
        let outcome = match (status, timed_out) {
            (_, true) => Some(Outcome::TimedOut),
            (Some(status), false) => Some(exit_outcome(status)),
            (None, false) => None,
        };
        let _ = waiter.join();
        // The channel closes once the sandbox is gone: what it still reported is passed on;
        // a question about a process that no longer exists is answered no.
        if let Some(reader) = reader {
            loop {
                match rx.recv_timeout(Duration::from_millis(10)) {
                    Ok(Wake::Exec(crate::supervisor::record::FromSupervisor::Ask(..))) => {}
                    Ok(Wake::Exec(message)) => {
                        crate::supervisor::record::observe(message, observer);
                    }
                    Ok(Wake::Exited(_) | Wake::Status(_)) => {}
                    Err(_) if reader.is_finished() => break,
                    Err(_) => {}
                }
            }
            let _ = reader.join();
            while let Ok(wake) = rx.try_recv() {
                if let Wake::Exec(
                    message @ crate::supervisor::record::FromSupervisor::Decided(..),
                ) = wake
                {
                    crate::supervisor::record::observe(message, observer);
                }
            }
        }
        drop(pids_group);
        let moved = mounts::sweep_planted(&must_stay_absent);
        let inspection = inspector.map(|i| i.finish()).unwrap_or_default();
        let outcome = match moved.first() {
            Some((path, to)) => Outcome::Stopped(mounts::planted_message(path, to.as_deref())),
            None => outcome.unwrap_or(Outcome::Exited(125)),
        };
        Finished {
            outcome,
            inspection,
        }
    }
}

fn exit_outcome(status: nix::Result<WaitStatus>) -> Outcome {
    match status {
        Ok(WaitStatus::Exited(_, code)) => Outcome::Exited(code),
        Ok(WaitStatus::Signaled(_, sig, _)) => Outcome::Exited(128 + sig as i32),
        _ => Outcome::Exited(125),
    }
}

/// Makes SIGTERM and SIGHUP to the calling process be recorded instead of ending it, until
/// [`Running::forward_termination`] passes them on to a run. Call it before preparing a
/// sandbox (which takes locks and makes placeholders on the host), so that a signal never
/// leaves them behind; check [`termination_requested`] before spawning.
pub fn hold_termination() {
    let _ = sys::hold_termination();
}

/// Like [`hold_termination`], for SIGINT, SIGTERM and SIGHUP: for a process that ends its own
/// work cleanly when asked to stop (`bridle run` cancels its turn), then dies of the signal
/// ([`die_of_forwarded_signal`]).
pub fn hold_interruption() {
    let _ = sys::hold_signals(&[Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP]);
}

/// Sends SIGTERM to every child process of this process: each confined run's launcher, which
/// then kills its whole tree.
pub fn terminate_children() {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return;
    };
    for task in tasks.flatten() {
        let Ok(children) = std::fs::read_to_string(task.path().join("children")) else {
            continue;
        };
        for pid in children
            .split_whitespace()
            .filter_map(|p| p.parse::<i32>().ok())
        {
            terminate_child(pid);
        }
    }
}

/// Sends SIGTERM to `pid` when it is (still) a child of this process: a confined run's
/// launcher, which then kills its whole tree. Pinned by a pidfd, then checked to still be our
/// child: a child reaped meanwhile, whose pid another process reuses, is never signalled.
pub fn terminate_child(pid: i32) {
    let Ok(pidfd) = sys::pidfd_open(pid) else {
        return;
    };
    if crate::supervisor::parent_of(pid).and_then(|p| u32::try_from(p).ok())
        == Some(std::process::id())
    {
        let _ = sys::pidfd_send_signal(std::os::fd::AsFd::as_fd(&pidfd), Signal::SIGTERM as i32);
    }
}

/// Whether a held signal (SIGTERM or SIGHUP, and SIGINT after [`hold_interruption`]) came.
pub fn termination_requested() -> bool {
    sys::termination_requested()
}

/// The name of the first held signal that came (`SIGINT`, ...), if one did: who cancelled.
pub fn termination_signal() -> Option<&'static str> {
    sys::termination_signal().map(nix::sys::signal::Signal::as_str)
}

/// Once a run ended because of a signal [`Running::forward_termination`] passed on, and the run
/// was cleaned up: the calling process dies of that signal, as whoever sent it expects.
pub fn die_of_forwarded_signal() {
    sys::die_of_forwarded_signal();
}

/// Makes the calling process ignore SIGINT and SIGQUIT, which a terminal sends to the whole
/// foreground process group: the confined command gets them directly and decides; bridle must
/// not die of them first and take the tree down. Launchers reset them to the default.
pub fn ignore_terminal_signals() {
    let _ = sys::ignore_signal(Signal::SIGINT);
    let _ = sys::ignore_signal(Signal::SIGQUIT);
}

/// Makes the calling process a child subreaper: orphans of its descendants are reparented to it
/// (so [`kill_orphans`] can find them) instead of to init.
pub fn become_subreaper() {
    let _ = nix::sys::prctl::set_child_subreaper(true);
}

/// Kills and reaps every remaining child of the calling process (a subreaper after
/// [`become_subreaper`]). For a single-purpose process such as `bridle exec` once its run is over.
pub fn kill_orphans() {
    child::kill_descendants();
}

/// Whether the descriptor is a plain file, directory or block device: passing such a
/// descriptor to a confined command would let it change the file's metadata (`fchmod`,
/// `futimens`, `ftruncate`) outside the read-only view. Such stdio should be replaced by a pipe
/// the caller pumps.
pub fn needs_pipe(fd: std::os::fd::BorrowedFd<'_>) -> bool {
    use nix::sys::stat::SFlag;
    match nix::sys::stat::fstat(fd) {
        Ok(st) => {
            let kind = SFlag::from_bits_truncate(st.st_mode & SFlag::S_IFMT.bits());
            kind == SFlag::S_IFREG || kind == SFlag::S_IFDIR || kind == SFlag::S_IFBLK
        }
        Err(_) => false,
    }
}

/// Signals a run from any thread (see [`Running::controller`]).
#[derive(Debug, Clone)]
pub struct Controller {
    pidfd: std::sync::Arc<OwnedFd>,
}

impl Controller {
    /// Asks the command to terminate (SIGTERM); follow with [`Controller::kill_tree`].
    pub fn terminate_gracefully(&self) {
        let _ = sys::pidfd_send_signal(
            std::os::fd::AsFd::as_fd(&*self.pidfd),
            Signal::SIGUSR1 as i32,
        );
    }

    /// Kills the whole process tree now.
    pub fn kill_tree(&self) {
        let _ = sys::pidfd_send_signal(
            std::os::fd::AsFd::as_fd(&*self.pidfd),
            Signal::SIGTERM as i32,
        );
    }
}
