//! `bridle probe`: the host report, the per-guarantee mechanisms, and the kernel this suite
//! expects.
//!
//! Kernel-dependent expectations never skip silently: a missing feature fails these tests unless
//! `BRIDLE_HOST_LACKS` names it (comma-separated: `landlock`, `seccomp`, `userns`, `mountns`,
//! `pidns`, `netns`). `BRIDLE_TEST_LANDLOCK_ABI` declares the exact Landlock ABI expected (CI sets
//! it for its machine).

use serde_json::Value;

use super::support::{Env, host_lacks, run};

fn probe_json(env: &Env, profile: &str) -> (Option<i32>, Value) {
    let r = run(env.bridle().args(["--profile", profile, "probe", "--json"]));
    let v: Value = serde_json::from_str(&r.stdout)
        .unwrap_or_else(|e| panic!("probe --json: {e}\n{}\n{}", r.stdout, r.stderr));
    (r.code, v)
}

#[test]
fn the_running_kernel_matches_the_declared_landlock_abi() {
    let env = Env::new();
    let (_, v) = probe_json(&env, "workspace-write");
    let abi = v["host"]["landlock_abi"]["Ok"].as_i64();
    match std::env::var("BRIDLE_TEST_LANDLOCK_ABI") {
        Ok(expected) => {
            let expected: i64 = expected
                .parse()
                .expect("BRIDLE_TEST_LANDLOCK_ABI is a number");
            assert_eq!(
                abi,
                Some(expected),
                "kernel Landlock ABI differs from the declared one: {}",
                v["host"]
            );
        }
        Err(_) if host_lacks("landlock") => assert_eq!(
            abi, None,
            "BRIDLE_HOST_LACKS says no landlock, but: {}",
            v["host"]
        ),
        Err(_) => assert!(
            abi.is_some_and(|a| a >= 6),
            "Landlock ABI >= 6 required (set BRIDLE_HOST_LACKS=landlock on hosts without it): {}",
            v["host"]
        ),
    }
}

#[test]
fn every_host_feature_is_available_unless_declared_missing() {
    let env = Env::new();
    let (_, v) = probe_json(&env, "workspace-write");
    let host = &v["host"];
    for (key, feature) in [
        ("seccomp", "seccomp"),
        ("user_ns", "userns"),
        ("mount_ns", "mountns"),
        ("mount_api", "mountns"),
        ("pid_ns", "pidns"),
        ("net_ns", "netns"),
        ("no_new_privs", "seccomp"),
    ] {
        let ok = host[key].get("Ok").is_some();
        if host_lacks(feature) {
            assert!(
                !ok,
                "BRIDLE_HOST_LACKS names {feature} but {key} works: {host}"
            );
        } else {
            assert!(
                ok,
                "{key} is unavailable on this host: {} (set BRIDLE_HOST_LACKS={feature} if that is expected)",
                host[key]
            );
        }
    }
}

#[test]
fn workspace_write_is_enforceable_with_a_mechanism_for_every_guarantee() {
    let env = Env::new();
    let (code, v) = probe_json(&env, "workspace-write");
    if std::env::var("BRIDLE_HOST_LACKS").is_ok() {
        return assert!(code == Some(0) || code == Some(125));
    }
    assert_eq!(code, Some(0), "{v}");
    assert_eq!(v["enforceable"], true);
    let guarantees = v["guarantees"].as_array().unwrap();
    let codes: Vec<&str> = guarantees
        .iter()
        .map(|g| g["guarantee"].as_str().unwrap())
        .collect();
    for required in [
        "G-FS-WRITE",
        "G-FS-PROTECT",
        "G-NET",
        "G-IPC",
        "G-PROC",
        "G-PRIV",
        "G-TTY",
        "G-TREE",
        "G-FD",
        "G-ENV",
    ] {
        assert!(
            codes.contains(&required),
            "{required} missing from {codes:?}"
        );
    }
    for g in guarantees {
        assert!(
            !g["provided_by"].as_array().unwrap().is_empty(),
            "no mechanism for {g}"
        );
    }
    let fs_write = guarantees
        .iter()
        .find(|g| g["guarantee"] == "G-FS-WRITE")
        .unwrap();
    let by: Vec<&str> = fs_write["provided_by"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m.as_str().unwrap())
        .collect();
    assert_eq!(by, ["mount-view", "landlock"]);
}

#[test]
fn probe_table_names_each_guarantee_and_its_mechanism() {
    let env = Env::new();
    let r = run(env.bridle().args(["--profile", "ci-locked", "probe"]));
    if std::env::var("BRIDLE_HOST_LACKS").is_err() {
        r.assert_code(0);
        assert!(r.stdout.contains("result: enforceable"), "{}", r.stdout);
    }
    for code in ["G-FS-WRITE", "G-FS-MASK", "G-NET", "G-RES"] {
        let line = r
            .stdout
            .lines()
            .find(|l| l.trim_start().starts_with(code))
            .unwrap_or_else(|| panic!("{code} not listed: {}", r.stdout));
        assert!(
            line.contains("enforced") || line.contains("MISSING"),
            "{line}"
        );
    }
    assert!(
        r.stdout.contains("landlock") && r.stdout.contains("seccomp"),
        "{}",
        r.stdout
    );
}

#[test]
fn unix_socket_opt_out_is_reported_as_reduced() {
    let env = Env::new();
    let profile = env.home.join("sockets.yaml");
    std::fs::write(&profile, "extends: workspace-write\nunix_sockets: allow\n").unwrap();
    let r = run(env
        .bridle()
        .args(["--profile", profile.to_str().unwrap(), "probe"]));
    let ipc = r
        .stdout
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("G-IPC"))
        .take(2)
        .collect::<Vec<_>>()
        .join("\n");
    assert!(ipc.contains("unix_sockets: allow"), "{}", r.stdout);
    assert!(!ipc.contains("seccomp-unix-sockets"), "{ipc}");
}
