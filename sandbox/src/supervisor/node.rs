//! What node runs in its own process before its program, for the rules: the `NODE_OPTIONS`
//! it may see (its environment's, and those of the files `--env-file` names, read at its exec)
//! and the files its preloads name, found where node looks for them (a path or `file:` URL, a
//! bare name in `node_modules` of the working directory and each above it, `NODE_PATH`,
//! `~/.node_modules`, `~/.node_libraries`), each with node's `.js`. A package's `package.json`
//! is not followed: what it names is code node loads without an exec (SECURITY.md).

use std::path::{Path, PathBuf};

use bridle_policy::rules::ExecFacts;
use nix::unistd::Pid;

use super::Supervisor;
use super::config_file::{self, ConfigFile};
use super::facts::operand_path;
use super::tracee::{self, ExecRead};

/// What node adds to a file name that names no file and that could make it a known script
/// (it tries `.json` and `.node` after, which are not).
pub(super) const EXTENSIONS: [&str; 1] = [".js"];

impl Supervisor {
    /// The known programs the file node preloads for `preload` (a `-r`/`--import` value) is,
    /// wherever node may find it; `node_paths`: the `NODE_PATH` values of its env files.
    pub(super) fn preloaded_as(
        &mut self,
        pid: Pid,
        read: &ExecRead,
        preload: &str,
        env: Option<&tracee::Environment>,
        node_paths: &[String],
    ) -> Vec<String> {
        let mut names = Vec::new();
        let mut dirs = None;
        for spec in bridle_policy::rules::node_specifiers(preload) {
            if bridle_policy::rules::is_node_path(&spec) {
                names.extend(self.known_as(pid, read, &spec, true));
                continue;
            }
            let dirs = dirs.get_or_insert_with(|| lookup_dirs(pid, read, env, node_paths));
            for dir in dirs.iter() {
                let path = dir.join(&spec);
                let textual = config_file::lexical(&path);
                if textual != path {
                    names.extend(self.known_path(textual, true));
                }
                names.extend(self.known_path(path, true));
            }
        }
        names.sort();
        names.dedup();
        names
    }
}

/// Where node looks for a bare name: `node_modules` in the working directory and each one
/// above it, each `NODE_PATH` entry (the environment's and `node_paths`, its env files'),
/// `~/.node_modules`, `~/.node_libraries` and `lib/node` beside node's own directory.
fn lookup_dirs(
    pid: Pid,
    read: &ExecRead,
    env: Option<&tracee::Environment>,
    node_paths: &[String],
) -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    let node = read.program(pid);
    for file in [Some(node.clone()), std::fs::canonicalize(&node).ok()]
        .into_iter()
        .flatten()
    {
        if let Some(prefix) = file.parent().and_then(Path::parent) {
            dirs.push(prefix.join("lib/node"));
        }
    }
    if let Ok(cwd) = read.cwd(pid) {
        dirs.extend(cwd.ancestors().map(|dir| dir.join("node_modules")));
    }
    let values = |name: &str| {
        env.map(|e| {
            e.entries()
                .iter()
                .filter(|(n, _)| n == name)
                .map(|(_, v)| v.clone())
                .collect::<Vec<_>>()
        })
        .unwrap_or_default()
    };
    for value in values("NODE_PATH").iter().chain(node_paths) {
        for entry in value.split(':').filter(|e| !e.is_empty()) {
            dirs.extend(operand_path(pid, read, entry));
        }
    }
    for home in values("HOME") {
        for dir in [".node_modules", ".node_libraries"] {
            dirs.extend(operand_path(pid, read, &format!("{home}/{dir}")));
        }
    }
    dirs
}

/// Every `NODE_OPTIONS` an exec of node may see: each the environment sets, and each the files
/// of its `--env-file` options set. A file the supervisor cannot read as node would (or an
/// unreadable environment) leaves what node preloads unknown.
pub(super) fn options(
    pid: Pid,
    read: &ExecRead,
    argv: &[String],
    env: &Result<tracee::Environment, tracee::Unreadable>,
    facts: &mut ExecFacts,
) -> Settings {
    let options = match env {
        Ok(env) => env
            .entries()
            .iter()
            .filter(|(name, _)| name == "NODE_OPTIONS")
            .map(|(_, value)| value.clone())
            .collect(),
        Err(why) => {
            facts
                .opaque
                .get_or_insert_with(|| format!("what node preloads (its environment: {})", why.0));
            Vec::new()
        }
    };
    let mut out = Settings {
        options,
        paths: Vec::new(),
    };
    for file in bridle_policy::rules::node_env_files(argv) {
        let text = match operand_path(pid, read, &file).map(|p| config_file::read(&p)) {
            Some(ConfigFile::Missing) => continue,
            Some(ConfigFile::Text(text)) => text,
            Some(ConfigFile::Unknown) | None => {
                facts.opaque.get_or_insert_with(|| {
                    format!("what node preloads (`{file}` cannot be read as node reads it)")
                });
                continue;
            }
        };
        let options = bridle_policy::rules::dotenv_values(&text, "NODE_OPTIONS");
        let paths = bridle_policy::rules::dotenv_values(&text, "NODE_PATH");
        let (Some(options), Some(paths)) = (options, paths) else {
            facts.opaque.get_or_insert_with(|| {
                format!("what node preloads (`{file}` sets NODE_OPTIONS too many times over)")
            });
            continue;
        };
        out.options.extend(options);
        out.paths.extend(paths);
    }
    out
}

/// What an exec of node is told besides its command line.
pub(super) struct Settings {
    /// Every `NODE_OPTIONS` it may see: the environment's and its env files'.
    pub options: Vec<String>,
    /// The `NODE_PATH` values of its env files (node looks there for a bare name too).
    pub paths: Vec<String>,
}
