//! The cache home of `workspace-write`: which of the profile's cache paths get a writable
//! overlay, and where the overlays of a workspace live.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use super::PlanContext;
use super::paths::{expand, normalize};
use crate::error::PolicyError;
use crate::policy::Policy;
use crate::spec::CacheHomeSpec;
use crate::vocab::{CacheHome, SandboxMode};

/// The cache home of `workspace-write`: the profile's cache paths (those inside a writable or
/// masked path left out: a writable root needs no overlay, a masked path stays unreadable), kept
/// under `cache_root` in a directory named after the workspace.
pub(super) fn plan_cache_home(
    policy: &Policy,
    ctx: &PlanContext,
    workspace: &Path,
    writable_roots: &[PathBuf],
    masked_paths: &[PathBuf],
) -> Result<Option<CacheHomeSpec>, PolicyError> {
    let Some(root) = &ctx.cache_root else {
        return Ok(None);
    };
    if policy.mode.value != SandboxMode::WorkspaceWrite
        || policy.cache_home.mode.value == CacheHome::Off
    {
        return Ok(None);
    }
    if !root.is_absolute() {
        return Err(PolicyError::RelativePath { path: root.clone() });
    }
    let root = normalize(root);
    let mut paths = BTreeSet::new();
    for item in &policy.cache_home.paths {
        let path = expand(&item.value, &ctx.home, workspace);
        // Under /tmp, the private /tmp hides it anyway.
        let covered = writable_roots.iter().any(|w| path.starts_with(w))
            || masked_paths.iter().any(|m| path.starts_with(m))
            || path.starts_with("/tmp");
        // The cache root must not be seen through a cache path: its overlay would contain it.
        if covered || root.starts_with(&path) || path.starts_with(&root) {
            continue;
        }
        paths.insert(path);
    }
    // A path inside another cache path is already covered by the outer overlay.
    let outermost: Vec<PathBuf> = paths
        .iter()
        .filter(|p| !paths.iter().any(|o| o != *p && p.starts_with(o)))
        .cloned()
        .collect();
    if outermost.is_empty() {
        return Ok(None);
    }
    Ok(Some(CacheHomeSpec {
        dir: cache_dir_for(&root, workspace),
        paths: outermost,
    }))
}

/// Where the cache home of `workspace` lives under `cache_root`: a directory whose name a
/// person can recognise and that no other workspace gets (the path with `/` as `-`, shortened,
/// then a hash of the whole path).
pub fn cache_dir_for(cache_root: &Path, workspace: &Path) -> PathBuf {
    cache_root.join(workspace_dir_name(workspace))
}

fn workspace_dir_name(workspace: &Path) -> String {
    let text = workspace.display().to_string();
    // FNV-1a: stable across runs and versions (std's hasher is not), collisions irrelevant at
    // this size next to the readable part.
    let hash = text.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    let readable: String = text
        .trim_start_matches('/')
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' || c == '_' {
                c
            } else {
                '-'
            }
        })
        .collect();
    let tail: String = readable
        .chars()
        .rev()
        .take(48)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    format!("{tail}-{hash:016x}")
}
