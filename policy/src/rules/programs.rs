//! What programs do with their arguments: the one table of wrappers, shells, interpreters,
//! programs with global options, and shell builtins that run code ([`PROGRAMS`]), and reading
//! their options.

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

/// The dynamic loader's options (run as a program) with which it runs no program.
pub const LOADER_RUNS_NOTHING: &[&str] = &[
    "--list",
    "--verify",
    "--help",
    "--version",
    "--list-tunables",
    "--list-diagnostics",
];

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
    Interpreter { modules: bool },
    /// `flock [OPTIONS] FILE COMMAND...` or `flock FILE -c SCRIPT`.
    Flock,
    /// `watch [OPTIONS] COMMAND...`: the words are joined and run by `sh -c` (`-x`: as
    /// they are).
    Watch,
    /// `uv run`, `poetry run`, `bundle exec`: options, the subcommand, its options, then the
    /// command it runs.
    Runner { subcommand: &'static str },
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
        role: Role::Interpreter { modules: false },
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
/// - `sudo` (options, `-u USER` and the other valued ones, `NAME=VALUE`; `-e/-l/-v/-V/-K` run
///   nothing), `doas` (`-u USER`), `pkexec` (`--user USER`)
/// - `command` (`-p`; `-v`/`-V` run nothing), `exec` (`-a NAME`, `-c`, `-l`), `builtin`,
///   `coproc`, `luit` (`-encoding NAME`, ...), `chroot` (options, then the new root)
/// - `flock` (`-w SECS`, ..., then the lock file; `-c SCRIPT` is parsed as a script)
/// - `watch` (`-n SECS`, ...; the words are joined and parsed as the script `sh -c` runs; with
///   `-x`, they are the command)
/// - `uv run`, `poetry run`, `bundle exec` (the program's and the subcommand's options; an
///   unknown long option may take a value, so both readings are views)
/// - `xargs` (options; the lines it reads are hidden arguments appended, or in place of the
///   `-I`/`-i` string, where a `sh -c` script around them is still parsed)
/// - `find` (`-exec`, `-execdir`, `-ok`, `-okdir` ... `;` or `+`; `{}` is hidden, likewise)
/// - the dynamic loader run as a program (`ld.so`, `ld-linux-x86-64.so.2`, ...: `--library-path`,
///   `--preload`, `--argv0`, `--audit` and the other valued options, then the program it loads;
///   `--list`, `--verify`, `--help`, `--version` run nothing)
///
/// Shells and interpreters:
/// - `sh`, `bash`, `dash`, `zsh`, `ksh`, `mksh`, `ash`, `fish`: `-c SCRIPT` (also in a cluster
///   such as `-ec`, `-lc`) is parsed as a script, recursively (bounded depth); so is a here
///   document or here string it reads when its text is literal (a quoted delimiter, or nothing
///   to expand); a script read from a pipe, a `<` redirection or an expanding here document is
///   hidden; a script file runs like any program, and is also a view itself (`sh deploy.sh
///   prod` is seen as `deploy.sh prod` too, which is how a `#!` script reaches the kernel)
/// - `su` (`-c SCRIPT`, `--command SCRIPT`)
/// - `python`, `pypy` (`-m MODULE ARGS` runs like the program MODULE: `python -m twine
///   upload`), `perl`, `ruby`, `node`, `nodejs`, `php`, `lua`, `Rscript`, `tclsh`: a program
///   read from a pipe, here document, here string or redirection is hidden; `-c`/`-e` code
///   and program files run like any program (a program file is also a view itself, like a
///   shell's script file)
///
/// Programs with global options before their subcommand (the subcommand comes right after the
/// program name in the view):
/// - `git`: `-C PATH`, `-c NAME=VALUE`, `--git-dir`, `--work-tree`, `--namespace`,
///   `--super-prefix`, `--config-env`, `--attr-source` (each with a value), `--no-pager`, `-P`,
///   `-p`, `--paginate`, `--bare`, `--exec-path[=PATH]`, `--no-replace-objects`,
///   `--*-pathspecs`, `--no-optional-locks`, `--no-advice`, ... (any flag). `-c
///   alias.NAME=VALUE` given on the same command line is expanded: a `!` alias is parsed as the
///   shell command it runs. In a command line, aliases from git config files are not read;
///   the exec supervisor reads them (see [`crate::rules::ExecFacts::git_aliases`]). `git-SUB`
///   (git's dashed form, the name of the links in its exec path) is seen as `git SUB`.
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
/// Not looked through in a command line: `npx` and `pnpm dlx`, remote commands (`ssh host CMD`,
/// `docker run`), `parallel`, and programs that run configured commands (`make`, git hooks,
/// `core.pager`, aliases in git config files). The exec supervisor checks every program they
/// start, and the kernel sandbox confines whatever they run.
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
    wrapper(
        &["luit"],
        &[
            "-encoding",
            "-argv0",
            "-ilog",
            "-olog",
            "-alt",
            "-gl",
            "-gr",
            "-g0",
            "-g1",
            "-g2",
            "-g3",
        ],
        &["-list", "-h"],
    ),
    Program {
        names: &["chroot"],
        with_value: &["--userspec", "--groups"],
        special: &[],
        role: Role::Wrapper {
            positional: 1,
            assignments: false,
        },
    },
    Program {
        names: &["flock"],
        with_value: &["-w", "--timeout", "-E", "--conflict-exit-code"],
        special: &[],
        role: Role::Flock,
    },
    Program {
        names: &["watch"],
        with_value: &["-n", "--interval", "-q", "--equexit"],
        special: &[],
        role: Role::Watch,
    },
    Program {
        names: &["uv"],
        with_value: &[
            "--with",
            "--with-requirements",
            "--with-editable",
            "--python",
            "-p",
            "--directory",
            "--project",
            "--env-file",
            "--package",
            "--extra",
            "--group",
            "--index",
            "--from",
            "--cache-dir",
            "--config-file",
        ],
        special: &[],
        role: Role::Runner { subcommand: "run" },
    },
    Program {
        names: &["poetry"],
        with_value: &["-C", "--directory", "-P", "--project"],
        special: &[],
        role: Role::Runner { subcommand: "run" },
    },
    Program {
        names: &["bundle"],
        with_value: &["--gemfile"],
        special: &[],
        role: Role::Runner { subcommand: "exec" },
    },
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
    wrapper(
        &[
            "ld.so",
            "ld-linux-x86-64.so.2",
            "ld-linux-aarch64.so.1",
            "ld-linux.so.2",
            "ld64.so.1",
            "ld64.so.2",
        ],
        LOADER_WITH_VALUE,
        LOADER_RUNS_NOTHING,
    ),
    Program {
        names: &["sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "fish"],
        with_value: &["-o", "+o", "-O", "+O", "--rcfile", "--init-file"],
        special: &[],
        role: Role::Shell,
    },
    role(&["su"], Role::Su),
    Program {
        names: &["python", "pypy"],
        with_value: &["-W", "-X"],
        special: &["-c", "-m"],
        role: Role::Interpreter { modules: true },
    },
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
        with_value: GIT_WITH_VALUE,
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
    pub(super) fn operand_starts(&self, words: &[Word]) -> Vec<usize> {
        let mut starts = Vec::new();
        let mut frontier = vec![0usize];
        let mut steps = 0;
        while let Some(i) = frontier.pop() {
            steps += 1;
            if steps > 256 {
                break;
            }
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
