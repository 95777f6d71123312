//! Holding git's own lock on a protected repository config for the length of a run.
//!
//! A protected file is a read-only bind mount on the file's dentry. When something on the host
//! renames another file over it (git rewrites `config` by writing `config.lock` and renaming it
//! into place), the kernel detaches that bind in every other mount namespace, and inside the
//! sandbox the path is then an ordinary file in a writable root. Init notices and stops the
//! sandbox, but a command spinning on the file could write it first.
//!
//! git, libgit2 and JGit all change `config` only while holding `config.lock`, created with
//! `O_EXCL`. So the run creates `config.lock` itself before the sandbox starts and keeps it until
//! the run ends: git on the host then cannot replace the config during the run (it reports that
//! the config is locked), and inside the sandbox the lock file is bound read-only like the config,
//! so the command cannot remove it. Concurrent runs in one repository share the lock: each holds
//! a shared `flock` on it, and the last one out removes it under an exclusive one. A lock left
//! by a run that was killed carries [`LOCK_MARKER`], and the next run adopts and removes it.

use std::io::{Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use bridle_policy::Guarantee;
use nix::fcntl::{Flock, FlockArg};

use super::{MountFailure, fail, lock_shared};

/// The first line of every lock file bridle holds, so that later runs (and people) recognise it.
pub const LOCK_MARKER: &str = "# bridle: held while a sandboxed run uses this repository";

/// At most this many config locks are held for one run (each keeps a descriptor open).
pub const MAX_LOCKS: usize = 32;

/// How long to wait for a git process on the host to finish with its own `config.lock`.
pub const FOREIGN_LOCK_WAIT: Duration = Duration::from_secs(2);

/// The lock on one repository config, held until dropped.
#[derive(Debug)]
pub struct ConfigLock {
    path: PathBuf,
    id: (u64, u64),
    lock: Option<Flock<std::fs::File>>,
}

/// The lock file git uses for `config`: `config.lock` next to it.
pub fn lock_path_for(config: &Path) -> PathBuf {
    let mut name = config.file_name().unwrap_or_default().to_os_string();
    name.push(".lock");
    config.with_file_name(name)
}

/// Whether the last component of `path` names a file git reads from a git dir as config or as
/// a redirect (`config`, `config.worktree`, `commondir`).
pub fn is_git_file_name(path: &Path) -> bool {
    path.file_name()
        .is_some_and(|n| n == "config" || n == "config.worktree" || n == "commondir")
}

/// Whether `path` is (or, when missing, would be) a config file of a git dir: `config` or
/// `config.worktree` next to `HEAD`, not a directory. git on the host writes these by renaming
/// `NAME.lock` into place.
pub fn is_git_config(path: &Path) -> bool {
    path.file_name()
        .is_some_and(|n| n == "config" || n == "config.worktree")
        && !std::fs::symlink_metadata(path).is_ok_and(|m| !m.is_file())
        && path
            .parent()
            .is_some_and(|dir| std::fs::symlink_metadata(dir.join("HEAD")).is_ok())
}

impl ConfigLock {
    /// Takes git's lock on `config` for this run. `Ok(None)` when no lock is held:
    /// - the directory does not let this user create files (then neither can the sandboxed
    ///   command, which runs as the same user without capabilities);
    /// - the filesystem has no `flock` (runs could not share it);
    /// - another program's lock file is there and stays: git on the host is kept out by that
    ///   file just as by ours (git waits for no lock; it fails). A fresh one is waited for, up to
    ///   `FOREIGN_LOCK_WAIT`, since a git process holds it for milliseconds; one older than
    ///   that is stale and left alone (never removed: it may hold a crashed git's half-written
    ///   config). Not refusing here matters: the command can create such a file in a git dir it
    ///   makes, and must not be able to lock every later run out.
    ///
    /// Either way init's watch stays: a lock removed on the host and a config replaced after it
    /// stop the sandbox.
    ///
    /// `deadline` bounds the waiting for all the locks of one run together.
    pub fn acquire(config: &Path, deadline: Instant) -> Result<Option<ConfigLock>, MountFailure> {
        let path = lock_path_for(config);
        loop {
            match Self::try_acquire(&path)? {
                Attempt::Held(lock) => return Ok(Some(lock)),
                Attempt::NotNeeded => return Ok(None),
                Attempt::Retry => {}
                Attempt::Foreign { age } => {
                    if age >= FOREIGN_LOCK_WAIT || Instant::now() >= deadline {
                        tracing::warn!(
                            lock = %path.display(),
                            "a lock file that is not bridle's keeps git from changing `{}` during the run",
                            config.display()
                        );
                        return Ok(None);
                    }
                }
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn try_acquire(path: &Path) -> Result<Attempt, MountFailure> {
        let created = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o644)
            .custom_flags(nix::libc::O_NOFOLLOW)
            .open(path);
        let mine = created.is_ok();
        let file = match created {
            Ok(mut file) => {
                let text = format!(
                    "{LOCK_MARKER} (pid {}); git cannot change this repository's config until the run ends. Delete this file only if no bridle run is active.\n",
                    std::process::id()
                );
                if let Err(e) = file.write_all(text.as_bytes()) {
                    let _ = std::fs::remove_file(path);
                    return Err(fail(
                        Guarantee::FsProtect,
                        format!("writing the lock file `{}`: {e}", path.display()),
                    ));
                }
                file
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                // Whatever is there is not trusted: never followed, never blocked on (a FIFO),
                // and anything but a regular file is another program's, left alone.
                let stale = Attempt::Foreign {
                    age: FOREIGN_LOCK_WAIT,
                };
                let mut file = match std::fs::OpenOptions::new()
                    .read(true)
                    .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK)
                    .open(path)
                {
                    Ok(f) => f,
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                        return Ok(Attempt::Retry);
                    }
                    Err(_) => return Ok(stale),
                };
                let Ok(meta) = file.metadata() else {
                    return Ok(stale);
                };
                if !meta.is_file() {
                    return Ok(stale);
                }
                let mut head = vec![0u8; LOCK_MARKER.len()];
                let ours = file.read_exact(&mut head).is_ok() && head == LOCK_MARKER.as_bytes();
                if !ours {
                    // A time in the future is no sign of a git process at work either.
                    let age = meta
                        .modified()
                        .ok()
                        .and_then(|t| t.elapsed().ok())
                        .unwrap_or(FOREIGN_LOCK_WAIT);
                    return Ok(Attempt::Foreign { age });
                }
                file
            }
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(nix::libc::EACCES | nix::libc::EPERM | nix::libc::EROFS)
                ) =>
            {
                return Ok(Attempt::NotNeeded);
            }
            Err(e) => {
                return Err(fail(
                    Guarantee::FsProtect,
                    format!("creating the lock file `{}`: {e}", path.display()),
                ));
            }
        };
        let meta = file.metadata().map_err(|e| {
            fail(
                Guarantee::FsProtect,
                format!("inspecting `{}`: {e}", path.display()),
            )
        })?;
        let id = (meta.dev(), meta.ino());
        let Some(lock) = lock_shared(file) else {
            // No flock on this filesystem: runs could not share the lock, nor tell a live one
            // from a stale one, so none is held (one we just made is removed again) and only
            // init's watch stands between a host-side rename and the command.
            if mine && same_file(path, id) {
                let _ = std::fs::remove_file(path);
            }
            return Ok(Attempt::NotNeeded);
        };
        // The last run out may have removed it while we waited for the lock.
        if !same_file(path, id) {
            return Ok(Attempt::Retry);
        }
        Ok(Attempt::Held(ConfigLock {
            path: path.to_path_buf(),
            id,
            lock: Some(lock),
        }))
    }

    /// The lock file, which the mount view binds read-only.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

enum Attempt {
    Held(ConfigLock),
    NotNeeded,
    /// Another run removed or replaced it meanwhile.
    Retry,
    /// A lock file that is not bridle's (a git process is writing the config, or crashed doing
    /// so), last modified `age` ago.
    Foreign {
        age: Duration,
    },
}

fn same_file(path: &Path, id: (u64, u64)) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.is_file() && (m.dev(), m.ino()) == id)
}

impl Drop for ConfigLock {
    /// Removes the lock file unless another run still holds it.
    fn drop(&mut self) {
        let Some(shared) = self.lock.take() else {
            return;
        };
        let Ok(file) = shared.unlock() else { return };
        let Ok(exclusive) = Flock::lock(file, FlockArg::LockExclusiveNonblock) else {
            return;
        };
        if same_file(&self.path, self.id) {
            let _ = std::fs::remove_file(&self.path);
        }
        drop(exclusive);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acquire(config: &Path) -> Option<ConfigLock> {
        ConfigLock::acquire(config, Instant::now() + FOREIGN_LOCK_WAIT).unwrap()
    }

    /// Whatever the command may leave at the lock's path in a git dir it made: left alone at
    /// once, never followed, never blocked on.
    #[test]
    fn odd_things_at_the_lock_path_are_left_alone_at_once() {
        let dir = repo();
        let config = dir.path().join(".git/config");
        let lock = lock_path_for(&config);
        let future = std::time::SystemTime::now() + Duration::from_secs(3600 * 24 * 365);
        type Plant = Box<dyn Fn(&Path)>;
        let plants: Vec<(&str, Plant)> = vec![
            (
                "symlink",
                Box::new(|p: &Path| std::os::unix::fs::symlink("/etc/passwd", p).unwrap()),
            ),
            (
                "fifo",
                Box::new(|p: &Path| {
                    nix::unistd::mkfifo(p, nix::sys::stat::Mode::from_bits_truncate(0o644)).unwrap()
                }),
            ),
            (
                "future mtime",
                Box::new(move |p: &Path| {
                    std::fs::write(p, "x").unwrap();
                    std::fs::File::options()
                        .write(true)
                        .open(p)
                        .unwrap()
                        .set_modified(future)
                        .unwrap();
                }),
            ),
        ];
        for (what, plant) in plants {
            plant(&lock);
            let started = Instant::now();
            assert!(acquire(&config).is_none(), "{what}");
            assert!(started.elapsed() < FOREIGN_LOCK_WAIT / 2, "{what}: waited");
            assert!(std::fs::symlink_metadata(&lock).is_ok(), "{what}: removed");
            std::fs::remove_file(&lock).unwrap();
        }
    }

    fn repo() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let git = dir.path().join(".git");
        std::fs::create_dir(&git).unwrap();
        std::fs::write(git.join("HEAD"), "ref: refs/heads/main\n").unwrap();
        std::fs::write(git.join("config"), "[core]\n").unwrap();
        dir
    }

    #[test]
    fn the_lock_exists_while_held_and_is_removed_after() {
        let dir = repo();
        let config = dir.path().join(".git/config");
        assert!(is_git_config(&config));
        let lock = acquire(&config).unwrap();
        let text = std::fs::read_to_string(lock.path()).unwrap();
        assert!(text.starts_with(LOCK_MARKER), "{text}");
        drop(lock);
        assert!(!lock_path_for(&config).exists());
    }

    #[test]
    fn concurrent_runs_share_the_lock_and_the_last_removes_it() {
        let dir = repo();
        let config = dir.path().join(".git/config");
        let first = acquire(&config).unwrap();
        let second = acquire(&config).unwrap();
        drop(first);
        assert!(lock_path_for(&config).exists(), "removed under another run");
        drop(second);
        assert!(!lock_path_for(&config).exists());
    }

    #[test]
    fn a_lock_left_by_a_killed_run_is_adopted_and_removed() {
        let dir = repo();
        let config = dir.path().join(".git/config");
        std::fs::write(lock_path_for(&config), format!("{LOCK_MARKER} (pid 1)\n")).unwrap();
        drop(acquire(&config).unwrap());
        assert!(!lock_path_for(&config).exists());
    }

    #[test]
    fn a_stale_foreign_lock_is_left_alone_without_waiting() {
        let dir = repo();
        let config = dir.path().join(".git/config");
        let lock = lock_path_for(&config);
        std::fs::write(&lock, "[core]\n").unwrap();
        let old = std::time::SystemTime::now() - Duration::from_secs(60);
        std::fs::File::options()
            .write(true)
            .open(&lock)
            .unwrap()
            .set_modified(old)
            .unwrap();
        let started = Instant::now();
        assert!(acquire(&config).is_none());
        assert!(started.elapsed() < FOREIGN_LOCK_WAIT / 2);
        // Never removes or changes git's lock.
        assert_eq!(std::fs::read_to_string(&lock).unwrap(), "[core]\n");
    }

    #[test]
    fn a_fresh_foreign_lock_is_waited_for() {
        let dir = repo();
        let config = dir.path().join(".git/config");
        let lock = lock_path_for(&config);
        std::fs::write(&lock, "[core]\n").unwrap();
        let remover = {
            let lock = lock.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(200));
                std::fs::remove_file(lock).unwrap();
            })
        };
        let held = acquire(&config);
        remover.join().unwrap();
        let held = held.expect("the lock once git let go of it");
        assert!(
            std::fs::read_to_string(held.path())
                .unwrap()
                .starts_with(LOCK_MARKER)
        );
    }

    #[test]
    fn a_config_outside_a_git_directory_is_not_a_git_config() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("config"), "").unwrap();
        assert!(!is_git_config(&dir.path().join("config")));
    }
}
