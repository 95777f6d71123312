//! The cache home: tools' cache directories (`~/.cache`, `~/.npm`, `~/.cargo/registry`, ...)
//! made writable inside the sandbox without writing the host's.
//!
//! Each cache path becomes an overlay: the host's directory is the lower layer (read-only, so
//! the offline cache the host already has keeps working), and the upper layer, where every change
//! goes, lives in bridle's per-workspace cache directory, outside every writable root, so what a
//! run downloads is there for the next run in the same workspace and for nothing else.
//!
//! Two runs in one workspace at a time: overlayfs must not share an upper layer between mounts,
//! so the first run takes the directory's lock and writes it; a run that finds it taken gets a
//! fresh upper layer in its own temp dir (gone when it ends) on top of the shared one, which it
//! sees read-only: its changes are not kept.
//!
//! Nothing here is a guarantee: a cache path that cannot be overlaid (the host directory is a
//! symlink, the cache directory's filesystem has no user xattrs, ...) is left as it is, read-only,
//! and the launcher says why in its report.

use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use bridle_policy::CacheHomeSpec;
use nix::fcntl::{Flock, FlockArg};
use serde::{Deserialize, Serialize};

/// One overlay the launcher mounts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CacheOverlay {
    /// The cache directory, mounted over (it exists on the host).
    pub target: PathBuf,
    /// Where changes go.
    pub upper: PathBuf,
    /// overlayfs' work directory (empty, on the upper's filesystem).
    pub work: PathBuf,
    /// The shared upper layer seen read-only beneath `upper`, for a run that could not take the
    /// lock.
    pub shared: Option<PathBuf>,
}

/// What the parent holds while the run lasts: the lock on the workspace's cache directory (when
/// this run writes it).
#[derive(Debug, Default)]
pub struct CacheLease {
    _lock: Option<Flock<std::fs::File>>,
}

/// Prepares the overlays of `cache` for a run whose private temp dir is `temp_dir`. Returns
/// them with the lease to hold for the run, and a note per cache path left as it is.
pub fn prepare(
    cache: &CacheHomeSpec,
    temp_dir: &Path,
) -> (Vec<CacheOverlay>, CacheLease, Vec<String>) {
    let mut notes = Vec::new();
    let mut overlays = Vec::new();
    if let Err(e) = make_private_dir(&cache.dir) {
        notes.push(format!(
            "cache home `{}` unavailable: {e}",
            cache.dir.display()
        ));
        return (overlays, CacheLease::default(), notes);
    }
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(cache.dir.join("lock"))
        .ok()
        .and_then(|f| Flock::lock(f, FlockArg::LockExclusiveNonblock).ok());
    if let Some(lock) = &lock {
        // Marks the cache home as used, for [`sweep_unused`].
        let _ = lock.set_modified(std::time::SystemTime::now());
    }
    let (upper_base, shared_base) = match &lock {
        Some(_) => (cache.dir.join("upper"), None),
        None => {
            notes.push(format!(
                "another run in this workspace writes the cache home `{}`; this run's cache changes are not kept",
                cache.dir.display()
            ));
            (temp_dir.join("cache-upper"), Some(cache.dir.join("upper")))
        }
    };
    let work_base = match &lock {
        Some(_) => cache.dir.join("work"),
        None => temp_dir.join("cache-work"),
    };
    for target in &cache.paths {
        match overlay_for(target, &upper_base, &work_base, shared_base.as_deref()) {
            Ok(Some(o)) => overlays.push(o),
            Ok(None) => {}
            Err(why) => notes.push(format!(
                "cache path `{}` left read-only: {why}",
                target.display()
            )),
        }
    }
    (overlays, CacheLease { _lock: lock }, notes)
}

/// Removes the cache homes under `root` that no run has used for `max_age` (by their lock's
/// time) and that no run holds now. Returns how many were removed.
pub fn sweep_unused(root: &Path, max_age: std::time::Duration) -> usize {
    let Ok(entries) = std::fs::read_dir(root) else {
        return 0;
    };
    let mut removed = 0;
    for entry in entries.flatten() {
        let dir = entry.path();
        let lock_path = dir.join("lock");
        let old = std::fs::metadata(&lock_path)
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age > max_age);
        if !old {
            continue;
        }
        let held = std::fs::OpenOptions::new()
            .write(true)
            .open(&lock_path)
            .ok()
            .and_then(|f| Flock::lock(f, FlockArg::LockExclusiveNonblock).ok());
        // Held while the tree goes, so no run starts using it meanwhile.
        if held.is_some() && remove_tree(&dir).is_ok() {
            removed += 1;
        }
    }
    removed
}

/// Removes `dir`, making directories a command left without permissions removable first.
fn remove_tree(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    fn open_up(dir: &Path) {
        let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700));
        if let Ok(entries) = std::fs::read_dir(dir) {
            for entry in entries.flatten() {
                if entry.file_type().is_ok_and(|t| t.is_dir()) {
                    open_up(&entry.path());
                }
            }
        }
    }
    open_up(dir);
    std::fs::remove_dir_all(dir)
}

fn overlay_for(
    target: &Path,
    upper_base: &Path,
    work_base: &Path,
    shared_base: Option<&Path>,
) -> Result<Option<CacheOverlay>, String> {
    // overlayfs takes its layers as a comma- and colon-separated option string.
    if target
        .as_os_str()
        .as_encoded_bytes()
        .iter()
        .any(|b| matches!(b, b',' | b':' | b'\\') || b.is_ascii_control())
    {
        return Err("its path has a character overlayfs options cannot carry".into());
    }
    match std::fs::symlink_metadata(target) {
        Ok(meta) if meta.is_dir() => {}
        Ok(_) => return Err("it is not a directory (a symlink is not followed)".into()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            // Made empty, as the tool itself would on first use, so that it has a mount point;
            // not when its parent is missing too (the tool was never set up here).
            match target.parent() {
                Some(parent) if parent.is_dir() => {
                    make_private_dir(target).map_err(|e| format!("creating it on the host: {e}"))?
                }
                _ => return Ok(None),
            }
        }
        Err(e) => return Err(e.to_string()),
    }
    let name = layer_name(target);
    let upper = upper_base.join(&name);
    let work = work_base.join(&name);
    for dir in [&upper, &work] {
        make_private_dir(dir).map_err(|e| format!("creating `{}`: {e}", dir.display()))?;
    }
    // The overlay's root takes the upper layer's mode: make it the host directory's.
    if let Ok(meta) = std::fs::metadata(target) {
        use std::os::unix::fs::PermissionsExt;
        let mode = meta.permissions().mode() & 0o7777 & !0o6000;
        let _ = std::fs::set_permissions(&upper, std::fs::Permissions::from_mode(mode));
    }
    let shared = shared_base.map(|b| b.join(&name)).filter(|p| p.is_dir());
    Ok(Some(CacheOverlay {
        target: target.to_path_buf(),
        upper,
        work,
        shared,
    }))
}

/// A layer's directory name: its path with `/` as `%`, so every cache path keeps its own layer
/// whatever the policy lists next to it.
fn layer_name(target: &Path) -> String {
    target
        .display()
        .to_string()
        .trim_start_matches('/')
        .replace('%', "%25")
        .replace('/', "%")
}

fn make_private_dir(path: &Path) -> std::io::Result<()> {
    match std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(path)
    {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && path.is_dir() => Ok(()),
        Err(e) => Err(e),
    }
}

/// Mounts `overlay` in the launcher's mount view. The error says why (the caller keeps going:
/// the cache path then stays read-only).
pub fn mount(overlay: &CacheOverlay) -> Result<(), String> {
    use nix::mount::MsFlags;
    let lower = match &overlay.shared {
        Some(shared) => format!("{}:{}", shared.display(), overlay.target.display()),
        None => overlay.target.display().to_string(),
    };
    let options = format!(
        "lowerdir={lower},upperdir={},workdir={},userxattr",
        overlay.upper.display(),
        overlay.work.display()
    );
    nix::mount::mount(
        Some("overlay"),
        &overlay.target,
        Some("overlay"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
        Some(options.as_str()),
    )
    .map_err(|e| format!("mounting its overlay: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layer_names_keep_paths_apart() {
        assert_eq!(layer_name(Path::new("/home/u/.cache")), "home%u%.cache");
        assert_ne!(
            layer_name(Path::new("/home/u/a%b")),
            layer_name(Path::new("/home/u/a/b"))
        );
    }

    #[test]
    fn a_second_run_gets_its_own_upper_over_the_shared_one() {
        let root = tempfile::tempdir().unwrap();
        let host = root.path().join("home/.npm");
        std::fs::create_dir_all(&host).unwrap();
        let spec = CacheHomeSpec {
            dir: root.path().join("cache/ws"),
            paths: vec![host.clone()],
        };
        let first_temp = root.path().join("t1");
        let (first, lease, notes) = prepare(&spec, &first_temp);
        assert!(notes.is_empty(), "{notes:?}");
        assert_eq!(
            first[0].upper,
            spec.dir.join("upper").join(layer_name(&host))
        );
        assert_eq!(first[0].shared, None);
        let (second, _lease2, notes) = prepare(&spec, &root.path().join("t2"));
        assert!(notes[0].contains("not kept"), "{notes:?}");
        assert!(second[0].upper.starts_with(root.path().join("t2")));
        assert_eq!(second[0].shared.as_ref(), Some(&first[0].upper));
        drop(lease);
        let (third, _lease3, notes) = prepare(&spec, &root.path().join("t3"));
        assert!(notes.is_empty(), "{notes:?}");
        assert_eq!(third[0].upper, first[0].upper);
    }

    #[test]
    fn a_missing_cache_dir_is_made_only_when_its_parent_exists() {
        let root = tempfile::tempdir().unwrap();
        let spec = CacheHomeSpec {
            dir: root.path().join("cache/ws"),
            paths: vec![root.path().join(".npm"), root.path().join("go/pkg/mod")],
        };
        let (overlays, _lease, notes) = prepare(&spec, &root.path().join("t"));
        assert!(notes.is_empty(), "{notes:?}");
        assert_eq!(overlays.len(), 1);
        assert!(root.path().join(".npm").is_dir());
        assert!(!root.path().join("go").exists());
    }
}
