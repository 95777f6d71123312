//! The walks below a git dir: submodule git dirs under `modules` and linked worktrees under
//! `worktrees`, each bounded, never through a symlink.

use std::path::{Path, PathBuf};

use super::{
    Found, GIT_OWN_DIRS, MAX_DEPTH, MAX_MODULE_DIRS, git_config, is_git_dir_like, is_real_dir,
    missing, names_git_dir, read_small,
};

impl Found<'_> {
    /// Walks `.git/modules`: a directory holding `HEAD` or `config` is a submodule's git dir
    /// (`config` is bound read-only once found, so the command cannot hide a known one by
    /// removing its `HEAD`); any other directory is part of a submodule name with slashes.
    /// Inside a git dir, `modules` and every directory that is not one of git's own are walked
    /// on too (a planted `HEAD` in `libs` must not hide `libs/foo`). Returns false when the
    /// walk had to stop early.
    pub(super) fn modules(
        &mut self,
        dir: &Path,
        root: &Path,
        names: &[PathBuf],
        depth: usize,
        budget: &mut usize,
    ) -> bool {
        if depth > MAX_DEPTH {
            return false;
        }
        let entries = match std::fs::read_dir(dir) {
            Ok(entries) => entries,
            Err(e) if missing(&e) => return true,
            Err(e) => {
                self.unreadable(dir.to_path_buf(), &e);
                return true;
            }
        };
        let inside_git_dir = is_git_dir_like(dir);
        for entry in entries {
            let entry = match entry {
                Ok(entry) => entry,
                Err(e) => {
                    self.unreadable(dir.to_path_buf(), &e);
                    return true;
                }
            };
            // Never followed: a symlink here is not walked into.
            if !entry.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            if inside_git_dir
                && GIT_OWN_DIRS.contains(&entry.file_name().to_string_lossy().as_ref())
            {
                continue;
            }
            if *budget == 0 {
                return false;
            }
            *budget -= 1;
            let path = entry.path();
            let git_dir = match (
                std::fs::symlink_metadata(path.join("HEAD")),
                std::fs::symlink_metadata(path.join("config")),
            ) {
                (Ok(_), _) | (_, Ok(_)) => true,
                (Err(e), _) | (_, Err(e)) if !missing(&e) => {
                    self.unreadable(path, &e);
                    continue;
                }
                _ => false,
            };
            if git_dir {
                let shown = path
                    .strip_prefix(root)
                    .unwrap_or(&path)
                    .display()
                    .to_string();
                self.module(&path, root, names, &shown);
                let nested = path.join("modules");
                if is_real_dir(&nested) && !self.modules(&nested, root, names, depth + 1, budget) {
                    return false;
                }
            }
            if !self.modules(&path, root, names, depth + 1, budget) {
                return false;
            }
        }
        true
    }

    /// One submodule git dir. Its config may be the command's (a git dir it made), so what it
    /// points at is protected only inside the git dir; the checkout's `.git` file it names
    /// through `core.worktree` is one path, in a real directory other than a root.
    pub(super) fn module(&mut self, git_dir: &Path, root: &Path, names: &[PathBuf], shown: &str) {
        let what = format!("git dir of submodule `{shown}`");
        self.git_dir(git_dir, names, true, &what);
        for config in ["config", "config.worktree"] {
            self.config_targets(&git_dir.join(config), git_dir, Some(git_dir), 0);
        }
        let worktree = read_small(&git_dir.join("config"))
            .and_then(|text| git_config::value(&text, "core", "worktree"));
        let Some(worktree) = worktree else {
            return;
        };
        let checkout = bridle_policy::normalize(&git_dir.join(worktree));
        if checkout == root || self.roots.contains(&checkout) || !is_real_dir(&checkout) {
            return;
        }
        // The config may be the command's: only a `.git` file that names this very git dir is
        // protected, and a missing one must stay absent only in an empty directory (a submodule
        // that is not checked out), never in a directory with content of its own.
        let dot_git = checkout.join(".git");
        let what = format!("git file of the checkout of submodule `{shown}`");
        match std::fs::symlink_metadata(&dot_git) {
            Ok(meta) if meta.is_file() => {
                if names_git_dir(&dot_git, git_dir) {
                    self.protect(dot_git, what);
                    self.checkouts.push(checkout.clone());
                }
            }
            Ok(_) => {}
            Err(e) if missing(&e) => {
                let empty = std::fs::read_dir(&checkout).is_ok_and(|mut d| d.next().is_none());
                if empty {
                    self.add(dot_git, what, true);
                }
            }
            Err(e) => self.unreadable(checkout, &e),
        }
    }

    /// Linked worktrees: their redirects, and the `.git` file of each checkout (named by
    /// `gitdir`) when it is a `.git` file in a writable root that names this worktree's git dir
    /// back (`gitdir` may be the command's). At most [`MAX_MODULE_DIRS`] are looked at; past
    /// that, all of `.git/worktrees` is protected.
    pub(super) fn worktrees(&mut self, git: &Path) {
        let dir = git.join("worktrees");
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) if missing(&e) => return,
            Err(e) => return self.unreadable(dir, &e),
        };
        let mut budget = MAX_MODULE_DIRS;
        for entry in entries {
            let entry = match entry {
                Ok(entry) => entry,
                Err(e) => return self.unreadable(dir, &e),
            };
            if !entry.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            if budget == 0 {
                let what = "linked worktrees (more than bridle checks one by one)".into();
                return self.protect(dir, what);
            }
            budget -= 1;
            let path = entry.path();
            let what = format!(
                "git dir of linked worktree `{}`",
                entry.file_name().to_string_lossy()
            );
            self.redirects(&path, &what);
            // `gitdir` says where the checkout's `.git` file is: kept as it is, so that the
            // command cannot point it elsewhere to have a later run leave that file out.
            if std::fs::symlink_metadata(path.join("gitdir")).is_ok() {
                self.protect(path.join("gitdir"), what.clone());
            }
            if let Some(text) = read_small(&path.join("gitdir")) {
                let gitfile = bridle_policy::normalize(&path.join(text.trim()));
                if gitfile.file_name().is_some_and(|n| n == ".git")
                    && std::fs::symlink_metadata(&gitfile).is_ok_and(|m| m.is_file())
                    && names_git_dir(&gitfile, &path)
                {
                    let what = format!("{what}: the `.git` file of its checkout");
                    if let Some(tree) = gitfile.parent() {
                        self.checkouts.push(tree.to_path_buf());
                    }
                    self.protect(gitfile, what);
                }
            }
        }
    }
}
