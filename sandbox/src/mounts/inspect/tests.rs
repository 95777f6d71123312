use std::os::unix::fs::PermissionsExt;

use pretty_assertions::assert_eq;

use super::*;
use crate::mounts::listing as names;

/// A git dir git would use at `dir`, with `config`.
fn git_dir(dir: &Path, config: &str) {
    std::fs::create_dir_all(dir.join("objects")).unwrap();
    std::fs::create_dir_all(dir.join("refs/heads")).unwrap();
    std::fs::create_dir_all(dir.join("hooks")).unwrap();
    std::fs::write(dir.join("HEAD"), "ref: refs/heads/main\n").unwrap();
    std::fs::write(dir.join("config"), config).unwrap();
}

fn executable(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

fn inspect(roots: &[&Path], protected: &[PathBuf]) -> Inspection {
    let inspector = Inspector::begin(
        roots.iter().map(|r| r.to_path_buf()).collect(),
        protected.to_vec(),
        Vec::new(),
    )
    .unwrap();
    inspector.finish()
}

const EVIL: &str = "[core]\n\trepositoryformatversion = 0\n\tbare = false\n\tfsmonitor = \"touch /tmp/x\"\n[remote \"origin\"]\n\turl = /srv/r.git\n[alias]\n\tst = !sh -c evil\n";

#[test]
fn a_new_repository_loses_what_would_run_and_keeps_what_git_needs() {
    let ws = tempfile::tempdir().unwrap();
    let git = ws.path().join("sub/.git");
    git_dir(&git, EVIL);
    executable(&git.join("hooks/post-checkout"), "#!/bin/sh\nevil\n");
    executable(&git.join("hooks/pre-commit.sample"), "#!/bin/sh\n");
    std::fs::write(git.join("hooks/pre-push"), "not executable\n").unwrap();
    let found = inspect(&[ws.path()], &[]);
    assert!(found.incomplete.is_empty(), "{:?}", found.incomplete);
    assert_eq!(found.quarantined.len(), 2, "{found:?}");
    let config = &found.quarantined[0];
    assert_eq!(config.path, git.join("config"));
    assert!(
        config.reason.contains("core.fsmonitor"),
        "{}",
        config.reason
    );
    assert!(config.reason.contains("alias.st"), "{}", config.reason);
    assert_eq!(
        config.kept.as_deref(),
        Some(
            &[
                "core.repositoryformatversion".to_owned(),
                "core.bare".to_owned(),
                "remote.origin.url".to_owned()
            ][..]
        )
    );
    let moved = config.moved_to.as_ref().unwrap();
    assert_eq!(std::fs::read_to_string(moved).unwrap(), EVIL);
    let fresh = std::fs::read_to_string(git.join("config")).unwrap();
    assert!(
        !fresh.contains("fsmonitor") && fresh.contains("/srv/r.git"),
        "{fresh}"
    );
    assert!(fresh.contains(&moved.display().to_string()), "{fresh}");
    let hook = &found.quarantined[1];
    assert_eq!(hook.path, git.join("hooks/post-checkout"));
    let hooks = names(&git.join("hooks"));
    assert_eq!(hooks.len(), 3, "{hooks:?}");
    assert!(
        hooks[0].starts_with("post-checkout.bridle-moved-"),
        "{hooks:?}"
    );
    assert_eq!(hooks[1..], ["pre-commit.sample", "pre-push"]);
    // Nothing is left to find a second time.
    assert_eq!(inspect(&[ws.path()], &[]), Inspection::default());
}

#[test]
fn a_bare_repository_and_what_git_files_and_commondir_name_are_inspected() {
    let ws = tempfile::tempdir().unwrap();
    let root = ws.path();
    // The root itself made a bare repository.
    git_dir(root, "[core]\n\tbare = true\n\thooksPath = /tmp\n");
    // A checkout whose `.git` file names a git dir hidden where the walk does not go.
    let hidden = root.join("objects/pack/hidden");
    git_dir(&hidden, "[core]\n\tpager = evil\n");
    std::fs::create_dir_all(root.join("work")).unwrap();
    std::fs::write(root.join("work/.git"), "gitdir: ../objects/pack/hidden\n").unwrap();
    // A linked worktree whose common dir has no HEAD of its own.
    let common = root.join("refs/common");
    std::fs::create_dir_all(common.join("objects")).unwrap();
    std::fs::write(common.join("config"), "[include]\n\tpath = x\n").unwrap();
    let linked = root.join("linked");
    std::fs::create_dir_all(&linked).unwrap();
    std::fs::write(linked.join("HEAD"), "0000\n").unwrap();
    std::fs::write(linked.join("commondir"), "../refs/common\n").unwrap();
    let found = inspect(&[root], &[]);
    let mut paths: Vec<PathBuf> = found.quarantined.iter().map(|q| q.path.clone()).collect();
    paths.sort();
    assert_eq!(
        paths,
        [
            root.join("config"),
            root.join("objects/pack/hidden/config"),
            root.join("refs/common/config"),
        ],
        "{found:?}"
    );
}

#[test]
fn what_did_not_change_during_the_run_and_protected_paths_are_left_alone() {
    let ws = tempfile::tempdir().unwrap();
    let old = ws.path().join("vendor/dep/.git");
    git_dir(&old, EVIL);
    let protected = ws.path().join(".git");
    git_dir(&protected, EVIL);
    executable(&protected.join("hooks/pre-commit"), "#!/bin/sh\n");
    // The user's own nested clone, from before the run.
    let mut walk = Walk {
        limits: Limits {
            dirs: MAX_DIRS,
            depth: MAX_DEPTH,
            time: MAX_WALK,
        },
        roots: &[ws.path().to_path_buf()],
        protected: &[protected.join("config"), protected.join("hooks")],
        since: stamp(SystemTime::now() + Duration::from_secs(3600)),
        seen: HashSet::new(),
        dirs: 0,
        deadline: Instant::now() + MAX_WALK,
        out: Inspection::default(),
    };
    walk.root(ws.path());
    assert_eq!(walk.out, Inspection::default());
    // Changed during the run, but read-only in it: not the command's.
    let found = inspect(
        &[ws.path()],
        &[
            protected.join("config"),
            protected.join("hooks"),
            ws.path().join("vendor"),
        ],
    );
    assert_eq!(found, Inspection::default());
}

#[test]
fn symlinks_are_moved_aside_never_followed() {
    let ws = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    // A repository outside, reached through a symlink in the workspace: never touched.
    git_dir(outside.path(), EVIL);
    std::os::unix::fs::symlink(outside.path(), ws.path().join("link")).unwrap();
    let git = ws.path().join("a/.git");
    git_dir(&git, "[core]\n\tbare = false\n");
    std::fs::remove_dir(git.join("hooks")).unwrap();
    std::os::unix::fs::symlink(outside.path().join("hooks"), git.join("hooks")).unwrap();
    let b = ws.path().join("b/.git");
    git_dir(&b, "");
    std::fs::remove_file(b.join("config")).unwrap();
    std::os::unix::fs::symlink(outside.path().join("config"), b.join("config")).unwrap();
    std::os::unix::fs::symlink("/bin/sh", b.join("hooks/pre-commit")).unwrap();
    // A `.git` file naming a git dir in the workspace through a symlink.
    std::fs::create_dir_all(ws.path().join("c/real")).unwrap();
    git_dir(&ws.path().join("c/real/g"), EVIL);
    std::os::unix::fs::symlink("real", ws.path().join("c/via")).unwrap();
    std::fs::create_dir_all(ws.path().join("d")).unwrap();
    std::fs::write(ws.path().join("d/.git"), "gitdir: ../c/via/g\n").unwrap();
    let found = inspect(&[ws.path()], &[]);
    let mut paths: Vec<PathBuf> = found.quarantined.iter().map(|q| q.path.clone()).collect();
    paths.sort();
    assert_eq!(
        paths,
        [
            git.join("hooks"),
            b.join("config"),
            b.join("hooks/pre-commit"),
            ws.path().join("c/real/g/config"),
            ws.path().join("d/.git"),
        ],
        "{found:?}"
    );
    assert_eq!(
        std::fs::read_to_string(outside.path().join("config")).unwrap(),
        EVIL
    );
    assert_eq!(
        names(outside.path()),
        ["HEAD", "config", "hooks", "objects", "refs"]
    );
}

#[test]
fn a_walk_past_its_bound_says_so() {
    let ws = tempfile::tempdir().unwrap();
    for i in 0..20 {
        std::fs::create_dir_all(ws.path().join(format!("d{i}/e"))).unwrap();
    }
    // Without a record: an incomplete inspection keeps its record for the next run, and this
    // workspace has none.
    let unrecorded = || Inspector {
        roots: vec![ws.path().to_path_buf()],
        protected: Vec::new(),
        absent_at_end: Vec::new(),
        since: SystemTime::now(),
        record: None,
    };
    let found = unrecorded().finish_within(Limits {
        dirs: 10,
        depth: MAX_DEPTH,
        time: MAX_WALK,
    });
    assert_eq!(found.incomplete.len(), 1, "{found:?}");
    assert!(
        found.incomplete[0].contains("after 10 directories"),
        "{found:?}"
    );
    let found = unrecorded().finish_within(Limits {
        dirs: MAX_DIRS,
        depth: 1,
        time: MAX_WALK,
    });
    assert!(
        found.incomplete[0].contains("deeper than 1 levels"),
        "{found:?}"
    );
}

#[test]
fn a_config_git_cannot_be_sure_of_is_moved_aside() {
    let ws = tempfile::tempdir().unwrap();
    let git = ws.path().join(".git");
    git_dir(
        &git,
        "[core]\n\tbare = false\n\tfsmonitor = \"unterminated\n",
    );
    let found = inspect(&[ws.path()], &[]);
    assert_eq!(found.quarantined.len(), 1, "{found:?}");
    assert!(
        found.quarantined[0].reason.contains("with certainty"),
        "{found:?}"
    );
    // Nothing in it can be trusted to keep: git goes on without a config.
    assert_eq!(found.quarantined[0].kept, None);
    assert!(!git.join("config").exists());
}
