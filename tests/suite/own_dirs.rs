//! What no sandbox reaches whatever the consumer (`exec`, `tool`): masked files named through a
//! symlink, bridle's state directory (the session logs and their key), and bridle's temp
//! directory, which is never a writable root; and how `--allow-write` and `--session-dir` are
//! checked before anything runs or is created. Masks follow `$XDG_CONFIG_HOME`, `$XDG_DATA_HOME`
//! and `$XDG_STATE_HOME` where the person moved those directories.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::support::{ExecEnv, cache_root, path_str, run, run_bounded};

/// `bridle [global] tool NAME ARGS` in `env`, its result and exit status.
fn tool(env: &ExecEnv, global: &[&str], name: &str, args: &Value) -> (Value, Option<i32>) {
    let mut cmd = env.bridle();
    cmd.args(global)
        .args(["tool", name, &args.to_string()])
        .stdin(std::process::Stdio::null());
    let r = run(&mut cmd);
    let value = serde_json::from_str(r.stdout.trim()).unwrap_or(Value::Null);
    (value, r.code)
}

/// bridle's temp directory for this user (`/var/tmp/bridle-UID`).
fn temp_base() -> PathBuf {
    cache_root()
        .parent()
        .expect("cache root has a parent")
        .to_owned()
}

#[test]
fn a_masked_file_that_is_a_symlink_hides_its_target() {
    // The stow / home-manager layout: the dotfile is a link to the real file elsewhere.
    let e = ExecEnv::new();
    let real = e.outside_file("netrc", "machine h login u password SYMLINKED-SECRET\n");
    std::os::unix::fs::symlink(&real, e.home.join(".netrc")).unwrap();
    std::fs::create_dir_all(e.home.join(".docker")).unwrap();
    let docker = e.outside_file("docker.json", "{\"auths\": \"DOCKER-SECRET\"}\n");
    std::os::unix::fs::symlink(&docker, e.home.join(".docker/config.json")).unwrap();
    let script = format!(
        "cat {r}; cat ~/.netrc; cat {d}; cat ~/.docker/config.json; echo done",
        r = path_str(&real),
        d = path_str(&docker)
    );
    let r = e.sh(&script);
    r.assert_ok();
    assert!(r.stdout.contains("done"), "{}", r.stderr);
    for secret in ["SYMLINKED-SECRET", "DOCKER-SECRET"] {
        assert!(
            !r.stdout.contains(secret),
            "exec read {secret}: {}",
            r.stdout
        );
    }
    let (v, _) = tool(&e, &[], "bash", &json!({ "command": script }));
    let content = v["content"].as_str().unwrap_or_default();
    assert!(content.contains("done"), "{v}");
    assert!(
        !content.contains("SECRET"),
        "the bash tool read it: {content}"
    );
}

#[test]
fn the_state_directory_is_unreadable_to_every_consumer() {
    let e = ExecEnv::new();
    let state = e.home.join(".local/state/bridle");
    std::fs::create_dir_all(state.join("sessions")).unwrap();
    let key = state.join("sessions/log.key");
    std::fs::write(&key, "THE-LOG-KEY").unwrap();
    let script = format!("cat {}; echo done", path_str(&key));
    for profile in ["workspace-write", "ci-locked"] {
        let r = e.sh_with(&["--profile", profile], &[], &script);
        r.assert_ok();
        assert!(r.stdout.contains("done"), "{profile}: {}", r.stderr);
        assert!(
            !r.stdout.contains("THE-LOG-KEY"),
            "{profile}: exec read the key"
        );
    }
    let (v, _) = tool(&e, &[], "bash", &json!({ "command": script }));
    assert!(!v.to_string().contains("THE-LOG-KEY"), "bash tool: {v}");
    let (v, code) = tool(&e, &[], "read_file", &json!({ "path": path_str(&key) }));
    assert_eq!(code, Some(1), "{v}");
    assert!(!v.to_string().contains("THE-LOG-KEY"), "read_file: {v}");

    // $XDG_STATE_HOME moves it, and the mask with it.
    let xdg = e.outside.join("state");
    let moved = xdg.join("bridle/sessions/log.key");
    std::fs::create_dir_all(moved.parent().unwrap()).unwrap();
    std::fs::write(&moved, "MOVED-LOG-KEY").unwrap();
    let mut cmd = e.exec_cmd(
        &[],
        &[],
        &["sh", "-c", &format!("cat {}", path_str(&moved))],
    );
    cmd.env("XDG_STATE_HOME", &xdg);
    let r = run_bounded(&mut cmd);
    assert!(!r.stdout.contains("MOVED-LOG-KEY"), "{}", r.stdout);
}

#[test]
fn a_tool_session_dir_hides_the_logs_and_key_beside_its_tmp() {
    let e = ExecEnv::new();
    let sessions = e.outside.join("sessions");
    std::fs::create_dir_all(&sessions).unwrap();
    std::fs::write(sessions.join("log.key"), "SESSION-DIR-KEY").unwrap();
    std::fs::write(sessions.join("a.jsonl"), "SESSION-DIR-LOG").unwrap();
    let call = |name: &str, args: Value| {
        let mut cmd = e.bridle();
        cmd.args(["tool", "--session-dir", path_str(&sessions), name])
            .arg(args.to_string())
            .stdin(std::process::Stdio::null());
        run(&mut cmd)
    };
    let script = format!(
        "cat {}/*; echo x > $TMPDIR/kept && echo done",
        path_str(&sessions)
    );
    let r = call("bash", json!({ "command": script }));
    assert!(r.stdout.contains("done"), "{}\n{}", r.stdout, r.stderr);
    assert!(!r.stdout.contains("SESSION-DIR"), "{}", r.stdout);
    assert!(sessions.join("tmp/kept").exists());
    let key = sessions.join("log.key");
    let r = call("read_file", json!({ "path": path_str(&key) }));
    r.assert_code(1);
    assert!(!r.stdout.contains("SESSION-DIR-KEY"), "{}", r.stdout);
}

#[test]
fn bridles_temp_directory_is_never_a_writable_root() {
    // The home is under /tmp, so that /var/tmp is refused for what it holds of bridle's.
    let e = ExecEnv::in_tmpdir();
    let base = temp_base();
    std::fs::create_dir_all(&base).unwrap();
    for root in [Path::new("/var/tmp"), base.as_path(), &base.join("cache")] {
        let r = e.sh_with(&[], &["--allow-write", path_str(root)], "echo ran");
        r.assert_code(2);
        assert!(!r.stdout.contains("ran"));
        assert!(
            r.stderr.contains("bridle's temp directory") && r.stderr.contains(path_str(root)),
            "{}",
            r.stderr
        );
    }
    let r = run_bounded(
        e.bridle()
            .args(["--workspace", "/var/tmp", "exec", "--", "true"]),
    );
    r.assert_code(2);
    assert!(r.stderr.contains("bridle's temp directory"), "{}", r.stderr);
}

#[test]
fn allow_write_must_name_an_existing_directory_and_no_kernel_interface() {
    let e = ExecEnv::new();
    let missing = e.outside.join("no-such-dir");
    let r = e.sh_with(&[], &["--allow-write", path_str(&missing)], "echo ran");
    r.assert_code(2);
    assert!(
        r.stderr.contains(path_str(&missing)) && r.stderr.contains("no such directory"),
        "{}",
        r.stderr
    );
    for pseudo in ["/proc", "/sys", "/dev", "/proc/self"] {
        let r = e.sh_with(&[], &["--allow-write", pseudo], "echo ran");
        r.assert_code(2);
        assert!(
            r.stderr.contains("kernel interface"),
            "{pseudo}: {}",
            r.stderr
        );
    }
    // A symlink names the directory it resolves to.
    let link = e.home.join("link-to-outside");
    std::os::unix::fs::symlink(&e.outside, &link).unwrap();
    let r = e.sh_with(
        &[],
        &["--allow-write", path_str(&link)],
        &format!("echo hi > {}/through-link", path_str(&link)),
    );
    r.assert_ok();
    assert!(e.outside.join("through-link").exists(), "{}", r.stderr);
}

#[test]
fn a_tool_call_leaves_no_temp_dir_behind() {
    let e = ExecEnv::new();
    for (name, args) in [
        ("bash", json!({"command": "echo hi > $TMPDIR/x; echo hi"})),
        // A result that names the directory itself, but no file in it.
        ("bash", json!({"command": "echo $TMPDIR"})),
        ("read_file", json!({"path": "missing.txt"})),
    ] {
        let entries = || -> std::collections::BTreeSet<String> {
            std::fs::read_dir(temp_base())
                .map(|dir| {
                    dir.flatten()
                        .map(|e| e.file_name().to_string_lossy().into_owned())
                        .collect()
                })
                .unwrap_or_default()
        };
        // Pids are reused: a `tool-PID-*` left by an earlier process of the same pid (an older
        // bridle, a call whose result names a file there) is not this call's.
        let before = entries();
        let mut cmd = e.bridle();
        cmd.args(["tool", name, &args.to_string()])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        let child = cmd.spawn().unwrap();
        let prefix = format!("tool-{}-", child.id());
        let out = child.wait_with_output().unwrap();
        assert!(out.status.code().is_some(), "{name}");
        let left: Vec<String> = entries()
            .into_iter()
            .filter(|n| n.starts_with(&prefix) && !before.contains(n))
            .collect();
        assert!(left.is_empty(), "{name} left {left:?}");
    }
}

#[test]
fn a_refused_tool_session_dir_creates_nothing_and_is_a_usage_error() {
    let e = ExecEnv::new();
    let inside = e.workspace.join("sd");
    let mut cmd = e.bridle();
    cmd.args(["tool", "--session-dir", "sd", "bash"])
        .arg(json!({"command": "echo hi"}).to_string())
        .stdin(std::process::Stdio::null());
    let r = run(&mut cmd);
    r.assert_code(2);
    // `tool` reports its failures as one JSON object on stdout.
    assert!(r.stdout.contains("refusing session dir"), "{}", r.stdout);
    assert!(!inside.exists(), "created before it was refused");
}

#[test]
fn gits_xdg_credential_store_is_masked() {
    let e = ExecEnv::new();
    let store = e.home.join(".config/git/credentials");
    std::fs::create_dir_all(store.parent().unwrap()).unwrap();
    std::fs::write(&store, "https://u:XDG-GIT-SECRET@h\n").unwrap();
    let r = e.sh("cat ~/.config/git/credentials; echo done");
    r.assert_ok();
    assert!(r.stdout.contains("done"), "{}", r.stderr);
    assert!(!r.stdout.contains("XDG-GIT-SECRET"), "{}", r.stdout);
}

#[test]
fn credential_stores_under_xdg_config_home_are_unreadable_to_exec_and_the_file_tools() {
    let e = ExecEnv::new();
    let config = e.outside.join("xdg");
    let data = e.outside.join("data");
    let stores = [
        (config.join("gh/hosts.yml"), "XDG-GH-TOKEN"),
        (config.join("git/credentials"), "XDG-GIT-SECRET"),
        (data.join("keyrings/login.keyring"), "XDG-KEYRING"),
    ];
    for (path, secret) in &stores {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, format!("{secret}\n")).unwrap();
    }
    let with_xdg = |cmd: &mut std::process::Command| {
        cmd.env("XDG_CONFIG_HOME", &config)
            .env("XDG_DATA_HOME", &data)
            .stdin(std::process::Stdio::null());
    };
    let script = stores
        .iter()
        .map(|(p, _)| format!("cat {}; ", path_str(p)))
        .collect::<String>()
        + "echo done";
    let mut cmd = e.exec_cmd(&[], &[], &["sh", "-c", &script]);
    with_xdg(&mut cmd);
    let r = run_bounded(&mut cmd);
    assert!(r.stdout.contains("done"), "{}", r.stderr);
    for (path, secret) in &stores {
        assert!(!r.stdout.contains(secret), "exec read {}", path.display());
        let mut cmd = e.bridle();
        cmd.args(["tool", "read_file"])
            .arg(json!({ "path": path_str(path) }).to_string());
        with_xdg(&mut cmd);
        let r = run(&mut cmd);
        r.assert_code(1);
        assert!(!r.stdout.contains(secret), "read_file: {}", r.stdout);
    }
    // `policy show` names the resolved path and the entry that masks it.
    let mut cmd = e.bridle();
    cmd.args(["policy", "show"]);
    with_xdg(&mut cmd);
    let r = run(&mut cmd);
    r.assert_code(0);
    let gh = format!("{} (", path_str(&config.join("gh")));
    let line = r.stdout.lines().find(|l| l.contains(&gh));
    assert!(
        line.is_some_and(|l| l.contains("`~/.config/gh` under $XDG_CONFIG_HOME")),
        "{}",
        r.stdout
    );
}

#[test]
fn the_default_state_directory_stays_hidden_when_xdg_state_home_moves_it() {
    // The logs and key of sessions run before the variable was set are still there.
    let e = ExecEnv::new();
    let key = e.home.join(".local/state/bridle/sessions/log.key");
    std::fs::create_dir_all(key.parent().unwrap()).unwrap();
    std::fs::write(&key, "EARLIER-LOG-KEY").unwrap();
    let xdg = e.outside.join("state");
    let script = format!("cat {}; echo done", path_str(&key));
    let mut cmd = e.exec_cmd(&[], &[], &["sh", "-c", &script]);
    cmd.env("XDG_STATE_HOME", &xdg);
    let r = run_bounded(&mut cmd);
    assert!(r.stdout.contains("done"), "{}", r.stderr);
    assert!(!r.stdout.contains("EARLIER-LOG-KEY"), "{}", r.stdout);
    let mut cmd = e.bridle();
    cmd.args(["tool", "read_file"])
        .arg(json!({ "path": path_str(&key) }).to_string())
        .env("XDG_STATE_HOME", &xdg)
        .stdin(std::process::Stdio::null());
    let r = run(&mut cmd);
    r.assert_code(1);
    assert!(!r.stdout.contains("EARLIER-LOG-KEY"), "{}", r.stdout);
}
