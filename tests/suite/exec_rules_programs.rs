//! The exec supervisor against programs that pick a subcommand in their own process, with no
//! exec to decide: cargo's aliases (its config files, `CARGO_ALIAS_*`, `--config`), and a
//! toolchain's own cargo off `PATH` run under another name. Found by a red-team pass on
//! 2026-12-07; npm's prefixes and options are in `exec_rules_identity.rs`. And the commands
//! that change what a registry serves besides publishing.

use super::support::{ExecEnv, Run, run_within, toolchain_bin};

const DENIED: &str = "bridle: rule deny-package-publish denied exec of";

/// A crate in the workspace whose builds use `rustc` (rustup's proxies need a HOME this test
/// replaces), with `aliases` in its `.cargo/config.toml`.
fn crate_with_aliases(aliases: &str) -> (ExecEnv, String) {
    let bin = toolchain_bin();
    let e = ExecEnv::new();
    e.write(
        "Cargo.toml",
        "[package]\nname = \"tiny\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    );
    e.write("src/main.rs", "fn main() { println!(\"built\"); }\n");
    e.write(
        ".cargo/config.toml",
        format!(
            "[build]\nrustc = \"{}\"\n[alias]\n{aliases}",
            bin.join("rustc").display()
        ),
    );
    (e, bin.join("cargo").display().to_string())
}

/// Runs `line` from a script file under ci-locked: only the exec supervisor sees what it runs.
pub(super) fn script_under_ci_locked(e: &ExecEnv, line: &str) -> Run {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let name = format!(
        "run-{}.sh",
        N.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    );
    e.write(&name, format!("{line}\necho status=$?\n"));
    run_within(
        &mut e.exec_cmd(&["--profile", "ci-locked"], &[], &["bash", &name]),
        std::time::Duration::from_secs(300),
    )
}

#[track_caller]
fn assert_denied(r: &Run, line: &str) {
    assert!(
        r.stderr.contains(DENIED),
        "{line}: not denied by the rule:\n{}\n{}",
        r.stdout,
        r.stderr
    );
}

#[test]
fn a_cargo_alias_is_decided_as_the_command_it_runs() {
    let (e, cargo) = crate_with_aliases("p = \"publish --dry-run\"\nbb = [\"build\"]\n");
    std::fs::create_dir_all(e.workspace.join("src/deeper")).unwrap();
    for line in [
        // From the workspace's config, in its directory and below it.
        format!("{cargo} p --offline --allow-dirty"),
        format!("cd src/deeper && {cargo} p --offline --allow-dirty"),
        // From the environment and the command line.
        format!("CARGO_ALIAS_Q=publish {cargo} q --offline --allow-dirty"),
        format!("{cargo} --config 'alias.r2=\"publish\"' r2 --offline --allow-dirty"),
        format!(
            "printf '[alias]\\nz = \"publish\"\\n' > more.toml; {cargo} --config more.toml z --offline --allow-dirty"
        ),
        // An alias of an alias.
        format!("{cargo} --config 'alias.a1=\"p\"' a1 --offline --allow-dirty"),
    ] {
        let r = script_under_ci_locked(&e, &line);
        assert_denied(&r, &line);
        // cargo's publish says what it packages; it never started.
        assert!(
            !r.stderr.contains("Packaging") && !r.stderr.contains("registry"),
            "{line}: publish ran:\n{}",
            r.stderr
        );
    }
    // An alias of a build still builds.
    let r = script_under_ci_locked(
        &e,
        &format!("{cargo} bb --offline -q && ./target/debug/tiny"),
    );
    assert!(
        r.stdout.contains("built\nstatus=0"),
        "{}\n{}",
        r.stdout,
        r.stderr
    );
}

#[test]
fn a_toolchains_own_cargo_under_another_name_is_cargo() {
    // rustup puts proxies on PATH; the toolchain's cargo lives in `~/.rustup/toolchains`.
    let (e, cargo) = crate_with_aliases("");
    let toolchain = toolchain_bin().parent().unwrap().to_path_buf();
    let toolchains = e.home.join(".rustup/toolchains");
    std::fs::create_dir_all(&toolchains).unwrap();
    std::os::unix::fs::symlink(&toolchain, toolchains.join("stable-test")).unwrap();
    for line in [
        format!("ln -s {cargo} c && ./c publish --dry-run --offline --allow-dirty"),
        format!("(exec -a c {cargo} publish --dry-run --offline --allow-dirty)"),
    ] {
        let r = script_under_ci_locked(&e, &line);
        assert_denied(&r, &line);
        assert!(!r.stderr.contains("Packaging"), "{line}:\n{}", r.stderr);
    }
}

#[test]
fn changing_what_a_registry_serves_is_denied_at_every_exec() {
    let (e, cargo) = crate_with_aliases("y = \"yank\"\n");
    for (line, rule) in [
        ("npm --otp 123456 stage approve 3f2a", "deny-staged-publish"),
        ("npm stage --json approve 3f2a", "deny-staged-publish"),
        ("npx -c 'npm stage approve 3f2a'", "deny-staged-publish"),
        ("npm unp bridle-test-package@1.0.0", "deny-registry-changes"),
        (
            &*format!("{cargo} y --version 0.1.0 tiny"),
            "deny-registry-changes",
        ),
    ] {
        let r = script_under_ci_locked(&e, line);
        assert!(
            r.stderr
                .contains(&format!("bridle: rule {rule} denied exec of")),
            "{line}: not denied by {rule}:\n{}\n{}",
            r.stdout,
            r.stderr
        );
        assert_ne!(r.value("status"), "0", "{line}:\n{}", r.stderr);
    }
    // Listing what is staged changes nothing (it fails here for want of the network, or of
    // an npm with `stage`, not by a rule).
    let r = script_under_ci_locked(&e, "npm stage list bridle-test-package");
    assert!(!r.stderr.contains("denied exec"), "{}", r.stderr);
}
