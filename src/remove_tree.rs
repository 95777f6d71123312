//! Removing a temp dir a command filled: what it made may include directories without
//! permissions (overlayfs leaves its work directory mode 000), which `remove_dir_all` cannot
//! enter.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// Removes `path` (a directory or file), first giving its owner's rights back to every directory
/// below it when a plain removal fails. Symlinks are removed, never followed.
pub fn remove_tree(path: &Path) -> std::io::Result<()> {
    let removed = match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.is_dir() => std::fs::remove_dir_all(path),
        Ok(_) => return std::fs::remove_file(path),
        Err(e) => return Err(e),
    };
    if removed.is_ok() {
        return removed;
    }
    open_up(path);
    std::fs::remove_dir_all(path)
}

fn open_up(dir: &Path) {
    let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700));
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            open_up(&entry.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_without_permissions_inside_is_removed() {
        let root = tempfile::tempdir().unwrap();
        let top = root.path().join("t");
        let locked = top.join("work/work");
        std::fs::create_dir_all(locked.join("inner")).unwrap();
        std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o000)).unwrap();
        remove_tree(&top).unwrap();
        assert!(!top.exists());
    }
}
