//! What the rules are told about an exec ([`ExecFacts`]: its argv, which known programs its
//! file is, git's aliases, whether what it runs is opaque) and their verdict on it.

use std::path::Path;

use bridle_policy::Verdict;
use bridle_policy::rules::ExecFacts;
use nix::unistd::Pid;

use super::identity::Identity;
use super::tracee::{self, ExecRead};
use super::{LOADER, Stage, Supervisor, cargo, git, git_correct, node};

impl Supervisor {
    /// The rules' verdict on an exec. For the dynamic loader run as a program, also on the
    /// program it names, as what that file is now (it could change before the loader opens
    /// it, which is why the exec also asks as opaque): the stricter verdict wins.
    pub(super) fn decide(&mut self, pid: Pid, read: &ExecRead, facts: &ExecFacts) -> Verdict {
        let verdict = self.rules.decide(facts);
        if facts.opaque.is_none() {
            return verdict;
        }
        let Some(argv) = loaded_program(&read.argv) else {
            return verdict;
        };
        let Ok(cwd) = read.cwd(pid) else {
            return verdict;
        };
        let path = cwd.join(&argv[0]);
        let Ok(file) = program_file(&path) else {
            return verdict;
        };
        let names = self.identity.names_of(&file, || open_program(&path));
        let loaded = ExecFacts {
            argv,
            same_as: names.into_iter().filter(|n| n != LOADER).collect(),
            ..ExecFacts::default()
        };
        let other = self.rules.decide(&loaded);
        if other.decision > verdict.decision {
            other
        } else {
            verdict
        }
    }

    /// What the rules need to know about `read`, whose file is `file` (`open` opens it, should
    /// its content be needed; the environment and the working directory are read for git's
    /// configuration and the dynamic loader); `also`: the known programs it runs besides (its
    /// program interpreter, where that is one).
    pub(super) fn facts(
        &mut self,
        pid: Pid,
        read: &ExecRead,
        file: &std::fs::Metadata,
        open: impl Fn() -> std::io::Result<std::fs::File>,
        also: &[String],
        stage: Stage,
    ) -> ExecFacts {
        let argv0 = read
            .argv
            .first()
            .map(|a| a.rsplit('/').next().unwrap_or(a).to_owned())
            .unwrap_or_default();
        let mut names = self.identity.names_of(file, &open);
        // Called by one of its own names, a program is what that name says (a multi-call
        // program decides by its name); under another name it is each program it is.
        let multi_call = self.identity.is_multi_call(file);
        let mut same_as = if multi_call || self.identity.is_known_as(&names, &argv0) {
            Vec::new()
        } else {
            names.clone()
        };
        // Its interpreter runs instead of it, whatever name it is called by: `git status`
        // whose file names a static denied program as its interpreter runs that program
        // (found by a twelfth red-team pass on 2026-12-08).
        for name in also {
            if !same_as.contains(name) {
                same_as.push(name.clone());
            }
            if !names.contains(name) {
                names.push(name.clone());
            }
        }
        // git called as `git-SUB` (the hard links in its exec path) runs the builtin SUB, or
        // dies: no alias, no correction. The rules read that name as `git SUB` themselves.
        let dashed = argv0
            .strip_prefix("git-")
            .is_some_and(|sub| !sub.is_empty());
        if dashed {
            same_as.retain(|n| n != "git");
        }
        let mut facts = ExecFacts {
            argv: read.argv.clone(),
            same_as: Vec::new(),
            git_aliases: Vec::new(),
            cargo_aliases: Vec::new(),
            instead: Vec::new(),
            opaque: None,
        };
        // A multi-call binary called by its own name runs the applet its first argument names.
        if multi_call && Identity::calls_multi_call_itself(&argv0) && read.argv.len() > 1 {
            facts.instead.push(read.argv[1..].to_vec());
        }
        let env = || match stage {
            Stage::Before => tracee::env_before_exec(pid, read.envp),
            Stage::After => tracee::env_after_exec(pid),
        };
        if names.iter().any(|n| n == LOADER) {
            let options = std::cell::OnceCell::new();
            let knows = |option: &str| {
                options
                    .get_or_init(|| open().map(|f| loader_options(&f)).unwrap_or_default())
                    .iter()
                    .any(|o| o == option)
            };
            facts.opaque = loader_runs(pid, read, &env, &knows);
        }
        let is_git =
            argv0 == "git" || argv0.starts_with("git-") || names.iter().any(|n| n == "git");
        if self.names_git && is_git && !dashed {
            // Unreadable: the aliases of the command line itself are still expanded.
            let env = env().ok();
            if let (Some(env), Ok(cwd)) = (&env, read.cwd(pid)) {
                facts.git_aliases = git::aliases(&read.argv, env.first(), &cwd);
            }
            facts.instead.extend(git_correct::corrections(
                &read.argv,
                env.as_ref().map(tracee::Environment::first),
                self.settler.as_mut(),
            ));
        }
        // A rustup proxy is what it is called (`rustc` through it is rustc, not cargo).
        let is_cargo = argv0 == "cargo" || (!multi_call && names.iter().any(|n| n == "cargo"));
        if self.names_cargo && is_cargo {
            // cargo expands an alias in its own process (found by a red-team pass on
            // 2026-12-07: `cargo p` with `alias.p = "publish"` published). Config that cannot
            // be read in full leaves what cargo runs unknown.
            match (env(), read.cwd(pid)) {
                (Ok(env), Ok(cwd)) => {
                    let aliases = cargo::aliases(&read.argv, env.entries(), &cwd);
                    facts.cargo_aliases = aliases.found;
                    if let Some(why) = aliases.incomplete {
                        facts.opaque.get_or_insert_with(|| {
                            format!("the aliases of cargo's config ({why})")
                        });
                    }
                }
                _ => {
                    facts.opaque.get_or_insert_with(|| {
                        "the aliases of cargo's config (its environment or directory is unreadable)"
                            .into()
                    });
                }
            }
        }
        // An interpreter running a program file runs that file as the program it is, by
        // identity too (`node .../npm-cli.js publish` is `npm publish`; found by a red-team
        // pass on 2026-12-07, where only the file's name was matched).
        // An interpreter called by another name is read as the interpreter its file is.
        let renamed: Vec<Vec<String>> = same_as
            .iter()
            .map(|name| {
                let mut argv = vec![name.clone()];
                argv.extend(read.argv.iter().skip(1).cloned());
                argv
            })
            .collect();
        for argv in std::iter::once(&read.argv).chain(renamed.iter()) {
            let node = bridle_policy::rules::is_node(argv);
            for at in bridle_policy::rules::script_operands(argv) {
                for name in self.known_as(pid, read, &argv[at], node) {
                    let mut instead = vec![name];
                    instead.extend(argv[at + 1..].iter().cloned());
                    facts.instead.push(instead);
                }
            }
        }
        // valgrind loads the program it runs into its own process: that program is decided as
        // the file it is too (`valgrind ./copy-of-git push`; found by review on 2026-12-07).
        for argv in std::iter::once(&read.argv).chain(renamed.iter()) {
            let Some(at) = valgrind_program(argv) else {
                continue;
            };
            let word = &argv[at];
            let names = if word.contains('/') {
                self.known_as(pid, read, word, false)
            } else {
                // valgrind looks for a bare name on `PATH`; with no environment to read, what
                // it runs is unknown.
                let path = match env() {
                    Ok(e) => e.get("PATH").cloned().unwrap_or_default(),
                    Err(why) => {
                        facts.opaque.get_or_insert_with(|| {
                            format!("the program valgrind runs (its environment: {})", why.0)
                        });
                        String::new()
                    }
                };
                let mut names = Vec::new();
                for dir in path.split(':').filter(|d| !d.is_empty()) {
                    if let Some(dir) = operand_path(pid, read, dir) {
                        names.extend(self.known_path(dir.join(word), false));
                    }
                }
                names
            };
            for name in names {
                let mut instead = vec![name];
                instead.extend(argv[at + 1..].iter().cloned());
                facts.instead.push(instead);
            }
        }
        // node's preloads run in its process with its arguments: each is decided as the
        // program it is, with each tail of the arguments (what it takes for its own depends
        // on the program).
        for argv in std::iter::once(&read.argv).chain(renamed.iter()) {
            if !bridle_policy::rules::is_node(argv) {
                continue;
            }
            let environment = env();
            let settings = node::options(pid, read, argv, &environment, &mut facts);
            let options = &settings.options;
            if let Some(option) = bridle_policy::rules::node_unread_option(argv, options) {
                facts.opaque.get_or_insert_with(|| {
                    format!("what node preloads (`{option}` names a file of settings)")
                });
            }
            for preload in bridle_policy::rules::node_preloads(argv, options) {
                let env = environment.as_ref().ok();
                for name in self.preloaded_as(pid, read, &preload, env, &settings.paths) {
                    // Past the cap a tail goes unread: what the preload runs is unknown.
                    if argv.len() > MAX_PRELOAD_TAILS + 1 {
                        facts.opaque.get_or_insert_with(|| {
                            format!("what `{name}` preloaded by node runs (too many arguments)")
                        });
                    }
                    for from in (1..argv.len()).take(MAX_PRELOAD_TAILS) {
                        let mut instead = vec![name.clone()];
                        instead.extend(argv[from..].iter().cloned());
                        facts.instead.push(instead);
                    }
                }
            }
        }
        same_as.retain(|n| n != LOADER);
        facts.same_as = same_as;
        facts
    }
}

impl Supervisor {
    /// The known programs (not the loader) the file `word` names for the process `pid` is:
    /// an interpreter's program file or a file node preloads.
    /// `node`: the file is node's, which adds an extension to a name that is no file (`node
    /// .../bin/npm-cli publish` runs `npm-cli.js`).
    /// node resolves `..` in the text before it looks at the disk (`/nope/../x.js` is
    /// `/x.js`; found by review on 2026-12-07), so for node that form is looked at too.
    pub(super) fn known_as(
        &mut self,
        pid: Pid,
        read: &ExecRead,
        word: &str,
        node: bool,
    ) -> Vec<String> {
        let Some(path) = operand_path(pid, read, word) else {
            return Vec::new();
        };
        let mut names = Vec::new();
        if node {
            let textual = super::config_file::lexical(&path);
            if textual != path {
                names = self.known_path(textual, true);
            }
        }
        names.extend(self.known_path(path, node));
        names.sort();
        names.dedup();
        names
    }

    /// The known programs (not the loader) the file at `path` is (with node's extension where
    /// `node` and the path names no file).
    pub(super) fn known_path(&mut self, mut path: std::path::PathBuf, node: bool) -> Vec<String> {
        let mut file = program_file(&path);
        if file.is_err() && node {
            for extension in node::EXTENSIONS {
                let mut with = path.clone().into_os_string();
                with.push(extension);
                file = program_file(Path::new(&with));
                if file.is_ok() {
                    path = with.into();
                    break;
                }
            }
        }
        let Ok(file) = file else {
            return Vec::new();
        };
        let mut names = self.identity.names_of(&file, || open_program(&path));
        names.retain(|n| n != LOADER);
        names
    }
}

/// For an exec of valgrind (by the name it is called), the index of the program it runs: its
/// first word after its options (every option of valgrind's is one word, `--NAME=VALUE`).
fn valgrind_program(argv: &[String]) -> Option<usize> {
    let name = argv.first()?.rsplit('/').next()?;
    if !matches!(name, "valgrind" | "valgrind.bin") {
        return None;
    }
    let at = argv
        .iter()
        .skip(1)
        .position(|w| !w.starts_with('-') || w == "--")?
        + 1;
    if argv[at] == "--" {
        return (at + 1 < argv.len()).then_some(at + 1);
    }
    Some(at)
}

/// The most tails of node's arguments decided for one preloaded program.
const MAX_PRELOAD_TAILS: usize = 16;

/// The file an interpreter's program operand names for the process `pid`: relative to its
/// working directory, and its own `/proc/self`, `/dev/fd` and `/dev/stdin` are its, not the
/// supervisor's.
pub(super) fn operand_path(pid: Pid, read: &ExecRead, operand: &str) -> Option<std::path::PathBuf> {
    let own = |rest: &str| Some(std::path::PathBuf::from(format!("/proc/{pid}/{rest}")));
    if let Some(rest) = operand
        .strip_prefix("/proc/self/")
        .or_else(|| operand.strip_prefix("/proc/thread-self/"))
    {
        return own(rest);
    }
    if let Some(fd) = operand.strip_prefix("/dev/fd/") {
        return own(&format!("fd/{fd}"));
    }
    if let Some(n) = ["/dev/stdin", "/dev/stdout", "/dev/stderr"]
        .iter()
        .position(|d| *d == operand)
    {
        return own(&format!("fd/{n}"));
    }
    if operand.starts_with('/') {
        return Some(operand.into());
    }
    read.cwd(pid).ok().map(|cwd| cwd.join(operand))
}

/// What the program an exec names is (`stat`, symlinks followed): a regular file, or an error.
pub(super) fn program_file(path: &Path) -> std::io::Result<std::fs::Metadata> {
    let meta = std::fs::metadata(path)?;
    if meta.is_file() {
        Ok(meta)
    } else {
        Err(std::io::Error::other("not a regular file"))
    }
}

/// Opens the program an exec names, for its content (never blocking on a FIFO).
pub(super) fn open_program(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NONBLOCK | nix::libc::O_NOCTTY)
        .open(path)?;
    if file.metadata()?.is_file() {
        Ok(file)
    } else {
        Err(std::io::Error::other("not a regular file"))
    }
}

/// The dynamic loader's options that run no program in a glibc that has them (2.33 and later:
/// `--help`, `--version`, `--list-tunables`; 2.35: `--list-diagnostics`). An older loader takes
/// such a word for the file to run, so each counts only where the loader's own file names it.
const LOADER_RUNS_NOTHING_WHERE_KNOWN: &[&str] = &[
    "--help",
    "--version",
    "--list-tunables",
    "--list-diagnostics",
];

/// Which of [`LOADER_RUNS_NOTHING_WHERE_KNOWN`] the loader open as `file` knows: the ones its
/// file holds as a string of their own (its option table). The file is a known loader (by
/// inode or content), not one the sandbox made.
fn loader_options(file: &std::fs::File) -> Vec<String> {
    const MAX_LOADER_SIZE: u64 = 16 << 20;
    let mut bytes = Vec::new();
    if std::io::Read::read_to_end(&mut std::io::Read::take(file, MAX_LOADER_SIZE), &mut bytes)
        .is_err()
    {
        return Vec::new();
    }
    LOADER_RUNS_NOTHING_WHERE_KNOWN
        .iter()
        .filter(|option| {
            let mut needle = vec![0];
            needle.extend_from_slice(option.as_bytes());
            needle.push(0);
            bytes.windows(needle.len()).any(|w| w == needle.as_slice())
        })
        .map(|o| (*o).to_owned())
        .collect()
}

/// The dynamic loader run as a program loads a file it opens after the exec, which the
/// supervisor cannot pin: what it runs is opaque, unless it runs nothing (`--list`, `--verify`
/// and the like, `--version` where the loader knows it, as `ldd` runs it, or
/// `LD_TRACE_LOADED_OBJECTS`, as `ldd` does). `knows` says whether the loader knows an option.
pub(super) fn loader_runs(
    pid: Pid,
    read: &ExecRead,
    env: &dyn Fn() -> Result<tracee::Environment, tracee::Unreadable>,
    knows: &dyn Fn(&str) -> bool,
) -> Option<String> {
    const RUNS_NOTHING: &[&str] = bridle_policy::rules::LOADER_RUNS_NOTHING;
    const WITH_VALUE: &[&str] = bridle_policy::rules::LOADER_WITH_VALUE;
    // Among its options, not as the value of one (`--library-path --list git push` runs git;
    // found by an eighth red-team pass).
    let mut i = 1;
    while let Some(word) = read
        .argv
        .get(i)
        .filter(|w| w.starts_with("--") && *w != "--")
    {
        if RUNS_NOTHING.contains(&word.as_str())
            || (LOADER_RUNS_NOTHING_WHERE_KNOWN.contains(&word.as_str()) && knows(word))
        {
            return None;
        }
        i += if WITH_VALUE.contains(&word.as_str()) {
            2
        } else {
            1
        };
    }
    if read.argv.len() < 2 {
        return None;
    }
    if env().is_ok_and(|e| {
        e.get("LD_TRACE_LOADED_OBJECTS")
            .is_some_and(|v| !v.is_empty())
    }) {
        return None;
    }
    Some(format!(
        "the program the dynamic loader `{}` loads (a file it opens after the exec)",
        read.program(pid).display()
    ))
}

/// The argv of the program the dynamic loader, run as `argv`, loads: its first operand and
/// what follows (`--argv0 NAME` does not change which file it is).
pub(super) fn loaded_program(argv: &[String]) -> Option<Vec<String>> {
    const WITH_VALUE: &[&str] = bridle_policy::rules::LOADER_WITH_VALUE;
    let mut i = 1;
    while let Some(word) = argv.get(i) {
        if word == "--" {
            i += 1;
            break;
        }
        if !word.starts_with("--") {
            break;
        }
        i += if WITH_VALUE.contains(&word.as_str()) {
            2
        } else {
            1
        };
    }
    argv.get(i..)
        .filter(|rest| !rest.is_empty())
        .map(<[String]>::to_vec)
}
