//! Compiling the rule entries of a layer (`rules.commands`, `rules.paths`) into the rule
//! engine's rules, their ids checked.

use serde_saphyr::Spanned;

use super::Applier;
use crate::error::PolicyError;
use crate::glob::Glob;
use crate::raw::{RawCommandRule, RawPathRule, RawToken};
use crate::rules::{CommandRule, PathRule, split_words};

pub(super) fn check_rule_id(
    applier: &Applier<'_>,
    id: &Spanned<String>,
    key: &str,
) -> Result<(), PolicyError> {
    let ok = !id.value.is_empty()
        && id
            .value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if ok {
        Ok(())
    } else {
        Err(applier.invalid(
            &id.referenced,
            &format!("{key}.id"),
            format!(
                "`{}` is not a rule id (use letters, digits, `-`, `_`, `.`)",
                id.value
            ),
        ))
    }
}

pub(super) fn compile_command_rule(
    a: &Applier<'_>,
    raw: RawCommandRule,
    key: &str,
) -> Result<CommandRule, PolicyError> {
    check_rule_id(a, &raw.id, key)?;
    let key = format!("{key}[{}]", raw.id.value);
    if raw.prefix.value.is_empty() {
        return Err(a.invalid(
            &raw.prefix.referenced,
            &format!("{key}.prefix"),
            "a prefix needs at least one token",
        ));
    }
    let mut prefix = Vec::new();
    for token in raw.prefix.value {
        let alternatives = match token {
            RawToken::One(word) => vec![word],
            RawToken::AnyOf(words) => words,
        };
        if alternatives.is_empty() || alternatives.iter().any(|w| w.is_empty()) {
            return Err(a.invalid(
                &raw.prefix.referenced,
                &format!("{key}.prefix"),
                "every token needs at least one non-empty alternative",
            ));
        }
        prefix.push(alternatives);
    }
    let rule = CommandRule {
        id: raw.id.value,
        prefix,
        decision: raw.decision.value,
        justification: raw.justification,
        origin: a.at(&raw.id.referenced),
    };
    check_examples(
        a,
        &rule.id,
        &raw.examples,
        &raw.counter_examples,
        |example| {
            let argv =
                split_words(&example.value).map_err(|m| a.invalid(&example.referenced, &key, m))?;
            Ok(rule.matches(&argv))
        },
    )?;
    Ok(rule)
}

pub(super) fn compile_path_rule(
    a: &Applier<'_>,
    raw: RawPathRule,
    key: &str,
) -> Result<PathRule, PolicyError> {
    check_rule_id(a, &raw.id, key)?;
    let key = format!("{key}[{}]", raw.id.value);
    let text = raw.pattern.value.trim();
    if text.starts_with('~') {
        return Err(a.invalid(
            &raw.pattern.referenced,
            &format!("{key}.pattern"),
            "`~` is not expanded in path rules; use `**/` or an absolute path",
        ));
    }
    let pattern = Glob::new(text)
        .map_err(|m| a.invalid(&raw.pattern.referenced, &format!("{key}.pattern"), m))?;
    let rule = PathRule {
        id: raw.id.value,
        pattern,
        decision: raw.decision.value,
        justification: raw.justification,
        origin: a.at(&raw.id.referenced),
    };
    check_examples(
        a,
        &rule.id,
        &raw.examples,
        &raw.counter_examples,
        |example| {
            let path = example.value.as_str();
            Ok(if path.starts_with('/') {
                rule.matches(path, None)
            } else {
                rule.matches(&format!("/WORKSPACE/{path}"), Some(path))
            })
        },
    )?;
    Ok(rule)
}

/// Checks rule `id` against its `examples` (each must match) and `counter_examples` (none
/// may); `matches` says whether one does.
fn check_examples(
    a: &Applier<'_>,
    id: &str,
    examples: &[Spanned<String>],
    counter_examples: &[Spanned<String>],
    mut matches: impl FnMut(&Spanned<String>) -> Result<bool, PolicyError>,
) -> Result<(), PolicyError> {
    for (examples, want, which) in [
        (examples, true, "example"),
        (counter_examples, false, "counter-example"),
    ] {
        for example in examples {
            if matches(example)? != want {
                return Err(PolicyError::RuleExample {
                    at: a.at(&example.referenced),
                    rule: id.to_owned(),
                    which,
                    example: example.value.clone(),
                    outcome: if want {
                        "does not match the rule"
                    } else {
                        "matches the rule"
                    },
                });
            }
        }
    }
    Ok(())
}
