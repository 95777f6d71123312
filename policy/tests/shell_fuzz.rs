//! Property tests for the shell parser and `decide_bash`: no input panics, overflows the stack
//! or allows by accident what does not parse (it asks, or, where the exec supervisor decides
//! every program the sandbox runs, is allowed as `at-exec`, saying so).

#![cfg(test)]

mod support;

use bridle_policy::{DecidedBy, Decision, shell};
use proptest::prelude::*;

use support::{shipped_plan, text_only_plan};

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: 512,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// Pieces of bash syntax, so generated text reaches deep into the grammar.
const PIECES: &[&str] = &[
    "git",
    " push",
    " ",
    ";",
    "&&",
    "||",
    "|",
    "&",
    "(",
    ")",
    "{",
    "}",
    "$(",
    "`",
    "'",
    "\"",
    "\\",
    "<<EOF\n",
    "\nEOF\n",
    "<<<",
    "<(",
    ">(",
    ">",
    "2>&1",
    "$x",
    "${x:-y}",
    "$((",
    "))",
    "if ",
    " then ",
    " fi",
    "for x in a;",
    " do ",
    " done",
    "case x in ",
    "a) ",
    ";;",
    " esac",
    "f() ",
    "eval ",
    "sh -c ",
    "env -S ",
    "xargs ",
    "find . -exec ",
    "\\;",
    "\n",
    "#",
    "*",
    "[[",
    "]]",
    "=",
    "$'\\x41'",
    "sudo ",
    "-c ",
    "alias.x=!",
    "trap ",
];

proptest! {
    #![proptest_config(config())]

    #[test]
    fn any_text_is_decided_without_panic(text in ".{0,400}") {
        let plan = shipped_plan("ci-locked");
        let _ = plan.decide_bash(&text);
        let _ = shell::parse(&text);
    }

    #[test]
    fn bash_like_text_is_decided_without_panic(parts in prop::collection::vec(0..PIECES.len(), 0..80)) {
        let text: String = parts.iter().map(|&i| PIECES[i]).collect();
        let verdict = text_only_plan("workstation").decide_bash(&text);
        let supervised = shipped_plan("workstation").decide_bash(&text);
        // What does not parse is never allowed by accident under a profile with rules.
        let parsed = shell::parse(&text);
        if !parsed.hidden.is_empty() {
            prop_assert!(verdict.decision >= Decision::Ask, "{text:?}: {verdict:?}");
            prop_assert!(
                supervised.decision >= Decision::Ask
                    || matches!(supervised.by, DecidedBy::AtExec { .. }),
                "{text:?}: {supervised:?}"
            );
        }
    }

    #[test]
    fn any_argv_is_decided_without_panic(argv in prop::collection::vec("[-a-z=+{};$ '\"]{0,12}", 0..12)) {
        let plan = shipped_plan("ci-locked");
        let _ = plan.decide_exec(&argv);
    }
}

#[test]
fn deep_nesting_does_not_overflow_the_stack() {
    let plan = text_only_plan("ci-locked");
    for (open, close) in [
        ("(", ")"),
        ("$(", ")"),
        ("{ ", "; }"),
        ("`", "`"),
        ("\"$(", ")\""),
    ] {
        let depth = 20_000;
        let text = format!("{}git push{}", open.repeat(depth), close.repeat(depth));
        let verdict = plan.decide_bash(&text);
        assert!(verdict.decision >= Decision::Ask, "{open}: {verdict:?}");
    }
    let mut nested = "git push".to_owned();
    for _ in 0..8 {
        nested = format!("sh -c '{}'", nested.replace('\'', r"'\''"));
    }
    assert!(plan.decide_bash(&nested).decision >= Decision::Ask);
}

#[test]
fn characters_past_latin1_do_not_crash_the_parser() {
    // tree-sitter-bash's scanner calls `isdigit` on the lookahead; `{` then a wide character
    // crashed it.
    let plan = shipped_plan("ci-locked");
    for text in [
        "echo {\u{1F600}",
        "{\u{10FFFF}..",
        "echo {\u{4E2D}\u{6587}}",
        "git push {\u{1F600}",
    ] {
        let _ = plan.decide_bash(text);
    }
    assert_eq!(
        plan.decide_bash("echo h\u{e9}llo {\u{1F600}}; git push")
            .decision,
        Decision::Deny
    );
    // Words keep their real characters.
    let parsed = shell::parse("echo caf\u{e9}");
    assert_eq!(
        parsed.commands[0].words[1],
        shell::Word::literal("caf\u{e9}")
    );
}

#[test]
fn oversized_input_is_hidden_not_allowed() {
    let text = "echo hi; ".repeat(shell::MAX_SCRIPT_BYTES / 9 + 1);
    let verdict = text_only_plan("workstation").decide_bash(&text);
    assert_eq!(verdict.decision, Decision::Ask);
    assert!(
        matches!(verdict.by, DecidedBy::Hidden { .. }),
        "{verdict:?}"
    );
    // With the exec supervisor, it runs and each exec is decided there, as the reason says.
    let verdict = shipped_plan("workstation").decide_bash(&text);
    assert!(
        matches!(verdict.by, DecidedBy::AtExec { .. }),
        "{verdict:?}"
    );
    assert!(
        verdict.reason.contains("decided at its exec"),
        "{}",
        verdict.reason
    );
}

#[test]
fn scripts_nested_past_the_limit_are_hidden() {
    let plan = text_only_plan("workstation");
    // Each level is literal and parses; past MAX_NESTING the inner script is not followed.
    let mut script = "echo hi".to_owned();
    for _ in 0..=bridle_policy::rules::MAX_NESTING {
        script = format!("eval '{}'", script.replace('\'', r"'\''"));
    }
    let verdict = plan.decide_bash(&script);
    assert_eq!(verdict.decision, Decision::Ask, "{verdict:?}");
    assert!(verdict.reason.contains("nest deeper"), "{}", verdict.reason);
}
