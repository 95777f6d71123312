//! G-FS-PROTECT end to end, for the git metadata found on disk: submodule and worktree git
//! dirs, included configs and hooks paths, operations in progress, and the files that must stay
//! absent (`commondir`, `config.worktree`, a root `HEAD`), against the command and against what
//! it leaves for later runs.

use std::process::Command;
use std::time::Duration;

use pretty_assertions::assert_eq;

use super::exec_fs::{listing, snapshot};
use super::protect::{EMPTY_COMMIT, git, git_repo};
use super::support::{ExecEnv, path_str};

/// `.git/config` and `.git/hooks` are read-only, but `.git` itself must stay writable for
/// ordinary git use, and git reads its config and hooks from the directory named in
/// `$GIT_DIR/commondir` when that file exists. A missing file cannot be bound read-only, so
/// bridle's init watches for it: a planted `commondir` is removed and the sandbox stopped, and the
/// user's next `git status` outside does not run the planted `core.fsmonitor` command.
#[test]
fn git_commondir_cannot_redirect_config_and_hooks() {
    let e = git_repo();
    git(&e.workspace, &EMPTY_COMMIT);
    let marker = e.outside.join("fsmonitor-ran");
    let r = e.sh(&format!(
        "{}
         echo ../evil > .git/commondir; echo commondir=$?; sleep 5; echo survived",
        plant_evil_git_dir_script(&marker)
    ));
    // Init notices the planted file, removes it and stops the sandbox.
    assert_eq!(r.code, Some(137), "{}\n{}", r.stdout, r.stderr);
    assert!(!r.stdout.contains("survived"), "{}", r.stdout);
    assert!(
        r.stderr.contains("would read it as configuration"),
        "{}",
        r.stderr
    );
    assert!(
        !e.workspace.join(".git/commondir").exists(),
        "the planted commondir is still there"
    );
    // Judged from outside: the user's own git, after the run, must not run the planted command.
    assert_host_git_runs_nothing_planted(&e, &marker);
}

/// A command that plants a file that must stay absent and ends at once, before init's next
/// check, does not leave it behind: bridle sweeps once the whole tree is gone.
#[test]
fn a_file_planted_just_before_the_command_ends_is_swept() {
    let e = git_repo();
    git(&e.workspace, &EMPTY_COMMIT);
    let marker = e.outside.join("fsmonitor-ran");
    let r = e.sh(&format!(
        "{}
         echo ../evil > .git/commondir",
        plant_evil_git_dir_script(&marker)
    ));
    assert_eq!(r.code, Some(137), "{}\n{}", r.stdout, r.stderr);
    assert!(r.stderr.contains("appeared during the run"), "{}", r.stderr);
    assert!(!e.workspace.join(".git/commondir").exists());
    assert_host_git_runs_nothing_planted(&e, &marker);
}

/// What bridle moves aside is the planted entry itself, never something a symlink on the way
/// leads to: a command must not be able to have bridle rename the user's own files.
#[test]
fn moving_a_planted_path_aside_never_goes_through_a_symlink() {
    let e = git_repo();
    let user_config = e.home.join(".gitconfig");
    std::fs::write(&user_config, "[user]\n\tname = me\n").unwrap();
    e.sh(
        "mkdir -p .git/modules/m/objects && echo 'ref: refs/heads/main' > .git/modules/m/HEAD
         printf '[include]\\n\\tpath = foo/.gitconfig\\n' > .git/modules/m/config",
    )
    .assert_code(0);
    let r = e.sh(&format!("ln -s {} .git/modules/m/foo", path_str(&e.home)));
    assert_eq!(r.code, Some(137), "{}\n{}", r.stdout, r.stderr);
    assert_eq!(
        std::fs::read_to_string(&user_config).unwrap(),
        "[user]\n\tname = me\n"
    );
    assert!(std::fs::symlink_metadata(e.workspace.join(".git/modules/m/foo")).is_err());
}

/// A command that keeps planting `commondir` from several processes cannot get one past init:
/// the sandbox is stopped before the file is removed, so nothing is planted again after it.
#[test]
fn commondir_planted_in_a_loop_leaves_nothing_behind() {
    // Init checks every few milliseconds at first and through inotify once the run has lasted
    // a moment: both ways.
    for delay in ["0", "0.5"] {
        let e = git_repo();
        let r = e.sh(&format!(
            "sleep {delay}
             plant() {{ while :; do echo ../evil > .git/commondir.$1; mv -f .git/commondir.$1 .git/commondir; done; }}
             plant 1 & plant 2 & plant 3 & wait"
        ));
        assert_eq!(
            r.code,
            Some(137),
            "delay {delay}: {}\n{}",
            r.stdout,
            r.stderr
        );
        assert!(
            !e.workspace.join(".git/commondir").exists(),
            "delay {delay}: a planted commondir survived the run"
        );
    }
}

/// A repository with a submodule `lib` (git dir in `.git/modules/lib`) and a linked worktree
/// outside the workspace (git dir in `.git/worktrees/wt`).
fn repo_with_submodule_and_worktree() -> ExecEnv {
    let e = git_repo();
    let upstream = e.outside.join("lib-upstream");
    std::fs::create_dir_all(&upstream).unwrap();
    git(&upstream, &["init", "-q", "-b", "main", "."]);
    let commit = EMPTY_COMMIT;
    git(&upstream, &commit);
    git(&e.workspace, &commit);
    git(
        &e.workspace,
        &[
            "-c",
            "protocol.file.allow=always",
            "submodule",
            "add",
            "-q",
            path_str(&upstream),
            "lib",
        ],
    );
    git(
        &e.workspace,
        &[
            "worktree",
            "add",
            "-q",
            path_str(&e.outside.join("wt")),
            "-b",
            "wt",
        ],
    );
    e
}

/// git runs hooks and configured commands from every git dir a repository uses: a submodule's
/// (which `git status` in the superproject enters) and a linked worktree's `commondir` (which
/// redirects config and hooks). They are protected like `.git/config` and `.git/hooks`, and
/// ordinary git use inside the submodule keeps working.
#[test]
fn submodule_and_worktree_git_dirs_are_protected() {
    let e = repo_with_submodule_and_worktree();
    let module = e.workspace.join(".git/modules/lib");
    let watched = [
        module.join("config"),
        e.workspace.join("lib/.git"),
        e.workspace.join(".git/worktrees/wt/commondir"),
    ];
    let before: Vec<_> = watched.iter().map(|p| snapshot(p)).collect();
    let hooks_before = listing(&module.join("hooks"));
    let r = e.sh(
        "printf '[core]\\n\\tfsmonitor = evil\\n' >> .git/modules/lib/config; echo config=$?
         echo evil > .git/modules/lib/hooks/post-checkout; echo hook=$?
         echo 'gitdir: /tmp/evil' > lib/.git; echo gitfile=$?
         echo /tmp/evil > .git/worktrees/wt/commondir; echo commondir=$?
         git -C lib -c user.name=a -c user.email=a@e commit -q --allow-empty -m inside; echo subcommit=$?",
    );
    r.assert_ok();
    for key in ["config", "hook", "gitfile", "commondir"] {
        r.assert_failed(key);
    }
    r.assert_succeeded("subcommit");
    let after: Vec<_> = watched.iter().map(|p| snapshot(p)).collect();
    assert_eq!(before, after);
    assert_eq!(hooks_before, listing(&module.join("hooks")));
    assert!(git(&e.workspace.join("lib"), &["log", "--format=%s"]).contains("inside"));
}

/// After a run, the user's own git in the superproject must not run a command planted from
/// inside: `git status` enters every submodule.
fn assert_host_git_runs_nothing_planted(e: &ExecEnv, marker: &std::path::Path) {
    let _ = Command::new("git")
        .args(["status", "--porcelain"])
        .current_dir(&e.workspace)
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("HOME", &e.home)
        .output();
    assert!(
        !marker.exists(),
        "the user's git ran a command planted from inside the sandbox"
    );
}

/// A config with `core.fsmonitor` set to a command that creates `marker`, in a copy of the
/// repository's objects and refs at `evil/` (what a planted redirect would point at).
fn plant_evil_git_dir_script(marker: &std::path::Path) -> String {
    format!(
        "mkdir -p evil && cp -r .git/objects .git/refs .git/HEAD evil/
         printf '[core]\\n\\trepositoryformatversion = 0\\n\\tfsmonitor = \"touch {}; false\"\\n' > evil/config",
        path_str(marker)
    )
}

#[test]
fn a_commondir_planted_in_a_submodule_git_dir_is_removed() {
    let e = repo_with_submodule_and_worktree();
    let marker = e.outside.join("fsmonitor-ran");
    let r = e.sh(&format!(
        "{}
         echo \"$PWD/evil\" > .git/modules/lib/commondir; echo planted=$?; sleep 5; echo survived",
        plant_evil_git_dir_script(&marker)
    ));
    assert_eq!(r.code, Some(137), "{}\n{}", r.stdout, r.stderr);
    assert!(r.stderr.contains("modules/lib/commondir"), "{}", r.stderr);
    assert!(!e.workspace.join(".git/modules/lib/commondir").exists());
    assert_host_git_runs_nothing_planted(&e, &marker);
}

/// `.gitmodules` is ordinary content the command may change; the checkout of a submodule is
/// found through the submodule's own (protected) config, so emptying `.gitmodules` in one run
/// does not unprotect its `.git` file in the next.
#[test]
fn emptying_gitmodules_does_not_unprotect_a_submodule_checkout() {
    let e = repo_with_submodule_and_worktree();
    e.sh(": > .gitmodules").assert_code(0);
    assert_write_fails(
        &e,
        "lib/.git",
        "echo 'gitdir: /tmp/evil' > lib/.git; echo write=$?",
    );
}

/// With `extensions.worktreeConfig`, git reads `.git/config.worktree` as config. It does not
/// exist, so it must not appear: git on the host cannot create it during the run (bridle holds
/// its lock), and one the command creates is removed and the sandbox stopped.
#[test]
fn a_missing_config_worktree_cannot_be_planted() {
    let e = git_repo();
    git(
        &e.workspace,
        &["config", "extensions.worktreeConfig", "true"],
    );
    let marker = e.outside.join("fsmonitor-ran");
    let r = e.sh(&format!(
        "test -e .git/config.worktree.lock && echo locked
         printf '[core]\\n\\tfsmonitor = \"touch {}; false\"\\n' > .git/config.worktree; echo planted=$?; sleep 5; echo survived",
        path_str(&marker)
    ));
    assert!(r.stdout.contains("locked"), "{}", r.stdout);
    assert_eq!(r.code, Some(137), "{}\n{}", r.stdout, r.stderr);
    assert!(!e.workspace.join(".git/config.worktree").exists());
    assert!(!e.workspace.join(".git/config.worktree.lock").exists());
    assert_host_git_runs_nothing_planted(&e, &marker);
}

/// A command that fills `.git/modules` with directories in one run cannot make the next run
/// stop looking before it reaches a submodule: past a bound, all of `.git/modules` is protected.
#[test]
fn a_flood_of_module_directories_protects_all_of_modules() {
    let e = repo_with_submodule_and_worktree();
    e.sh("i=0; while [ $i -lt 5000 ]; do mkdir -p .git/modules/junk/$i; i=$((i+1)); done")
        .assert_code(0);
    assert_write_fails(
        &e,
        ".git/modules/lib/config",
        "printf '[core]\\n\\tfsmonitor = evil\\n' >> .git/modules/lib/config; echo write=$?",
    );
}

/// Runs `script`, which writes to `relative` and then echoes `write=$?`: the write fails and
/// the file is unchanged, judged from outside.
fn assert_write_fails(e: &ExecEnv, relative: &str, script: &str) {
    let path = e.workspace.join(relative);
    let before = snapshot(&path);
    let r = e.sh(script);
    r.assert_ok();
    r.assert_failed("write");
    assert_eq!(before, snapshot(&path), "{relative} changed");
}

/// With `.git` made unusable (its `HEAD` deleted), git would take a workspace root holding
/// `HEAD`, `objects/` and `refs/` for a bare repository and read a planted `config` there. A
/// `HEAD` may not appear at the root: it is moved aside and the sandbox stopped.
#[test]
fn the_workspace_root_cannot_be_made_a_bare_repository() {
    let e = git_repo();
    git(&e.workspace, &EMPTY_COMMIT);
    let r = e.sh(
        "cp -r .git/objects .git/refs . && printf '[core]\\n\\tbare = true\\n' > config
         printf 'ref: refs/heads/main\\n' > HEAD; echo planted=$?; sleep 5; echo survived",
    );
    assert_eq!(r.code, Some(137), "{}\n{}", r.stdout, r.stderr);
    assert!(!e.workspace.join("HEAD").exists());
    assert!(
        std::fs::read_dir(&e.workspace).unwrap().flatten().any(|f| f
            .file_name()
            .to_string_lossy()
            .starts_with("HEAD.bridle-moved-")),
        "not kept aside"
    );
}

/// A config file the repository's config includes, and the directory `core.hooksPath` names,
/// are read by git on the host like `.git/config` and `.git/hooks`: read-only when they exist,
/// impossible to create when they do not.
#[test]
fn included_config_and_hooks_path_in_the_workspace_are_protected() {
    let e = git_repo();
    std::fs::write(e.workspace.join("shared.gitconfig"), "[user]\n\tname = x\n").unwrap();
    git(
        &e.workspace,
        &["config", "include.path", "../shared.gitconfig"],
    );
    git(&e.workspace, &["config", "core.hooksPath", ".husky/_"]);
    assert_write_fails(
        &e,
        "shared.gitconfig",
        "printf '[core]\\n\\tfsmonitor = evil\\n' >> shared.gitconfig; echo write=$?",
    );
    let r = e.sh("mkdir -p .husky/_ && echo evil > .husky/_/pre-commit; echo write=$?");
    r.assert_ok();
    r.assert_failed("write");
    assert!(!e.workspace.join(".husky/_/pre-commit").exists());
}

/// The `.git` file of a linked worktree checked out inside the workspace names its git dir;
/// pointed at a planted one, git in that checkout would run what it configures.
#[test]
fn a_worktree_checkout_git_file_cannot_be_repointed() {
    let e = git_repo();
    git(&e.workspace, &EMPTY_COMMIT);
    git(
        &e.workspace,
        &["worktree", "add", "-q", "trees/wt", "-b", "wt"],
    );
    assert_write_fails(
        &e,
        "trees/wt/.git",
        "echo 'gitdir: /tmp/evil' > trees/wt/.git; echo write=$?",
    );
}

/// A command that makes a submodule's git dir unreadable in one run neither gets the next run
/// to overlook it nor locks later runs out: the next run starts and the git dir stays
/// read-only. (As root the dir stays readable and is protected name by name.)
#[test]
fn an_unreadable_submodule_git_dir_is_protected_whole_without_a_refusal() {
    use std::os::unix::fs::PermissionsExt;
    let e = repo_with_submodule_and_worktree();
    e.sh("chmod 000 .git/modules/lib; echo chmod=$?")
        .assert_code(0);
    let module = e.workspace.join(".git/modules/lib");
    let r = e.sh("chmod 755 .git/modules/lib 2>/dev/null
         printf '[core]\\n\\tfsmonitor = evil\\n' >> .git/modules/lib/config; echo write=$?
         chmod 000 .git/modules/lib 2>/dev/null; true");
    std::fs::set_permissions(&module, std::fs::Permissions::from_mode(0o755)).unwrap();
    r.assert_ok();
    r.assert_failed("write");
    let config = std::fs::read_to_string(module.join("config")).unwrap();
    assert!(!config.contains("fsmonitor"), "{config}");
}

/// Whatever a command leaves in `.git` for the next run (symlinks where git metadata lives, odd
/// lock files, a made-up submodule whose config points all over the workspace) must neither
/// lock later runs out nor make them slow, nor make the rest of the workspace read-only.
#[test]
fn traps_left_in_git_metadata_do_not_hold_up_later_runs() {
    let e = git_repo();
    git(&e.workspace, &EMPTY_COMMIT);
    e.sh(
        "mkdir -p src elsewhere .git/modules/m && ln -s ../elsewhere .git/worktrees && ln -s elsewhere lnk
         echo 'ref: refs/heads/main' > .git/modules/m/HEAD
         printf '[core]\\n\\tworktree = ../../../lnk/sub\\n\\thooksPath = ../../../src\\n[include]\\n\\tpath = ../../../src/inc\\n' > .git/modules/m/config
         ln -s /etc/passwd .git/modules/m/config.lock
         mkfifo .git/modules/m/config.worktree.lock
         touch -d '+1 year' .git/modules/m/commondir.lock",
    )
    .assert_code(0);
    let started = std::time::Instant::now();
    let r = e.sh("touch src/still-writable; echo touch=$?");
    r.assert_ok();
    r.assert_succeeded("touch");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "the run was held up: {:?}",
        started.elapsed()
    );
}

/// The user, in the middle of a rebase, asks the agent to resolve the conflicts: the agent can
/// change the working tree and the index, but not the rest of the rebase (an `exec` line added
/// to the todo list would run on the user's `git rebase --continue`).
#[test]
fn a_rebase_in_progress_keeps_its_todo_list() {
    let e = git_repo();
    let commit = |msg: &str| {
        git(
            &e.workspace,
            &[
                "-c",
                "user.name=a",
                "-c",
                "user.email=a@e",
                "commit",
                "-qam",
                msg,
            ],
        )
    };
    std::fs::write(e.workspace.join("f"), "base\n").unwrap();
    git(&e.workspace, &["add", "f"]);
    commit("base");
    git(&e.workspace, &["checkout", "-q", "-b", "topic"]);
    std::fs::write(e.workspace.join("f"), "topic\n").unwrap();
    commit("topic");
    git(&e.workspace, &["checkout", "-q", "main"]);
    std::fs::write(e.workspace.join("f"), "main\n").unwrap();
    commit("main");
    git(&e.workspace, &["checkout", "-q", "topic"]);
    let rebase = Command::new("git")
        .args([
            "-c",
            "user.name=a",
            "-c",
            "user.email=a@e",
            "rebase",
            "main",
        ])
        .current_dir(&e.workspace)
        .env("HOME", &e.home)
        .output()
        .unwrap();
    assert!(
        !rebase.status.success(),
        "the rebase was meant to stop on a conflict"
    );
    assert!(e.workspace.join(".git/rebase-merge").is_dir());
    let r = e.sh("echo resolved > f && git add f; echo add=$?
         echo 'exec touch /var/tmp/pwned' >> .git/rebase-merge/git-rebase-todo; echo todo=$?");
    r.assert_ok();
    r.assert_succeeded("add");
    r.assert_failed("todo");
}

#[test]
fn policy_explain_names_a_found_git_dir() {
    let e = repo_with_submodule_and_worktree();
    let out = e
        .bridle()
        .args(["policy", "explain", "write", ".git/modules/lib/config"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("denied"), "{stdout}");
    assert!(
        stdout.contains("found on disk: git dir of submodule `.git/modules/lib`"),
        "{stdout}"
    );
}

/// Hundreds of directories a command leaves in `.git` for later runs to protect must not make
/// those runs run out of file descriptors (a run keeps none open for a directory of the user's).
#[test]
fn many_protected_directories_do_not_exhaust_descriptors() {
    let e = git_repo();
    e.sh(
        "i=0; while [ $i -lt 200 ]; do d=.git/modules/m$i; mkdir -p $d/hooks $d/rebase-merge $d/rebase-apply $d/sequencer; echo x > $d/HEAD; i=$((i+1)); done",
    )
    .assert_code(0);
    let out = Command::new("sh")
        .args(["-c", "ulimit -n 256 && exec \"$0\" exec -- true"])
        .arg(env!("CARGO_BIN_EXE_bridle"))
        .current_dir(&e.workspace)
        .env_clear()
        .env("HOME", &e.home)
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
