//! git aliases from the config git will read for one exec of git: the system and global
//! files (or what `GIT_CONFIG_SYSTEM`, `GIT_CONFIG_GLOBAL`, `GIT_CONFIG_NOSYSTEM` say), the
//! repository's (`--git-dir`, `GIT_DIR`, or found from the working directory after `-C`,
//! with `commondir` and `config.worktree`), the files they include (`include.path` and every
//! `includeIf`, whatever its condition), `GIT_CONFIG_PARAMETERS`, `GIT_CONFIG_COUNT` and
//! `--config-env`. (`-c` on the command line is read by the rule engine itself.)
//!
//! Every definition found is a candidate and the strictest decision wins, so precedence needs
//! no modelling. The files are read at the exec of git; one changed afterwards is caught when
//! git runs the alias: git runs an alias of a builtin command as a new `git BUILTIN ...`
//! process and a `!` alias through `sh -c`, and each is an exec the supervisor decides.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use bridle_policy::git_config;

use super::config_file::{self, ConfigFile};

/// The most config files read for one exec (includes included).
const MAX_FILES: usize = 64;

/// git's global options that take a value (the rule engine's table).
const WITH_VALUE: &[&str] = bridle_policy::rules::GIT_WITH_VALUE;

/// What git's global options say about where it reads config.
#[derive(Debug, Default, PartialEq, Eq)]
struct Options {
    /// The directory after every `-C`.
    cwd: PathBuf,
    git_dir: Option<PathBuf>,
    /// `--config-env NAME=ENVVAR`.
    config_env: Vec<(String, String)>,
}

fn options(argv: &[String], cwd: &Path) -> Options {
    let mut out = Options {
        cwd: cwd.to_path_buf(),
        ..Options::default()
    };
    for (name, value) in global_options(argv).0 {
        let Some(value) = value else { continue };
        match name {
            "-C" => out.cwd = out.cwd.join(value),
            "--git-dir" => out.git_dir = Some(out.cwd.join(value)),
            "--config-env" => {
                if let Some((key, var)) = value.split_once('=') {
                    out.config_env.push((key.to_owned(), var.to_owned()));
                }
            }
            _ => {}
        }
    }
    out
}

/// git's global options in `argv` (each name with its value: after `=` for a long option, or
/// the next word for one that takes a value), and the index of the first word after them
/// (the subcommand's, if there is one).
pub(super) fn global_options(argv: &[String]) -> (Vec<(&str, Option<&str>)>, usize) {
    let mut found = Vec::new();
    let mut i = 1;
    while let Some(word) = argv.get(i) {
        if !word.starts_with('-') || word == "--" {
            break;
        }
        let (name, value) = match word.split_once('=') {
            Some((n, v)) if n.starts_with("--") => (n, Some(v)),
            _ if WITH_VALUE.contains(&word.as_str()) => {
                i += 1;
                (word.as_str(), argv.get(i).map(String::as_str))
            }
            _ => (word.as_str(), None),
        };
        found.push((name, value));
        i += 1;
    }
    (found, i)
}

/// The git directory for `cwd`: `.git` (a directory, or a file `gitdir: PATH`) in it or a
/// parent, or the first of them that is a git directory itself (a bare repository).
fn discover(cwd: &Path) -> Option<PathBuf> {
    for dir in cwd.ancestors() {
        let dot_git = dir.join(".git");
        if dot_git.is_dir() {
            return Some(dot_git);
        }
        if dot_git.is_file() {
            let text = read_small(&dot_git)?;
            let target = text.trim().strip_prefix("gitdir:")?.trim().to_owned();
            return Some(dir.join(target));
        }
        if dir.join("HEAD").is_file() && dir.join("objects").is_dir() {
            return Some(dir.to_path_buf());
        }
    }
    None
}

/// A regular file's text, read as [`config_file::read`] reads it (no FIFO stalls the
/// supervisor, no link into the process's own files is read as the supervisor's); `None`
/// for anything else.
pub(super) fn read_small(path: &Path) -> Option<String> {
    match config_file::read(path) {
        ConfigFile::Text(text) => Some(text),
        ConfigFile::Missing | ConfigFile::Unknown => None,
    }
}

fn truthy(value: Option<&String>) -> bool {
    value.is_some_and(|v| {
        matches!(
            v.trim().to_ascii_lowercase().as_str(),
            "1" | "true" | "yes" | "on"
        )
    })
}

/// The config files git reads first (before includes), in git's order.
fn config_files(opts: &Options, env: &BTreeMap<String, String>) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let home = env.get("HOME").map(PathBuf::from);
    if !truthy(env.get("GIT_CONFIG_NOSYSTEM")) {
        match env.get("GIT_CONFIG_SYSTEM") {
            Some(path) => files.push(opts.cwd.join(path)),
            None => files.extend(["/etc/gitconfig", "/usr/local/etc/gitconfig"].map(PathBuf::from)),
        }
    }
    match env.get("GIT_CONFIG_GLOBAL") {
        Some(path) => files.push(opts.cwd.join(path)),
        None => {
            match env.get("XDG_CONFIG_HOME") {
                Some(xdg) => files.push(Path::new(xdg).join("git/config")),
                None => files.extend(home.as_ref().map(|h| h.join(".config/git/config"))),
            }
            files.extend(home.as_ref().map(|h| h.join(".gitconfig")));
        }
    }
    if let Some(path) = env.get("GIT_CONFIG") {
        files.push(opts.cwd.join(path));
    }
    let git_dir = opts
        .git_dir
        .clone()
        .or_else(|| env.get("GIT_DIR").map(|d| opts.cwd.join(d)))
        .or_else(|| discover(&opts.cwd));
    if let Some(dir) = git_dir {
        files.push(dir.join("config"));
        if let Some(common) = read_small(&dir.join("commondir")) {
            files.push(dir.join(common.trim()).join("config"));
        }
        files.push(dir.join("config.worktree"));
    }
    files
}

/// The entries of `GIT_CONFIG_PARAMETERS`: `'key'='value'` (or the older `'key=value'`)
/// items, shell-quoted, separated by spaces.
fn parameters(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut chars = text.chars().peekable();
    let quoted = |chars: &mut std::iter::Peekable<std::str::Chars<'_>>| -> Option<String> {
        let mut s = String::new();
        if chars.next()? != '\'' {
            return None;
        }
        loop {
            match chars.next()? {
                '\'' => {
                    // `'\''` is an escaped quote inside the quoting.
                    if chars.peek() == Some(&'\\') {
                        chars.next();
                        chars.next();
                        chars.next();
                        s.push('\'');
                    } else {
                        return Some(s);
                    }
                }
                c => s.push(c),
            }
        }
    };
    while chars.peek().is_some() {
        while chars.peek() == Some(&' ') {
            chars.next();
        }
        if chars.peek().is_none() {
            break;
        }
        let Some(key) = quoted(&mut chars) else { break };
        if chars.peek() == Some(&'=') {
            chars.next();
            let Some(value) = quoted(&mut chars) else {
                break;
            };
            out.push((key, value));
        } else if let Some((k, v)) = key.split_once('=') {
            out.push((k.to_owned(), v.to_owned()));
        }
    }
    out
}

fn alias_of(key: &str, value: &str) -> Option<(String, String)> {
    let (section, name) = key.split_once('.')?;
    (section.eq_ignore_ascii_case("alias") && !name.contains('.'))
        .then(|| (name.to_ascii_lowercase(), value.to_owned()))
}

/// Whether git, run as `argv` with `env`, surely has an alias named `name`: one given on its
/// command line (`-c alias.NAME...`, also in `GIT_CONFIG_PARAMETERS`, where a parent git puts
/// its own), which git reads whatever its version and files. A definition git cannot parse
/// (`-c alias.NAME` with no value) stops it as surely. Only a name git compares as plain text
/// counts (a config variable's: ASCII letters, digits and `-`, case ignored), in both: a dot
/// makes a subsection, whose case git keeps, and a byte that is not UTF-8 was read here as
/// U+FFFD, which matches other bytes (a tenth red-team pass corrected `p\xff.h` to `push`
/// past an alias `P\xf0\x9f\x98.h` so).
pub(super) fn alias_given(
    argv: &[String],
    env: Option<&BTreeMap<String, String>>,
    name: &str,
) -> bool {
    let plain = |s: &str| {
        s.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
            && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
    };
    if !plain(name) {
        return false;
    }
    let names = |key: &str| {
        alias_of(key, "")
            .is_some_and(|(alias, _)| plain(&alias) && alias.eq_ignore_ascii_case(name))
    };
    let on_line = global_options(argv).0.iter().any(|(option, value)| {
        *option == "-c" && value.is_some_and(|v| names(v.split_once('=').map_or(v, |(k, _)| k)))
    });
    on_line
        || env
            .and_then(|e| e.get("GIT_CONFIG_PARAMETERS"))
            .is_some_and(|p| parameters(p).iter().any(|(k, _)| names(k)))
}

/// Every alias definition the config git reads for `argv` (run in `cwd` with `env`) makes.
pub fn aliases(
    argv: &[String],
    env: &BTreeMap<String, String>,
    cwd: &Path,
) -> Vec<(String, String)> {
    let opts = options(argv, cwd);
    let mut out = Vec::new();
    let home = env.get("HOME").map(PathBuf::from);
    let mut queue: Vec<PathBuf> = config_files(&opts, env);
    queue.reverse();
    let mut read = 0;
    while let Some(file) = queue.pop() {
        if read >= MAX_FILES {
            break;
        }
        read += 1;
        let Some(text) = read_small(&file) else {
            continue;
        };
        for entry in git_config::entries(&text) {
            if entry.section == "alias" && entry.subsection.is_none() {
                out.push((entry.key.clone(), entry.value.clone()));
            }
        }
        let base = file.parent().unwrap_or(Path::new("/")).to_path_buf();
        for include in git_config::include_paths(&text).into_iter().rev() {
            let path = match (include.strip_prefix("~/"), &home) {
                (Some(rest), Some(home)) => home.join(rest),
                _ => base.join(&include),
            };
            queue.push(path);
        }
    }
    if let Some(params) = env.get("GIT_CONFIG_PARAMETERS") {
        out.extend(
            parameters(params)
                .iter()
                .filter_map(|(k, v)| alias_of(k, v)),
        );
    }
    let count: usize = env
        .get("GIT_CONFIG_COUNT")
        .and_then(|c| c.trim().parse().ok())
        .unwrap_or(0);
    for i in 0..count.min(1024) {
        if let (Some(k), Some(v)) = (
            env.get(&format!("GIT_CONFIG_KEY_{i}")),
            env.get(&format!("GIT_CONFIG_VALUE_{i}")),
        ) {
            out.extend(alias_of(k, v));
        }
    }
    for (key, var) in &opts.config_env {
        if let Some(value) = env.get(var) {
            out.extend(alias_of(key, value));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    fn argv(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_owned).collect()
    }

    #[test]
    fn global_options_move_the_directory_and_name_the_git_dir() {
        let o = options(
            &argv("git -C a -C b --git-dir=g -c x=y --config-env alias.p=P p"),
            Path::new("/w"),
        );
        assert_eq!(o.cwd, Path::new("/w/a/b"));
        assert_eq!(o.git_dir.as_deref(), Some(Path::new("/w/a/b/g")));
        assert_eq!(o.config_env, vec![("alias.p".to_owned(), "P".to_owned())]);
    }

    #[test]
    fn parameters_are_read_in_both_formats() {
        assert_eq!(
            parameters("'alias.p'='push' 'core.x=y' 'alias.q'='!echo '\\''hi'\\'''"),
            vec![
                ("alias.p".to_owned(), "push".to_owned()),
                ("core.x".to_owned(), "y".to_owned()),
                ("alias.q".to_owned(), "!echo 'hi'".to_owned()),
            ]
        );
    }

    #[test]
    fn aliases_come_from_the_repository_global_includes_and_environment() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        let repo = dir.path().join("repo");
        std::fs::create_dir_all(repo.join(".git")).unwrap();
        std::fs::create_dir_all(repo.join("sub")).unwrap();
        std::fs::create_dir_all(&home).unwrap();
        std::fs::write(
            repo.join(".git/config"),
            "[alias]\n\tr = push\n[include]\n\tpath = extra.inc\n",
        )
        .unwrap();
        std::fs::write(repo.join(".git/extra.inc"), "[Alias]\n\tInc = send-pack\n").unwrap();
        std::fs::write(home.join(".gitconfig"), "[alias]\n\tg = !git push\n").unwrap();
        let env: BTreeMap<String, String> = [
            ("HOME", home.to_str().unwrap()),
            ("GIT_CONFIG_NOSYSTEM", "1"),
            ("GIT_CONFIG_COUNT", "1"),
            ("GIT_CONFIG_KEY_0", "alias.e"),
            ("GIT_CONFIG_VALUE_0", "push"),
            ("P", "push --force"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        let mut found = aliases(
            &argv("git --config-env=alias.c=P c"),
            &env,
            &repo.join("sub"),
        );
        found.sort();
        assert_eq!(
            found,
            [
                ("c", "push --force"),
                ("e", "push"),
                ("g", "!git push"),
                ("inc", "send-pack"),
                ("r", "push"),
            ]
            .map(|(a, b)| (a.to_owned(), b.to_owned()))
        );
    }

    #[test]
    fn a_fifo_where_a_config_should_be_is_skipped() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join(".git")).unwrap();
        nix::unistd::mkfifo(
            &dir.path().join(".git/config"),
            nix::sys::stat::Mode::from_bits_truncate(0o600),
        )
        .unwrap();
        let env = BTreeMap::from([("GIT_CONFIG_NOSYSTEM".to_owned(), "1".to_owned())]);
        assert_eq!(aliases(&argv("git p"), &env, dir.path()), Vec::new());
    }
}
