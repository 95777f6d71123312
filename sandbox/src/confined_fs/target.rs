//! What a file tool may write: regular files only, a file with several names only when
//! allowed; and the unconfined write of `danger-full-access`.

use std::io::Write;
use std::path::Path;

use super::denied::{FsDenied, io_error};

/// Whether a write may go to a file that has more than one name (hard links).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HardLinks {
    /// Any link count (no path rules, or a person approved this write).
    Allowed,
    /// Only a file with one name (or a new file): checked on the opened file, so a link made
    /// after the caller's check is caught too.
    Refused,
}

/// What a file is, for refusals.
fn kind_of(file_type: std::fs::FileType) -> Option<&'static str> {
    use std::os::unix::fs::FileTypeExt;
    if file_type.is_file() {
        None
    } else if file_type.is_dir() {
        Some("directory")
    } else if file_type.is_fifo() {
        Some("FIFO")
    } else if file_type.is_socket() {
        Some("socket")
    } else if file_type.is_char_device() {
        Some("character device")
    } else if file_type.is_block_device() {
        Some("block device")
    } else {
        Some("special file")
    }
}

/// Refuses anything but a regular file, and a file with several names unless allowed.
pub(super) fn check_target(
    path: &Path,
    meta: &std::fs::Metadata,
    links: HardLinks,
) -> Result<(), FsDenied> {
    use std::os::unix::fs::MetadataExt;
    if let Some(kind) = kind_of(meta.file_type()) {
        return Err(FsDenied::NotRegular {
            path: path.to_path_buf(),
            kind,
        });
    }
    if links == HardLinks::Refused && meta.nlink() > 1 {
        return Err(FsDenied::HardLinked {
            path: path.to_path_buf(),
            links: meta.nlink(),
        });
    }
    Ok(())
}

/// Writes `content` to `path` without any confinement (danger-full-access, or an approved
/// escalation to it), creating missing parents: never blocking on a FIFO, never writing
/// anything but a regular file, and a file with several names only when `links` allows it.
pub fn write_unconfined(path: &Path, content: &[u8], links: HardLinks) -> Result<(), FsDenied> {
    use std::os::unix::fs::OpenOptionsExt;
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|e| io_error(parent, &e))?;
    }
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .mode(0o644)
        .custom_flags(nix::libc::O_NONBLOCK | nix::libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| io_error(path, &e))?;
    let meta = file.metadata().map_err(|e| io_error(path, &e))?;
    check_target(path, &meta, links)?;
    write_over(path, &mut file, content)
}

/// Overwrites, then cuts to length, rather than O_TRUNC: ext4 flushes a file truncated to zero
/// and rewritten at close (auto_da_alloc), which costs a disk round trip.
pub(super) fn write_over(
    path: &Path,
    file: &mut std::fs::File,
    content: &[u8],
) -> Result<(), FsDenied> {
    let len = u64::try_from(content.len()).unwrap_or(u64::MAX);
    file.write_all(content)
        .and_then(|()| file.set_len(len))
        .map_err(|e| io_error(path, &e))
}
