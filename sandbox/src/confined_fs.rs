//! File operations for the file tools, enforced by the kernel with the session's spec.
//!
//! Every operation runs on one dedicated worker thread that has restricted itself with the same
//! Landlock ruleset the launcher gives commands (readable roots read-only, writable roots
//! writable). Paths are opened with `openat2`: writes relative to their writable root with
//! `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS`, so a directory swapped for a
//! symlink between a check and the write makes the write fail instead of redirecting it; reads
//! with `RESOLVE_NO_MAGICLINKS`, and the file actually opened (read back from `/proc/self/fd`) is
//! refused when it lies in a masked path. Policy decisions (protected paths, rules) are the
//! caller's; this module is the kernel-enforced floor under them.

use std::io::{Read, Write};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::{Component, Path, PathBuf};
use std::sync::mpsc;

use bridle_policy::SandboxSpec;
use nix::fcntl::{OFlag, OpenHow, ResolveFlag, openat2};
use nix::sys::stat::Mode;

use crate::landlock_rules::{LandlockRequest, restrict_current_thread};

type Job = Box<dyn FnOnce() + Send>;

/// Why a file operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FsDenied {
    /// The path is outside every writable root (writes).
    #[error("`{0}` is outside the writable roots")]
    OutsideWritableRoots(PathBuf),
    /// The path is in a masked path.
    #[error("`{0}` is in a masked path")]
    Masked(PathBuf),
    /// Resolution met a symlink where none is allowed, or left the root.
    #[error(
        "`{0}` goes through a symlink or leaves its root; file tools do not follow symlinks when writing"
    )]
    Symlink(PathBuf),
    /// The kernel (Landlock) refused.
    #[error("`{0}`: denied by the sandbox (Landlock)")]
    Landlock(PathBuf),
    /// Any other OS error.
    #[error("`{path}`: {message}")]
    Io {
        /// The path.
        path: PathBuf,
        /// The OS error text.
        message: String,
    },
    /// The worker is gone.
    #[error("the confined file worker is not running")]
    WorkerGone,
}

fn io_denied(path: &Path, err: nix::errno::Errno) -> FsDenied {
    match err {
        nix::errno::Errno::ELOOP | nix::errno::Errno::EXDEV => {
            FsDenied::Symlink(path.to_path_buf())
        }
        nix::errno::Errno::EACCES => FsDenied::Landlock(path.to_path_buf()),
        other => FsDenied::Io {
            path: path.to_path_buf(),
            message: std::io::Error::from(other).to_string(),
        },
    }
}

/// A worker thread confined by the spec's Landlock rules.
#[derive(Debug)]
pub struct ConfinedFs {
    jobs: mpsc::Sender<Job>,
    /// danger-full-access: no roots, no Landlock.
    unconfined: bool,
    writable: Vec<PathBuf>,
    masked: Vec<PathBuf>,
}

impl ConfinedFs {
    /// Starts the worker and restricts it. Fails (closed) when Landlock cannot be applied fully.
    pub fn start(spec: &SandboxSpec) -> Result<ConfinedFs, crate::SandboxError> {
        let (jobs, rx) = mpsc::channel::<Job>();
        let (ready_tx, ready_rx) = mpsc::channel();
        let readable = spec.readable_roots.clone();
        let writable: Vec<PathBuf> = spec
            .writable_roots
            .iter()
            .filter(|p| p.as_path() != Path::new("/dev/null"))
            .cloned()
            .collect();
        let landlock_writable = writable.clone();
        let unconfined = spec.mode == bridle_policy::SandboxMode::DangerFullAccess;
        let masked_for_worker = spec.masked_paths.clone();
        std::thread::Builder::new()
            .name("bridle-confined-fs".into())
            .spawn(move || {
                let request = LandlockRequest {
                    readable: &readable,
                    writable: &landlock_writable,
                    deny_tcp: false,
                    masked: &masked_for_worker,
                };
                // danger-full-access confines nothing: the worker stays unrestricted.
                let outcome = if unconfined {
                    Ok(())
                } else {
                    restrict_current_thread(&request).map(drop)
                };
                let ok = outcome.is_ok();
                let _ = ready_tx.send(outcome);
                if ok {
                    for job in rx {
                        job();
                    }
                }
            })
            .map_err(|e| crate::SandboxError::Syscall {
                call: "spawning the confined file worker".into(),
                source: e,
            })?;
        ready_rx
            .recv()
            .map_err(|_| crate::SandboxError::Landlock {
                stage: "starting the confined file worker".into(),
                message: "the worker exited".into(),
            })??;
        Ok(ConfinedFs {
            jobs,
            unconfined,
            writable,
            masked: spec.masked_paths.clone(),
        })
    }

    fn run<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> Result<T, FsDenied> + Send + 'static,
    ) -> Result<T, FsDenied> {
        let (tx, rx) = mpsc::channel();
        self.jobs
            .send(Box::new(move || {
                let _ = tx.send(f());
            }))
            .map_err(|_| FsDenied::WorkerGone)?;
        // The worker usually answers within tens of microseconds: poll briefly before sleeping,
        // which saves a wake-up (a pair of context switches) per call.
        for _ in 0..2000 {
            match rx.try_recv() {
                Ok(result) => return result,
                Err(mpsc::TryRecvError::Empty) => std::hint::spin_loop(),
                Err(mpsc::TryRecvError::Disconnected) => return Err(FsDenied::WorkerGone),
            }
        }
        rx.recv().map_err(|_| FsDenied::WorkerGone)?
    }

    fn root_of(&self, path: &Path) -> Result<(PathBuf, PathBuf), FsDenied> {
        let root = self
            .writable
            .iter()
            .filter(|r| path.starts_with(r))
            .max_by_key(|r| r.as_os_str().len())
            .ok_or_else(|| FsDenied::OutsideWritableRoots(path.to_path_buf()))?;
        let relative = path.strip_prefix(root).unwrap_or(path).to_path_buf();
        if relative
            .components()
            .any(|c| !matches!(c, Component::Normal(_)))
        {
            return Err(FsDenied::Symlink(path.to_path_buf()));
        }
        Ok((root.clone(), relative))
    }

    fn check_masked(masked: &[PathBuf], real: &Path) -> Result<(), FsDenied> {
        if masked.iter().any(|m| real.starts_with(m)) {
            Err(FsDenied::Masked(real.to_path_buf()))
        } else {
            Ok(())
        }
    }

    /// Writes `content` to `path` (absolute), creating missing parent directories below its
    /// writable root. No symlink is followed anywhere below the root.
    pub fn write(&self, path: &Path, content: Vec<u8>) -> Result<(), FsDenied> {
        if self.unconfined {
            let shown = path.to_path_buf();
            return self.run(move || {
                let io = |e: std::io::Error| FsDenied::Io {
                    path: shown.clone(),
                    message: e.to_string(),
                };
                if let Some(parent) = shown.parent() {
                    std::fs::create_dir_all(parent).map_err(io)?;
                }
                std::fs::write(&shown, &content).map_err(io)
            });
        }
        let (root, relative) = self.root_of(path)?;
        let shown = path.to_path_buf();
        self.run(move || {
            let strict = ResolveFlag::RESOLVE_BENEATH
                | ResolveFlag::RESOLVE_NO_SYMLINKS
                | ResolveFlag::RESOLVE_NO_MAGICLINKS;
            let root_fd = openat2(
                nix::fcntl::AT_FDCWD,
                &root,
                OpenHow::new()
                    .flags(OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC)
                    .resolve(ResolveFlag::RESOLVE_NO_SYMLINKS),
            )
            .map_err(|e| io_denied(&shown, e))?;
            let mut dir: OwnedFd = root_fd;
            let parts: Vec<_> = relative.components().collect();
            let Some((last, parents)) = parts.split_last() else {
                return Err(FsDenied::Io {
                    path: shown,
                    message: "is a writable root, not a file".into(),
                });
            };
            for part in parents {
                let name = Path::new(part.as_os_str());
                match nix::sys::stat::mkdirat(dir.as_fd(), name, Mode::from_bits_truncate(0o755)) {
                    Ok(()) | Err(nix::errno::Errno::EEXIST) => {}
                    Err(e) => return Err(io_denied(&shown, e)),
                }
                dir = openat2(
                    dir.as_fd(),
                    name,
                    OpenHow::new()
                        .flags(OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC)
                        .resolve(strict),
                )
                .map_err(|e| io_denied(&shown, e))?;
            }
            let how = OpenHow::new()
                .flags(OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_CLOEXEC | OFlag::O_NOFOLLOW)
                .mode(Mode::from_bits_truncate(0o644))
                .resolve(strict);
            let fd = openat2(dir.as_fd(), Path::new(last.as_os_str()), how)
                .map_err(|e| io_denied(&shown, e))?;
            // Overwrite, then cut to length, rather than O_TRUNC: ext4 flushes a file truncated
            // to zero and rewritten at close (auto_da_alloc), which costs a disk round trip.
            let mut file = std::fs::File::from(fd);
            let len = u64::try_from(content.len()).unwrap_or(u64::MAX);
            file.write_all(&content)
                .and_then(|()| file.set_len(len))
                .map_err(|e| FsDenied::Io {
                    path: shown.clone(),
                    message: e.to_string(),
                })?;
            Ok(())
        })
    }

    /// Reads at most `limit` bytes of `path`; returns the bytes and the file's size. Refuses a
    /// file that turns out (after resolution) to lie in a masked path.
    pub fn read(&self, path: &Path, limit: usize) -> Result<(Vec<u8>, u64), FsDenied> {
        let shown = path.to_path_buf();
        let masked = self.masked.clone();
        Self::check_masked(&masked, path)?;
        self.run(move || {
            let how = OpenHow::new()
                .flags(OFlag::O_RDONLY | OFlag::O_CLOEXEC)
                .resolve(ResolveFlag::RESOLVE_NO_MAGICLINKS);
            let fd =
                openat2(nix::fcntl::AT_FDCWD, &shown, how).map_err(|e| io_denied(&shown, e))?;
            if !masked.is_empty() {
                let real = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()))
                    .unwrap_or_else(|_| shown.clone());
                Self::check_masked(&masked, &real)?;
            }
            let file = std::fs::File::from(fd);
            let meta = file.metadata().map_err(|e| FsDenied::Io {
                path: shown.clone(),
                message: e.to_string(),
            })?;
            if meta.is_dir() {
                return Err(FsDenied::Io {
                    path: shown,
                    message: "is a directory".into(),
                });
            }
            let mut bytes = Vec::new();
            let cap = u64::try_from(limit).unwrap_or(u64::MAX);
            file.take(cap)
                .read_to_end(&mut bytes)
                .map_err(|e| FsDenied::Io {
                    path: shown.clone(),
                    message: e.to_string(),
                })?;
            Ok((bytes, meta.len()))
        })
    }

    /// Walks the tree below `base` (not following symlinks, skipping masked directories and
    /// `.git`), returning `(path relative to base, is_dir)` for at most `max_entries` entries,
    /// and whether the walk stopped early.
    pub fn walk(
        &self,
        base: &Path,
        max_entries: usize,
    ) -> Result<(Vec<(PathBuf, bool)>, bool), FsDenied> {
        let shown = base.to_path_buf();
        let masked = self.masked.clone();
        Self::check_masked(&masked, base)?;
        self.run(move || {
            let mut out = Vec::new();
            let mut stack = vec![PathBuf::new()];
            while let Some(relative) = stack.pop() {
                let dir = shown.join(&relative);
                if masked.iter().any(|m| dir.starts_with(m)) {
                    continue;
                }
                let Ok(entries) = std::fs::read_dir(&dir) else {
                    continue;
                };
                let mut names: Vec<(PathBuf, bool)> = entries
                    .flatten()
                    .map(|e| {
                        let is_dir = e.file_type().map(|t| t.is_dir()).unwrap_or(false);
                        (relative.join(e.file_name()), is_dir)
                    })
                    .collect();
                names.sort();
                for (path, is_dir) in names.into_iter().rev() {
                    if out.len() >= max_entries {
                        return Ok((out, true));
                    }
                    if is_dir && path.file_name().is_some_and(|n| n != ".git") {
                        stack.push(path.clone());
                    }
                    out.push((path, is_dir));
                }
            }
            out.sort();
            Ok((out, false))
        })
    }

    /// Lists a directory: `(name, is_dir)` sorted by name. Refuses masked directories.
    pub fn list_dir(&self, path: &Path) -> Result<Vec<(String, bool)>, FsDenied> {
        let shown = path.to_path_buf();
        let masked = self.masked.clone();
        Self::check_masked(&masked, path)?;
        self.run(move || {
            let how = OpenHow::new()
                .flags(OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC)
                .resolve(ResolveFlag::RESOLVE_NO_MAGICLINKS);
            let fd =
                openat2(nix::fcntl::AT_FDCWD, &shown, how).map_err(|e| io_denied(&shown, e))?;
            let real = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()))
                .unwrap_or_else(|_| shown.clone());
            Self::check_masked(&masked, &real)?;
            let mut out = Vec::new();
            let entries =
                std::fs::read_dir(format!("/proc/self/fd/{}", fd.as_raw_fd())).map_err(|e| {
                    FsDenied::Io {
                        path: shown.clone(),
                        message: e.to_string(),
                    }
                })?;
            for entry in entries.flatten() {
                let is_dir = entry.file_type().map(|t| t.is_dir()).unwrap_or(false);
                out.push((entry.file_name().to_string_lossy().into_owned(), is_dir));
            }
            out.sort();
            Ok(out)
        })
    }
}
