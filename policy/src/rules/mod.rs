//! Command-prefix and path rules: compiled form, matching and the strictest-wins evaluation.
//!
//! A command rule is checked against every view of a simple command: the command as written,
//! and what each wrapper, shell, builtin or global option in it leads to (the table in
//! `programs/table.rs` is the list). A rule whose prefix reaches a word the rules cannot see (a
//! variable, a command substitution, `eval` of one...) "could match": that is `ask` when the
//! rule is `ask` or `deny`. The strictest decision wins.

mod aliases;
mod approved;
mod check;
mod exec;
mod node;
mod programs;
mod scripts;
mod views;

use serde::{Deserialize, Serialize};

use crate::glob::Glob;
use crate::origin::Origin;
use crate::vocab::Decision;

/// A command-prefix rule: matches an argv whose first tokens match `prefix`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommandRule {
    /// Unique id, cited in decisions.
    pub id: String,
    /// Token alternatives, in order. `argv[0]` is compared by its basename.
    pub prefix: Vec<Vec<String>>,
    /// What a match decides.
    pub decision: Decision,
    /// Why, shown with the decision.
    pub justification: Option<String>,
    /// Where the rule was written.
    pub origin: Origin,
}

/// A path rule for writes: matches paths against a glob.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PathRule {
    /// Unique id, cited in decisions.
    pub id: String,
    /// The glob. Absolute patterns match absolute paths; a pattern starting with `**/` matches
    /// anywhere; any other relative pattern is anchored at the workspace root.
    #[serde(serialize_with = "serialize_glob")]
    pub pattern: Glob,
    /// What a match decides.
    pub decision: Decision,
    /// Why, shown with the decision.
    pub justification: Option<String>,
    /// Where the rule was written.
    pub origin: Origin,
}

fn serialize_glob<S: serde::Serializer>(glob: &Glob, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(glob.as_str())
}

impl CommandRule {
    /// The names the rule starts with that bash runs as builtins or keywords, without an exec:
    /// for those, the rule is decided on command-line text only (`policy check` says so).
    pub fn shell_builtins(&self) -> Vec<&str> {
        self.prefix
            .first()
            .into_iter()
            .flatten()
            .map(String::as_str)
            .filter(|n| check::SHELL_BUILTINS.contains(n))
            .collect()
    }

    /// Whether `argv` starts with this rule's prefix.
    pub fn matches(&self, argv: &[String]) -> bool {
        if argv.len() < self.prefix.len() {
            return false;
        }
        self.prefix
            .iter()
            .zip(argv)
            .enumerate()
            .all(|(i, (alternatives, word))| {
                let word = if i == 0 {
                    basename(word)
                } else {
                    word.as_str()
                };
                alternatives.iter().any(|alt| alt == word)
            })
    }
}

impl PathRule {
    /// Whether the path matches. `relative` is the path relative to the workspace root when
    /// it lies inside it; `absolute` is always given.
    pub fn matches(&self, absolute: &str, relative: Option<&str>) -> bool {
        let pattern = self.pattern.as_str();
        if pattern.starts_with('/') {
            self.pattern.is_match(absolute)
        } else if pattern.starts_with("**/") {
            self.pattern.is_match(absolute.trim_start_matches('/'))
                || relative.is_some_and(|r| self.pattern.is_match(r))
        } else {
            relative.is_some_and(|r| self.pattern.is_match(r))
        }
    }
}

pub use approved::runs_of;
pub use check::MAX_NESTING;
pub(crate) use check::{Findings, HiddenParts, check_command, check_script, command_verdict};
pub use exec::{ExecFacts, ExecRules};
pub use node::{
    dotenv_values, is_node, is_node_path, node_env_files, node_preloads, node_specifiers,
    node_unread_option,
};
pub use programs::{GIT_WITH_VALUE, LOADER_RUNS_NOTHING, LOADER_WITH_VALUE};

/// The names of the interpreters the rules look into (`node`, `python3`, ...): the exec
/// supervisor knows their files, so one called by another name (`exec -a foo node
/// npm-cli.js publish`, found by a red-team pass on 2026-12-07) is still read as one.
pub fn interpreter_names() -> Vec<&'static str> {
    let mut names: Vec<&'static str> = programs::PROGRAMS
        .iter()
        .filter(|p| matches!(p.role, programs::Role::Interpreter { .. }))
        .flat_map(|p| p.names.iter().copied())
        .collect();
    // valgrind loads the program it runs into its own process, as an interpreter does.
    names.extend(["python3", "pypy3", "valgrind", "valgrind.bin"]);
    names
}

/// For an exec of an interpreter running a program file (`python3 tool.py ARGS`, `node
/// x.js`), the index in `argv` of that file's path, for each reading of its options (node's
/// `--NAME VALUE` or `--NAME`): the exec supervisor also decides the file as the program it is
/// by identity (`node .../npm-cli.js publish` is `npm publish`).
pub fn script_operands(argv: &[String]) -> Vec<usize> {
    let Some(program) = argv.first().and_then(|a| programs::lookup(basename(a))) else {
        return Vec::new();
    };
    let programs::Role::Interpreter { modules, .. } = program.role else {
        return Vec::new();
    };
    let rest: Vec<crate::shell::Word> = argv[1..]
        .iter()
        .cloned()
        .map(crate::shell::Word::Literal)
        .collect();
    scripts::interpreter_operands(program, modules, &rest)
        .into_iter()
        .filter_map(|o| match o {
            scripts::Operand::Script(i) => Some(i + 1),
            _ => None,
        })
        .collect()
}

fn basename(word: &str) -> &str {
    word.rsplit('/').next().unwrap_or(word)
}

/// Splits an example command into words: whitespace separates, single and double quotes group,
/// backslash escapes. Returns an error for an unclosed quote.
pub fn split_words(text: &str) -> Result<Vec<String>, String> {
    let mut words = Vec::new();
    let mut current = String::new();
    let mut in_word = false;
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(q) => current.push(q),
                        None => return Err(format!("unclosed single quote in `{text}`")),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(e) => current.push(e),
                            None => return Err(format!("unclosed double quote in `{text}`")),
                        },
                        Some(q) => current.push(q),
                        None => return Err(format!("unclosed double quote in `{text}`")),
                    }
                }
            }
            '\\' => {
                in_word = true;
                if let Some(e) = chars.next() {
                    current.push(e);
                }
            }
            c if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut current));
                    in_word = false;
                }
            }
            c => {
                in_word = true;
                current.push(c);
            }
        }
    }
    if in_word {
        words.push(current);
    }
    Ok(words)
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    fn words(s: &str) -> Vec<String> {
        split_words(s).unwrap()
    }

    fn rule(id: &str, prefix: &[&[&str]], decision: Decision) -> CommandRule {
        CommandRule {
            id: id.into(),
            prefix: prefix
                .iter()
                .map(|alts| alts.iter().map(|s| s.to_string()).collect())
                .collect(),
            decision,
            justification: None,
            origin: Origin::Builtin,
        }
    }

    #[test]
    fn split_words_handles_quotes() {
        assert_eq!(
            words("git commit -m 'a b' \"c d\""),
            ["git", "commit", "-m", "a b", "c d"]
        );
        assert_eq!(words("  "), Vec::<String>::new());
        assert_eq!(words("a ''"), ["a", ""]);
        assert!(split_words("echo 'oops").is_err());
    }

    #[test]
    fn prefix_rule_matches_alternatives_and_basename() {
        let r = rule("push", &[&["git"], &["push", "send-pack"]], Decision::Deny);
        assert!(r.matches(&words("git push origin main")));
        assert!(r.matches(&words("/usr/bin/git send-pack")));
        assert!(!r.matches(&words("git pull")));
        assert!(!r.matches(&words("git")));
        assert!(!r.matches(&words("legit push")));
    }

    /// The rule and decision the engine reaches for `cmd` as one argv.
    fn decide<'r>(rules: &'r [CommandRule], cmd: &str) -> (Option<&'r str>, Decision) {
        let argv: Vec<crate::shell::Word> = words(cmd)
            .into_iter()
            .map(crate::shell::Word::Literal)
            .collect();
        let mut f = Findings::default();
        check_command(rules, &argv, None, cmd, 0, &mut f);
        (f.matched.as_ref().map(|m| m.rule.id.as_str()), f.decision())
    }

    #[test]
    fn wrappers_do_not_hide_a_denied_command() {
        let rules = [rule("push", &[&["git"], &["push"]], Decision::Deny)];
        for cmd in [
            "env GIT_TRACE=1 git push",
            "nice -n 5 git push",
            "timeout -s KILL 10 git push",
            "sudo -u bob git push",
            "command git push",
            "env -i nohup git push",
        ] {
            assert_eq!(decide(&rules, cmd), (Some("push"), Decision::Deny), "{cmd}");
        }
        assert_eq!(decide(&rules, "echo git push"), (None, Decision::Allow));
    }

    #[test]
    fn strictest_rule_wins_regardless_of_order() {
        let rules = [
            rule("git-ok", &[&["git"]], Decision::Allow),
            rule("push-ask", &[&["git"], &["push"]], Decision::Ask),
            rule("sudo-deny", &[&["sudo"]], Decision::Deny),
        ];
        assert_eq!(
            decide(&rules, "git push"),
            (Some("push-ask"), Decision::Ask)
        );
        assert_eq!(
            decide(&rules, "sudo git status"),
            (Some("sudo-deny"), Decision::Deny)
        );
        assert_eq!(decide(&rules, "git log"), (Some("git-ok"), Decision::Allow));
    }

    #[test]
    fn a_hidden_program_names_every_rule_it_could_match() {
        let rules = [
            rule("allow-ls", &[&["ls"]], Decision::Allow),
            rule("ask-push", &[&["git"], &["push"]], Decision::Ask),
            rule("deny-sudo", &[&["sudo"]], Decision::Deny),
            rule("deny-publish", &[&["cargo"], &["publish"]], Decision::Deny),
        ];
        let script = crate::shell::parse("x=git; $x push origin main");
        let mut f = Findings::default();
        check_script(&rules, &script, "x=git; $x push origin main", 0, &mut f);
        let v = command_verdict(&f, String::new(), HiddenParts::Ask);
        assert_eq!(v.decision, Decision::Ask);
        // Strictest first, then in the rules' order; an allow rule is never the reason to ask.
        assert_eq!(
            v.reason,
            "`$x push origin main` needs approval: the rules cannot see the variable `$x`, and \
             any of the rules `deny-sudo` (built-in default), `deny-publish` (built-in default) \
             and `ask-push` (built-in default) could match what runs"
        );
        // Only the rule a hidden subcommand could match is named.
        let script = crate::shell::parse("git $sub origin");
        let mut f = Findings::default();
        check_script(&rules, &script, "git $sub origin", 0, &mut f);
        assert!(
            command_verdict(&f, String::new(), HiddenParts::Ask)
                .reason
                .ends_with("and rule `ask-push` (built-in default) could match what runs"),
        );
    }

    #[test]
    fn path_rule_anchoring() {
        let mk = |p: &str| PathRule {
            id: "r".into(),
            pattern: Glob::new(p).unwrap(),
            decision: Decision::Ask,
            justification: None,
            origin: Origin::Builtin,
        };
        assert!(mk("**/.env").matches("/w/a/.env", Some("a/.env")));
        assert!(mk("**/.env").matches("/elsewhere/.env", None));
        assert!(mk("src/*.rs").matches("/w/src/a.rs", Some("src/a.rs")));
        assert!(!mk("src/*.rs").matches("/src/a.rs", None));
        assert!(mk("/etc/**").matches("/etc/passwd", None));
    }
}
