//! The exec supervisor and ordinary work: what must keep working under `ci-locked` (git,
//! make, cargo, pytest), `ask` at an exec (a person answers; nobody: denied), no supervisor
//! without command rules, debuggers inside, `danger-full-access`, and failing closed (an
//! untraced process execs nothing; a supervisor that dies takes its sandbox with it).

use super::exec_rules::{assert_attributed, assert_nothing_pushed, git, script, with_remote};
use super::support::{ExecEnv, bridle_in_pty, path_str, pty_command, run, run_bounded, run_within};

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
        "set -e\necho change >> README\ngit status --short\ngit -c user.name=t -c user.email=t@e commit -qam change\ngit log --oneline | wc -l",
    );
    let r = run_bounded(&mut e.exec_cmd(&["--profile", "ci-locked"], &[], &[&name]));
    r.assert_ok();
    assert_no_exec_denied(&r, "git");
    assert!(r.stdout.contains(" M README"), "{}", r.stdout);
    assert!(r.stdout.contains("2\nend"), "{}", r.stdout);
    assert_eq!(
        git(&e.workspace.join("repo"), &["log", "-1", "--format=%s"]).trim(),
        "change"
    );
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
fn cargo_build_offline_keeps_working_under_ci_locked() {
    // The toolchain that builds these tests; rustup's proxies need a HOME this test replaces.
    let cargo = std::path::PathBuf::from(env!("CARGO"));
    let rustc = cargo.with_file_name("rustc");
    if nix::unistd::access(&rustc, nix::unistd::AccessFlags::X_OK).is_err() {
        eprintln!(
            "cargo_build_offline_keeps_working_under_ci_locked: not run: the toolchain at `{}` is not readable by uid {} (it is run as root)",
            rustc.display(),
            nix::unistd::geteuid()
        );
        return;
    }
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
/// `git` it runs).
#[test]
fn an_approved_command_is_asked_about_once_and_runs() {
    let push = "git -C repo push -q origin HEAD:main";
    let bash = serde_json::json!({ "command": push }).to_string();
    let runs: [(&str, Vec<&str>); 2] = [
        ("exec", push.split(' ').collect()),
        ("tool", vec!["bash", &bash]),
    ];
    for (how, rest) in runs {
        let e = with_remote();
        let mut args = vec!["--profile", "workstation", how];
        if how == "exec" {
            args.push("--");
        }
        args.extend(rest);
        let r = bridle_in_pty(&args, &e.home, &e.workspace, Some("y"), None);
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

/// Whether a process of the sandbox holds a seccomp listener (init, the parent of the sandboxed
/// `marker` process, must not: `bridle-execs`, another child of it, does), and whether the
/// marker process is traced, while `profile` runs it.
fn listener_and_tracer(e: &ExecEnv, profile: &str) -> (bool, i32) {
    use super::support::{token, wait_until};
    use std::time::Duration;
    let marker = token("listened");
    let mut child = e
        .exec_cmd(
            &["--profile", profile],
            &[],
            &["bash", "-c", &format!("exec -a {marker} sleep 30")],
        )
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn bridle exec");
    let mut pid = 0;
    assert!(
        wait_until(Duration::from_secs(20), || {
            pid = processes_named(&marker).first().copied().unwrap_or(0);
            pid != 0
        }),
        "{profile}: the sandboxed process never showed up"
    );
    let init: i32 = status_field(pid, "PPid").parse().unwrap_or(0);
    let listens = |p: i32| {
        std::fs::read_dir(format!("/proc/{p}/fd"))
            .map(|fds| {
                fds.flatten().any(|fd| {
                    std::fs::read_link(fd.path())
                        .is_ok_and(|to| to.to_string_lossy() == "anon_inode:seccomp notify")
                })
            })
            .unwrap_or(false)
    };
    assert!(
        !listens(init),
        "{profile}: init keeps no copy of the listener"
    );
    let siblings: Vec<i32> = std::fs::read_dir("/proc")
        .map(|d| {
            d.flatten()
                .filter_map(|e| e.file_name().to_str()?.parse().ok())
                .filter(|p| status_field(*p, "PPid").parse() == Ok(init))
                .collect()
        })
        .unwrap_or_default();
    let holders: Vec<String> = siblings
        .iter()
        .filter(|p| listens(**p))
        .map(|p| status_field(*p, "Name"))
        .collect();
    assert!(
        holders.iter().all(|name| name == "bridle-execs"),
        "{profile}: the listener is held by {holders:?}"
    );
    let listens = !holders.is_empty();
    // The marker's command line shows from its exec event on, while it is still stopped there
    // (traced) until the supervisor decided: what must not happen is that it stays traced.
    let mut tracer = tracer_of(pid);
    wait_until(Duration::from_secs(10), || {
        tracer = tracer_of(pid);
        tracer == 0
    });
    let _ = child.kill();
    let _ = child.wait();
    // The sandbox dies with bridle (parent-death signals), a moment later.
    wait_until(Duration::from_secs(10), || {
        super::support::processes_with(&marker).is_empty()
    });
    super::support::assert_no_survivor(&marker, profile);
    (listens, tracer)
}

#[test]
fn only_a_sandbox_with_command_rules_is_supervised_and_nothing_stays_traced() {
    let e = ExecEnv::new();
    // The shipped workspace-write profile has no command rule: no supervisor, no listener.
    assert_eq!(listener_and_tracer(&e, "workspace-write"), (false, 0));
    // ci-locked has: the supervisor's own process holds the listener of every exec; a process
    // that exec'd is no longer traced (the supervisor let go of it at its exec event).
    assert_eq!(listener_and_tracer(&e, "ci-locked"), (true, 0));
}

#[test]
fn debuggers_inside_a_supervised_sandbox_fail_saying_why() {
    let e = ExecEnv::new();
    let r = e.sh_with(
        &["--profile", "ci-locked"],
        &[],
        "python3 -c 'import ctypes, os; libc = ctypes.CDLL(None, use_errno=True); r = libc.ptrace(0, 0, 0, 0); print(\"traceme=%d errno=%s\" % (r, os.strerror(ctypes.get_errno())))'",
    );
    r.assert_ok();
    assert!(
        r.stdout
            .contains("traceme=-1 errno=Operation not permitted"),
        "{}\n{}",
        r.stdout,
        r.stderr
    );
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

/// Live processes whose `argv[0]` is `name`.
fn processes_named(name: &str) -> Vec<i32> {
    super::support::processes_with(name)
        .into_iter()
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| c.split(|b| *b == 0).next() == Some(name.as_bytes()))
        })
        .collect()
}

/// A field of `/proc/PID/status` (empty when the process is gone).
fn status_field(pid: i32, field: &str) -> String {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .map(|v| v.trim().to_owned())
        .unwrap_or_default()
}

/// The host pid of the tracer of `pid` (`TracerPid` in its status), 0 for none.
fn tracer_of(pid: i32) -> i32 {
    status_field(pid, "TracerPid").parse().unwrap_or(0)
}

/// `pid` runs and is not on its way out (a zombie, or `SIGKILL` pending).
fn runs_on(pid: i32) -> bool {
    let dying = |field: &str| {
        u64::from_str_radix(&status_field(pid, field), 16).is_ok_and(|mask| mask & (1 << 8) != 0)
    };
    // A process the kernel is already tearing down (PF_EXITING, 0x4 in the flags of
    // /proc/PID/stat) has dequeued its SIGKILL and lost its tracer, but runs nothing more.
    let exiting = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            let after = stat.rsplit_once(')')?.1.to_owned();
            after.split_whitespace().nth(6)?.parse::<u64>().ok()
        })
        .is_none_or(|flags| flags & 0x4 != 0);
    let state = status_field(pid, "State");
    !exiting
        && !state.is_empty()
        && !state.starts_with('Z')
        && !state.starts_with('X')
        && !dying("SigPnd")
        && !dying("ShdPnd")
}

#[test]
fn a_supervisor_that_dies_takes_the_sandbox_with_it() {
    use super::support::{assert_no_survivor, token, wait_until};
    use std::time::Duration;
    // Under seccomp user notification the supervisor is a process of its own (`bridle-execs`,
    // a child of init), and init's end ends everything; under danger-full-access it is the
    // launcher.
    let cases = [
        (&[][..], false),
        (&[][..], true),
        (&["--mode", "danger-full-access"][..], false),
    ];
    for (mode, execs) in cases {
        let e = ExecEnv::new();
        let marker = token("supervised");
        // A loop that execs a program every 20 ms: left running without its supervisor, it would
        // exec unsupervised (or, under the filter, fail with ENOSYS and say so).
        let inner = "while :; do /bin/true || echo exec-failed; sleep 0.02; done";
        let mut child = e
            .exec_cmd(
                &["--profile", "ci-locked"],
                mode,
                &["bash", "-c", &format!("exec -a {marker} bash -c '{inner}'")],
            )
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("spawn bridle exec");
        // The loop is the command: its parent is the supervisor (init, or the launcher).
        let mut supervisor = 0;
        assert!(
            wait_until(Duration::from_secs(20), || {
                supervisor = processes_named(&marker)
                    .first()
                    .map_or(0, |p| status_field(*p, "PPid").parse().unwrap_or(0));
                supervisor != 0
            }),
            "{mode:?}: the supervised loop never showed up"
        );
        if execs {
            supervisor = std::fs::read_dir("/proc")
                .expect("/proc")
                .flatten()
                .filter_map(|e| e.file_name().to_str()?.parse().ok())
                .find(|p| {
                    status_field(*p, "PPid").parse() == Ok(supervisor)
                        && status_field(*p, "Name") == "bridle-execs"
                })
                .expect("the supervisor's own process, a child of init");
        }
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(supervisor),
            nix::sys::signal::Signal::SIGKILL,
        )
        .expect("kill the supervisor");
        // The loop is gone at once, never seen running on, and bridle ends.
        let mut untraced = Vec::new();
        let gone = wait_until(Duration::from_secs(5), || {
            let left = processes_named(&marker);
            // Seen running twice, 50 ms apart: a process being killed is caught between
            // losing its supervisor and exiting for less than that; one that escaped runs on.
            let first: Vec<i32> = left.iter().copied().filter(|p| runs_on(*p)).collect();
            if !first.is_empty() {
                std::thread::sleep(Duration::from_millis(50));
                untraced.extend(first.into_iter().filter(|p| runs_on(*p)));
            }
            left.is_empty()
        });
        let ended = wait_until(Duration::from_secs(20), || {
            matches!(child.try_wait(), Ok(Some(_)))
        });
        if !ended {
            let _ = child.kill();
        }
        let out = child.wait_with_output().expect("wait for bridle");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_no_survivor(&marker, "the sandbox of a dead supervisor");
        assert!(gone, "{mode:?}: the loop outlived its supervisor");
        assert!(
            untraced.is_empty(),
            "{mode:?}: processes ran on after their supervisor died: {untraced:?}"
        );
        assert!(ended, "{mode:?}: bridle did not end with its sandbox");
        assert!(!out.status.success(), "{mode:?}: {:?}", out.status);
        if execs {
            // Its listener gone, an exec fails (ENOSYS) until init, told, stops the sandbox.
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(
                stderr
                    .contains("the exec supervisor was killed by SIGKILL; the sandbox was stopped"),
                "{stderr}"
            );
            assert_eq!(out.status.code(), Some(137), "{stderr}");
        } else {
            assert!(
                !stdout.contains("exec-failed"),
                "{mode:?}: the loop ran on without its supervisor:\n{stdout}"
            );
        }
    }
}

/// The supervisor's own process is in the sandbox's PID namespace, where the command can see
/// it, but not signal it (Landlock's signal scope), trace it, or open its descriptors: the
/// execs after the attempts are still decided.
#[test]
fn the_command_cannot_signal_trace_or_rob_the_supervisor() {
    let e = with_remote();
    let name = script(
        &e,
        "rob.sh",
        r#"for p in /proc/[0-9]*; do
  [ "$(cat $p/comm 2>/dev/null)" = bridle-execs ] || continue
  pid=${p#/proc/}
  echo found
  kill -9 $pid 2>/dev/null; echo kill=$?
  kill -STOP $pid 2>/dev/null; echo stop=$?
  python3 -c "import ctypes,glob,os,sys; l=ctypes.CDLL(None, use_errno=True)
print('attach=%d' % l.ptrace(16, int(sys.argv[1]), 0, 0))
for f in glob.glob('/proc/%s/fd/*' % sys.argv[1]):
    try:
        os.open(f, os.O_RDONLY); print('opened', f)
    except OSError as e:
        print('refused', e.strerror)" $pid
done
p=push
git $p origin HEAD:main
echo push=$?"#,
    );
    let r = run_bounded(&mut e.exec_cmd(&["--profile", "ci-locked"], &[], &["sh", &name]));
    r.assert_ok();
    assert!(!r.stdout.contains("opened"), "{}", r.stdout);
    for want in [
        "found",
        "kill=1",
        "stop=1",
        "attach=-1",
        "refused Permission denied",
        "push=126",
    ] {
        assert!(
            r.stdout.lines().any(|l| l == want),
            "{want}:\n{}\n{}",
            r.stdout,
            r.stderr
        );
    }
    assert_attributed(&r.stderr, "after the attempts on the supervisor");
    assert_nothing_pushed(&e, "after the attempts on the supervisor");
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
