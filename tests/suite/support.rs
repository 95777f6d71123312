//! Harness: a throwaway home and workspace, and the real binary.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use tempfile::TempDir;

/// A temporary home directory with a workspace inside it.
pub struct Env {
    _root: TempDir,
    pub home: PathBuf,
    pub workspace: PathBuf,
}

impl Env {
    pub fn new() -> Env {
        let root = tempfile::tempdir().expect("temp dir");
        let home = root.path().join("home");
        let workspace = home.join("project");
        std::fs::create_dir_all(&workspace).expect("create workspace");
        let workspace = std::fs::canonicalize(&workspace).expect("canonical workspace");
        let home = std::fs::canonicalize(&home).expect("canonical home");
        Env {
            _root: root,
            home,
            workspace,
        }
    }

    /// `bridle` with this home, run inside the workspace, with a minimal environment.
    pub fn bridle(&self) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_bridle"));
        cmd.env_clear()
            .env("HOME", &self.home)
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env("LANG", "C.UTF-8")
            .current_dir(&self.workspace);
        cmd
    }

    pub fn write(&self, relative: &str, content: impl AsRef<[u8]>) -> PathBuf {
        let path = self.workspace.join(relative);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).expect("create parent");
        }
        std::fs::write(&path, content).expect("write file");
        path
    }
}

/// The result of one run, with its wall time.
pub struct Run {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    pub elapsed: Duration,
}

pub fn run(cmd: &mut Command) -> Run {
    let start = Instant::now();
    let Output {
        status,
        stdout,
        stderr,
    } = cmd.output().expect("spawn bridle");
    Run {
        code: status.code(),
        stdout: String::from_utf8_lossy(&stdout).into_owned(),
        stderr: String::from_utf8_lossy(&stderr).into_owned(),
        elapsed: start.elapsed(),
    }
}

impl Run {
    #[track_caller]
    pub fn assert_code(&self, code: i32) -> &Run {
        assert_eq!(
            self.code,
            Some(code),
            "expected exit {code}\n--- stdout\n{}\n--- stderr\n{}",
            self.stdout,
            self.stderr
        );
        self
    }
}

pub fn path_str(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

// ---------------------------------------------------------------------------------------------
// Helpers for the `bridle exec` enforcement tests (exec_*.rs).

/// Where the exec tests put their homes and "outside" directories: below `/var/tmp`, which the
/// sandbox shows read-only. (The usual `$TMPDIR`, `/tmp`, is replaced by a private `/tmp`
/// inside, so a victim file there would be out of reach for a weaker reason than the one under
/// test.)
pub const VISIBLE_TEMP: &str = "/var/tmp";

/// An [`Env`] laid out like a real machine for the exec tests: `<root>/home/project` is the
/// workspace and `<root>/outside` a directory outside it, both visible (read-only) inside the
/// sandbox, all in a fresh temp dir below [`VISIBLE_TEMP`].
pub struct ExecEnv {
    pub env: Env,
    pub outside: PathBuf,
}

impl std::ops::Deref for ExecEnv {
    type Target = Env;
    fn deref(&self) -> &Env {
        &self.env
    }
}

impl Drop for ExecEnv {
    /// Makes every directory the sandboxed commands left behind removable (a copy of a masked,
    /// mode-000 directory, say) before the temp dir is deleted.
    fn drop(&mut self) {
        // The workspace's cache home (outside the temp dir, kept for later runs otherwise).
        let cache = bridle_policy::cache_dir_for(&cache_root(), &self.env.workspace);
        let _ = std::fs::remove_dir_all(&cache);
        fn open_up(dir: &Path) {
            use std::os::unix::fs::PermissionsExt;
            let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700));
            if let Ok(entries) = std::fs::read_dir(dir) {
                for entry in entries.flatten() {
                    if entry.file_type().is_ok_and(|t| t.is_dir()) {
                        open_up(&entry.path());
                    }
                }
            }
        }
        open_up(self.env._root.path());
    }
}

impl ExecEnv {
    pub fn new() -> ExecEnv {
        let root = tempfile::Builder::new()
            .prefix("bridle-e2e-")
            .tempdir_in(VISIBLE_TEMP)
            .expect("temp dir below /var/tmp");
        ExecEnv::in_root(root)
    }

    /// The same layout in `$TMPDIR` (usually `/tmp`), which is private inside the sandbox.
    pub fn in_tmpdir() -> ExecEnv {
        ExecEnv::in_root(tempfile::tempdir().expect("temp dir"))
    }

    fn in_root(root: TempDir) -> ExecEnv {
        let home = root.path().join("home");
        let workspace = home.join("project");
        let outside = root.path().join("outside");
        std::fs::create_dir_all(&workspace).expect("create workspace");
        std::fs::create_dir_all(&outside).expect("create outside dir");
        let canon = |p: &Path| std::fs::canonicalize(p).expect("canonical path");
        let env = Env {
            home: canon(&home),
            workspace: canon(&workspace),
            _root: root,
        };
        ExecEnv {
            outside: canon(&outside),
            env,
        }
    }

    /// Compiles the C `source` file into the workspace as `output` with the C compiler cargo
    /// links with (`flags` before `-o`); fails the test with the compiler's message.
    pub fn compile_c(&self, source: &std::path::Path, output: &str, flags: &[&str]) {
        let out = Command::new("cc")
            .args(flags)
            .arg("-o")
            .arg(self.workspace.join(output))
            .arg(source)
            .output()
            .expect("run cc (a C compiler is needed)");
        assert!(
            out.status.success(),
            "cc: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Creates `outside/<name>` with `content` and returns its path.
    pub fn outside_file(&self, name: &str, content: &str) -> PathBuf {
        let path = self.outside.join(name);
        std::fs::write(&path, content).expect("write outside file");
        path
    }

    /// `bridle <global...> exec <exec_opts...> -- sh -c <script>`, run to completion.
    pub fn sh_with(&self, global: &[&str], exec_opts: &[&str], script: &str) -> Run {
        run_bounded(&mut self.exec_cmd(global, exec_opts, &["sh", "-c", script]))
    }

    /// `bridle exec -- sh -c <script>` with the default profile.
    pub fn sh(&self, script: &str) -> Run {
        self.sh_with(&[], &[], script)
    }

    /// `bridle exec -- python3 -c <code>` with the default profile.
    pub fn python(&self, code: &str) -> Run {
        run_bounded(&mut self.exec_cmd(&[], &[], &["/usr/bin/python3", "-c", code]))
    }

    /// The `bridle exec` command line, not yet run.
    pub fn exec_cmd(&self, global: &[&str], exec_opts: &[&str], argv: &[&str]) -> Command {
        let mut cmd = self.bridle();
        cmd.args(global)
            .arg("exec")
            .args(exec_opts)
            .arg("--")
            .args(argv);
        cmd
    }

    /// Writes a profile file into the home (outside the workspace) and returns its path.
    pub fn profile(&self, name: &str, yaml: &str) -> String {
        let path = self.home.join(name);
        std::fs::write(&path, yaml).expect("write profile");
        path_str(&path).to_owned()
    }
}

impl Run {
    /// The command ran and exited 0.
    #[track_caller]
    pub fn assert_ok(&self) -> &Run {
        self.assert_code(0)
    }

    /// The value printed on a `key=value` line of stdout.
    #[track_caller]
    pub fn value(&self, key: &str) -> &str {
        let prefix = format!("{key}=");
        self.stdout
            .lines()
            .find_map(|l| l.strip_prefix(prefix.as_str()))
            .unwrap_or_else(|| {
                panic!(
                    "no `{key}=` line\n--- stdout\n{}\n--- stderr\n{}",
                    self.stdout, self.stderr
                )
            })
    }

    /// The `key=value` line says the step failed (a non-zero status).
    #[track_caller]
    pub fn assert_failed(&self, key: &str) -> &Run {
        let v = self.value(key);
        assert!(
            v != "0",
            "`{key}` succeeded inside the sandbox\n--- stdout\n{}\n--- stderr\n{}",
            self.stdout,
            self.stderr
        );
        self
    }

    /// The `key=value` line says the step succeeded (status 0).
    #[track_caller]
    pub fn assert_succeeded(&self, key: &str) -> &Run {
        let v = self.value(key);
        assert!(
            v == "0",
            "`{key}` failed inside the sandbox ({v})\n--- stdout\n{}\n--- stderr\n{}",
            self.stdout,
            self.stderr
        );
        self
    }
}

/// Where bridle keeps per-workspace cache homes for this user.
pub fn cache_root() -> PathBuf {
    PathBuf::from(format!(
        "/var/tmp/bridle-{}/cache",
        nix::unistd::geteuid().as_raw()
    ))
}

pub fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// A token unique to this test run, for argv markers and names.
pub fn token(tag: &str) -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!(
        "bridle-{tag}-{}-{nanos:x}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// Pids of live processes (anywhere on the host) whose command line contains `token`.
pub fn processes_with(token: &str) -> Vec<i32> {
    let me = std::process::id();
    let needle = token.as_bytes();
    let mut out = Vec::new();
    let entries = std::fs::read_dir("/proc").expect("read /proc");
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<i32>().ok())
        else {
            continue;
        };
        if u32::try_from(pid) == Ok(me) {
            continue;
        }
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        if cmdline.windows(needle.len()).any(|w| w == needle) {
            out.push(pid);
        }
    }
    out
}

/// Polls `cond` every 20 ms until it holds or `limit` passes; returns whether it held.
pub fn wait_until(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    loop {
        if cond() {
            return true;
        }
        if start.elapsed() >= limit {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Asserts that no process carrying `token` is alive, and kills any that is (so a failing test
/// leaves nothing behind).
#[track_caller]
pub fn assert_no_survivor(token: &str, what: &str) {
    let survivors = processes_with(token);
    for pid in &survivors {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(*pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    assert!(
        survivors.is_empty(),
        "{what}: processes survived: {survivors:?}"
    );
}

/// A process started by the test outside any sandbox, killed when dropped.
pub struct Victim {
    pub child: std::process::Child,
    pub token: String,
}

impl Victim {
    /// `sleep 300` under bash with argv[0] set to a unique token.
    pub fn sleeper() -> Victim {
        let token = token("victim");
        let child = Command::new("/bin/bash")
            .args(["-c", &format!("exec -a {token} sleep 300")])
            .stdin(std::process::Stdio::null())
            .spawn()
            .expect("spawn victim");
        let victim = Victim { child, token };
        assert!(
            wait_until(Duration::from_secs(5), || processes_with(&victim.token)
                .contains(&victim.pid())),
            "victim never showed up"
        );
        victim
    }

    pub fn pid(&self) -> i32 {
        i32::try_from(self.child.id()).expect("pid fits")
    }

    /// Still running (not exited, not a zombie).
    pub fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

impl Drop for Victim {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// How long one `bridle exec` of the exec tests may take before the test fails (instead of
/// hanging the suite).
pub const EXEC_DEADLINE: Duration = Duration::from_secs(60);

/// Like [`run`] (stdin is `/dev/null`), but fails the test, killing bridle, when it has not
/// returned within [`EXEC_DEADLINE`].
pub fn run_bounded(cmd: &mut Command) -> Run {
    run_within(cmd, EXEC_DEADLINE)
}

/// Like [`run`] (stdin is `/dev/null`), but fails the test, killing bridle, when it has not
/// returned within `deadline`.
pub fn run_within(cmd: &mut Command, deadline: Duration) -> Run {
    use std::process::Stdio;
    let start = Instant::now();
    let child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn bridle");
    let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).expect("pid fits"));
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let Ok(out) = rx.recv_timeout(deadline) else {
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
        panic!("bridle did not return within {deadline:?}");
    };
    let Output {
        status,
        stdout,
        stderr,
    } = out.expect("wait for bridle");
    Run {
        code: status.code(),
        stdout: String::from_utf8_lossy(&stdout).into_owned(),
        stderr: String::from_utf8_lossy(&stderr).into_owned(),
        elapsed: start.elapsed(),
    }
}

/// A process identity that survives pid reuse: pid and start time (clock ticks since boot).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcId {
    pub pid: i32,
    pub start: u64,
}

fn stat_fields(pid: i32) -> Option<(char, u64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // After the command name: state is field 3, starttime field 22 (1-based, whole line).
    let state = fields.first()?.chars().next()?;
    let start = fields.get(19)?.parse().ok()?;
    Some((state, start))
}

/// `pid` and all its descendants right now (bridle, its launcher, the sandbox's init, ...).
pub fn process_tree(pid: i32) -> Vec<ProcId> {
    let mut out = Vec::new();
    let mut queue = vec![pid];
    while let Some(p) = queue.pop() {
        let Some((_, start)) = stat_fields(p) else {
            continue;
        };
        out.push(ProcId { pid: p, start });
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{p}/task")) else {
            continue;
        };
        for task in tasks.flatten() {
            if let Ok(children) = std::fs::read_to_string(task.path().join("children")) {
                queue.extend(
                    children
                        .split_whitespace()
                        .filter_map(|c| c.parse::<i32>().ok()),
                );
            }
        }
    }
    out
}

/// Those of `procs` that still run (same pid and start time, not a zombie).
pub fn still_running(procs: &[ProcId]) -> Vec<ProcId> {
    procs
        .iter()
        .copied()
        .filter(|p| matches!(stat_fields(p.pid), Some((state, start)) if start == p.start && state != 'Z'))
        .collect()
}

/// The `workspace-write` spec for `env`'s workspace, planned in-process (for tests that use the
/// library API directly), with a private temp dir in the home.
pub fn spec_for(env: &Env) -> bridle_policy::SandboxSpec {
    let policy = bridle_policy::load(
        &bridle_policy::FsProfileSource,
        &bridle_policy::LoadRequest {
            profile: "workspace-write".into(),
            overrides: bridle_policy::Overrides::default(),
            workspace_layer: None,
        },
    )
    .expect("load workspace-write");
    let temp = env.home.join("session-tmp");
    std::fs::create_dir_all(&temp).expect("create session temp dir");
    let ctx = bridle_policy::PlanContext {
        workspace: env.workspace.clone(),
        home: env.home.clone(),
        account_home: None,
        state_dir: env.home.join(".local/state/bridle"),
        config_dir: env.home.join(".config/bridle"),
        temp_dir: temp,
        cache_root: None,
        temp_base: None,
        host_env: [("PATH".to_owned(), "/usr/local/bin:/usr/bin:/bin".to_owned())].into(),
        found: Vec::new(),
        masks: Vec::new(),
        masks_may_vanish: Vec::new(),
        escalated_from: None,
    };
    bridle_policy::plan(&policy, &ctx).expect("plan").spec
}

/// Runs `bridle ARGS...` in a fresh pseudo-terminal (python's `pty.fork`, so it has a
/// controlling terminal), in `cwd` with `home` as HOME. `answer` is typed when an approval
/// prompt (`[y/N]`) appears (`"y,n"`: one answer per prompt, in turn; prompts beyond them stay
/// unanswered); `input` is typed one second after the start. With `BRIDLE_TEST_PTY_SWAP` set
/// to `LINK|TARGET` on the [`pty_command`], LINK becomes a symlink to TARGET when the first
/// prompt shows, before it is answered; with `BRIDLE_TEST_PTY_ANSWER_AFTER` set to a path,
/// answers wait until it exists (10 s at most), and the output ends with
/// `[pty driver: answered after it existed]` (or `after 10 s without it]`). Returns what the
/// terminal showed and the exit status.
pub fn bridle_in_pty(
    args: &[&str],
    home: &Path,
    cwd: &Path,
    answer: Option<&str>,
    input: Option<&str>,
) -> Run {
    run(&mut pty_command(args, home, cwd, answer, input))
}

/// Asserts that `text` contains each of `wanted`, showing `text` when one is missing.
#[track_caller]
pub fn assert_contains_all(text: &str, wanted: &[&str]) {
    for want in wanted {
        assert!(text.contains(want), "missing {want:?} in:\n{text}");
    }
}

/// The tool result (the last JSON line) `bridle tool` printed in a pseudo-terminal, where
/// questions and notes come on the same output.
#[track_caller]
pub fn tool_result_in_pty(r: &Run) -> serde_json::Value {
    let json = r
        .stdout
        .lines()
        .rfind(|l| l.starts_with('{'))
        .unwrap_or_else(|| panic!("no tool result:\n{}", r.stdout));
    serde_json::from_str(json).unwrap_or_else(|e| panic!("{e}: {json}"))
}

/// The command [`bridle_in_pty`] runs (to change it before it runs: inject a fault, say).
pub fn pty_command(
    args: &[&str],
    home: &Path,
    cwd: &Path,
    answer: Option<&str>,
    input: Option<&str>,
) -> Command {
    const DRIVER: &str = r#"
import os, pty, sys, select, time
answers, typed = [a for a in sys.argv[1].split(",") if a], sys.argv[2]
argv = sys.argv[3:]
# LINK|TARGET: LINK made a symlink to TARGET when the first question shows, before its answer.
swap = os.environ.pop("BRIDLE_TEST_PTY_SWAP", "")
# PATH: answers wait until PATH exists (at most 10 s); the output then says whether it did.
after = os.environ.pop("BRIDLE_TEST_PTY_ANSWER_AFTER", "")
asked_at = None
pid, fd = pty.fork()
if pid == 0:
    os.execv(argv[0], argv)
out = b""
asked = 0
sent = not typed
start = time.time()
while time.time() - start < 20:
    r, _, _ = select.select([fd], [], [], 0.1)
    if fd in r:
        try:
            chunk = os.read(fd, 4096)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    while asked < len(answers) and out.count(b"[y/N]") > asked:
        if asked_at is None:
            asked_at = time.time()
        if after and not os.path.exists(after) and time.time() - asked_at < 10:
            break
        if after:
            seen = os.path.exists(after)
            note = b"[pty driver: answered after " + (b"it existed]" if seen else b"10 s without it]")
        if asked == 0 and swap:
            link, target = swap.split("|")
            os.symlink(target, link + ".new")
            os.replace(link + ".new", link)
        os.write(fd, answers[asked].encode() + b"\n")
        asked += 1
    if not sent and time.time() - start > 1.0:
        os.write(fd, typed.encode())
        sent = True
# A run that outlives the driver is killed (and fails) rather than hang the test for ever.
while True:
    done, status = os.waitpid(pid, os.WNOHANG)
    if done:
        break
    if time.time() - start > 60:
        os.kill(pid, 9)
        out += b"\n[pty driver: killed the run after 60 s]\n"
        _, status = os.waitpid(pid, 0)
        break
    r, _, _ = select.select([fd], [], [], 0.1)
    if fd in r:
        try:
            out += os.read(fd, 4096)
        except OSError:
            time.sleep(0.05)
sys.stdout.write(out.decode(errors="replace"))
if after and asked:
    sys.stdout.write("\n" + note.decode() + "\n")
sys.exit(os.waitstatus_to_exitcode(status))
"#;
    let mut cmd = Command::new("/usr/bin/python3");
    cmd.arg("-c")
        .arg(DRIVER)
        .arg(answer.unwrap_or(""))
        .arg(input.unwrap_or(""))
        .arg(env!("CARGO_BIN_EXE_bridle"))
        .args(args)
        .env_clear()
        .env("HOME", home)
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("TERM", "dumb")
        .current_dir(cwd);
    cmd
}

/// Whether `BRIDLE_HOST_LACKS` (comma-separated) declares that this host lacks `feature`.
pub fn host_lacks(feature: &str) -> bool {
    std::env::var("BRIDLE_HOST_LACKS").is_ok_and(|v| v.split(',').any(|f| f.trim() == feature))
}

/// The cargo (and rustc, which `cargo fetch` runs) of a Rust toolchain this user can run:
/// the one that built the tests, or, for a user who cannot reach it (an unprivileged CI user
/// when rustup lives in root's home), the copy `.ci/run` links at
/// `/usr/local/lib/bridle-test-toolchain`.
pub fn toolchain_bin() -> PathBuf {
    let built_with = Path::new(env!("CARGO"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default();
    for dir in [
        built_with,
        PathBuf::from("/usr/local/lib/bridle-test-toolchain/bin"),
    ] {
        let runs = Command::new(dir.join("rustc"))
            .arg("-V")
            .output()
            .is_ok_and(|o| o.status.success());
        if runs && dir.join("cargo").exists() {
            return dir;
        }
    }
    panic!(
        "no Rust toolchain this user can run: link one at /usr/local/lib/bridle-test-toolchain \
         (`cp -al \"$(rustc --print sysroot)\" /usr/local/lib/bridle-test-toolchain`, as .ci/run does)"
    );
}
