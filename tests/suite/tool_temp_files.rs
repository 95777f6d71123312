//! Files bridle itself writes into a session's private temp dir, which the command can write
//! too: output spill files (capped by `limits.spill_size` and a session budget, never
//! redirected by something the command planted, removed when no result names them) and the
//! mask file.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::support::{Env, path_str, run};

fn tool(env: &Env, global: &[&str], name: &str, args: &Value) -> Value {
    let mut cmd = env.bridle();
    cmd.args(global)
        .args(["tool", name, &args.to_string()])
        .stdin(std::process::Stdio::null());
    let r = run(&mut cmd);
    serde_json::from_str(r.stdout.trim())
        .unwrap_or_else(|e| panic!("{e}: {}\n{}", r.stdout, r.stderr))
}

fn content(v: &Value) -> &str {
    v["content"].as_str().unwrap_or_default()
}

/// The result without the bulk of its output, for failure messages.
fn short(v: &Value) -> String {
    let text = content(v);
    let cut = |s: &str, n: usize| s.chars().take(n).collect::<String>();
    let end: String = text
        .chars()
        .rev()
        .take(600)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    format!("ok={} content={}...{end}", v["ok"], cut(text, 200))
}

/// The marker between head and tail.
fn marker(v: &Value) -> &str {
    let text = content(v);
    let start = text.find("\n[... ").unwrap_or(0);
    let end = text[start..]
        .find(" ...]")
        .map_or(text.len(), |e| start + e + 5);
    &text[start..end]
}

/// The spill files a result names.
fn spills_named(v: &Value) -> Vec<PathBuf> {
    content(v)
        .split_whitespace()
        .filter(|w| w.ends_with(".stdout") || w.ends_with(".stderr"))
        .map(PathBuf::from)
        .collect()
}

fn profile(env: &Env, yaml: &str) -> String {
    let path = env.home.join("spill-profile.yaml");
    std::fs::write(&path, yaml).unwrap();
    path_str(&path).to_owned()
}

#[test]
fn a_spill_stops_at_the_spill_size_and_the_result_says_what_was_dropped() {
    let env = Env::new();
    let p = profile(
        &env,
        "extends: workspace-write\nlimits:\n  spill_size: 100KiB\n",
    );
    let v = tool(
        &env,
        &["--profile", &p],
        "bash",
        &json!({"command": "head -c 1048576 /dev/zero | tr '\\0' s; echo left > /tmp/leftover"}),
    );
    assert_eq!(v["ok"], true, "{}", short(&v));
    let spills = spills_named(&v);
    let [spill] = spills.as_slice() else {
        panic!("one spill file expected: {}", marker(&v))
    };
    assert_eq!(std::fs::metadata(spill).unwrap().len(), 100 << 10);
    assert!(
        marker(&v).contains(&format!(
            "the other {} bytes were not kept: limits.spill_size is 100KiB",
            (1 << 20) - (100 << 10)
        )),
        "{}",
        marker(&v)
    );
    // The call's temp dir holds what its result names and nothing else.
    let dir = spill.parent().unwrap();
    let left: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(left, vec![spill.clone()]);
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn spills_of_a_session_stay_within_its_budget_across_calls() {
    let env = Env::new();
    let session = env.home.join("session");
    let p = profile(
        &env,
        "extends: workspace-write\nlimits:\n  spill_size: 64KiB\n",
    );
    let global = ["--profile", p.as_str()];
    let mut last = Value::Null;
    for _ in 0..6 {
        let mut cmd = env.bridle();
        cmd.args(global)
            .args(["tool", "--session-dir", path_str(&session), "bash"])
            .arg(json!({"command": "head -c 204800 /dev/zero | tr '\\0' b"}).to_string())
            .stdin(std::process::Stdio::null());
        let r = run(&mut cmd);
        last = serde_json::from_str(r.stdout.trim()).unwrap();
        assert_eq!(last["ok"], true, "{}", short(&last));
    }
    let total: u64 = std::fs::read_dir(session.join("tmp"))
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap())
        .filter(std::fs::Metadata::is_file)
        .map(|m| m.len())
        .sum();
    assert_eq!(total, 4 * (64 << 10), "the budget is 4 x limits.spill_size");
    assert!(spills_named(&last).is_empty(), "{}", marker(&last));
    assert!(
        marker(&last).contains("was not kept: the session's spill budget of 256KiB is used up"),
        "{}",
        marker(&last)
    );
}

/// Plants symlinks to `victim` where bridle's spill files of the next calls would go (bridle's
/// pid is in the temp dir's name), then writes more than the output cap to both streams.
fn plant_script(victim: &Path) -> String {
    format!(
        "pid=$(basename \"$TMPDIR\" | cut -d- -f2)
for n in 0 1 2 3; do for s in stdout stderr; do
  ln -s {v} \"/tmp/bash-$pid-$n.$s\"
done; done
head -c 40000 /dev/zero | tr '\\0' P
head -c 40000 /dev/zero | tr '\\0' Q >&2
",
        v = path_str(victim)
    )
}

#[test]
fn a_planted_symlink_never_redirects_a_spill_file() {
    let env = Env::new();
    let victim = env.home.join("victim.txt");
    std::fs::write(&victim, "original\n").unwrap();
    env.write("plant.sh", plant_script(&victim));
    let v = tool(&env, &[], "bash", &json!({"command": "sh plant.sh"}));
    assert_eq!(v["ok"], true, "{}", short(&v));
    assert_eq!(
        std::fs::read_to_string(&victim).unwrap(),
        "original\n",
        "a spill file followed the planted symlink"
    );
    let spills = spills_named(&v);
    assert_eq!(spills.len(), 2, "{}", short(&v));
    for spill in &spills {
        let meta = std::fs::symlink_metadata(spill).unwrap();
        assert!(meta.is_file(), "{} is not a regular file", spill.display());
        assert_eq!(meta.len(), 40_000);
        std::fs::remove_file(spill).unwrap();
    }
}

#[test]
fn a_planted_symlink_never_redirects_the_mask_file() {
    let env = Env::new();
    std::fs::write(env.home.join(".netrc"), "machine x password p\n").unwrap();
    let victim = env.home.join("victim.txt");
    std::fs::write(&victim, "original\n").unwrap();
    let session = env.home.join("session");
    let call = |command: &str| {
        let mut cmd = env.bridle();
        cmd.args(["--profile", "workstation", "tool", "--session-dir"])
            .arg(&session)
            .arg("bash")
            .arg(json!({ "command": command }).to_string())
            .stdin(std::process::Stdio::null());
        run(&mut cmd)
    };
    let first = call(&format!(
        "rm -f /tmp/.bridle-masked; ln -s {} /tmp/.bridle-masked",
        path_str(&victim)
    ));
    assert!(first.stdout.contains("\"ok\":true"), "{}", first.stdout);
    let second = call("cat ~/.netrc");
    assert!(!second.stdout.contains("password"), "{}", second.stdout);
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "original\n");
}
