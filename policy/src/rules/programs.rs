//! What programs do with their arguments: the one table of wrappers, shells, interpreters,
//! programs with global options, and shell builtins that run code, and the views of a
//! command line they give (see [`Explorer`]).

use crate::shell::Word;

use super::{basename, split_words};

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
    /// hidden; a program file or `code` option runs like any program.
    Interpreter,
    /// Global options before a subcommand: rules see the subcommand right after the program
    /// name. `aliases`: `-c alias.NAME=VALUE` on the same command line is expanded.
    /// `nested`: subcommands taking one argument before another subcommand.
    Subcommands {
        aliases: bool,
        nested: &'static [&'static str],
        unknown_long_takes_value: bool,
    },
    /// `eval`: literal arguments are joined and parsed as a script, anything else is hidden.
    Eval,
    /// `source`/`.`: the file it runs is hidden.
    Source,
    /// `alias NAME=VALUE`: a later command name may run something else: hidden.
    Alias,
    /// `shopt -s expand_aliases`: hidden, like an alias.
    Shopt,
    /// `trap ACTION SIGNAL...`: a literal action is parsed as a script, anything else hidden.
    Trap,
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

const fn wrapper(
    names: &'static [&'static str],
    with_value: &'static [&'static str],
    runs_nothing: &'static [&'static str],
) -> Program {
    Program {
        names,
        with_value,
        special: runs_nothing,
        role: Role::Wrapper {
            positional: 0,
            assignments: false,
        },
    }
}

const fn role(names: &'static [&'static str], role: Role) -> Program {
    Program {
        names,
        with_value: &[],
        special: &[],
        role,
    }
}

const fn interpreter(
    names: &'static [&'static str],
    with_value: &'static [&'static str],
    code: &'static [&'static str],
) -> Program {
    Program {
        names,
        with_value,
        special: code,
        role: Role::Interpreter,
    }
}

/// Every program command rules look through, and how. This table is the documented list (the
/// README's rules section repeats it). Rules are evaluated against the command as written and
/// against every view below; the strictest decision wins.
///
/// Wrappers (options skipped, then the command they run is a view):
/// - `env` (`-i`, `-0`, `-v`, `-`, `-u NAME`, `-C DIR`, `NAME=VALUE`; `-S STRING` is split into
///   words and read again)
/// - `nice` (`-n N`, `-N`), `nohup`, `setsid`, `stdbuf` (`-i/-o/-e MODE`), `ionice`
///   (`-c/-n N`; `-p/-P/-u` run nothing), `time` (`-p`, `-f FMT`, `-o FILE`)
/// - `timeout` (`-k D`, `-s SIG`, `--foreground`, ..., then the duration)
/// - `sudo` (options, `-u USER` and the other valued ones, `NAME=VALUE`), `doas` (`-u USER`),
///   `pkexec` (`--user USER`)
/// - `command` (`-p`; `-v`/`-V` run nothing), `exec` (`-a NAME`, `-c`, `-l`), `builtin`,
///   `coproc`
/// - `xargs` (options; the lines it reads are hidden arguments appended, or in place of the
///   `-I`/`-i` string)
/// - `find` (`-exec`, `-execdir`, `-ok`, `-okdir` ... `;` or `+`; `{}` is hidden)
///
/// Shells and interpreters:
/// - `sh`, `bash`, `dash`, `zsh`, `ksh`, `mksh`, `ash`, `fish`: `-c SCRIPT` (also in a cluster
///   such as `-ec`, `-lc`) is parsed as a script, recursively (bounded depth); a script read
///   from a pipe, here document, here string or `<` redirection is hidden
/// - `su` (`-c SCRIPT`, `--command SCRIPT`)
/// - `python`, `pypy`, `perl`, `ruby`, `node`, `nodejs`, `php`, `lua`, `Rscript`, `tclsh`:
///   a program read from a pipe, here document, here string or redirection is hidden
///
/// Programs with global options before their subcommand (the subcommand comes right after the
/// program name in the view):
/// - `git`: `-C PATH`, `-c NAME=VALUE`, `--git-dir`, `--work-tree`, `--namespace`,
///   `--super-prefix`, `--config-env`, `--attr-source` (each with a value), `--no-pager`, `-P`,
///   `-p`, `--paginate`, `--bare`, `--exec-path[=PATH]`, `--no-replace-objects`,
///   `--*-pathspecs`, `--no-optional-locks`, `--no-advice`, ... (any flag). `-c
///   alias.NAME=VALUE` given on the same command line is expanded: a `!` alias is parsed as the
///   shell command it runs. Aliases from git config files are not read.
/// - `cargo`: `+TOOLCHAIN`, `--color`, `--config`, `-C`, `-Z` (with a value), flags
/// - `npm` (`--prefix`, `-C`, `--registry`, `-w`/`--workspace`, `--userconfig`, ...), `pnpm`
///   (`-C`/`--dir`, `-F`/`--filter`, ...), `yarn` (`--cwd`, ...; `yarn workspace NAME CMD`):
///   an unknown long option may take a value, so both readings are views
///
/// Shell builtins that run code the command line does not show:
/// - `eval`: literal arguments are joined and parsed as a script; otherwise hidden
/// - `source`, `.`: hidden (the file runs in this shell)
/// - `alias NAME=VALUE`, `shopt -s expand_aliases`: hidden (a later command name may run
///   something else)
/// - `trap ACTION SIGNAL...`: a literal action is parsed as a script; otherwise hidden
///
/// Not looked through: package runners (`npx`, `uv run`, `poetry run`, `bundle exec`),
/// remote commands (`ssh host CMD`), `watch`, `parallel`, `flock`, `chroot`, and programs
/// that run configured commands (`make`, git hooks, `core.pager`). The kernel sandbox
/// confines whatever they run.
pub(super) const PROGRAMS: &[Program] = &[
    Program {
        names: &["env"],
        with_value: &["-u", "-C", "-S", "--unset", "--chdir", "--split-string"],
        special: &[],
        role: Role::Env,
    },
    wrapper(&["nice"], &["-n", "--adjustment"], &[]),
    wrapper(&["nohup", "setsid", "builtin", "coproc"], &[], &[]),
    wrapper(
        &["stdbuf"],
        &["-i", "-o", "-e", "--input", "--output", "--error"],
        &[],
    ),
    wrapper(
        &["ionice"],
        &[
            "-c",
            "-n",
            "-p",
            "-P",
            "-u",
            "--class",
            "--classdata",
            "--pid",
            "--pgid",
            "--uid",
        ],
        &["-p", "-P", "-u", "--pid", "--pgid", "--uid"],
    ),
    wrapper(&["time"], &["-f", "-o", "--format", "--output"], &[]),
    Program {
        names: &["timeout"],
        with_value: &["-k", "-s", "--kill-after", "--signal"],
        special: &[],
        role: Role::Wrapper {
            positional: 1,
            assignments: false,
        },
    },
    Program {
        names: &["sudo"],
        with_value: &[
            "-u",
            "-g",
            "-C",
            "-D",
            "-h",
            "-p",
            "-r",
            "-t",
            "-U",
            "-T",
            "-R",
            "--user",
            "--group",
            "--close-from",
            "--chdir",
            "--host",
            "--prompt",
            "--role",
            "--type",
            "--other-user",
            "--command-timeout",
            "--chroot",
        ],
        special: &[
            "-e",
            "-l",
            "-v",
            "-V",
            "-K",
            "--edit",
            "--list",
            "--validate",
            "--version",
            "--remove-timestamp",
        ],
        role: Role::Wrapper {
            positional: 0,
            assignments: true,
        },
    },
    wrapper(&["doas"], &["-u", "-C"], &["-C", "-L"]),
    wrapper(&["pkexec"], &["--user"], &["--version", "--help"]),
    wrapper(&["command"], &[], &["-v", "-V"]),
    wrapper(&["exec"], &["-a"], &[]),
    Program {
        names: &["xargs"],
        with_value: &[
            "-a",
            "-d",
            "-E",
            "-I",
            "-L",
            "-n",
            "-P",
            "-s",
            "--arg-file",
            "--delimiter",
            "--max-args",
            "--max-procs",
            "--max-chars",
            "--process-slot-var",
        ],
        special: &[],
        role: Role::Xargs,
    },
    role(&["find"], Role::Find),
    Program {
        names: &["sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "fish"],
        with_value: &["-o", "+o", "-O", "+O", "--rcfile", "--init-file"],
        special: &[],
        role: Role::Shell,
    },
    role(&["su"], Role::Su),
    interpreter(&["python", "pypy"], &["-W", "-X"], &["-c", "-m"]),
    interpreter(&["perl"], &[], &["-e", "-E"]),
    interpreter(&["ruby"], &[], &["-e"]),
    interpreter(
        &["node", "nodejs"],
        &["-r", "--require", "--import"],
        &["-e", "-p", "--eval", "--print"],
    ),
    interpreter(&["php"], &["-d", "-c"], &["-r"]),
    interpreter(&["lua"], &["-l"], &["-e"]),
    interpreter(&["Rscript"], &[], &["-e"]),
    interpreter(&["tclsh"], &[], &[]),
    Program {
        names: &["git"],
        with_value: &[
            "-C",
            "-c",
            "--git-dir",
            "--work-tree",
            "--namespace",
            "--super-prefix",
            "--config-env",
            "--attr-source",
        ],
        special: &[],
        role: Role::Subcommands {
            aliases: true,
            nested: &[],
            unknown_long_takes_value: false,
        },
    },
    Program {
        names: &["cargo"],
        with_value: &["--color", "--config", "-C", "-Z", "--explain"],
        special: &[],
        role: Role::Subcommands {
            aliases: false,
            nested: &[],
            unknown_long_takes_value: false,
        },
    },
    Program {
        names: &["npm"],
        with_value: &[
            "--prefix",
            "-C",
            "--registry",
            "--userconfig",
            "--globalconfig",
            "--cache",
            "-w",
            "--workspace",
            "--loglevel",
            "--otp",
            "--tag",
            "--access",
            "--scope",
        ],
        special: &[],
        role: Role::Subcommands {
            aliases: false,
            nested: &[],
            unknown_long_takes_value: true,
        },
    },
    Program {
        names: &["pnpm"],
        with_value: &["-C", "--dir", "-F", "--filter", "--reporter", "--loglevel"],
        special: &[],
        role: Role::Subcommands {
            aliases: false,
            nested: &[],
            unknown_long_takes_value: true,
        },
    },
    Program {
        names: &["yarn"],
        with_value: &["--cwd", "--registry", "--modules-folder", "--cache-folder"],
        special: &[],
        role: Role::Subcommands {
            aliases: false,
            nested: &["workspace"],
            unknown_long_takes_value: true,
        },
    },
    role(&["eval"], Role::Eval),
    role(&["source", "."], Role::Source),
    role(&["alias"], Role::Alias),
    role(&["shopt"], Role::Shopt),
    role(&["trap"], Role::Trap),
];

/// The row for a command named `name` (a basename).
pub(super) fn lookup(name: &str) -> Option<&'static Program> {
    if let Some(p) = PROGRAMS.iter().find(|p| p.names.contains(&name)) {
        return Some(p);
    }
    let bare = name.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.');
    if bare.is_empty() || bare == name {
        return None;
    }
    PROGRAMS
        .iter()
        .find(|p| matches!(p.role, Role::Shell | Role::Interpreter) && p.names.contains(&bare))
}

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
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Arity {
    Flag,
    Value,
    Either,
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

/// Single quotes `s` for a shell.
fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

impl Program {
    fn is_option(&self, word: &str) -> bool {
        (word.starts_with('-') && word.len() > 1)
            || (self.role == Role::Env && word == "-")
            || (matches!(self.role, Role::Subcommands { .. })
                && word.starts_with('+')
                && word.len() > 1)
    }

    fn arity(&self, word: &str) -> Arity {
        if word.starts_with("--") {
            return if word.contains('=') {
                Arity::Flag
            } else if self.with_value.contains(&word) {
                Arity::Value
            } else if matches!(
                self.role,
                Role::Subcommands {
                    unknown_long_takes_value: true,
                    ..
                }
            ) {
                Arity::Either
            } else {
                Arity::Flag
            };
        }
        if !word.starts_with('-') {
            return Arity::Flag;
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

    /// Whether `word` is (or, in a short cluster, contains) one of `options`.
    fn has_option(word: &str, options: &[&str]) -> bool {
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
    fn operand_starts(&self, words: &[Word]) -> Vec<usize> {
        let mut starts = Vec::new();
        let mut frontier = vec![0usize];
        let mut steps = 0;
        while let Some(i) = frontier.pop() {
            steps += 1;
            if steps > 4 * MAX_VIEWS {
                break;
            }
            let mut start = |at: usize| {
                if !starts.contains(&at) {
                    starts.push(at);
                }
            };
            match words.get(i) {
                None => start(i),
                Some(Word::Hidden(_)) => {
                    start(i);
                    frontier.push(i + 1);
                }
                Some(Word::Literal(w)) if w == "--" => start(i + 1),
                Some(Word::Literal(w)) if self.is_option(w) => match self.arity(w) {
                    Arity::Flag => frontier.push(i + 1),
                    Arity::Value => frontier.push(i + 2),
                    Arity::Either => {
                        frontier.push(i + 1);
                        frontier.push(i + 2);
                    }
                },
                Some(Word::Literal(_)) => start(i),
            }
        }
        starts.sort_unstable();
        starts
    }
}

impl Explorer {
    /// The views of `words` (a simple command) whose standard input is `stdin`.
    pub fn of(words: Vec<Word>, stdin: Option<&'static str>) -> Explorer {
        let mut ex = Explorer::default();
        ex.explore(words, stdin, 0);
        ex
    }

    fn hidden(&mut self, what: String) {
        let view = vec![Word::hidden(what, true)];
        if !self.views.contains(&view) {
            self.views.push(view);
        }
    }

    fn explore(&mut self, words: Vec<Word>, stdin: Option<&'static str>, depth: usize) {
        if words.is_empty() || self.views.contains(&words) {
            return;
        }
        if depth > MAX_WRAPPER_DEPTH || self.views.len() >= MAX_VIEWS {
            self.hidden("what the command runs: it has too many layers of wrappers".into());
            return;
        }
        self.views.push(words.clone());
        let Some(Word::Literal(first)) = words.first() else {
            return;
        };
        let name = basename(first).to_owned();
        let Some(program) = lookup(&name) else {
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
            Role::Shell => self.shell(&name, program, rest, stdin),
            Role::Su => self.su(rest),
            Role::Interpreter => self.interpreter(&name, program, rest, stdin),
            Role::Subcommands { aliases, nested, .. } => {
                self.subcommands(&words, program, aliases, nested, stdin, depth);
            }
            Role::Eval => self.eval(rest),
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
                    self.hidden(
                        "what aliases turned on by `shopt -s expand_aliases` run".into(),
                    );
                }
            }
            Role::Trap => self.trap(rest),
        }
    }

    fn wrapper(
        &mut self,
        program: &Program,
        rest: &[Word],
        positional: usize,
        assignments: bool,
        stdin: Option<&'static str>,
        depth: usize,
    ) {
        for start in program.operand_starts(rest) {
            let options = &rest[..start.min(rest.len())];
            if options
                .iter()
                .any(|w| w.as_literal().is_some_and(|s| Program::has_option(s, program.special)))
            {
                continue;
            }
            let mut at = start + positional;
            while assignments
                && rest
                    .get(at)
                    .and_then(Word::as_literal)
                    .is_some_and(is_assignment)
            {
                at += 1;
            }
            if let Some(command) = rest.get(at..) {
                self.explore(command.to_vec(), stdin, depth + 1);
            }
        }
    }

    fn env(&mut self, program: &Program, rest: &[Word], stdin: Option<&'static str>, depth: usize) {
        // `-S STRING` (`-SSTRING`, `--split-string=STRING`): the string's words take its place.
        let mut i = 0;
        while let Some(Word::Literal(w)) = rest.get(i) {
            if w == "--" || !program.is_option(w) {
                break;
            }
            let split = if w == "-S" || w == "--split-string" {
                Some((rest.get(i + 1).cloned(), 2))
            } else if let Some(v) = w.strip_prefix("--split-string=") {
                Some((Some(Word::literal(v)), 1))
            } else if let Some(v) = w.strip_prefix("-S") {
                Some((Some(Word::literal(v)), 1))
            } else {
                None
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

    fn xargs(&mut self, program: &Program, rest: &[Word], stdin: Option<&'static str>, depth: usize) {
        for start in program.operand_starts(rest) {
            let Some(command) = rest.get(start..).filter(|c| !c.is_empty()) else {
                continue;
            };
            let mut replace = None;
            for (i, w) in rest[..start].iter().enumerate() {
                let Some(w) = w.as_literal() else { continue };
                if w == "-I" {
                    replace = rest.get(i + 1).and_then(Word::as_literal).map(str::to_owned);
                } else if let Some(r) = w.strip_prefix("-I").or_else(|| w.strip_prefix("--replace=")) {
                    replace = Some(r.to_owned());
                } else if w == "--replace" || w == "-i" {
                    replace = Some("{}".to_owned());
                } else if let Some(r) = w.strip_prefix("-i") {
                    replace = Some(r.to_owned());
                }
            }
            let read = || Word::hidden("the lines `xargs` reads", true);
            let mut view: Vec<Word> = match &replace {
                Some(r) if !r.is_empty() => command
                    .iter()
                    .map(|w| match w {
                        Word::Literal(s) if s.contains(r.as_str()) => read(),
                        other => other.clone(),
                    })
                    .collect(),
                _ => command.to_vec(),
            };
            if replace.is_none() {
                view.push(read());
            }
            self.explore(view, stdin, depth + 1);
        }
    }

    fn find(&mut self, rest: &[Word], stdin: Option<&'static str>, depth: usize) {
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
                        if s == "+" && command.last().is_some_and(|l: &Word| matches!(l, Word::Hidden(_))) =>
                    {
                        break;
                    }
                    Word::Literal(s) if s.contains("{}") => {
                        command.push(Word::hidden("the file names `find` passes", true));
                    }
                    other => command.push(other.clone()),
                }
            }
            self.explore(command, stdin, depth + 1);
        }
    }

    fn shell(&mut self, name: &str, program: &Program, rest: &[Word], stdin: Option<&'static str>) {
        let mut i = 0;
        let mut command_mode = false;
        let mut stdin_mode = false;
        while let Some(w) = rest.get(i) {
            let w = match w {
                Word::Literal(w) => w,
                Word::Hidden(h) => {
                    self.hidden(format!("{} given to `{name}`", h.what));
                    return;
                }
            };
            if w == "--" || w == "-" {
                i += 1;
                break;
            }
            if w.starts_with("--") {
                i += if program.with_value.contains(&w.as_str()) { 2 } else { 1 };
                continue;
            }
            if (w.starts_with('-') || w.starts_with('+')) && w.len() > 1 {
                let letters = &w[1..];
                if w.starts_with('-') {
                    command_mode |= letters.contains('c');
                    stdin_mode |= letters.contains('s');
                }
                i += if letters.ends_with(['o', 'O']) { 2 } else { 1 };
                continue;
            }
            break;
        }
        if command_mode {
            match rest.get(i) {
                Some(Word::Literal(script)) => self.scripts.push(script.clone()),
                Some(Word::Hidden(h)) => self.hidden(format!("{} run by `{name} -c`", h.what)),
                None => {}
            }
        } else if (stdin_mode || rest.get(i).is_none())
            && let Some(from) = stdin
        {
            self.hidden(format!("the script `{name}` reads from {from}"));
        }
    }

    fn su(&mut self, rest: &[Word]) {
        for (i, w) in rest.iter().enumerate() {
            let Some(w) = w.as_literal() else { continue };
            let script = if w == "-c" || w == "--command" || w == "--session-command" {
                rest.get(i + 1).cloned()
            } else if let Some(s) = w
                .strip_prefix("--command=")
                .or_else(|| w.strip_prefix("--session-command="))
            {
                Some(Word::literal(s))
            } else {
                None
            };
            match script {
                Some(Word::Literal(s)) => self.scripts.push(s),
                Some(Word::Hidden(h)) => self.hidden(format!("{} run by `su -c`", h.what)),
                None => {}
            }
        }
    }

    fn interpreter(
        &mut self,
        name: &str,
        program: &Program,
        rest: &[Word],
        stdin: Option<&'static str>,
    ) {
        let Some(from) = stdin else { return };
        let mut i = 0;
        let reads_stdin = loop {
            match rest.get(i) {
                None => break true,
                Some(Word::Hidden(_)) => break false,
                Some(Word::Literal(w)) if w == "-" => break true,
                Some(Word::Literal(w)) if w == "--" => {
                    break rest.get(i + 1).is_none_or(|w| w.as_literal() == Some("-"));
                }
                Some(Word::Literal(w)) if Program::has_option(w, program.special) => break false,
                Some(Word::Literal(w)) if w.starts_with('-') => {
                    i += if program.arity(w) == Arity::Value { 2 } else { 1 };
                }
                Some(Word::Literal(_)) => break false,
            }
        };
        if reads_stdin {
            self.hidden(format!("the program `{name}` reads from {from}"));
        }
    }

    fn subcommands(
        &mut self,
        words: &[Word],
        program: &Program,
        aliases: bool,
        nested: &[&str],
        stdin: Option<&'static str>,
        depth: usize,
    ) {
        let rest = &words[1..];
        for start in program.operand_starts(rest) {
            let options = &rest[..start.min(rest.len())];
            let tail = rest.get(start..).unwrap_or_default();
            let mut view = vec![words[0].clone()];
            view.extend(tail.iter().cloned());
            if aliases {
                self.git_alias(options, &view, stdin, depth);
            }
            if let (Some(Word::Literal(sub)), Some(inner)) = (tail.first(), tail.get(2..))
                && nested.contains(&sub.as_str())
            {
                let mut again = vec![words[0].clone()];
                again.extend(inner.iter().cloned());
                self.explore(again, stdin, depth + 1);
            }
            if start > 0 {
                self.explore(view, stdin, depth + 1);
            }
        }
    }

    /// `git -c alias.NAME=VALUE NAME ...`: what the alias runs.
    fn git_alias(
        &mut self,
        options: &[Word],
        view: &[Word],
        stdin: Option<&'static str>,
        depth: usize,
    ) {
        let mut definitions = Vec::new();
        for (i, w) in options.iter().enumerate() {
            let Some(w) = w.as_literal() else { continue };
            let value = if w == "-c" {
                options.get(i + 1)
            } else if w.starts_with("--config-env") {
                if w.contains("alias.") || options.get(i + 1).and_then(Word::as_literal).is_some_and(|v| v.starts_with("alias.")) {
                    self.hidden(format!("the git alias `{w}` takes from the environment"));
                }
                continue;
            } else {
                continue;
            };
            match value {
                Some(Word::Literal(v)) => {
                    if let Some((key, body)) = v.split_once('=')
                        && let Some(name) = key.strip_prefix("alias.")
                    {
                        definitions.push((name.to_owned(), body.to_owned()));
                    }
                }
                Some(Word::Hidden(h)) => {
                    self.hidden(format!("{} given to `git -c` (it may define an alias)", h.what));
                }
                None => {}
            }
        }
        let Some(Word::Literal(sub)) = view.get(1) else {
            return;
        };
        let Some((_, body)) = definitions.iter().rev().find(|(n, _)| n == sub) else {
            return;
        };
        let args = &view[2..];
        if let Some(command) = body.strip_prefix('!') {
            let mut script = command.to_owned();
            for a in args {
                script.push(' ');
                match a {
                    Word::Literal(s) => script.push_str(&quote(s)),
                    Word::Hidden(_) => script.push_str("\"${HIDDEN_ARGUMENT}\""),
                }
            }
            self.scripts.push(script);
        } else {
            match split_words(body) {
                Ok(expanded) => {
                    let mut again = vec![view[0].clone()];
                    again.extend(expanded.into_iter().map(Word::Literal));
                    again.extend(args.iter().cloned());
                    self.explore(again, stdin, depth + 1);
                }
                Err(_) => self.hidden(format!("what the git alias `{sub}` runs")),
            }
        }
    }

    fn eval(&mut self, rest: &[Word]) {
        let mut script = Vec::new();
        for w in rest {
            match w {
                Word::Literal(s) => script.push(s.as_str()),
                Word::Hidden(h) => {
                    self.hidden(format!("{} given to `eval`", h.what));
                    return;
                }
            }
        }
        if !script.is_empty() {
            self.scripts.push(script.join(" "));
        }
    }

    fn trap(&mut self, rest: &[Word]) {
        let mut i = 0;
        while let Some(w) = rest.get(i).and_then(Word::as_literal) {
            if w == "--" {
                i += 1;
                break;
            }
            if matches!(w, "-p" | "-l" | "-P") {
                return;
            }
            if !w.starts_with('-') || w == "-" {
                break;
            }
            i += 1;
        }
        let operands = rest.get(i..).unwrap_or_default();
        if operands.len() < 2 {
            return;
        }
        match &operands[0] {
            Word::Literal(action) if action.is_empty() || action == "-" => {}
            Word::Literal(action) => self.scripts.push(action.clone()),
            Word::Hidden(h) => self.hidden(format!("{} given to `trap`", h.what)),
        }
    }
}
