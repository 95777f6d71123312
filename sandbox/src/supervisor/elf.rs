//! The one thing the supervisor reads from an ELF file's program headers: the program
//! interpreter (`PT_INTERP`) the kernel loads with it and starts instead of it. That is the
//! dynamic loader for nearly every program; a file naming another one (a copy of a denied
//! program that runs without relocation, as a static Go binary does) runs that program under
//! the file's own name, so the interpreter is part of what an exec runs.

use std::io::{Read, Seek, SeekFrom};

/// `p_type` of the program header naming the interpreter.
const PT_INTERP: u32 = 3;

/// The most bytes of an interpreter's path the kernel reads (`PATH_MAX`).
const MAX_INTERP: u64 = 4096;

/// The most program headers read (the kernel refuses more than fit in 64 KiB).
const MAX_HEADERS: u64 = 65536 / 56;

/// Why an ELF file's interpreter could not be read: the file is not laid out as a 64-bit
/// little-endian ELF file the kernel would run, or a read failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unreadable;

/// The interpreter path of the 64-bit little-endian ELF file `file` (read from its start), as
/// the kernel takes it: the first `PT_INTERP` header's bytes up to their NUL. `Ok(None)`: the
/// file names none (the kernel runs it itself).
pub fn interpreter(file: &mut std::fs::File) -> Result<Option<Vec<u8>>, Unreadable> {
    let mut header = [0u8; 64];
    file.seek(SeekFrom::Start(0)).map_err(|_| Unreadable)?;
    file.read_exact(&mut header).map_err(|_| Unreadable)?;
    if header[..4] != *b"\x7fELF" || header[4] != 2 || header[5] != 1 {
        return Err(Unreadable);
    }
    let phoff = u64::from_le_bytes(header[32..40].try_into().map_err(|_| Unreadable)?);
    let phentsize = u64::from(u16::from_le_bytes([header[54], header[55]]));
    let phnum = u64::from(u16::from_le_bytes([header[56], header[57]]));
    if phentsize != 56 || phnum > MAX_HEADERS {
        return Err(Unreadable);
    }
    let len = usize::try_from(phentsize * phnum).map_err(|_| Unreadable)?;
    let mut headers = vec![0u8; len];
    file.seek(SeekFrom::Start(phoff)).map_err(|_| Unreadable)?;
    file.read_exact(&mut headers).map_err(|_| Unreadable)?;
    let Some(interp) = headers
        .chunks_exact(56)
        .find(|h| u32::from_le_bytes([h[0], h[1], h[2], h[3]]) == PT_INTERP)
    else {
        return Ok(None);
    };
    let word = |at: usize| {
        interp[at..at + 8]
            .try_into()
            .map(u64::from_le_bytes)
            .map_err(|_| Unreadable)
    };
    let (offset, size) = (word(8)?, word(32)?);
    // The kernel refuses an exec whose interpreter path is empty, too long or unterminated.
    if !(2..=MAX_INTERP).contains(&size) {
        return Err(Unreadable);
    }
    let mut path = vec![0u8; usize::try_from(size).map_err(|_| Unreadable)?];
    file.seek(SeekFrom::Start(offset)).map_err(|_| Unreadable)?;
    file.read_exact(&mut path).map_err(|_| Unreadable)?;
    if path.pop() != Some(0) {
        return Err(Unreadable);
    }
    // Up to the first NUL, as the kernel opens it.
    if let Some(end) = path.iter().position(|b| *b == 0) {
        path.truncate(end);
    }
    Ok(Some(path))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(path: &str) -> Result<Option<Vec<u8>>, Unreadable> {
        interpreter(&mut std::fs::File::open(path).unwrap())
    }

    #[test]
    fn a_dynamic_program_names_the_loader_and_a_script_is_no_elf_file() {
        let sh = of("/bin/sh")
            .unwrap()
            .expect("/bin/sh is dynamically linked");
        let loader = std::path::Path::new(std::ffi::OsStr::from_bytes(&sh));
        assert!(loader.is_absolute(), "{loader:?}");
        assert!(
            loader
                .file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("ld-")),
            "{loader:?}"
        );
        // The loader itself names none.
        assert_eq!(of(loader.to_str().unwrap()), Ok(None));
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("s");
        std::fs::write(&script, "#!/bin/sh\necho hi\n").unwrap();
        assert_eq!(of(script.to_str().unwrap()), Err(Unreadable));
    }

    use std::os::unix::ffi::OsStrExt;
}
