//! Inspecting one git dir: its configs, its hooks, and what its `commondir` (or a `.git` file)
//! names.

use std::ffi::OsStr;
use std::io::{Read, Write};
use std::os::fd::AsFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use bridle_policy::git_config;
use nix::fcntl::{OFlag, OpenHow, ResolveFlag, openat, openat2};
use nix::sys::stat::Mode;

use super::{Kind, Quarantined, Walk, kind_of, list, lstat_at};
use crate::mounts::aside::move_aside_at;

/// Configs larger than this are not read (and count as dangerous).
const MAX_CONFIG_BYTES: u64 = 1 << 20;

/// Hooks directories with more entries than this are moved aside whole.
const MAX_HOOKS: usize = 4096;

/// `.git` and `commondir` files larger than this are not read.
const MAX_POINTER_BYTES: u64 = 4096;

/// How many entry names a report lists before "and N more".
const NAMES_SHOWN: usize = 4;

/// The first line of the config bridle writes in place of one it moved aside.
const WRITTEN_BY: &str = "Written by bridle when the sandboxed run ended: the config the command left here named commands git would run, and was moved to";

impl Walk<'_> {
    /// Inspects the git dir open as `dir` at `path` (once).
    pub(super) fn git_dir(&mut self, dir: &impl AsFd, path: &Path) {
        let Ok(st) = nix::sys::stat::fstat(dir.as_fd()) else {
            return;
        };
        if !self.seen.insert((st.st_dev, st.st_ino)) {
            return;
        }
        for name in ["config", "config.worktree"] {
            self.config(dir, path, name);
        }
        self.hooks(dir, path);
        // The common dir holds the config and hooks git uses for this git dir, whether or not
        // it looks like a repository itself.
        if let Some(target) = self.pointer(dir, path, "commondir", None) {
            self.follow(&target, &path.join("commondir"), dir);
        }
    }

    /// A `.git` file at `path` (in the directory `dir`): the git dir it names is inspected.
    pub(super) fn gitfile(&mut self, dir: &impl AsFd, path: &Path) {
        if let Some(target) =
            self.pointer(dir, path.parent().unwrap_or(path), ".git", Some("gitdir:"))
        {
            self.follow(&target, path, dir);
        }
    }

    /// The path the small pointer file `name` in `dir` (at `path`) names, relative to `path`
    /// (`..` not resolved); with `prefix`, its first line must start with it.
    fn pointer(
        &mut self,
        dir: &impl AsFd,
        path: &Path,
        name: &str,
        prefix: Option<&str>,
    ) -> Option<PathBuf> {
        let file = openat(
            dir.as_fd(),
            name,
            OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .ok()?;
        let mut file = std::fs::File::from(file);
        let meta = file.metadata().ok()?;
        if !meta.is_file() || meta.len() > MAX_POINTER_BYTES {
            return None;
        }
        let mut text = String::new();
        file.read_to_string(&mut text).ok()?;
        let line = text.lines().next()?;
        let value = match prefix {
            Some(prefix) => line.strip_prefix(prefix)?,
            None => line,
        }
        .trim();
        if value.is_empty() {
            return None;
        }
        Some(path.join(value))
    }

    /// Inspects the git dir `target` (absolute, as named: `..` not yet resolved) that the file
    /// `by` (in the directory `by_dir`) names, when it lies in an inspected root. It is opened
    /// without following any symlink, so its real place is its lexical one; a target reached
    /// only through a symlink cannot be inspected, so when it leads into a writable root the
    /// file naming it is moved aside if it changed during the run.
    fn follow(&mut self, target: &Path, by: &Path, by_dir: &impl AsFd) {
        let how = OpenHow::new()
            .flags(OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC)
            .resolve(ResolveFlag::RESOLVE_NO_SYMLINKS | ResolveFlag::RESOLVE_NO_MAGICLINKS);
        let place = bridle_policy::normalize(target);
        match openat2(nix::fcntl::AT_FDCWD, target, how) {
            Ok(fd) => {
                // Outside every writable root: the command could not have changed it.
                if self.locate(&place).is_none() {
                    return;
                }
                if let Some((dir, _)) = list(fd) {
                    self.git_dir(&dir, &place);
                }
            }
            Err(nix::errno::Errno::ENOENT | nix::errno::Errno::ENOTDIR) => {}
            Err(_) => {
                let inside =
                    std::fs::canonicalize(target).is_ok_and(|real| self.locate(&real).is_some());
                let name = by.file_name().unwrap_or_default().to_owned();
                let changed = lstat_at(by_dir, &name).is_some_and(|st| self.changed(&st));
                if inside && changed && !self.is_protected(by) {
                    let reason = format!(
                        "names the git dir `{}` through a symlink, which bridle does not follow to inspect it",
                        place.display()
                    );
                    self.quarantine(by_dir, &name, by, reason, None);
                }
            }
        }
    }

    /// Inspects the config file `name` of the git dir `dir` at `path`.
    fn config(&mut self, dir: &impl AsFd, path: &Path, name: &str) {
        let file = path.join(name);
        if self.is_protected(&file) {
            return;
        }
        let Some(st) = lstat_at(dir, OsStr::new(name)) else {
            return;
        };
        if !self.changed(&st) {
            return;
        }
        let reason = match kind_of(&st) {
            Kind::Symlink => {
                "is a symlink, which git follows to read a config bridle does not inspect"
                    .to_owned()
            }
            Kind::File => match self.read_config(dir, name) {
                Ok(None) => return,
                Ok(Some((reason, entries))) => {
                    let replacement = (name == "config").then_some(entries);
                    return self.quarantine(dir, OsStr::new(name), &file, reason, replacement);
                }
                Err(reason) => reason,
            },
            // git cannot read a directory or a FIFO as config: it stops with an error.
            Kind::Dir | Kind::Other => return,
        };
        self.quarantine(dir, OsStr::new(name), &file, reason, None);
    }

    /// Reads the config `name` of `dir`: `Ok(None)` when nothing in it runs code;
    /// `Ok(Some((why, entries)))` when something does; `Err(why)` when it cannot be read with
    /// certainty.
    fn read_config(
        &self,
        dir: &impl AsFd,
        name: &str,
    ) -> Result<Option<(String, Vec<git_config::StrictEntry>)>, String> {
        let fd = openat(
            dir.as_fd(),
            name,
            OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| format!("cannot be read ({e}), so what it makes git run is unknown"))?;
        let mut file = std::fs::File::from(fd);
        let mut text = Vec::new();
        let read = (&mut file)
            .take(MAX_CONFIG_BYTES + 1)
            .read_to_end(&mut text);
        match read {
            Err(e) => {
                return Err(format!(
                    "cannot be read ({e}), so what it makes git run is unknown"
                ));
            }
            Ok(_) if text.len() as u64 > MAX_CONFIG_BYTES => {
                return Err(format!(
                    "is larger than bridle reads ({} KiB), so what it makes git run is unknown",
                    MAX_CONFIG_BYTES / 1024
                ));
            }
            Ok(_) => {}
        }
        let entries = git_config::parse_strict(&text).map_err(|e| {
            format!("cannot be read with certainty ({e}), so what it makes git run is unknown")
        })?;
        let flagged: Vec<(String, &str)> = entries
            .iter()
            .filter_map(|e| git_config::runs_code(e).map(|why| (e.name(), why)))
            .collect();
        if flagged.is_empty() {
            return Ok(None);
        }
        let mut shown: Vec<String> = flagged
            .iter()
            .take(NAMES_SHOWN)
            .map(|(name, why)| format!("`{name}` ({why})"))
            .collect();
        if flagged.len() > NAMES_SHOWN {
            shown.push(format!("{} more", flagged.len() - NAMES_SHOWN));
        }
        Ok(Some((
            format!(
                "sets {}, which git on the host would run or load",
                shown.join(", ")
            ),
            entries,
        )))
    }

    /// Inspects `hooks` of the git dir `dir` at `path`.
    fn hooks(&mut self, dir: &impl AsFd, path: &Path) {
        let hooks = path.join("hooks");
        if self.is_protected(&hooks) {
            return;
        }
        let Some(st) = lstat_at(dir, OsStr::new("hooks")) else {
            return;
        };
        match kind_of(&st) {
            Kind::Symlink if self.changed(&st) => {
                let reason = "is a symlink, so git would run hooks from wherever it points".into();
                return self.quarantine(dir, OsStr::new("hooks"), &hooks, reason, None);
            }
            Kind::Dir => {}
            _ => return,
        }
        let Ok(fd) = openat(
            dir.as_fd(),
            "hooks",
            OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::empty(),
        ) else {
            return;
        };
        let Some((hooks_dir, entries)) = list(fd) else {
            self.out.incomplete.push(format!(
                "the hooks directory `{}` could not be read",
                hooks.display()
            ));
            return;
        };
        if entries.len() > MAX_HOOKS {
            let reason = format!(
                "holds more than {MAX_HOOKS} entries, more than bridle checks one by one for hooks git would run"
            );
            return self.quarantine(dir, OsStr::new("hooks"), &hooks, reason, None);
        }
        for (name, kind) in entries {
            let runnable = match kind {
                Kind::Symlink if !never_run(&name) => {
                    Some("a symlink in place of a hook, which git would run")
                }
                Kind::File if !never_run(&name) => lstat_at(&hooks_dir, &name)
                    .filter(|st| st.st_mode & 0o111 != 0)
                    .map(|_| "an executable hook, which git on the host would run"),
                _ => None,
            };
            let Some(why) = runnable else { continue };
            let changed = lstat_at(&hooks_dir, &name).is_none_or(|st| self.changed(&st));
            let path = hooks.join(&name);
            if changed && !self.is_protected(&path) {
                self.quarantine(&hooks_dir, &name, &path, format!("is {why}"), None);
            }
        }
    }

    /// Moves the entry `name` of `dir` (at `path`) aside and records it; with `replacement`, a
    /// fresh config holding only the entries of it git needs (and that run nothing) is written
    /// in its place.
    fn quarantine(
        &mut self,
        dir: &impl AsFd,
        name: &OsStr,
        path: &Path,
        reason: String,
        replacement: Option<Vec<git_config::StrictEntry>>,
    ) {
        let moved_to = move_aside_at(dir.as_fd(), name, path);
        let kept = match (&moved_to, replacement) {
            (Some(to), Some(entries)) => {
                let heading = format!("{WRITTEN_BY}\n{}", to.display());
                let (text, kept) = git_config::safe_config(&entries, &heading);
                write_new(dir, name, text.as_bytes()).ok().map(|()| kept)
            }
            _ => None,
        };
        self.out.quarantined.push(Quarantined {
            path: path.to_path_buf(),
            reason,
            moved_to,
            kept,
        });
    }
}

/// Whether git never runs a hook named `name`: git's own samples, and what bridle moved aside
/// (git runs hooks by their exact names).
fn never_run(name: &OsStr) -> bool {
    let name = name.as_bytes();
    name.ends_with(b".sample") || name.windows(14).any(|w| w == b".bridle-moved-")
}

/// Creates the file `name` in `dir` with `content`, never over anything and never through a
/// symlink.
fn write_new(dir: &impl AsFd, name: &OsStr, content: &[u8]) -> std::io::Result<()> {
    let fd = openat(
        dir.as_fd(),
        name,
        OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::from_bits_truncate(0o644),
    )?;
    std::fs::File::from(fd).write_all(content)
}
