//! The full view: full access for a call escalated from a confined session, except that the
//! protected paths stay read-only and bridle's own directories stay hidden.
//!
//! Only steps 1 (private propagation), 5 (pins), 6 (protected binds) and 7 (masks) of the mount
//! view, plus the PID namespace's fresh `/proc` (10): `/` stays writable, the real `/dev`, `/run`
//! and `/tmp` stay. Since everything around them is writable, pins go all the way up: every
//! ancestor of a content root, of a protected path and of a masked path is bound onto itself, so
//! no directory on the way can be renamed or removed to put another one in its place (`mv
//! ~/project ~/old && mkdir -p ~/project/.git/hooks`) for bridle or git to read after the run.
//!
//! The real `/dev` stays, except the nodes that reach a disk below every file system (block
//! devices, SCSI and NVMe pass-through, device-mapper's control), physical memory, I/O ports or
//! a device's DMA, and virtual keyboards: a command writing one of those writes the protected
//! files' blocks past every bind, or types into a host session that is not in the view.
//! Each gets the empty, read-only mask file bound over it. No node can be made again: `mknod`
//! of a device needs a capability over the host's user namespace, which nobody in the view
//! holds (root runs in a user namespace of its own that maps every id to itself).

use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

use bridle_policy::{Guarantee, SandboxSpec};

use super::{MountFailure, fail, is_within};

/// The ancestors of `path` below `/`, outermost first, `path` itself included when `inclusive`.
fn ancestors_below_root(path: &Path, inclusive: bool) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = path
        .ancestors()
        .skip(usize::from(!inclusive))
        .filter(|a| a.parent().is_some())
        .map(Path::to_path_buf)
        .collect();
    out.reverse();
    out
}

/// Refuses a path reached through a symlink: a command with full access could re-point it.
fn refuse_symlinks(path: &Path) -> Result<(), MountFailure> {
    for dir in ancestors_below_root(path, true) {
        if std::fs::symlink_metadata(&dir).is_ok_and(|m| m.file_type().is_symlink()) {
            return Err(fail(
                Guarantee::FsProtect,
                format!(
                    "protected path `{}` goes through the symlink `{}`, which a command with full access could redirect",
                    path.display(),
                    dir.display()
                ),
            ));
        }
    }
    Ok(())
}

/// What the full view adds to the prepared plan: the protected paths outside every content root
/// (bridle's configuration directory, the profile files), created first when missing (an empty
/// directory: bridle's own, which the command then cannot create), and the pins of every
/// ancestor. `protected` and `pins` are the plan's so far (inside the content roots).
pub(super) fn extend(
    spec: &SandboxSpec,
    outermost: &[PathBuf],
    masked: &[PathBuf],
    protected: &mut Vec<PathBuf>,
    pins: &mut Vec<PathBuf>,
) -> Result<(), MountFailure> {
    for root in outermost {
        pins.extend(ancestors_below_root(root, true));
    }
    for path in &spec.protected_paths {
        if is_within(path, outermost) {
            continue;
        }
        refuse_symlinks(path)?;
        if std::fs::symlink_metadata(path).is_err() {
            std::fs::create_dir_all(path).map_err(|e| {
                fail(
                    Guarantee::FsProtect,
                    format!(
                        "creating the protected directory `{}` so that the escalated command cannot: {e}",
                        path.display()
                    ),
                )
            })?;
        }
        pins.extend(ancestors_below_root(path, false));
        protected.push(path.clone());
    }
    for path in masked {
        refuse_symlinks(path)?;
        pins.extend(ancestors_below_root(path, false));
    }
    // A protected or masked path is a mount of its own; nothing below it needs a pin.
    pins.retain(|p| {
        !p.ancestors()
            .any(|a| protected.iter().any(|q| q == a) || masked.iter().any(|m| m == a))
    });
    pins.sort();
    pins.dedup();
    protected.sort();
    protected.dedup();
    Ok(())
}

/// What a device node is, for [`reaches_storage`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Node {
    Block,
    Char,
}

/// The sysfs paths of character devices that reach past the view: commands straight to a
/// disk, a device's DMA (vfio), or keystrokes typed into the host's sessions (uinput, uhid).
const STORAGE_CHAR_CLASSES: &[&str] = &[
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
];

/// Whether a device node reaches storage or memory below the file systems, or the host's
/// sessions: every block device; `/dev/mem`, `/dev/kmem` and `/dev/port` (major 1, minors 1,
/// 2, 4); a character device whose sysfs path (`/sys/dev/char/MAJOR:MINOR`, resolved) is one
/// of [`STORAGE_CHAR_CLASSES`].
pub(super) fn reaches_storage(node: Node, major: u64, minor: u64, sysfs: Option<&Path>) -> bool {
    match node {
        Node::Block => true,
        Node::Char if major == 1 => matches!(minor, 1 | 2 | 4),
        Node::Char => sysfs.is_some_and(|link| {
            let link = link.to_string_lossy();
            STORAGE_CHAR_CLASSES
                .iter()
                .any(|class| link.contains(class))
        }),
    }
}

/// The device nodes under `dev` (the real `/dev`, on its own file system: other mounts below it
/// such as `/dev/pts` are skipped, and so are symlinks) that [`reaches_storage`] says to hide.
pub(super) fn storage_nodes(dev: &Path) -> Result<Vec<PathBuf>, MountFailure> {
    let read = |dir: &Path| {
        std::fs::read_dir(dir).map_err(|e| {
            fail(
                Guarantee::FsProtect,
                format!(
                    "listing `{}` for the disks' device nodes: {e}",
                    dir.display()
                ),
            )
        })
    };
    let root_dev = std::fs::symlink_metadata(dev)
        .map_err(|e| {
            fail(
                Guarantee::FsProtect,
                format!("inspecting `{}`: {e}", dev.display()),
            )
        })?
        .dev();
    let mut found = Vec::new();
    let mut dirs = vec![dev.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in read(&dir)? {
            let entry = entry.map_err(|e| {
                fail(
                    Guarantee::FsProtect,
                    format!("listing `{}`: {e}", dir.display()),
                )
            })?;
            let path = entry.path();
            // A node removed meanwhile (a hot-unplugged disk) is nothing to hide.
            let Ok(meta) = std::fs::symlink_metadata(&path) else {
                continue;
            };
            let kind = meta.file_type();
            if kind.is_dir() && meta.dev() == root_dev {
                dirs.push(path);
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
            if reaches_storage(node, major, minor, sysfs.as_deref()) {
                found.push(path);
            }
        }
    }
    found.sort();
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_devices_memory_and_pass_through_nodes_reach_storage() {
        let sysfs = |p: &str| Some(PathBuf::from(p));
        assert!(reaches_storage(Node::Block, 254, 0, None));
        assert!(reaches_storage(Node::Block, 7, 0, None));
        for minor in [1, 2, 4] {
            assert!(
                reaches_storage(Node::Char, 1, minor, None),
                "mem minor {minor}"
            );
        }
        for link in [
            "/sys/devices/pci0000:00/0000:00:1f.2/ata1/host0/target0:0:0/0:0:0:0/scsi_generic/sg0",
            "/sys/devices/pci0000:00/0000:00:1f.2/ata1/host0/target0:0:0/0:0:0:0/bsg/0:0:0:0",
            "/sys/devices/pci0000:00/0000:00:04.0/nvme/nvme0",
            "/sys/devices/pci0000:00/0000:00:04.0/nvme/nvme0/ng0n1",
            "/sys/devices/virtual/misc/device-mapper",
            "/sys/devices/virtual/vfio/devices/vfio0",
            "/sys/devices/virtual/misc/uinput",
            "/sys/devices/virtual/misc/uhid",
        ] {
            assert!(
                reaches_storage(Node::Char, 21, 0, sysfs(link).as_deref()),
                "{link}"
            );
        }
    }

    #[test]
    fn terminals_and_ordinary_character_devices_stay_visible() {
        // null, zero, full, random, urandom, kmsg are major 1 too.
        for minor in [3, 5, 7, 8, 9, 11] {
            assert!(
                !reaches_storage(Node::Char, 1, minor, None),
                "mem minor {minor}"
            );
        }
        for link in [
            "/sys/devices/virtual/tty/tty",
            "/sys/devices/virtual/misc/fuse",
            "/sys/devices/virtual/misc/kvm",
            "/sys/devices/virtual/misc/loop-control",
            "/sys/devices/virtual/net/tun",
        ] {
            let sysfs = PathBuf::from(link);
            assert!(!reaches_storage(Node::Char, 10, 0, Some(&sysfs)), "{link}");
        }
        assert!(!reaches_storage(Node::Char, 10, 0, None));
    }

    #[test]
    fn ancestors_below_root_run_outermost_first_without_the_root() {
        assert_eq!(
            ancestors_below_root(Path::new("/a/b/c"), true),
            [PathBuf::from("/a"), "/a/b".into(), "/a/b/c".into()]
        );
        assert_eq!(
            ancestors_below_root(Path::new("/a/b/c"), false),
            [PathBuf::from("/a"), "/a/b".into()]
        );
        assert!(ancestors_below_root(Path::new("/"), true).is_empty());
    }
}
