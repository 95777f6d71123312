//! Malformed, hostile or inconsistent profiles are refused quickly, with the right error variant
//! and a message that names the file and, where one exists, the `line:column`.

#![cfg(test)]

mod support;

use std::io::Write;
use std::time::Duration;

use bridle_policy::source::MAX_PROFILE_BYTES;
use bridle_policy::{
    FsProfileSource, LoadRequest, Origin, Overrides, PolicyError, ShippedOnly, SourceFile, load,
};
use pretty_assertions::assert_eq;

use support::{MemSource, load_text, request, within};

/// A hang detector, not a benchmark: a broken budget takes minutes or runs out of memory,
/// while a working one answers in milliseconds (a debug build on a loaded 2-core machine has
/// taken more than 3 s for the nested alias bomb while four builds shared it).
const FAST: Duration = Duration::from_secs(20);

/// Loads `p.yaml` with `text`, expecting an error, within [`FAST`].
fn load_err(text: impl Into<Vec<u8>>) -> PolicyError {
    let text = text.into();
    within(FAST, || load_text(text)).expect_err("profile should be rejected")
}

/// Asserts the message names `file:line:column`.
fn assert_located(err: &PolicyError, file: &str, line: u64, column: u64) {
    let msg = err.to_string();
    let want = format!("{file}:{line}:{column}: ");
    assert!(
        msg.starts_with(&want),
        "`{msg}` does not start with `{want}`"
    );
}

fn parse_error(err: &PolicyError) -> (&Origin, &str, Option<&str>) {
    match err {
        PolicyError::ParseProfile { at, message, hint } => (at, message, hint.as_deref()),
        other => panic!("expected ParseProfile, got {other:?}"),
    }
}

fn write_file(dir: &std::path::Path, name: &str, text: &str) -> std::path::PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

fn load_path(path: &std::path::Path) -> Result<bridle_policy::Policy, PolicyError> {
    load(
        &FsProfileSource,
        &LoadRequest {
            profile: path.display().to_string(),
            overrides: Overrides::default(),
            workspace_layer: None,
        },
    )
}

// --- unknown keys, types, duplicates ---------------------------------------------------------

#[test]
fn unknown_key_is_rejected_with_location_and_did_you_mean() {
    let err = load_err("mode: read-only\nnetwrok: off\n");
    let (at, message, hint) = parse_error(&err);
    assert_eq!(at, &Origin::file("p.yaml", 2, 1));
    assert!(message.starts_with("unknown field `netwrok`"), "{message}");
    assert_eq!(hint, Some("did you mean `network`?"));
    assert_located(&err, "p.yaml", 2, 1);
    assert!(
        err.to_string().contains("(hint: did you mean `network`?)"),
        "{err}"
    );
}

#[test]
fn unknown_nested_key_is_rejected_with_its_own_location_and_hint() {
    let err = load_err(
        "mode: read-only\nrules:\n  commands:\n    - id: x\n      prefix: [x]\n      decison: deny\n",
    );
    let (_, message, hint) = parse_error(&err);
    assert!(message.contains("`decison`"), "{message}");
    assert_eq!(hint, Some("did you mean `decision`?"));
    assert_located(&err, "p.yaml", 6, 7);

    let err = load_err("mode: read-only\nlimits:\n  proceses: 5\n");
    assert_eq!(parse_error(&err).2, Some("did you mean `processes`?"));
    assert_located(&err, "p.yaml", 3, 3);
}

#[test]
fn unknown_key_far_from_any_known_key_gets_a_removal_hint() {
    let err = load_err("mode: read-only\nfavourite_colour: blue\n");
    let (_, _, hint) = parse_error(&err);
    assert!(hint.is_some_and(|h| h.starts_with("remove it")), "{hint:?}");
    assert_located(&err, "p.yaml", 2, 1);
}

#[test]
fn unknown_list_operation_is_rejected() {
    let err = load_err("mode: read-only\nmasked_paths: {prepend: [~/.x]}\n");
    let (_, message, _) = parse_error(&err);
    assert!(
        message.contains("unknown list operation `prepend`"),
        "{message}"
    );
    assert!(err.to_string().starts_with("p.yaml:2:"), "{err}");
}

#[test]
fn misspelled_enum_value_lists_the_allowed_values() {
    let err = load_err("mode: write-all\n");
    let (_, message, hint) = parse_error(&err);
    assert!(message.contains("`write-all`"), "{message}");
    assert!(message.contains("workspace-write"), "{message}");
    assert!(hint.is_some(), "{err}");
    assert_located(&err, "p.yaml", 1, 7);
}

#[test]
fn wrong_type_is_rejected_with_location() {
    for (text, line, column, needle) in [
        ("mode: [read-only]\n", 1, 7, ""),
        (
            "mode: read-only\nlimits:\n  processes: many\n",
            3,
            14,
            "`many`",
        ),
        (
            "mode: read-only\nlimits:\n  memory: [1]\n",
            3,
            3,
            "sequence",
        ),
        (
            "mode: read-only\nlimits:\n  memory: 5MB\n",
            3,
            11,
            "unknown unit `MB`",
        ),
        (
            "mode: read-only\nlimits:\n  memory: -5\n",
            3,
            11,
            "negative",
        ),
        (
            "mode: read-only\nmasked_paths: \"~/.ssh\"\n",
            2,
            1,
            "a list",
        ),
        ("mode: read-only\ntested_kernel_abi: seven\n", 2, 20, ""),
        ("mode: read-only\nlimits: 5\n", 2, 9, ""),
        (
            "mode: read-only\naccept_missing: [G-NOPE]\n",
            2,
            18,
            "G-NOPE",
        ),
        ("[]\n", 1, 1, ""),
    ] {
        let err = load_err(text);
        let (_, message, _) = parse_error(&err);
        assert!(message.contains(needle), "{text:?}: {message}");
        assert_located(&err, "p.yaml", line, column);
    }
}

#[test]
fn a_word_key_given_a_list_or_mapping_names_the_key_and_the_accepted_words() {
    for (text, line, column, want) in [
        (
            "mode: [\n",
            1,
            7,
            "mode: expected one of read-only, workspace-write, danger-full-access",
        ),
        (
            "mode: read-only\napproval: {x: 1}\n",
            2,
            11,
            "approval: expected one of never, ask",
        ),
        (
            "mode: read-only\nunix_sockets: [block]\n",
            2,
            15,
            "unix_sockets: expected one of block, allow",
        ),
        (
            "mode: read-only\nnetwork: {mode: [on]}\n",
            2,
            17,
            "mode: expected one of off, allow-list, on",
        ),
        (
            "mode: read-only\nnetwork: [on]\n",
            2,
            10,
            "network: expected one of off, allow-list, on",
        ),
        (
            "mode: read-only\ncache_home: {mode: 3}\n",
            2,
            20,
            "mode: expected one of off, per-workspace",
        ),
        (
            "mode: read-only\nenvironment: {inherit: [all]}\n",
            2,
            24,
            "inherit: expected one of allow-list, all",
        ),
        (
            "mode: read-only\nagent: {preset: {a: b}}\n",
            2,
            17,
            "preset: expected one of minimal, standard",
        ),
        (
            "mode: read-only\naccept_missing: [[G-NET]]\n",
            2,
            18,
            "expected one of G-FS-WRITE",
        ),
        (
            "mode: read-only\nrules:\n  commands:\n    - id: x\n      prefix: [x]\n      decision: [deny]\n",
            6,
            17,
            "decision: expected one of allow, ask, deny",
        ),
    ] {
        let err = load_err(text);
        let (_, message, _) = parse_error(&err);
        assert!(
            message.starts_with(want) || message.contains(want),
            "{text:?}: {message}"
        );
        for jargon in ["externally tagged", "invalid type", "enum", "scalar"] {
            assert!(!message.contains(jargon), "{text:?}: {message}");
        }
        assert_located(&err, "p.yaml", line, column);
    }
}

#[test]
fn bare_tilde_is_yaml_null_and_gets_a_quoting_hint() {
    let err = load_err("mode: read-only\nmasked_paths: [~/.ssh, ~]\n");
    let (_, _, hint) = parse_error(&err);
    assert!(hint.is_some_and(|h| h.contains("quote it")), "{err}");
    assert_located(&err, "p.yaml", 2, 24);
    assert!(load_text("mode: read-only\nmasked_paths: [\"~\"]\n").is_ok());
}

#[test]
fn duplicate_key_is_rejected_at_the_second_occurrence() {
    let err = load_err("mode: read-only\nnetwork: off\nmode: workspace-write\n");
    let (at, message, hint) = parse_error(&err);
    assert_eq!(at, &Origin::file("p.yaml", 3, 1));
    assert_eq!(message, "duplicate mapping key: mode");
    assert!(
        hint.is_some_and(|h| h.contains("once per mapping")),
        "{hint:?}"
    );

    let err = load_err("mode: read-only\nenvironment:\n  set:\n    FOO: a\n    FOO: b\n");
    assert_located(&err, "p.yaml", 5, 5);
    assert!(
        err.to_string().contains("duplicate mapping key: FOO"),
        "{err}"
    );
}

#[test]
fn second_yaml_document_is_rejected() {
    let err = load_err("mode: read-only\n---\nmode: danger-full-access\n");
    let (_, _, hint) = parse_error(&err);
    assert!(
        hint.is_some_and(|h| h.contains("one YAML document")),
        "{err}"
    );
    assert_located(&err, "p.yaml", 2, 1);
}

// --- hostile input -----------------------------------------------------------------------------

/// The classic billion-laughs shape, `levels` deep and `width` wide, as flow lists inside one
/// node so that every anchor is defined before use.
fn laughs(levels: usize, width: usize) -> String {
    let mut out = format!("&l0 [{}]", vec!["lol"; width].join(", "));
    for i in 1..levels {
        let refs = vec![format!("*l{}", i - 1); width].join(", ");
        out.push_str(&format!(", &l{i} [{refs}]"));
    }
    out
}

#[test]
fn alias_bomb_in_masked_paths_fails_fast() {
    // 10^10 strings if expanded.
    for text in [
        format!("mode: read-only\nmasked_paths: [[{}]]\n", laughs(10, 10)),
        format!(
            "mode: read-only\nmasked_paths:\n  replace: [[{}]]\n",
            laughs(10, 10)
        ),
        // One anchor per list item, block style.
        format!(
            "mode: read-only\nmasked_paths:\n  - {}\n",
            laughs(10, 10).replace(", &", "\n  - &")
        ),
    ] {
        let err = load_err(text);
        assert!(matches!(err, PolicyError::ParseProfile { .. }), "{err:?}");
        assert!(err.to_string().starts_with("p.yaml:"), "{err}");
    }
}

#[test]
fn alias_bomb_where_nested_lists_are_accepted_hits_the_budget_fast() {
    // A command-rule prefix token may itself be a list, and serde buffers untagged values in
    // full before choosing a variant: the budget must stop the expansion.
    let text = format!(
        "mode: read-only\nrules:\n  commands:\n    - id: x\n      decision: deny\n      prefix: [[{}]]\n",
        laughs(10, 10)
    );
    let err = load_err(text);
    let (at, message, hint) = parse_error(&err);
    assert!(message.starts_with("budget breached"), "{message}");
    assert!(
        !message.ends_with("(used"),
        "half-trimmed location: {message}"
    );
    assert!(hint.is_some_and(|h| h.contains("aliased")), "{hint:?}");
    assert!(matches!(at, Origin::File { line: 6, .. }), "{at:?}");
}

#[test]
fn many_scalar_aliases_hit_the_alias_budget() {
    let text = format!(
        "mode: read-only\nmasked_paths:\n  - &s ~/.x\n{}",
        "  - *s\n".repeat(5_000)
    );
    let err = load_err(text);
    let (_, message, _) = parse_error(&err);
    assert!(message.contains("budget breached"), "{message}");
    assert!(message.contains("Aliases"), "{message}");
}

#[test]
fn deep_nesting_fails_fast_without_overflowing_the_stack() {
    for depth in [40, 1_000, 100_000] {
        let text = format!(
            "mode: read-only\nmasked_paths: {}{}\n",
            "[".repeat(depth),
            "]".repeat(depth)
        );
        let err = load_err(text);
        assert!(
            matches!(err, PolicyError::ParseProfile { .. }),
            "{depth}: {err:?}"
        );
        let text = format!(
            "mode: read-only\nlimits: {}{}\n",
            "{a: ".repeat(depth),
            "}".repeat(depth)
        );
        let err = load_err(text);
        assert!(
            matches!(err, PolicyError::ParseProfile { .. }),
            "{depth}: {err:?}"
        );
    }
}

#[test]
fn fifty_megabyte_profile_on_disk_is_refused_without_reading_it_all() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("huge.yaml");
    {
        let mut out = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
        out.write_all(b"mode: read-only\n").unwrap();
        let line = [b"# padding padding padding padding padding padding padding padding\n"; 1];
        let mut written = 16;
        while written < 50 * 1024 * 1024 {
            out.write_all(line[0]).unwrap();
            written += line[0].len();
        }
        out.flush().unwrap();
    }
    let err = within(FAST, || SourceFile::read(&path)).unwrap_err();
    let shown = path.display().to_string();
    match &err {
        PolicyError::ProfileTooLarge { file, limit } => {
            assert_eq!(file, &shown);
            assert_eq!(*limit, MAX_PROFILE_BYTES);
        }
        other => panic!("expected ProfileTooLarge, got {other:?}"),
    }
    assert!(err.to_string().starts_with(&format!("{shown}: ")), "{err}");

    let err = within(FAST, || load_path(&path)).unwrap_err();
    assert!(
        matches!(err, PolicyError::ProfileTooLarge { .. }),
        "{err:?}"
    );
}

#[test]
fn profile_at_the_size_cap_is_accepted_and_one_byte_more_is_not() {
    let head = "mode: read-only\n";
    let mut text = String::from(head);
    while text.len() < MAX_PROFILE_BYTES {
        let room = MAX_PROFILE_BYTES - text.len();
        if room == 1 {
            text.push('\n');
        } else {
            text.push_str(&format!("#{}\n", "x".repeat(room.min(80) - 2)));
        }
    }
    assert_eq!(text.len(), MAX_PROFILE_BYTES);
    let dir = tempfile::tempdir().unwrap();
    let at_cap = write_file(dir.path(), "cap.yaml", &text);
    assert!(SourceFile::read(&at_cap).is_ok());
    assert!(within(FAST, || load_path(&at_cap)).is_ok());

    text.push('\n');
    let over = write_file(dir.path(), "over.yaml", &text);
    let err = SourceFile::read(&over).unwrap_err();
    assert!(
        matches!(err, PolicyError::ProfileTooLarge { .. }),
        "{err:?}"
    );
    // In-memory text is capped too.
    let err = load_err(text.into_bytes());
    assert!(
        matches!(err, PolicyError::ProfileTooLarge { .. }),
        "{err:?}"
    );
}

#[test]
fn non_utf8_bytes_are_rejected_with_line_and_column() {
    let err = load_err(b"mode: read-only\nnetwork: o\xffff\n".to_vec());
    match &err {
        PolicyError::ProfileNotUtf8 { file, line, column } => {
            assert_eq!((file.as_str(), *line, *column), ("p.yaml", 2, 11));
        }
        other => panic!("expected ProfileNotUtf8, got {other:?}"),
    }
    assert_located(&err, "p.yaml", 2, 11);

    // Columns count characters, not bytes.
    let err = load_err(
        "description: h\u{e9}llo \u{2603} "
            .bytes()
            .chain([0xC3])
            .collect::<Vec<u8>>(),
    );
    assert!(
        matches!(
            err,
            PolicyError::ProfileNotUtf8 {
                line: 1,
                column: 22,
                ..
            }
        ),
        "{err:?}"
    );
}

#[test]
fn empty_profile_is_rejected() {
    for text in ["", "   \n\n\t\n"] {
        let err = load_err(text);
        let (at, message, hint) = parse_error(&err);
        assert_eq!(at, &Origin::file("p.yaml", 1, 1));
        assert_eq!(message, "profile is empty");
        assert!(hint.is_some_and(|h| h.contains("mode:")), "{hint:?}");
    }
    // A profile of comments only is a document without `mode`.
    let err = load_err("# nothing here\n");
    assert!(matches!(err, PolicyError::MissingMode { .. }), "{err:?}");
}

#[test]
fn base_profile_without_mode_is_rejected_naming_the_file() {
    let err = load_err("description: forgot the mode\nnetwork: off\n");
    match &err {
        PolicyError::MissingMode { file } => assert_eq!(file, "p.yaml"),
        other => panic!("expected MissingMode, got {other:?}"),
    }
    let msg = err.to_string();
    assert!(msg.starts_with("p.yaml: "), "{msg}");
    assert!(msg.contains("extends: workspace-write"), "{msg}");
}

// --- extends -------------------------------------------------------------------------------------

#[test]
fn extends_cycle_between_two_files_is_rejected() {
    let dir = tempfile::tempdir().unwrap();
    let a = write_file(dir.path(), "a.yaml", "extends: b.yaml\nmode: read-only\n");
    write_file(dir.path(), "b.yaml", "network: off\nextends: a.yaml\n");
    let err = within(FAST, || load_path(&a)).unwrap_err();
    let b_shown = dir.path().join("b.yaml").display().to_string();
    match &err {
        PolicyError::ExtendsCycle { at, chain } => {
            assert_eq!(at, &Origin::file(&b_shown, 2, 10));
            assert_eq!(
                chain
                    .split(" -> ")
                    .map(|s| s.rsplit('/').next().unwrap())
                    .collect::<Vec<_>>(),
                ["a.yaml", "b.yaml", "a.yaml"]
            );
        }
        other => panic!("expected ExtendsCycle, got {other:?}"),
    }
    assert_located(&err, &b_shown, 2, 10);
}

#[test]
fn extends_self_cycle_is_rejected() {
    let dir = tempfile::tempdir().unwrap();
    for (name, reference) in [("self.yaml", "self.yaml"), ("dot.yaml", "./dot.yaml")] {
        let path = write_file(
            dir.path(),
            name,
            &format!("mode: read-only\nextends: {reference}\n"),
        );
        let err = within(FAST, || load_path(&path)).unwrap_err();
        assert!(
            matches!(err, PolicyError::ExtendsCycle { .. }),
            "{reference}: {err:?}"
        );
        assert_located(&err, &path.display().to_string(), 2, 10);
    }
    // The same through a source that has no files at all.
    let source = MemSource::new().with("me.yaml", "mode: read-only\nextends: me.yaml\n");
    let err = load(&source, &request("me.yaml")).unwrap_err();
    match &err {
        PolicyError::ExtendsCycle { at, chain } => {
            assert_eq!(at, &Origin::file("me.yaml", 2, 10));
            assert_eq!(chain, "me.yaml -> me.yaml");
        }
        other => panic!("expected ExtendsCycle, got {other:?}"),
    }
}

#[test]
fn extends_cycle_through_a_parent_directory_reference_is_rejected_as_a_cycle() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    let path = write_file(
        &dir.path().join("sub"),
        "a.yaml",
        "mode: read-only\nextends: ../sub/a.yaml\n",
    );
    let err = within(FAST, || load_path(&path)).unwrap_err();
    assert!(matches!(err, PolicyError::ExtendsCycle { .. }), "{err:?}");
}

#[test]
fn extends_chain_longer_than_the_maximum_is_rejected() {
    let mut source = MemSource::new();
    for i in 0..40 {
        source = source.with(&format!("p{i}.yaml"), format!("extends: p{}.yaml\n", i + 1));
    }
    let err = within(FAST, || load(&source, &request("p0.yaml"))).unwrap_err();
    match &err {
        PolicyError::ExtendsTooDeep { limit, .. } => {
            assert_eq!(*limit, bridle_policy::MAX_EXTENDS_DEPTH);
        }
        other => panic!("expected ExtendsTooDeep, got {other:?}"),
    }
}

#[test]
fn extends_to_a_missing_file_names_the_extends_location_and_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let a = write_file(
        dir.path(),
        "a.yaml",
        "description: x\nextends: ./missing.yaml\n",
    );
    let err = load_path(&a).unwrap_err();
    let a_shown = a.display().to_string();
    match &err {
        PolicyError::InvalidValue { at, key, message } => {
            assert_eq!(at, &Origin::file(&a_shown, 2, 10));
            assert_eq!(key, "extends");
            assert!(message.contains("missing.yaml"), "{message}");
            assert!(message.contains("cannot read profile"), "{message}");
        }
        other => panic!("expected InvalidValue, got {other:?}"),
    }
    assert_located(&err, &a_shown, 2, 10);
}

#[test]
fn extends_to_an_unknown_shipped_name_lists_the_shipped_profiles() {
    let err = load_err("extends: workstaton\n");
    let msg = err.to_string();
    assert_located(&err, "p.yaml", 1, 10);
    assert!(msg.contains("unknown profile `workstaton`"), "{msg}");
    assert!(msg.contains("workstation"), "{msg}");
}

#[test]
fn unknown_profile_on_the_command_line_is_rejected() {
    let err = load(&ShippedOnly, &request("nope")).unwrap_err();
    assert!(
        matches!(&err, PolicyError::UnknownProfile { name, .. } if name == "nope"),
        "{err:?}"
    );
    let err = load_path(std::path::Path::new("/nonexistent/bridle/profile.yaml")).unwrap_err();
    assert!(matches!(err, PolicyError::ReadProfile { .. }), "{err:?}");
    assert!(
        err.to_string()
            .starts_with("/nonexistent/bridle/profile.yaml: "),
        "{err}"
    );
}

// --- rules -----------------------------------------------------------------------------------------

const RULE_HEAD: &str = "mode: workspace-write\nrules:\n  commands:\n    - id: no-push\n      prefix: [git, push]\n      decision: deny\n";

#[test]
fn command_rule_example_that_does_not_match_is_rejected() {
    let err = load_err(format!(
        "{RULE_HEAD}      examples: [\"git push\", \"git pull\"]\n"
    ));
    match &err {
        PolicyError::RuleExample {
            at,
            rule,
            which,
            example,
            outcome,
        } => {
            assert_eq!(at, &Origin::file("p.yaml", 7, 30));
            assert_eq!(
                (rule.as_str(), *which, example.as_str()),
                ("no-push", "example", "git pull")
            );
            assert_eq!(*outcome, "does not match the rule");
        }
        other => panic!("expected RuleExample, got {other:?}"),
    }
    assert_eq!(
        err.to_string(),
        "p.yaml:7:30: rule `no-push`: example `git pull` does not match the rule"
    );
}

#[test]
fn command_rule_counter_example_that_matches_is_rejected() {
    let err = load_err(format!(
        "{RULE_HEAD}      counter_examples:\n        - git status\n        - /usr/bin/git push --force\n"
    ));
    match &err {
        PolicyError::RuleExample {
            which,
            example,
            outcome,
            ..
        } => {
            assert_eq!(*which, "counter-example");
            assert_eq!(example, "/usr/bin/git push --force");
            assert_eq!(*outcome, "matches the rule");
        }
        other => panic!("expected RuleExample, got {other:?}"),
    }
    assert_located(&err, "p.yaml", 9, 11);
}

#[test]
fn command_rule_example_with_an_unclosed_quote_is_rejected() {
    let err = load_err(format!("{RULE_HEAD}      examples: [\"git push 'oops\"]\n"));
    assert!(matches!(err, PolicyError::InvalidValue { .. }), "{err:?}");
    assert!(err.to_string().contains("unclosed single quote"), "{err}");
    assert_located(&err, "p.yaml", 7, 18);
}

#[test]
fn path_rule_example_mismatch_is_rejected() {
    let head = "mode: workspace-write\nrules:\n  paths:\n    - id: lockfiles\n      pattern: \"**/Cargo.lock\"\n      decision: ask\n";
    let err = load_err(format!("{head}      examples: [Cargo.lock, Cargo.toml]\n"));
    assert!(
        matches!(&err, PolicyError::RuleExample { which: "example", example, .. } if example == "Cargo.toml"),
        "{err:?}"
    );
    assert_located(&err, "p.yaml", 7, 30);
    let err = load_err(format!(
        "{head}      counter_examples: [/srv/app/Cargo.lock]\n"
    ));
    assert!(
        matches!(
            &err,
            PolicyError::RuleExample {
                which: "counter-example",
                ..
            }
        ),
        "{err:?}"
    );
    assert_located(&err, "p.yaml", 7, 26);
}

#[test]
fn bad_glob_is_rejected_naming_the_rule_key() {
    let err = load_err(
        "mode: workspace-write\nrules:\n  paths:\n    - id: bad\n      pattern: \"src/[abc\"\n      decision: deny\n",
    );
    match &err {
        PolicyError::InvalidValue { at, key, message } => {
            assert_eq!(at, &Origin::file("p.yaml", 5, 16));
            assert_eq!(key, "rules.paths[bad].pattern");
            assert!(message.contains("unclosed `[`"), "{message}");
        }
        other => panic!("expected InvalidValue, got {other:?}"),
    }
    let err = load_err("mode: read-only\nenvironment:\n  scrub: ['SECRET\\']\n");
    assert!(
        matches!(&err, PolicyError::InvalidValue { key, .. } if key == "environment.scrub"),
        "{err:?}"
    );
    assert_located(&err, "p.yaml", 3, 11);
}

#[test]
fn tilde_in_a_path_rule_is_rejected() {
    let err = load_err(
        "mode: workspace-write\nrules:\n  paths:\n    - id: t\n      pattern: ~/.bashrc\n      decision: deny\n",
    );
    assert!(
        matches!(&err, PolicyError::InvalidValue { key, .. } if key == "rules.paths[t].pattern"),
        "{err:?}"
    );
}

#[test]
fn malformed_rule_ids_and_prefixes_are_rejected() {
    for (text, key) in [
        (
            "    - {id: 'has space', prefix: [x], decision: deny}\n",
            "rules.commands.id",
        ),
        (
            "    - {id: '', prefix: [x], decision: deny}\n",
            "rules.commands.id",
        ),
        (
            "    - {id: e, prefix: [], decision: deny}\n",
            "rules.commands[e].prefix",
        ),
        (
            "    - {id: e, prefix: [git, []], decision: deny}\n",
            "rules.commands[e].prefix",
        ),
        (
            "    - {id: e, prefix: [git, ''], decision: deny}\n",
            "rules.commands[e].prefix",
        ),
    ] {
        let err = load_err(format!("mode: read-only\nrules:\n  commands:\n{text}"));
        assert!(
            matches!(&err, PolicyError::InvalidValue { key: k, .. } if k == key),
            "{text}: {err:?}"
        );
        assert!(err.to_string().starts_with("p.yaml:4:"), "{err}");
    }
}

#[test]
fn duplicate_rule_id_is_rejected() {
    let err = load_err(
        "mode: read-only\nrules:\n  commands:\n    - {id: dup, prefix: [a], decision: deny}\n    - {id: dup, prefix: [b], decision: ask}\n",
    );
    match &err {
        PolicyError::InvalidValue { at, key, message } => {
            assert_eq!(at, &Origin::file("p.yaml", 5, 7));
            assert_eq!(key, "rules.commands");
            assert!(message.contains("`dup` is already defined"), "{message}");
        }
        other => panic!("expected InvalidValue, got {other:?}"),
    }
    // Redefining a rule of a lower layer needs an explicit remove.
    let err = load_err(
        "extends: workstation\nrules:\n  commands:\n    - {id: deny-sudo, prefix: [sudo], decision: deny}\n",
    );
    assert!(err.to_string().contains("remove it first"), "{err}");
    assert_located(&err, "p.yaml", 4, 7);
    assert!(
        load_text("extends: workstation\nrules:\n  commands:\n    remove: [deny-sudo]\n    append:\n      - {id: deny-sudo, prefix: [sudo], decision: deny}\n").is_ok()
    );
}

// --- list operations and limits --------------------------------------------------------------

#[test]
fn remove_of_a_missing_entry_is_rejected() {
    let err = load_err("extends: workstation\nmasked_paths: {remove: [~/.nope]}\n");
    match &err {
        PolicyError::InvalidValue { at, key, message } => {
            assert_eq!(at, &Origin::file("p.yaml", 2, 25));
            assert_eq!(key, "masked_paths");
            assert!(message.contains("`~/.nope`"), "{message}");
        }
        other => panic!("expected InvalidValue, got {other:?}"),
    }
    let err = load_err("extends: workstation\nrules:\n  commands: {remove: [no-such-rule]}\n");
    assert!(
        matches!(&err, PolicyError::InvalidValue { key, message, .. } if key == "rules.commands" && message.contains("no-such-rule")),
        "{err:?}"
    );
    assert_located(&err, "p.yaml", 3, 23);
}

#[test]
fn replace_combined_with_append_or_remove_is_rejected() {
    for op in [
        "{replace: [~/.a], append: [~/.b]}",
        "{append: [~/.b], replace: [~/.a]}",
        "{remove: [~/.b], replace: [~/.a]}",
    ] {
        let err = load_err(format!("mode: read-only\nmasked_paths: {op}\n"));
        let (_, message, _) = parse_error(&err);
        assert!(
            message.contains("`replace` cannot be combined"),
            "{op}: {message}"
        );
        assert_located(&err, "p.yaml", 2, 15);
    }
    let err = load_err("mode: read-only\nmasked_paths: {}\n");
    assert!(
        parse_error(&err).1.contains("empty list operation"),
        "{err}"
    );
    let err = load_err("mode: read-only\nmasked_paths: {append: [a], append: [b]}\n");
    assert!(matches!(err, PolicyError::ParseProfile { .. }), "{err:?}");
}

#[test]
fn bad_path_entries_are_rejected() {
    for (entry, needle) in [
        ("\"\"", "empty path"),
        ("~bob/.ssh", "no `~user`"),
        ("../outside", "contains `..`"),
        ("/srv/../etc", "contains `..`"),
    ] {
        let err = load_err(format!(
            "mode: workspace-write\nwritable_roots: [{entry}]\n"
        ));
        assert!(
            matches!(&err, PolicyError::InvalidValue { key, .. } if key == "writable_roots"),
            "{entry}: {err:?}"
        );
        assert!(err.to_string().contains(needle), "{err}");
        assert_located(&err, "p.yaml", 2, 18);
    }
}

#[test]
fn bad_environment_names_are_rejected() {
    let err = load_err("mode: read-only\nenvironment:\n  set:\n    \"A=B\": x\n");
    assert!(
        matches!(&err, PolicyError::InvalidValue { key, .. } if key == "environment.set"),
        "{err:?}"
    );
    let err = load_err("mode: read-only\nenvironment:\n  allow: [\"X=1\"]\n");
    assert!(
        matches!(&err, PolicyError::InvalidValue { key, .. } if key == "environment.allow"),
        "{err:?}"
    );
}

#[test]
fn command_timeout_above_its_maximum_is_rejected() {
    let err =
        load_err("mode: read-only\nlimits:\n  command_timeout: 20m\n  command_timeout_max: 10m\n");
    match &err {
        PolicyError::InvalidValue { at, key, message } => {
            assert_eq!(at, &Origin::file("p.yaml", 3, 20));
            assert_eq!(key, "limits.command_timeout");
            assert!(message.contains("1200s"), "{message}");
            assert!(message.contains("600s (p.yaml:4:24)"), "{message}");
        }
        other => panic!("expected InvalidValue, got {other:?}"),
    }
    // Across layers: the child's default against the base's maximum, each named.
    let source = MemSource::new()
        .with(
            "base.yaml",
            "mode: read-only\nlimits:\n  command_timeout_max: 60\n",
        )
        .with(
            "child.yaml",
            "extends: base.yaml\nlimits:\n  command_timeout: 90s\n",
        );
    let err = load(&source, &request("child.yaml")).unwrap_err();
    let msg = err.to_string();
    assert!(msg.starts_with("child.yaml:3:20: "), "{msg}");
    assert!(msg.contains("base.yaml:3:24"), "{msg}");
    // Against the built-in maximum of 600s.
    let err = load_err("mode: read-only\nlimits:\n  command_timeout: 601\n");
    assert!(err.to_string().contains("built-in default"), "{err}");
}

#[test]
fn relative_allow_write_flag_with_dotdot_is_rejected_naming_the_flag() {
    let err = load(
        &ShippedOnly,
        &LoadRequest {
            overrides: Overrides {
                allow_write: vec!["../elsewhere".into()],
                ..Overrides::default()
            },
            ..request("workspace-write")
        },
    )
    .unwrap_err();
    match &err {
        PolicyError::InvalidValue { at, key, .. } => {
            assert_eq!(at, &Origin::flag("--allow-write"));
            assert_eq!(key, "writable_roots");
        }
        other => panic!("expected InvalidValue, got {other:?}"),
    }
    assert!(
        err.to_string().starts_with("command line --allow-write: "),
        "{err}"
    );
}

#[test]
fn error_messages_are_lower_case_without_a_trailing_period() {
    let errors = [
        load_err("mode: read-only\nnetwrok: off\n"),
        load_err(""),
        load_err(b"\xff".to_vec()),
        load_err("description: x\n"),
        load_err("mode: read-only\nextends: p.yaml\n"),
        load_err(format!("{RULE_HEAD}      examples: [ls]\n")),
        load_err("mode: read-only\nlimits:\n  command_timeout: 601\n"),
    ];
    for err in errors {
        let msg = err.to_string();
        assert!(!msg.ends_with('.'), "{msg}");
        let text = msg.split_once(": ").map_or(msg.as_str(), |(_, rest)| rest);
        assert!(
            !text.starts_with(|c: char| c.is_uppercase()),
            "message should be lower-case: {msg}"
        );
    }
}
