//! Running one command to completion: the interface ([`Runner`]) and the local implementation
//! ([`SandboxRunner`]) that launches through the sandbox launcher with piped stdio.

use std::io::Write;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use bridle_policy::SandboxSpec;
use bridle_sandbox::{ExecObserver, Inspection, Outcome, Refusal, Sandbox, Spawned};

use crate::error::ExecError;
use crate::output::{Captured, SpillBudget, SpillTarget, capture};

/// One command to run.
#[derive(Debug, Clone)]
pub struct RunRequest {
    /// The command.
    pub argv: Vec<String>,
    /// Where it starts.
    pub cwd: PathBuf,
    /// The spec it runs under.
    pub spec: SandboxSpec,
    /// Wall-clock limit; the whole tree is killed when it passes.
    pub timeout: Option<Duration>,
    /// Bytes for stdin (closed after).
    pub stdin: Vec<u8>,
    /// Bytes of head and of tail kept per stream.
    pub output_cap: usize,
    /// Directory for spill files (the session's private temp dir); each holds at most the
    /// spec's `limits.spill_size`, and a session's together at most
    /// [`bridle_policy::SESSION_SPILL_MULTIPLE`] times that.
    pub spill_dir: PathBuf,
}

/// How a command ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunStatus {
    /// It exited (128+N when killed by signal N).
    Exited(i32),
    /// The timeout passed; the tree was killed.
    TimedOut,
    /// Confined, but the program could not be executed (126/127).
    NotExecuted {
        /// 126 or 127.
        code: i32,
        /// Why.
        cause: String,
    },
    /// The sandbox could not be established; nothing ran.
    Refused(Refusal),
    /// bridle stopped the run: it left something that must not exist (moved aside; the
    /// message says what and where).
    Stopped(String),
}

/// What a run produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunResult {
    /// How it ended.
    pub status: RunStatus,
    /// Captured stdout.
    pub stdout: Captured,
    /// Captured stderr.
    pub stderr: Captured,
    /// What the command left in repositories that git on the host would run, which bridle
    /// moved aside when the run ended.
    pub inspection: Inspection,
    /// What the network proxy decided for the command's connections (network `allow-list`).
    pub network: Vec<crate::net::NetDecision>,
    /// How many times the kernel saw the command try to reach the network directly (network
    /// off, or around the allow-list's proxy); 0 when it did not or could not count.
    pub direct_network_attempts: u64,
}

/// Runs commands. The local implementation is [`SandboxRunner`]; a remote one would implement
/// the same trait without the tools changing.
pub trait Runner: Send + Sync {
    /// Runs `request` to completion (or its timeout).
    fn run(&self, request: &RunRequest) -> Result<RunResult, ExecError>;

    /// Like [`Runner::run`]; what the exec supervisor reports meanwhile (command rules at
    /// every exec) goes to `observer`. The default knows no supervisor.
    fn run_observed(
        &self,
        request: &RunRequest,
        observer: &mut dyn ExecObserver,
    ) -> Result<RunResult, ExecError> {
        let _ = observer;
        self.run(request)
    }
}

/// Runs commands through bridle's sandbox launcher (the re-executed `bridle` binary), so any
/// thread of any process may call it. One runner serves one session: its runs share the
/// session's spill budget.
#[derive(Debug, Clone)]
pub struct SandboxRunner {
    launcher: PathBuf,
    spills: Arc<SpillBudget>,
    /// The session's network proxy, for specs with network `allow-list`.
    proxy: Option<std::sync::Arc<crate::net::NetProxy>>,
    /// The launchers of this runner's runs in progress (see [`SandboxRunner::terminate_running`]).
    running: Arc<std::sync::Mutex<Vec<u32>>>,
    /// Whether the session's running turn was cancelled (see [`SandboxRunner::cancel_with`]).
    cancelled: Arc<std::sync::OnceLock<CancelCheck>>,
}

/// Says whether the turn that runs commands was cancelled.
#[derive(Clone)]
pub struct CancelCheck(pub Arc<dyn Fn() -> bool + Send + Sync>);

impl std::fmt::Debug for CancelCheck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CancelCheck")
    }
}

impl SandboxRunner {
    /// A runner that re-executes `launcher` (the bridle binary) as the sandbox launcher.
    pub fn new(launcher: PathBuf) -> SandboxRunner {
        SandboxRunner {
            launcher,
            spills: Arc::new(SpillBudget::new()),
            proxy: None,
            running: Arc::default(),
            cancelled: Arc::default(),
        }
    }

    /// Has this runner (and its clones) ask `check` whether the session's running turn was
    /// cancelled, each time a run is listed: a cancel that came while the run was being
    /// started (before [`SandboxRunner::terminate_running`] could see it) still kills it.
    /// Set once; later calls change nothing.
    pub fn cancel_with(&self, check: CancelCheck) {
        let _ = self.cancelled.set(check);
    }

    fn turn_cancelled(&self) -> bool {
        self.cancelled.get().is_some_and(|c| (c.0)())
    }

    /// Lists the launcher `pid` among this runner's runs in progress while the guard lives.
    /// When the turn was cancelled already, the run's tree is killed at once.
    pub fn register(&self, pid: u32) -> RunningGuard {
        if let Ok(mut l) = self.running.lock() {
            l.push(pid);
        }
        // Listed first, asked second: a cancel sets its flag before it kills what is listed,
        // so either it sees this run or this check sees the flag.
        if self.turn_cancelled()
            && let Ok(pid) = i32::try_from(pid)
        {
            bridle_sandbox::launcher::terminate_child(pid);
        }
        RunningGuard {
            list: Arc::clone(&self.running),
            pid,
        }
    }

    /// Kills the process trees of this runner's runs in progress (a cancelled turn of its
    /// session), and no other run of the process: another session's runs go on.
    pub fn terminate_running(&self) {
        let pids = self.running.lock().map(|r| r.clone()).unwrap_or_default();
        for pid in pids.into_iter().filter_map(|p| i32::try_from(p).ok()) {
            bridle_sandbox::launcher::terminate_child(pid);
        }
    }

    /// The session's network proxy, when it has one.
    pub fn proxy(&self) -> Option<&crate::net::NetProxy> {
        self.proxy.as_deref()
    }

    /// The same runner, connecting `allow-list` commands through `proxy` (without one they
    /// are refused).
    pub fn with_proxy(mut self, proxy: std::sync::Arc<crate::net::NetProxy>) -> SandboxRunner {
        self.proxy = Some(proxy);
        self
    }
}

/// A launcher listed in its runner's runs in progress until this is dropped (the run is over,
/// the terminal closed).
#[derive(Debug)]
pub struct RunningGuard {
    list: Arc<std::sync::Mutex<Vec<u32>>>,
    pid: u32,
}

impl Drop for RunningGuard {
    fn drop(&mut self) {
        if let Ok(mut l) = self.list.lock() {
            l.retain(|p| *p != self.pid);
        }
    }
}

static SPILL_SERIAL: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

impl Runner for SandboxRunner {
    fn run(&self, request: &RunRequest) -> Result<RunResult, ExecError> {
        self.run_observed(request, &mut bridle_sandbox::supervisor::Unobserved)
    }

    fn run_observed(
        &self,
        request: &RunRequest,
        observer: &mut dyn ExecObserver,
    ) -> Result<RunResult, ExecError> {
        let shown = request.argv.join(" ");
        let refused = |r: Refusal| RunResult {
            status: RunStatus::Refused(r),
            stdout: Captured::default(),
            stderr: Captured::default(),
            inspection: Inspection::default(),
            network: Vec::new(),
            direct_network_attempts: 0,
        };
        let mut sandbox = match Sandbox::prepare(
            request.spec.clone(),
            &bridle_sandbox::probe::quick(),
            self.launcher.clone(),
        ) {
            Ok(s) => s,
            Err(r) => return Ok(refused(r)),
        };
        let mut launch = sandbox.launch(request.argv.clone(), &request.cwd);
        launch
            .command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let proxy = self.proxy.as_deref();
        let (launch, relay) = match crate::net::prepare_launch(launch, request.spec.network, proxy)
        {
            Ok(pair) => pair,
            Err(r) => return Ok(refused(r)),
        };
        // This process was asked to stop (a held Ctrl-C or SIGTERM): start nothing new.
        if bridle_sandbox::launcher::termination_requested() {
            return Ok(refused(Refusal {
                guarantee: None,
                cause: "cancelled: bridle was asked to stop".to_owned(),
            }));
        }
        if self.turn_cancelled() {
            return Ok(refused(Refusal {
                guarantee: None,
                cause: "cancelled: the turn was cancelled".to_owned(),
            }));
        }
        let mut running = match sandbox.spawn(launch) {
            Ok(Spawned::Running(r)) => r,
            Ok(Spawned::ExecFailed(f)) => {
                // The supervisor's denial of the command's own exec is recorded like any.
                for record in &f.denied {
                    observer.decided(record);
                }
                let mut result = refused(Refusal {
                    guarantee: None,
                    cause: String::new(),
                });
                result.status = RunStatus::NotExecuted {
                    code: f.code,
                    cause: f.cause,
                };
                return Ok(result);
            }
            Err(r) => return Ok(refused(r)),
        };
        let _registered = self.register(running.launcher_pid());
        let mut net_watch = running.take_net_watch();
        let attachment = match crate::net::attach_launch(proxy, relay) {
            Ok(attachment) => attachment,
            Err(r) => {
                running.kill_tree();
                let _ = running.wait(None);
                return Ok(refused(r));
            }
        };
        let serial = SPILL_SERIAL.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let stamp = format!("{}-{serial}", std::process::id());
        let cap = request.output_cap;
        let readers: Vec<_> = [
            (
                running
                    .take_stdout()
                    .map(|s| Box::new(s) as Box<dyn std::io::Read + Send>),
                "stdout",
            ),
            (
                running
                    .take_stderr()
                    .map(|s| Box::new(s) as Box<dyn std::io::Read + Send>),
                "stderr",
            ),
        ]
        .into_iter()
        .map(|(stream, name)| {
            let spill = SpillTarget::new(
                &request.spill_dir,
                format!("bash-{stamp}.{name}"),
                &request.spec.limits,
                self.spills.clone(),
            );
            let shown = shown.clone();
            std::thread::spawn(move || match stream {
                Some(s) => capture(s, cap, spill, &shown),
                None => Ok(Captured::default()),
            })
        })
        .collect();
        if let Some(mut stdin) = running.take_stdin() {
            // A command that does not read its input closes the pipe early: not an error.
            if let Err(source) = stdin.write_all(&request.stdin)
                && source.kind() != std::io::ErrorKind::BrokenPipe
            {
                running.kill_tree();
                if let Outcome::Stopped(why) = running.wait(None) {
                    tracing::warn!("{why}");
                }
                return Err(ExecError::WriteInput {
                    command: shown,
                    source,
                });
            }
        }
        let finished = running.finish_observed(request.timeout, observer);
        let status = match finished.outcome {
            Outcome::Exited(code) => RunStatus::Exited(code),
            Outcome::TimedOut => RunStatus::TimedOut,
            Outcome::Stopped(why) => RunStatus::Stopped(why),
        };
        let network = attachment
            .map(|a| a.finish(std::time::Duration::from_secs(2)))
            .unwrap_or_default();
        let direct_network_attempts = net_watch
            .as_mut()
            .and_then(bridle_sandbox::net_watch::NetWatch::attempts)
            .unwrap_or(0);
        let mut captured = Vec::new();
        for reader in readers {
            let result = reader.join().map_err(|_| ExecError::ReadOutput {
                command: shown.clone(),
                source: std::io::Error::other("the output reader panicked"),
            })?;
            captured.push(result?);
        }
        let stderr = captured.pop().unwrap_or_default();
        let stdout = captured.pop().unwrap_or_default();
        Ok(RunResult {
            status,
            stdout,
            stderr,
            inspection: finished.inspection,
            network,
            direct_network_attempts,
        })
    }
}
