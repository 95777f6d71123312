//! cargo aliases from the config cargo will read for one exec of cargo: `.cargo/config.toml`
//! (and the older `.cargo/config`) in its working directory and in each directory above it
//! (and likewise from a `-C DIR`), `$CARGO_HOME/config.toml` (`~/.cargo`), the files they
//! include, the files and `KEY=VALUE`s of `--config`, and the environment's `CARGO_ALIAS_*`.
//!
//! cargo expands an alias in its own process, so the alias is decided here, at cargo's exec,
//! from what the files say then: every definition found is a candidate and the strictest
//! decision wins. A file the sandbox rewrites after the exec and before cargo reads it is not
//! seen (SECURITY.md says so); what cargo then runs as a new process is decided at its exec.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use bridle_policy::cargo_config::{self, Alias};

use super::git::read_small;

/// The most config files read for one exec (includes included). Past it, what cargo's aliases
/// say is unknown.
const MAX_FILES: usize = 64;
/// The most places looked at for a config file: every ancestor of a path of `PATH_MAX` bytes.
const MAX_PLACES: usize = 4 * 4096;

/// What the config says about cargo's aliases.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Aliases {
    pub found: Vec<Alias>,
    /// More config files than [`MAX_FILES`]: some were not read.
    pub incomplete: bool,
}

/// Every alias definition the config cargo reads for `argv` (run in `cwd` with `env`) makes.
pub(super) fn aliases(argv: &[String], env: &BTreeMap<String, String>, cwd: &Path) -> Aliases {
    let mut out = Aliases::default();
    let (dirs, configs) = options(argv, cwd);
    let mut places: Vec<PathBuf> = Vec::new();
    for dir in &dirs {
        for at in dir.ancestors() {
            places.push(at.join(".cargo/config.toml"));
            places.push(at.join(".cargo/config"));
        }
    }
    let homes = match env.get("CARGO_HOME") {
        Some(home) => vec![cwd.join(home)],
        // Without HOME cargo asks the password database; the supervisor's HOME stands in.
        None => env
            .get("HOME")
            .map(PathBuf::from)
            .into_iter()
            .chain(std::env::var_os("HOME").map(PathBuf::from))
            .map(|h| h.join(".cargo"))
            .collect(),
    };
    for home in homes {
        places.push(home.join("config.toml"));
        places.push(home.join("config"));
    }
    for value in configs {
        match cargo_config::inline(&value) {
            Some(found) => out.found.extend(found),
            None => places.push(cwd.join(&value)),
        }
    }
    places.reverse();
    let (mut looked, mut read) = (0, 0);
    while let Some(place) = places.pop() {
        looked += 1;
        if looked > MAX_PLACES {
            out.incomplete = true;
            break;
        }
        let Some(text) = read_small(&place) else {
            continue;
        };
        read += 1;
        if read > MAX_FILES {
            out.incomplete = true;
            break;
        }
        // Not TOML: cargo refuses to run, so it expands no alias from it.
        let Some(config) = cargo_config::parse(&text) else {
            continue;
        };
        out.found.extend(config.aliases);
        let base = place.parent().unwrap_or(Path::new("/"));
        for include in config.includes.iter().rev() {
            places.push(base.join(include));
        }
    }
    out.found.extend(
        env.iter()
            .filter_map(|(name, value)| cargo_config::env_alias(name, value)),
    );
    out
}

/// The directories whose config cargo reads (its working directory, and any `-C DIR`) and the
/// values of `--config`, taken from the whole command line: an option after the subcommand
/// that cargo would not read only adds files to read.
fn options(argv: &[String], cwd: &Path) -> (Vec<PathBuf>, Vec<String>) {
    let mut dirs = vec![cwd.to_path_buf()];
    let mut configs = Vec::new();
    let mut words = argv.iter().skip(1);
    while let Some(word) = words.next() {
        if word == "--config" {
            configs.extend(words.next().cloned());
        } else if let Some(value) = word.strip_prefix("--config=") {
            configs.push(value.to_owned());
        } else if word == "-C" {
            dirs.extend(words.next().map(|d| cwd.join(d)));
        } else if let Some(dir) = word.strip_prefix("-C").filter(|d| !d.is_empty()) {
            dirs.push(cwd.join(dir));
        }
    }
    (dirs, configs)
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
        std::fs::write(ws.join("bad.toml"), "[alias\n").unwrap();
        let env: BTreeMap<String, String> = [
            ("HOME", home.to_str().unwrap()),
            ("CARGO_ALIAS_E", "publish"),
            ("PATH", "/usr/bin"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        let got = aliases(
            &argv(
                "cargo --config ../../extra.toml --config=alias.i=\"publish\" --config ../../bad.toml p",
            ),
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
        assert!(!got.incomplete);
        // CARGO_HOME replaces ~/.cargo.
        let mut env = env;
        env.insert(
            "CARGO_HOME".into(),
            root.path().join("none").display().to_string(),
        );
        let got = aliases(&argv("cargo p"), &env, &ws);
        assert!(!got.found.contains(&alias("h", &["publish"])), "{got:?}");
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
        let got = aliases(&argv("cargo p"), &BTreeMap::new(), &deep);
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
        assert!(aliases(&argv("cargo p"), &BTreeMap::new(), root.path()).incomplete);
    }
}
