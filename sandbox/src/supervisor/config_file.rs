//! The files a program reads its settings from at its start (cargo's config, node's
//! `--env-file`), read by the supervisor at the program's exec as the program would read them,
//! or found unknown: nothing here follows a link into the process's own files as the
//! supervisor's, opens anything but a regular file, blocks on a FIFO or reads without bound.

use std::io::Read;
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;

use nix::fcntl::{AT_FDCWD, OFlag, OpenHow, ResolveFlag, openat2};
use std::path::{Component, Path, PathBuf};

/// The longest name of one directory entry (the kernel's `NAME_MAX`).
const NAME_MAX: usize = 255;

/// The most bytes of one file; a larger one is unknown.
const MAX_FILE_BYTES: u64 = 1 << 20;

/// What a place holds for the program that reads it.
pub(super) enum ConfigFile {
    /// Nothing: the program reads nothing there.
    Missing,
    Text(String),
    /// Something the supervisor cannot read as the program would: a link to the process's own
    /// files (`/dev/stdin`, `/proc/self/fd/N` resolve to the supervisor's), one that does not
    /// resolve, not a regular file, too large, not UTF-8, or a failure to look it up other
    /// than its absence or a name no process could open.
    Unknown,
}

/// What the file at `place` (an absolute path) holds for a program reading it there.
pub(super) fn read(place: &Path) -> ConfigFile {
    // A program skips a file that is not there (cargo checks `exists()`; node's
    // `--env-file-if-exists`), or whose name no process could open (a component longer than
    // the kernel's limit: cargo's inline `--config` values are looked up as paths first). Any
    // other failure leaves it unknown: the process may reach it where the supervisor cannot
    // (relative to its working directory, through a directory it may search but not read).
    match std::fs::symlink_metadata(place) {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return ConfigFile::Missing,
        Err(e) if e.raw_os_error() == Some(nix::libc::ENOTDIR) => return ConfigFile::Missing,
        Err(e)
            if e.raw_os_error() == Some(nix::libc::ENAMETOOLONG)
                && place.components().any(|c| c.as_os_str().len() > NAME_MAX) =>
        {
            return ConfigFile::Missing;
        }
        Err(_) => return ConfigFile::Unknown,
    }
    let Some(real) = resolve(place) else {
        return ConfigFile::Unknown;
    };
    match read_regular(&real) {
        Some(text) => ConfigFile::Text(text),
        None => ConfigFile::Unknown,
    }
}

/// The text of the regular file at `real` (links already resolved): opened with no link
/// followed (one swapped in since the resolution fails the open), its type checked before it
/// is opened for reading (opening a device can do something), at most [`MAX_FILE_BYTES`].
fn read_regular(real: &Path) -> Option<String> {
    let how = OpenHow::new()
        .flags(OFlag::O_PATH | OFlag::O_CLOEXEC)
        .resolve(ResolveFlag::RESOLVE_NO_SYMLINKS);
    let handle = openat2(AT_FDCWD, real, how).ok()?;
    let meta = nix::sys::stat::fstat(&handle).ok()?;
    let regular = meta.st_mode & nix::libc::S_IFMT == nix::libc::S_IFREG;
    if !regular || u64::try_from(meta.st_size).map_or(true, |n| n > MAX_FILE_BYTES) {
        return None;
    }
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NONBLOCK | nix::libc::O_NOCTTY)
        .open(format!("/proc/self/fd/{}", handle.as_raw_fd()))
        .ok()?;
    let mut text = String::new();
    match file.take(MAX_FILE_BYTES + 1).read_to_string(&mut text) {
        Ok(n) if n as u64 <= MAX_FILE_BYTES => Some(text),
        _ => None,
    }
}

/// The most links followed resolving one path (the kernel's limit).
const MAX_LINKS: usize = 40;

/// `path` with its links resolved by hand, or `None` when one leads into `/proc` (as
/// `/dev/stdin` and `/dev/fd/N` do): resolved there by the supervisor, `/proc/self` would be
/// the supervisor's own files, not the process's.
pub(super) fn resolve(path: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::from("/");
    let mut pending: Vec<std::ffi::OsString> = path
        .components()
        .rev()
        .map(|c| c.as_os_str().to_owned())
        .collect();
    let mut links = 0;
    while let Some(part) = pending.pop() {
        match Path::new(&part).components().next() {
            Some(Component::RootDir) => out = PathBuf::from("/"),
            Some(Component::ParentDir) => {
                out.pop();
            }
            Some(Component::Normal(name)) => {
                let next = out.join(name);
                match std::fs::symlink_metadata(&next) {
                    Ok(meta) if meta.file_type().is_symlink() => {
                        links += 1;
                        if links > MAX_LINKS {
                            return None;
                        }
                        let target = std::fs::read_link(&next).ok()?;
                        pending.extend(target.components().rev().map(|c| c.as_os_str().to_owned()));
                    }
                    _ => out = next,
                }
            }
            _ => {}
        }
        if out.starts_with("/proc") {
            return None;
        }
    }
    Some(out)
}

/// `path` with `.` and `..` resolved in its text, as cargo resolves an include and node a
/// path it loads.
pub(super) fn lexical(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_into_the_processs_own_files_is_not_read_as_the_supervisors() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join(".cargo");
        std::fs::create_dir_all(&dir).unwrap();
        // Through a link of a link, and a directory that is one.
        std::os::unix::fs::symlink("/dev/stdin", dir.join("in")).unwrap();
        std::os::unix::fs::symlink("in", dir.join("config.toml")).unwrap();
        assert_eq!(resolve(&dir.join("config.toml")), None);
        std::os::unix::fs::symlink("/proc/self/fd", root.path().join("fds")).unwrap();
        assert_eq!(resolve(&root.path().join("fds/0")), None);
        std::fs::write(dir.join("real.toml"), "").unwrap();
        std::os::unix::fs::symlink("real.toml", dir.join("config")).unwrap();
        assert_eq!(resolve(&dir.join("config")), Some(dir.join("real.toml")));
    }
}
