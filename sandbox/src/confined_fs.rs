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

use std::io::{Read, Write};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::{Component, Path, PathBuf};
use std::sync::mpsc;

use bridle_policy::SandboxSpec;
use nix::fcntl::{OFlag, OpenHow, ResolveFlag, openat2};
use nix::sys::stat::Mode;

use crate::landlock_rules::{LandlockRequest, restrict_current_thread};
use crate::real_path::{real_path, with_real_paths};

/// The host's `/proc`: refused by the confined file tools (commands see their own).
const HOST_PROC: &str = "/proc";

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
    /// The file's owner and mode refuse it to root without capabilities, which is what the
    /// sandbox leaves root (commands and file tools alike).
    #[error(
        "`{0}`: permission denied by its owner and mode: the sandbox takes root's capabilities away (from commands and file tools alike), so root gets only what the permission bits give it"
    )]
    RootWithoutCapabilities(PathBuf),
    /// The path is in the host's `/proc`.
    #[error(
        "`{0}` is in /proc, which the file tools do not read (it would show the host's processes, sockets and keys); use `bash`, whose commands see the sandbox's own /proc"
    )]
    HostProc(PathBuf),
    /// The path is not a regular file (a FIFO, socket or device).
    #[error(
        "`{path}` is a {kind}, not a regular file; the file tools read and write regular files only"
    )]
    NotRegular {
        /// The path.
        path: PathBuf,
        /// What it is: "FIFO", "socket", "character device", ...
        kind: &'static str,
    },
    /// The file has more than one name, and the caller refused writing such a file.
    #[error(
        "`{path}` has {links} names (hard links); a path rule may cover another of them, so it is not written without approval"
    )]
    HardLinked {
        /// The path.
        path: PathBuf,
        /// Its link count.
        links: u64,
    },
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
    /// The worker could not be confined, so it never started (the file tools refuse).
    #[error("{0}")]
    Unavailable(String),
}

fn io_denied(path: &Path, err: nix::errno::Errno, access: Access) -> FsDenied {
    match err {
        nix::errno::Errno::ELOOP | nix::errno::Errno::EXDEV => {
            FsDenied::Symlink(path.to_path_buf())
        }
        nix::errno::Errno::EACCES => permission_denied(path, access),
        other => FsDenied::Io {
            path: path.to_path_buf(),
            message: std::io::Error::from(other).to_string(),
        },
    }
}

/// What an operation needed of its path, to tell who refused it.
#[derive(Debug, Clone, Copy)]
enum Access {
    Read,
    Write,
}

/// Who refused `access` to `path` with `EACCES`, asked on the worker (its credentials): the
/// file's owner and mode, or Landlock. `access(2)` checks only the former (Landlock takes no
/// part in it), with the thread's own credentials under `AT_EACCESS`; for a missing file, the
/// nearest existing directory must be writable.
fn permission_denied(path: &Path, access: Access) -> FsDenied {
    use nix::errno::Errno;
    use nix::fcntl::AtFlags;
    use nix::unistd::{AccessFlags, faccessat};
    let mut at = path;
    let mut mode = match access {
        Access::Read => AccessFlags::R_OK,
        Access::Write => AccessFlags::W_OK,
    };
    let by_mode = loop {
        match faccessat(nix::fcntl::AT_FDCWD, at, mode, AtFlags::AT_EACCESS) {
            Err(Errno::EACCES) => break true,
            Err(Errno::ENOENT) if matches!(access, Access::Write) => match at.parent() {
                Some(parent) => {
                    at = parent;
                    mode = AccessFlags::W_OK | AccessFlags::X_OK;
                }
                None => break false,
            },
            Ok(()) | Err(_) => break false,
        }
    };
    match (by_mode, nix::unistd::geteuid().is_root()) {
        (false, _) => FsDenied::Landlock(path.to_path_buf()),
        (true, true) => FsDenied::RootWithoutCapabilities(path.to_path_buf()),
        (true, false) => FsDenied::Io {
            path: path.to_path_buf(),
            message: std::io::Error::from(Errno::EACCES).to_string(),
        },
    }
}

/// Whether a write may go to a file that has more than one name (hard links).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HardLinks {
    /// Any link count (no path rules, or a person approved this write).
    Allowed,
    /// Only a file with one name (or a new file): checked on the opened file, so a link made
    /// after the caller's check is caught too.
    Refused,
}

/// What a file is, for refusals.
fn kind_of(file_type: std::fs::FileType) -> Option<&'static str> {
    use std::os::unix::fs::FileTypeExt;
    if file_type.is_file() {
        None
    } else if file_type.is_dir() {
        Some("directory")
    } else if file_type.is_fifo() {
        Some("FIFO")
    } else if file_type.is_socket() {
        Some("socket")
    } else if file_type.is_char_device() {
        Some("character device")
    } else if file_type.is_block_device() {
        Some("block device")
    } else {
        Some("special file")
    }
}

/// Refuses anything but a regular file, and a file with several names unless allowed.
fn check_target(path: &Path, meta: &std::fs::Metadata, links: HardLinks) -> Result<(), FsDenied> {
    use std::os::unix::fs::MetadataExt;
    if let Some(kind) = kind_of(meta.file_type()) {
        return Err(FsDenied::NotRegular {
            path: path.to_path_buf(),
            kind,
        });
    }
    if links == HardLinks::Refused && meta.nlink() > 1 {
        return Err(FsDenied::HardLinked {
            path: path.to_path_buf(),
            links: meta.nlink(),
        });
    }
    Ok(())
}

fn io_error(path: &Path, e: &std::io::Error) -> FsDenied {
    FsDenied::Io {
        path: path.to_path_buf(),
        message: e.to_string(),
    }
}

/// Writes `content` to `path` without any confinement (danger-full-access, or an approved
/// escalation to it), creating missing parents: never blocking on a FIFO, never writing
/// anything but a regular file, and a file with several names only when `links` allows it.
pub fn write_unconfined(path: &Path, content: &[u8], links: HardLinks) -> Result<(), FsDenied> {
    use std::os::unix::fs::OpenOptionsExt;
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|e| io_error(parent, &e))?;
    }
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .mode(0o644)
        .custom_flags(nix::libc::O_NONBLOCK | nix::libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| io_error(path, &e))?;
    let meta = file.metadata().map_err(|e| io_error(path, &e))?;
    check_target(path, &meta, links)?;
    write_over(path, &mut file, content)
}

/// Overwrites, then cuts to length, rather than O_TRUNC: ext4 flushes a file truncated to zero
/// and rewritten at close (auto_da_alloc), which costs a disk round trip.
fn write_over(path: &Path, file: &mut std::fs::File, content: &[u8]) -> Result<(), FsDenied> {
    let len = u64::try_from(content.len()).unwrap_or(u64::MAX);
    file.write_all(content)
        .and_then(|()| file.set_len(len))
        .map_err(|e| io_error(path, &e))
}

/// The path of the file `fd` refers to, as the kernel opened it.
fn opened_path(fd: &OwnedFd, fallback: &Path) -> PathBuf {
    std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()))
        .unwrap_or_else(|_| fallback.to_path_buf())
}

/// What the worker refuses to read whatever Landlock says: masked paths (in every form) and,
/// when confined, the host's `/proc`.
#[derive(Debug, Clone)]
struct Hidden {
    masked: Vec<PathBuf>,
    proc: bool,
}

impl Hidden {
    fn check(&self, path: &Path) -> Result<(), FsDenied> {
        if self.proc && path.starts_with(HOST_PROC) {
            Err(FsDenied::HostProc(path.to_path_buf()))
        } else if self.masked.iter().any(|m| path.starts_with(m)) {
            Err(FsDenied::Masked(path.to_path_buf()))
        } else {
            Ok(())
        }
    }

    fn is_masked(&self, path: &Path) -> bool {
        self.masked.iter().any(|m| path.starts_with(m))
    }
}

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

    /// Walks the tree below `base` (not following symlinks, skipping masked directories and
    /// `.git`), returning `(path relative to base, is_dir)` for at most `max_entries` entries,
    /// and whether the walk stopped early. Every directory is opened beneath `base` without
    /// following symlinks, so one swapped for a symlink during the walk is skipped, not entered.
    pub fn walk(
        &self,
        base: &Path,
        max_entries: usize,
    ) -> Result<(Vec<(PathBuf, bool)>, bool), FsDenied> {
        let shown = base.to_path_buf();
        let hidden = self.hidden.clone();
        hidden.check(base)?;
        self.run(move || {
            let base_fd = open_dir(
                nix::fcntl::AT_FDCWD,
                &shown,
                ResolveFlag::RESOLVE_NO_MAGICLINKS,
            )
            .map_err(|e| io_denied(&shown, e, Access::Read))?;
            let real_base = opened_path(&base_fd, &shown);
            hidden.check(&real_base)?;
            let beneath = ResolveFlag::RESOLVE_BENEATH
                | ResolveFlag::RESOLVE_NO_SYMLINKS
                | ResolveFlag::RESOLVE_NO_MAGICLINKS;
            let mut out = Vec::new();
            let mut stack = vec![PathBuf::new()];
            while let Some(relative) = stack.pop() {
                if hidden.is_masked(&real_base.join(&relative)) {
                    continue;
                }
                let dir = if relative.as_os_str().is_empty() {
                    base_fd.try_clone().map_err(|e| io_error(&shown, &e))?
                } else {
                    match open_dir(base_fd.as_fd(), &relative, beneath) {
                        Ok(fd) => fd,
                        Err(_) => continue,
                    }
                };
                let Ok(entries) = std::fs::read_dir(format!("/proc/self/fd/{}", dir.as_raw_fd()))
                else {
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

    /// Lists a directory: `(name, is_dir)` sorted by name. Refuses masked directories and
    /// `/proc`.
    pub fn list_dir(&self, path: &Path) -> Result<Vec<(String, bool)>, FsDenied> {
        let shown = path.to_path_buf();
        let hidden = self.hidden.clone();
        hidden.check(path)?;
        self.run(move || {
            let fd = open_dir(
                nix::fcntl::AT_FDCWD,
                &shown,
                ResolveFlag::RESOLVE_NO_MAGICLINKS,
            )
            .map_err(|e| io_denied(&shown, e, Access::Read))?;
            hidden.check(&opened_path(&fd, &shown))?;
            let mut out = Vec::new();
            let entries = std::fs::read_dir(format!("/proc/self/fd/{}", fd.as_raw_fd()))
                .map_err(|e| io_error(&shown, &e))?;
            for entry in entries.flatten() {
                let is_dir = entry.file_type().map(|t| t.is_dir()).unwrap_or(false);
                out.push((entry.file_name().to_string_lossy().into_owned(), is_dir));
            }
            out.sort();
            Ok(out)
        })
    }
}

/// Opens a directory for listing; a FIFO or other non-directory fails at once (`ENOTDIR`).
fn open_dir<Fd: std::os::fd::AsFd>(
    at: Fd,
    path: &Path,
    resolve: ResolveFlag,
) -> nix::Result<OwnedFd> {
    openat2(
        at,
        path,
        OpenHow::new()
            .flags(OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC)
            .resolve(resolve),
    )
}
