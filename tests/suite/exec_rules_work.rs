//! The exec supervisor and ordinary work: what must keep working under `ci-locked` (git,
//! make, cargo, pytest), `ask` at an exec (a person answers; nobody: denied), debuggers inside,
//! a process made with `clone` untraced, `danger-full-access`, execs of missing files. Failing
//! closed is in [`super::exec_rules_closed`].

use super::exec_rules::{assert_nothing_pushed, bash_tool, git, script, with_remote};
use super::support::{
    ExecEnv, bridle_in_pty, path_str, pty_command, run, run_bounded, run_within, tool_result_in_pty,
};

#[track_caller]
fn assert_no_exec_denied(r: &super::support::Run, what: &str) {
    assert!(
        !r.stderr.contains("denied exec of") && !r.stderr.contains("needs approval for exec"),
        "{what}: the supervisor denied something:\n{}",
        r.stderr
    );
}

#[test]
fn git_status_commit_and_log_keep_working_under_ci_locked() {
    let e = with_remote();
    let name = script(
        &e,
        "work.sh",
        // The common alias `git st` (a sixth red-team pass found it denied as `git push`), also
        // run by git itself, which sets `GIT_EXEC_PATH` (a seventh).
        // An alias given on the command line whose name git could correct to `push` (a UX
        // pass on 2026-12-07): git runs the alias, it corrects nothing.
        "set -e\necho change >> README\ngit status --short\ngit -c alias.st=status st --short\ngit -c alias.st=status -c alias.x='!git st --short' x\ngit -c alias.ps=status ps --short\ngit -c user.name=t -c user.email=t@e commit -qam change\ngit log --oneline | wc -l",
    );
    let r = run_bounded(&mut e.exec_cmd(&["--profile", "ci-locked"], &[], &[&name]));
    r.assert_ok();
    assert_no_exec_denied(&r, "git");
    assert!(
        r.stdout
            .contains(" M README\n M README\n M README\n M README\n"),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("2\nend"), "{}", r.stdout);
    assert_eq!(
        git(&e.workspace.join("repo"), &["log", "-1", "--format=%s"]).trim(),
        "change"
    );
}

#[test]
fn fetching_and_pulling_from_the_repository_itself_keep_working_under_ci_locked() {
    // git runs `git-upload-pack .`, a hard link of git: its argument is a path, not a
    // subcommand git could correct to `push`.
    let e = with_remote();
    let name = script(
        &e,
        "fetch.sh",
        "set -e\ngit fetch -q . main:other\ngit -c user.name=t -c user.email=t@e pull -q . other\ngit branch --list other",
    );
    let r = run_bounded(&mut e.exec_cmd(&["--profile", "ci-locked"], &[], &[&name]));
    r.assert_ok();
    assert_no_exec_denied(&r, "git fetch .");
    assert!(r.stdout.contains("other\nend"), "{}", r.stdout);
}

#[test]
fn make_with_a_c_compiler_keeps_working_under_ci_locked() {
    let e = ExecEnv::new();
    e.write(
        "hello.c",
        "#include <stdio.h>\nint main(void){puts(\"built\");return 0;}\n",
    );
    e.write(
        "Makefile",
        "hello: hello.c\n\tcc -o hello hello.c\n\t./hello\n",
    );
    let r = run_bounded(&mut e.exec_cmd(&["--profile", "ci-locked"], &[], &["make"]));
    r.assert_ok();
    assert_no_exec_denied(&r, "make");
    assert!(r.stdout.contains("built"), "{}\n{}", r.stdout, r.stderr);
}

#[test]
fn ldd_and_the_loaders_own_options_keep_working_under_ci_locked() {
    // `ldd` runs the loader with `--version` (a UX pass on 2026-12-07 found it asking, so
    // denied); a loader that knows the option runs nothing with it. An option it does not know
    // still leaves what it loads unknown: that asks, so it is denied with nobody to ask.
    let e = ExecEnv::new();
    e.write(
        "loader.sh",
        "ld=$(ls /lib64/ld-linux-*.so.* /lib/ld-linux-*.so.* 2>/dev/null | head -1)
         ldd /bin/sh >/dev/null; echo ldd=$?
         \"$ld\" --version >/dev/null; echo version=$?
         \"$ld\" --help >/dev/null; echo help=$?
         \"$ld\" --no-such-option /bin/true; echo unknown=$?
",
    );
    let r = run_bounded(&mut e.exec_cmd(&["--profile", "ci-locked"], &[], &["sh", "loader.sh"]));
    for (key, want) in [
        ("ldd", "0"),
        ("version", "0"),
        ("help", "0"),
        ("unknown", "126"),
    ] {
        assert_eq!(r.value(key), want, "{key}:\n{}\n{}", r.stdout, r.stderr);
    }
    assert!(
        r.stderr.contains("needs approval") && !r.stderr.contains("--version"),
        "{}",
        r.stderr
    );
}

#[test]
fn python_m_pytest_keeps_working_under_ci_locked() {
    let e = ExecEnv::new();
    e.write(
        "test_sample.py",
        "import subprocess\n\ndef test_runs_a_subprocess():\n    assert subprocess.run(['true']).returncode == 0\n",
    );
    let r = run_bounded(&mut e.exec_cmd(
        &["--profile", "ci-locked"],
        &[],
        &[
            "/usr/bin/python3",
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
        ],
    ));
    assert_no_exec_denied(&r, "pytest");
    r.assert_ok();
    assert!(r.stdout.contains("1 passed"), "{}\n{}", r.stdout, r.stderr);
}

#[test]
fn a_virtualenv_activated_with_dot_keeps_working_under_ci_locked() {
    // What `.` runs is hidden from the command-line rules; the exec supervisor decides each
    // program it starts, so the agent's usual `. .venv/bin/activate && ...` runs.
    let e = ExecEnv::new();
    let venv = std::process::Command::new("/usr/bin/python3")
        .args([
            "-m",
            "venv",
            "--without-pip",
            "--system-site-packages",
            ".venv",
        ])
        .current_dir(&e.workspace)
        .output()
        .expect("run python3 -m venv");
    assert!(
        venv.status.success(),
        "python3 -m venv: {}",
        String::from_utf8_lossy(&venv.stderr)
    );
    e.write(
        "test_sample.py",
        "import sys\n\ndef test_in_the_venv():\n    assert sys.prefix.endswith('.venv')\n",
    );
    let (_, v) = bash_tool(
        &e,
        ". .venv/bin/activate && command -v python && python -m pytest -q -p no:cacheprovider",
    );
    assert_eq!(v["ok"], true, "{v}");
    let content = v["content"].as_str().unwrap();
    assert!(content.contains(".venv/bin/python\n"), "{content}");
    assert!(content.contains("1 passed"), "{content}");
    assert!(v["sandbox"].get("exec_decisions").is_none(), "{v}");
}

#[test]
fn cargo_build_offline_keeps_working_under_ci_locked() {
    // A toolchain this user can run (rustup's proxies need a HOME this test replaces).
    let bin = super::support::toolchain_bin();
    let (cargo, rustc) = (bin.join("cargo"), bin.join("rustc"));
    let e = ExecEnv::new();
    e.write(
        "Cargo.toml",
        "[package]\nname = \"tiny\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    );
    e.write(
        "src/main.rs",
        "fn main() { println!(\"built by cargo\"); }\n",
    );
    e.write(
        ".cargo/config.toml",
        format!("[build]\nrustc = \"{}\"\n", rustc.display()),
    );
    let r = run_within(
        &mut e.exec_cmd(
            &["--profile", "ci-locked"],
            &[],
            &[cargo.to_str().unwrap(), "run", "--offline", "-q"],
        ),
        std::time::Duration::from_secs(300),
    );
    assert_no_exec_denied(&r, "cargo");
    r.assert_ok();
    assert!(
        r.stdout.contains("built by cargo"),
        "{}\n{}",
        r.stdout,
        r.stderr
    );
}

#[test]
fn an_ask_rule_at_an_exec_holds_the_process_until_a_person_answers() {
    for (answer, pushed) in [("y", true), ("n", false)] {
        let e = with_remote();
        let name = script(&e, "ask.sh", "git push -q origin HEAD:main; echo pushed=$?");
        // workstation asks before `git push`; a person at the terminal answers.
        let r = bridle_in_pty(
            &["--profile", "workstation", "exec", "--", &name],
            &e.home,
            &e.workspace,
            Some(answer),
            None,
        );
        assert!(
            r.stdout.contains("approval needed for tool `exec`"),
            "{answer}: {}",
            r.stdout
        );
        let refs = git(&e.workspace.join("remote.git"), &["for-each-ref"]);
        assert_eq!(!refs.trim().is_empty(), pushed, "{answer}: {}", r.stdout);
        if pushed {
            assert!(r.stdout.contains("pushed=0"), "{}", r.stdout);
            assert!(r.stdout.contains("approved"), "{}", r.stdout);
        } else {
            assert!(r.stdout.contains("pushed=126"), "{}", r.stdout);
            assert!(
                r.stdout
                    .contains("rule ask-git-push needs approval for exec of"),
                "{}",
                r.stdout
            );
        }
    }
}

/// The command's own exec is the first the supervisor decides, before the run has started:
/// its question must reach the person (it used to wait forever for an observer that exists
/// only once the run is started), and a command line the person approved is not asked about
/// a second time, neither by `bridle exec` nor through the `bash` tool (its `bash -c` and the
/// `git` it runs), nor when a wrapper runs it (`env git push`, seen in the text or only at its
/// exec).
#[test]
fn an_approved_command_is_asked_about_once_and_runs() {
    let push = "git -C repo push -q origin HEAD:main";
    let bash = serde_json::json!({ "command": push }).to_string();
    // Through a wrapper: approving it approves the command it runs.
    let env_push = format!("env {push}");
    let wrapped = serde_json::json!({ "command": env_push }).to_string();
    // A wrapper the text does not show: asked at its exec, once.
    let hidden = serde_json::json!({ "command": format!("x=env; $x {push}") }).to_string();
    let runs: [(&str, Vec<&str>); 5] = [
        ("exec", push.split(' ').collect()),
        ("tool", vec!["bash", &bash]),
        ("exec", env_push.split(' ').collect()),
        ("tool", vec!["bash", &wrapped]),
        ("tool", vec!["bash", &hidden]),
    ];
    for (how, rest) in runs {
        let e = with_remote();
        let mut args = vec!["--profile", "workstation", how];
        if how == "exec" {
            args.push("--");
        }
        args.extend(rest);
        // A second question would be refused (and counted).
        let r = bridle_in_pty(&args, &e.home, &e.workspace, Some("y,n"), None);
        let asked = r.stdout.matches("approval needed for tool").count();
        assert_eq!(asked, 1, "{how}: asked {asked} times:\n{}", r.stdout);
        let refs = git(&e.workspace.join("remote.git"), &["for-each-ref"]);
        assert!(!refs.trim().is_empty(), "{how}: not pushed:\n{}", r.stdout);
    }
}

#[test]
fn an_ask_rule_at_an_exec_is_denied_when_nobody_can_be_asked() {
    let e = with_remote();
    let name = script(
        &e,
        "headless.sh",
        "git push origin HEAD:main; echo pushed=$?",
    );
    let mut cmd = e.bridle();
    cmd.args(["--profile", "workstation", "tool", "bash"])
        .arg(serde_json::json!({ "command": name }).to_string());
    let r = run_bounded(&mut cmd);
    let v: serde_json::Value = serde_json::from_str(r.stdout.trim()).unwrap();
    let content = v["content"].as_str().unwrap();
    assert!(content.contains("pushed=126"), "{v}");
    assert!(
        content.contains("[bridle: rule ask-git-push needs approval for exec of"),
        "{v}"
    );
    let decision = &v["sandbox"]["exec_decisions"][0];
    assert_eq!(decision["decision"], "ask", "{v}");
    assert_eq!(decision["outcome"], "refused", "{v}");
    assert_nothing_pushed(&e, "headless ask");
}

#[test]
fn debuggers_inside_a_supervised_sandbox_fail_saying_why() {
    let e = ExecEnv::new();
    let r = e.sh_with(
        &["--profile", "ci-locked"],
        &[],
        "python3 -c 'import ctypes, os; libc = ctypes.CDLL(None, use_errno=True); r = libc.ptrace(0, 0, 0, 0); print(\"traceme=%d errno=%s\" % (r, os.strerror(ctypes.get_errno()))); libc.ptrace(0, 0, 0, 0)'",
    );
    r.assert_ok();
    assert!(
        r.stdout
            .contains("traceme=-1 errno=Operation not permitted"),
        "{}\n{}",
        r.stdout,
        r.stderr
    );
    // Why, on the command's stderr, once for the two tries.
    let why = "in a sandbox with command rules no process may trace another";
    assert_eq!(r.stderr.matches(why).count(), 1, "{}", r.stderr);
    assert!(
        r.stderr.contains("bridle: ptrace refused to `python3 -c"),
        "{}",
        r.stderr
    );
    // strace and gdb themselves: they fail, and the sandbox's stderr says why, naming them.
    let r = e.sh_with(
        &["--profile", "ci-locked"],
        &[],
        "strace -f -o /dev/null /bin/true; echo strace=$?\n\
         gdb -q -batch -ex run --args /bin/true; echo gdb=$?",
    );
    r.assert_failed("strace");
    r.assert_failed("gdb");
    for tool in ["strace -f -o /dev/null /bin/true", "gdb -q -batch -ex run"] {
        assert!(
            r.stderr
                .contains(&format!("bridle: ptrace refused to `{tool}")),
            "{tool}: {}",
            r.stderr
        );
    }
    assert_eq!(r.stderr.matches(why).count(), 2, "{}", r.stderr);
}

#[test]
fn a_process_made_with_clone_untraced_is_supervised_too() {
    let e = ExecEnv::new();
    // clone(CLONE_UNTRACED) would escape a tracer's fork events; the notification of its exec
    // does not depend on being traced, so its denied exec is refused like any other.
    let source = e.write(
        "untraced.c",
        r#"
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
int main(void) {
    long pid = syscall(SYS_clone, CLONE_UNTRACED | SIGCHLD, 0, 0, 0, 0);
    if (pid == 0) {
        char *argv[] = {"echo", "harmful", NULL};
        execv("/bin/echo", argv);
        printf("exec=%s\n", strerror(errno));
        fflush(stdout);
        _exit(0);
    }
    int status;
    waitpid((pid_t)pid, &status, 0);
    return 0;
}
"#,
    );
    e.compile_c(&source, "untraced", &[]);
    let forbid = e.profile(
        "forbid.yaml",
        "extends: workspace-write\nrules:\n  commands:\n    - id: deny-harmful\n      prefix: [echo, harmful]\n      decision: deny\n      examples: [\"echo harmful\"]\n      counter_examples: [\"echo neutral\"]\n",
    );
    let r = run_bounded(&mut e.exec_cmd(&["--profile", &forbid], &[], &["./untraced"]));
    r.assert_ok();
    assert_eq!(r.value("exec"), "Permission denied", "{}", r.stderr);
    assert!(!r.stdout.contains("harmful"), "{}", r.stdout);
    // Without command rules the same exec runs.
    let r = run_bounded(&mut e.exec_cmd(&["--profile", "workspace-write"], &[], &["./untraced"]));
    r.assert_ok();
    assert!(r.stdout.contains("harmful"), "{}", r.stdout);
}

#[test]
fn danger_full_access_is_supervised_at_the_exec_from_the_launcher() {
    let e = with_remote();
    let name = script(&e, "dfa.sh", "git push origin HEAD:main; echo pushed=$?");
    let r = run_bounded(&mut e.exec_cmd(
        &["--profile", "ci-locked"],
        &["--mode", "danger-full-access"],
        &[&name],
    ));
    r.assert_ok();
    assert_eq!(r.value("pushed"), "137", "{}", r.stderr);
    assert!(
        r.stderr.contains("rule deny-git-push denied exec of")
            && r.stderr.contains("killed at the exec, before it ran"),
        "{}",
        r.stderr
    );
    assert_nothing_pushed(&e, "danger-full-access");
}

/// An approval at an exec holds for the file the question named: a path swapped to another
/// file while the person answers (a copy of git, so the rules decide the same) is asked about
/// again; answered no, the exec is killed and nothing is pushed.
#[test]
fn an_approval_does_not_carry_over_to_a_file_swapped_in_after_the_question() {
    let e = with_remote();
    let git_path = String::from_utf8(
        std::process::Command::new("sh")
            .args(["-c", "command -v git"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    let git_path = git_path.trim();
    let copy = e.workspace.join("git-copy");
    std::fs::copy(git_path, &copy).unwrap();
    let link = e.workspace.join("link");
    std::os::unix::fs::symlink(git_path, &link).unwrap();
    let mut cmd = pty_command(
        &[
            "--profile",
            "workstation",
            "exec",
            "--",
            "sh",
            "-c",
            "cd repo && ../link push -q origin HEAD:main; echo rc=$?",
        ],
        &e.home,
        &e.workspace,
        Some("y,n"),
        None,
    );
    cmd.env(
        "BRIDLE_TEST_PTY_SWAP",
        format!("{}|{}", path_str(&link), path_str(&copy)),
    );
    let r = run(&mut cmd);
    let text = &r.stdout;
    assert!(
        text.matches("[y/N]").count() == 2,
        "asked once only:\n{text}"
    );
    assert!(text.contains("rc=137"), "{text}");
    assert_nothing_pushed(&e, "a swapped file ran on another file's approval");
}

/// Execs of files that are not there (whose argv the supervisor does not read) fail as they fail
/// without it: the same errors (`ENOENT`, `ENOTDIR`, `EACCES` for a directory, and below a
/// directory only its owner may search), `PATH` searched past missing directories, a file made
/// after a failed exec runs; and a file named through the caller's own descriptors
/// (`/proc/self/fd/N`, `/dev/fd/N`: missing where the supervisor looks) runs.
#[test]
fn execs_of_missing_files_fail_as_they_do_without_the_supervisor() {
    let e = ExecEnv::new();
    e.write(
        "missing.py",
        r##"import os, sys
def attempt(what, run):
    pid = os.fork()
    if pid == 0:
        try:
            run()
        except OSError as err:
            os._exit(err.errno)
    _, status = os.waitpid(pid, 0)
    print(what, os.waitstatus_to_exitcode(status))
attempt("absolute", lambda: os.execv("/no/such/program", ["program"]))
attempt("relative", lambda: os.execv("no-such-program", ["program"]))
attempt("not-a-dir", lambda: os.execv("/etc/passwd/program", ["program"]))
env = dict(os.environ, PATH="/no/such/dir:/also/not/here:/usr/bin:/bin")
attempt("path-search", lambda: os.execvpe("true", ["true"], env))
fd = os.open("/bin/true", os.O_RDONLY)
os.dup2(fd, 20)
attempt("own-fd", lambda: os.execv("/proc/self/fd/20", ["true"]))
attempt("dev-fd", lambda: os.execv("/dev/fd/20", ["true"]))
attempt("before-made", lambda: os.execv("./made-later", ["made-later"]))
with open("made-later", "w") as f:
    f.write("#!/bin/sh\nexit 7\n")
os.chmod("made-later", 0o755)
attempt("after-made", lambda: os.execv("./made-later", ["made-later"]))
attempt("link-to-nothing", lambda: os.execv("/usr/../usr/bin/../../no/such", ["program"]))
attempt("a-directory", lambda: os.execv("/usr/bin", ["program"]))
attempt("unsearchable", lambda: os.execv("/root/no/such/program", ["program"]))
"##,
    );
    let norules = e.profile(
        "norules.yaml",
        "extends: ci-locked\nrules:\n  commands: {replace: []}\n",
    );
    let mut outputs = Vec::new();
    for profile in ["ci-locked", norules.as_str()] {
        let _ = std::fs::remove_file(e.workspace.join("made-later"));
        let r =
            run_bounded(&mut e.exec_cmd(&["--profile", profile], &[], &["python3", "missing.py"]));
        r.assert_ok();
        assert_no_exec_denied(&r, profile);
        outputs.push(r.stdout.clone());
    }
    // `/root` is searchable by its owner only: EACCES or ENOENT depending on who runs the
    // test, the same with rules and without.
    assert!(
        outputs[0].starts_with(
            "absolute 2\nrelative 2\nnot-a-dir 20\npath-search 0\nown-fd 0\ndev-fd 0\nbefore-made 2\nafter-made 7\nlink-to-nothing 2\na-directory 13\nunsearchable "
        ),
        "under ci-locked: {}",
        outputs[0]
    );
    assert_eq!(outputs[0], outputs[1], "with rules and without");
}

/// A question about an exec does not hold the run past its timeout: the tree is killed on
/// time, the question is withdrawn from the person, the exec never runs, and what happened is
/// on record (`bridle exec`'s lines; the `bash` tool's exec decisions).
#[test]
fn a_timeout_withdraws_an_open_exec_question_and_kills_the_run_on_time() {
    let e = with_remote();
    let name = script(
        &e,
        "slow-ask.sh",
        "git push -q origin HEAD:main; echo pushed=$?",
    );
    let started = std::time::Instant::now();
    let r = bridle_in_pty(
        &[
            "--profile",
            "workstation",
            "exec",
            "--timeout",
            "2",
            "--",
            &name,
        ],
        &e.home,
        &e.workspace,
        None,
        None,
    );
    let took = started.elapsed();
    assert_eq!(r.code, Some(124), "{}", r.stdout);
    assert!(took < std::time::Duration::from_secs(15), "took {took:?}");
    assert!(
        r.stdout.contains("approval needed for tool `exec`"),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("question withdrawn"), "{}", r.stdout);
    assert!(
        r.stdout
            .contains("withdrawn: the run timed out before anyone answered; denied"),
        "{}",
        r.stdout
    );
    assert!(!r.stdout.contains("pushed="), "{}", r.stdout);
    assert_nothing_pushed(&e, "timed-out question, exec");

    let bash = serde_json::json!({ "command": name, "timeout_secs": 2 }).to_string();
    let started = std::time::Instant::now();
    let r = bridle_in_pty(
        &["--profile", "workstation", "tool", "bash", &bash],
        &e.home,
        &e.workspace,
        None,
        None,
    );
    let took = started.elapsed();
    assert!(took < std::time::Duration::from_secs(15), "took {took:?}");
    let v = tool_result_in_pty(&r);
    assert!(v["content"].as_str().unwrap().contains("timed out"), "{v}");
    let decision = &v["sandbox"]["exec_decisions"][0];
    assert_eq!(decision["decision"], "ask", "{v}");
    assert_eq!(decision["outcome"], "refused", "{v}");
    assert_eq!(
        decision["answer"], "withdrawn: the run timed out before anyone answered",
        "{v}"
    );
    assert_nothing_pushed(&e, "timed-out question, bash tool");
}
