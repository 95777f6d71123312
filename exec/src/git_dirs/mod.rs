//! Finding the other git metadata a repository in a writable root uses, so that what the
//! profile protects in `.git` (`hooks` and `config` by default) is protected wherever git would
//! read it from: a command that can write there can have git on the host run anything
//! (`core.fsmonitor`, hooks, filters, `core.pager`, ...).
//!
//! Found when a run is planned:
//! - submodule git dirs, `.git/modules/NAME` (nested: `.git/modules/A/modules/B`), which
//!   `git status` in the superproject enters, and the `.git` file of each submodule checkout
//!   (located through `core.worktree` in the submodule's config; `.gitmodules`, which the
//!   command can edit, only adds to that);
//! - linked worktrees, `.git/worktrees/NAME`, and the `.git` file of their checkouts inside a
//!   writable root; a workspace that is itself a linked worktree: its common git dir;
//! - `commondir` and `config.worktree` in every git dir (redirects to other config and hooks);
//! - files the configs include (`include.path`, `includeIf.*.path`) and `core.hooksPath`;
//! - `HEAD` at the root of a writable root holding a repository: with one there (and
//!   `objects/`, `refs/`), git would take the root for a bare repository once `.git` is
//!   unusable.
//!
//! What a discovery may do is bounded by whom the data comes from, because the command can
//! write much of it and a later run acts on it:
//! - the repository's own `config` and `config.worktree` (protected in every run) and the
//!   user's global and system config (outside the workspace) are trusted: what they include or
//!   name as hooks directory is protected wherever it is;
//! - a submodule's config may have been written by the command (a git dir it made): what it
//!   points at is protected only inside that submodule's git dir, so it cannot make the rest
//!   of the workspace read-only in later runs;
//! - nothing reached through a symlink is protected or walked (a symlink cannot be bound
//!   read-only, and one the command planted must not make later runs refuse); a symlink where a
//!   protected name of a git dir should be makes that whole git dir read-only instead;
//! - a directory that cannot be read is protected whole, never skipped;
//! - at most `MAX_MODULE_DIRS` directories under `.git/modules` are looked at; past that, all
//!   of it is protected.
//!
//! A missing file git would read must stay absent (a placeholder directory would break git); a
//! missing hooks directory is protected (it gets an empty placeholder).

use std::collections::HashSet;
use std::path::{Component, Path, PathBuf};

use bridle_policy::{FoundPath, Plan};

use bridle_policy::git_config;

/// At most this many directories are looked at under one `.git/modules`.
const MAX_MODULE_DIRS: usize = 256;

/// Deepest nesting looked at under `.git/modules`, and of config includes.
const MAX_DEPTH: usize = 16;

/// Config files, `.gitmodules` and `.git` files larger than this are not read.
const MAX_TEXT_BYTES: u64 = 1 << 20;

/// Directories git itself keeps in a git dir: not walked for nested submodule git dirs.
const GIT_OWN_DIRS: &[&str] = &[
    "objects",
    "refs",
    "logs",
    "hooks",
    "info",
    "branches",
    "rr-cache",
    "lfs",
    "worktrees",
    "modules",
    "rebase-merge",
    "rebase-apply",
    "sequencer",
    "refs-tmp",
];

/// Directories of an operation in progress (rebase, am, cherry-pick, revert): their todo lists
/// and options make `git rebase --continue` and friends run commands.
const OPERATION_DIRS: &[&str] = &["rebase-merge", "rebase-apply", "sequencer"];

/// Names in a git dir that git reads as files and that must not appear when missing.
const FILE_NAMES: &[&str] = &["config", "commondir", "config.worktree"];

/// The paths to protect beyond the profile's, each with what it is (for `bridle policy explain`
/// and denial messages). `home` locates the user's global git config; `GIT_CONFIG_GLOBAL`,
/// `GIT_CONFIG_SYSTEM` and `GIT_CONFIG_NOSYSTEM` are honoured as git does.
pub fn discover(plan: &Plan, home: &Path) -> Vec<FoundPath> {
    let roots: Vec<PathBuf> = plan
        .content_roots()
        .into_iter()
        .map(Path::to_path_buf)
        .collect();
    let user_configs = user_configs(home);
    let mut found = Found {
        roots: &roots,
        home,
        seen: HashSet::new(),
        configs: HashSet::new(),
        untrusted_reads: 0,
        checkouts: Vec::new(),
        relative_hooks: Vec::new(),
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
                found.repo(&git, root, &names, false, "the repository's git dir");
                found.bare_root(root);
            }
            Ok(meta) if meta.is_file() => {
                if let Some(dir) = read_gitfile(&git) {
                    found.gitfile_target(&dir, root, &names);
                }
                found.bare_root(root);
            }
            _ if is_git_dir(root) => {
                let what = "a writable root that is a git dir";
                found.repo(root, root, &names, true, what);
            }
            _ => {}
        }
        for config in &user_configs {
            found.config_targets(config, root, None, 0);
        }
        found.gitmodules_checkouts(root, &names);
    }
    // A relative hooks path is relative to each working tree git runs hooks in.
    let hooks = std::mem::take(&mut found.relative_hooks);
    for checkout in std::mem::take(&mut found.checkouts) {
        for (value, what) in &hooks {
            found.guard(checkout.join(value), what, false);
        }
    }
    found.out
}

/// The user's global and system config files, as git finds them.
fn user_configs(home: &Path) -> Vec<PathBuf> {
    let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    let mut configs = Vec::new();
    match var("GIT_CONFIG_GLOBAL") {
        Some(global) => configs.push(PathBuf::from(global)),
        None => {
            let xdg = var("XDG_CONFIG_HOME")
                .map(PathBuf::from)
                .filter(|p| p.is_absolute())
                .unwrap_or_else(|| home.join(".config"));
            configs.push(xdg.join("git/config"));
            configs.push(home.join(".gitconfig"));
        }
    }
    if var("GIT_CONFIG_NOSYSTEM").is_none() {
        configs
            .push(var("GIT_CONFIG_SYSTEM").map_or_else(|| "/etc/gitconfig".into(), PathBuf::from));
    }
    configs
}

fn is_real_dir(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.is_dir())
}

fn is_git_dir(path: &Path) -> bool {
    std::fs::symlink_metadata(path.join("HEAD")).is_ok_and(|m| m.is_file())
        && is_real_dir(&path.join("objects"))
}

/// Whether `dir` holds a `HEAD` or a `config` (what a submodule git dir has).
fn is_git_dir_like(dir: &Path) -> bool {
    ["HEAD", "config"]
        .iter()
        .any(|name| std::fs::symlink_metadata(dir.join(name)).is_ok_and(|m| m.is_file()))
}

fn missing(error: &std::io::Error) -> bool {
    error.kind() == std::io::ErrorKind::NotFound
}

struct Found<'a> {
    roots: &'a [PathBuf],
    home: &'a Path,
    seen: HashSet<PathBuf>,
    /// Config files already read (an include cycle is read once).
    configs: HashSet<PathBuf>,
    /// Config files read that the command may have written (see [`MAX_CONFIGS`]).
    untrusted_reads: usize,
    /// Working trees found besides the roots (linked worktrees, submodule checkouts): a
    /// relative `core.hooksPath` of a trusted config applies in each.
    checkouts: Vec<PathBuf>,
    /// Relative `core.hooksPath` values of trusted configs, with where they were read.
    relative_hooks: Vec<(String, String)>,
    out: Vec<FoundPath>,
}

/// At most this many config files the command may have written (submodules') are read for one
/// run, includes included; the repository's own and the user's are always read.
const MAX_CONFIGS: usize = 64;

impl Found<'_> {
    /// Records `path` when it lies in a root and nothing on the way to it from the root (itself
    /// included) is a symlink or cannot be inspected; anything else is left out with a log line.
    fn add(&mut self, path: PathBuf, what: String, absent: bool) {
        let mut path = bridle_policy::normalize(&path);
        let mut what = what;
        let Some(root) = self.roots.iter().find(|r| path.starts_with(r)) else {
            return;
        };
        let mut at = root.clone();
        let relative = path.strip_prefix(root).unwrap_or(&path).to_path_buf();
        for component in relative.components() {
            at.push(component);
            match std::fs::symlink_metadata(&at) {
                Ok(meta) if meta.file_type().is_symlink() => {
                    tracing::info!(path = %path.display(), "not protected: `{}` on the way is a symlink", at.display());
                    return;
                }
                Ok(_) => {}
                Err(e) if missing(&e) => {
                    // A path that must stay absent is watched at its first missing component,
                    // whose directory exists (and is pinned): otherwise the command could create
                    // the directories on the way, a symlink among them, and have the file land
                    // elsewhere.
                    if absent && at != path {
                        what = format!("{what} (on the way to `{}`)", path.display());
                        path = at;
                    }
                    break;
                }
                Err(e) => {
                    tracing::info!(path = %path.display(), "not protected: `{}` cannot be inspected: {e}", at.display());
                    return;
                }
            }
        }
        if !self.seen.insert(path.clone()) {
            return;
        }
        self.out.push(FoundPath { path, what, absent });
    }

    fn protect(&mut self, path: PathBuf, what: String) {
        self.add(path, what, false);
    }

    /// A directory that could not be read: protected whole (bound read-only as it is, so a
    /// command that made it unreadable cannot undo that either), never skipped.
    fn unreadable(&mut self, dir: PathBuf, error: &std::io::Error) {
        let what = format!("unreadable, so protected whole ({error})");
        self.protect(dir, what);
    }

    /// Protects `path` when it exists; when missing, a file git reads (a [`FILE_NAMES`] entry,
    /// or any path when `file`) must stay absent and a directory is protected (and gets an
    /// empty placeholder).
    fn guard(&mut self, path: PathBuf, what: &str, file: bool) {
        match std::fs::symlink_metadata(&path) {
            Ok(_) => self.protect(path, what.to_string()),
            Err(e) if missing(&e) => {
                let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
                let absent = file || FILE_NAMES.contains(&name);
                self.add(path, what.to_string(), absent);
            }
            Err(e) => {
                if let Some(dir) = path.parent() {
                    self.unreadable(dir.to_path_buf(), &e);
                }
            }
        }
    }

    /// `commondir` and `config.worktree` of the git dir `dir`: the files that redirect or add to
    /// its config and hooks.
    fn redirects(&mut self, dir: &Path, what: &str) {
        self.guard(dir.join("commondir"), what, true);
        self.guard(dir.join("config.worktree"), what, true);
    }

    /// Protects the profile's `.git` names inside the git dir `dir` (unless the profile's own
    /// entries already cover it), and its redirects. A symlink on one of those names makes the
    /// whole git dir read-only.
    fn git_dir(&mut self, dir: &Path, names: &[PathBuf], with_names: bool, what: &str) {
        // An operation in progress when the run starts (the user mid-rebase asking for conflicts
        // to be resolved) stays as it is: its todo list and options are not the command's to
        // extend with `exec` lines.
        for operation in OPERATION_DIRS {
            let path = dir.join(operation);
            if is_real_dir(&path) {
                self.protect(path, format!("{what}: the {operation} in progress"));
            }
        }
        if with_names {
            let linked = names.iter().find(|n| {
                std::fs::symlink_metadata(dir.join(n)).is_ok_and(|m| m.file_type().is_symlink())
            });
            if let Some(name) = linked {
                let what = format!("{what} (its `{}` is a symlink)", name.display());
                self.protect(dir.to_path_buf(), what);
                return;
            }
            for name in names {
                self.guard(dir.join(name), what, false);
            }
        }
        self.redirects(dir, what);
    }

    /// A repository's git dir `git` with `worktree` as its working tree, whose configs are
    /// trusted (unless `git` is a writable root itself): the git dir itself (its names when `with_names`: the root `.git` is covered by
    /// the profile's own entries), what its configs point at, its submodules and its linked
    /// worktrees.
    fn repo(
        &mut self,
        git: &Path,
        worktree: &Path,
        names: &[PathBuf],
        with_names: bool,
        what: &str,
    ) {
        self.git_dir(git, names, with_names, what);
        // A writable root that is itself a git dir may be one the command made (in a workspace
        // without `.git`): what its config points at is not followed.
        if self.roots.iter().all(|r| r != git) {
            for config in ["config", "config.worktree"] {
                self.config_targets(&git.join(config), worktree, None, 0);
            }
        }
        let modules = git.join("modules");
        // The submodules the repository's own (protected) config names are found by name, even
        // if the walk below were fooled.
        if self.roots.iter().all(|r| r != git)
            && let Some(text) = read_small(&git.join("config"))
        {
            if git.file_name().is_some_and(|n| n == ".git") {
                let root = git.parent().unwrap_or(git).to_path_buf();
                self.absent_modules(&root, &text, "named in the repository's config");
            }
            for entry in git_config::entries(&text) {
                if let (true, Some(name)) = (entry.section == "submodule", &entry.subsection) {
                    let path = modules.join(name);
                    let plain = Path::new(name)
                        .components()
                        .all(|c| matches!(c, Component::Normal(_)));
                    if plain && is_real_dir(&path) {
                        self.module(&path, worktree, names, &format!(".git/modules/{name}"));
                    }
                }
            }
        }
        if is_real_dir(&modules) {
            let mut budget = MAX_MODULE_DIRS;
            if !self.modules(&modules, worktree, names, 0, &mut budget) {
                self.protect(
                    modules,
                    "submodule git dirs (more than bridle checks one by one)".into(),
                );
            }
        }
        self.worktrees(git);
    }

    /// The workspace's `.git` file names the git dir `dir`: a full git dir (a separate git dir
    /// or a submodule's) is guarded as a repository; the git dir of a linked worktree gets its
    /// redirects guarded, and the common git dir it names (config and hooks live there) is
    /// guarded as a repository.
    fn gitfile_target(&mut self, dir: &Path, root: &Path, names: &[PathBuf]) {
        let Some(text) = read_small(&dir.join("commondir")) else {
            let what = format!("git dir named by `{}`", root.join(".git").display());
            return self.repo(dir, root, names, true, &what);
        };
        let what = format!("git dir of the worktree at `{}`", root.display());
        self.redirects(dir, &what);
        self.config_targets(&dir.join("config.worktree"), root, None, 0);
        if let Ok(common) = std::fs::canonicalize(dir.join(text.trim())) {
            let what = format!("common git dir of the worktree at `{}`", root.display());
            self.repo(&common, root, names, true, &what);
        }
    }

    /// What the config file `config` points at: the files it includes (followed, including
    /// ones outside the roots), and `core.hooksPath` (relative to `worktree`). With `within`,
    /// the config is not trusted and only targets inside that directory count.
    fn config_targets(
        &mut self,
        config: &Path,
        worktree: &Path,
        within: Option<&Path>,
        depth: usize,
    ) {
        if depth > MAX_DEPTH || !self.configs.insert(bridle_policy::normalize(config)) {
            return;
        }
        if within.is_some() {
            if self.untrusted_reads >= MAX_CONFIGS {
                return;
            }
            self.untrusted_reads += 1;
        }
        let text = if within.is_some() || self.roots.iter().any(|r| config.starts_with(r)) {
            read_small(config)
        } else {
            // Outside the workspace (the user's own config files): symlinks are followed, as
            // dotfile managers use them.
            read_followed(config)
        };
        let Some(text) = text else {
            return;
        };
        let counts = |target: &Path| within.is_none_or(|dir| target.starts_with(dir));
        let base = config.parent().unwrap_or(Path::new("/"));
        for include in git_config::include_paths(&text) {
            let target = bridle_policy::normalize(&self.expand(&include, base));
            if !counts(&target) {
                continue;
            }
            let what = format!("included by `{}`", config.display());
            self.guard(target.clone(), &what, true);
            self.config_targets(&target, worktree, within, depth + 1);
        }
        if let Some(hooks) = git_config::value(&text, "core", "hookspath") {
            let target = bridle_policy::normalize(&self.expand(&hooks, worktree));
            let what = format!("`core.hooksPath` in `{}`", config.display());
            if counts(&target) {
                self.guard(target, &what, false);
            }
            let relative = !hooks.starts_with('/') && !hooks.starts_with("~/");
            if within.is_none() && relative && self.relative_hooks.len() < MAX_CONFIGS {
                self.relative_hooks.push((hooks, what));
            }
        }
    }

    /// A path from a config value: `~/` is the home directory, a relative one is below `base`.
    fn expand(&self, value: &str, base: &Path) -> PathBuf {
        match value.strip_prefix("~/") {
            Some(rest) => self.home.join(rest),
            None => base.join(value),
        }
    }

    /// `HEAD` at a root that holds a repository: git must never be able to take the root for a
    /// bare repository, so an existing one is read-only and a missing one must stay absent.
    fn bare_root(&mut self, root: &Path) {
        let what = "a `HEAD` here would let git take the root for a bare repository";
        self.guard(root.join("HEAD"), what, true);
    }

    /// Submodule checkouts listed in `.gitmodules` (which the command can change, so this only
    /// adds protection, inside the checkout): a `.git` directory is a git dir, treated like a
    /// submodule's; a `.git` file is protected itself.
    fn gitmodules_checkouts(&mut self, root: &Path, names: &[PathBuf]) {
        let Some(text) = read_small(&root.join(".gitmodules")) else {
            return;
        };
        // Untrusted (the command can write it): bounded, so it cannot make planning slow.
        self.absent_modules(root, &text, "named in `.gitmodules`");
        for path in git_config::gitmodules_paths(&text)
            .into_iter()
            .take(MAX_MODULE_DIRS)
        {
            let dir = root.join(&path);
            if !path.components().all(|c| matches!(c, Component::Normal(_))) {
                continue;
            }
            let dot_git = dir.join(".git");
            let shown = path.display().to_string();
            match std::fs::symlink_metadata(&dot_git) {
                Ok(meta) if meta.is_dir() => self.module(&dot_git, root, names, &shown),
                Ok(meta) if meta.is_file() => {
                    self.protect(dot_git, format!("submodule checkout `{shown}`"));
                }
                _ => {}
            }
        }
    }
}

impl Found<'_> {
    /// The git dir of every submodule `config_text` names (`[submodule "NAME"]`) that has none
    /// yet, `.git/modules/NAME`, must stay absent: one the command planted there would be used
    /// (hooks, config and all) by `git submodule update --init` on the host.
    fn absent_modules(&mut self, root: &Path, config_text: &str, why: &str) {
        let modules = root.join(".git/modules");
        if !is_real_dir(&root.join(".git")) {
            return;
        }
        let names: Vec<String> = git_config::entries(config_text)
            .into_iter()
            .filter(|e| e.section == "submodule")
            .filter_map(|e| e.subsection)
            .collect();
        let mut seen = HashSet::new();
        for name in names.into_iter().take(MAX_MODULE_DIRS) {
            let plain = Path::new(&name)
                .components()
                .all(|c| matches!(c, Component::Normal(_)));
            if !plain || !seen.insert(name.clone()) {
                continue;
            }
            let dir = modules.join(&name);
            if std::fs::symlink_metadata(&dir).is_err_and(|e| missing(&e)) {
                let what = format!("git dir of submodule `{name}` ({why}), not made yet");
                self.add(dir, what, true);
            }
        }
    }
}

/// The text of a regular file (not a symlink) no larger than [`MAX_TEXT_BYTES`].
fn read_small(path: &Path) -> Option<String> {
    read_text(path, std::fs::symlink_metadata(path).ok()?)
}

/// Like [`read_small`], through symlinks.
fn read_followed(path: &Path) -> Option<String> {
    read_text(path, std::fs::metadata(path).ok()?)
}

fn read_text(path: &Path, meta: std::fs::Metadata) -> Option<String> {
    if !meta.is_file() || meta.len() > MAX_TEXT_BYTES {
        return None;
    }
    std::fs::read_to_string(path).ok()
}

/// Whether the `.git` file `file` names the git dir `git_dir`.
fn names_git_dir(file: &Path, git_dir: &Path) -> bool {
    let (Some(named), Ok(dir)) = (read_gitfile(file), std::fs::canonicalize(git_dir)) else {
        return false;
    };
    named == dir
}

/// The git dir a `.git` file names (`gitdir: PATH`, relative to the file's directory).
fn read_gitfile(file: &Path) -> Option<PathBuf> {
    let text = read_small(file)?;
    let target = text.lines().next()?.strip_prefix("gitdir:")?.trim();
    let dir = file.parent()?.join(target);
    std::fs::canonicalize(dir).ok()
}

mod nested;

#[cfg(test)]
mod tests;
