//! Defaults a developer can live with (issue 8, section 4): a workspace under `/tmp` in every
//! mode, a hint when a command fails because the network is off, package managers told so,
//! credential stores masked, and a writable per-workspace cache home.

use crate::suite::support::{ExecEnv, cache_root, run_bounded};

#[test]
fn a_workspace_under_tmp_works_in_every_mode() {
    let env = ExecEnv::in_tmpdir();
    env.write("notes.txt", "hello\n");
    for mode in ["read-only", "workspace-write", "danger-full-access"] {
        let r = env.sh_with(
            &[],
            &["--mode", mode],
            "cat notes.txt; touch new-file; echo touch=$?",
        );
        r.assert_ok();
        assert!(r.stdout.starts_with("hello\n"), "{mode}: {}", r.stdout);
        let wrote = r.value("touch") == "0";
        assert_eq!(wrote, mode != "read-only", "{mode}: {}", r.stderr);
        let _ = std::fs::remove_file(env.workspace.join("new-file"));
    }
}

#[test]
fn a_command_that_fails_reaching_the_network_gets_one_hint_line() {
    let env = ExecEnv::new();
    let r = env.python(
        "import socket\ntry:\n    socket.create_connection(('192.0.2.1', 80), timeout=2)\nexcept OSError as e:\n    raise SystemExit(7)\n",
    );
    r.assert_code(7);
    let hints: Vec<&str> = r
        .stderr
        .lines()
        .filter(|l| l.starts_with("bridle: network:"))
        .collect();
    assert_eq!(hints.len(), 1, "{}", r.stderr);
    assert!(hints[0].contains("the network is off"), "{}", hints[0]);
    // A failure that has nothing to do with the network gets no hint, nor does a success.
    let r = env.sh("exit 3");
    r.assert_code(3);
    assert!(!r.stderr.contains("bridle: network"), "{}", r.stderr);
    // With the network on there is nothing to hint at.
    let r = env.sh_with(&[], &["--network", "on"], "exit 4");
    r.assert_code(4);
    assert!(!r.stderr.contains("bridle: network"), "{}", r.stderr);
}

#[test]
fn package_managers_are_told_the_network_is_off() {
    let env = ExecEnv::new();
    let r = env.sh("echo npm=$npm_config_offline cargo=$CARGO_NET_OFFLINE go=$GOPROXY");
    r.assert_ok();
    assert_eq!(r.stdout.trim(), "npm=true cargo=true go=off");
    let r = env.sh_with(&[], &["--network", "on"], "echo npm=$npm_config_offline");
    assert_eq!(r.stdout.trim(), "npm=");
}

#[test]
fn npm_install_fails_fast_with_the_network_off() {
    let env = ExecEnv::new();
    env.write(
        "package.json",
        r#"{"name": "x", "version": "1.0.0", "dependencies": {"left-pad": "1.3.0"}}"#,
    );
    let r = run_bounded(
        env.bridle()
            .args(["exec", "--", "npm", "install", "--no-audit"]),
    );
    assert_ne!(r.code, Some(0), "{}", r.stderr);
    assert!(
        r.elapsed.as_secs() < 30,
        "npm took {:?}: {}",
        r.elapsed,
        r.stderr
    );
    assert!(
        r.stderr.contains("only-if-cached") || r.stderr.contains("ENOTCACHED"),
        "{}",
        r.stderr
    );
}

#[test]
fn the_default_profile_masks_the_credential_stores_peers_forget() {
    let env = ExecEnv::new();
    for (file, secret) in [
        (".npmrc", "//registry.npmjs.org/:_authToken=npm_secret"),
        (".pypirc", "password = pypi_secret"),
        (".cargo/credentials.toml", "token = \"cargo_secret\""),
        (".config/gcloud/credentials.db", "gcloud_secret"),
        (".azure/accessTokens.json", "azure_secret"),
        (".docker/config.json", "docker_secret"),
        (".m2/settings.xml", "<password>maven_secret</password>"),
        (".config/containers/auth.json", "podman_secret"),
        (".ssh/id_rsa", "ssh_secret"),
    ] {
        let path = env.home.join(file);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, secret).unwrap();
        for profile in ["workspace-write", "read-only", "workstation", "ci-locked"] {
            let r = env.sh_with(
                &["--profile", profile],
                &[],
                &format!("cat '{}' 2>/dev/null; true", path.display()),
            );
            assert!(
                !r.stdout.contains("secret"),
                "{profile} read {file}: {}",
                r.stdout
            );
        }
    }
}

fn cache_dir(env: &ExecEnv) -> std::path::PathBuf {
    bridle_policy::cache_dir_for(&cache_root(), &env.workspace)
}

#[test]
fn tools_write_a_cache_home_that_persists_per_workspace_without_touching_the_hosts() {
    let env = ExecEnv::new();
    let host_cache = env.home.join(".cache");
    std::fs::create_dir_all(&host_cache).unwrap();
    std::fs::write(host_cache.join("from-host"), "host\n").unwrap();
    let r = env.sh(
        "cat ~/.cache/from-host && echo run1 > ~/.cache/tool-data && echo changed >> ~/.cache/from-host && mkdir -p ~/.npm/_cacache && echo ok",
    );
    r.assert_ok();
    assert!(r.stdout.ends_with("ok\n"), "{}\n{}", r.stdout, r.stderr);
    // The host's directory is untouched.
    assert_eq!(
        std::fs::read_to_string(host_cache.join("from-host")).unwrap(),
        "host\n"
    );
    assert!(!host_cache.join("tool-data").exists());
    assert!(cache_dir(&env).join("upper").is_dir());
    // The next run in the same workspace sees what the first one wrote.
    let r = env.sh("cat ~/.cache/tool-data ~/.cache/from-host; ls -d ~/.npm/_cacache");
    r.assert_ok();
    assert!(
        r.stdout.starts_with("run1\nhost\nchanged\n"),
        "{}",
        r.stdout
    );
    // Writes outside the cache paths still fail.
    let r = env.sh("touch ~/not-a-cache; echo rc=$?");
    assert_ne!(r.value("rc"), "0");
    // Another workspace does not see this one's cache.
    let other = env.home.join("other");
    std::fs::create_dir_all(&other).unwrap();
    let mut cmd = env.exec_cmd(
        &[],
        &[],
        &["sh", "-c", "cat ~/.cache/tool-data; echo rc=$?"],
    );
    let r = run_bounded(cmd.current_dir(&other));
    assert_ne!(r.value("rc"), "0", "{}", r.stdout);
    let _ = std::fs::remove_dir_all(bridle_policy::cache_dir_for(
        &cache_root(),
        &std::fs::canonicalize(&other).unwrap(),
    ));
}

#[test]
fn a_profile_can_turn_the_cache_home_off() {
    let env = ExecEnv::new();
    std::fs::create_dir_all(env.home.join(".cache")).unwrap();
    let profile = env.profile(
        "no-cache.yaml",
        "extends: workspace-write\ncache_home: {mode: \"off\"}\n",
    );
    let r = env.sh_with(
        &["--profile", &profile],
        &[],
        "touch ~/.cache/x; echo rc=$?",
    );
    assert_ne!(r.value("rc"), "0");
    assert!(!cache_dir(&env).exists());
    // read-only keeps nothing either.
    let r = env.sh_with(
        &["--profile", "read-only"],
        &[],
        "touch ~/.cache/x; echo rc=$?",
    );
    assert_ne!(r.value("rc"), "0");
}

#[test]
fn a_concurrent_run_uses_the_cache_but_does_not_keep_its_changes() {
    let env = ExecEnv::new();
    std::fs::create_dir_all(env.home.join(".cache")).unwrap();
    env.sh("echo shared > ~/.cache/seed").assert_ok();
    let mut first = env.exec_cmd(
        &[],
        &[],
        &["sh", "-c", "sleep 3; echo first > ~/.cache/first"],
    );
    let holder = first
        .stdin(std::process::Stdio::null())
        .spawn()
        .expect("spawn the first run");
    std::thread::sleep(std::time::Duration::from_millis(800));
    let r = env.sh("cat ~/.cache/seed && echo second > ~/.cache/second && echo wrote");
    r.assert_ok();
    assert_eq!(r.stdout, "shared\nwrote\n");
    let mut holder = holder;
    assert!(holder.wait().unwrap().success());
    let r = env.sh("cat ~/.cache/first; ls ~/.cache/second 2>/dev/null; echo rc=$?");
    assert!(r.stdout.starts_with("first\n"), "{}", r.stdout);
    assert_ne!(r.value("rc"), "0", "the concurrent run's change was kept");
}
