//! Finding the other git directories a repository in a writable root uses, so that what the
//! profile protects in `.git` (`hooks` and `config` by default) is protected in each of them too.
//!
//! git runs hooks and configured commands (`core.fsmonitor`, filters, `core.sshCommand`, ...)
//! from more places than `.git/hooks` and `.git/config`:
//!
//! - submodule git dirs, `.git/modules/NAME` (nested: `.git/modules/A/modules/B`), which
//!   `git status` in the superproject enters to check each submodule;
//! - the `.git` file of each submodule checkout, which names its git dir and could be pointed
//!   elsewhere (found through `core.worktree` in the submodule's protected config, and through
//!   `.gitmodules`);
//! - linked worktrees, `.git/worktrees/NAME`, whose `commondir` names the directory git takes
//!   config and hooks from and whose `config.worktree` is read as config;
//! - `commondir` and `config.worktree` of every git dir, including the main one, which must not
//!   appear when missing;
//! - the git dir a `.git` file at the root names, when it lies inside a writable root.
//!
//! Missing files git would read are returned as "must stay absent" (a placeholder directory
//! would break git); a missing `hooks` is protected, which gives it an empty placeholder. The
//! walk never follows symlinks: an entry reached through one is skipped (git dirs behind a
//! symlink are like repositories the command creates, see the README's known gaps). When
//! `.git/modules` holds more directories than the walk looks at, the whole of it is protected.

use std::path::{Component, Path, PathBuf};

use bridle_policy::{FoundPath, Plan};

/// At most this many directories are looked at under one `.git/modules`.
const MAX_MODULE_DIRS: usize = 4_096;

/// Deepest nesting looked at under `.git/modules`.
const MAX_MODULE_DEPTH: usize = 32;

/// Config files and `.gitmodules` larger than this are not read.
const MAX_TEXT_BYTES: u64 = 1 << 20;

/// Names in a git dir that git reads as files and that must not appear when missing.
const FILE_NAMES: &[&str] = &["config", "commondir", "config.worktree"];

/// The paths to protect beyond the profile's, each with what it is (for `bridle policy explain`
/// and denial messages).
pub fn discover(plan: &Plan) -> Vec<FoundPath> {
    let roots: Vec<PathBuf> = plan
        .content_roots()
        .into_iter()
        .map(Path::to_path_buf)
        .collect();
    let mut found = Found {
        roots: &roots,
        out: Vec::new(),
    };
    for root in &roots {
        let names = plan.protected_git_names(root);
        if names.is_empty() {
            continue;
        }
        let git = root.join(".git");
        if is_real_dir(&git) {
            found.redirects(&git, &names, "the repository's git dir");
            let modules = git.join("modules");
            if is_real_dir(&modules) {
                let mut budget = MAX_MODULE_DIRS;
                if !found.modules(&modules, root, &names, 0, &mut budget) {
                    found.protect(
                        modules,
                        "submodule git dirs (more than bridle checks one by one)".into(),
                    );
                }
            }
            found.worktrees(&git, &names);
        } else if is_real_file(&git)
            && let Some(dir) = read_gitfile(&git)
        {
            let what = format!("git dir named by `{}`", git.display());
            found.git_dir(&dir, &names, &what);
        }
        found.gitmodules_checkouts(root, &names);
    }
    found.out
}

fn is_real_dir(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.is_dir())
}

fn is_real_file(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.is_file())
}

struct Found<'a> {
    roots: &'a [PathBuf],
    out: Vec<FoundPath>,
}

impl Found<'_> {
    fn add(&mut self, path: PathBuf, what: String, absent: bool) {
        if self.roots.iter().any(|r| path.starts_with(r))
            && !self.out.iter().any(|f| f.path == path)
        {
            self.out.push(FoundPath { path, what, absent });
        }
    }

    fn protect(&mut self, path: PathBuf, what: String) {
        self.add(path, what, false);
    }

    /// Protects `path` when it exists (as it is: a symlink there makes the run refuse, as for
    /// the profile's own paths); when missing, a file git reads must stay absent and anything
    /// else is protected (and gets an empty placeholder directory).
    fn guard(&mut self, path: PathBuf, what: &str) {
        let exists = std::fs::symlink_metadata(&path).is_ok();
        let file_name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let absent = !exists && FILE_NAMES.contains(&file_name);
        self.add(path, what.to_string(), absent);
    }

    /// `commondir` and `config.worktree` of the git dir `dir`: the files that redirect or add to
    /// its config and hooks.
    fn redirects(&mut self, dir: &Path, names: &[PathBuf], what: &str) {
        self.guard(dir.join("commondir"), what);
        if names.iter().any(|n| n == Path::new("config")) {
            self.guard(dir.join("config.worktree"), what);
        }
    }

    /// Protects the profile's `.git` names, and the redirects, inside the git dir `dir`.
    fn git_dir(&mut self, dir: &Path, names: &[PathBuf], what: &str) {
        for name in names {
            self.guard(dir.join(name), what);
        }
        self.redirects(dir, names, what);
    }

    /// Walks `.git/modules`: a directory holding `HEAD` is a submodule's git dir (which may
    /// have `modules` of its own); any other directory is part of a submodule name with
    /// slashes. Returns false when the walk had to stop early.
    fn modules(
        &mut self,
        dir: &Path,
        root: &Path,
        names: &[PathBuf],
        depth: usize,
        budget: &mut usize,
    ) -> bool {
        if depth > MAX_MODULE_DEPTH {
            return false;
        }
        let Ok(entries) = std::fs::read_dir(dir) else {
            return true;
        };
        for entry in entries.flatten() {
            // Never followed: a symlink here is not walked into.
            if !entry.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            if *budget == 0 {
                return false;
            }
            *budget -= 1;
            let path = entry.path();
            let complete = if std::fs::symlink_metadata(path.join("HEAD")).is_ok() {
                let shown = path
                    .strip_prefix(root)
                    .unwrap_or(&path)
                    .display()
                    .to_string();
                let what = format!("git dir of submodule `{shown}`");
                self.git_dir(&path, names, &what);
                self.checkout_of(&path, names, &shown);
                let nested = path.join("modules");
                !is_real_dir(&nested) || self.modules(&nested, root, names, depth + 1, budget)
            } else {
                self.modules(&path, root, names, depth + 1, budget)
            };
            if !complete {
                return false;
            }
        }
        true
    }

    /// The checkout of the submodule whose git dir is `git_dir`, from `core.worktree` in its
    /// (protected) config: its `.git` file must keep naming this git dir, and must not appear
    /// when the submodule is not checked out.
    fn checkout_of(&mut self, git_dir: &Path, names: &[PathBuf], shown: &str) {
        let Some(text) = read_small(&git_dir.join("config")) else {
            return;
        };
        let Some(worktree) = config_value(&text, "core", "worktree") else {
            return;
        };
        let checkout = bridle_policy::normalize(&git_dir.join(worktree));
        let dot_git = checkout.join(".git");
        let what = format!("git file of the checkout of submodule `{shown}`");
        match std::fs::symlink_metadata(&dot_git) {
            Ok(meta) if meta.is_dir() => self.git_dir(&dot_git, names, &what),
            Ok(_) => self.protect(dot_git, what),
            Err(_) if is_real_dir(&checkout) => self.add(dot_git, what, true),
            Err(_) => {}
        }
    }

    /// Linked worktrees: `commondir` redirects config and hooks; `config.worktree` is config.
    fn worktrees(&mut self, git: &Path, names: &[PathBuf]) {
        let Ok(entries) = std::fs::read_dir(git.join("worktrees")) else {
            return;
        };
        for entry in entries.flatten() {
            if !entry.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            let what = format!(
                "git dir of linked worktree `{}`",
                entry.file_name().to_string_lossy()
            );
            self.redirects(&entry.path(), names, &what);
        }
    }

    /// Submodule checkouts listed in `.gitmodules` (which the command can change, so this only
    /// adds protection): a `.git` directory is a git dir; a `.git` file is protected itself.
    fn gitmodules_checkouts(&mut self, root: &Path, names: &[PathBuf]) {
        let Some(text) = read_small(&root.join(".gitmodules")) else {
            return;
        };
        for path in gitmodules_paths(&text) {
            let mut dir = root.to_path_buf();
            // Nothing reached through a symlink.
            if !path.components().all(|c| {
                dir.push(c);
                is_real_dir(&dir)
            }) {
                continue;
            }
            let dot_git = dir.join(".git");
            let what = format!("submodule checkout `{}`", path.display());
            match std::fs::symlink_metadata(&dot_git) {
                Ok(meta) if meta.is_dir() => self.git_dir(&dot_git, names, &what),
                Ok(meta) if meta.is_file() => self.protect(dot_git, what),
                _ => {}
            }
        }
    }
}

/// The text of a regular file no larger than [`MAX_TEXT_BYTES`].
fn read_small(path: &Path) -> Option<String> {
    let meta = std::fs::symlink_metadata(path).ok()?;
    if !meta.is_file() || meta.len() > MAX_TEXT_BYTES {
        return None;
    }
    std::fs::read_to_string(path).ok()
}

/// The last value of `section.key` in a git config text (section and key names compared
/// without case; subsections are not matched; `;` and `#` start comments outside quotes).
fn config_value(text: &str, section: &str, key: &str) -> Option<String> {
    let mut current = String::new();
    let mut value = None;
    for line in text.lines() {
        let line = line.trim();
        if let Some(rest) = line.strip_prefix('[') {
            let name = rest.split(']').next().unwrap_or("").trim();
            current = if name.contains(['"', ' ', '.']) {
                String::new()
            } else {
                name.to_ascii_lowercase()
            };
            continue;
        }
        if current != section {
            continue;
        }
        let Some((k, v)) = line.split_once('=') else {
            continue;
        };
        if k.trim().eq_ignore_ascii_case(key) {
            value = Some(unquote(v));
        }
    }
    value
}

/// A config value without surrounding whitespace, comments and double quotes.
fn unquote(raw: &str) -> String {
    let mut out = String::new();
    let mut quoted = false;
    let mut chars = raw.trim().chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => quoted = !quoted,
            '\\' => {
                if let Some(next) = chars.next() {
                    out.push(next);
                }
            }
            ';' | '#' if !quoted => break,
            c => out.push(c),
        }
    }
    out.trim_end().to_string()
}

/// The `path = ...` values of a `.gitmodules` text that stay inside the repository.
fn gitmodules_paths(text: &str) -> Vec<PathBuf> {
    text.lines()
        .filter_map(|line| {
            let (key, value) = line.trim().split_once('=')?;
            key.trim()
                .eq_ignore_ascii_case("path")
                .then(|| unquote(value))
        })
        .map(PathBuf::from)
        .filter(|p| {
            !p.as_os_str().is_empty() && p.components().all(|c| matches!(c, Component::Normal(_)))
        })
        .collect()
}

/// The git dir a `.git` file names (`gitdir: PATH`, relative to the file's directory).
fn read_gitfile(file: &Path) -> Option<PathBuf> {
    let text = read_small(file)?;
    let target = text.lines().next()?.strip_prefix("gitdir:")?.trim();
    let dir = file.parent()?.join(target);
    std::fs::canonicalize(dir).ok()
}

#[cfg(test)]
#[path = "git_dirs_tests.rs"]
mod tests;
