//! Paths as the kernel reaches them. Masked paths and roots are written as the user names them
//! (`~/.ssh` with a `$HOME` below a symlinked `/home`, a masked path that is itself a symlink);
//! every comparison with a path the kernel actually opened must use their resolved form.

use std::path::{Path, PathBuf};

/// `path` (made absolute against `/`, normalised lexically) with every symlink in its existing
/// part resolved; the part that does not exist yet is appended as written.
pub fn real_path(path: &Path) -> PathBuf {
    let normal = bridle_policy::normalize(path);
    let mut existing = normal.as_path();
    let mut rest = Vec::new();
    loop {
        if let Ok(real) = std::fs::canonicalize(existing) {
            let mut out = real;
            for part in rest.iter().rev() {
                out.push(part);
            }
            return out;
        }
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_owned());
                existing = parent;
            }
            _ => return normal,
        }
    }
}

/// `paths` as written and as resolved ([`real_path`]), sorted, without duplicates: what a
/// masked path covers, whichever name a caller uses.
pub fn with_real_paths(paths: &[PathBuf]) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = paths
        .iter()
        .flat_map(|p| [bridle_policy::normalize(p), real_path(p)])
        .collect();
    out.sort();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn symlinked_parents_and_a_symlinked_leaf_resolve() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::create_dir_all(root.join("real/u")).unwrap();
        std::os::unix::fs::symlink("real", root.join("link")).unwrap();
        std::os::unix::fs::symlink("u", root.join("real/alias")).unwrap();
        assert_eq!(
            real_path(&root.join("link/u/.ssh/id_rsa")),
            root.join("real/u/.ssh/id_rsa")
        );
        assert_eq!(real_path(&root.join("link/alias")), root.join("real/u"));
        assert_eq!(
            with_real_paths(&[root.join("link/u/.ssh")]),
            vec![root.join("link/u/.ssh"), root.join("real/u/.ssh")]
        );
        assert_eq!(
            with_real_paths(&[root.join("real/u")]),
            vec![root.join("real/u")]
        );
    }
}
