//! Every session directory bridle used stays hidden from later sandboxes and file tools, not
//! only the one the current invocation names: a `--session-dir` of an earlier run, the state
//! directory under an earlier `$XDG_STATE_HOME`. And the masks written under `~` apply under
//! the account's home from the password database when `$HOME` points elsewhere.

use std::path::Path;

use serde_json::{Value, json};

use super::run_cli::agent_cmd_in;
use super::support::{ExecEnv, path_str, run, run_bounded};

/// `bridle tool NAME ARGS` in `env`, its output.
fn tool(e: &ExecEnv, name: &str, args: &Value) -> String {
    let mut cmd = e.bridle();
    cmd.args(["tool", name, &args.to_string()])
        .stdin(std::process::Stdio::null());
    let r = run(&mut cmd);
    format!("{}{}", r.stdout, r.stderr)
}

/// Neither `exec`, the bash tool nor `read_file` reads `key` (whose content is `secret`).
fn assert_hidden(e: &ExecEnv, key: &Path, secret: &str) {
    let script = format!(
        "cat {}; od -c {} | head -1; echo done",
        path_str(key),
        path_str(key)
    );
    let r = e.sh(&script);
    assert!(r.stdout.contains("done"), "{}", r.stderr);
    assert!(!r.stdout.contains(secret), "exec read {}", key.display());
    let out = tool(e, "bash", &json!({ "command": script }));
    assert!(out.contains("done"), "{out}");
    assert!(!out.contains(secret), "the bash tool read it: {out}");
    let out = tool(e, "read_file", &json!({ "path": path_str(key) }));
    assert!(!out.contains(secret), "read_file read it: {out}");
    let out = tool(
        e,
        "grep",
        &json!({ "pattern": secret, "path": path_str(key) }),
    );
    assert!(
        !out.contains(&format!("{secret}\n")) && !out.contains(&format!("{secret}\"")),
        "grep read it: {out}"
    );
}

#[test]
fn the_key_in_an_earlier_session_dir_is_unreadable_later() {
    let e = ExecEnv::new();
    let sessions = e.outside.join("mysessions");
    let r = run_bounded(&mut agent_cmd_in(&e, &sessions, "- text: done\n", &[], "t"));
    r.assert_ok();
    let key = sessions.join("log.key");
    assert!(key.is_file(), "the run made no key: {}", r.stderr);
    // A recognisable key: the test asks whether its content leaks, not whether it verifies.
    std::fs::write(&key, "EARLIER-SESSION-DIR-KEY").unwrap();
    assert_hidden(&e, &key, "EARLIER-SESSION-DIR-KEY");
}

#[test]
fn the_key_under_an_earlier_xdg_state_home_is_unreadable_later() {
    let e = ExecEnv::new();
    let xdg = e.outside.join("altstate");
    let script = e.home.join("s.yaml");
    std::fs::write(&script, "- text: done\n").unwrap();
    let mut cmd = e.bridle();
    cmd.env("XDG_STATE_HOME", &xdg).args([
        "run",
        "--model",
        &format!("script:{}", path_str(&script)),
        "t",
    ]);
    let r = run_bounded(&mut cmd);
    r.assert_ok();
    let key = xdg.join("bridle/sessions/log.key");
    assert!(key.is_file(), "the run made no key: {}", r.stderr);
    std::fs::write(&key, "EARLIER-XDG-STATE-KEY").unwrap();
    assert_hidden(&e, &key, "EARLIER-XDG-STATE-KEY");
}

#[test]
fn an_unreadable_session_registry_stops_the_command() {
    let e = ExecEnv::new();
    let registry = e.home.join(".local/state/bridle/session-dirs");
    // A directory where the file should be: it cannot be read, so nothing runs unmasked.
    std::fs::create_dir_all(&registry).unwrap();
    let r = e.sh("echo ran");
    assert!(!r.stdout.contains("ran"), "{}", r.stdout);
    assert!(r.stderr.contains("session-dirs"), "{}", r.stderr);
}

#[test]
fn credentials_under_the_account_home_are_masked_when_home_points_elsewhere() {
    // The account's home from the password database: only a test process whose home exists
    // (root's `/root`; not bridle-ci's `/nonexistent`) can plant a store there.
    let Some(account) = account_home().filter(|h| h.is_dir()) else {
        return;
    };
    let e = ExecEnv::new();
    let store = account.join(".aws");
    let created = !store.exists();
    if std::fs::create_dir_all(&store).is_err() {
        return;
    }
    let name = format!("bridle-test-{}", std::process::id());
    let secret = store.join(&name);
    std::fs::write(&secret, "ACCOUNT-HOME-SECRET").unwrap();
    let r = e.sh(&format!("cat {}; echo done", path_str(&secret)));
    let out = tool(&e, "read_file", &json!({ "path": path_str(&secret) }));
    let mut show = e.bridle();
    show.args(["policy", "show"]);
    let shown = run(&mut show);
    let _ = std::fs::remove_file(&secret);
    if created {
        let _ = std::fs::remove_dir(&store);
    }
    assert!(r.stdout.contains("done"), "{}", r.stderr);
    assert!(!r.stdout.contains("ACCOUNT-HOME-SECRET"), "exec read it");
    assert!(
        !out.contains("ACCOUNT-HOME-SECRET"),
        "read_file read it: {out}"
    );
    // `policy show` lists both places, the second naming the account's home.
    assert!(
        shown.stdout.contains(path_str(&e.home.join(".aws"))),
        "{}",
        shown.stdout
    );
    assert!(
        shown.stdout.contains(&format!("{} (", path_str(&store)))
            && shown.stdout.contains("under the account's home"),
        "{}",
        shown.stdout
    );
}

/// The home directory the password database gives this process's user.
fn account_home() -> Option<std::path::PathBuf> {
    let out = std::process::Command::new("getent")
        .args(["passwd", &nix::unistd::getuid().to_string()])
        .output()
        .ok()?;
    let line = String::from_utf8(out.stdout).ok()?;
    line.trim().split(':').nth(5).map(std::path::PathBuf::from)
}
