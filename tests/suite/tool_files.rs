//! `bridle tool read_file|write_file|edit_file|list_dir`: policy first, then the kernel
//! (a Landlock-confined worker, `openat2` without following symlinks) under the same spec.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::{Value, json};

use super::support::{Env, Run, path_str, run};

fn tool(env: &Env, profile: &str, name: &str, args: &Value) -> (Run, Value) {
    let mut cmd = env.bridle();
    cmd.args(["--profile", profile, "tool", name, &args.to_string()])
        .stdin(std::process::Stdio::null());
    let r = run(&mut cmd);
    let v: Value = serde_json::from_str(r.stdout.trim())
        .unwrap_or_else(|e| panic!("{e}: {}\n{}", r.stdout, r.stderr));
    (r, v)
}

fn content(v: &Value) -> &str {
    v["content"].as_str().unwrap_or_default()
}

#[test]
fn write_read_edit_and_list_inside_the_workspace() {
    let env = Env::new();
    let (r, v) = tool(
        &env,
        "workspace-write",
        "write_file",
        &json!({"path": "src/a.txt", "content": "alpha\nbeta\nbeta\n"}),
    );
    r.assert_code(0);
    assert_eq!(
        std::fs::read_to_string(env.workspace.join("src/a.txt")).unwrap(),
        "alpha\nbeta\nbeta\n",
        "{v}"
    );
    let (_, v) = tool(
        &env,
        "workspace-write",
        "read_file",
        &json!({"path": "src/a.txt", "offset": 2, "limit": 1}),
    );
    assert!(
        content(&v).contains("     2\tbeta") && !content(&v).contains("alpha"),
        "{v}"
    );
    let (r, v) = tool(
        &env,
        "workspace-write",
        "edit_file",
        &json!({"path": "src/a.txt", "old_string": "beta", "new_string": "gamma"}),
    );
    r.assert_code(1);
    assert!(content(&v).contains("occurs 2 times"), "{v}");
    let (r, _) = tool(
        &env,
        "workspace-write",
        "edit_file",
        &json!({"path": "src/a.txt", "old_string": "beta", "new_string": "gamma", "replace_all": true}),
    );
    r.assert_code(0);
    assert_eq!(
        std::fs::read_to_string(env.workspace.join("src/a.txt")).unwrap(),
        "alpha\ngamma\ngamma\n"
    );
    let (_, v) = tool(
        &env,
        "workspace-write",
        "edit_file",
        &json!({"path": "src/a.txt", "old_string": "delta", "new_string": "x"}),
    );
    assert!(content(&v).contains("not found"), "{v}");
    let (_, v) = tool(&env, "workspace-write", "list_dir", &json!({"path": "."}));
    assert!(content(&v).contains("src/"), "{v}");
}

#[test]
fn writes_outside_through_dotdot_absolute_or_symlink_are_denied() {
    let env = Env::new();
    let outside = env.home.join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::os::unix::fs::symlink(&outside, env.workspace.join("link")).unwrap();
    for path in [
        "../outside/a.txt".to_owned(),
        format!("{}/b.txt", path_str(&outside)),
        "link/c.txt".to_owned(),
    ] {
        let (r, v) = tool(
            &env,
            "workspace-write",
            "write_file",
            &json!({"path": path, "content": "x"}),
        );
        r.assert_code(1);
        assert!(content(&v).contains("denied"), "{path}: {v}");
    }
    assert_eq!(
        std::fs::read_dir(&outside).unwrap().count(),
        0,
        "something landed outside"
    );
    let (_, v) = tool(
        &env,
        "workspace-write",
        "edit_file",
        &json!({"path": "link/c.txt", "old_string": "a", "new_string": "b"}),
    );
    assert_eq!(v["ok"], false);
}

#[test]
fn protected_paths_cannot_be_written_or_edited() {
    let env = Env::new();
    std::fs::create_dir_all(env.workspace.join(".git/hooks")).unwrap();
    std::fs::write(env.workspace.join(".git/config"), "[core]\n").unwrap();
    let (_, v) = tool(
        &env,
        "workspace-write",
        "write_file",
        &json!({"path": ".git/hooks/pre-commit", "content": "#!/bin/sh\n"}),
    );
    assert_eq!(v["denied_by"], "policy", "{v}");
    let (_, v) = tool(
        &env,
        "workspace-write",
        "edit_file",
        &json!({"path": ".git/config", "old_string": "[core]", "new_string": "[core]\n\tfsmonitor = evil"}),
    );
    assert_eq!(v["ok"], false, "{v}");
    assert!(!env.workspace.join(".git/hooks/pre-commit").exists());
    assert_eq!(
        std::fs::read_to_string(env.workspace.join(".git/config")).unwrap(),
        "[core]\n"
    );
}

#[test]
fn masked_paths_are_unreadable_even_through_a_symlink() {
    let env = Env::new();
    std::fs::create_dir_all(env.home.join(".ssh")).unwrap();
    std::fs::write(env.home.join(".ssh/id_rsa"), "PRIVATE KEY").unwrap();
    std::os::unix::fs::symlink(env.home.join(".ssh/id_rsa"), env.workspace.join("key")).unwrap();
    for path in [
        path_str(&env.home.join(".ssh/id_rsa")).to_owned(),
        "key".to_owned(),
    ] {
        let (r, v) = tool(&env, "workstation", "read_file", &json!({"path": path}));
        r.assert_code(1);
        assert!(
            !content(&v).contains("PRIVATE KEY") && content(&v).contains("masked"),
            "{path}: {v}"
        );
    }
    let (_, v) = tool(
        &env,
        "workstation",
        "list_dir",
        &json!({"path": path_str(&env.home.join(".ssh"))}),
    );
    assert!(!content(&v).contains("id_rsa"), "{v}");
}

#[test]
fn listings_leave_out_masked_paths_even_their_names() {
    let env = Env::new();
    std::fs::create_dir_all(env.home.join(".ssh")).unwrap();
    std::fs::write(env.home.join(".ssh/id_rsa"), "PRIVATE KEY").unwrap();
    std::fs::write(env.home.join(".netrc"), "machine x password y\n").unwrap();
    std::fs::write(env.home.join("notes.txt"), "hi\n").unwrap();
    let home = path_str(&env.home);
    let (r, v) = tool(&env, "workstation", "list_dir", &json!({"path": home}));
    r.assert_ok();
    let listed = content(&v);
    assert!(listed.contains("notes.txt"), "{v}");
    assert!(
        !listed.contains(".netrc") && !listed.contains(".ssh"),
        "{v}"
    );
    for pattern in ["**/.netrc", "**/id_rsa", ".ssh", "**/.ssh/**"] {
        let (r, v) = tool(
            &env,
            "workstation",
            "glob",
            &json!({"pattern": pattern, "path": home}),
        );
        r.assert_ok();
        assert!(content(&v).starts_with("no matches"), "{pattern}: {v}");
    }
    let (_, v) = tool(
        &env,
        "workstation",
        "glob",
        &json!({"pattern": "*.txt", "path": home}),
    );
    assert!(content(&v).contains("notes.txt"), "{v}");
}

#[test]
fn ask_rule_on_a_write_is_unavailable_without_a_terminal() {
    let env = Env::new();
    let (_, v) = tool(
        &env,
        "workstation",
        "write_file",
        &json!({"path": "app/.env", "content": "TOKEN=1"}),
    );
    assert_eq!(v["denied_by"], "approval", "{v}");
    assert!(!env.workspace.join("app/.env").exists());
}

#[test]
fn binary_and_huge_files_get_clear_messages() {
    let env = Env::new();
    env.write("blob.bin", [0u8, 1, 2, 3, 0, 255]);
    let (_, v) = tool(
        &env,
        "workspace-write",
        "read_file",
        &json!({"path": "blob.bin"}),
    );
    assert!(content(&v).contains("binary file"), "{v}");
    let big: String = (0..400_000).map(|i| format!("line {i}\n")).collect();
    env.write("big.txt", big);
    let (_, v) = tool(
        &env,
        "workspace-write",
        "read_file",
        &json!({"path": "big.txt"}),
    );
    assert!(
        content(&v).len() < 300 * 1024,
        "{} bytes",
        content(&v).len()
    );
    assert!(
        content(&v).contains("use `offset` and `limit`"),
        "{}",
        &content(&v)[content(&v).len() - 200..]
    );
    let (_, v) = tool(
        &env,
        "workspace-write",
        "read_file",
        &json!({"path": "big.txt", "offset": 399_999, "limit": 1}),
    );
    assert!(content(&v).contains("line 399998"), "{v}");
}

#[test]
fn swapping_a_directory_for_a_symlink_never_redirects_a_write() {
    let env = Env::new();
    let outside = env.home.join("outside-race");
    std::fs::create_dir_all(&outside).unwrap();
    let dir = env.workspace.join("dir");
    std::fs::create_dir_all(&dir).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let swaps = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let swapper = {
        let (stop, swaps, dir, outside) =
            (stop.clone(), swaps.clone(), dir.clone(), outside.clone());
        let real = env.workspace.join("dir.real");
        std::thread::spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                // dir: real directory -> symlink to outside -> real directory again.
                let _ = std::fs::rename(&dir, &real);
                let _ = std::os::unix::fs::symlink(&outside, &dir);
                std::thread::yield_now();
                let _ = std::fs::remove_file(&dir);
                let _ = std::fs::rename(&real, &dir);
                swaps.fetch_add(1, Ordering::SeqCst);
            }
        })
    };
    let mut calls = 0;
    while swaps.load(Ordering::SeqCst) < 200 || calls < 50 {
        let _ = tool(
            &env,
            "workspace-write",
            "write_file",
            &json!({"path": "dir/f.txt", "content": "x"}),
        );
        calls += 1;
        assert!(calls < 5000, "the swapper did not make progress");
    }
    stop.store(true, Ordering::SeqCst);
    swapper.join().unwrap();
    assert_eq!(
        std::fs::read_dir(&outside).unwrap().count(),
        0,
        "a write landed outside after {calls} calls"
    );
}

#[test]
fn glob_lists_matches_without_git_internals() {
    let env = Env::new();
    env.write("src/main.rs", "fn main() {}");
    env.write("src/lib/mod.rs", "");
    env.write("README.md", "");
    std::fs::create_dir_all(env.workspace.join(".git/objects")).unwrap();
    std::fs::write(env.workspace.join(".git/objects/x.rs"), "").unwrap();
    let (r, v) = tool(
        &env,
        "workspace-write",
        "glob",
        &json!({"pattern": "**/*.rs"}),
    );
    r.assert_code(0);
    assert_eq!(content(&v), "src/lib/mod.rs\nsrc/main.rs\n", "{v}");
    let (_, v) = tool(&env, "workspace-write", "glob", &json!({"pattern": "*.md"}));
    assert_eq!(content(&v), "README.md\n");
    let (_, v) = tool(
        &env,
        "workspace-write",
        "glob",
        &json!({"pattern": "[unclosed"}),
    );
    assert_eq!(v["ok"], false);
}

#[test]
fn grep_finds_matches_but_never_masked_secrets() {
    // A home the sandbox can see (below /var/tmp, not the private /tmp), so only the mask hides it.
    let exec_env = super::support::ExecEnv::new();
    let env: &Env = &exec_env;
    env.write("src/a.rs", "let needle = 1;\nother\n");
    let (r, v) = tool(
        env,
        "workspace-write",
        "grep",
        &json!({"pattern": "need+le", "glob": "*.rs"}),
    );
    r.assert_code(0);
    assert!(content(&v).contains("src/a.rs:1:let needle = 1;"), "{v}");
    let (_, v) = tool(
        env,
        "workspace-write",
        "grep",
        &json!({"pattern": "absent-token"}),
    );
    assert_eq!(content(&v), "no matches");
    std::fs::create_dir_all(env.home.join(".ssh")).unwrap();
    std::fs::write(env.home.join(".ssh/id_rsa"), "secret-token-4711").unwrap();
    std::fs::write(env.home.join("visible.txt"), "secret-token-0815").unwrap();
    let (_, v) = tool(
        env,
        "workstation",
        "grep",
        &json!({"pattern": "secret-token", "path": path_str(&env.home)}),
    );
    assert!(
        content(&v).contains("0815"),
        "the unmasked file must be found: {v}"
    );
    assert!(
        !content(&v).contains("4711"),
        "a masked secret was found: {v}"
    );
}

#[test]
fn grep_failures_say_why_and_a_masked_path_is_the_sandboxs() {
    let exec_env = super::support::ExecEnv::new();
    let env: &Env = &exec_env;
    std::fs::create_dir_all(env.home.join(".ssh")).unwrap();
    std::fs::write(env.home.join(".ssh/id_rsa"), "secret-token-4711").unwrap();
    std::os::unix::fs::symlink(env.home.join(".ssh"), env.workspace.join("keys")).unwrap();
    // Masked: refused before grep runs, named as read_file names it.
    for path in [
        path_str(&env.home.join(".ssh")),
        "~/.ssh",
        "keys",
        "~/.ssh/id_rsa",
    ] {
        let (r, v) = tool(
            env,
            "workstation",
            "grep",
            &json!({"pattern": "secret", "path": path}),
        );
        r.assert_code(1);
        assert!(content(&v).contains("is in a masked path"), "{path}: {v}");
        assert!(!content(&v).contains("4711"), "{path}: {v}");
        assert_eq!(v["denied_by"], "sandbox", "{path}: {v}");
    }
    // Not the sandbox's: grep's own words, and nobody denied anything.
    env.write("locked.txt", "needle");
    let locked = env.workspace.join("locked.txt");
    std::fs::set_permissions(&locked, std::os::unix::fs::PermissionsExt::from_mode(0o000)).unwrap();
    for (path, says) in [
        ("missing.txt", "missing.txt: No such file or directory"),
        ("locked.txt", "locked.txt: Permission denied"),
    ] {
        let (r, v) = tool(
            env,
            "workstation",
            "grep",
            &json!({"pattern": "needle", "path": path}),
        );
        r.assert_code(1);
        assert!(content(&v).contains(says), "{path}: {v}");
        assert_eq!(v["denied_by"], Value::Null, "{path}: {v}");
    }
    // Matches elsewhere: the unreadable file is named as skipped.
    env.write("found.txt", "needle");
    let (r, v) = tool(env, "workstation", "grep", &json!({"pattern": "needle"}));
    r.assert_code(0);
    assert!(
        content(&v).contains("skipped:\ngrep: ./locked.txt: Permission denied"),
        "{v}"
    );
    // Outside the readable roots: the sandbox's, with grep's words.
    std::fs::create_dir_all(env.home.join("outside")).unwrap();
    std::fs::write(env.home.join("outside/f"), "needle").unwrap();
    let narrow = exec_env.profile(
        "narrow.yaml",
        "mode: workspace-write\n\
         readable_roots: {replace: [/usr, /bin, /lib, /lib64, /etc, /proc, /dev, /sys]}\n",
    );
    let outside = path_str(&env.home.join("outside")).to_owned();
    let (r, v) = tool(
        env,
        &narrow,
        "grep",
        &json!({"pattern": "needle", "path": outside}),
    );
    r.assert_code(1);
    assert!(
        content(&v).contains("is outside the readable roots")
            && content(&v).contains("Permission denied"),
        "{v}"
    );
    assert_eq!(v["denied_by"], "sandbox", "{v}");
}

#[test]
fn write_escalation_needs_a_person_and_runs_only_that_call_wider() {
    let env = Env::new();
    let outside = env.home.join("report.txt");
    let args = json!({"path": path_str(&outside), "content": "r", "sandbox_permissions": "danger-full-access", "justification": "the report goes to the home"});
    let (_, unavailable) = tool(&env, "workstation", "write_file", &args);
    assert_eq!(unavailable["denied_by"], "approval", "{unavailable}");
    assert!(
        content(&unavailable).contains("unavailable"),
        "{unavailable}"
    );
    let (_, never) = tool(&env, "ci-locked", "write_file", &args);
    assert!(content(&never).contains("`never`"), "{never}");
    assert!(!outside.exists(), "a denied escalation wrote");
    let (_, unjustified) = tool(
        &env,
        "workstation",
        "write_file",
        &json!({"path": "x", "content": "", "sandbox_permissions": "danger-full-access"}),
    );
    assert!(
        content(&unjustified).contains("justification"),
        "{unjustified}"
    );

    // A person approves on the terminal.
    let r = super::support::bridle_in_pty(
        &[
            "--profile",
            "workstation",
            "tool",
            "write_file",
            &args.to_string(),
        ],
        &env.home,
        &env.workspace,
        Some("y"),
        None,
    );
    r.assert_code(0);
    assert_eq!(
        std::fs::read_to_string(&outside).unwrap(),
        "r",
        "{}",
        r.stdout
    );
    // The next call is confined again.
    let (_, v) = tool(
        &env,
        "workstation",
        "write_file",
        &json!({"path": path_str(&outside), "content": "again"}),
    );
    assert_eq!(v["ok"], false, "{v}");
    assert_eq!(std::fs::read_to_string(&outside).unwrap(), "r");
}

#[test]
fn danger_full_access_file_tools_write_anywhere() {
    let env = Env::new();
    let target = env.home.join("anywhere/file.txt");
    let (r, v) = tool(
        &env,
        "danger-full-access",
        "write_file",
        &json!({"path": path_str(&target), "content": "d"}),
    );
    r.assert_code(0);
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "d", "{v}");
}

#[test]
fn a_tilde_path_means_the_sandbox_home_and_masks_still_hold() {
    let env = super::support::ExecEnv::new();
    std::fs::create_dir_all(env.home.join(".ssh")).unwrap();
    std::fs::write(env.home.join(".ssh/id_rsa"), "ssh-secret").unwrap();
    std::fs::write(env.home.join("notes.txt"), "home notes").unwrap();
    let r = super::support::run_bounded(env.bridle().args([
        "tool",
        "read_file",
        r#"{"path": "~/notes.txt"}"#,
    ]));
    r.assert_ok();
    assert!(r.stdout.contains("home notes"), "{}", r.stdout);
    let r = super::support::run_bounded(env.bridle().args([
        "tool",
        "read_file",
        r#"{"path": "~/.ssh/id_rsa"}"#,
    ]));
    r.assert_code(1);
    assert!(!r.stdout.contains("ssh-secret"), "{}", r.stdout);
    assert!(r.stdout.contains("masked"), "{}", r.stdout);
}
