//! What programs do with their arguments: the one table of wrappers, shells, interpreters,
//! programs with global options, and shell builtins that run code ([`PROGRAMS`]), and reading
//! their options.

mod options;
mod subcommands;
mod table;

pub(super) use subcommands::SubcommandNames;
pub(super) use table::PROGRAMS;

use std::collections::HashMap;
use std::sync::OnceLock;

use crate::shell::Word;

/// git's global options that take a value (the next word, or glued with `=`).
pub const GIT_WITH_VALUE: &[&str] = &[
    "-C",
    "-c",
    "--git-dir",
    "--work-tree",
    "--namespace",
    "--super-prefix",
    "--config-env",
    "--attr-source",
    "--shallow-file",
];

/// The dynamic loader's options (run as a program) that take a value.
pub const LOADER_WITH_VALUE: &[&str] = &[
    "--library-path",
    "--preload",
    "--argv0",
    "--audit",
    "--inhibit-rpath",
    "--glibc-hwcaps-prepend",
    "--glibc-hwcaps-mask",
];

/// The dynamic loader's options (run as a program) with which it runs no program, in every
/// glibc: before 2.33 `--help`, `--version`, `--list-tunables` and `--list-diagnostics` were no
/// options, and a file of that name ran (found by review on 2026-12-07).
pub const LOADER_RUNS_NOTHING: &[&str] = &["--list", "--verify"];

/// How a program runs other commands, or hides what it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Role {
    /// Options, then `positional` words (timeout's duration), then (with `assignments`,
    /// `NAME=VALUE` words) the command it runs.
    Wrapper {
        positional: usize,
        assignments: bool,
    },
    /// `env`: a wrapper with assignments whose `-S STRING` is split into more arguments.
    Env,
    /// `xargs`: options, then a command that gets the lines it reads as more arguments (or in
    /// place of the `-I` string).
    Xargs,
    /// `find`: every `-exec`/`-execdir`/`-ok`/`-okdir` up to `;` or `+` is a command; `{}`
    /// is a file name found at run time.
    Find,
    /// A shell: `-c SCRIPT` is parsed as a script; a script read from a pipe, a here document
    /// or a redirection is hidden; a script file runs like any program.
    Shell,
    /// `su`: `-c SCRIPT` / `--command SCRIPT` is parsed as a script.
    Su,
    /// An interpreter: a program read from a pipe, a here document or a redirection is
    /// hidden; a program file or `code` option runs like any program. `modules`: `-m NAME
    /// ARGS` runs like the program NAME (`python -m twine upload`).
    /// `long_flags`: when given, the long options that never take a value; any other long
    /// option not in `with_value` may take the next word (node's `--disable-warning CODE`),
    /// so both readings are decided.
    Interpreter {
        modules: bool,
        long_flags: Option<&'static [&'static str]>,
    },
    /// `flock [OPTIONS] FILE COMMAND...` or `flock FILE -c SCRIPT`.
    Flock,
    /// `watch [OPTIONS] COMMAND...`: the words are joined and run by `sh -c` (`-x`: as
    /// they are).
    Watch,
    /// `uv run`, `poetry run`, `bundle exec`: options, the subcommand, its options, then the
    /// command it runs.
    Runner { subcommand: &'static str },
    /// Global options before a subcommand: rules see the subcommand right after the program
    /// name. `aliases`: whose aliases are expanded. `names`: the subcommands a word may name
    /// besides itself (prefixes, built-in aliases). `nested`: subcommands taking one argument
    /// before another subcommand (`yarn workspace NAME CMD`); `groups`: subcommands taking
    /// another right after them (`yarn npm publish`).
    Subcommands {
        aliases: Aliases,
        names: Option<&'static SubcommandNames>,
        nested: &'static [&'static str],
        groups: &'static [&'static str],
        unknown_long_takes_value: bool,
        /// When given, the single-dash options that never take a value; any other may take the
        /// next word (npm's parser gives one to single-dash names too: `-tag beta`, `-c x`).
        short_flags: Option<&'static [&'static str]>,
    },
    /// `corepack [OPTIONS] NAME[@VERSION] ARGS...`: runs the package manager NAME in its own
    /// process.
    Corepack,
    /// `eval`: literal arguments are joined and parsed as a script, anything else is hidden.
    Eval,
    /// `source`/`.`: the file it runs is hidden.
    Source,
    /// `alias NAME=VALUE`: a later command name may run something else: hidden.
    Alias,
    /// `shopt -s expand_aliases`: hidden, like an alias.
    Shopt,
    /// Builtins that set variables by name (`declare`, `read`, `printf -v`, ...): a name the
    /// rules cannot see may be `BASH_ALIASES` or `PROMPT_COMMAND`, and `mapfile -C` runs a
    /// callback: hidden.
    SetsVariables,
    /// `trap ACTION SIGNAL...`: a literal action is parsed as a script, anything else hidden.
    Trap,
}

/// Whose user-defined aliases a program with subcommands expands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Aliases {
    None,
    /// `-c alias.NAME=VALUE` on the command line, and the config files the supervisor read.
    Git,
    /// `--config alias.NAME=VALUE` on the command line, and the config files and
    /// `CARGO_ALIAS_*` variables the supervisor read.
    Cargo,
}

/// One row of [`PROGRAMS`].
#[derive(Debug)]
pub(super) struct Program {
    /// Names, compared with the basename of the command word. Shells and interpreters also
    /// match with a version suffix (`python3.12`, `bash5`).
    pub names: &'static [&'static str],
    /// Options taking a value: the next word, or glued (`-uBOB`, `--user=bob`).
    pub with_value: &'static [&'static str],
    /// Options after which the program runs no command (`command -v`), or (interpreters) runs
    /// program text given on the command line (`python -c`, `perl -e`).
    pub special: &'static [&'static str],
    pub role: Role,
}

/// The row for a command named `name` (a basename).
pub(super) fn lookup(name: &str) -> Option<&'static Program> {
    let index = index();
    if let Some(&row) = index.by_name.get(name) {
        return PROGRAMS.get(row);
    }
    let bare = name.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.');
    if bare.is_empty() || bare == name {
        return None;
    }
    index.versioned.get(bare).and_then(|&row| PROGRAMS.get(row))
}

/// Where each name of [`PROGRAMS`] is: the first row naming it, and for names that also match
/// with a version suffix (shells, interpreters), the first such row. A lookup is made at every
/// exec the supervisor decides, where scanning the table meant a few hundred cache lines
/// touched after the exec'ing program had evicted them.
struct Index {
    by_name: HashMap<&'static str, usize>,
    versioned: HashMap<&'static str, usize>,
}

fn index() -> &'static Index {
    static INDEX: OnceLock<Index> = OnceLock::new();
    INDEX.get_or_init(|| {
        let mut by_name = HashMap::new();
        let mut versioned = HashMap::new();
        for (row, program) in PROGRAMS.iter().enumerate() {
            for &name in program.names {
                by_name.entry(name).or_insert(row);
                if matches!(program.role, Role::Shell | Role::Interpreter { .. }) {
                    versioned.entry(name).or_insert(row);
                }
            }
        }
        Index { by_name, versioned }
    })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Arity {
    Flag,
    Value,
    Either,
}

impl Program {
    pub(super) fn is_option(&self, word: &str) -> bool {
        (word.starts_with('-') && word.len() > 1)
            || (self.role == Role::Env && word == "-")
            || (matches!(self.role, Role::Subcommands { .. })
                && word.starts_with('+')
                && word.len() > 1)
    }

    pub(super) fn arity(&self, word: &str) -> Arity {
        if word.starts_with("--") {
            return if word.contains('=') {
                Arity::Flag
            } else if self.with_value.contains(&word) {
                Arity::Value
            } else if let Role::Interpreter {
                long_flags: Some(flags),
                ..
            } = self.role
            {
                if flags.contains(&word) {
                    Arity::Flag
                } else {
                    Arity::Either
                }
            } else if matches!(
                self.role,
                Role::Subcommands {
                    unknown_long_takes_value: true,
                    ..
                } | Role::Runner { .. }
            ) {
                Arity::Either
            } else {
                Arity::Flag
            };
        }
        if !word.starts_with('-') {
            return Arity::Flag;
        }
        if self.with_value.contains(&word) {
            // `-encoding NAME` (single-dash long options) and `-u NAME`.
            return Arity::Value;
        }
        if let Role::Subcommands {
            short_flags: Some(flags),
            ..
        } = self.role
        {
            return if flags.contains(&word) {
                Arity::Flag
            } else {
                Arity::Either
            };
        }
        // A short cluster: the first letter taking a value takes the rest, or the next word.
        let letters: Vec<char> = word.chars().skip(1).collect();
        for (i, c) in letters.iter().enumerate() {
            if self.with_value.contains(&format!("-{c}").as_str()) {
                return if i + 1 < letters.len() {
                    Arity::Flag
                } else {
                    Arity::Value
                };
            }
        }
        Arity::Flag
    }

    /// Whether the program parses its options as npm's nopt does: a flag takes a following
    /// `true`/`false`/`null`, an option taking a value takes none before another option.
    fn takes_boolean_words(&self) -> bool {
        matches!(
            self.role,
            Role::Subcommands {
                short_flags: Some(_),
                ..
            }
        )
    }

    /// Whether the leading `options` of a call include one that makes the program run nothing
    /// (`--help`, ld.so's `--list`): not a value of another option (`ld.so --library-path
    /// --list git push` runs git; found by an eighth red-team pass). A word that may be a
    /// value (after an option that takes one, or a cluster holding one) is taken for one.
    pub(crate) fn runs_nothing(&self, options: &[Word]) -> bool {
        let takes_value = |s: &str| {
            self.with_value.contains(&s)
                || (s.starts_with('-')
                    && !s.starts_with("--")
                    && s.chars().skip(1).any(|c| {
                        self.with_value
                            .iter()
                            .any(|o| o.len() == 2 && o.ends_with(c) && !o.starts_with("--"))
                    }))
        };
        let mut i = 0;
        while let Some(word) = options.get(i) {
            let literal = word.as_literal();
            if literal.is_some_and(|s| Program::has_option(s, self.special)) {
                return true;
            }
            // A hidden word may be an option that takes the next word.
            i += if literal.is_none_or(takes_value) {
                2
            } else {
                1
            };
        }
        false
    }

    /// Whether `word` is (or, in a short cluster, contains) one of `options`.
    pub(super) fn has_option(word: &str, options: &[&str]) -> bool {
        options.iter().any(|o| {
            word == *o
                || (o.len() == 2
                    && !o.starts_with("--")
                    && word.starts_with('-')
                    && !word.starts_with("--")
                    && o.chars().nth(1).is_some_and(|c| word[1..].contains(c)))
                || (o.starts_with("--") && word.starts_with(&format!("{o}=")))
        })
    }

    /// Where the operands after the leading options of `words` may start: several places
    /// when a word is hidden (it may be an option or the operand) or an option is unknown.
    /// Where they may start depends on the position alone, so each position is read once:
    /// every reading is found, in time linear in the words (a cap on steps, before, stopped
    /// short of `publish` in `npm --json publish --a ... --j`, found by review on 2026-12-07).
    pub(super) fn operand_starts(&self, words: &[Word]) -> Vec<usize> {
        let mut starts = Vec::new();
        let mut frontier = vec![0usize];
        let mut seen = vec![false; words.len() + 3];
        while let Some(i) = frontier.pop() {
            if seen.get(i).copied().unwrap_or(true) {
                continue;
            }
            seen[i] = true;
            let mut start = |at: usize| {
                if !starts.contains(&at) {
                    starts.push(at);
                }
            };
            match words.get(i) {
                None => start(i),
                // Starts with a literal that is not an option: an operand.
                Some(Word::Hidden(h))
                    if !h.prefix.is_empty() && !h.prefix.starts_with(['-', '+']) =>
                {
                    start(i);
                }
                // An option whose value may be the next word, or the operand itself.
                Some(Word::Hidden(h)) => {
                    if h.prefix.is_empty() {
                        start(i);
                    }
                    frontier.push(i + 1);
                    frontier.push(i + 2);
                }
                Some(Word::Literal(w)) if w == "--" => start(i + 1),
                Some(Word::Literal(w)) if self.is_option(w) => {
                    let next = words.get(i + 1).and_then(Word::as_literal);
                    match self.arity(w) {
                        // npm's and pnpm's flags take a following `true`, `false` or `null`.
                        Arity::Flag
                            if self.takes_boolean_words()
                                && next.is_some_and(|n| matches!(n, "true" | "false" | "null")) =>
                        {
                            frontier.push(i + 1);
                            frontier.push(i + 2);
                        }
                        Arity::Flag => frontier.push(i + 1),
                        // npm's options taking a value take none before another option
                        // (`--scope --loglevel warn publish`).
                        Arity::Value
                            if self.takes_boolean_words()
                                && next.is_some_and(|n| n.starts_with('-')) =>
                        {
                            frontier.push(i + 1);
                            frontier.push(i + 2);
                        }
                        Arity::Value => frontier.push(i + 2),
                        Arity::Either => {
                            frontier.push(i + 1);
                            frontier.push(i + 2);
                        }
                    }
                }
                Some(Word::Literal(_)) => start(i),
            }
        }
        starts.sort_unstable();
        starts
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the index replaced: the first row naming `name`, or for a versioned shell or
    /// interpreter name the first such row naming it without the version.
    fn scanned(name: &str) -> Option<&'static Program> {
        if let Some(p) = PROGRAMS.iter().find(|p| p.names.contains(&name)) {
            return Some(p);
        }
        let bare = name.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.');
        if bare.is_empty() || bare == name {
            return None;
        }
        PROGRAMS.iter().find(|p| {
            matches!(p.role, Role::Shell | Role::Interpreter { .. }) && p.names.contains(&bare)
        })
    }

    #[test]
    fn the_index_finds_the_row_a_scan_of_the_table_finds() {
        let mut names: Vec<String> = PROGRAMS
            .iter()
            .flat_map(|p| p.names.iter())
            .flat_map(|n| {
                [
                    n.to_string(),
                    format!("{n}3"),
                    format!("{n}3.12"),
                    format!("{n}."),
                ]
            })
            .collect();
        names.extend(
            [
                "true",
                "cc1",
                "",
                "3",
                ".",
                "git-upload-pack",
                "python",
                "bash5",
            ]
            .map(String::from),
        );
        for name in &names {
            // Rows are told apart by their names (each row's list is its own).
            assert_eq!(
                lookup(name).map(|p| p.names),
                scanned(name).map(|p| p.names),
                "{name}"
            );
        }
        assert!(lookup("python3.12").is_some() && lookup("true").is_none());
    }
}
