//! Evaluating command rules on what a command line or script runs: every view of every
//! simple command, nested scripts included, strictest decision wins.

use crate::plan::{DecidedBy, Verdict, rule_verdict};
use crate::shell::{self, Hidden, Script, Stdin, Word};
use crate::vocab::Decision;

use super::views::Explorer;
use super::{CommandRule, basename};

/// How deep scripts inside scripts (`sh -c`, `eval`, a `!` alias) are followed.
pub const MAX_NESTING: usize = 4;

/// What the rules found.
#[derive(Debug, Default)]
pub(crate) struct Findings<'r> {
    /// The strictest rule some view matched, and the command it matched.
    pub matched: Option<(&'r CommandRule, String)>,
    /// The strictest `ask`/`deny` rule a hidden part could match, what hid it, and the
    /// command it is part of.
    pub hidden: Option<(&'r CommandRule, String, String)>,
}

/// How a rule's prefix fits a view.
enum Fit<'w> {
    No,
    Yes,
    /// It would match or not depending on a hidden word.
    Maybe(&'w Hidden),
}

fn fit<'w>(rule: &CommandRule, view: &'w [Word]) -> Fit<'w> {
    for (i, alternatives) in rule.prefix.iter().enumerate() {
        let known = match view.get(i) {
            None => return Fit::No,
            Some(Word::Literal(w)) if i == 0 => basename(w),
            Some(Word::Literal(w)) => w.as_str(),
            // `"$HOME"/bin/git`: the command name is known.
            Some(Word::Hidden(Hidden {
                basename: Some(b), ..
            })) if i == 0 => b.as_str(),
            // `commit-$x` cannot be `push`.
            Some(Word::Hidden(h))
                if i > 0 && !alternatives.iter().any(|a| a.starts_with(&h.prefix)) =>
            {
                return Fit::No;
            }
            Some(Word::Hidden(h)) => return Fit::Maybe(h),
        };
        if !alternatives.iter().any(|a| a == known) {
            return Fit::No;
        }
    }
    Fit::Yes
}

impl<'r> Findings<'r> {
    pub(super) fn see(&mut self, rules: &'r [CommandRule], view: &[Word], subject: &str) {
        for rule in rules {
            match fit(rule, view) {
                Fit::No => {}
                Fit::Yes => {
                    if self
                        .matched
                        .as_ref()
                        .is_none_or(|(best, _)| rule.decision > best.decision)
                    {
                        self.matched = Some((rule, subject.to_owned()));
                    }
                }
                Fit::Maybe(hidden) => {
                    if rule.decision >= Decision::Ask
                        && self
                            .hidden
                            .as_ref()
                            .is_none_or(|(best, _, _)| rule.decision > best.decision)
                    {
                        self.hidden = Some((rule, hidden.what.clone(), subject.to_owned()));
                    }
                }
            }
        }
    }

    /// The strictest decision found: a literal match, or `ask` for a hidden part.
    #[cfg(test)]
    pub fn decision(&self) -> Decision {
        let literal = self
            .matched
            .as_ref()
            .map_or(Decision::Allow, |(r, _)| r.decision);
        if self.hidden.is_some() {
            literal.max(Decision::Ask)
        } else {
            literal
        }
    }
}

/// Checks one simple command (`words`, reading `stdin`) and what it runs.
pub(crate) fn check_command<'r>(
    rules: &'r [CommandRule],
    words: &[Word],
    stdin: Option<&Stdin>,
    subject: &str,
    depth: usize,
    findings: &mut Findings<'r>,
) {
    check_explored(
        rules,
        &Explorer::of(words.to_vec(), stdin),
        subject,
        depth,
        findings,
    );
}

/// Checks the views of one simple command, and the scripts it runs.
pub(super) fn check_explored<'r>(
    rules: &'r [CommandRule],
    explorer: &Explorer,
    subject: &str,
    depth: usize,
    findings: &mut Findings<'r>,
) {
    for view in &explorer.views {
        findings.see(rules, view, subject);
    }
    for script in &explorer.scripts {
        if depth >= MAX_NESTING {
            let view = [Word::hidden(
                format!(
                    "the script `{}`: scripts nest deeper than {MAX_NESTING}",
                    shell::short(script)
                ),
                true,
            )];
            findings.see(rules, &view, subject);
        } else {
            check_script(rules, &shell::parse(script), script, depth + 1, findings);
        }
    }
}

/// Checks every command of a parsed script, and what it hides.
pub(crate) fn check_script<'r>(
    rules: &'r [CommandRule],
    script: &Script,
    text: &str,
    depth: usize,
    findings: &mut Findings<'r>,
) {
    for hidden in &script.hidden {
        findings.see(rules, &[Word::Hidden(hidden.clone())], text);
    }
    for command in &script.commands {
        check_command(
            rules,
            &command.words,
            command.stdin.as_ref(),
            &command.text,
            depth,
            findings,
        );
    }
}

/// The verdict for what `findings` found; `allowed` is the reason when nothing matched.
pub(crate) fn command_verdict(findings: &Findings<'_>, allowed: String) -> Verdict {
    let literal = findings.matched.as_ref();
    let rule_says = |(rule, subject): &(&CommandRule, String)| {
        rule_verdict(
            &rule.id,
            &rule.origin,
            rule.decision,
            rule.justification.as_deref(),
            &format!("`{}`", shell::short(subject)),
        )
    };
    match (literal, &findings.hidden) {
        (Some(m), _) if m.0.decision >= Decision::Ask => rule_says(m),
        (_, Some((rule, what, subject))) => Verdict {
            decision: Decision::Ask,
            reason: format!(
                "`{}` needs approval: the rules cannot see {what}, and rule `{}` ({}) could match what runs",
                shell::short(subject),
                rule.id,
                rule.origin
            ),
            by: DecidedBy::Hidden {
                what: what.clone(),
                rule: rule.id.clone(),
            },
        },
        (Some(m), None) => rule_says(m),
        (None, None) => Verdict {
            decision: Decision::Allow,
            by: DecidedBy::Default,
            reason: allowed,
        },
    }
}
