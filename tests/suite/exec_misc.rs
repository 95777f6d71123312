//! `bridle exec`: descriptors (G-FD), environment (G-ENV), resource limits (G-RES), terminal
//! injection (G-TTY), exit statuses and stdio, and danger-full-access.

use std::io::Write;
use std::os::fd::{AsFd, OwnedFd};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nix::fcntl::{FcntlArg, OFlag, fcntl};
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};

use super::support::{ExecEnv, Run, is_root, path_str, run_bounded, token};

// ---------------------------------------------------------------------------------------------
// G-FD

/// Runs `bridle <mode...> exec -- sh -c <inner>` from a shell that first opens `fd` on `file`
/// without close-on-exec, so bridle inherits it.
fn with_inherited_fd(e: &ExecEnv, mode: &[&str], fd: u32, file: &str, inner: &str) -> Run {
    let bridle = env!("CARGO_BIN_EXE_bridle");
    let mode = mode.join(" ");
    let inner = inner.replace('\'', r"'\''");
    let script = format!("exec {fd}>>{file}; exec {bridle} exec {mode} -- sh -c '{inner}'");
    let mut cmd = Command::new("/bin/bash");
    cmd.args(["-c", &script])
        .env_clear()
        .env("HOME", &e.home)
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("LANG", "C.UTF-8")
        .current_dir(&e.workspace);
    run_bounded(&mut cmd)
}

#[test]
fn inherited_descriptors_are_closed() {
    let e = ExecEnv::new();
    let out = e.outside_file("leak.log", "");
    let ws_file = e.write("leak-ws.log", "");
    for (fd, file) in [(7, &out), (250, &ws_file)] {
        let r = with_inherited_fd(
            &e,
            &[],
            fd,
            path_str(file),
            &format!(
                "/usr/bin/python3 -c \"import os; os.write({fd}, b'leak')\"; echo write=$?
                 /usr/bin/python3 -c \"import os; print('fds=' + ' '.join(sorted(os.listdir('/proc/%d/fd' % os.getppid()))))\""
            ),
        );
        r.assert_ok();
        r.assert_failed("write");
        let fds: Vec<&str> = r.value("fds").split_whitespace().collect();
        assert!(
            !fds.contains(&fd.to_string().as_str()),
            "fd {fd} inherited: {fds:?}"
        );
        // Listed by a child while the shell runs a simple command: only 0, 1, 2 (no pipeline,
        // whose pipes the shell would hold for a moment).
        assert!(fds.len() <= 3, "{fds:?}");
        assert_eq!(std::fs::read_to_string(file).unwrap(), "", "fd {fd} leaked");
    }
}

#[test]
fn danger_full_access_closes_inherited_descriptors() {
    let e = ExecEnv::new();
    let out = e.outside_file("leak.log", "");
    let r = with_inherited_fd(
        &e,
        &["--mode", "danger-full-access"],
        7,
        path_str(&out),
        "echo leak >&7; echo write=$?; echo direct >> ../../outside/direct.txt; echo direct=$?",
    );
    r.assert_ok();
    r.assert_failed("write");
    r.assert_succeeded("direct");
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "");
}

// ---------------------------------------------------------------------------------------------
// G-ENV

#[test]
fn secret_variables_are_not_passed() {
    let e = ExecEnv::new();
    let secrets = [
        ("GITHUB_TOKEN", "sekrit-gh"),
        ("MY_API_KEY", "sekrit-api"),
        ("AWS_SECRET_ACCESS_KEY", "sekrit-aws"),
        ("DATABASE_PASSWORD", "sekrit-db"),
        ("SSH_AUTH_SOCK", "/tmp/sekrit-agent.sock"),
        ("NPM_TOKEN", "sekrit-npm"),
    ];
    let mut cmd = e.exec_cmd(&[], &[], &["env"]);
    for (name, value) in secrets {
        cmd.env(name, value);
    }
    cmd.env("EDITOR", "vi");
    let r = run_bounded(&mut cmd);
    r.assert_ok();
    for (name, value) in secrets {
        assert!(
            !r.stdout.contains(name) && !r.stdout.contains(value),
            "{name} reached the sandbox:\n{}",
            r.stdout
        );
    }
    assert_eq!(r.value("PATH"), "/usr/local/bin:/usr/bin:/bin");
    assert_eq!(r.value("HOME"), path_str(&e.home));
    assert_eq!(r.value("EDITOR"), "vi");
}

#[test]
fn tmpdir_exists_is_writable_and_is_removed_afterwards() {
    let e = ExecEnv::new();
    let r = e.sh("echo tmpdir=$TMPDIR
         test -d \"$TMPDIR\"; echo exists=$?
         echo scratch > \"$TMPDIR/scratch\" && mkdir \"$TMPDIR/d\"; echo writable=$?
         /usr/bin/python3 -c 'import tempfile; print(\"pytmp=\" + tempfile.mkstemp()[1])'
         echo same=$(test \"$(cd /tmp && pwd -P)\" = /tmp && echo yes)");
    r.assert_ok();
    r.assert_succeeded("exists");
    r.assert_succeeded("writable");
    let tmpdir = r.value("tmpdir");
    assert!(!tmpdir.is_empty());
    assert!(r.value("pytmp").starts_with(tmpdir), "{}", r.stdout);
    assert!(
        !std::path::Path::new(tmpdir).exists(),
        "the session temp dir {tmpdir} survived the run"
    );
}

// ---------------------------------------------------------------------------------------------
// G-RES

const FILE_LIMITS: &str =
    "extends: workspace-write\nlimits:\n  file_size: 1MiB\n  open_files: 64\n";

#[test]
fn file_size_limit_stops_a_large_write() {
    let e = ExecEnv::new();
    let profile = e.profile("limits.yaml", FILE_LIMITS);
    let r = e.sh_with(
        &["--profile", &profile],
        &[],
        "dd if=/dev/zero of=big bs=1M count=2 2>/dev/null; echo dd=$?
         dd if=/dev/zero of=small bs=1K count=512 2>/dev/null; echo small=$?
         echo open_files=$(ulimit -n)
         echo file_blocks=$(ulimit -f)",
    );
    r.assert_ok();
    // dd dies of SIGXFSZ (128 + 25) or, with the signal ignored, fails with EFBIG.
    let dd: i32 = r.value("dd").parse().unwrap();
    assert!(dd == 153 || dd == 1, "dd exit {dd}");
    r.assert_succeeded("small");
    let size = std::fs::metadata(e.workspace.join("big")).unwrap().len();
    assert!(size <= 1024 * 1024, "the big file is {size} bytes");
    assert_eq!(
        std::fs::metadata(e.workspace.join("small")).unwrap().len(),
        512 * 1024
    );
    assert_eq!(r.value("open_files"), "64");
    assert_eq!(r.value("file_blocks"), "2048");
}

/// `memory` bounds the memory a process writes to, not the address space it reserves: a
/// large reservation (as a WebAssembly memory or a JVM heap makes) works, writing more than the
/// limit fails (a UX pass on 2026-12-07 found Node's `fetch` failing under the address-space
/// limit `memory` was).
#[test]
fn memory_limit_stops_writing_memory_not_reserving_address_space() {
    let e = ExecEnv::new();
    let profile = e.profile(
        "memory.yaml",
        "extends: workspace-write\nlimits:\n  memory: 256MiB\n",
    );
    let r = run_bounded(&mut e.exec_cmd(
        &["--profile", &profile],
        &[],
        &[
            "/usr/bin/python3",
            "-c",
            "import mmap\n\
             reserved = mmap.mmap(-1, 4 << 30, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ)\n\
             print('reserved=%d' % (len(reserved) >> 30))\n\
             try:\n    written = bytearray(512 << 20)\n    print('written=yes')\n\
             except MemoryError:\n    print('written=no')\n\
             small = bytearray(64 << 20)\nprint('small=yes')",
        ],
    ));
    r.assert_ok();
    assert_eq!(r.value("reserved"), "4", "{}", r.stderr);
    assert_eq!(r.value("written"), "no", "{}", r.stderr);
    assert_eq!(r.value("small"), "yes", "{}", r.stderr);
}

#[test]
fn open_files_limit_stops_descriptor_hoarding() {
    let e = ExecEnv::new();
    let profile = e.profile("limits.yaml", FILE_LIMITS);
    let r = run_bounded(&mut e.exec_cmd(
        &["--profile", &profile],
        &[],
        &[
            "/usr/bin/python3",
            "-c",
            "import os\nfds = []\ntry:\n    while True: fds.append(os.open('/dev/null', os.O_RDONLY))\nexcept OSError as e:\n    print('opened=%d' % len(fds))",
        ],
    ));
    r.assert_ok();
    let opened: usize = r.value("opened").parse().unwrap();
    assert!(opened < 64, "opened {opened} descriptors");
}

/// `processes` is RLIMIT_NPROC, which the kernel never applies to uid 0: as root bridle either
/// enforces it another way (a pids cgroup) or refuses (exit 125, the command never runs); it
/// never runs the command without the limit.
#[test]
fn process_limit_stops_a_fork_loop_or_is_refused_as_root() {
    let e = ExecEnv::new();
    let profile = e.profile(
        "procs.yaml",
        "extends: workspace-write\nlimits:\n  file_size: 1MiB\n  processes: 64\n  open_files: 64\n",
    );
    let r = e.sh_with(
        &["--profile", &profile],
        &[],
        "echo ran > ran.txt
         for i in $(seq 100); do sleep 5 2>/dev/null & done
         echo forked=$(jobs -p | wc -l)",
    );
    if r.code == Some(125) {
        assert!(
            is_root(),
            "refused although RLIMIT_NPROC applies to uid {}: {}",
            nix::unistd::geteuid(),
            r.stderr
        );
        assert_eq!(r.stderr.lines().count(), 1, "{}", r.stderr);
        assert!(
            r.stderr.starts_with("bridle: sandbox unavailable: G-RES"),
            "{}",
            r.stderr
        );
        assert!(!e.workspace.join("ran.txt").exists(), "the command ran");
        // Accepting G-RES missing runs it (without the process limit).
        let accepted = e.profile(
            "procs-accepted.yaml",
            "extends: workspace-write\naccept_missing: [G-RES]\nlimits:\n  processes: 64\n",
        );
        e.sh_with(&["--profile", &accepted], &[], "true")
            .assert_ok();
    } else {
        assert!(
            e.workspace.join("ran.txt").exists(),
            "{}{}",
            r.stdout,
            r.stderr
        );
        assert!(
            r.stderr.contains("fork") || r.stderr.contains("Resource temporarily unavailable"),
            "100 background jobs under a 64-process limit all started:\n{}{}",
            r.stdout,
            r.stderr
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Exit statuses and stdio

#[test]
fn exit_status_is_passed_through() {
    let e = ExecEnv::new();
    e.sh("exit 7").assert_code(7);
    e.sh("exit 0").assert_code(0);
    e.sh("false").assert_code(1);
}

#[test]
fn signal_death_is_128_plus_signal() {
    let e = ExecEnv::new();
    e.sh("kill -TERM $$").assert_code(143);
    e.sh("kill -KILL $$").assert_code(137);
}

#[test]
fn missing_command_exits_127_with_a_bridle_line() {
    let e = ExecEnv::new();
    let missing = token("no-such-command");
    let r = run_bounded(&mut e.exec_cmd(&[], &[], &[&missing, "arg"]));
    r.assert_code(127);
    let lines: Vec<&str> = r.stderr.lines().collect();
    assert_eq!(lines.len(), 1, "{}", r.stderr);
    assert!(
        lines[0].starts_with("bridle: ") && lines[0].contains(&missing),
        "{}",
        r.stderr
    );
    assert_eq!(r.stdout, "");
}

#[test]
fn stdin_stdout_and_stderr_are_passed_through() {
    let e = ExecEnv::new();
    let mut child = e
        .exec_cmd(&[], &[], &["sh", "-c", "cat; echo to-stderr >&2"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"hi\nthrough stdin\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "hi\nthrough stdin\n");
    assert_eq!(String::from_utf8_lossy(&out.stderr), "to-stderr\n");
}

// ---------------------------------------------------------------------------------------------
// danger-full-access

#[test]
fn danger_full_access_writes_outside() {
    let e = ExecEnv::new();
    let target = e.outside.join("written.txt");
    let r = e.sh_with(
        &[],
        &["--mode", "danger-full-access"],
        &format!("echo unconfined > {}; echo write=$?", path_str(&target)),
    );
    r.assert_ok();
    r.assert_succeeded("write");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "unconfined\n");
}

// ---------------------------------------------------------------------------------------------
// G-TTY

/// Runs `argv` as the session leader of a fresh pseudo-terminal that the test owns (the
/// terminal is the controlling terminal, as in an interactive shell). Returns what the terminal
/// showed (the master side: output and echo of any input) and whatever input is still queued
/// for the next reader of the terminal afterwards.
fn in_terminal(e: &ExecEnv, argv: &[&str]) -> (String, String) {
    in_terminal_typing(e, argv, b"")
}

/// [`in_terminal`], with `typed` typed on the terminal's keyboard (written to the master side)
/// right after the start.
fn in_terminal_typing(e: &ExecEnv, argv: &[&str], typed: &[u8]) -> (String, String) {
    let pty = nix::pty::openpty(None, None).expect("openpty");
    let slave = || -> Stdio { Stdio::from(pty.slave.try_clone().unwrap()) };
    let mut child = Command::new("/usr/bin/setsid")
        .args(["--ctty", "--wait"])
        .args(argv)
        .env_clear()
        .env("HOME", &e.home)
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("LANG", "C.UTF-8")
        .current_dir(&e.workspace)
        .stdin(slave())
        .stdout(slave())
        .stderr(slave())
        .spawn()
        .expect("spawn in the terminal");
    if !typed.is_empty() {
        nix::unistd::write(pty.master.as_fd(), typed).expect("type on the terminal");
    }
    let mut shown = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        drain(&pty.master, &mut shown, 50);
        if matches!(child.try_wait(), Ok(Some(_))) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the command in the terminal hung"
        );
    }
    drain(&pty.master, &mut shown, 200);
    // Input still queued on the terminal (what a shell would read next).
    let flags = fcntl(pty.slave.as_fd(), FcntlArg::F_GETFL).unwrap();
    fcntl(
        pty.slave.as_fd(),
        FcntlArg::F_SETFL(OFlag::from_bits_truncate(flags) | OFlag::O_NONBLOCK),
    )
    .unwrap();
    let mut queued = Vec::new();
    let mut buf = [0u8; 4096];
    while let Ok(n) = nix::unistd::read(pty.slave.as_fd(), &mut buf) {
        if n == 0 {
            break;
        }
        queued.extend_from_slice(&buf[..n]);
    }
    (
        String::from_utf8_lossy(&shown).into_owned(),
        String::from_utf8_lossy(&queued).into_owned(),
    )
}

/// Reads what the master side has until it stays quiet for `quiet_ms`.
fn drain(master: &OwnedFd, into: &mut Vec<u8>, quiet_ms: u16) {
    let mut buf = [0u8; 4096];
    loop {
        let mut fds = [PollFd::new(master.as_fd(), PollFlags::POLLIN)];
        match poll(&mut fds, PollTimeout::from(quiet_ms)) {
            Ok(n) if n > 0 => match nix::unistd::read(master.as_fd(), &mut buf) {
                Ok(0) | Err(_) => return,
                Ok(n) => into.extend_from_slice(&buf[..n]),
            },
            _ => return,
        }
    }
}

/// Tries TIOCSTI (also with the high 32 bits of the request set, CVE-2019-10063) and TIOCLINUX
/// on the terminal on stdin, pushing `text` and a newline.
fn injector(text: &str) -> String {
    format!(
        r#"
import errno, fcntl, termios
def attempt(name, request, data):
    try:
        for c in data:
            fcntl.ioctl(0, request, bytes([c]))
        print(name + "=ok")
    except OSError as e:
        print(name + "=" + errno.errorcode.get(e.errno, str(e.errno)))
attempt("tiocsti", termios.TIOCSTI, b"{text}\n")
attempt("tiocsti_high_bits", termios.TIOCSTI | (1 << 32), b"{text}\n")
attempt("tioclinux", 0x541C, b"\x02")
"#
    )
}

fn value_in<'a>(text: &'a str, key: &str) -> &'a str {
    let prefix = format!("{key}=");
    text.lines()
        .find_map(|l| l.trim_end_matches('\r').strip_prefix(prefix.as_str()))
        .unwrap_or_else(|| panic!("no `{key}=` in the terminal output:\n{text}"))
}

#[test]
fn tiocsti_cannot_inject_into_the_outer_terminal() {
    let e = ExecEnv::new();
    let text = token("injected");
    let bridle = env!("CARGO_BIN_EXE_bridle");
    let code = injector(&text);
    let (shown, queued) = in_terminal(&e, &[bridle, "exec", "--", "/usr/bin/python3", "-c", &code]);
    assert_eq!(value_in(&shown, "tiocsti"), "EPERM", "{shown}");
    assert_eq!(value_in(&shown, "tiocsti_high_bits"), "EPERM", "{shown}");
    assert_eq!(value_in(&shown, "tioclinux"), "EPERM", "{shown}");
    assert!(!shown.contains(&text), "injected text was echoed: {shown}");
    assert!(!queued.contains(&text), "injected text is queued: {queued}");
}

#[test]
fn tiocsti_outside_the_sandbox_is_detected() {
    // Positive control for the test above: unconfined, in the same kind of terminal, the same
    // injector either injects (and the harness sees it) or the kernel itself refuses
    // (`dev.tty.legacy_tiocsti = 0` for a process without CAP_SYS_ADMIN).
    let e = ExecEnv::new();
    let text = token("injected");
    let code = injector(&text);
    let (shown, queued) = in_terminal(&e, &["/usr/bin/python3", "-c", &code]);
    let legacy = std::fs::read_to_string("/proc/sys/dev/tty/legacy_tiocsti")
        .map(|s| s.trim() == "1")
        .unwrap_or(true);
    if is_root() || legacy {
        assert_eq!(value_in(&shown, "tiocsti"), "ok", "{shown}");
        assert!(queued.contains(&text), "queued: {queued:?}, shown: {shown}");
    } else {
        assert_eq!(value_in(&shown, "tiocsti"), "EIO", "{shown}");
    }
}

#[test]
fn terminal_is_usable_inside() {
    // Positive case: the command gets a working terminal: it is a tty with a size, and what the
    // user types reaches it.
    let e = ExecEnv::new();
    let bridle = env!("CARGO_BIN_EXE_bridle");
    let code = r#"
import os
print("isatty=%s" % os.isatty(0))
print("columns=%d" % os.get_terminal_size(0).columns)
print("typed=" + input())
"#;
    let (shown, queued) = in_terminal_typing(
        &e,
        &[bridle, "exec", "--", "/usr/bin/python3", "-c", code],
        b"hello from the keyboard\n",
    );
    assert_eq!(value_in(&shown, "isatty"), "True", "{shown}");
    assert!(
        value_in(&shown, "columns").parse::<u16>().is_ok(),
        "{shown}"
    );
    assert_eq!(
        value_in(&shown, "typed"),
        "hello from the keyboard",
        "{shown}"
    );
    assert_eq!(queued, "");
}

// ---------------------------------------------------------------------------------------------
// The re-executed launcher (the transport multi-threaded callers use) confines exactly like the
// forked one that `bridle exec` uses by default.

#[test]
fn reexecuted_launcher_enforces_the_same_confinement() {
    let e = ExecEnv::new();
    let victim = e.outside_file("victim.txt", "original");
    let script = format!(
        "echo x > {v}; echo write=$?; touch inside.txt; echo inside=$?; grep -E '^(NoNewPrivs|Seccomp|CapEff):' /proc/self/status; exit 7",
        v = path_str(&victim)
    );
    let mut cmd = e.exec_cmd(&[], &[], &["sh", "-c", &script]);
    cmd.env("BRIDLE_LAUNCHER", "exec");
    let r = run_bounded(&mut cmd);
    r.assert_code(7);
    r.assert_failed("write").assert_succeeded("inside");
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "original");
    for line in ["NoNewPrivs:\t1", "Seccomp:\t2", "CapEff:\t0000000000000000"] {
        assert!(r.stdout.contains(line), "{line} missing: {}", r.stdout);
    }

    let tok = token("reexec");
    let mut cmd = e.exec_cmd(
        &[],
        &["--timeout", "1"],
        &[
            "sh",
            "-c",
            &format!("setsid sleep 300 & sleep 300; : {tok}"),
        ],
    );
    cmd.env("BRIDLE_LAUNCHER", "exec");
    let started = Instant::now();
    run_bounded(&mut cmd).assert_code(124);
    assert!(started.elapsed() < Duration::from_secs(20));
    super::support::assert_no_survivor(&tok, "re-executed launcher after --timeout");
}

#[test]
fn stdio_redirected_to_files_cannot_change_those_files_metadata() {
    let e = ExecEnv::new();
    let input = e.outside_file("in.txt", "line-from-file\n");
    let output = e.outside_file("out.log", "previous\n");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&output, std::fs::Permissions::from_mode(0o644)).unwrap();
    let before = std::fs::metadata(&output).unwrap();
    let input_mode = std::fs::metadata(&input).unwrap().permissions().mode();
    let bridle = env!("CARGO_BIN_EXE_bridle");
    let inner = "cat; chmod 777 /proc/self/fd/1; echo chmod=$? >&2; touch -d 2001-01-01 /proc/self/fd/1; echo touch=$? >&2; \
                 truncate -s 0 /proc/self/fd/1; echo truncate=$? >&2; chmod 777 /proc/self/fd/0; echo chmod_in=$? >&2";
    let script = format!(
        "exec {bridle} exec -- sh -c '{inner}' < {} >> {}",
        path_str(&input),
        path_str(&output)
    );
    let mut cmd = Command::new("/bin/bash");
    cmd.args(["-c", &script])
        .env_clear()
        .env("HOME", &e.home)
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .current_dir(&e.workspace);
    let r = run_bounded(&mut cmd);
    r.assert_ok();
    assert_eq!(
        std::fs::read_to_string(&output).unwrap(),
        "previous\nline-from-file\n",
        "{}",
        r.stderr
    );
    let after = std::fs::metadata(&output).unwrap();
    assert_eq!(after.permissions().mode() & 0o7777, 0o644);
    use std::os::unix::fs::MetadataExt;
    assert!(after.mtime() >= before.mtime(), "mtime moved back");
    assert_eq!(
        std::fs::metadata(&input).unwrap().permissions().mode(),
        input_mode
    );
}

/// A caller that started bridle with SIGHUP ignored (`nohup`) keeps it ignored: bridle's own
/// handling of SIGHUP must not undo that.
#[test]
fn a_hangup_ignored_by_the_caller_stays_ignored() {
    let e = ExecEnv::new();
    let mut cmd = Command::new("nohup");
    cmd.arg(env!("CARGO_BIN_EXE_bridle"))
        .args(["exec", "--", "sh", "-c", "sleep 1; echo finished"])
        .env_clear()
        .env("HOME", &e.home)
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .current_dir(&e.workspace)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let child = cmd.spawn().unwrap();
    std::thread::sleep(Duration::from_millis(400));
    let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap());
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGHUP).unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "finished\n");
}
