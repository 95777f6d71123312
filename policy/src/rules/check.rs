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
    /// The strictest rule some view matched, and where.
    pub matched: Option<Match<'r>>,
    /// A hidden part an `ask`/`deny` rule could match: the one with the strictest such rule.
    pub hidden: Option<HiddenFinding<'r>>,
}

/// A rule some view of a command matched.
#[derive(Debug)]
pub(crate) struct Match<'r> {
    pub rule: &'r CommandRule,
    /// The command it is part of.
    pub subject: String,
    /// The view it matched, where that is not the command as written (a wrapper's command,
    /// an alias expanded, another name of the program).
    pub seen_as: Option<String>,
}

/// A view as one line: its words, quoted where a shell would need it; a hidden word as what
/// it starts with and `...`.
fn shown(view: &[Word]) -> String {
    let words: Vec<String> = view
        .iter()
        .map(|w| match w {
            Word::Literal(s)
                if !s.is_empty()
                    && s.chars()
                        .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%^".contains(c)) =>
            {
                s.clone()
            }
            Word::Literal(s) => super::aliases::quote(s),
            Word::Hidden(h) => format!("{}...", h.prefix),
        })
        .collect();
    shell::short(&words.join(" "))
}

/// A part of a command the rules cannot see, and every `ask`/`deny` rule it could match.
#[derive(Debug)]
pub(crate) struct HiddenFinding<'r> {
    /// The rules, strictest first, then in the profile's order: a hidden program name could
    /// be any of them, so naming only one would point at the wrong rule.
    pub rules: Vec<&'r CommandRule>,
    /// What hid it: "the variable `$x`".
    pub what: String,
    /// The command it is part of.
    pub subject: String,
}

impl HiddenFinding<'_> {
    fn strictest(&self) -> Decision {
        self.rules.first().map_or(Decision::Allow, |r| r.decision)
    }
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
    /// Matches `view` of a command as `written` (the same words for a view that is the
    /// command itself) against the rules.
    pub(super) fn see(
        &mut self,
        rules: &'r [CommandRule],
        view: &[Word],
        written: &[Word],
        subject: &str,
    ) {
        for rule in rules {
            match fit(rule, view) {
                Fit::No => {}
                Fit::Yes => {
                    if self
                        .matched
                        .as_ref()
                        .is_none_or(|best| rule.decision > best.rule.decision)
                    {
                        self.matched = Some(Match {
                            rule,
                            subject: subject.to_owned(),
                            seen_as: (view != written).then(|| shown(view)),
                        });
                    }
                }
                Fit::Maybe(hidden) if rule.decision >= Decision::Ask => {
                    self.could_match(rule, &hidden.what, subject);
                }
                Fit::Maybe(_) => {}
            }
        }
    }

    /// Notes that `rule` could match the part `what` hides in `subject`. The first hidden part
    /// found is kept, unless a later one could match a stricter rule; the rules a kept part
    /// could match are all listed.
    fn could_match(&mut self, rule: &'r CommandRule, what: &str, subject: &str) {
        match &mut self.hidden {
            Some(found) if found.what == what && found.subject == subject => {
                if !found.rules.iter().any(|r| r.id == rule.id) {
                    // After the last rule at least as strict: strictest first, profile order
                    // within a decision.
                    let at = found
                        .rules
                        .iter()
                        .position(|r| r.decision < rule.decision)
                        .unwrap_or(found.rules.len());
                    found.rules.insert(at, rule);
                }
            }
            Some(found) if rule.decision <= found.strictest() => {}
            _ => {
                self.hidden = Some(HiddenFinding {
                    rules: vec![rule],
                    what: what.to_owned(),
                    subject: subject.to_owned(),
                });
            }
        }
    }

    /// The strictest decision found: a literal match, or `ask` for a hidden part.
    #[cfg(test)]
    pub fn decision(&self) -> Decision {
        let literal = self
            .matched
            .as_ref()
            .map_or(Decision::Allow, |m| m.rule.decision);
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
        words,
        subject,
        depth,
        findings,
    );
}

/// Checks the views of one simple command (`written`, or a start the explorer was given in
/// its stead), and the scripts it runs.
pub(super) fn check_explored<'r>(
    rules: &'r [CommandRule],
    explorer: &Explorer,
    written: &[Word],
    subject: &str,
    depth: usize,
    findings: &mut Findings<'r>,
) {
    for view in &explorer.views {
        findings.see(rules, view, written, subject);
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
            findings.see(rules, &view, &view, subject);
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
        let view = [Word::Hidden(hidden.clone())];
        findings.see(rules, &view, &view, text);
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

/// Where the hidden parts of a command go when the rules cannot see them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HiddenParts {
    /// They ask when an `ask` or `deny` rule could match them.
    Ask,
    /// An exec supervisor decides every program the command runs, so a hidden part that only
    /// rules on programs could match is allowed here: what it runs is decided at its exec.
    AtExec,
}

/// bash's builtins and keywords: what they do happens without an exec, so a rule naming one
/// is only ever decided on command-line text.
pub(super) const SHELL_BUILTINS: &[&str] = &[
    ".",
    ":",
    "[",
    "[[",
    "]]",
    "{",
    "}",
    "!",
    "alias",
    "bg",
    "bind",
    "break",
    "builtin",
    "caller",
    "case",
    "cd",
    "command",
    "compgen",
    "complete",
    "compopt",
    "continue",
    "coproc",
    "declare",
    "dirs",
    "disown",
    "do",
    "done",
    "echo",
    "elif",
    "else",
    "enable",
    "esac",
    "eval",
    "exec",
    "exit",
    "export",
    "false",
    "fc",
    "fg",
    "fi",
    "for",
    "function",
    "getopts",
    "hash",
    "help",
    "history",
    "if",
    "in",
    "jobs",
    "kill",
    "let",
    "local",
    "logout",
    "mapfile",
    "popd",
    "printf",
    "pushd",
    "pwd",
    "read",
    "readarray",
    "readonly",
    "return",
    "select",
    "set",
    "shift",
    "shopt",
    "source",
    "suspend",
    "test",
    "then",
    "time",
    "times",
    "trap",
    "true",
    "type",
    "typeset",
    "ulimit",
    "umask",
    "unalias",
    "unset",
    "until",
    "wait",
    "while",
];

/// Whether every command `rule` can match starts with a program (never a shell builtin or
/// keyword, and not every command), so that an exec supervisor sees each one it matches.
fn names_programs_only(rule: &CommandRule) -> bool {
    !rule.prefix.is_empty() && rule.shell_builtins().is_empty()
}

/// The verdict for what `findings` found; `allowed` is the reason when nothing matched.
pub(crate) fn command_verdict(
    findings: &Findings<'_>,
    allowed: String,
    hidden_parts: HiddenParts,
) -> Verdict {
    let literal = findings.matched.as_ref();
    let rule_says = |m: &Match<'_>| {
        rule_verdict(
            &m.rule.id,
            &m.rule.origin,
            m.rule.decision,
            m.rule.justification.as_deref(),
            &format!("`{}`", shell::short(&m.subject)),
            m.seen_as.as_deref(),
        )
    };
    match (literal, &findings.hidden) {
        (Some(m), _) if m.rule.decision >= Decision::Ask => rule_says(m),
        (_, Some(hidden))
            if hidden_parts == HiddenParts::AtExec
                && hidden.rules.iter().all(|r| names_programs_only(r)) =>
        {
            Verdict {
                decision: Decision::Allow,
                reason: format!(
                    "`{}` allowed: the rules cannot see {}, so each program it runs is decided \
                     at its exec by {}",
                    shell::short(&hidden.subject),
                    hidden.what,
                    rules_named_all(&hidden.rules)
                ),
                by: DecidedBy::AtExec {
                    what: hidden.what.clone(),
                    rules: hidden.rules.iter().map(|r| r.id.clone()).collect(),
                },
            }
        }
        (_, Some(hidden)) => Verdict {
            decision: Decision::Ask,
            reason: format!(
                "`{}` needs approval: the rules cannot see {}, and {} could match what runs",
                shell::short(&hidden.subject),
                hidden.what,
                rules_named(&hidden.rules)
            ),
            by: DecidedBy::Hidden {
                what: hidden.what.clone(),
                rule: hidden
                    .rules
                    .first()
                    .map(|r| r.id.clone())
                    .unwrap_or_default(),
                rules: hidden.rules.iter().map(|r| r.id.clone()).collect(),
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

/// "rule `a` (origin)", or "the rules `a` (origin), `b` (origin) and `c` (origin)".
fn rules_named_all(rules: &[&CommandRule]) -> String {
    match rules_named(rules).strip_prefix("any of ") {
        Some(all) => all.to_owned(),
        None => rules_named(rules),
    }
}

/// "rule `a` (origin)", or "any of the rules `a` (origin), `b` (origin) and `c` (origin)".
fn rules_named(rules: &[&CommandRule]) -> String {
    let named: Vec<String> = rules
        .iter()
        .map(|r| format!("`{}` ({})", r.id, r.origin))
        .collect();
    match named.as_slice() {
        [] => "a rule".to_owned(),
        [one] => format!("rule {one}"),
        [rest @ .., last] => format!("any of the rules {} and {last}", rest.join(", ")),
    }
}
