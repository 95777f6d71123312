//! The table itself: every program the rule engine knows by name, and what it does with its
//! arguments ([`PROGRAMS`]).

use super::options::{
    NODE_FLAGS, NODE_WITH_VALUE, NPM_SHORT_FLAGS, PNPM_SHORT_FLAGS, RUBY_FLAGS, YARN_SHORT_FLAGS,
};
use super::subcommands::{CARGO, GEM, NPM};
use super::{Aliases, GIT_WITH_VALUE, LOADER_RUNS_NOTHING, LOADER_WITH_VALUE, Program, Role};

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
        role: Role::Interpreter {
            modules: false,
            long_flags: None,
        },
    }
}

/// Every program command rules look through, and how. This table is the documented list (the
/// README's rules section repeats it). Rules are evaluated against the command as written and
/// against every view below; the strictest decision wins.
///
/// Wrappers (options skipped, then the command they run is a view):
/// - `env` (`-i`, `-0`, `-v`, `-`, `-u NAME`, `-C DIR`, `NAME=VALUE`; `-S STRING` is split into
///   words and read again)
/// - `busybox`, `toybox` (multi-call binaries called by their own name: the first argument is
///   the applet)
/// - `nice` (`-n N`, `-N`), `valgrind` (options with `=` only), `nohup`, `setsid`, `stdbuf` (`-i/-o/-e MODE`), `ionice`
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
///   shell's script file); a long option of node or ruby in neither of their lists
///   (`options.rs`) may take the next word, so both readings are views
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
/// - `cargo`: `+TOOLCHAIN`, `--color`, `--config`, `-C`, `-Z` (with a value), flags. Its
///   built-in aliases (`b`, `c`, `d`, `r`, `t`, `rm`) and `--config alias.NAME=VALUE` on the
///   same command line are expanded; aliases from cargo's config files and `CARGO_ALIAS_*`
///   are read by the exec supervisor (see [`crate::rules::ExecFacts::cargo_aliases`]).
/// - `npm` (`--prefix`, `-C`, `--registry`, `-w`/`--workspace`, `--userconfig`, ...), `pnpm`
///   (`-C`/`--dir`, `-F`/`--filter`, ...), `yarn` (`--cwd`, ...; `yarn workspace NAME CMD`,
///   `yarn npm CMD`): an unknown long option may take a value, so both readings are views.
///   npm's aliases, `camelCase` and prefixes name its commands (`npm pub` is `npm publish`);
///   a single-dash option of npm, pnpm or yarn not listed as a flag may take a value (`npm
///   -tag beta publish`); `npm stage CMD`, `pnpm m|multi|recursive CMD`, `yarn npm CMD`, `yarn
///   workspaces foreach ... CMD` are `CMD`'s; `yarnpkg` is yarn
/// - `gem` (`--config-file`, `-C`): its aliases, prefixes and case name its commands (`gem
///   PU` is `gem push`); `twine` (flags only)
/// - `corepack [OPTIONS] NAME[@VERSION] ARGS`: `NAME ARGS` (corepack runs it in its own process)
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
pub(in crate::rules) const PROGRAMS: &[Program] = &[
    Program {
        names: &["env"],
        with_value: &["-u", "-C", "-S", "--unset", "--chdir", "--split-string"],
        special: &[],
        role: Role::Env,
    },
    wrapper(&["nice"], &["-n", "--adjustment"], &[]),
    // valgrind loads the program into its own process, as the dynamic loader does (found by a
    // red-team pass on 2026-12-07); its options take values after `=` only.
    wrapper(
        &["valgrind", "valgrind.bin"],
        &[],
        &["--help", "-h", "--version", "--help-debug"],
    ),
    wrapper(&["nohup", "setsid", "builtin", "coproc"], &[], &[]),
    // Multi-call binaries run the applet their first argument names (`busybox wget URL`).
    wrapper(&["busybox", "toybox"], &[], &[]),
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
        with_value: &["-W", "-X", "--check-hash-based-pycs", "--jit"],
        special: &["-c", "-m"],
        role: Role::Interpreter {
            modules: true,
            long_flags: None,
        },
    },
    interpreter(&["perl"], &["-I", "-M", "-m"], &["-e", "-E"]),
    // node takes `--NAME VALUE` for many options; an unknown one is read both ways (found by
    // a red-team pass on 2026-12-07: `node --disable-warning DEP0040 .../npm-cli.js publish`).
    Program {
        role: Role::Interpreter {
            modules: false,
            long_flags: Some(NODE_FLAGS),
        },
        ..interpreter(
            &["node", "nodejs"],
            NODE_WITH_VALUE,
            &["-e", "-p", "--eval", "--print"],
        )
    },
    Program {
        role: Role::Interpreter {
            modules: false,
            long_flags: Some(RUBY_FLAGS),
        },
        ..interpreter(&["ruby"], &["-r", "-I", "-C", "-E"], &["-e"])
    },
    interpreter(&["php"], &["-d", "-c"], &["-r"]),
    interpreter(&["lua"], &["-l"], &["-e"]),
    interpreter(&["Rscript"], &[], &["-e"]),
    interpreter(&["tclsh"], &[], &[]),
    Program {
        names: &["git"],
        with_value: GIT_WITH_VALUE,
        special: &[],
        role: Role::Subcommands {
            aliases: Aliases::Git,
            names: None,
            nested: &[],
            groups: &[],
            unknown_long_takes_value: false,
            short_flags: None,
        },
    },
    Program {
        names: &["cargo"],
        with_value: &["--color", "--config", "-C", "-Z", "--explain"],
        special: &[],
        role: Role::Subcommands {
            aliases: Aliases::Cargo,
            names: Some(&CARGO),
            nested: &[],
            groups: &[],
            unknown_long_takes_value: false,
            short_flags: None,
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
            aliases: Aliases::None,
            names: Some(&NPM),
            nested: &[],
            // `npm stage publish` (npm 11) uploads like `npm publish`.
            groups: &["stage"],
            unknown_long_takes_value: true,
            short_flags: Some(NPM_SHORT_FLAGS),
        },
    },
    Program {
        names: &["pnpm"],
        with_value: &["-C", "--dir", "-F", "--filter", "--reporter", "--loglevel"],
        special: &[],
        role: Role::Subcommands {
            aliases: Aliases::None,
            names: None,
            nested: &[],
            // `pnpm m publish` is `pnpm -r publish`.
            groups: &["m", "multi", "recursive"],
            unknown_long_takes_value: true,
            short_flags: Some(PNPM_SHORT_FLAGS),
        },
    },
    Program {
        names: &["yarn", "yarnpkg"],
        with_value: &["--cwd", "--registry", "--modules-folder", "--cache-folder"],
        special: &[],
        role: Role::Subcommands {
            aliases: Aliases::None,
            names: None,
            nested: &["workspace"],
            // `yarn npm publish` (Yarn 2 and later), `yarn workspaces foreach -A npm publish`.
            groups: &["npm", "workspaces", "foreach"],
            unknown_long_takes_value: true,
            short_flags: Some(YARN_SHORT_FLAGS),
        },
    },
    Program {
        names: &["gem"],
        with_value: &["--config-file", "-C"],
        special: &[],
        role: Role::Subcommands {
            aliases: Aliases::None,
            names: Some(&GEM),
            nested: &[],
            groups: &[],
            unknown_long_takes_value: false,
            short_flags: None,
        },
    },
    Program {
        names: &["twine"],
        with_value: &[],
        special: &[],
        role: Role::Subcommands {
            aliases: Aliases::None,
            names: None,
            nested: &[],
            groups: &[],
            unknown_long_takes_value: false,
            short_flags: None,
        },
    },
    Program {
        names: &["corepack", "corepack.js"],
        with_value: &[],
        special: &[],
        role: Role::Corepack,
    },
    role(&["eval"], Role::Eval),
    role(&["source", "."], Role::Source),
    role(&["alias"], Role::Alias),
    role(&["shopt"], Role::Shopt),
    role(
        &[
            "declare",
            "typeset",
            "local",
            "export",
            "readonly",
            "read",
            "mapfile",
            "readarray",
            "compgen",
            "printf",
        ],
        Role::SetsVariables,
    ),
    role(&["trap"], Role::Trap),
];
