//! Paths as planning reads them: profile entries expanded (`~`, relative to a base),
//! normalised lexically, and writable roots checked against the places they must not cover.

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

use super::PlanContext;
use crate::error::PolicyError;

pub(super) fn check_root(
    what: &'static str,
    root: &Path,
    ctx: &PlanContext,
    allow_dangerous: bool,
) -> Result<(), PolicyError> {
    let home = normalize(&ctx.home);
    let state = normalize(&ctx.state_dir);
    let config = normalize(&ctx.config_dir);
    let why = if root == Path::new("/") {
        Some("it is the filesystem root".to_owned())
    } else if root == home {
        Some("it is your home directory".to_owned())
    } else if home.starts_with(root) {
        Some(format!(
            "it contains your home directory `{}`",
            home.display()
        ))
    } else if root.starts_with(&state) || root.starts_with(&config) {
        Some("it is inside bridle's own state or configuration directory".to_owned())
    } else if config.starts_with(root) {
        Some(format!(
            "it contains bridle's configuration directory `{}`, where deployer profiles live",
            config.display()
        ))
    } else {
        None
    };
    if let Some(why) = why
        && !allow_dangerous
    {
        return Err(PolicyError::DangerousRoot {
            what,
            path: root.to_path_buf(),
            why,
        });
    }
    if state.starts_with(root) && !allow_dangerous {
        return Err(PolicyError::StateInsideWritableRoot {
            what,
            path: root.to_path_buf(),
            state,
        });
    }
    // What bridle keeps there decides what later runs trust (the records of what a run
    // protects) and what other workspaces see (their cache homes).
    if let Some(base) = ctx.temp_base.as_deref().map(normalize)
        && (root.starts_with(&base) || base.starts_with(root))
        && !allow_dangerous
    {
        return Err(PolicyError::TempBaseInWritableRoot {
            what,
            path: root.to_path_buf(),
            base,
        });
    }
    // Kernel interfaces, not files: nothing there is the command's to write, and the end of the
    // run would inspect the host's processes as if they were a repository.
    if let Some(pseudo) = PSEUDO_FILESYSTEMS
        .iter()
        .map(Path::new)
        .find(|p| root.starts_with(p))
    {
        return Err(PolicyError::PseudoFilesystemRoot {
            what,
            path: root.to_path_buf(),
            filesystem: pseudo.to_path_buf(),
        });
    }
    Ok(())
}

/// Pseudo filesystems that are never a workspace or a writable root, whatever a profile says.
const PSEUDO_FILESYSTEMS: [&str; 3] = ["/proc", "/sys", "/dev"];

pub(super) fn is_relative_entry(entry: &str) -> bool {
    !entry.starts_with('/') && !entry.starts_with('~')
}

/// Expands `~`, makes relative entries relative to `base`, and normalises lexically.
pub(super) fn expand(entry: &str, home: &Path, base: &Path) -> PathBuf {
    let path = if entry == "~" {
        home.to_path_buf()
    } else if let Some(rest) = entry.strip_prefix("~/") {
        home.join(rest)
    } else {
        base.join(entry)
    };
    normalize(&path)
}

/// The XDG base directories whose default lies in the home directory, with that default.
const XDG_BASES: [(&str, &str); 2] = [
    ("XDG_CONFIG_HOME", ".config"),
    ("XDG_DATA_HOME", ".local/share"),
];

/// Where `path`, under the default of an XDG base directory (`~/.config/gh`), also is when the
/// environment moves that directory (`$XDG_CONFIG_HOME/gh`: where gh and git then keep their
/// credentials), with the variable that moved it. A relative or empty value is ignored, as the
/// XDG specification says; so is one that moves nothing.
pub(super) fn xdg_moved(
    path: &Path,
    home: &Path,
    env: &BTreeMap<String, String>,
) -> Option<(PathBuf, &'static str)> {
    let home = normalize(home);
    XDG_BASES.iter().find_map(|&(var, default)| {
        let rest = path.strip_prefix(home.join(default)).ok()?;
        let base = env.get(var).map(Path::new).filter(|b| b.is_absolute())?;
        let moved = normalize(&base.join(rest));
        (moved != path).then_some((moved, var))
    })
}

/// Lexical normalisation: drops `.`, resolves `..` without following symlinks, never above `/`.
pub fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::from("/");
    for component in path.components() {
        match component {
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(part) => out.push(part),
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
        }
    }
    out
}
