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
        let policy = load(
            &ShippedOnly,
            &LoadRequest {
                profile: "workspace-write".into(),
                overrides: Overrides::default(),
                workspace_layer: None,
            },
        )
        .unwrap();
        let ctx = PlanContext {
            workspace: self.ws.clone(),
            home: "/home/dev".into(),
            state_dir: "/home/dev/.local/state/bridle".into(),
            config_dir: "/home/dev/.config/bridle".into(),
            temp_dir: "/var/tmp/bridle-1000/s".into(),
            host_env: Default::default(),
        };
        plan(&policy, &ctx).unwrap()
    }

    /// What discovery found, relative to the workspace: path → absent.
    fn found(&self) -> BTreeMap<String, bool> {
        discover(&self.plan())
            .into_iter()
            .map(|f| {
                let rel = f.path.strip_prefix(&self.ws).unwrap();
                (rel.display().to_string(), f.absent)
            })
            .collect()
    }
}

fn expect(entries: &[(&str, bool)]) -> BTreeMap<String, bool> {
    entries
        .iter()
        .map(|(p, a)| ((*p).to_string(), *a))
        .collect()
}

#[test]
fn a_plain_repository_only_guards_its_redirects() {
    let repo = Repo::new();
    assert_eq!(
        repo.found(),
        expect(&[(".git/commondir", true), (".git/config.worktree", true)])
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
        assert_eq!(found.get(protected), Some(&false), "{protected}: {found:?}");
    }
    for absent in [
        ".git/modules/a/commondir",
        ".git/modules/a/config.worktree",
        ".git/modules/a/modules/b/commondir",
        ".git/modules/x/y/config.worktree",
    ] {
        assert_eq!(found.get(absent), Some(&true), "{absent}: {found:?}");
    }
    // `x` is part of a name, not a git dir.
    assert!(!found.contains_key(".git/modules/x/config"), "{found:?}");
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
    assert_eq!(repo.found().get("lib/.git"), Some(&false));
    // Not checked out: its `.git` must not appear.
    fs::remove_file(repo.ws.join("lib/.git")).unwrap();
    assert_eq!(repo.found().get("lib/.git"), Some(&true));
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
    assert_eq!(found.get("old/.git/config"), Some(&false), "{found:?}");
    assert_eq!(found.get("old/.git/hooks"), Some(&false), "{found:?}");
    assert_eq!(found.get("new/.git"), Some(&false), "{found:?}");
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
            .any(|k| k.contains("linked") || k.starts_with("via")),
        "{found:?}"
    );
}

#[test]
fn a_symlink_on_a_protected_name_is_protected_as_it_is() {
    let repo = Repo::new();
    let module = repo.git_dir(".git/modules/lib");
    fs::remove_dir(module.join("hooks")).unwrap();
    std::os::unix::fs::symlink("../../../tools/hooks", module.join("hooks")).unwrap();
    // Not resolved: protected at its own path, where planning refuses it like any protected
    // path through a symlink.
    assert_eq!(repo.found().get(".git/modules/lib/hooks"), Some(&false));
}

#[test]
fn too_many_module_dirs_protect_all_of_them() {
    let repo = Repo::new();
    for i in 0..=MAX_MODULE_DIRS {
        fs::create_dir_all(repo.ws.join(format!(".git/modules/junk/{i}"))).unwrap();
    }
    repo.git_dir(".git/modules/zz-lib");
    assert_eq!(repo.found().get(".git/modules"), Some(&false));
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
    assert_eq!(found.get(".git/modules/lib/config"), Some(&false));
    assert!(!found.contains_key(".git/modules"), "{found:?}");
}

#[test]
fn linked_worktree_redirects_are_guarded() {
    let repo = Repo::new();
    let wt = repo.ws.join(".git/worktrees/wt");
    fs::create_dir_all(&wt).unwrap();
    fs::write(wt.join("commondir"), "../..\n").unwrap();
    let found = repo.found();
    assert_eq!(found.get(".git/worktrees/wt/commondir"), Some(&false));
    assert_eq!(found.get(".git/worktrees/wt/config.worktree"), Some(&true));
}

#[test]
fn the_git_dir_a_root_git_file_names_is_guarded_inside_writable_roots() {
    let repo = Repo::new();
    fs::rename(repo.ws.join(".git"), repo.ws.join(".bare")).unwrap();
    fs::write(repo.ws.join(".git"), "gitdir: .bare\n").unwrap();
    let found = repo.found();
    assert_eq!(found.get(".bare/config"), Some(&false), "{found:?}");
    assert_eq!(found.get(".bare/hooks"), Some(&false), "{found:?}");
    assert_eq!(found.get(".bare/commondir"), Some(&true), "{found:?}");
}

#[test]
fn config_values_follow_git_syntax() {
    let text = "[Core]\n\tworktree = a\n[core \"sub\"]\n\tworktree = b\n[remote]\n\tworktree = c\n[core]\n\tWorktree = \"d e\" # trailing\n";
    assert_eq!(config_value(text, "core", "worktree"), Some("d e".into()));
    assert_eq!(config_value("[core]\n", "core", "worktree"), None);
}

#[test]
fn gitmodules_paths_stay_inside_the_repository() {
    let text = "[submodule \"a\"]\n\tpath = lib/a\n\turl = x\n[submodule \"b\"]\n\tpath = ../escape\n[submodule \"c\"]\n\tpath = /abs\n[submodule \"d\"]\n\tPATH = \"quoted\" ; note\n";
    assert_eq!(
        gitmodules_paths(text),
        vec![PathBuf::from("lib/a"), PathBuf::from("quoted")]
    );
}
