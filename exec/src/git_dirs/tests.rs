use std::collections::BTreeMap;
use std::fs;

use bridle_policy::{LoadRequest, Overrides, PlanContext, ShippedOnly, load, plan};
use pretty_assertions::assert_eq;

use super::*;

struct Repo {
    _dir: tempfile::TempDir,
    ws: PathBuf,
}

impl Repo {
    fn new() -> Repo {
        let dir = tempfile::tempdir().unwrap();
        let ws = fs::canonicalize(dir.path()).unwrap().join("ws");
        let repo = Repo { _dir: dir, ws };
        repo.git_dir(".git");
        repo
    }

    /// A git dir at `relative`: HEAD, config and hooks.
    fn git_dir(&self, relative: &str) -> PathBuf {
        let dir = self.ws.join(relative);
        fs::create_dir_all(dir.join("hooks")).unwrap();
        fs::write(dir.join("HEAD"), "ref: refs/heads/main\n").unwrap();
        fs::write(dir.join("config"), "[core]\n").unwrap();
        dir
    }

    fn plan(&self) -> Plan {
        self.plan_with(&[])
    }

    fn plan_with(&self, extra_roots: &[&Path]) -> Plan {
        let policy = load(
            &ShippedOnly,
            &LoadRequest {
                profile: "workspace-write".into(),
                overrides: Overrides {
                    allow_write: extra_roots
                        .iter()
                        .map(|r| r.display().to_string())
                        .collect(),
                    ..Overrides::default()
                },
                workspace_layer: None,
            },
        )
        .unwrap();
        let ctx = PlanContext {
            workspace: self.ws.clone(),
            home: self.home(),
            account_home: None,
            state_dir: "/home/dev/.local/state/bridle".into(),
            config_dir: "/home/dev/.config/bridle".into(),
            temp_dir: "/var/tmp/bridle-1000/s".into(),
            cache_root: None,
            temp_base: None,
            host_env: Default::default(),
            found: Vec::new(),
            masks: Vec::new(),
            masks_may_vanish: Vec::new(),
            escalated_from: None,
        };
        plan(&policy, &ctx).unwrap()
    }

    /// A linked worktree `wt` checked out at `trees/wt` inside the workspace.
    fn linked_worktree_checkout(&self) {
        let wt = self.ws.join(".git/worktrees/wt");
        fs::create_dir_all(&wt).unwrap();
        fs::write(wt.join("commondir"), "../..\n").unwrap();
        fs::create_dir_all(self.ws.join("trees/wt")).unwrap();
        fs::write(
            self.ws.join("trees/wt/.git"),
            "gitdir: ../../.git/worktrees/wt\n",
        )
        .unwrap();
        fs::write(
            wt.join("gitdir"),
            format!("{}\n", self.ws.join("trees/wt/.git").display()),
        )
        .unwrap();
    }

    /// A home directory next to the workspace, for the user's global git config.
    fn home(&self) -> PathBuf {
        let home = self.ws.parent().unwrap().join("home");
        fs::create_dir_all(&home).unwrap();
        home
    }

    /// What discovery found, relative to the workspace's parent: path → absent.
    fn found(&self) -> BTreeMap<String, bool> {
        self.found_in(&self.plan())
    }

    fn found_in(&self, plan: &Plan) -> BTreeMap<String, bool> {
        let base = self.ws.parent().unwrap();
        discover(plan, &self.home())
            .into_iter()
            .map(|f| {
                let rel = f.path.strip_prefix(base).unwrap();
                (rel.display().to_string(), f.absent)
            })
            .collect()
    }
}

fn expect(entries: &[(&str, bool)]) -> BTreeMap<String, bool> {
    entries
        .iter()
        .map(|(p, a)| (format!("ws/{p}"), *a))
        .collect()
}

/// `found` has `path` (relative to the workspace) as protected (`false`) or absent (`true`).
fn has(found: &BTreeMap<String, bool>, path: &str, absent: bool) {
    assert_eq!(
        found.get(&format!("ws/{path}")),
        Some(&absent),
        "{path}: {found:?}"
    );
}

#[test]
fn a_plain_repository_only_guards_its_redirects() {
    let repo = Repo::new();
    assert_eq!(
        repo.found(),
        expect(&[
            (".git/commondir", true),
            (".git/config.worktree", true),
            ("HEAD", true)
        ])
    );
}

#[test]
fn nested_submodule_git_dirs_are_found_and_missing_files_must_stay_absent() {
    let repo = Repo::new();
    repo.git_dir(".git/modules/a");
    let b = repo.git_dir(".git/modules/a/modules/b");
    fs::remove_dir(b.join("hooks")).unwrap();
    repo.git_dir(".git/modules/x/y");
    let found = repo.found();
    for protected in [
        ".git/modules/a/config",
        ".git/modules/a/hooks",
        ".git/modules/a/modules/b/config",
        // Missing: protected, so it gets an empty placeholder directory.
        ".git/modules/a/modules/b/hooks",
        ".git/modules/x/y/config",
        ".git/modules/x/y/hooks",
    ] {
        has(&found, protected, false);
    }
    for absent in [
        ".git/modules/a/commondir",
        ".git/modules/a/config.worktree",
        ".git/modules/a/modules/b/commondir",
        ".git/modules/x/y/config.worktree",
    ] {
        has(&found, absent, true);
    }
    // `x` is part of a name, not a git dir.
    assert!(!found.contains_key("ws/.git/modules/x/config"), "{found:?}");
}

#[test]
fn a_submodule_checkout_is_found_through_its_protected_config_not_gitmodules() {
    let repo = Repo::new();
    let module = repo.git_dir(".git/modules/lib");
    fs::write(
        module.join("config"),
        "[core]\n\tbare = false\n\tWorkTree = \"../../../lib\" ; set by git submodule\n",
    )
    .unwrap();
    fs::create_dir_all(repo.ws.join("lib")).unwrap();
    fs::write(repo.ws.join("lib/.git"), "gitdir: ../.git/modules/lib\n").unwrap();
    // The command emptied .gitmodules in an earlier run: the checkout is still found.
    fs::write(repo.ws.join(".gitmodules"), "").unwrap();
    has(&repo.found(), "lib/.git", false);
    // Not checked out: its `.git` must not appear.
    fs::remove_file(repo.ws.join("lib/.git")).unwrap();
    has(&repo.found(), "lib/.git", true);
}

#[test]
fn gitmodules_adds_embedded_git_dirs_and_git_files() {
    let repo = Repo::new();
    repo.git_dir("old/.git");
    fs::create_dir_all(repo.ws.join("new")).unwrap();
    fs::write(repo.ws.join("new/.git"), "gitdir: elsewhere\n").unwrap();
    fs::write(
        repo.ws.join(".gitmodules"),
        "[submodule \"old\"]\n\tPath = old\n[submodule \"new\"]\n\tpath = new # comment\n",
    )
    .unwrap();
    let found = repo.found();
    has(&found, "old/.git/config", false);
    has(&found, "old/.git/hooks", false);
    has(&found, "new/.git", false);
}

#[test]
fn nothing_is_walked_through_a_symlink() {
    let repo = Repo::new();
    let outside = tempfile::tempdir().unwrap();
    let elsewhere = outside.path().join("mods");
    fs::create_dir_all(elsewhere.join("evil/hooks")).unwrap();
    fs::write(elsewhere.join("evil/HEAD"), "x").unwrap();
    fs::create_dir_all(repo.ws.join(".git/modules")).unwrap();
    std::os::unix::fs::symlink(&elsewhere, repo.ws.join(".git/modules/linked")).unwrap();
    fs::create_dir_all(repo.ws.join("real/sub/.git")).unwrap();
    std::os::unix::fs::symlink(repo.ws.join("real"), repo.ws.join("via")).unwrap();
    fs::write(
        repo.ws.join(".gitmodules"),
        "[submodule \"s\"]\n\tpath = via/sub\n",
    )
    .unwrap();
    let found = repo.found();
    assert!(
        !found
            .keys()
            .any(|k| k.contains("linked") || k.starts_with("ws/via")),
        "{found:?}"
    );
}

/// A symlink cannot be bound read-only, and refusing would let a command that planted one lock
/// out every later run: the whole git dir becomes read-only instead.
#[test]
fn a_symlink_on_a_protected_name_makes_its_git_dir_read_only() {
    let repo = Repo::new();
    let module = repo.git_dir(".git/modules/lib");
    fs::remove_dir(module.join("hooks")).unwrap();
    std::os::unix::fs::symlink("../../../tools/hooks", module.join("hooks")).unwrap();
    let found = repo.found();
    has(&found, ".git/modules/lib", false);
    assert!(
        !found.contains_key("ws/.git/modules/lib/hooks"),
        "{found:?}"
    );
}

#[test]
fn too_many_module_dirs_protect_all_of_them() {
    let repo = Repo::new();
    for i in 0..=MAX_MODULE_DIRS {
        fs::create_dir_all(repo.ws.join(format!(".git/modules/junk/{i}"))).unwrap();
    }
    repo.git_dir(".git/modules/zz-lib");
    has(&repo.found(), ".git/modules", false);
}

#[test]
fn files_in_modules_do_not_count_against_the_walk() {
    let repo = Repo::new();
    let junk = repo.ws.join(".git/modules/junk");
    fs::create_dir_all(&junk).unwrap();
    for i in 0..=MAX_MODULE_DIRS {
        fs::write(junk.join(i.to_string()), "").unwrap();
    }
    repo.git_dir(".git/modules/lib");
    let found = repo.found();
    has(&found, ".git/modules/lib/config", false);
    assert!(!found.contains_key("ws/.git/modules"), "{found:?}");
}

#[test]
fn linked_worktree_redirects_are_guarded() {
    let repo = Repo::new();
    let wt = repo.ws.join(".git/worktrees/wt");
    fs::create_dir_all(&wt).unwrap();
    fs::write(wt.join("commondir"), "../..\n").unwrap();
    let found = repo.found();
    has(&found, ".git/worktrees/wt/commondir", false);
    has(&found, ".git/worktrees/wt/config.worktree", true);
}

#[test]
fn the_git_dir_a_root_git_file_names_is_guarded_inside_writable_roots() {
    let repo = Repo::new();
    fs::rename(repo.ws.join(".git"), repo.ws.join(".bare")).unwrap();
    fs::write(repo.ws.join(".git"), "gitdir: .bare\n").unwrap();
    let found = repo.found();
    has(&found, ".bare/config", false);
    has(&found, ".bare/hooks", false);
    has(&found, ".bare/commondir", true);
}

#[test]
fn included_config_files_in_the_workspace_are_guarded() {
    let repo = Repo::new();
    fs::write(
        repo.ws.join(".git/config"),
        "[include]\n\tpath = ../shared.gitconfig\n[includeIf \"onbranch:main\"]\n\tpath = ../missing.gitconfig\n",
    )
    .unwrap();
    fs::write(
        repo.ws.join("shared.gitconfig"),
        "[include]\n\tpath = nested.gitconfig\n",
    )
    .unwrap();
    let found = repo.found();
    has(&found, "shared.gitconfig", false);
    has(&found, "missing.gitconfig", true);
    // Followed: an included file includes another.
    has(&found, "nested.gitconfig", true);
}

#[test]
fn hooks_paths_in_the_workspace_are_protected_from_repository_and_global_config() {
    let repo = Repo::new();
    fs::write(
        repo.ws.join(".git/config"),
        "[core]\n\thooksPath = .husky/_\n",
    )
    .unwrap();
    fs::write(
        repo.home().join(".gitconfig"),
        "[core]\n\thooksPath = .githooks\n",
    )
    .unwrap();
    let found = repo.found();
    has(&found, ".husky/_", false);
    has(&found, ".githooks", false);
}

#[test]
fn the_checkout_of_a_linked_worktree_in_the_workspace_is_guarded() {
    let repo = Repo::new();
    repo.linked_worktree_checkout();
    let found = repo.found();
    has(&found, "trees/wt/.git", false);
    has(&found, ".git/worktrees/wt/gitdir", false);
}

/// The workspace is a linked worktree and the main repository's git dir is an extra writable
/// root (so commits work): its config and hooks are protected like the workspace's own.
#[test]
fn the_common_git_dir_of_a_worktree_workspace_is_guarded() {
    let repo = Repo::new();
    let main = repo.ws.parent().unwrap().join("main");
    fs::create_dir_all(&main).unwrap();
    fs::rename(repo.ws.join(".git"), main.join(".git")).unwrap();
    let wt = main.join(".git/worktrees/ws");
    fs::create_dir_all(&wt).unwrap();
    fs::write(wt.join("HEAD"), "ref: refs/heads/wt\n").unwrap();
    fs::write(wt.join("commondir"), "../..\n").unwrap();
    fs::write(repo.ws.join(".git"), format!("gitdir: {}\n", wt.display())).unwrap();
    let found = repo.found_in(&repo.plan_with(&[&main.join(".git")]));
    for path in [
        "main/.git/config",
        "main/.git/hooks",
        "main/.git/worktrees/ws/commondir",
    ] {
        assert_eq!(found.get(path), Some(&false), "{path}: {found:?}");
    }
    assert_eq!(found.get("main/.git/commondir"), Some(&true), "{found:?}");
}

#[test]
fn a_writable_root_that_is_a_git_dir_is_guarded() {
    let repo = Repo::new();
    let bare = repo.ws.parent().unwrap().join("bare.git");
    fs::create_dir_all(bare.join("objects")).unwrap();
    fs::create_dir_all(bare.join("hooks")).unwrap();
    fs::write(bare.join("HEAD"), "ref: refs/heads/main\n").unwrap();
    fs::write(bare.join("config"), "[core]\n\tbare = true\n").unwrap();
    let found = repo.found_in(&repo.plan_with(&[&bare]));
    assert_eq!(found.get("bare.git/config"), Some(&false), "{found:?}");
    assert_eq!(found.get("bare.git/hooks"), Some(&false), "{found:?}");
}

/// A directory discovery cannot read is protected whole, never skipped: a command that made
/// `.git/modules` unreadable in one run must not find the submodules unguarded in the next.
/// (Root reads it anyway, and then finds the submodule itself.)
#[test]
fn an_unreadable_modules_directory_is_protected_whole() {
    use std::os::unix::fs::PermissionsExt;
    let repo = Repo::new();
    repo.git_dir(".git/modules/lib");
    let modules = repo.ws.join(".git/modules");
    fs::set_permissions(&modules, fs::Permissions::from_mode(0o000)).unwrap();
    let found = repo.found();
    fs::set_permissions(&modules, fs::Permissions::from_mode(0o755)).unwrap();
    if running_as_root() {
        has(&found, ".git/modules/lib/config", false);
    } else {
        has(&found, ".git/modules", false);
    }
}

fn running_as_root() -> bool {
    std::fs::metadata("/proc/self").is_ok_and(|m| {
        use std::os::unix::fs::MetadataExt;
        m.uid() == 0
    })
}

/// A symlink the command planted where git metadata lives must neither be walked nor make a
/// later run refuse: nothing through it is recorded.
#[test]
fn a_symlinked_worktrees_directory_is_left_out() {
    let repo = Repo::new();
    fs::create_dir_all(repo.ws.join("elsewhere/wt")).unwrap();
    fs::write(repo.ws.join("elsewhere/wt/commondir"), "../..\n").unwrap();
    std::os::unix::fs::symlink("../elsewhere", repo.ws.join(".git/worktrees")).unwrap();
    let found = repo.found();
    assert!(
        !found
            .keys()
            .any(|k| k.starts_with("ws/.git/worktrees") || k.starts_with("ws/elsewhere")),
        "{found:?}"
    );
}

/// A submodule git dir may be one the command made: what its config points at counts only
/// inside that git dir, so it cannot make the rest of the workspace read-only (or a missing
/// file must-stay-absent) in later runs.
#[test]
fn a_submodule_config_cannot_protect_paths_outside_its_git_dir() {
    let repo = Repo::new();
    let module = repo.git_dir(".git/modules/evil");
    fs::create_dir_all(repo.ws.join("src")).unwrap();
    fs::write(
        module.join("config"),
        "[include]\n\tpath = ../../../src\n\tpath = ../../../Cargo.lock\n\tpath = local.inc\n[core]\n\thooksPath = ../../../tools\n\tworktree = ../../..\n",
    )
    .unwrap();
    let found = repo.found();
    for outside in ["ws/src", "ws/Cargo.lock", "ws/tools", "ws/.git"] {
        assert!(!found.contains_key(outside), "{outside}: {found:?}");
    }
    has(&found, ".git/modules/evil/local.inc", true);
}

#[test]
fn an_existing_head_at_the_root_is_read_only() {
    let repo = Repo::new();
    fs::write(repo.ws.join("HEAD"), "a project file\n").unwrap();
    has(&repo.found(), "HEAD", false);
}

#[test]
fn what_config_worktree_points_at_is_guarded() {
    let repo = Repo::new();
    fs::write(
        repo.ws.join(".git/config.worktree"),
        "[core]\n\thooksPath = .hooks-wt\n",
    )
    .unwrap();
    has(&repo.found(), ".hooks-wt", false);
}

/// Dotfile managers make `~/.gitconfig` a symlink; it is the user's own file and is read.
#[test]
fn a_symlinked_global_config_is_followed() {
    let repo = Repo::new();
    let dotfiles = repo.ws.parent().unwrap().join("dotfiles");
    fs::create_dir_all(&dotfiles).unwrap();
    fs::write(
        dotfiles.join("gitconfig"),
        "[core]\n\thooksPath = .githooks\n",
    )
    .unwrap();
    std::os::unix::fs::symlink(dotfiles.join("gitconfig"), repo.home().join(".gitconfig")).unwrap();
    has(&repo.found(), ".githooks", false);
}

/// `gitdir` of a worktree may be the command's: only a `.git` file that names that worktree's
/// git dir back is protected, never an arbitrary file.
#[test]
fn a_worktree_gitdir_naming_any_other_file_protects_nothing() {
    let repo = Repo::new();
    let wt = repo.ws.join(".git/worktrees/e");
    fs::create_dir_all(&wt).unwrap();
    fs::write(repo.ws.join("Cargo.lock"), "x").unwrap();
    fs::create_dir_all(repo.ws.join("other")).unwrap();
    fs::write(repo.ws.join("other/.git"), "gitdir: /somewhere/else\n").unwrap();
    for target in ["../../../Cargo.lock", "../../../other/.git"] {
        fs::write(wt.join("gitdir"), format!("{target}\n")).unwrap();
        let found = repo.found();
        assert!(!found.contains_key("ws/Cargo.lock"), "{found:?}");
        assert!(!found.contains_key("ws/other/.git"), "{found:?}");
    }
}

/// A made-up submodule's `core.worktree` cannot make an embedded repository read-only or a
/// directory with content unable to get a `.git`.
#[test]
fn a_submodule_worktree_protects_only_a_git_file_that_names_it() {
    let repo = Repo::new();
    repo.git_dir("vendor/lib/.git");
    fs::create_dir_all(repo.ws.join("fixtures")).unwrap();
    fs::write(repo.ws.join("fixtures/data"), "x").unwrap();
    for (name, worktree) in [("e1", "vendor/lib"), ("e2", "fixtures")] {
        let module = repo.git_dir(&format!(".git/modules/{name}"));
        fs::write(
            module.join("config"),
            format!("[core]\n\tworktree = ../../../{worktree}\n"),
        )
        .unwrap();
    }
    let found = repo.found();
    assert!(!found.contains_key("ws/vendor/lib/.git"), "{found:?}");
    assert!(!found.contains_key("ws/fixtures/.git"), "{found:?}");
}

/// A writable root that is itself a git dir may be one the command made: what its config
/// points at is not followed.
#[test]
fn the_config_of_a_root_that_is_a_git_dir_is_not_followed() {
    let repo = Repo::new();
    fs::remove_dir_all(repo.ws.join(".git")).unwrap();
    fs::create_dir_all(repo.ws.join("objects")).unwrap();
    fs::create_dir_all(repo.ws.join("src")).unwrap();
    fs::write(repo.ws.join("HEAD"), "ref: refs/heads/main\n").unwrap();
    fs::write(
        repo.ws.join("config"),
        "[include]\n\tpath = target\n[core]\n\thooksPath = src\n",
    )
    .unwrap();
    let found = repo.found();
    assert!(!found.contains_key("ws/target"), "{found:?}");
    assert!(!found.contains_key("ws/src"), "{found:?}");
    has(&found, "config", false);
}

#[test]
fn too_many_worktrees_protect_all_of_them() {
    let repo = Repo::new();
    for i in 0..=MAX_MODULE_DIRS {
        fs::create_dir_all(repo.ws.join(format!(".git/worktrees/w{i}"))).unwrap();
    }
    has(&repo.found(), ".git/worktrees", false);
}

/// A missing file that must stay absent in a missing directory is watched at the directory:
/// the command must not be able to create the directory as a symlink to elsewhere.
#[test]
fn an_absent_path_is_watched_at_its_first_missing_directory() {
    let repo = Repo::new();
    fs::write(
        repo.ws.join(".git/config"),
        "[include]\n\tpath = ../conf/local.gitconfig\n",
    )
    .unwrap();
    let found = repo.found();
    has(&found, "conf", true);
    assert!(!found.contains_key("ws/conf/local.gitconfig"), "{found:?}");
}

/// The command can remove a submodule's `HEAD` in one run (it is not protected): its `config`,
/// bound read-only, still marks the git dir in the next.
#[test]
fn a_submodule_git_dir_without_head_is_still_found() {
    let repo = Repo::new();
    let module = repo.git_dir(".git/modules/lib");
    fs::remove_file(module.join("HEAD")).unwrap();
    has(&repo.found(), ".git/modules/lib/config", false);
}

/// A `HEAD` planted in `libs` must not hide the submodule `libs/foo` below it.
#[test]
fn a_planted_head_does_not_hide_a_submodule_below_it() {
    let repo = Repo::new();
    repo.git_dir(".git/modules/libs/foo");
    fs::write(repo.ws.join(".git/modules/libs/HEAD"), "x\n").unwrap();
    has(&repo.found(), ".git/modules/libs/foo/config", false);
}

/// A submodule the repository's config names is found by name.
#[test]
fn submodules_the_config_names_are_found_by_name() {
    let repo = Repo::new();
    let module = repo.ws.join(".git/modules/named");
    fs::create_dir_all(module.join("hooks")).unwrap();
    fs::write(
        repo.ws.join(".git/config"),
        "[submodule \"named\"]\n\turl = ../named\n",
    )
    .unwrap();
    has(&repo.found(), ".git/modules/named/hooks", false);
}

/// Configs that include themselves are read once: planning stays fast.
#[test]
fn self_including_configs_are_read_once() {
    let repo = Repo::new();
    let module = repo.git_dir(".git/modules/x");
    fs::write(
        module.join("config"),
        "[include]\n\tpath = config\n\tpath = config\n\tpath = config\n\tpath = config\n",
    )
    .unwrap();
    let started = std::time::Instant::now();
    let _ = repo.found();
    assert!(started.elapsed() < std::time::Duration::from_secs(2));
}

/// Many made-up submodules cannot use up the reading so that the user's own config goes unread.
#[test]
fn made_up_submodules_cannot_crowd_out_the_users_config() {
    let repo = Repo::new();
    for i in 0..(MAX_CONFIGS + 10) {
        let module = repo.git_dir(&format!(".git/modules/m{i}"));
        fs::write(module.join("config"), "[include]\n\tpath = local.inc\n").unwrap();
    }
    fs::write(
        repo.home().join(".gitconfig"),
        "[core]\n\thooksPath = .githooks\n",
    )
    .unwrap();
    has(&repo.found(), ".githooks", false);
}

/// An operation in progress when the run starts keeps its todo list and options.
#[test]
fn an_operation_in_progress_is_protected() {
    let repo = Repo::new();
    fs::create_dir_all(repo.ws.join(".git/rebase-merge")).unwrap();
    let module = repo.git_dir(".git/modules/lib");
    fs::create_dir_all(module.join("sequencer")).unwrap();
    let found = repo.found();
    has(&found, ".git/rebase-merge", false);
    has(&found, ".git/modules/lib/sequencer", false);
}

/// A submodule that is named but not initialised has no git dir yet: one the command planted
/// would be used by `git submodule update --init` on the host, so it must not appear.
#[test]
fn the_git_dir_of_a_named_submodule_must_stay_absent_until_made() {
    let repo = Repo::new();
    fs::write(
        repo.ws.join(".gitmodules"),
        "[submodule \"lib\"]\n\tpath = lib\n\turl = ../lib\n",
    )
    .unwrap();
    // No `.git/modules` at all: its first missing component is what must stay absent.
    has(&repo.found(), ".git/modules", true);
    fs::create_dir_all(repo.ws.join(".git/modules")).unwrap();
    has(&repo.found(), ".git/modules/lib", true);
}

/// A relative `core.hooksPath` is relative to each working tree: a linked worktree's checkout
/// in the workspace gets its own hooks directory protected too.
#[test]
fn a_relative_hooks_path_is_protected_in_every_working_tree() {
    let repo = Repo::new();
    fs::write(
        repo.ws.join(".git/config"),
        "[core]\n\thooksPath = .githooks\n",
    )
    .unwrap();
    repo.linked_worktree_checkout();
    let found = repo.found();
    has(&found, ".githooks", false);
    has(&found, "trees/wt/.githooks", false);
}
