//! The two seams in front of the machine: [`FileSystem`] (what the file tools touch) and
//! [`Spawner`] (where commands and the terminal run). The local implementations go through
//! the Landlock-confined worker and the sandbox launcher; a remote implementation replaces
//! only these, never a tool or the pipeline. [`RecordingFs`] and [`RecordingSpawner`] record
//! every call (for tests of that claim, and of what a tool asked for).

use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use bridle_policy::SandboxSpec;
use bridle_sandbox::ExecObserver;
use bridle_sandbox::confined_fs::{ConfinedFs, FsDenied, HardLinks};

use crate::error::ExecError;
use crate::run::{RunRequest, RunResult, Runner, SandboxRunner};
use crate::terminal::Terminal;

/// The files a call may touch, confined by one spec.
pub trait FileSystem: Send + Sync {
    /// Why this file system cannot serve at all (the confinement could not be set up).
    fn unavailable(&self) -> Option<String> {
        None
    }

    /// Reads at most `limit` bytes of the regular file `path`; also returns its size.
    fn read(&self, path: &Path, limit: usize) -> Result<(Vec<u8>, u64), FsDenied>;

    /// Creates or replaces the regular file `path` (never through a symlink).
    fn write(&self, path: &Path, content: Vec<u8>, links: HardLinks) -> Result<(), FsDenied>;

    /// The entries of directory `path`: `(name, is_dir)`, sorted.
    fn list_dir(&self, path: &Path) -> Result<Vec<(String, bool)>, FsDenied>;

    /// The tree below `base`, at most `max_entries` entries, and whether the walk stopped early.
    fn walk(
        &self,
        base: &Path,
        max_entries: usize,
    ) -> Result<(Vec<(PathBuf, bool)>, bool), FsDenied>;

    /// The same kind of file system confined by `spec` instead (an approved escalation of one
    /// call).
    fn confined_by(&self, spec: &SandboxSpec) -> Result<Box<dyn FileSystem>, String>;
}

/// The local file system, through the Landlock-confined worker, started on first use (a
/// session that never touches a file does not pay for it).
pub struct LocalFs {
    spec: SandboxSpec,
    worker: OnceLock<Result<ConfinedFs, String>>,
}

impl std::fmt::Debug for LocalFs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalFs")
            .field("mode", &self.spec.mode)
            .finish_non_exhaustive()
    }
}

impl LocalFs {
    /// A file system confined by `spec`.
    pub fn new(spec: &SandboxSpec) -> LocalFs {
        LocalFs {
            spec: spec.clone(),
            worker: OnceLock::new(),
        }
    }

    fn worker(&self) -> Result<&ConfinedFs, FsDenied> {
        self.worker
            .get_or_init(|| {
                ConfinedFs::start(&self.spec).map_err(|e| {
                    format!("sandbox unavailable: G-FS-WRITE (file tools need Landlock: {e})")
                })
            })
            .as_ref()
            .map_err(|why| FsDenied::Unavailable(why.clone()))
    }
}

impl FileSystem for LocalFs {
    fn unavailable(&self) -> Option<String> {
        self.worker().err().map(|e| e.to_string())
    }

    fn read(&self, path: &Path, limit: usize) -> Result<(Vec<u8>, u64), FsDenied> {
        self.worker()?.read(path, limit)
    }

    fn write(&self, path: &Path, content: Vec<u8>, links: HardLinks) -> Result<(), FsDenied> {
        self.worker()?.write(path, content, links)
    }

    fn list_dir(&self, path: &Path) -> Result<Vec<(String, bool)>, FsDenied> {
        self.worker()?.list_dir(path)
    }

    fn walk(
        &self,
        base: &Path,
        max_entries: usize,
    ) -> Result<(Vec<(PathBuf, bool)>, bool), FsDenied> {
        self.worker()?.walk(base, max_entries)
    }

    fn confined_by(&self, spec: &SandboxSpec) -> Result<Box<dyn FileSystem>, String> {
        let fs = LocalFs::new(spec);
        // Started now: an escalation that cannot be confined is refused before it runs.
        if let Some(why) = fs.unavailable() {
            return Err(why);
        }
        Ok(Box::new(fs))
    }
}

/// Where commands and the terminal run.
pub trait Spawner: Send + Sync {
    /// Runs one command to completion (or its timeout).
    fn run(&self, request: &RunRequest) -> Result<RunResult, ExecError>;

    /// Like [`Spawner::run`]; what the exec supervisor reports meanwhile (command rules at
    /// every exec) goes to `observer`. The default knows no supervisor.
    fn run_observed(
        &self,
        request: &RunRequest,
        observer: &mut dyn ExecObserver,
    ) -> Result<RunResult, ExecError> {
        let _ = observer;
        self.run(request)
    }

    /// Starts the session's interactive shell confined by `spec`, in `cwd`.
    fn start_terminal(&self, spec: &SandboxSpec, cwd: &Path) -> Result<Terminal, String>;
}

/// The local spawner: the sandbox launcher (the re-executed `bridle` binary), with the
/// session's network proxy when it has one.
#[derive(Debug, Clone)]
pub struct LocalSpawner {
    runner: SandboxRunner,
    launcher: PathBuf,
}

impl LocalSpawner {
    /// A spawner launching through `launcher` with `runner` (which holds the proxy).
    pub fn new(launcher: PathBuf, runner: SandboxRunner) -> LocalSpawner {
        LocalSpawner { runner, launcher }
    }
}

impl Spawner for LocalSpawner {
    fn run(&self, request: &RunRequest) -> Result<RunResult, ExecError> {
        self.runner.run(request)
    }

    fn run_observed(
        &self,
        request: &RunRequest,
        observer: &mut dyn ExecObserver,
    ) -> Result<RunResult, ExecError> {
        self.runner.run_observed(request, observer)
    }

    fn start_terminal(&self, spec: &SandboxSpec, cwd: &Path) -> Result<Terminal, String> {
        let mut terminal = Terminal::start_with_network(
            spec,
            self.launcher.clone(),
            cwd,
            40,
            120,
            self.runner.proxy(),
        )?;
        // Killed with the session's other runs when its turn is cancelled.
        if let Some(pid) = terminal.launcher_pid() {
            terminal.registered = Some(self.runner.register(pid));
        }
        Ok(terminal)
    }
}

/// One call a recording backend saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Recorded {
    /// `read(path)`.
    Read(PathBuf),
    /// `write(path, content)`.
    Write(PathBuf, Vec<u8>),
    /// `list_dir(path)`.
    ListDir(PathBuf),
    /// `walk(base)`.
    Walk(PathBuf),
    /// `confined_by(spec)`, by the spec's mode.
    ConfinedBy(bridle_policy::SandboxMode),
    /// `run(argv)`, with the mode of its spec.
    Run(Vec<String>, bridle_policy::SandboxMode),
    /// `start_terminal(cwd)`.
    StartTerminal(PathBuf),
}

/// A file system in memory that records every call (a stand-in for a remote implementation).
#[derive(Debug, Default)]
pub struct RecordingFs {
    files: Mutex<std::collections::BTreeMap<PathBuf, Vec<u8>>>,
    calls: std::sync::Arc<Mutex<Vec<Recorded>>>,
}

impl RecordingFs {
    /// An empty file system.
    pub fn new() -> RecordingFs {
        RecordingFs::default()
    }

    /// What was called, in order.
    pub fn calls(&self) -> Vec<Recorded> {
        lock(&self.calls).clone()
    }

    /// Puts a file in place.
    pub fn insert(&self, path: &Path, content: &[u8]) {
        lock(&self.files).insert(path.to_path_buf(), content.to_vec());
    }

    /// A file's content.
    pub fn content(&self, path: &Path) -> Option<Vec<u8>> {
        lock(&self.files).get(path).cloned()
    }

    fn record(&self, call: Recorded) {
        lock(&self.calls).push(call);
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl FileSystem for RecordingFs {
    fn read(&self, path: &Path, limit: usize) -> Result<(Vec<u8>, u64), FsDenied> {
        self.record(Recorded::Read(path.to_path_buf()));
        let files = lock(&self.files);
        let bytes = files.get(path).ok_or_else(|| FsDenied::Io {
            path: path.to_path_buf(),
            message: "No such file or directory".into(),
        })?;
        let size = u64::try_from(bytes.len()).unwrap_or(u64::MAX);
        Ok((bytes[..bytes.len().min(limit)].to_vec(), size))
    }

    fn write(&self, path: &Path, content: Vec<u8>, _links: HardLinks) -> Result<(), FsDenied> {
        self.record(Recorded::Write(path.to_path_buf(), content.clone()));
        lock(&self.files).insert(path.to_path_buf(), content);
        Ok(())
    }

    fn list_dir(&self, path: &Path) -> Result<Vec<(String, bool)>, FsDenied> {
        self.record(Recorded::ListDir(path.to_path_buf()));
        let files = lock(&self.files);
        if files.contains_key(path) {
            return Err(FsDenied::Io {
                path: path.to_path_buf(),
                message: "Not a directory".into(),
            });
        }
        Ok(files
            .keys()
            .filter_map(|p| p.strip_prefix(path).ok())
            .filter_map(|rest| rest.components().next())
            .map(|c| (c.as_os_str().to_string_lossy().into_owned(), false))
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect())
    }

    fn walk(
        &self,
        base: &Path,
        max_entries: usize,
    ) -> Result<(Vec<(PathBuf, bool)>, bool), FsDenied> {
        self.record(Recorded::Walk(base.to_path_buf()));
        let files = lock(&self.files);
        let all: Vec<(PathBuf, bool)> = files
            .keys()
            .filter_map(|p| p.strip_prefix(base).ok())
            .map(|p| (p.to_path_buf(), false))
            .collect();
        let stopped = all.len() > max_entries;
        Ok((all.into_iter().take(max_entries).collect(), stopped))
    }

    fn confined_by(&self, spec: &SandboxSpec) -> Result<Box<dyn FileSystem>, String> {
        self.record(Recorded::ConfinedBy(spec.mode));
        // The escalated view shares the files and the record.
        Ok(Box::new(RecordingFs {
            files: Mutex::new(lock(&self.files).clone()),
            calls: std::sync::Arc::clone(&self.calls),
        }))
    }
}

/// A spawner that records every request and answers each run with the exit status it was
/// given, running nothing.
#[derive(Debug)]
pub struct RecordingSpawner {
    calls: Mutex<Vec<Recorded>>,
    exit_code: i32,
}

impl RecordingSpawner {
    /// A spawner whose runs all exit with `exit_code`.
    pub fn new(exit_code: i32) -> RecordingSpawner {
        RecordingSpawner {
            calls: Mutex::new(Vec::new()),
            exit_code,
        }
    }

    /// What was called, in order.
    pub fn calls(&self) -> Vec<Recorded> {
        lock(&self.calls).clone()
    }
}

impl Spawner for RecordingSpawner {
    fn run(&self, request: &RunRequest) -> Result<RunResult, ExecError> {
        lock(&self.calls).push(Recorded::Run(request.argv.clone(), request.spec.mode));
        Ok(RunResult {
            status: crate::run::RunStatus::Exited(self.exit_code),
            stdout: crate::output::Captured::default(),
            stderr: crate::output::Captured::default(),
            inspection: bridle_sandbox::Inspection::default(),
            network: Vec::new(),
            direct_network_attempts: 0,
        })
    }

    fn start_terminal(&self, _spec: &SandboxSpec, cwd: &Path) -> Result<Terminal, String> {
        lock(&self.calls).push(Recorded::StartTerminal(cwd.to_path_buf()));
        Err("the recording spawner starts no terminal".into())
    }
}
