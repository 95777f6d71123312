//! Paths as planning reads them: profile entries expanded (`~`, relative to a base),
//! normalised lexically, and writable roots checked against the places they must not cover.

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
    Ok(())
}

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
