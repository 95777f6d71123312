//! Where profile text comes from: the profiles shipped inside the binary, and files on disk.
//!
//! This is the only module of the crate that touches `std::fs`, and only to read profile text.

use std::io::Read;
use std::path::{Path, PathBuf};

use crate::error::PolicyError;

/// Profiles are small; anything larger is refused before parsing.
pub const MAX_PROFILE_BYTES: usize = 1024 * 1024;

/// The profiles shipped with bridle, by name, with their text.
pub const SHIPPED: &[(&str, &str)] = &[
    ("read-only", include_str!("../../profiles/read-only.yaml")),
    (
        "workspace-write",
        include_str!("../../profiles/workspace-write.yaml"),
    ),
    (
        "danger-full-access",
        include_str!("../../profiles/danger-full-access.yaml"),
    ),
    (
        "workstation",
        include_str!("../../profiles/workstation.yaml"),
    ),
    ("ci-locked", include_str!("../../profiles/ci-locked.yaml")),
    (
        "ci-registries",
        include_str!("../../profiles/ci-registries.yaml"),
    ),
];

/// The text of one profile layer and how to name it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceFile {
    /// How errors and provenance name it: `profiles/NAME.yaml` for shipped profiles, the path
    /// otherwise.
    pub display: String,
    /// The file on disk, when there is one (used to protect profile files that lie inside a
    /// writable root, and to resolve relative `extends`).
    pub path: Option<PathBuf>,
    /// The raw bytes (validated as UTF-8 by the parser).
    pub bytes: Vec<u8>,
}

impl SourceFile {
    /// A shipped profile by name.
    pub fn shipped(name: &str) -> Result<SourceFile, PolicyError> {
        SHIPPED
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(n, text)| SourceFile {
                display: format!("profiles/{n}.yaml"),
                path: None,
                bytes: text.as_bytes().to_vec(),
            })
            .ok_or_else(|| PolicyError::UnknownProfile {
                name: name.to_owned(),
                known: SHIPPED
                    .iter()
                    .map(|(n, _)| *n)
                    .collect::<Vec<_>>()
                    .join(", "),
            })
    }

    /// In-memory text, for tests and for callers that read files themselves.
    pub fn from_text(display: impl Into<String>, text: impl Into<Vec<u8>>) -> SourceFile {
        SourceFile {
            display: display.into(),
            path: None,
            bytes: text.into(),
        }
    }

    /// Reads a profile file, refusing anything over [`MAX_PROFILE_BYTES`] without reading it all.
    pub fn read(path: &Path) -> Result<SourceFile, PolicyError> {
        let display = path.display().to_string();
        let read_err = |source| PolicyError::ReadProfile {
            file: display.clone(),
            source,
        };
        let file = std::fs::File::open(path).map_err(read_err)?;
        let mut bytes = Vec::new();
        let cap = u64::try_from(MAX_PROFILE_BYTES)
            .unwrap_or(u64::MAX)
            .saturating_add(1);
        file.take(cap).read_to_end(&mut bytes).map_err(read_err)?;
        if bytes.len() > MAX_PROFILE_BYTES {
            return Err(PolicyError::ProfileTooLarge {
                file: display,
                limit: MAX_PROFILE_BYTES,
            });
        }
        // Canonical, so a profile reached through a symlink into a writable root is still recognised
        // as inside it (and protected).
        let path = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        Ok(SourceFile {
            display,
            path: Some(path),
            bytes,
        })
    }
}

/// Whether a profile reference (`--profile X`, `extends: X`) names a file rather than a shipped
/// profile.
pub fn is_path_reference(reference: &str) -> bool {
    reference.contains('/') || reference.ends_with(".yaml") || reference.ends_with(".yml")
}

/// Resolves profile references to their text.
pub trait ProfileSource {
    /// Resolves `reference`, as written by `from` (or on the command line when `from` is `None`).
    fn resolve(
        &self,
        reference: &str,
        from: Option<&SourceFile>,
    ) -> Result<SourceFile, PolicyError>;
}

/// Shipped profiles by name; files by path (relative `extends` are relative to the extending
/// file's directory). Shipped profiles may only extend shipped profiles.
#[derive(Debug, Clone, Copy, Default)]
pub struct FsProfileSource;

impl ProfileSource for FsProfileSource {
    fn resolve(
        &self,
        reference: &str,
        from: Option<&SourceFile>,
    ) -> Result<SourceFile, PolicyError> {
        if !is_path_reference(reference) {
            return SourceFile::shipped(reference);
        }
        let path = Path::new(reference);
        let path = match from {
            Some(SourceFile {
                path: Some(parent), ..
            }) if path.is_relative() => parent.parent().unwrap_or(Path::new("/")).join(path),
            Some(SourceFile {
                path: None,
                display,
                ..
            }) => {
                return Err(PolicyError::ReadProfile {
                    file: reference.to_owned(),
                    source: std::io::Error::other(format!(
                        "{display} has no directory to resolve a file `extends` against"
                    )),
                });
            }
            _ => path.to_path_buf(),
        };
        SourceFile::read(&path)
    }
}

/// A source that only knows the shipped profiles: for pure tests.
#[derive(Debug, Clone, Copy, Default)]
pub struct ShippedOnly;

impl ProfileSource for ShippedOnly {
    fn resolve(
        &self,
        reference: &str,
        _from: Option<&SourceFile>,
    ) -> Result<SourceFile, PolicyError> {
        SourceFile::shipped(reference)
    }
}
