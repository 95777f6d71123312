//! Finding the other git directories a repository in a writable root uses, so that what the
//! profile protects in `.git` (`hooks` and `config` by default) is protected in each of them too.
//!
//! git runs hooks and configured commands (`core.fsmonitor`, filters, `core.sshCommand`, ...)
//! from more places than `.git/hooks` and `.git/config`:
//!
//! - submodule git dirs, `.git/modules/NAME` (nested: `.git/modules/A/modules/B`), which
//!   `git status` in the superproject enters to check each submodule;
//! - older submodule checkouts that keep a whole `.git` directory in the working tree, and
//!   checkouts whose `.git` is a file naming their git dir (`gitdir: ...`), which could be
//!   pointed elsewhere;
//! - linked worktrees, `.git/worktrees/NAME`, whose `commondir` names the directory git takes
//!   config and hooks from and whose `config.worktree` is read as config;
//! - `.git/config.worktree` of the main worktree, and the git dir a `.git` file at the root
//!   names, when it lies inside a writable root.
//!
//! Only what exists is returned (missing paths would need placeholders, which git would then
//! trip over). The walk is bounded and never follows symlinks; a symlink found on a protected
//! name is resolved and its target protected when it lies in a writable root.
//!
//! Not covered: a repository the command itself creates during the run (see the README's known
//! gaps); that is the command's own content, like any other file it writes.

use std::path::{Component, Path, PathBuf};

use bridle_policy::Plan;

/// At most this many directories are looked at under `.git/modules`.
const MAX_MODULE_DIRS: usize = 10_000;

/// `.gitmodules` larger than this is not read.
const MAX_GITMODULES_BYTES: u64 = 1 << 20;

/// The paths to protect beyond the profile's, each with what it is (for `bridle policy explain`
/// and denial messages).
pub fn discover(plan: &Plan) -> Vec<(PathBuf, String)> {
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
        match std::fs::symlink_metadata(&git) {
            Ok(meta) if meta.is_dir() => {
                let mut budget = MAX_MODULE_DIRS;
                found.modules(&git.join("modules"), root, &names, 0, &mut budget);
                found.worktrees(&git, &names);
                if names.iter().any(|n| n == Path::new("config")) {
                    found.push(
                        git.join("config.worktree"),
                        "the main worktree's config".into(),
                    );
                }
            }
            Ok(meta) if meta.is_file() => {
                if let Some(dir) = read_gitfile(&git) {
                    found.git_dir(
                        &dir,
                        &names,
                        &format!("git dir named by `{}`", git.display()),
                    );
                    found.push(
                        dir.join("commondir"),
                        format!("git dir named by `{}`", git.display()),
                    );
                }
            }
            _ => {}
        }
        found.submodule_checkouts(root, &names);
    }
    found.out
}

struct Found<'a> {
    roots: &'a [PathBuf],
    out: Vec<(PathBuf, String)>,
}

impl Found<'_> {
    /// Records `path` when it exists; a symlink is resolved and its target recorded instead.
    fn push(&mut self, path: PathBuf, what: String) {
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            return;
        };
        let path = if meta.file_type().is_symlink() {
            match std::fs::canonicalize(&path) {
                Ok(target) => target,
                Err(_) => return,
            }
        } else {
            path
        };
        if self.roots.iter().any(|r| path.starts_with(r))
            && !self.out.iter().any(|(p, _)| *p == path)
        {
            self.out.push((path, what));
        }
    }

    /// Protects the profile's `.git` names inside the git dir `dir`.
    fn git_dir(&mut self, dir: &Path, names: &[PathBuf], what: &str) {
        for name in names {
            self.push(dir.join(name), what.to_string());
        }
    }

    /// Walks `.git/modules`: a directory holding `HEAD` is a submodule's git dir (which may
    /// have `modules` of its own); any other directory is part of a submodule name with slashes.
    fn modules(
        &mut self,
        dir: &Path,
        root: &Path,
        names: &[PathBuf],
        depth: usize,
        budget: &mut usize,
    ) {
        if depth > 32 {
            return;
        }
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            if *budget == 0 {
                return;
            }
            *budget -= 1;
            if !entry.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            let path = entry.path();
            if std::fs::symlink_metadata(path.join("HEAD")).is_ok() {
                let shown = path
                    .strip_prefix(root)
                    .unwrap_or(&path)
                    .display()
                    .to_string();
                self.git_dir(&path, names, &format!("git dir of submodule `{shown}`"));
                self.modules(&path.join("modules"), root, names, depth + 1, budget);
            } else {
                self.modules(&path, root, names, depth + 1, budget);
            }
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
            let path = entry.path();
            let what = format!(
                "git dir of linked worktree `{}`",
                entry.file_name().to_string_lossy()
            );
            self.push(path.join("commondir"), what.clone());
            if names.iter().any(|n| n == Path::new("config")) {
                self.push(path.join("config.worktree"), what);
            }
        }
    }

    /// Submodule checkouts listed in `.gitmodules`: a `.git` directory is a git dir; a `.git`
    /// file names one and is protected itself so it cannot be pointed elsewhere.
    fn submodule_checkouts(&mut self, root: &Path, names: &[PathBuf]) {
        let file = root.join(".gitmodules");
        let Ok(meta) = std::fs::symlink_metadata(&file) else {
            return;
        };
        if !meta.is_file() || meta.len() > MAX_GITMODULES_BYTES {
            return;
        }
        let Ok(text) = std::fs::read_to_string(&file) else {
            return;
        };
        for path in gitmodules_paths(&text) {
            let dot_git = root.join(&path).join(".git");
            let shown = path.display();
            match std::fs::symlink_metadata(&dot_git) {
                Ok(meta) if meta.is_dir() => {
                    self.git_dir(
                        &dot_git,
                        names,
                        &format!("git dir of submodule checkout `{shown}`"),
                    );
                }
                Ok(meta) if meta.is_file() => {
                    self.push(dot_git, format!("git file of submodule checkout `{shown}`"));
                }
                _ => {}
            }
        }
    }
}

/// The `path = ...` values of a `.gitmodules` text that stay inside the repository.
fn gitmodules_paths(text: &str) -> Vec<PathBuf> {
    text.lines()
        .filter_map(|line| {
            let (key, value) = line.trim().split_once('=')?;
            (key.trim() == "path").then(|| value.trim().trim_matches('"').to_string())
        })
        .map(PathBuf::from)
        .filter(|p| {
            !p.as_os_str().is_empty() && p.components().all(|c| matches!(c, Component::Normal(_)))
        })
        .collect()
}

/// The git dir a `.git` file names (`gitdir: PATH`, relative to the file's directory).
fn read_gitfile(file: &Path) -> Option<PathBuf> {
    let meta = std::fs::metadata(file).ok()?;
    if meta.len() > 4096 {
        return None;
    }
    let text = std::fs::read_to_string(file).ok()?;
    let target = text.lines().next()?.strip_prefix("gitdir:")?.trim();
    let dir = file.parent()?.join(target);
    std::fs::canonicalize(dir).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn gitmodules_paths_stay_inside_the_repository() {
        let text = "[submodule \"a\"]\n\tpath = lib/a\n\turl = x\n[submodule \"b\"]\n\tpath = ../escape\n[submodule \"c\"]\n\tpath = /abs\n[submodule \"d\"]\n\tpath = \"quoted\"\n";
        assert_eq!(
            gitmodules_paths(text),
            vec![PathBuf::from("lib/a"), PathBuf::from("quoted")]
        );
    }
}
