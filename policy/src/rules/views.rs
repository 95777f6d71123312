//! The views of one simple command: the command as written, and what each program in the
//! table of [`super::programs::PROGRAMS`] runs in turn.

use crate::shell::{Hidden, Stdin, Word};

use super::programs::{Aliases, Arity, Program, Role, lookup};
use super::{basename, split_words};

/// The most views one simple command may give; past it, the command counts as hidden.
pub(super) const MAX_VIEWS: usize = 64;
/// The most wrappers looked through one inside another.
const MAX_WRAPPER_DEPTH: usize = 16;

/// The views of one simple command, and the scripts it runs that must be parsed in turn.
#[derive(Debug, Default)]
pub(super) struct Explorer {
    /// Argv views: the command as written, then what each wrapper runs. A view starting with
    /// a hidden word stands for a command the rules cannot see.
    pub views: Vec<Vec<Word>>,
    /// Script text run by `sh -c`, `eval`, `trap`, `su -c`, a `!` git alias.
    pub scripts: Vec<String>,
    /// git aliases defined outside the command line (`name`, `body`): what the config files
    /// git reads define, as the exec supervisor found them. Every definition of a name is a
    /// candidate (the strictest decision wins), so git's precedence needs no modelling.
    pub config_aliases: Vec<(String, String)>,
    /// cargo aliases defined outside the command line (config files, `CARGO_ALIAS_*`), as the
    /// exec supervisor found them; likewise every definition is a candidate.
    pub cargo_aliases: Vec<crate::cargo_config::Alias>,
    /// Where the exploration stopped at a limit (views, wrapper depth, an interpreter's
    /// readings): what it did not see may run in the same process (an alias, a prefix), so
    /// the exec supervisor cannot leave it to a later exec.
    pub truncated: Option<String>,
}

/// Whether `word` is `NAME=VALUE` (for a hidden word: starts with `NAME=`).
fn assigns(word: &Word) -> bool {
    match word {
        Word::Literal(s) => is_assignment(s),
        Word::Hidden(h) => is_assignment(&h.prefix),
    }
}

/// The command name a word gives: the basename of a literal, or the literal basename of a
/// hidden word (`"$HOME"/bin/git`).
pub(super) fn command_name(word: &Word) -> Option<&str> {
    match word {
        Word::Literal(s) => Some(basename(s)),
        Word::Hidden(h) => h.basename.as_deref(),
    }
}

/// Text substituted into arguments at run time (`xargs -I`, `find {}`): the word is hidden,
/// but a script it forms can still be parsed with the substitution as a variable.
fn substituted(word: &str, pattern: &str, what: &str, variable: &str) -> Word {
    let mut hidden = Hidden::new(what, true);
    hidden.prefix = word.split(pattern).next().unwrap_or("").to_owned();
    hidden.template = Some(word.replace(pattern, &format!("${{{variable}}}")));
    Word::Hidden(hidden)
}

fn is_assignment(word: &str) -> bool {
    match word.split_once('=') {
        Some((name, _)) => {
            name.chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        }
        None => false,
    }
}

impl Explorer {
    /// The views of `words` (a simple command) whose standard input is `stdin`.
    pub fn of(words: Vec<Word>, stdin: Option<&Stdin>) -> Explorer {
        Explorer::with_aliases(words, stdin, Vec::new(), Vec::new())
    }

    /// Like [`Explorer::of`], with git and cargo aliases from config files (see
    /// [`Explorer::config_aliases`], [`Explorer::cargo_aliases`]).
    pub fn with_aliases(
        words: Vec<Word>,
        stdin: Option<&Stdin>,
        config_aliases: Vec<(String, String)>,
        cargo_aliases: Vec<crate::cargo_config::Alias>,
    ) -> Explorer {
        let mut ex = Explorer {
            config_aliases,
            cargo_aliases,
            ..Explorer::default()
        };
        ex.explore(words, stdin, 0);
        ex
    }

    pub(super) fn hidden(&mut self, what: String) {
        let view = vec![Word::hidden(what, true)];
        if !self.views.contains(&view) {
            self.views.push(view);
        }
    }

    pub(super) fn explore(&mut self, words: Vec<Word>, stdin: Option<&Stdin>, depth: usize) {
        if words.is_empty() || self.views.contains(&words) {
            return;
        }
        if depth > MAX_WRAPPER_DEPTH || self.views.len() >= MAX_VIEWS {
            let what = "what the command runs: it has too many layers of wrappers or aliases";
            self.truncated.get_or_insert_with(|| what.into());
            self.hidden(what.into());
            return;
        }
        self.views.push(words.clone());
        let Some(name) = words.first().and_then(command_name).map(str::to_owned) else {
            return;
        };
        let Some(program) = lookup(&name) else {
            // `git-push ...` is `git push ...` (git's dashed form, also what the hard links in
            // git's exec path are named).
            if let Some(sub) = name.strip_prefix("git-").filter(|s| !s.is_empty()) {
                let mut again = vec![Word::literal("git"), Word::literal(sub)];
                again.extend(words[1..].iter().cloned());
                self.explore(again, stdin, depth + 1);
            }
            return;
        };
        let rest = &words[1..];
        match program.role {
            Role::Wrapper {
                positional,
                assignments,
            } => self.wrapper(program, rest, positional, assignments, stdin, depth),
            Role::Env => self.env(program, rest, stdin, depth),
            Role::Xargs => self.xargs(program, rest, stdin, depth),
            Role::Find => self.find(rest, stdin, depth),
            Role::Shell => self.shell(&name, program, rest, stdin, depth),
            Role::Su => self.su(rest),
            Role::Interpreter { modules, .. } => {
                self.interpreter(&name, program, modules, rest, stdin, depth);
            }
            Role::Flock => self.flock(program, rest, stdin, depth),
            Role::Watch => self.watch(program, rest, stdin, depth),
            Role::Runner { subcommand } => self.runner(program, subcommand, rest, stdin, depth),
            Role::Subcommands { .. } => {
                self.subcommands(&words, program, stdin, depth);
            }
            Role::Corepack => self.corepack(program, rest, stdin, depth),
            Role::Eval => self.eval_like(rest, "eval"),
            Role::Source => {
                if let Some(file) = rest.first() {
                    let file = match file {
                        Word::Literal(s) => format!("`{s}`"),
                        Word::Hidden(h) => h.what.clone(),
                    };
                    self.hidden(format!("the file {file} that `{name}` runs"));
                }
            }
            Role::Alias => {
                if let Some(def) = rest.iter().find(|w| match w {
                    Word::Literal(s) => s.contains('='),
                    Word::Hidden(_) => true,
                }) {
                    let def = match def {
                        Word::Literal(s) => format!("`{s}`"),
                        Word::Hidden(h) => h.what.clone(),
                    };
                    self.hidden(format!(
                        "what the alias {def} makes a later command name run"
                    ));
                }
            }
            Role::Shopt => {
                let on = rest.iter().any(|w| w.as_literal() == Some("-s"));
                let aliases = rest
                    .iter()
                    .any(|w| w.as_literal().is_none_or(|s| s == "expand_aliases"));
                if on && aliases {
                    self.hidden("what aliases turned on by `shopt -s expand_aliases` run".into());
                }
            }
            Role::Trap => self.trap(rest),
            Role::SetsVariables => self.sets_variables(&name, rest),
        }
    }

    /// `declare`, `read`, `printf -v`...: a variable whose name is hidden, or `mapfile -C`'s
    /// callback, is hidden.
    fn sets_variables(&mut self, name: &str, rest: &[Word]) {
        let literal = |w: &Word| w.as_literal().map(str::to_owned);
        if matches!(name, "mapfile" | "readarray")
            && rest
                .iter()
                .any(|w| literal(w).is_some_and(|s| s.starts_with("-C")))
        {
            self.hidden(format!("the callback `{name} -C` runs"));
            return;
        }
        let hidden_name = match name {
            "printf" => rest.windows(2).any(|pair| {
                pair[0].as_literal() == Some("-v") && matches!(pair[1], Word::Hidden(_))
            }),
            "read" | "mapfile" | "readarray" | "compgen" => {
                rest.iter().any(|w| matches!(w, Word::Hidden(_)))
            }
            // `declare -n ref="$x"` names a variable in its value.
            _ => {
                let nameref = rest
                    .iter()
                    .any(|w| literal(w).is_some_and(|s| s.starts_with('-') && s.contains('n')));
                rest.iter().any(|w| match w {
                    Word::Hidden(h) => nameref || !h.prefix.contains('='),
                    Word::Literal(_) => false,
                })
            }
        };
        if hidden_name {
            self.hidden(crate::shell::hidden_variable_name(name));
        }
    }

    fn wrapper(
        &mut self,
        program: &Program,
        rest: &[Word],
        positional: usize,
        assignments: bool,
        stdin: Option<&Stdin>,
        depth: usize,
    ) {
        for start in program.operand_starts(rest) {
            let options = &rest[..start.min(rest.len())];
            if program.runs_nothing(options) {
                continue;
            }
            let mut at = start + positional;
            while assignments && rest.get(at).is_some_and(assigns) {
                at += 1;
            }
            if let Some(command) = rest.get(at..) {
                self.explore(command.to_vec(), stdin, depth + 1);
            }
        }
    }

    fn env(&mut self, program: &Program, rest: &[Word], stdin: Option<&Stdin>, depth: usize) {
        // `-S STRING` (`-SSTRING`, `--split-string=STRING`): the string's words take its place.
        let mut i = 0;
        while let Some(word) = rest.get(i) {
            let w = match word {
                Word::Literal(w) => w,
                // `-S"$x"`, or an option that may be `-S STRING` once expanded.
                Word::Hidden(h)
                    if h.prefix.starts_with('-')
                        && ["-S", "--split-string"].iter().any(|o| {
                            o.starts_with(h.prefix.as_str()) || h.prefix.starts_with(o)
                        }) =>
                {
                    self.hidden(format!("{} given to `env -S`", h.what));
                    return;
                }
                Word::Hidden(_) => break,
            };
            if w == "--" || !program.is_option(w) {
                break;
            }
            let split = if w == "-S" || w == "--split-string" {
                Some((rest.get(i + 1).cloned(), 2))
            } else {
                w.strip_prefix("--split-string=")
                    .or_else(|| w.strip_prefix("-S"))
                    .map(|v| (Some(Word::literal(v)), 1))
            };
            if let Some((value, used)) = split {
                match value {
                    Some(Word::Literal(v)) if !v.contains('$') => match split_words(&v) {
                        Ok(words) => {
                            let mut again = vec![Word::literal("env")];
                            again.extend(rest[..i].iter().cloned());
                            again.extend(words.into_iter().map(Word::Literal));
                            again.extend(rest.get(i + used..).unwrap_or_default().iter().cloned());
                            self.explore(again, stdin, depth + 1);
                        }
                        Err(_) => self.hidden(format!("the string `{v}` given to `env -S`")),
                    },
                    Some(Word::Literal(v)) => {
                        self.hidden(format!("the string `{v}` given to `env -S`"));
                    }
                    Some(Word::Hidden(h)) => {
                        self.hidden(format!("{} given to `env -S`", h.what));
                    }
                    None => {}
                }
                return;
            }
            i += match program.arity(w) {
                Arity::Value => 2,
                _ => 1,
            };
        }
        self.wrapper(program, rest, 0, true, stdin, depth);
    }

    fn xargs(&mut self, program: &Program, rest: &[Word], stdin: Option<&Stdin>, depth: usize) {
        for start in program.operand_starts(rest) {
            let Some(command) = rest.get(start..).filter(|c| !c.is_empty()) else {
                continue;
            };
            let mut replace = None;
            for (i, w) in rest[..start].iter().enumerate() {
                let Some(w) = w.as_literal() else { continue };
                if w == "-I" {
                    replace = rest
                        .get(i + 1)
                        .and_then(Word::as_literal)
                        .map(str::to_owned);
                } else if let Some(r) = w
                    .strip_prefix("-I")
                    .or_else(|| w.strip_prefix("--replace="))
                {
                    replace = Some(r.to_owned());
                } else if w == "--replace" || w == "-i" {
                    replace = Some("{}".to_owned());
                } else if let Some(r) = w.strip_prefix("-i") {
                    replace = Some(r.to_owned());
                }
            }
            const READ: &str = "the lines `xargs` reads";
            let mut view: Vec<Word> = match &replace {
                Some(r) if !r.is_empty() => command
                    .iter()
                    .map(|w| match w {
                        Word::Literal(s) if s.contains(r.as_str()) => {
                            substituted(s, r, READ, "XARGS_INPUT")
                        }
                        other => other.clone(),
                    })
                    .collect(),
                _ => command.to_vec(),
            };
            if replace.is_none() {
                view.push(Word::hidden(READ, true));
            }
            self.explore(view, stdin, depth + 1);
        }
    }

    fn find(&mut self, rest: &[Word], stdin: Option<&Stdin>, depth: usize) {
        let mut i = 0;
        while i < rest.len() {
            let action = rest[i]
                .as_literal()
                .is_some_and(|w| matches!(w, "-exec" | "-execdir" | "-ok" | "-okdir"));
            i += 1;
            if !action {
                continue;
            }
            let mut command = Vec::new();
            while let Some(w) = rest.get(i) {
                i += 1;
                match w {
                    Word::Literal(s) if s == ";" => break,
                    Word::Literal(s)
                        if s == "+"
                            && command
                                .last()
                                .is_some_and(|l: &Word| matches!(l, Word::Hidden(_))) =>
                    {
                        break;
                    }
                    Word::Literal(s) if s.contains("{}") => command.push(substituted(
                        s,
                        "{}",
                        "the file names `find` passes",
                        "FIND_FILE",
                    )),
                    other => command.push(other.clone()),
                }
            }
            self.explore(command, stdin, depth + 1);
        }
    }

    /// `flock [OPTIONS] FILE COMMAND...` or `flock [OPTIONS] FILE -c SCRIPT`.
    fn flock(&mut self, program: &Program, rest: &[Word], stdin: Option<&Stdin>, depth: usize) {
        for start in program.operand_starts(rest) {
            let after_file = rest.get(start + 1..).unwrap_or_default();
            match after_file.first() {
                Some(Word::Literal(c)) if c == "-c" || c == "--command" => {
                    self.shell_script(after_file.get(1), "flock -c");
                }
                Some(_) => self.explore(after_file.to_vec(), stdin, depth + 1),
                None => {}
            }
        }
    }

    /// `watch [OPTIONS] COMMAND...`: the words are joined and run by `sh -c` (with `-x`,
    /// run as they are).
    fn watch(&mut self, program: &Program, rest: &[Word], stdin: Option<&Stdin>, depth: usize) {
        for start in program.operand_starts(rest) {
            let command = rest.get(start..).unwrap_or_default();
            if command.is_empty() {
                continue;
            }
            let exec = rest[..start].iter().any(|w| {
                w.as_literal()
                    .is_some_and(|s| Program::has_option(s, &["-x", "--exec"]))
            });
            if exec {
                self.explore(command.to_vec(), stdin, depth + 1);
                continue;
            }
            self.eval_like(command, "watch");
        }
    }

    /// `corepack [OPTIONS] NAME[@VERSION] ARGS...`: the package manager NAME runs ARGS.
    fn corepack(&mut self, program: &Program, rest: &[Word], stdin: Option<&Stdin>, depth: usize) {
        for start in program.operand_starts(rest) {
            let spec = match rest.get(start) {
                Some(Word::Literal(spec)) => spec,
                // `corepack "$pm" publish`: a package manager the rules cannot see.
                Some(hidden) => {
                    let mut again = vec![hidden.clone()];
                    again.extend(rest[start + 1..].iter().cloned());
                    self.explore(again, stdin, depth + 1);
                    continue;
                }
                None => continue,
            };
            // `npm@11.19.1` names npm (a package manager's name never starts with `@`).
            let name = spec.split('@').next().unwrap_or(spec);
            let mut again = vec![Word::literal(name)];
            again.extend(rest[start + 1..].iter().cloned());
            self.explore(again, stdin, depth + 1);
        }
    }

    /// `uv run`, `poetry run`, `bundle exec`: the program's options, the subcommand, its
    /// options, then the command it runs.
    fn runner(
        &mut self,
        program: &Program,
        subcommand: &str,
        rest: &[Word],
        stdin: Option<&Stdin>,
        depth: usize,
    ) {
        for start in program.operand_starts(rest) {
            if rest.get(start).and_then(Word::as_literal) != Some(subcommand) {
                continue;
            }
            let after = rest.get(start + 1..).unwrap_or_default();
            for inner in program.operand_starts(after) {
                if let Some(command) = after.get(inner..).filter(|c| !c.is_empty()) {
                    self.explore(command.to_vec(), stdin, depth + 1);
                }
            }
        }
    }

    fn subcommands(
        &mut self,
        words: &[Word],
        program: &Program,
        stdin: Option<&Stdin>,
        depth: usize,
    ) {
        let Role::Subcommands {
            aliases,
            names,
            nested,
            groups,
            ..
        } = program.role
        else {
            return;
        };
        let rest = &words[1..];
        // Another name of the program is the program (`yarnpkg`, Debian's and corepack's yarn).
        if let Some(&own) = program.names.first()
            && words.first().and_then(command_name) != Some(own)
        {
            let mut again = vec![Word::literal(own)];
            again.extend(rest.iter().cloned());
            self.explore(again, stdin, depth + 1);
        }
        for start in program.operand_starts(rest) {
            let options = &rest[..start.min(rest.len())];
            let tail = rest.get(start..).unwrap_or_default();
            let mut view = vec![words[0].clone()];
            view.extend(tail.iter().cloned());
            match aliases {
                Aliases::Git => self.git_alias(options, &view, stdin, depth),
                Aliases::Cargo => self.cargo_alias(options, &view, stdin, depth),
                Aliases::None => {}
            }
            if let Some(Word::Literal(sub)) = tail.first() {
                // `npm pub` is `npm publish`, `cargo b` is `cargo build`.
                for named in names.map(|n| n.named(sub)).unwrap_or_default() {
                    let mut again = vec![words[0].clone(), Word::literal(named)];
                    again.extend(tail[1..].iter().cloned());
                    self.explore(again, stdin, depth + 1);
                }
                // `yarn workspace NAME publish` and `yarn npm publish` are `yarn publish`.
                let skip = if nested.contains(&sub.as_str()) {
                    2
                } else if groups.contains(&sub.as_str()) {
                    1
                } else {
                    0
                };
                if let Some(inner) = tail.get(skip..).filter(|_| skip > 0) {
                    let mut again = vec![words[0].clone()];
                    again.extend(inner.iter().cloned());
                    self.explore(again, stdin, depth + 1);
                }
                // The group's own subcommand comes after its options too (`npm stage --json
                // approve` is `npm stage approve`; found by a seventh red-team pass).
                if skip == 1 {
                    for start in program.operand_starts(&tail[1..]) {
                        if start > 0 && start < tail.len() - 1 {
                            let mut again = vec![words[0].clone(), tail[0].clone()];
                            again.extend(tail[1 + start..].iter().cloned());
                            self.explore(again, stdin, depth + 1);
                        }
                    }
                }
            }
            if start > 0 {
                self.explore(view, stdin, depth + 1);
            }
        }
    }
}
