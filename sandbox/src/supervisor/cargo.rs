//! cargo aliases from the config cargo will read for one exec of cargo: `.cargo/config.toml`
//! (and the older `.cargo/config`) in its working directory and in each directory above it
//! (and likewise from a `-C DIR`), `$CARGO_HOME/config.toml` (`~/.cargo`), the files they
//! include, the files and `KEY=VALUE`s of `--config`, and the environment's `CARGO_ALIAS_*`.
//!
//! cargo expands an alias in its own process, so the alias is decided here, at cargo's exec,
//! from what the files say then: every definition found is a candidate and the strictest
//! decision wins. A file the sandbox rewrites after the exec and before cargo reads it is not
//! seen (SECURITY.md says so); what cargo then runs as a new process is decided at its exec.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use bridle_policy::cargo_config::{self, Alias};

use super::config_file::{self, ConfigFile, lexical};

/// The most config files read for one exec (includes included). Past it, what cargo's aliases
/// say is unknown.
const MAX_FILES: usize = 64;
/// cargo's options before its subcommand that take a value.
const WITH_VALUE: &[&str] = &["--color", "--config", "-C", "-Z", "--explain"];
/// The most places looked at for a config file: every ancestor of a path of `PATH_MAX` bytes.
const MAX_PLACES: usize = 4 * 4096;

/// What the config says about cargo's aliases.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Aliases {
    pub found: Vec<Alias>,
    /// Why some of the config was not read (more files than [`MAX_FILES`], or one the
    /// supervisor cannot read as cargo would), as the end of a noun phrase.
    pub incomplete: Option<String>,
}

/// Every alias definition the config cargo reads for `argv` (run in `cwd` with `env`) makes.
pub(super) fn aliases(argv: &[String], env: &[(String, String)], cwd: &Path) -> Aliases {
    let mut out = Aliases::default();
    let (dirs, configs) = options(argv, cwd);
    let mut places: Vec<PathBuf> = Vec::new();
    for dir in &dirs {
        for at in dir.ancestors() {
            places.push(at.join(".cargo/config.toml"));
            places.push(at.join(".cargo/config"));
        }
    }
    // Every value of a name given twice (cargo reads some through `getenv`, the first, and
    // others from a map of the whole environment, the last), each relative one from every
    // directory cargo may be in; `~/.cargo` even with CARGO_HOME set (an empty first value
    // is unset to cargo). Without HOME cargo asks the password database; the supervisor's
    // HOME stands in.
    let values = |name: &'static str| {
        env.iter()
            .filter(move |(n, v)| n == name && !v.is_empty())
            .map(|(_, v)| PathBuf::from(v))
    };
    let homes = values("CARGO_HOME").chain(
        values("HOME")
            .chain(std::env::var_os("HOME").map(PathBuf::from))
            .map(|h| h.join(".cargo")),
    );
    for home in homes {
        for dir in &dirs {
            places.push(dir.join(&home).join("config.toml"));
            places.push(dir.join(&home).join("config"));
        }
    }
    // A `--config` value is a file when one is there (from any directory cargo may be in),
    // TOML otherwise.
    for value in configs {
        out.found
            .extend(cargo_config::inline(&value).unwrap_or_default());
        for dir in &dirs {
            places.push(dir.join(&value));
        }
    }
    let mut seen = HashSet::new();
    places.retain(|p| seen.insert(p.clone()));
    places.reverse();
    let (mut looked, mut read) = (0, 0);
    while let Some(place) = places.pop() {
        looked += 1;
        if looked > MAX_PLACES {
            out.incomplete = Some("more places to look than are looked at".into());
            break;
        }
        let text = match config_file::read(&place) {
            ConfigFile::Missing => continue,
            ConfigFile::Text(text) => text,
            ConfigFile::Unknown => {
                out.incomplete = Some(format!(
                    "`{}` cannot be read as cargo reads it",
                    place.display()
                ));
                continue;
            }
        };
        read += 1;
        if read > MAX_FILES {
            out.incomplete = Some(format!("more than {MAX_FILES} files"));
            break;
        }
        // Not TOML to this parser: cargo refuses such a file (or reads it otherwise).
        let Some(config) = cargo_config::parse(&text) else {
            out.incomplete = Some(format!("`{}` is not TOML to bridle", place.display()));
            continue;
        };
        out.found.extend(config.aliases);
        // cargo joins an include to the file's directory and resolves `..` in the text.
        let base = place.parent().unwrap_or(Path::new("/"));
        for include in config.includes.iter().rev() {
            places.push(lexical(&base.join(include)));
        }
    }
    out.found.extend(
        env.iter()
            .filter_map(|(name, value)| cargo_config::env_alias(name, value)),
    );
    out
}

/// The directories whose config cargo reads (its working directory, or the one `-C DIR`
/// before the subcommand makes it, as cargo sees it after `chdir`) and the values of
/// `--config` (anywhere: cargo reads none for its aliases today, and one it would not read
/// only adds files to read).
fn options(argv: &[String], cwd: &Path) -> (Vec<PathBuf>, Vec<String>) {
    let mut dirs = vec![cwd.to_path_buf()];
    let mut configs = Vec::new();
    let mut before_subcommand = true;
    let mut words = argv.iter().skip(1);
    while let Some(word) = words.next() {
        if word == "--config" {
            configs.extend(words.next().cloned());
        } else if let Some(value) = word.strip_prefix("--config=") {
            configs.push(value.to_owned());
        } else if !before_subcommand {
            continue;
        } else if WITH_VALUE.contains(&word.as_str()) {
            let value = words.next();
            if word == "-C" {
                dirs.extend(value.map(|d| chdir(cwd, d)));
            }
        } else if word.starts_with('-') && !word.starts_with("--") {
            // A cluster of short options (`-vC sub`, `-Csub`, `-C=sub`): `-C` and `-Z` take
            // the rest of the word, or the next one.
            if let Some(at) = word[1..].find(['C', 'Z']) {
                let rest = &word[at + 2..];
                let value = if rest.is_empty() {
                    words.next().cloned()
                } else {
                    Some(rest.strip_prefix('=').unwrap_or(rest).to_owned())
                };
                if word.as_bytes()[at + 1] == b'C' {
                    dirs.extend(value.map(|d| chdir(cwd, &d)));
                }
            }
        } else if !word.starts_with(['-', '+']) {
            before_subcommand = false;
        }
    }
    (dirs, configs)
}

/// The directory cargo is in after `chdir(dir)` from `cwd` (`getcwd`: links resolved).
fn chdir(cwd: &Path, dir: &str) -> PathBuf {
    let joined = cwd.join(dir);
    std::fs::canonicalize(&joined).unwrap_or(joined)
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    fn alias(name: &str, words: &[&str]) -> Alias {
        (name.into(), words.iter().map(|w| w.to_string()).collect())
    }

    fn argv(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_owned).collect()
    }

    #[test]
    fn aliases_come_from_every_config_cargo_reads_and_the_environment() {
        let root = tempfile::tempdir().unwrap();
        let ws = root.path().join("ws");
        let deep = ws.join("a/b");
        let home = root.path().join("home");
        std::fs::create_dir_all(deep.join(".cargo")).unwrap();
        std::fs::create_dir_all(ws.join(".cargo")).unwrap();
        std::fs::create_dir_all(home.join(".cargo")).unwrap();
        std::fs::write(
            ws.join(".cargo/config.toml"),
            "include = \"more.toml\"\n[alias]\np = \"publish\"\n",
        )
        .unwrap();
        std::fs::write(ws.join(".cargo/more.toml"), "alias.m = [\"publish\"]\n").unwrap();
        std::fs::write(
            deep.join(".cargo/config"),
            "[alias]\nd = \"publish --dry-run\"\n",
        )
        .unwrap();
        std::fs::write(
            home.join(".cargo/config.toml"),
            "[alias]\nh = \"publish\"\n",
        )
        .unwrap();
        std::fs::write(ws.join("extra.toml"), "[alias]\nx = \"publish\"\n").unwrap();
        let env: Vec<(String, String)> = [
            ("HOME", home.to_str().unwrap()),
            ("CARGO_ALIAS_E", "publish"),
            ("PATH", "/usr/bin"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        let got = aliases(
            &argv("cargo --config ../../extra.toml --config=alias.i=\"publish\" p"),
            &env,
            &deep,
        );
        let mut found = got.found;
        found.sort();
        assert_eq!(
            found,
            [
                alias("E", &["publish"]),
                alias("d", &["publish", "--dry-run"]),
                alias("h", &["publish"]),
                alias("i", &["publish"]),
                alias("m", &["publish"]),
                alias("p", &["publish"]),
                alias("x", &["publish"]),
            ]
        );
        assert_eq!(got.incomplete, None);
        // A relative CARGO_HOME is cargo's directory's; ~/.cargo is read too (an empty first
        // CARGO_HOME is unset to cargo).
        std::fs::create_dir_all(ws.join("rel")).unwrap();
        std::fs::write(ws.join("rel/config.toml"), "alias.r = \"publish\"\n").unwrap();
        let mut env = env;
        env.push(("CARGO_HOME".into(), "rel".into()));
        let got = aliases(&argv("cargo p"), &env, &ws);
        assert!(got.found.contains(&alias("r", &["publish"])), "{got:?}");
        assert!(got.found.contains(&alias("h", &["publish"])), "{got:?}");
        // A variable given twice: cargo's map of the environment keeps the last value.
        env.push(("CARGO_ALIAS_E".into(), "build".into()));
        let got = aliases(&argv("cargo p"), &env, &ws);
        assert!(got.found.contains(&alias("E", &["publish"])), "{got:?}");
        assert!(got.found.contains(&alias("E", &["build"])), "{got:?}");
    }

    #[test]
    fn a_directory_deeper_than_the_file_limit_still_reads_the_config_above_it() {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(root.path().join(".cargo")).unwrap();
        std::fs::write(
            root.path().join(".cargo/config.toml"),
            "alias.p = \"publish\"\n",
        )
        .unwrap();
        let deep = (0..100).fold(root.path().to_path_buf(), |p, i| p.join(format!("d{i}")));
        std::fs::create_dir_all(&deep).unwrap();
        let got = aliases(&argv("cargo p"), &[], &deep);
        assert!(got.found.contains(&alias("p", &["publish"])), "{got:?}");
    }

    #[test]
    fn more_config_files_than_the_limit_leave_the_aliases_incomplete() {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(root.path().join(".cargo")).unwrap();
        let includes: Vec<String> = (0..MAX_FILES + 1)
            .map(|i| format!("\"{i}.toml\""))
            .collect();
        std::fs::write(
            root.path().join(".cargo/config.toml"),
            format!("include = [{}]\n", includes.join(", ")),
        )
        .unwrap();
        for i in 0..=MAX_FILES {
            std::fs::write(root.path().join(format!(".cargo/{i}.toml")), "").unwrap();
        }
        assert!(
            aliases(&argv("cargo p"), &[], root.path())
                .incomplete
                .is_some()
        );
    }

    #[test]
    fn a_config_the_supervisor_cannot_read_as_cargo_would_leaves_the_aliases_unknown() {
        for (what, make) in [
            ("a link to the process's stdin", 0),
            ("a file past the size limit", 1),
            ("text that is not TOML", 2),
            ("a directory", 3),
        ] {
            let root = tempfile::tempdir().unwrap();
            let config = root.path().join(".cargo/config.toml");
            std::fs::create_dir_all(root.path().join(".cargo")).unwrap();
            match make {
                0 => std::os::unix::fs::symlink("/dev/stdin", &config).unwrap(),
                1 => std::fs::write(
                    &config,
                    format!("alias.p = \"publish\"\nx = \"{}\"\n", "a".repeat(1 << 20)),
                )
                .unwrap(),
                2 => std::fs::write(&config, "[alias\np = 1").unwrap(),
                _ => std::fs::create_dir(&config).unwrap(),
            }
            let got = aliases(&argv("cargo p"), &[], root.path());
            assert!(got.incomplete.is_some(), "{what}: {got:?}");
        }
    }

    #[test]
    fn an_empty_cargo_home_is_the_default_and_includes_resolve_dot_dot_in_their_text() {
        let root = tempfile::tempdir().unwrap();
        let home = root.path().join("home");
        std::fs::create_dir_all(home.join(".cargo")).unwrap();
        std::fs::write(home.join(".cargo/config.toml"), "alias.h = \"publish\"\n").unwrap();
        // `.cargo` a link elsewhere: cargo reads `../evil.toml` beside the link, not the target.
        let ws = root.path().join("ws");
        let elsewhere = root.path().join("elsewhere/sub");
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::create_dir_all(&elsewhere).unwrap();
        std::fs::write(
            elsewhere.join("config.toml"),
            "include = \"../evil.toml\"\n",
        )
        .unwrap();
        std::os::unix::fs::symlink(&elsewhere, ws.join(".cargo")).unwrap();
        std::fs::write(ws.join("evil.toml"), "alias.e = \"publish\"\n").unwrap();
        let env: Vec<(String, String)> = [
            ("HOME".to_owned(), home.display().to_string()),
            ("CARGO_HOME".to_owned(), String::new()),
        ]
        .into();
        let got = aliases(&argv("cargo p"), &env, &ws);
        assert!(got.found.contains(&alias("h", &["publish"])), "{got:?}");
        assert!(got.found.contains(&alias("e", &["publish"])), "{got:?}");
    }

    #[test]
    fn only_a_dash_c_before_the_subcommand_moves_cargo() {
        let cwd = Path::new("/nonexistent/ws");
        let (dirs, _) = options(&argv("cargo rustc -- -C opt-level=3 -Clto"), cwd);
        assert_eq!(dirs, [cwd.to_path_buf()]);
        let (dirs, configs) = options(
            &argv("cargo +stable --color never -C sub --config a.toml build --config=b.toml"),
            cwd,
        );
        assert_eq!(dirs, [cwd.to_path_buf(), cwd.join("sub")]);
        assert_eq!(configs, ["a.toml", "b.toml"]);
        for cluster in ["-vC sub", "-Csub", "-C=sub", "-qvCsub"] {
            let (dirs, _) = options(&argv(&format!("cargo {cluster} p")), cwd);
            assert_eq!(dirs, [cwd.to_path_buf(), cwd.join("sub")], "{cluster}");
        }
    }
}
