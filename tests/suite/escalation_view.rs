//! A call escalated to `danger-full-access` from a confined session runs with full access
//! except that the protected paths stay read-only and bridle's own directories stay hidden
//! (sessions.md, "Guards"), as root and as an unprivileged user; a host that cannot build that
//! view refuses the escalation, and nothing runs.

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use bridle_sandbox::fault::{Fault, inject};
use serde_json::json;

use super::support::{Env, Run, is_root, path_str, pty_command, run, token};

/// A workspace holding a repository, with the files git runs or reads on the host.
fn repository(env: &Env) {
    std::fs::create_dir_all(env.workspace.join(".git/hooks")).unwrap();
    std::fs::create_dir_all(env.workspace.join(".git/objects")).unwrap();
    std::fs::create_dir_all(env.workspace.join(".git/refs")).unwrap();
    std::fs::write(env.workspace.join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
    std::fs::write(
        env.workspace.join(".git/config"),
        "[core]\n\tbare = false\n",
    )
    .unwrap();
}

/// `bridle --profile workspace-write tool bash` of `script`, escalated to full access and
/// approved at the terminal, under `fault` when given.
fn escalated(env: &Env, script: &str, fault: Option<Fault>) -> Run {
    let args = json!({
        "command": script,
        "sandbox_permissions": "danger-full-access",
        "justification": "write the report outside the workspace",
    })
    .to_string();
    let mut cmd = pty_command(
        &["--profile", "workspace-write", "tool", "bash", &args],
        &env.home,
        &env.workspace,
        Some("y"),
        None,
    );
    if let Some(fault) = fault {
        inject(&mut cmd, fault).unwrap();
    }
    run(&mut cmd)
}

/// The output of the escalated command: the `content` of the tool result (the terminal also
/// shows the question, which quotes the script and so every marker in it).
fn command_output(r: &Run) -> String {
    let result = r
        .stdout
        .lines()
        .rev()
        .find(|l| l.starts_with(r#"{"ok""#))
        .unwrap_or_else(|| panic!("no tool result: {}", r.stdout));
    let result: serde_json::Value = serde_json::from_str(result).unwrap();
    assert_eq!(result["sandbox"]["escalated"], true, "{result}");
    result["content"].as_str().unwrap().to_owned()
}

/// Removes a file outside the test's temp dir when the test ends.
struct Outside(PathBuf);

impl Drop for Outside {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

#[test]
fn approved_full_access_escalation_writes_anywhere_but_the_protected_paths() {
    let env = Env::new();
    repository(&env);
    let outside = Outside(PathBuf::from("/var/tmp").join(token("escal")));
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = std::thread::spawn(move || {
        let (stream, _) = listener.accept().unwrap();
        let mut line = String::new();
        BufReader::new(stream).read_line(&mut line).unwrap();
        line
    });
    let ws = path_str(&env.workspace).to_owned();
    let script = format!(
        "echo report > {out} && echo wrote-outside
         echo evil > .git/hooks/pre-commit || echo hook-refused
         echo '[alias]' >> .git/config || echo config-refused
         echo x > .bridle/p.yaml || echo bridle-refused
         mkdir -p ~/.config/bridle/profiles && echo x > ~/.config/bridle/profiles/p.yaml || echo profile-refused
         mv .git .git-old || echo git-pinned
         mv {ws} {ws}-old || echo workspace-pinned
         umount .git/hooks || echo umount-refused
         mount -o remount,bind,rw .git/hooks || echo remount-refused
         nsenter -t 1 -m -- sh -c 'echo evil > {ws}/.git/hooks/pre-commit' || echo nsenter-refused
         ls /proc/{pid}/root/ || echo host-process-hidden
         echo hello-from-sandbox > /dev/tcp/127.0.0.1/{port} && echo network-reached",
        out = path_str(&outside.0),
        pid = std::process::id(),
    );
    let r = escalated(&env, &script, None);
    assert!(
        r.stdout
            .contains("if approved, the command runs with full access")
            && r.stdout.contains("protected paths stay read-only")
            && r.stdout.contains("device nodes are hidden")
            && r.stdout.contains("no privilege over the host is kept"),
        "the question must say what the command can and cannot do: {}",
        r.stdout
    );
    r.assert_code(0);
    let out = command_output(&r);
    for marker in [
        "wrote-outside",
        "hook-refused",
        "config-refused",
        "bridle-refused",
        "profile-refused",
        "git-pinned",
        "workspace-pinned",
        "umount-refused",
        "remount-refused",
        "nsenter-refused",
        "host-process-hidden",
        "network-reached",
    ] {
        assert!(out.contains(marker), "no `{marker}`: {out}");
    }
    assert!(out.contains("Read-only file system"), "{out}");
    assert_eq!(std::fs::read_to_string(&outside.0).unwrap(), "report\n");
    assert_eq!(server.join().unwrap(), "hello-from-sandbox\n");
    assert!(!env.workspace.join(".git/hooks/pre-commit").exists());
    assert_eq!(
        std::fs::read_to_string(env.workspace.join(".git/config")).unwrap(),
        "[core]\n\tbare = false\n"
    );
    assert!(!env.workspace.join(".bridle/p.yaml").exists());
    assert!(!env.home.join(".config/bridle/profiles").exists());
    assert!(env.workspace.join(".git").is_dir());
}

#[test]
fn an_escalated_command_cannot_reach_the_disks_below_the_protected_files() {
    let env = Env::new();
    repository(&env);
    // `find -type b` would trust readdir's type of the node under the mask: `test -b` stats.
    let host_disks: Vec<String> = ["/dev/loop0", "/dev/vda", "/dev/sda", "/dev/nvme0n1"]
        .into_iter()
        .filter(|p| {
            use std::os::unix::fs::FileTypeExt;
            std::fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_block_device())
        })
        .map(str::to_owned)
        .collect();
    let script = format!(
        "find /dev -exec test -b {{}} ';' -print | grep -q . && echo block-device-visible || echo no-block-device
         for d in {disks}; do : > $d && echo wrote-$d || echo refused-$d; done
         [ ! -e /dev/mem ] || : > /dev/mem || echo mem-refused
         mknod ./disk b 7 0 && echo disk-node-made || echo disk-node-refused
         mknod ./mem c 1 1 && echo mem-node-made || echo mem-node-refused
         test -c /dev/null && test -c /dev/urandom && test -c /dev/ptmx && echo ordinary-devices-kept
         test -c /dev/kmsg && echo kmsg-visible || echo kmsg-hidden
         knob=$(find /sys/kernel -maxdepth 3 -type f -perm -u+w | head -1)
         : >> $knob && echo sysfs-writable-$knob || echo sysfs-refused
         echo uid=$(id -u) map=$(awk '{{print $1, $2, $3}}' /proc/self/uid_map)",
        disks = host_disks.join(" "),
    );
    let r = escalated(&env, &script, None);
    r.assert_code(0);
    let out = command_output(&r);
    for marker in [
        "no-block-device",
        "disk-node-refused",
        "mem-node-refused",
        "sysfs-refused",
    ] {
        assert!(out.contains(marker), "no `{marker}`: {out}");
    }
    for disk in &host_disks {
        assert!(out.contains(&format!("refused-{disk}")), "{disk}: {out}");
    }
    for made in [
        "block-device-visible",
        "wrote-",
        "node-made",
        "sysfs-writable",
    ] {
        assert!(!out.contains(made), "`{made}`: {out}");
    }
    assert!(!env.workspace.join("disk").exists() && !env.workspace.join("mem").exists());
    assert!(out.contains("ordinary-devices-kept"), "{out}");
    // Root, whom file permissions do not stop, keeps only the listed character devices.
    if Path::new("/dev/kmsg").exists() {
        let kmsg = if is_root() {
            "kmsg-hidden"
        } else {
            "kmsg-visible"
        };
        assert!(out.contains(kmsg), "{out}");
    }
    // Root stays root over files, in a user namespace mapping every id to itself.
    let uid = nix::unistd::geteuid().as_raw();
    let map = if is_root() {
        "map=0 0 4294967295".to_owned()
    } else {
        format!("map={uid} {uid} 1")
    };
    assert!(out.contains(&format!("uid={uid} {map}")), "{out}");
}

#[test]
fn a_host_that_cannot_keep_the_protected_paths_refuses_the_escalation() {
    let env = Env::new();
    repository(&env);
    let outside = Outside(PathBuf::from("/var/tmp").join(token("escal-refused")));
    // Root too needs a user namespace: with its real capabilities it could make a disk's node.
    for fault in [Fault::SeccompUnavailable, Fault::UserNamespacesDenied] {
        let script = format!("echo ran > {}", path_str(&outside.0));
        let r = escalated(&env, &script, Some(fault));
        assert!(
            r.stdout.contains("sandbox unavailable") && r.stdout.contains("G-FS-PROTECT"),
            "{fault:?}: {}",
            r.stdout
        );
        assert!(!outside.0.exists(), "{fault:?}: the refused escalation ran");
    }
}

/// The session's spec escalated to full access, planned in-process, with `sessions` masked as
/// bridle's session directory.
fn escalated_spec(env: &Env, sessions: &Path) -> bridle_policy::SandboxSpec {
    let policy = bridle_policy::load(
        &bridle_policy::FsProfileSource,
        &bridle_policy::LoadRequest {
            profile: "workspace-write".into(),
            overrides: bridle_policy::Overrides {
                mode: Some(bridle_policy::SandboxMode::DangerFullAccess),
                ..bridle_policy::Overrides::default()
            },
            workspace_layer: None,
        },
    )
    .unwrap();
    let temp = env.home.join("session-tmp");
    let ctx = bridle_policy::PlanContext {
        workspace: env.workspace.clone(),
        home: env.home.clone(),
        account_home: None,
        state_dir: env.home.join(".local/state/bridle"),
        config_dir: env.home.join(".config/bridle"),
        temp_dir: temp,
        cache_root: None,
        temp_base: None,
        host_env: [("PATH".to_owned(), "/usr/bin:/bin".to_owned())].into(),
        found: Vec::new(),
        masks: vec![(sessions.to_owned(), "bridle's session directory".into())],
        masks_may_vanish: Vec::new(),
        escalated_from: Some(bridle_policy::SandboxMode::WorkspaceWrite),
    };
    bridle_policy::plan(&policy, &ctx).unwrap().spec
}

#[test]
fn the_session_directory_is_invisible_to_an_escalated_command() {
    let env = Env::new();
    repository(&env);
    let sessions = env.home.join(".local/state/bridle/sessions");
    std::fs::create_dir_all(sessions.join("s1")).unwrap();
    std::fs::write(sessions.join("s1/log.jsonl"), "secret-log\n").unwrap();
    let spec = escalated_spec(&env, &sessions);
    let mut sandbox = bridle_sandbox::Sandbox::prepare(
        spec,
        &bridle_sandbox::probe::quick(),
        env!("CARGO_BIN_EXE_bridle").into(),
    )
    .unwrap();
    let script = format!(
        "cat {s}/s1/log.jsonl || echo log-unreadable; ls -A {s} | wc -l; touch {s}/new || echo mask-refused; mv {state} {state}-old || echo state-pinned",
        s = path_str(&sessions),
        state = path_str(&env.home.join(".local/state/bridle")),
    );
    let mut launch = sandbox.launch(vec!["sh".into(), "-c".into(), script], &env.workspace);
    launch
        .command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut running = match sandbox.spawn(launch).unwrap() {
        bridle_sandbox::Spawned::Running(r) => r,
        other => panic!("{other:?}"),
    };
    let mut stdout = running.take_stdout().unwrap();
    let mut stderr = running.take_stderr().unwrap();
    let errors = std::thread::spawn(move || {
        let mut text = String::new();
        std::io::Read::read_to_string(&mut stderr, &mut text).unwrap();
        text
    });
    let mut out = String::new();
    std::io::Read::read_to_string(&mut stdout, &mut out).unwrap();
    let finished = running.finish(None);
    let errors = errors.join().unwrap();
    assert_eq!(
        finished.outcome,
        bridle_sandbox::Outcome::Exited(0),
        "{out}{errors}"
    );
    assert!(!out.contains("secret-log"), "{out}");
    for marker in ["log-unreadable", "mask-refused", "state-pinned"] {
        assert!(out.contains(marker), "no `{marker}`: {out}{errors}");
    }
    assert!(out.lines().any(|l| l.trim() == "0"), "{out}");
    assert!(!sessions.join("new").exists());
    assert!(sessions.join("s1/log.jsonl").exists());
}
