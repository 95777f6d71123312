//! The subprocess manager: confined processes started through the launcher, usable from tokio.
//! Jobs have ids; their output (stdout and stderr interleaved, head and tail kept, the whole
//! stream spilled to a file when it does not fit) can be read while they run and after; `wait`
//! returns only when the whole process tree is gone; `cancel` asks the command to terminate,
//! then kills the tree after a grace period.
//!
//! Every launcher is started from one long-lived thread owned by the manager: a launcher's
//! parent-death signal fires when the thread that started it exits, so starting them from
//! short-lived (for example tokio blocking-pool) threads would kill runs at random. The flip side
//! is deliberate: when the manager is dropped, that thread ends and every run's tree dies.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

use bridle_policy::SandboxSpec;
use bridle_sandbox::{Controller, Outcome, Sandbox, Spawned};
use tokio::sync::{oneshot, watch};

use crate::error::ExecError;
use crate::output::{Captured, Spill, SpillBudget, SpillTarget};

/// A job's id, unique within its manager.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct JobId(pub u64);

impl std::fmt::Display for JobId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "job-{}", self.0)
    }
}

/// Where a job is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobState {
    /// Running.
    Running,
    /// Ended: the exit status (128+N for signal N); the whole tree is gone.
    Exited(i32),
}

/// What to start.
#[derive(Debug, Clone)]
pub struct SpawnRequest {
    /// The command.
    pub argv: Vec<String>,
    /// Where it starts.
    pub cwd: PathBuf,
    /// The spec it runs under.
    pub spec: SandboxSpec,
    /// Bytes for its stdin (closed after).
    pub stdin: Vec<u8>,
    /// Bytes of head and of tail of the output kept in memory.
    pub output_cap: usize,
    /// Directory for the spill file (the session's private temp dir).
    pub spill_dir: PathBuf,
}

/// Output with bounded memory: head, tail, and a spill file once it does not fit (capped like
/// every spill, see [`crate::output`]).
#[derive(Debug)]
struct LiveOutput {
    cap: usize,
    head: Vec<u8>,
    tail: std::collections::VecDeque<u8>,
    total: u64,
    spill: Spill,
}

impl LiveOutput {
    fn push(&mut self, chunk: &[u8]) {
        self.total += u64::try_from(chunk.len()).unwrap_or(0);
        if self.spill.started() {
            self.spill.write(chunk);
        }
        let room = self.cap.saturating_sub(self.head.len());
        let (to_head, rest) = chunk.split_at(room.min(chunk.len()));
        self.head.extend_from_slice(to_head);
        if !rest.is_empty() {
            if !self.spill.started() {
                let mut seen: Vec<u8> = self.head.clone();
                seen.extend(self.tail.iter());
                self.spill.write(&seen);
                self.spill.write(rest);
            }
            self.tail.extend(rest);
            if self.tail.len() > self.cap {
                let excess = self.tail.len() - self.cap;
                self.tail.drain(..excess);
            }
        }
    }

    fn render(&self) -> String {
        let (spill, spilled, cut) = self.spill.state();
        Captured {
            head: self.head.clone(),
            tail: self.tail.iter().copied().collect(),
            total: self.total,
            spill,
            spilled,
            cut,
        }
        .render()
    }
}

struct JobEntry {
    state: watch::Receiver<JobState>,
    output: Arc<Mutex<LiveOutput>>,
    controller: Controller,
}

type Reply = oneshot::Sender<Result<JobId, ExecError>>;

/// Starts and tracks confined processes.
pub struct ProcessManager {
    spawner: Mutex<mpsc::Sender<(SpawnRequest, Reply)>>,
    jobs: Arc<Mutex<HashMap<JobId, JobEntry>>>,
}

impl std::fmt::Debug for ProcessManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProcessManager").finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl ProcessManager {
    /// A manager whose runs re-execute `launcher` (the bridle binary) as the sandbox launcher.
    pub fn new(launcher: PathBuf) -> ProcessManager {
        let jobs: Arc<Mutex<HashMap<JobId, JobEntry>>> = Arc::new(Mutex::new(HashMap::new()));
        let (tx, rx) = mpsc::channel::<(SpawnRequest, Reply)>();
        let registry = jobs.clone();
        // The manager's jobs share one spill budget (one session).
        let spills = Arc::new(SpillBudget::new());
        std::thread::Builder::new()
            .name("bridle-spawner".into())
            .spawn(move || {
                let next = AtomicU64::new(1);
                for (request, reply) in rx {
                    let id = JobId(next.fetch_add(1, Ordering::Relaxed));
                    let result = start(&launcher, request, id, &registry, &spills).map(|()| id);
                    let _ = reply.send(result);
                }
                // The manager is gone: every launcher started here now gets its parent-death
                // signal when this thread exits.
            })
            .ok();
        ProcessManager {
            spawner: Mutex::new(tx),
            jobs,
        }
    }

    /// Starts a job; returns once the command runs (or why it cannot).
    pub async fn spawn(&self, request: SpawnRequest) -> Result<JobId, ExecError> {
        let (reply, answer) = oneshot::channel();
        lock(&self.spawner)
            .send((request, reply))
            .map_err(|_| ExecError::Spawn {
                command: request_name(),
                reason: "the spawner thread is gone".into(),
            })?;
        answer.await.map_err(|_| ExecError::Spawn {
            command: request_name(),
            reason: "the spawner thread is gone".into(),
        })?
    }

    /// The job's output so far (head and tail when long).
    pub fn output(&self, id: JobId) -> Option<String> {
        let jobs = lock(&self.jobs);
        jobs.get(&id).map(|j| lock(&j.output).render())
    }

    /// The job's current state.
    pub fn state(&self, id: JobId) -> Option<JobState> {
        lock(&self.jobs).get(&id).map(|j| j.state.borrow().clone())
    }

    /// Every job and its state.
    pub fn jobs(&self) -> Vec<(JobId, JobState)> {
        let mut all: Vec<_> = lock(&self.jobs)
            .iter()
            .map(|(id, j)| (*id, j.state.borrow().clone()))
            .collect();
        all.sort_by_key(|(id, _)| *id);
        all
    }

    /// Waits until the job ended and its whole process tree is gone.
    pub async fn wait(&self, id: JobId) -> Option<JobState> {
        let mut state = lock(&self.jobs).get(&id)?.state.clone();
        let ended = state
            .wait_for(|s| *s != JobState::Running)
            .await
            .ok()?
            .clone();
        Some(ended)
    }

    /// Asks the job to terminate (SIGTERM to the command), kills the whole tree if it has not
    /// ended after `grace`, and waits until the tree is gone.
    pub async fn cancel(&self, id: JobId, grace: Duration) -> Option<JobState> {
        let controller = lock(&self.jobs).get(&id)?.controller.clone();
        controller.terminate_gracefully();
        if let Ok(state) = tokio::time::timeout(grace, self.wait(id)).await {
            return state;
        }
        controller.kill_tree();
        self.wait(id).await
    }
}

fn request_name() -> String {
    "a job".into()
}

/// On the spawner thread: launch, wire output and input, register, start the waiter.
fn start(
    launcher: &std::path::Path,
    request: SpawnRequest,
    id: JobId,
    registry: &Arc<Mutex<HashMap<JobId, JobEntry>>>,
    spills: &Arc<SpillBudget>,
) -> Result<(), ExecError> {
    let shown = request.argv.join(" ");
    let refused = |reason: String| ExecError::Spawn {
        command: shown.clone(),
        reason,
    };
    let mut sandbox = Sandbox::prepare(
        request.spec.clone(),
        &bridle_sandbox::probe::quick(),
        launcher.to_path_buf(),
    )
    .map_err(|r| refused(r.to_string()))?;
    let mut launch = sandbox.launch(request.argv.clone(), &request.cwd);
    launch
        .command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let output = Arc::new(Mutex::new(LiveOutput {
        cap: request.output_cap,
        head: Vec::new(),
        tail: Default::default(),
        total: 0,
        spill: Spill::new(SpillTarget::new(
            &request.spill_dir,
            format!("{id}.out"),
            &request.spec.limits,
            spills.clone(),
        )),
    }));
    let (state_tx, state_rx) = watch::channel(JobState::Running);
    let mut running = match sandbox.spawn(launch).map_err(|r| refused(r.to_string()))? {
        Spawned::Running(r) => r,
        Spawned::ExecFailed(f) => {
            return Err(ExecError::Spawn {
                command: shown,
                reason: f.cause,
            });
        }
    };
    let controller = match running.controller() {
        Ok(controller) => controller,
        Err(r) => {
            // Never left running unwatched: the tree is killed and waited for (and swept).
            running.kill_tree();
            if let Outcome::Stopped(why) = running.wait(None) {
                tracing::warn!("{why}");
            }
            return Err(refused(r.to_string()));
        }
    };
    let readers: Vec<_> = [
        running
            .take_stdout()
            .map(|s| Box::new(s) as Box<dyn Read + Send>),
        running
            .take_stderr()
            .map(|s| Box::new(s) as Box<dyn Read + Send>),
    ]
    .into_iter()
    .flatten()
    .map(|mut stream| {
        let output = output.clone();
        std::thread::spawn(move || {
            let mut buf = vec![0u8; 64 * 1024];
            while let Ok(n) = stream.read(&mut buf) {
                if n == 0 {
                    break;
                }
                lock(&output).push(&buf[..n]);
            }
        })
    })
    .collect();
    if let Some(mut stdin) = running.take_stdin() {
        let bytes = request.stdin.clone();
        std::thread::spawn(move || {
            let _ = stdin.write_all(&bytes);
        });
    }
    let job_output = output.clone();
    lock(registry).insert(
        id,
        JobEntry {
            state: state_rx,
            output,
            controller,
        },
    );
    std::thread::spawn(move || {
        let finished = running.finish(None);
        for reader in readers {
            let _ = reader.join();
        }
        // What bridle moved aside is part of what the job's reader sees, after its output.
        let note = crate::bash_tool::inspection_note(&finished.inspection);
        if !note.is_empty() {
            lock(&job_output).push(note.as_bytes());
        }
        let outcome = finished.outcome;
        drop(sandbox);
        if let Outcome::Stopped(why) = &outcome {
            tracing::warn!("{why}");
        }
        let code = outcome.code();
        let _ = state_tx.send(JobState::Exited(code));
    });
    Ok(())
}
