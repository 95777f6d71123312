//! The file tools against an attacker: masked paths reached through symlinked homes or masked
//! symlinks, the host's `/proc`, FIFOs and other special files, and hard links that would give
//! a rule-covered file a name no rule matches.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

use super::support::{Env, Run, is_root, path_str, run, run_within};

fn tool_with(env: &Env, home: &Path, profile: &str, name: &str, args: &Value) -> Value {
    let mut cmd = env.bridle();
    cmd.env("HOME", home)
        .args(["--profile", profile, "tool", name, &args.to_string()])
        .stdin(std::process::Stdio::null());
    let r = run(&mut cmd);
    parse(&r)
}

fn parse(r: &Run) -> Value {
    serde_json::from_str(r.stdout.trim())
        .unwrap_or_else(|e| panic!("{e}: {}\n{}", r.stdout, r.stderr))
}

fn content(v: &Value) -> &str {
    v["content"].as_str().unwrap_or_default()
}

/// `bridle tool NAME ARGS`, killed (and the test failed) if it has not returned within
/// `deadline`; returns the result and how long it took.
fn tool_bounded(env: &Env, name: &str, args: &Value, deadline: Duration) -> (Value, Duration) {
    let r = run_within(
        env.bridle().args(["tool", name, &args.to_string()]),
        deadline,
    );
    (parse(&r), r.elapsed)
}

/// Reads, listings and globs of `paths` under `home` (workstation masks `~/.ssh`) never show
/// the key.
#[track_caller]
fn assert_key_hidden(env: &Env, home: &Path, files: &[PathBuf], dirs: &[PathBuf]) {
    for file in files {
        let v = tool_with(
            env,
            home,
            "workstation",
            "read_file",
            &json!({"path": path_str(file)}),
        );
        assert_eq!(v["ok"], false, "{}: {v}", file.display());
        assert!(
            !content(&v).contains("PRIVATE KEY") && content(&v).contains("masked"),
            "{}: {v}",
            file.display()
        );
    }
    for dir in dirs {
        let v = tool_with(
            env,
            home,
            "workstation",
            "list_dir",
            &json!({"path": path_str(dir)}),
        );
        assert!(!content(&v).contains("id_rsa"), "{}: {v}", dir.display());
        let v = tool_with(
            env,
            home,
            "workstation",
            "glob",
            &json!({"pattern": "**", "path": path_str(dir)}),
        );
        assert!(!content(&v).contains("id_rsa"), "{}: {v}", dir.display());
    }
}

#[test]
fn a_masked_path_under_a_symlinked_home_stays_hidden_from_the_file_tools() {
    // As on Fedora Atomic (`/home -> var/home`): HOME names the key through a symlinked parent.
    let env = Env::new();
    let root = env.home.parent().unwrap().to_path_buf();
    std::fs::create_dir_all(root.join("realhome/u/.ssh")).unwrap();
    std::fs::write(root.join("realhome/u/.ssh/id_rsa"), "PRIVATE KEY").unwrap();
    std::fs::write(root.join("realhome/u/notes.txt"), "visible").unwrap();
    std::os::unix::fs::symlink("realhome", root.join("link")).unwrap();
    std::os::unix::fs::symlink(
        root.join("realhome/u/.ssh/id_rsa"),
        env.workspace.join("key"),
    )
    .unwrap();
    let home = root.join("link/u");
    assert_key_hidden(
        &env,
        &home,
        &[
            home.join(".ssh/id_rsa"),
            root.join("realhome/u/.ssh/id_rsa"),
            env.workspace.join("key"),
        ],
        &[
            home.join(".ssh"),
            root.join("realhome/u/.ssh"),
            root.join("realhome/u"),
        ],
    );
    // What is not masked in that home stays readable.
    let v = tool_with(
        &env,
        &home,
        "workstation",
        "read_file",
        &json!({"path": path_str(&root.join("realhome/u/notes.txt"))}),
    );
    assert!(content(&v).contains("visible"), "{v}");
}

#[test]
fn a_masked_path_that_is_a_symlink_hides_its_target_from_the_file_tools() {
    let env = Env::new();
    let keys = env.home.join("keys");
    std::fs::create_dir_all(&keys).unwrap();
    std::fs::write(keys.join("id_rsa"), "PRIVATE KEY").unwrap();
    std::os::unix::fs::symlink("keys", env.home.join(".ssh")).unwrap();
    assert_key_hidden(
        &env,
        &env.home,
        &[keys.join("id_rsa"), env.home.join(".ssh/id_rsa")],
        &[keys.clone(), env.home.clone()],
    );
}

#[test]
fn the_file_tools_refuse_proc_even_through_a_symlink() {
    let env = Env::new();
    std::os::unix::fs::symlink("/proc", env.workspace.join("p")).unwrap();
    std::os::unix::fs::symlink("/proc/self/status", env.workspace.join("status")).unwrap();
    for (name, args) in [
        ("read_file", json!({"path": "/proc/self/status"})),
        ("read_file", json!({"path": "/proc/1/cmdline"})),
        ("read_file", json!({"path": "/proc/net/unix"})),
        ("read_file", json!({"path": "status"})),
        ("read_file", json!({"path": "p/self/environ"})),
        ("list_dir", json!({"path": "/proc"})),
        ("list_dir", json!({"path": "/proc/1"})),
        ("list_dir", json!({"path": "p"})),
        ("glob", json!({"pattern": "*", "path": "/proc"})),
        ("glob", json!({"pattern": "**", "path": "p/self"})),
    ] {
        let v = tool_with(&env, &env.home, "workspace-write", name, &args);
        assert_eq!(v["ok"], false, "{name} {args}: {v}");
        assert!(
            content(&v).contains("/proc") && content(&v).contains("bash"),
            "{name} {args}: {v}"
        );
    }
    // The tools themselves keep working (the worker reads its own /proc/self/fd internally).
    env.write("dir/file.txt", "content\n");
    for (name, args, expected) in [
        ("read_file", json!({"path": "dir/file.txt"}), "content"),
        ("list_dir", json!({"path": "dir"}), "file.txt"),
        ("glob", json!({"pattern": "**/*.txt"}), "dir/file.txt"),
    ] {
        let v = tool_with(&env, &env.home, "workspace-write", name, &args);
        assert!(content(&v).contains(expected), "{name}: {v}");
    }
}

#[test]
fn special_files_never_block_the_file_tools() {
    let env = Env::new();
    nix::unistd::mkfifo(
        &env.workspace.join("fifo"),
        nix::sys::stat::Mode::from_bits_truncate(0o644),
    )
    .unwrap();
    let _socket = std::os::unix::net::UnixListener::bind(env.workspace.join("sock")).unwrap();
    let quick = Duration::from_secs(2);
    for (name, args, expected) in [
        ("read_file", json!({"path": "fifo"}), "fifo"),
        ("read_file", json!({"path": "sock"}), "socket"),
        ("read_file", json!({"path": "/dev/zero"}), "device"),
        (
            "write_file",
            json!({"path": "fifo", "content": "x"}),
            "fifo",
        ),
        (
            "edit_file",
            json!({"path": "fifo", "old_string": "a", "new_string": "b"}),
            "fifo",
        ),
        ("list_dir", json!({"path": "fifo"}), "not a directory"),
        (
            "glob",
            json!({"pattern": "*", "path": "fifo"}),
            "not a directory",
        ),
    ] {
        let (v, took) = tool_bounded(&env, name, &args, Duration::from_secs(20));
        assert!(took < quick, "{name} {args} took {took:?}");
        assert_eq!(v["ok"], false, "{name} {args}: {v}");
        assert!(
            content(&v).to_lowercase().contains(expected),
            "{name} {args}: {v}"
        );
    }
    // Listing, globbing and searching a directory that holds them is fine and quick.
    env.write("a.txt", "needle\n");
    for (name, args, expected) in [
        ("list_dir", json!({"path": "."}), "fifo"),
        ("glob", json!({"pattern": "*"}), "fifo"),
        ("grep", json!({"pattern": "needle"}), "a.txt:1:needle"),
        (
            "grep",
            json!({"pattern": "needle", "path": "fifo"}),
            "no matches",
        ),
    ] {
        let (v, took) = tool_bounded(&env, name, &args, Duration::from_secs(20));
        assert!(took < quick, "{name} {args} took {took:?}");
        assert!(content(&v).contains(expected), "{name} {args}: {v}");
    }
}

#[test]
fn writing_a_hard_link_of_a_rule_covered_file_needs_approval() {
    let env = Env::new();
    env.write(".env", "TOKEN=original\n");
    std::fs::hard_link(
        env.workspace.join(".env"),
        env.workspace.join("innocent.txt"),
    )
    .unwrap();
    for (name, args) in [
        (
            "write_file",
            json!({"path": "innocent.txt", "content": "TOKEN=evil\n"}),
        ),
        (
            "edit_file",
            json!({"path": "innocent.txt", "old_string": "original", "new_string": "evil"}),
        ),
    ] {
        let v = tool_with(&env, &env.home, "workstation", name, &args);
        assert_eq!(v["denied_by"], "approval", "{name}: {v}");
        assert!(
            content(&v).contains("hard link") && content(&v).contains("unavailable"),
            "{name}: {v}"
        );
    }
    assert_eq!(
        std::fs::read_to_string(env.workspace.join(".env")).unwrap(),
        "TOKEN=original\n"
    );
    // A file with one name is written as before; without path rules, links do not matter.
    env.write("single.txt", "a\n");
    let v = tool_with(
        &env,
        &env.home,
        "workstation",
        "write_file",
        &json!({"path": "single.txt", "content": "b\n"}),
    );
    assert_eq!(v["ok"], true, "{v}");
    let v = tool_with(
        &env,
        &env.home,
        "workspace-write",
        "write_file",
        &json!({"path": "innocent.txt", "content": "TOKEN=other\n"}),
    );
    assert_eq!(v["ok"], true, "{v}");
}

/// Another user's uid (`nobody`): root reaches its 0600 files only with CAP_DAC_OVERRIDE.
const OTHER_UID: u32 = 65534;

#[test]
fn as_root_the_file_tools_get_what_commands_get() {
    if !is_root() {
        eprintln!("skipped: only root has capabilities for the sandbox to take away");
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    let env = Env::new();
    let secret = env.home.join("secret.txt");
    std::fs::write(&secret, "S\n").unwrap();
    std::os::unix::fs::chown(&secret, Some(OTHER_UID), Some(OTHER_UID)).unwrap();
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
    let read = tool_with(
        &env,
        &env.home,
        "workspace-write",
        "read_file",
        &json!({"path": path_str(&secret)}),
    );
    assert_eq!(
        read["ok"], false,
        "root's read_file passed another user's 0600: {read}"
    );
    assert!(
        content(&read).contains("permission denied by the owner and mode of the file"),
        "{read}"
    );
    assert_eq!(read["denied_by"], "sandbox", "{read}");
    let cat = run(env.bridle().args(["exec", "--", "cat", path_str(&secret)]));
    assert_ne!(cat.code, Some(0), "a command read it: {}", cat.stdout);
    // A workspace of another user: neither a command nor write_file creates a file there.
    let theirs = env.home.join("theirs");
    std::fs::create_dir(&theirs).unwrap();
    std::os::unix::fs::chown(&theirs, Some(OTHER_UID), Some(OTHER_UID)).unwrap();
    std::fs::set_permissions(&theirs, std::fs::Permissions::from_mode(0o755)).unwrap();
    let in_theirs = |name: &str, args: Value| {
        let r = run(env
            .bridle()
            .current_dir(&theirs)
            .args(["tool", name, &args.to_string()])
            .stdin(std::process::Stdio::null()));
        parse(&r)
    };
    let written = in_theirs("write_file", json!({"path": "f", "content": "x"}));
    assert_eq!(written["ok"], false, "{written}");
    assert!(
        content(&written).contains(&format!(
            "permission denied by the owner and mode of `{}`, the directory it would be created in",
            path_str(&theirs)
        )),
        "the directory that refused is not named: {written}"
    );
    let touched = in_theirs("bash", json!({"command": "touch f"}));
    assert_eq!(touched["ok"], false, "{touched}");
    assert!(
        touched["sandbox"]["denied_by_sandbox"]
            .as_str()
            .is_some_and(|d| d.contains("belongs to uid 65534")),
        "the sandbox's part is not said: {touched}"
    );
    assert!(!theirs.join("f").exists());
}
