//! Which files the kernel runs as native programs: an ELF file of this machine's architecture
//! that no enabled `binfmt_misc` entry claims (the kernel asks `binfmt_misc` before its ELF
//! loader, so an entry matching a file runs the entry's interpreter instead).

use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// How many bytes of a file the kernel's format handlers look at (`BINPRM_BUF_SIZE`).
pub const HEAD: usize = 256;

/// `EM_X86_64` / `EM_AARCH64`.
#[cfg(target_arch = "x86_64")]
const NATIVE_MACHINE: u16 = 62;
#[cfg(target_arch = "aarch64")]
const NATIVE_MACHINE: u16 = 183;

/// One enabled `binfmt_misc` entry, as far as matching a file goes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Entry {
    /// Matches `magic` (under `mask`, when there is one) at `offset` of the file's head.
    Magic {
        /// Where in the head the magic starts.
        offset: usize,
        /// The bytes to find there.
        magic: Vec<u8>,
        /// The bits of each byte compared (all, without a mask).
        mask: Option<Vec<u8>>,
    },
    /// Matches a path whose last `.` is followed by exactly this.
    Extension(String),
}

/// The `binfmt_misc` entries of the kernel instance this process's programs use: read from
/// `/proc/sys/fs/binfmt_misc` where it is mounted, else from a detached mount of the instance
/// (which needs the privilege to mount it: root). `None` when they cannot be known; then no
/// file is taken as native.
pub fn registered() -> Option<Vec<Entry>> {
    let mounted = Path::new("/proc/sys/fs/binfmt_misc");
    match read_instance(mounted) {
        Some(entries) => Some(entries),
        None if !mounted.join("status").exists() => {
            let root = crate::sys::fs_context::detached_mount(c"binfmt_misc").ok()?;
            read_instance(&PathBuf::from(format!(
                "/proc/self/fd/{}",
                root.as_raw_fd()
            )))
        }
        None => None,
    }
}

/// The enabled entries of the `binfmt_misc` instance whose root is `dir`.
fn read_instance(dir: &Path) -> Option<Vec<Entry>> {
    let status = std::fs::read_to_string(dir.join("status")).ok()?;
    if status.trim() == "disabled" {
        return Some(Vec::new());
    }
    let mut entries = Vec::new();
    for item in std::fs::read_dir(dir).ok()? {
        let item = item.ok()?;
        let name = item.file_name();
        if name == "status" || name == "register" {
            continue;
        }
        let text = std::fs::read_to_string(item.path()).ok()?;
        if let Some(entry) = parse(&text)? {
            entries.push(entry);
        }
    }
    Some(entries)
}

/// One entry's file: `Some(None)` for a disabled entry, `None` for one this cannot read.
pub fn parse(text: &str) -> Option<Option<Entry>> {
    let mut lines = text.lines();
    if lines.next()?.trim() != "enabled" {
        return Some(None);
    }
    let (mut offset, mut magic, mut mask, mut extension) = (0, None, None, None);
    for line in lines {
        if let Some(v) = line.strip_prefix("offset ") {
            offset = v.trim().parse().ok()?;
        } else if let Some(v) = line.strip_prefix("magic ") {
            magic = Some(hex(v.trim())?);
        } else if let Some(v) = line.strip_prefix("mask ") {
            mask = Some(hex(v.trim())?);
        } else if let Some(v) = line.strip_prefix("extension .") {
            extension = Some(v.trim().to_owned());
        }
    }
    match (magic, extension) {
        (Some(magic), None) => Some(Some(Entry::Magic {
            offset,
            magic,
            mask,
        })),
        (None, Some(extension)) => Some(Some(Entry::Extension(extension))),
        _ => None,
    }
}

fn hex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

impl Entry {
    /// Whether the kernel would hand the file at `path`, starting with `head`, to this entry.
    #[must_use]
    pub fn claims(&self, path: &[u8], head: &[u8]) -> bool {
        match self {
            Entry::Extension(ext) => path
                .iter()
                .rposition(|b| *b == b'.')
                .is_some_and(|dot| &path[dot + 1..] == ext.as_bytes()),
            Entry::Magic {
                offset,
                magic,
                mask,
            } => {
                let Some(bytes) = head.get(*offset..offset + magic.len()) else {
                    return false;
                };
                bytes.iter().zip(magic).enumerate().all(|(i, (b, m))| {
                    let bits = mask
                        .as_ref()
                        .map_or(0xff, |mask| mask.get(i).copied().unwrap_or(0xff));
                    (b ^ m) & bits == 0
                })
            }
        }
    }
}

/// Whether `head` starts an ELF executable or shared object of this machine's architecture.
#[must_use]
pub fn native_elf(head: &[u8]) -> bool {
    let Some(header) = head.get(..20) else {
        return false;
    };
    let kind = u16::from_le_bytes([header[16], header[17]]);
    let machine = u16::from_le_bytes([header[18], header[19]]);
    header.starts_with(b"\x7fELF")
        && header[4] == 2
        && header[5] == 1
        && matches!(kind, 2 | 3)
        && machine == NATIVE_MACHINE
}

#[cfg(test)]
mod tests {
    use super::*;

    const QEMU_AARCH64: &str = "enabled\ninterpreter /usr/bin/qemu-aarch64-static\nflags: F\n\
        offset 0\nmagic 7f454c460201010000000000000000000200b700\n\
        mask ffffffffffffff00fffffffffffffffffeffffff\n";

    fn elf(machine: u16) -> Vec<u8> {
        let mut head = vec![0u8; HEAD];
        head[..7].copy_from_slice(b"\x7fELF\x02\x01\x01");
        head[16..18].copy_from_slice(&2u16.to_le_bytes());
        head[18..20].copy_from_slice(&machine.to_le_bytes());
        head
    }

    #[test]
    fn a_qemu_entry_claims_foreign_elf_files_only() {
        let entry = parse(QEMU_AARCH64).unwrap().unwrap();
        assert!(entry.claims(b"/usr/bin/x", &elf(183)));
        assert!(!entry.claims(b"/usr/bin/x", &elf(62)));
        assert!(!entry.claims(b"/usr/bin/x", b"\x7fELF"));
    }

    #[test]
    fn an_extension_entry_claims_by_the_paths_last_dot() {
        let entry = parse("enabled\ninterpreter /usr/bin/wine\nflags: \nextension .exe\n")
            .unwrap()
            .unwrap();
        assert!(entry.claims(b"/opt/app.exe", &elf(62)));
        assert!(!entry.claims(b"/opt/app.exe.bak", &elf(62)));
        assert!(!entry.claims(b"/opt/app", &elf(62)));
    }

    #[test]
    fn disabled_and_unreadable_entries_are_told_apart() {
        assert_eq!(
            parse("disabled\ninterpreter /x\noffset 0\nmagic 00\n"),
            Some(None)
        );
        assert_eq!(parse("enabled\ninterpreter /x\nmagic zz\n"), None);
        assert_eq!(parse(""), None);
    }

    #[test]
    fn only_this_architectures_elf_programs_are_native() {
        assert!(native_elf(&elf(NATIVE_MACHINE)));
        assert!(!native_elf(&elf(if NATIVE_MACHINE == 62 {
            183
        } else {
            62
        })));
        assert!(!native_elf(b"#!/bin/sh\necho hi\n"));
        let mut relocatable = elf(NATIVE_MACHINE);
        relocatable[16] = 1;
        assert!(!native_elf(&relocatable));
    }

    #[test]
    fn this_machines_own_programs_are_native() {
        let head = std::fs::read("/bin/sh").unwrap();
        assert!(native_elf(&head[..HEAD.min(head.len())]), "/bin/sh");
    }
}
