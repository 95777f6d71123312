//! `bridle policy check` on bad profiles: non-zero exit, `file:line:column`, a reason, fast,
//! and never a panic.

use std::time::Duration;

use super::support::{Env, Run, path_str, run};

/// Checks `content` written to `name` in the workspace; asserts a clean, located failure.
fn check_fails(
    env: &Env,
    name: &str,
    content: impl AsRef<[u8]>,
    location: &str,
    reason: &str,
) -> Run {
    let path = env.write(name, content);
    let r = run(env.bridle().args(["policy", "check", path_str(&path)]));
    r.assert_code(1);
    assert!(!r.stderr.contains("panicked"), "panic: {}", r.stderr);
    assert!(r.stderr.starts_with("bridle: "), "{}", r.stderr);
    assert_eq!(
        r.stderr.lines().count(),
        1,
        "one line of error: {}",
        r.stderr
    );
    assert!(
        r.stderr.contains(location),
        "expected location `{location}` in: {}",
        r.stderr
    );
    assert!(
        r.stderr.contains(reason),
        "expected reason `{reason}` in: {}",
        r.stderr
    );
    assert!(r.elapsed < Duration::from_secs(1), "took {:?}", r.elapsed);
    r
}

#[test]
fn unknown_key_is_rejected_with_location_and_hint() {
    let env = Env::new();
    let r = check_fails(
        &env,
        "p.yaml",
        "mode: read-only\nnetwrok: off\n",
        "p.yaml:2:1",
        "unknown field `netwrok`",
    );
    assert!(r.stderr.contains("did you mean `network`"), "{}", r.stderr);
}

#[test]
fn unknown_nested_key_is_rejected() {
    let env = Env::new();
    check_fails(
        &env,
        "p.yaml",
        "mode: read-only\nlimits:\n  memroy: 1GiB\n",
        "p.yaml:3:3",
        "unknown field `memroy`",
    );
}

#[test]
fn wrong_type_is_rejected() {
    let env = Env::new();
    check_fails(
        &env,
        "p.yaml",
        "mode: read-only\nlimits:\n  processes: [1, 2]\n",
        "p.yaml:3:",
        "expected a count",
    );
    check_fails(&env, "q.yaml", "mode: sideways\n", "q.yaml:1:7", "sideways");
}

#[test]
fn duplicate_key_is_rejected() {
    let env = Env::new();
    check_fails(
        &env,
        "p.yaml",
        "mode: read-only\nnetwork: off\nmode: danger-full-access\n",
        "p.yaml:3:1",
        "duplicate",
    );
}

#[test]
fn alias_bomb_fails_fast() {
    let env = Env::new();
    // Ten levels of ten-fold aliases: 10^10 strings if expanded.
    let mut bomb =
        String::from("mode: read-only\nmasked_paths:\n  - &l0 [a, a, a, a, a, a, a, a, a, a]\n");
    for level in 1..10 {
        let refs = vec![format!("*l{}", level - 1); 10].join(", ");
        bomb.push_str(&format!("  - &l{level} [{refs}]\n"));
    }
    check_fails(&env, "bomb.yaml", bomb, "bomb.yaml:", "");
}

#[test]
fn alias_flood_hits_the_parser_budget() {
    let env = Env::new();
    let refs = vec!["*d"; 5000].join(", ");
    let yaml = format!("mode: read-only\ndescription: &d /x\nreadable_roots: [{refs}]\n");
    check_fails(&env, "flood.yaml", yaml, "flood.yaml:3:", "budget");
}

#[test]
fn oversized_profile_is_refused_by_the_size_cap() {
    let env = Env::new();
    let mut big = String::from("mode: read-only\ndescription: \"");
    big.push_str(&"a".repeat(50 * 1024 * 1024));
    big.push_str("\"\n");
    check_fails(&env, "big.yaml", big, "big.yaml", "larger than");
}

#[test]
fn non_utf8_profile_is_rejected_with_position() {
    let env = Env::new();
    check_fails(
        &env,
        "p.yaml",
        b"mode: read-only\ndescription: caf\xe9\n",
        "p.yaml:2:17",
        "UTF-8",
    );
}

#[test]
fn extends_cycle_is_rejected() {
    let env = Env::new();
    env.write("b.yaml", "extends: ./a.yaml\nnetwork: off\n");
    let r = check_fails(
        &env,
        "a.yaml",
        "extends: ./b.yaml\n",
        "b.yaml:1:10",
        "cycle",
    );
    assert!(
        r.stderr.contains("a.yaml -> ") && r.stderr.contains("b.yaml"),
        "{}",
        r.stderr
    );
    check_fails(
        &env,
        "self.yaml",
        "extends: ./self.yaml\n",
        "self.yaml:1:10",
        "cycle",
    );
}

#[test]
fn extends_to_a_missing_file_names_both_files() {
    let env = Env::new();
    let r = check_fails(
        &env,
        "p.yaml",
        "mode: read-only\nextends: ./nowhere.yaml\n",
        "p.yaml:2:10",
        "nowhere.yaml",
    );
    assert!(r.stderr.contains("No such file"), "{}", r.stderr);
}

#[test]
fn rule_example_that_does_not_match_is_rejected() {
    let env = Env::new();
    let yaml = "mode: read-only\nrules:\n  commands:\n    - id: no-push\n      prefix: [git, push]\n      decision: deny\n      examples: [\"git pull\"]\n";
    check_fails(
        &env,
        "p.yaml",
        yaml,
        "p.yaml:7:18",
        "example `git pull` does not match",
    );
}

#[test]
fn rule_counter_example_that_matches_is_rejected() {
    let env = Env::new();
    let yaml = "mode: read-only\nrules:\n  commands:\n    - id: no-push\n      prefix: [git, push]\n      decision: deny\n      counter_examples:\n        - git push --force\n";
    check_fails(
        &env,
        "p.yaml",
        yaml,
        "p.yaml:8:11",
        "counter-example `git push --force` matches",
    );
}

#[test]
fn empty_profile_is_rejected() {
    let env = Env::new();
    check_fails(&env, "p.yaml", "", "p.yaml:1:1", "empty");
    check_fails(&env, "q.yaml", "# only a comment\n", "q.yaml", "no `mode`");
}

#[test]
fn profile_without_mode_or_extends_is_rejected() {
    let env = Env::new();
    check_fails(&env, "p.yaml", "network: off\n", "p.yaml", "no `mode`");
}

#[test]
fn missing_profile_file_is_a_clear_error() {
    let env = Env::new();
    let r = run(env
        .bridle()
        .args(["policy", "check", "/no/such/profile.yaml"]));
    r.assert_code(1);
    assert!(r.stderr.contains("/no/such/profile.yaml"), "{}", r.stderr);
}
