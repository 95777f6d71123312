//! File operations for the file tools, enforced by the kernel with the session's spec.
//!
//! Every operation runs on one dedicated worker thread that has emptied its capability sets (so
//! root's file tools pass file permissions no more than root's commands do, G-PRIV) and restricted
//! itself with the same Landlock ruleset the launcher gives commands (readable roots read-only,
//! writable roots writable), except that the host's `/proc` is left out of it too: commands get a
//! `/proc` of their own PID namespace, the worker (a thread of bridle) would see the host's
//! processes, sockets and keys there, so the file tools refuse it. Paths are opened with `openat2`:
//! writes relative to their writable root with `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
//! RESOLVE_NO_MAGICLINKS`, so a directory swapped for a symlink between a check and the write makes
//! the write fail instead of redirecting it; reads with `RESOLVE_NO_MAGICLINKS`, and the file
//! actually opened (read back from `/proc/self/fd`) is refused when it lies in a masked path or
//! `/proc`. Masks are compared in their resolved form as well as as written (a `$HOME` below a
//! symlinked `/home`, a masked path that is itself a symlink), and carved out of the worker's
//! Landlock rules in that form. Reads open with `O_PATH` first and refuse anything but a regular
//! file before reading, so a FIFO, socket or device never blocks or is touched. Policy decisions
//! (protected paths, rules) are the caller's; this module is the kernel-enforced floor under them.

mod denied;
mod hidden;
mod target;
mod walk;

use std::io::Read;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::{Component, Path, PathBuf};
use std::sync::mpsc;

use bridle_policy::SandboxSpec;
use nix::fcntl::{OFlag, OpenHow, ResolveFlag, openat2};
use nix::sys::stat::Mode;

use crate::landlock_rules::{LandlockRequest, restrict_current_thread};
use crate::real_path::{real_path, with_real_paths};

pub use denied::FsDenied;
use denied::{Access, io_denied, io_error, permission_denied};
use hidden::{HOST_PROC, Hidden, opened_path};
pub use target::{HardLinks, write_unconfined};
use target::{check_target, write_over};

type Job = Box<dyn FnOnce() + Send>;

/// A worker thread confined by the spec's Landlock rules.
#[derive(Debug)]
pub struct ConfinedFs {
    jobs: mpsc::Sender<Job>,
    /// danger-full-access: no roots, no Landlock.
    unconfined: bool,
    /// The writable roots, resolved (they are opened without following symlinks).
    writable: Vec<PathBuf>,
    hidden: Hidden,
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
            .map(|p| real_path(p))
            .collect();
        let landlock_writable = writable.clone();
        let unconfined = spec.mode == bridle_policy::SandboxMode::DangerFullAccess;
        let hidden = Hidden {
            masked: with_real_paths(&spec.masked_paths),
            proc: !unconfined,
        };
        let mut masked_for_worker = hidden.masked.clone();
        masked_for_worker.push(PathBuf::from(HOST_PROC));
        std::thread::Builder::new()
            .name("bridle-confined-fs".into())
            .spawn(move || {
                let request = LandlockRequest {
                    readable: &readable,
                    writable: &landlock_writable,
                    deny_tcp: false,
                    masked: &masked_for_worker,
                };
                // danger-full-access confines nothing: the worker stays unrestricted, as
                // commands do there. Otherwise it loses its capabilities first (G-PRIV: root's
                // file tools get what root's commands get), then takes the Landlock rules.
                let outcome = if unconfined {
                    Ok(())
                } else {
                    crate::privileges::drop_from_current_thread()
                        .map_err(|e| crate::SandboxError::Landlock {
                            stage: "dropping the confined file worker's capabilities".into(),
                            message: e,
                        })
                        .and_then(|()| restrict_current_thread(&request).map(drop))
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
            hidden,
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

    /// Writes `content` to `path` (absolute), creating missing parent directories below its
    /// writable root. No symlink is followed anywhere below the root; an existing FIFO, socket
    /// or device is refused without blocking, and so is a file with several names unless
    /// `links` allows it.
    pub fn write(&self, path: &Path, content: Vec<u8>, links: HardLinks) -> Result<(), FsDenied> {
        if self.unconfined {
            let shown = path.to_path_buf();
            return self.run(move || write_unconfined(&shown, &content, links));
        }
        self.hidden.check(path)?;
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
            .map_err(|e| io_denied(&shown, e, Access::Write))?;
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
                    Err(e) => return Err(io_denied(&shown, e, Access::Write)),
                }
                dir = openat2(
                    dir.as_fd(),
                    name,
                    OpenHow::new()
                        .flags(OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC)
                        .resolve(strict),
                )
                .map_err(|e| io_denied(&shown, e, Access::Write))?;
            }
            // O_NONBLOCK: opening a FIFO for writing would otherwise wait for a reader.
            let how = OpenHow::new()
                .flags(
                    OFlag::O_WRONLY
                        | OFlag::O_CREAT
                        | OFlag::O_CLOEXEC
                        | OFlag::O_NOFOLLOW
                        | OFlag::O_NONBLOCK,
                )
                .mode(Mode::from_bits_truncate(0o644))
                .resolve(strict);
            let fd = match openat2(dir.as_fd(), Path::new(last.as_os_str()), how) {
                Ok(fd) => fd,
                // A FIFO without a reader: refused like one with a reader below.
                Err(nix::errno::Errno::ENXIO) => {
                    return Err(FsDenied::NotRegular {
                        path: shown,
                        kind: "FIFO",
                    });
                }
                Err(e) => return Err(io_denied(&shown, e, Access::Write)),
            };
            let mut file = std::fs::File::from(fd);
            let meta = file.metadata().map_err(|e| io_error(&shown, &e))?;
            check_target(&shown, &meta, links)?;
            write_over(&shown, &mut file, &content)
        })
    }

    /// Reads at most `limit` bytes of `path`; returns the bytes and the file's size. Refuses a
    /// file that turns out (after resolution) to lie in a masked path or `/proc`, and anything
    /// but a regular file, before reading it.
    pub fn read(&self, path: &Path, limit: usize) -> Result<(Vec<u8>, u64), FsDenied> {
        let shown = path.to_path_buf();
        let hidden = self.hidden.clone();
        hidden.check(path)?;
        self.run(move || {
            // O_PATH: nothing is opened for reading (no FIFO waits for a writer, no device
            // sees an open) until the file is known to be a regular one outside the masks.
            let how = OpenHow::new()
                .flags(OFlag::O_PATH | OFlag::O_CLOEXEC)
                .resolve(ResolveFlag::RESOLVE_NO_MAGICLINKS);
            let fd = openat2(nix::fcntl::AT_FDCWD, &shown, how)
                .map_err(|e| io_denied(&shown, e, Access::Read))?;
            hidden.check(&opened_path(&fd, &shown))?;
            let meta = std::fs::File::from(fd.try_clone().map_err(|e| io_error(&shown, &e))?)
                .metadata()
                .map_err(|e| io_error(&shown, &e))?;
            if meta.is_dir() {
                return Err(FsDenied::Io {
                    path: shown,
                    message: "is a directory".into(),
                });
            }
            check_target(&shown, &meta, HardLinks::Allowed)?;
            // Reopened for reading through the descriptor: the same file, whatever happened to
            // the path meanwhile (Landlock checks the file itself).
            let file =
                std::fs::File::open(format!("/proc/self/fd/{}", fd.as_raw_fd())).map_err(|e| {
                    match e.raw_os_error() {
                        Some(nix::libc::EACCES) => permission_denied(&shown, Access::Read),
                        _ => io_error(&shown, &e),
                    }
                })?;
            let mut bytes = Vec::new();
            let cap = u64::try_from(limit).unwrap_or(u64::MAX);
            file.take(cap)
                .read_to_end(&mut bytes)
                .map_err(|e| io_error(&shown, &e))?;
            Ok((bytes, meta.len()))
        })
    }
}
