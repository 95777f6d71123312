//! The registry of session directories: every directory bridle has kept session logs and their
//! key in (the default one under any `$XDG_STATE_HOME`, any `--session-dir`), so that every
//! later sandbox and file tool hides them, not only the one the current invocation names.
//!
//! It is a file of absolute paths, one a line, in the default state directory
//! (`~/.local/state/bridle/session-dirs`), which every sandbox hides itself. Lines are appended
//! with `O_APPEND`, one `write` each, so concurrent runs do not interleave them. A line that is
//! not an absolute path is ignored with a warning; a registry that exists but cannot be read
//! stops the invocation (fail closed: a run must not go unmasked silently).

use std::ffi::OsStr;
use std::io::{Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Component, Path, PathBuf};

use anyhow::{Context, Result, bail};

/// What a mask of a registered directory is (its provenance in the plan): bridle's own
/// housekeeping, which the logged policy and its digest leave out, since it grows with every
/// new session directory.
pub const REGISTERED: &str = "a session directory bridle used before (session logs and their key)";

/// Whether `path` is masked in `plan` only because the registry lists it.
pub fn is_registered_mask(plan: &bridle_policy::Plan, path: &Path) -> bool {
    matches!(plan.origin_of(path), bridle_policy::Origin::Found { what } if what == REGISTERED)
}

/// The paths of `masks` (`path`, what it is) that another run may remove at any moment: the
/// registered directories, except one that is bridle's own too (an earlier `--session-dir`
/// naming the state directory, say).
pub fn masks_that_may_vanish(masks: &[(PathBuf, String)]) -> Vec<PathBuf> {
    let registered = |what: &String| what == REGISTERED;
    masks
        .iter()
        .filter(|(path, what)| {
            registered(what) && !masks.iter().any(|(p, w)| p == path && !registered(w))
        })
        .map(|(path, _)| path.clone())
        .collect()
}

/// The registry's name inside a default state directory.
const REGISTRY: &str = "session-dirs";

/// The default state directory under `home` (where `$XDG_STATE_HOME` unset puts it).
pub fn default_state_dir(home: &Path) -> PathBuf {
    home.join(".local/state/bridle")
}

/// The registry under `home`.
pub fn registry_file(home: &Path) -> PathBuf {
    default_state_dir(home).join(REGISTRY)
}

/// The directories the registries under `homes` list that still exist, resolved. A registry
/// that is absent lists nothing; one that cannot be read is an error naming it.
pub fn read(homes: &[&Path]) -> Result<Vec<PathBuf>> {
    let mut dirs = Vec::new();
    for home in homes {
        let file = registry_file(home);
        let Some(text) = read_registry(&file)? else {
            continue;
        };
        for (n, line) in text.split(|b| *b == b'\n').enumerate() {
            if line.is_empty() {
                continue;
            }
            let Some(path) = parse_line(line) else {
                tracing::warn!(
                    "session-directory registry `{}` line {}: not an absolute path without `..`; ignored",
                    file.display(),
                    n + 1
                );
                continue;
            };
            // A directory removed since is nothing to hide.
            if std::fs::symlink_metadata(&path).is_err() {
                continue;
            }
            let real = bridle_sandbox::real_path::real_path(&path);
            if !dirs.contains(&real) {
                dirs.push(real);
            }
        }
    }
    Ok(dirs)
}

/// Records `dir` in the registry under `home` (created 0600 in a 0700 directory if needed);
/// a failure is an error naming the registry, since a later run would not hide `dir`.
pub fn record(home: &Path, dir: &Path) -> Result<()> {
    let file = registry_file(home);
    append(&file, dir).with_context(|| {
        format!(
            "cannot record session dir `{}` in the session-directory registry `{}` (later \
             sandboxes could not hide it)",
            dir.display(),
            file.display()
        )
    })
}

/// Like [`record`], for the account's home when `$HOME` points elsewhere: only where that home
/// exists, and a failure is a warning (the registry under `$HOME` has the line).
pub fn record_also(home: &Path, dir: &Path) {
    if !home.is_dir() {
        return;
    }
    if let Err(e) = record(home, dir) {
        tracing::warn!("{e:#}");
    }
}

fn parse_line(line: &[u8]) -> Option<PathBuf> {
    let path = Path::new(OsStr::from_bytes(line));
    let clean = path.is_absolute()
        && !line.contains(&0)
        && !path.components().any(|c| matches!(c, Component::ParentDir));
    clean.then(|| path.to_path_buf())
}

/// The registry's bytes; `None` when it does not exist.
fn read_registry(file: &Path) -> Result<Option<Vec<u8>>> {
    let opened = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(file);
    let mut f = match opened {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) if e.kind() == std::io::ErrorKind::NotADirectory => return Ok(None),
        Err(e) => {
            return Err(e).with_context(|| unreadable(file));
        }
    };
    let meta = f.metadata().with_context(|| unreadable(file))?;
    if !meta.is_file() {
        bail!("{}: it is not a regular file", unreadable(file));
    }
    let mut text = Vec::new();
    f.read_to_end(&mut text).with_context(|| unreadable(file))?;
    Ok(Some(text))
}

fn unreadable(file: &Path) -> String {
    format!(
        "cannot read the session-directory registry `{}`, which names the session directories \
         every sandbox must hide (fix or remove it)",
        file.display()
    )
}

fn append(file: &Path, dir: &Path) -> Result<()> {
    let line = dir.as_os_str().as_bytes();
    if !dir.is_absolute() || line.contains(&b'\n') {
        bail!("the path is not absolute or holds a newline");
    }
    if read_registry(file)?.is_some_and(|text| text.split(|b| *b == b'\n').any(|l| l == line)) {
        return Ok(());
    }
    if let Some(parent) = file.parent() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(parent)?;
    }
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o600)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(file)?;
    // One write of the whole line: O_APPEND keeps concurrent writers' lines whole.
    let mut record = line.to_vec();
    record.push(b'\n');
    f.write_all(&record)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_registered_directory_that_is_bridles_own_too_may_not_vanish() {
        let own = PathBuf::from("/home/u/.local/state/bridle");
        let other = PathBuf::from("/var/tmp/job-3/sessions");
        let masks = [
            (own.clone(), "bridle's state directory".to_owned()),
            (own.clone(), REGISTERED.to_owned()),
            (other.clone(), REGISTERED.to_owned()),
        ];
        assert_eq!(masks_that_may_vanish(&masks), [other]);
    }

    #[test]
    fn malformed_lines_are_ignored_and_vanished_dirs_skipped() {
        let home = std::env::temp_dir().join(format!("bridle-reg-{}", std::process::id()));
        let kept = home.join("kept");
        std::fs::create_dir_all(&kept).unwrap();
        record(&home, &kept).unwrap();
        record(&home, &kept).unwrap();
        record(&home, &home.join("gone")).unwrap();
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(registry_file(&home))
            .unwrap();
        f.write_all(b"relative/dir\n/a/../b\n").unwrap();
        let listed = read(&[&home]).unwrap();
        assert_eq!(listed, vec![std::fs::canonicalize(&kept).unwrap()]);
        let text = std::fs::read_to_string(registry_file(&home)).unwrap();
        assert_eq!(text.matches("kept").count(), 1, "{text}");
        std::fs::remove_dir_all(&home).unwrap();
    }

    #[test]
    fn an_unreadable_registry_is_an_error_naming_it() {
        let home = std::env::temp_dir().join(format!("bridle-reg-dir-{}", std::process::id()));
        // A directory where the file should be cannot be read as one.
        std::fs::create_dir_all(registry_file(&home)).unwrap();
        let err = format!("{:#}", read(&[&home]).unwrap_err());
        assert!(err.contains("session-dirs"), "{err}");
        std::fs::remove_dir_all(&home).unwrap();
    }
}
