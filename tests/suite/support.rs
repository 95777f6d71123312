//! Harness: a throwaway home and workspace, and the real binary.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use tempfile::TempDir;

/// A temporary home directory with a workspace inside it.
pub struct Env {
    _root: TempDir,
    pub home: PathBuf,
    pub workspace: PathBuf,
}

impl Env {
    pub fn new() -> Env {
        let root = tempfile::tempdir().expect("temp dir");
        let home = root.path().join("home");
        let workspace = home.join("project");
        std::fs::create_dir_all(&workspace).expect("create workspace");
        let workspace = std::fs::canonicalize(&workspace).expect("canonical workspace");
        let home = std::fs::canonicalize(&home).expect("canonical home");
        Env {
            _root: root,
            home,
            workspace,
        }
    }

    /// `bridle` with this home, run inside the workspace, with a minimal environment.
    pub fn bridle(&self) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_bridle"));
        cmd.env_clear()
            .env("HOME", &self.home)
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("LANG", "C.UTF-8")
            .current_dir(&self.workspace);
        cmd
    }

    pub fn write(&self, relative: &str, content: impl AsRef<[u8]>) -> PathBuf {
        let path = self.workspace.join(relative);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).expect("create parent");
        }
        std::fs::write(&path, content).expect("write file");
        path
    }
}

/// The result of one run, with its wall time.
pub struct Run {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    pub elapsed: Duration,
}

pub fn run(cmd: &mut Command) -> Run {
    let start = Instant::now();
    let Output {
        status,
        stdout,
        stderr,
    } = cmd.output().expect("spawn bridle");
    Run {
        code: status.code(),
        stdout: String::from_utf8_lossy(&stdout).into_owned(),
        stderr: String::from_utf8_lossy(&stderr).into_owned(),
        elapsed: start.elapsed(),
    }
}

impl Run {
    #[track_caller]
    pub fn assert_code(&self, code: i32) -> &Run {
        assert_eq!(
            self.code,
            Some(code),
            "expected exit {code}\n--- stdout\n{}\n--- stderr\n{}",
            self.stdout,
            self.stderr
        );
        self
    }
}

pub fn path_str(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}
