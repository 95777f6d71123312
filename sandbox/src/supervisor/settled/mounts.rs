//! The mounts of the sandbox's view, for one question: can the entries of a directory (or a
//! file) that a read-only mount shows change through another, writable mount of the same
//! filesystem (a host bind mount of a writable root elsewhere, seen read-only in the view
//! while the root itself is mounted writable)?

use std::path::{Path, PathBuf};

use crate::mounts::devices::unescape;

/// One line of `/proc/self/mountinfo`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Mount {
    /// `major:minor` of the filesystem.
    device: String,
    /// The directory of the filesystem this mount shows.
    root: PathBuf,
    /// Where it is mounted.
    point: PathBuf,
    /// Mounted writable (the per-mount `rw` option).
    writable: bool,
}

/// The view's mounts, in mount order.
#[derive(Debug, Default)]
pub struct Mounts(Vec<Mount>);

impl Mounts {
    /// This process's mounts (`/proc/self/mountinfo`); `None` when unreadable.
    pub fn of_this_process() -> Option<Mounts> {
        parse(&std::fs::read(PathBuf::from("/proc/self/mountinfo")).ok()?)
    }

    /// Whether what `path` (canonical, no symlinks) names can be reached through a writable
    /// mount too: it lies, in its filesystem, inside the directory a writable mount of that
    /// filesystem shows. Unknown (no mount holds it): yes. Not seen: an overlay writing into
    /// an upper directory of another filesystem (the devices differ). The view's only
    /// writable overlays, the cache home's, keep theirs below bridle's temp directory, which
    /// the view covers with an empty tmpfs, so no directory the command sees is one.
    pub fn writable_elsewhere(&self, path: &Path) -> bool {
        // The last mount on the longest mount point that is a prefix of the path: the one
        // on top.
        let Some(mount) = self
            .0
            .iter()
            .enumerate()
            .filter(|(_, m)| path.starts_with(&m.point))
            .max_by_key(|(i, m)| (m.point.as_os_str().len(), *i))
            .map(|(_, m)| m)
        else {
            return true;
        };
        let Ok(rest) = path.strip_prefix(&mount.point) else {
            return true;
        };
        let inside = mount.root.join(rest);
        self.0
            .iter()
            .any(|m| m.writable && m.device == mount.device && inside.starts_with(&m.root))
    }
}

impl Mounts {
    /// Whether the filesystem `major:minor` could be written through some mount of the view:
    /// a writable mount of it, or no mount at all (unknown: a btrfs subvolume's files show
    /// another device than its mount).
    pub fn device_writable(&self, major: u64, minor: u64) -> bool {
        let device = format!("{major}:{minor}");
        let mut shown = false;
        for m in self.0.iter().filter(|m| m.device == device) {
            if m.writable {
                return true;
            }
            shown = true;
        }
        !shown
    }
}

pub(in crate::supervisor) fn parse(text: &[u8]) -> Option<Mounts> {
    let text = std::str::from_utf8(text).ok()?;
    let mut mounts = Vec::new();
    for line in text.lines() {
        let fields: Vec<&str> = line.split(' ').collect();
        let (device, root, point, options) = (
            fields.get(2)?,
            fields.get(3)?,
            fields.get(4)?,
            fields.get(5)?,
        );
        mounts.push(Mount {
            device: (*device).to_owned(),
            root: unescape(root),
            point: unescape(point),
            writable: options.split(',').any(|o| o == "rw"),
        });
    }
    Some(Mounts(mounts))
}

#[cfg(test)]
mod tests {
    use super::*;

    const VIEW: &str = "\
1 0 254:0 / / ro,relatime - ext4 /dev/vda rw
2 1 254:0 /srv/ci /mnt/builds ro,relatime - ext4 /dev/vda rw
3 1 254:0 /srv/ci/job1 /srv/ci/job1 rw,relatime - ext4 /dev/vda rw
4 1 0:40 / /tmp rw,nosuid - tmpfs tmpfs rw
5 1 254:0 /home/a\\040b /home/a\\040b rw - ext4 /dev/vda rw
";

    #[test]
    fn a_read_only_path_into_a_writable_roots_filesystem_subtree_is_writable_elsewhere() {
        let mounts = parse(VIEW.as_bytes()).unwrap();
        // /mnt/builds shows /srv/ci, whose job1 is mounted writable at its own path.
        assert!(mounts.writable_elsewhere(Path::new("/mnt/builds/job1/bin/tool")));
        assert!(mounts.writable_elsewhere(Path::new("/mnt/builds/job1")));
        // Beside it in the same bind mount, and the system's own directories: not.
        assert!(!mounts.writable_elsewhere(Path::new("/mnt/builds/job2/bin/tool")));
        assert!(!mounts.writable_elsewhere(Path::new("/usr/bin/cc")));
        assert!(!mounts.writable_elsewhere(Path::new("/srv/ci")));
        // The writable mounts themselves, and one with an escaped space.
        assert!(mounts.writable_elsewhere(Path::new("/srv/ci/job1/x")));
        assert!(mounts.writable_elsewhere(Path::new("/tmp/x")));
        assert!(mounts.writable_elsewhere(Path::new("/home/a b/x")));
        assert!(!mounts.writable_elsewhere(Path::new("/home/a")));
    }

    #[test]
    fn a_filesystem_is_writable_where_any_mount_of_it_is_or_none_shows_it() {
        let mounts = parse(VIEW.as_bytes()).unwrap();
        // `254:0` has a writable bind (the job directory) besides the read-only root.
        assert!(mounts.device_writable(254, 0));
        assert!(mounts.device_writable(0, 40));
        assert!(
            mounts.device_writable(9, 9),
            "a device no mount shows is unknown"
        );
        let read_only = parse(b"1 0 254:0 / / ro - ext4 /dev/vda rw\n").unwrap();
        assert!(!read_only.device_writable(254, 0));
    }

    #[test]
    fn this_processs_own_mounts_parse() {
        let mounts = Mounts::of_this_process().unwrap();
        assert!(!mounts.0.is_empty());
        assert!(mounts.0.iter().any(|m| m.point == Path::new("/")));
    }
}
