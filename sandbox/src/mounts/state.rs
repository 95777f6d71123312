//! bridle's own records about workspaces, kept on the host outside every workspace (so nothing
//! bridle needs is visible to git there): `/var/tmp/bridle-<uid>/protect/`, in the same private
//! base as the runs' temp dirs. Inside a sandbox that base is hidden or read-only.
//!
//! - `placeholders/DEV-INO`: one file per placeholder directory bridle made, named by the
//!   directory's device and inode and holding its path, so that every run (not only the one
//!   that made it, and after a crash) recognises it. An empty directory is invisible to git.
//! - `pending/PID-ID`: one file per run whose end-of-run inspection of new repositories has not
//!   completed (see the `inspect` module's `pending` records).

use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The private base: `/var/tmp/bridle-<euid>`.
fn base() -> PathBuf {
    PathBuf::from("/var/tmp").join(format!("bridle-{}", nix::unistd::geteuid().as_raw()))
}

/// Creates `dir` (mode 0700) if needed and checks it is ours alone: a real directory (not a
/// symlink) owned by this user and writable by nobody else. `/var/tmp` is shared and sticky, so
/// another user could have made the name first.
fn private_dir(dir: &Path) -> std::io::Result<()> {
    match std::fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    let meta = std::fs::symlink_metadata(dir)?;
    let me = nix::unistd::geteuid().as_raw();
    if !meta.is_dir() || meta.uid() != me || meta.permissions().mode() & 0o022 != 0 {
        return Err(std::io::Error::other(format!(
            "`{}` must be a directory owned by uid {me} and writable only by it",
            dir.display()
        )));
    }
    Ok(())
}

/// The records directory `protect/<name>`, created and checked.
pub(super) fn records_dir(name: &str) -> std::io::Result<PathBuf> {
    let base = base();
    private_dir(&base)?;
    let protect = base.join("protect");
    private_dir(&protect)?;
    let dir = protect.join(name);
    private_dir(&dir)?;
    Ok(dir)
}

/// Writes `content` to the record `dir/name`, replacing one that is there (never through a
/// symlink).
pub(super) fn write_record(dir: &Path, name: &str, content: &[u8]) -> std::io::Result<()> {
    let path = dir.join(name);
    let temp = dir.join(format!(".{name}.{}", super::unique_suffix()));
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(&temp)
        .and_then(|mut f| f.write_all(content))
        .and_then(|()| std::fs::rename(&temp, &path));
    if written.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    written
}

/// The content of the record `dir/name`, when it is a regular file of at most 64 KiB.
pub(super) fn read_record(dir: &Path, name: &str) -> Option<Vec<u8>> {
    use std::io::Read;
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK)
        .open(dir.join(name))
        .ok()?;
    let meta = file.metadata().ok()?;
    if !meta.is_file() || meta.len() > 64 * 1024 {
        return None;
    }
    let mut content = Vec::new();
    file.read_to_end(&mut content).ok()?;
    Some(content)
}

/// The registry of placeholder directories.
#[derive(Debug)]
pub(super) struct Registry {
    dir: PathBuf,
}

impl Registry {
    /// The user's registry, created when missing.
    pub(super) fn open() -> std::io::Result<Registry> {
        Ok(Registry {
            dir: records_dir("placeholders")?,
        })
    }

    fn name(id: (u64, u64)) -> String {
        format!("{}-{}", id.0, id.1)
    }

    /// Records that the directory `id` at `path` is a placeholder.
    pub(super) fn add(&self, id: (u64, u64), path: &Path) -> std::io::Result<()> {
        write_record(&self.dir, &Self::name(id), path.as_os_str().as_bytes())
    }

    /// Whether the directory `id` at `path` was recorded as a placeholder (at that very path: an
    /// inode number reused elsewhere is not taken for one).
    pub(super) fn holds(&self, id: (u64, u64), path: &Path) -> bool {
        read_record(&self.dir, &Self::name(id)).is_some_and(|p| p == path.as_os_str().as_bytes())
    }

    /// Forgets the placeholder `id`.
    pub(super) fn remove(&self, id: (u64, u64)) {
        let _ = std::fs::remove_file(self.dir.join(Self::name(id)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_placeholder_is_known_only_at_its_own_path() {
        let registry = Registry::open().unwrap();
        let id = (u64::MAX, u64::MAX - 7);
        registry.add(id, Path::new("/w/.bridle")).unwrap();
        assert!(registry.holds(id, Path::new("/w/.bridle")));
        assert!(!registry.holds(id, Path::new("/w/.git/hooks")));
        registry.remove(id);
        assert!(!registry.holds(id, Path::new("/w/.bridle")));
    }
}
