//! G-FS-PROTECT for repositories the command creates: ordinary git use (init, clone, add,
//! commit) works where there is no repository yet, nothing bridle places is visible to git or
//! left behind, and what a repository the command made holds that would run code on the host
//! is moved aside and reported when the run ends (on stderr, in the tool result, in the session
//! log). Judged from outside, with the user's own git.

use std::path::Path;
use std::process::Command;

use pretty_assertions::assert_eq;
use serde_json::Value;

use super::exec_fs::{listing, snapshot};
use super::protect::{EMPTY_COMMIT, git, git_repo};
use super::support::{ExecEnv, Run, path_str, run_bounded};

/// git on the host, as the user runs it after the run (their home, no system config), in
/// `dir`. Its status is not checked: what matters is what it ran.
fn host_git(e: &ExecEnv, dir: &Path, args: &[&str]) -> std::process::Output {
    Command::new("git")
        .args(args)
        .current_dir(dir)
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("HOME", &e.home)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_TERMINAL_PROMPT", "0")
        .output()
        .expect("run git on the host")
}

/// `bridle: ` lines on stderr.
fn bridle_lines(r: &Run) -> Vec<&str> {
    r.stderr
        .lines()
        .filter(|l| l.starts_with("bridle: "))
        .collect()
}

/// A bare repository outside the workspace with one commit on `main`.
fn upstream(e: &ExecEnv) -> std::path::PathBuf {
    let bare = e.outside.join("up.git");
    git(
        &e.outside,
        &["init", "-q", "--bare", "-b", "main", path_str(&bare)],
    );
    let seed = e.outside.join("seed");
    git(
        &e.outside,
        &["clone", "-q", path_str(&bare), path_str(&seed)],
    );
    std::fs::write(seed.join("README"), "hello\n").unwrap();
    git(&seed, &["add", "README"]);
    git(
        &seed,
        &[
            "-c",
            "user.name=a",
            "-c",
            "user.email=a@e",
            "commit",
            "-q",
            "-m",
            "upstream",
        ],
    );
    git(&seed, &["push", "-q", "origin", "HEAD:main"]);
    bare
}

#[test]
fn git_init_add_and_commit_work_where_there_is_no_repository() {
    let e = ExecEnv::new();
    e.write("src/main.c", "int main;\n");
    let r = e.sh("export GIT_CONFIG_NOSYSTEM=1
         git init -q -b main .; echo init=$?
         git add -A; echo add=$?
         git -c user.name=Agent -c user.email=a@e commit -q -m first; echo commit=$?
         git branch feature; echo branch=$?");
    r.assert_ok();
    for step in ["init", "add", "commit", "branch"] {
        r.assert_succeeded(step);
    }
    assert_eq!(bridle_lines(&r), Vec::<&str>::new(), "{}", r.stderr);
    // Judged from outside: the user's git sees the commit, and nothing else is there.
    assert_eq!(git(&e.workspace, &["log", "--format=%s"]), "first\n");
    assert_eq!(git(&e.workspace, &["status", "--porcelain"]), "");
    assert_eq!(listing(&e.workspace), [".git", "src"]);
}

#[test]
fn git_clone_of_a_local_bare_repository_works_into_the_workspace_and_below_it() {
    let e = ExecEnv::new();
    let bare = upstream(&e);
    let r = e.sh(&format!(
        "git clone -q {bare} .; echo root=$?
         git clone -q file://{bare} sub/copy; echo below=$?
         git init -q lib; echo init=$?",
        bare = path_str(&bare)
    ));
    r.assert_ok();
    r.assert_succeeded("root");
    r.assert_succeeded("below");
    r.assert_succeeded("init");
    assert_eq!(bridle_lines(&r), Vec::<&str>::new(), "{}", r.stderr);
    for dir in [e.workspace.clone(), e.workspace.join("sub/copy")] {
        assert_eq!(git(&dir, &["log", "--format=%s"]), "upstream\n");
        assert!(git(&dir, &["remote", "get-url", "origin"]).contains("up.git"));
    }
}

/// What a created repository must not keep: each item would make the user's git run a command
/// that creates `marker`.
fn plant_evil_repository(marker: &Path) -> String {
    let m = path_str(marker);
    format!(
        "git init -q -b main sub && cd sub
         git config core.fsmonitor 'touch {m}; false'
         git config core.hooksPath .githooks
         git config alias.x '!touch {m}'
         git config include.path ../../evil.inc
         git config filter.x.clean 'touch {m}; cat'
         git config user.email agent@example.com
         printf '[core]\\n\\tpager = touch {m}; cat\\n' > ../evil.inc
         printf '#!/bin/sh\\ntouch {m}\\n' > .git/hooks/post-checkout
         chmod +x .git/hooks/post-checkout
         echo '* filter=x' > .gitattributes && echo data > a.txt
         git -c core.fsmonitor=false add a.txt .gitattributes
         git -c core.fsmonitor=false -c user.name=A -c user.email=a@e commit -q -m one; echo planted=$?"
    )
}

/// Runs what would trigger each planted item with the user's git in `dir`; the marker must not
/// appear.
fn assert_host_git_runs_nothing(e: &ExecEnv, dir: &Path, marker: &Path) {
    for args in [
        &["status"][..],
        &["x"],
        &["log", "-p"],
        &["-c", "core.pager=", "diff", "HEAD"],
        &["checkout", "-q", "-b", "other"],
        &["add", "-A"],
    ] {
        host_git(e, dir, args);
        assert!(
            !marker.exists(),
            "the user's `git {}` ran a command planted from inside the sandbox",
            args.join(" ")
        );
    }
}

#[test]
fn a_created_repository_keeps_nothing_that_would_run_code_on_the_host() {
    let e = ExecEnv::new();
    let marker = e.outside.join("ran");
    let r = e.sh(&plant_evil_repository(&marker));
    r.assert_ok();
    r.assert_succeeded("planted");
    assert!(
        !marker.exists(),
        "the planted commands ran inside the sandbox"
    );
    let git_dir = e.workspace.join("sub/.git");
    let lines = bridle_lines(&r);
    let config = lines
        .iter()
        .find(|l| l.contains(&format!("`{}`", git_dir.join("config").display())))
        .unwrap_or_else(|| panic!("no line about the config:\n{}", r.stderr));
    for key in [
        "core.fsmonitor",
        "core.hookspath",
        "alias.x",
        "include.path",
    ] {
        assert!(config.contains(key), "{key} not named: {config}");
    }
    assert!(
        lines
            .iter()
            .any(|l| l.contains("hooks/post-checkout") && l.contains("moved to")),
        "{}",
        r.stderr
    );
    // The config git keeps using has what the repository needs and nothing that runs.
    let kept = std::fs::read_to_string(git_dir.join("config")).unwrap();
    assert!(kept.contains("repositoryformatversion"), "{kept}");
    for gone in ["fsmonitor", "hooksPath", "alias", "include", "filter"] {
        assert!(!kept.contains(gone), "{gone} kept: {kept}");
    }
    // And the everyday settings a person made there (a UX pass on 2026-12-07 found a commit
    // failing after `user.email` was dropped).
    assert!(kept.contains("agent@example.com"), "{kept}");
    // What was moved aside is all there, for the user to look at.
    let aside: Vec<String> = listing(&git_dir)
        .into_iter()
        .filter(|n| n.starts_with("config.bridle-moved-"))
        .collect();
    assert_eq!(aside.len(), 1, "{:?}", listing(&git_dir));
    let moved = std::fs::read_to_string(git_dir.join(&aside[0])).unwrap();
    assert!(moved.contains("fsmonitor"), "{moved}");
    assert_eq!(
        git(&e.workspace.join("sub"), &["log", "--format=%s"]),
        "one\n"
    );
    assert_host_git_runs_nothing(&e, &e.workspace.join("sub"), &marker);
}

/// A bare repository made at the root of a workspace that holds none: git on the host run
/// there uses it (unless `safe.bareRepository` says otherwise).
#[test]
fn a_bare_repository_created_at_the_workspace_root_is_inspected() {
    let e = ExecEnv::new();
    let marker = e.outside.join("ran");
    let r = e.sh(&format!(
        "git init -q --bare . && git config alias.x '!touch {}'; echo planted=$?",
        path_str(&marker)
    ));
    r.assert_ok();
    r.assert_succeeded("planted");
    assert!(
        bridle_lines(&r).iter().any(|l| l.contains("alias.x")),
        "{}",
        r.stderr
    );
    host_git(&e, &e.workspace, &["x"]);
    assert!(!marker.exists(), "the user's git ran the planted alias");
}

/// The user's git in the existing repository's root: `git init` there finds it and cannot
/// rewrite its protected config (bridle holds git's lock on it); nothing changes.
#[test]
fn git_init_in_an_existing_repository_cannot_rewrite_its_config() {
    let e = git_repo();
    git(&e.workspace, &EMPTY_COMMIT);
    let config = e.workspace.join(".git/config");
    let before = (snapshot(&config), listing(&e.workspace.join(".git/hooks")));
    let r = e.sh("git init; echo init=$?
         git init -q --template=/nonexistent .; echo reinit=$?");
    r.assert_ok();
    r.assert_failed("init");
    r.assert_failed("reinit");
    assert!(
        r.stderr.contains("could not lock config file"),
        "{}",
        r.stderr
    );
    assert_eq!(
        (snapshot(&config), listing(&e.workspace.join(".git/hooks"))),
        before
    );
    assert_eq!(git(&e.workspace, &["log", "--format=%s"]), "init\n");
}

#[test]
fn nothing_bridle_places_is_visible_to_git_or_left_behind() {
    let e = git_repo();
    e.write("a.txt", "a\n");
    git(&e.workspace, &["add", "a.txt"]);
    git(&e.workspace, &EMPTY_COMMIT);
    // Missing protected paths get placeholders: `.git/hooks` and `.bridle`.
    std::fs::remove_dir_all(e.workspace.join(".git/hooks")).unwrap();
    let before = listing(&e.workspace);
    let stamp = e.outside_file("stamp", "");
    let r = e.sh(
        "test -d .bridle && test -d .git/hooks && echo placeholders=0
         git status --porcelain --ignored; echo status=$?
         git add -A && git status --porcelain; echo add=$?",
    );
    r.assert_ok();
    r.assert_succeeded("placeholders");
    assert_eq!(
        r.stdout
            .lines()
            .filter(|l| !l.contains('='))
            .collect::<Vec<_>>(),
        Vec::<&str>::new(),
        "git saw something bridle placed"
    );
    assert_eq!(
        git(&e.workspace, &["status", "--porcelain", "--ignored"]),
        ""
    );
    assert_eq!(listing(&e.workspace), before);
    // What changed since: only what git itself wrote in `.git` (its index, objects).
    let newer = Command::new("find")
        .arg(&e.workspace)
        .args(["-newer", path_str(&stamp), "-not", "-type", "d"])
        .output()
        .unwrap();
    let git_dir = e.workspace.join(".git");
    let left: Vec<&str> = std::str::from_utf8(&newer.stdout)
        .unwrap()
        .lines()
        .filter(|l| {
            let path = Path::new(l);
            !path.starts_with(&git_dir)
                || path
                    .strip_prefix(&git_dir)
                    .is_ok_and(|p| p.to_string_lossy().contains("bridle"))
        })
        .collect();
    assert_eq!(left, Vec::<&str>::new(), "left in the workspace");
}

/// Run from a subdirectory of a repository (the workspace is `sub`): the repository's `.git`
/// is outside the workspace and so read-only already; nothing is planted in `sub`, and a
/// repository the command creates there is inspected like any other.
#[test]
fn a_run_from_a_subdirectory_of_a_repository_plants_nothing_there() {
    let e = git_repo();
    e.write("sub/file.txt", "x\n");
    git(&e.workspace, &["add", "sub/file.txt"]);
    git(&e.workspace, &EMPTY_COMMIT);
    let sub = e.workspace.join("sub");
    let marker = e.outside.join("ran");
    let mut cmd = e.exec_cmd(
        &[],
        &[],
        &[
            "sh",
            "-c",
            &format!(
                "ls -A; git status --porcelain .; echo status=$?
                 echo x >> ../.git/config; echo outer_config=$?
                 git init -q . && git config core.fsmonitor 'touch {}; false'; echo planted=$?",
                path_str(&marker)
            ),
        ],
    );
    cmd.current_dir(&sub);
    let r = run_bounded(&mut cmd);
    r.assert_ok();
    assert_eq!(r.stdout.lines().next(), Some("file.txt"), "{}", r.stdout);
    r.assert_succeeded("status");
    r.assert_failed("outer_config");
    r.assert_succeeded("planted");
    assert!(
        bridle_lines(&r)
            .iter()
            .any(|l| l.contains("core.fsmonitor")),
        "{}",
        r.stderr
    );
    host_git(&e, &sub, &["status"]);
    assert!(!marker.exists(), "the user's git ran the planted fsmonitor");
}

/// A missing `.bridle` in a workspace without a repository gets no placeholder (`git clone
/// URL .` needs an empty directory): one the command creates is moved aside when the run ends.
#[test]
fn a_bridle_dir_the_command_creates_is_moved_aside_when_the_run_ends() {
    let e = ExecEnv::new();
    let r = e.sh("ls -A | wc -l | sed 's/^ */entries=/'
         mkdir .bridle && echo 'mode: read-only' > .bridle/profile.yaml; echo create=$?");
    r.assert_ok();
    assert_eq!(r.value("entries"), "0");
    assert!(!e.workspace.join(".bridle").exists());
    let aside = listing(&e.workspace);
    assert_eq!(aside.len(), 1, "{aside:?}");
    assert!(aside[0].starts_with(".bridle.bridle-moved-"), "{aside:?}");
    assert!(
        bridle_lines(&r).iter().any(|l| l.contains(".bridle`")),
        "{}",
        r.stderr
    );
}

#[test]
fn the_bash_tool_result_names_what_was_moved_aside() {
    let e = ExecEnv::new();
    let marker = e.outside.join("ran");
    let args = serde_json::json!({
        "command": format!(
            "git init -q r && git -C r config core.fsmonitor 'touch {}'",
            path_str(&marker)
        )
    });
    let mut cmd = e.bridle();
    cmd.args(["tool", "bash", &args.to_string()]);
    let r = run_bounded(&mut cmd);
    r.assert_ok();
    let v: Value = serde_json::from_str(r.stdout.trim()).unwrap();
    let config = e.workspace.join("r/.git/config");
    let content = v["content"].as_str().unwrap();
    assert!(
        content.contains(&format!("`{}`", config.display())) && content.contains("core.fsmonitor"),
        "{content}"
    );
    let moved = &v["sandbox"]["quarantined"][0];
    assert_eq!(moved["path"], path_str(&config));
    assert!(
        moved["moved_to"]
            .as_str()
            .is_some_and(|to| Path::new(to).exists())
    );
    host_git(&e, &e.workspace.join("r"), &["status"]);
    assert!(!marker.exists());
}

#[test]
fn the_session_log_records_what_was_moved_aside() {
    let e = ExecEnv::new();
    let script = e.home.join("script.yaml");
    std::fs::write(
        &script,
        r#"
- tool_calls:
    - name: bash
      arguments: {command: "git init -q r && git -C r config core.pager 'touch x'"}
- text: done
"#,
    )
    .unwrap();
    let sessions = e.home.join("sessions");
    let mut cmd = e.bridle();
    cmd.arg("run")
        .arg("--model")
        .arg(format!("script:{}", path_str(&script)))
        .arg("--session-dir")
        .arg(&sessions)
        .arg("make a repository");
    let r = run_bounded(&mut cmd);
    r.assert_ok();
    let id = r
        .stderr
        .lines()
        .find_map(|l| l.strip_prefix("bridle: session "))
        .map(|rest| rest.split(':').next().unwrap().trim().to_owned())
        .unwrap_or_else(|| panic!("no session line:\n{}", r.stderr));
    let dir = bridle_agent::log::SessionDir::existing(&sessions).unwrap();
    let events: Vec<_> = dir
        .read(&id)
        .unwrap()
        .iter()
        .filter_map(|r| r.event().unwrap())
        .collect();
    let config = e.workspace.join("r/.git/config");
    let quarantined: Vec<_> = events
        .iter()
        .filter_map(|ev| match ev {
            bridle_agent::log::Event::SandboxQuarantine { path, reason, .. } => {
                Some((path.clone(), reason.clone()))
            }
            _ => None,
        })
        .collect();
    assert_eq!(quarantined.len(), 1, "{events:?}");
    assert_eq!(quarantined[0].0, path_str(&config));
    assert!(quarantined[0].1.contains("core.pager"), "{quarantined:?}");
    let mut show = e.bridle();
    show.args(["log", "show", &id, "--session-dir", path_str(&sessions)]);
    let shown = run_bounded(&mut show);
    shown.assert_ok();
    assert!(
        shown
            .stdout
            .lines()
            .any(|l| l.contains("moved aside:") && l.contains("r/.git/config")),
        "{}",
        shown.stdout
    );
}

#[test]
fn the_terminal_tool_result_names_what_was_moved_aside() {
    let e = ExecEnv::new();
    let args = serde_json::json!({
        "input": "git init -q r && git -C r config core.editor 'touch x'; echo done\n"
    });
    let mut cmd = e.bridle();
    cmd.args(["tool", "terminal", &args.to_string()]);
    let r = run_bounded(&mut cmd);
    let v: Value = serde_json::from_str(r.stdout.trim())
        .unwrap_or_else(|err| panic!("{err}: {}\n{}", r.stdout, r.stderr));
    assert_eq!(v["ok"], true, "{v}");
    let content = v["content"].as_str().unwrap();
    assert!(
        content.contains("r/.git/config") && content.contains("core.editor"),
        "{content}"
    );
    assert_eq!(
        v["sandbox"]["quarantined"][0]["path"],
        path_str(&e.workspace.join("r/.git/config"))
    );
}
