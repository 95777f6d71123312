//! The device nodes the full view hides: those that reach a disk below every file system (block
//! devices, SCSI, NVMe and USB pass-through, device-mapper's control), physical memory, I/O
//! ports or a device's DMA, and those that type into the host's sessions (virtual keyboards,
//! input devices). A command writing one of them would change a protected file's blocks past
//! every bind, or have a host session outside the view do it. Root, whom file permissions do
//! not stop, keeps only the character devices of [`ROOT_KEEPS`]. No node can be made again:
//! `mknod` of a device needs a capability over the host's user namespace, which nobody in the
//! view holds (root runs in a user namespace of its own that maps every id to itself).
//!
//! The nodes are looked for in `/dev` (whatever file system it is: a container's `/dev` is
//! often a tmpfs of nodes) and in every other `devtmpfs` mount (a chroot's bind of `/dev`).

use std::collections::HashSet;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

use bridle_policy::Guarantee;

use super::{MountFailure, fail};

/// What a device node is, for [`hidden`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Node {
    Block,
    Char,
}

/// Sysfs paths (of `/sys/dev/char/MAJOR:MINOR`, resolved) of character devices hidden from
/// everyone: pass-through to a disk, a device's DMA, virtual keyboards and input devices (a
/// user in the `disk` or `input` group can open these).
const REACHES_PAST: &[&str] = &[
    "/scsi_generic/",
    "/bsg/",
    "/nvme-generic/",
    "/nvme/nvme",
    "/mtd/",
    "/ubi",
    "/misc/device-mapper",
    "/vfio/",
    "/misc/uinput",
    "/misc/uhid",
    "/input/",
];

/// `usb_device`: `/dev/bus/usb/BBB/DDD`, through which a USB disk takes SCSI commands.
const USB_DEVICE_MAJOR: u64 = 189;

/// The character devices root keeps (by sysfs path): terminals, FUSE, KVM, tun and vhost,
/// userfaultfd, GPUs and sound. Besides these, `/dev/null`, `zero`, `full`, `random` and
/// `urandom` (major 1, minors 3, 5, 7, 8, 9).
const ROOT_KEEPS: &[&str] = &[
    "/tty/",
    "/misc/fuse",
    "/misc/kvm",
    "/misc/tun",
    "/misc/vhost-net",
    "/misc/vhost-vsock",
    "/misc/userfaultfd",
    "/drm/",
    "/sound/",
];

/// Whether the full view hides a device node, for `root` or anyone else: every block device;
/// `/dev/mem`, `/dev/kmem` and `/dev/port`; the character devices of [`REACHES_PAST`] and USB
/// devices; for root, every character device not in [`ROOT_KEEPS`] (one whose sysfs path is
/// unknown included).
pub(super) fn hidden(node: Node, major: u64, minor: u64, sysfs: Option<&Path>, root: bool) -> bool {
    let link = sysfs.map(|l| l.to_string_lossy().into_owned());
    let in_list = |list: &[&str]| {
        link.as_deref()
            .is_some_and(|l| list.iter().any(|c| l.contains(c)))
    };
    match node {
        Node::Block => true,
        Node::Char if major == 1 => {
            !matches!(minor, 3 | 5 | 7 | 8 | 9) && (root || matches!(minor, 1 | 2 | 4))
        }
        Node::Char if root => !in_list(ROOT_KEEPS),
        Node::Char => major == USB_DEVICE_MAJOR || in_list(REACHES_PAST),
    }
}

/// The mount points of `devtmpfs` in `mountinfo` (the text of `/proc/self/mountinfo`).
pub(super) fn devtmpfs_mounts(mountinfo: &str) -> Vec<PathBuf> {
    mountinfo
        .lines()
        .filter_map(|line| {
            let (mount, fs) = line.split_once(" - ")?;
            if fs.split(' ').next() != Some("devtmpfs") {
                return None;
            }
            mount.split(' ').nth(4).map(unescape)
        })
        .collect()
}

/// A mountinfo path: space, tab, newline and backslash are written as `\ooo`.
pub(crate) fn unescape(field: &str) -> PathBuf {
    use std::os::unix::ffi::OsStringExt;
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes
            .get(i + 1..i + 4)
            .filter(|d| bytes[i] == b'\\' && d.iter().all(|c| (b'0'..=b'7').contains(c)));
        match octal {
            Some(d) => {
                out.push((d[0] - b'0') * 64 + (d[1] - b'0') * 8 + (d[2] - b'0'));
                i += 4;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    PathBuf::from(std::ffi::OsString::from_vec(out))
}

/// The device nodes to hide (see [`hidden`]) under `/dev` and every devtmpfs mount, each on its
/// own file system (other mounts below them, such as `/dev/pts`, are skipped, and so are
/// symlinks). A directory this user can neither list nor enter holds nothing it can open; one it
/// can enter but not list refuses the escalation (its nodes could not be checked).
pub(super) fn nodes_to_hide(root: bool) -> Result<Vec<PathBuf>, MountFailure> {
    let why = |what: String| fail(Guarantee::FsProtect, what);
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").map_err(|e| {
        why(format!(
            "reading /proc/self/mountinfo for the device mounts: {e}"
        ))
    })?;
    let mut tops = vec![PathBuf::from("/dev")];
    tops.extend(devtmpfs_mounts(&mountinfo));
    let mut seen = HashSet::new();
    let mut found = Vec::new();
    for top in tops {
        let Ok(meta) = std::fs::symlink_metadata(&top) else {
            continue;
        };
        if !meta.is_dir() {
            continue;
        }
        let fs = meta.dev();
        let mut dirs = vec![(top, meta)];
        while let Some((dir, meta)) = dirs.pop() {
            // The same directory twice (a bind of /dev inside /dev, or a devtmpfs mount that is
            // /dev itself) is walked once.
            if !seen.insert((meta.dev(), meta.ino())) {
                continue;
            }
            let entries = match std::fs::read_dir(&dir) {
                Ok(entries) => entries,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e)
                    if e.kind() == std::io::ErrorKind::PermissionDenied
                        && nix::unistd::access(&dir, nix::unistd::AccessFlags::X_OK).is_err() =>
                {
                    continue;
                }
                Err(e) => {
                    return Err(why(format!(
                        "listing `{}` for device nodes to hide: {e}",
                        dir.display()
                    )));
                }
            };
            for entry in entries {
                let entry = entry.map_err(|e| why(format!("listing `{}`: {e}", dir.display())))?;
                let path = entry.path();
                // A node removed meanwhile (a hot-unplugged disk) is nothing to hide.
                let Ok(meta) = std::fs::symlink_metadata(&path) else {
                    continue;
                };
                let kind = meta.file_type();
                if kind.is_dir() {
                    if meta.dev() == fs {
                        dirs.push((path, meta));
                    }
                    continue;
                }
                let node = if kind.is_block_device() {
                    Node::Block
                } else if kind.is_char_device() {
                    Node::Char
                } else {
                    continue;
                };
                let (major, minor) = (
                    nix::sys::stat::major(meta.rdev()),
                    nix::sys::stat::minor(meta.rdev()),
                );
                let sysfs = std::fs::canonicalize(format!("/sys/dev/char/{major}:{minor}")).ok();
                if hidden(node, major, minor, sysfs.as_deref(), root) {
                    found.push(path);
                }
            }
        }
    }
    found.sort();
    found.dedup();
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sysfs(p: &str) -> Option<PathBuf> {
        Some(PathBuf::from(p))
    }

    #[test]
    fn disks_memory_pass_through_and_keyboards_are_hidden_from_everyone() {
        for root in [false, true] {
            assert!(hidden(Node::Block, 254, 0, None, root));
            assert!(hidden(Node::Block, 7, 0, None, root));
            for minor in [1, 2, 4] {
                assert!(
                    hidden(Node::Char, 1, minor, None, root),
                    "mem minor {minor}"
                );
            }
            assert!(hidden(Node::Char, USB_DEVICE_MAJOR, 2, None, root));
            for link in [
                "/sys/devices/pci0000:00/0000:00:1f.2/ata1/host0/target0:0:0/0:0:0:0/scsi_generic/sg0",
                "/sys/devices/pci0000:00/0000:00:1f.2/ata1/host0/target0:0:0/0:0:0:0/bsg/0:0:0:0",
                "/sys/devices/pci0000:00/0000:00:04.0/nvme/nvme0",
                "/sys/devices/pci0000:00/0000:00:04.0/nvme/nvme0/ng0n1",
                "/sys/devices/virtual/misc/device-mapper",
                "/sys/devices/virtual/vfio/devices/vfio0",
                "/sys/devices/virtual/misc/uinput",
                "/sys/devices/virtual/misc/uhid",
                "/sys/devices/platform/i8042/serio0/input/input1/event1",
            ] {
                assert!(
                    hidden(Node::Char, 21, 0, sysfs(link).as_deref(), root),
                    "{link}"
                );
            }
        }
    }

    #[test]
    fn terminals_and_ordinary_devices_stay_for_everyone() {
        for root in [false, true] {
            for minor in [3, 5, 7, 8, 9] {
                assert!(
                    !hidden(Node::Char, 1, minor, None, root),
                    "mem minor {minor}"
                );
            }
            for link in [
                "/sys/devices/virtual/tty/tty",
                "/sys/devices/virtual/tty/ptmx",
                "/sys/devices/platform/serial8250/tty/ttyS0",
                "/sys/devices/virtual/misc/fuse",
                "/sys/devices/virtual/misc/kvm",
                "/sys/devices/virtual/misc/tun",
                "/sys/devices/pci0000:00/0000:00:02.0/drm/card0",
            ] {
                assert!(
                    !hidden(Node::Char, 10, 0, sysfs(link).as_deref(), root),
                    "{link}"
                );
            }
        }
    }

    #[test]
    fn root_keeps_only_the_listed_character_devices() {
        // kmsg, an unknown device, the hypervisor's vsock, a virtual console's memory.
        assert!(hidden(Node::Char, 1, 11, None, true));
        assert!(!hidden(Node::Char, 1, 11, None, false));
        for link in [
            "/sys/devices/virtual/misc/vsock",
            "/sys/devices/virtual/vc/vcs1",
            "/sys/devices/virtual/misc/btrfs-control",
        ] {
            assert!(
                hidden(Node::Char, 10, 0, sysfs(link).as_deref(), true),
                "{link}"
            );
            assert!(
                !hidden(Node::Char, 10, 0, sysfs(link).as_deref(), false),
                "{link}"
            );
        }
        assert!(hidden(Node::Char, 195, 0, None, true));
        assert!(!hidden(Node::Char, 195, 0, None, false));
    }

    #[test]
    fn devtmpfs_mounts_are_found_with_their_escaped_paths() {
        let mountinfo = "\
22 1 0:5 / /dev rw,nosuid shared:2 - devtmpfs udev rw,size=100k
23 22 0:21 / /dev/pts rw shared:3 - devpts devpts rw,mode=600
40 1 0:5 / /srv/my\\040root/dev rw master:2 - devtmpfs udev rw
41 1 0:30 / /tmp rw - tmpfs tmpfs rw
";
        assert_eq!(
            devtmpfs_mounts(mountinfo),
            [PathBuf::from("/dev"), PathBuf::from("/srv/my root/dev")]
        );
    }
}
