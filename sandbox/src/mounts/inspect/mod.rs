//! When a run ends: inspecting the repositories the command created or changed in its writable
//! roots, and moving aside what in them would make git on the host run code.
//!
//! A command may create repositories (`git init`, `git clone`) and change ones bridle does not
//! protect (a clone nested in the workspace). Their configs and hooks are read by git on the
//! host, which would then run what they name: `core.fsmonitor` on every `git status`, a hook on
//! every commit. So once every process of the run is gone, bridle walks the writable roots
//! (bounded, never through a symlink), finds every git dir git would use (a directory with
//! `HEAD` and `objects/` and `refs/`, or `HEAD` and `commondir`; what `.git` files and
//! `commondir` files name), and, for what changed since the run started (its status-change
//! time, which no command can set back):
//! - a config (`config`, `config.worktree`) with an entry that runs or loads something
//!   ([`bridle_policy::git_config::runs_code`]), one that cannot be read with certainty, or a
//!   symlink in its place, is moved aside; a fresh `config` with only the entries git needs to
//!   go on using the repository (its format, remotes, branches) is written in its place;
//! - an executable hook (or a symlink in `hooks/`, or `hooks` itself as a symlink) is moved
//!   aside; git's `*.sample` files are left;
//! - a `.git` or `commondir` file that names a git dir through a symlink is moved aside.
//!
//! Moved aside means renamed to `NAME.bridle-moved-ID` next to it: never over anything, never
//! deleted, never through a symlink. Protected paths (read-only during the run) are not
//! touched.
//!
//! Bounds: at most [`MAX_DIRS`] directories, [`MAX_DEPTH`] levels and [`MAX_WALK`] of time per
//! run. Past a bound the inspection is incomplete: the report names the first directory left
//! out, and the run's record stays (see `pending`), so the next run looks again at everything
//! changed since this one started.

mod git_dir;
mod pending;

use std::collections::{HashSet, VecDeque};
use std::ffi::{OsStr, OsString};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use nix::fcntl::{OFlag, OpenHow, ResolveFlag, openat2};

use super::aside;

/// At most this many directories are looked at when a run ends.
pub const MAX_DIRS: usize = 100_000;

/// Directories deeper than this below a writable root are not looked at.
pub const MAX_DEPTH: usize = 64;

/// The walk stops after this long.
pub const MAX_WALK: Duration = Duration::from_secs(2);

/// How much earlier than the run's start a change counts as the run's: file times come from a
/// clock that may lag the one read at the start by a tick, and may be stepped back a little.
const CLOCK_SLACK: Duration = Duration::from_secs(1);

/// Directories git keeps in a git dir that hold no git dir git would use: not walked. (`hooks`
/// is inspected on its own; `modules` and `worktrees` hold git dirs and are walked.)
const GIT_OWN_DIRS: &[&str] = &[
    "objects",
    "refs",
    "reftable",
    "logs",
    "hooks",
    "info",
    "lfs",
    "rr-cache",
    "branches",
    "remotes",
    "rebase-merge",
    "rebase-apply",
    "sequencer",
];

/// Something the command left that git on the host would run or load, and what bridle did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Quarantined {
    /// Where it was.
    pub path: PathBuf,
    /// Why git on the host would run something because of it.
    pub reason: String,
    /// Where it is now; `None` when it could not be moved (the user must remove it).
    pub moved_to: Option<PathBuf>,
    /// For a config: the entries of the fresh config written in its place (`None`: none was
    /// written).
    pub kept: Option<Vec<String>>,
}

impl std::fmt::Display for Quarantined {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "`{}`, left by the command, {}: ",
            self.path.display(),
            self.reason
        )?;
        match &self.moved_to {
            Some(to) => write!(f, "moved to `{}`", to.display())?,
            None => write!(
                f,
                "it could not be moved aside; remove it before running git there"
            )?,
        }
        match &self.kept {
            Some(kept) if kept.is_empty() => {
                write!(f, "; an empty config was written in its place")
            }
            Some(kept) => write!(
                f,
                "; a config with only {} was written in its place",
                kept.join(", ")
            ),
            None => Ok(()),
        }
    }
}

/// What the end-of-run inspection found and did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Inspection {
    /// What was moved aside (or could not be).
    pub quarantined: Vec<Quarantined>,
    /// Why the inspection did not cover everything (a bound, a directory that cannot be read).
    pub incomplete: Vec<String>,
}

impl Inspection {
    /// One line per finding, for the user (without the `bridle: ` prefix).
    pub fn messages(&self) -> Vec<String> {
        let mut lines: Vec<String> = self.quarantined.iter().map(ToString::to_string).collect();
        lines.extend(self.incomplete.iter().map(|why| {
            format!("repositories the command may have created were not all inspected: {why}; check before running git there")
        }));
        lines
    }
}

/// The inspection one run gets when it ends, prepared when it starts.
#[derive(Debug)]
pub struct Inspector {
    roots: Vec<PathBuf>,
    protected: Vec<PathBuf>,
    absent_at_end: Vec<PathBuf>,
    since: SystemTime,
    record: Option<pending::Record>,
}

impl Inspector {
    /// Prepares the inspection of `roots` (the writable roots whose content the command may
    /// change), leaving `protected` (read-only during the run) alone; whatever is at a path of
    /// `absent_at_end` when the run ends (protected paths that were missing and got no
    /// placeholder) is moved aside. Call right before the command starts.
    pub fn begin(
        roots: Vec<PathBuf>,
        protected: Vec<PathBuf>,
        absent_at_end: Vec<PathBuf>,
    ) -> Option<Inspector> {
        if roots.is_empty() {
            return None;
        }
        let started = SystemTime::now();
        let record = pending::Record::begin(&roots, started);
        Some(Inspector {
            roots,
            protected,
            absent_at_end,
            since: started.checked_sub(CLOCK_SLACK).unwrap_or(started),
            record,
        })
    }

    /// Forgets the inspection: the command never ran.
    pub fn discard(self) {
        if let Some(record) = self.record {
            record.discard();
        }
    }

    /// Inspects the roots (once no process of the run is left) and moves aside what would run
    /// code on the host.
    pub fn finish(self) -> Inspection {
        self.finish_within(Limits {
            dirs: MAX_DIRS,
            depth: MAX_DEPTH,
            time: MAX_WALK,
        })
    }

    fn finish_within(self, limits: Limits) -> Inspection {
        let started = Instant::now();
        let since = self
            .record
            .as_ref()
            .map_or(self.since, |r| r.since(self.since));
        let mut walk = Walk {
            protected: &self.protected,
            roots: &self.roots,
            since: stamp(since),
            seen: HashSet::new(),
            dirs: 0,
            deadline: Instant::now() + limits.time,
            limits,
            out: Inspection::default(),
        };
        for path in &self.absent_at_end {
            if std::fs::symlink_metadata(path).is_ok() {
                walk.out.quarantined.push(Quarantined {
                    path: path.clone(),
                    reason: "is a protected path that did not exist when the run started, which the command may not create".into(),
                    moved_to: aside::move_aside(path),
                    kept: None,
                });
            }
        }
        for root in &self.roots {
            if !walk.root(root) {
                break;
            }
        }
        tracing::debug!(
            directories = walk.dirs,
            elapsed_us = started.elapsed().as_micros(),
            "inspected the writable roots for repositories the command left"
        );
        let complete = walk.out.incomplete.is_empty();
        if let Some(record) = self.record {
            record.complete(complete);
        }
        walk.out
    }
}

/// A time as (seconds, nanoseconds) since the epoch, as `stat` gives it.
fn stamp(time: SystemTime) -> (i64, i64) {
    let since = time
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or(Duration::ZERO);
    (
        i64::try_from(since.as_secs()).unwrap_or(i64::MAX),
        i64::from(since.subsec_nanos()),
    )
}

/// Opens `relative` below the directory `root` without leaving it and without following any
/// symlink (`flags` added to `O_CLOEXEC | O_NOFOLLOW`).
fn open_beneath(root: impl AsFd, relative: &Path, flags: OFlag) -> nix::Result<OwnedFd> {
    let relative = if relative.as_os_str().is_empty() {
        Path::new(".")
    } else {
        relative
    };
    let how = OpenHow::new()
        .flags(flags | OFlag::O_CLOEXEC | OFlag::O_NOFOLLOW)
        .resolve(
            ResolveFlag::RESOLVE_BENEATH
                | ResolveFlag::RESOLVE_NO_SYMLINKS
                | ResolveFlag::RESOLVE_NO_MAGICLINKS,
        );
    openat2(root, relative, how)
}

/// What kind of entry a directory listing shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Dir,
    File,
    Symlink,
    Other,
}

/// The entries of the directory `fd` (without `.` and `..`); `None` when it cannot be read.
fn list(fd: OwnedFd) -> Option<(nix::dir::Dir, Vec<(OsString, Kind)>)> {
    use nix::dir::Type;
    let mut dir = nix::dir::Dir::from_fd(fd).ok()?;
    let mut entries = Vec::new();
    let mut unknown = Vec::new();
    for entry in dir.iter() {
        let entry = entry.ok()?;
        let name = OsStr::from_bytes(entry.file_name().to_bytes()).to_os_string();
        if name == "." || name == ".." {
            continue;
        }
        match entry.file_type() {
            Some(Type::Directory) => entries.push((name, Kind::Dir)),
            Some(Type::File) => entries.push((name, Kind::File)),
            Some(Type::Symlink) => entries.push((name, Kind::Symlink)),
            Some(_) => entries.push((name, Kind::Other)),
            None => unknown.push(name),
        }
    }
    // Filesystems that do not report the type in the listing.
    for name in unknown {
        let kind = match lstat_at(&dir, &name) {
            Some(st) => kind_of(&st),
            None => continue,
        };
        entries.push((name, kind));
    }
    Some((dir, entries))
}

fn lstat_at(dir: impl AsFd, name: &OsStr) -> Option<nix::sys::stat::FileStat> {
    nix::sys::stat::fstatat(dir, name, nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW).ok()
}

fn kind_of(st: &nix::sys::stat::FileStat) -> Kind {
    use nix::sys::stat::SFlag;
    match SFlag::from_bits_truncate(st.st_mode & SFlag::S_IFMT.bits()) {
        SFlag::S_IFDIR => Kind::Dir,
        SFlag::S_IFREG => Kind::File,
        SFlag::S_IFLNK => Kind::Symlink,
        _ => Kind::Other,
    }
}

/// Whether a listing is that of a git dir git would use.
fn looks_like_git_dir(entries: &[(OsString, Kind)]) -> bool {
    let has = |name: &str, kind: Option<Kind>| {
        entries
            .iter()
            .any(|(n, k)| n == name && kind.is_none_or(|want| *k == want))
    };
    has("HEAD", None)
        && ((has("objects", Some(Kind::Dir)) && has("refs", Some(Kind::Dir)))
            || has("commondir", None))
}

/// The bounds of one walk.
#[derive(Debug, Clone, Copy)]
struct Limits {
    dirs: usize,
    depth: usize,
    time: Duration,
}

struct Walk<'a> {
    limits: Limits,
    roots: &'a [PathBuf],
    protected: &'a [PathBuf],
    since: (i64, i64),
    /// Git dirs inspected already (device, inode).
    seen: HashSet<(u64, u64)>,
    dirs: usize,
    deadline: Instant,
    out: Inspection,
}

impl Walk<'_> {
    fn is_protected(&self, path: &Path) -> bool {
        self.protected.iter().any(|p| path.starts_with(p))
    }

    /// Whether `st` changed since the run started (or cannot be told apart from that).
    fn changed(&self, st: &nix::sys::stat::FileStat) -> bool {
        (st.st_ctime, st.st_ctime_nsec) >= self.since
    }

    /// Walks one root breadth first; false when a bound stopped the walk.
    fn root(&mut self, root: &Path) -> bool {
        let how = OpenHow::new()
            .flags(OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC)
            .resolve(ResolveFlag::RESOLVE_NO_SYMLINKS | ResolveFlag::RESOLVE_NO_MAGICLINKS);
        let root_fd = match openat2(nix::fcntl::AT_FDCWD, root, how) {
            Ok(fd) => fd,
            Err(e) => {
                self.out
                    .incomplete
                    .push(format!("`{}` could not be opened ({e})", root.display()));
                return true;
            }
        };
        let mut queue: VecDeque<(PathBuf, usize)> = VecDeque::from([(PathBuf::new(), 0)]);
        let mut too_deep: Option<PathBuf> = None;
        while let Some((relative, depth)) = queue.pop_front() {
            let path = root.join(&relative);
            if self.dirs >= self.limits.dirs || Instant::now() >= self.deadline {
                let why = if self.dirs >= self.limits.dirs {
                    format!("the walk stopped after {} directories", self.limits.dirs)
                } else {
                    format!("the walk stopped after {:?}", self.limits.time)
                };
                self.out.incomplete.push(format!(
                    "{why}, before `{}` and {} more directories",
                    path.display(),
                    queue.len()
                ));
                return false;
            }
            self.dirs += 1;
            if self.is_protected(&path) {
                continue;
            }
            let Ok(fd) = open_beneath(&root_fd, &relative, OFlag::O_RDONLY | OFlag::O_DIRECTORY)
            else {
                // Gone meanwhile, or replaced by a symlink: nothing git would find there.
                continue;
            };
            let Some((dir, entries)) = list(fd) else {
                self.out.incomplete.push(format!(
                    "the directory `{}` could not be read",
                    path.display()
                ));
                continue;
            };
            let git_dir = looks_like_git_dir(&entries);
            if git_dir {
                self.git_dir(&dir, &path);
            }
            for (name, kind) in entries {
                match kind {
                    Kind::File if name == ".git" => self.gitfile(&dir, &path.join(&name)),
                    Kind::Dir => {
                        if git_dir && GIT_OWN_DIRS.iter().any(|own| name == *own) {
                            continue;
                        }
                        if depth >= self.limits.depth {
                            too_deep.get_or_insert_with(|| path.join(&name));
                            continue;
                        }
                        queue.push_back((relative.join(&name), depth + 1));
                    }
                    _ => {}
                }
            }
        }
        if let Some(deep) = too_deep {
            self.out.incomplete.push(format!(
                "directories deeper than {} levels were not looked at, such as `{}`",
                self.limits.depth,
                deep.display()
            ));
        }
        true
    }

    /// The root (of those inspected) that `path` is in.
    fn locate(&self, path: &Path) -> Option<&Path> {
        self.roots
            .iter()
            .find(|r| path.starts_with(r))
            .map(PathBuf::as_path)
    }
}

#[cfg(test)]
mod tests;
