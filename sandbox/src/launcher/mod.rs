//! Launching a confined command: the parent side ([`Sandbox`], [`Launch`], [`Running`]), the
//! wire protocol, and the launcher itself ([`launcher_main`]).
//!
//! One code path for every spawn: `bridle exec`, the one-shot bash tool, the PTY terminal and
//! the subprocess manager all build a [`Launch`] and spawn it; only stdio differs.

mod asking;
mod background;
mod child;
mod command;
mod id_map;
mod init;
pub mod protocol;
mod running;
mod termination;
mod wait;

use std::io::Write;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::mpsc;

use bridle_policy::{Guarantee, SandboxSpec};
use nix::fcntl::OFlag;
use nix::sys::wait::waitpid;
use nix::unistd::{Pid, getegid, geteuid, getpid};

pub use background::Background;
pub use child::launcher_main;
use protocol::{CONFIG_FD, LaunchConfig, RELAY_FD, STATUS_FD, SUPERVISOR_FD};
use running::{ChildIo, Startup, StatusEnd, Wake, read_status};
pub use running::{ExecEvents, Finished, Running};
pub use termination::{
    Controller, become_subreaper, die_of_forwarded_signal, hold_interruption, hold_termination,
    ignore_terminal_signals, kill_orphans, needs_pipe, terminate_child, terminate_children,
    termination_requested, termination_signal,
};

use crate::assess::{Assessment, assess};
use crate::mounts::{self, Inspector, MountPlan, Placeholders};
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
            new_session: true,
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
        home_in_tmp: None,
        cache_overlays: Vec::new(),
        pins: Vec::new(),
        pins_may_vanish: Vec::new(),
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
    /// Why: the exec supervisor's record of its denial where it denied the exec (the rule),
    /// or the error the exec failed with.
    pub cause: String,
    /// The exec supervisor's records of the command's own exec, where it denied it.
    pub denied: Vec<crate::supervisor::ExecRecord>,
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
        // The session is made before the exec of the launcher (it needs the pty as stdin).
        self.config.new_session = false;
        self
    }

    /// Leaves the command in the caller's session, with the caller's controlling terminal:
    /// only for a person's own command at their terminal (`bridle exec`), which gets job
    /// control and `/dev/tty` there. Without this (or [`Launch::with_controlling_terminal`])
    /// the launcher starts a new session without a controlling terminal, so `/dev/tty` fails
    /// (`ENXIO`) and nothing a command writes or sets there (a title, `stty`, OSC 52) reaches
    /// the caller's terminal: what an agent runs only has the stdio it was given.
    pub fn keeping_terminal(mut self) -> Launch {
        self.config.new_session = false;
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
                // The launcher is in the sandbox's network namespace by now. Under an
                // allow-list the counters see only what bypassed the relay (which is loopback).
                if self.config.mechanisms.net_ns
                    && self.config.spec.network != bridle_policy::Network::On
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
