//! When an exec's notification settles it: a try of a `PATH` search that names nothing, through
//! directories that cannot change, fails in the kernel with an error that is the same for
//! every caller, and the supervisor answers it with that error itself (no `CONTINUE`, no exec
//! event). Failing an exec runs nothing, so what the caller's memory holds does not matter:
//! the kernel never reads it.
//!
//! The directories cannot change when every one the resolution walks (symlinks followed, as
//! the kernel does) is on a read-only mount (the mount view makes everything but the writable
//! roots read-only, and the command cannot mount or unmount), none of them is also shown by a
//! writable mount of the same filesystem (a host bind mount of a writable root elsewhere:
//! `/proc/self/mountinfo`), and the path is absolute and walks no proc filesystem, wherever
//! it is mounted (its `self` and `fd` links name other things in the supervisor). The error
//! is the same for every caller when anyone may search those directories (the execute bit for
//! others, no access ACL).
//!
//! An exec that is allowed is never final at its notification: it is decided again at its
//! exec event ([`super`]). Deciding it at the notification needs the argv read there to be
//! what the kernel reads after the answer, that is, nobody else able to write the caller's
//! memory meanwhile, and that cannot be shown here: a `vfork` child shares its parent's memory
//! (and the parent, though suspended, writes to it as it dies), and a `vfork` child whose
//! parent died or ran another program still shares it with the other tasks of that memory
//! (its parent's other `vfork` children, its parent's own `vfork` parent), which nothing short
//! of comparing every task of the sandbox finds (`SECURITY.md`).

use std::collections::HashMap;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};

use nix::sys::statvfs::{FsFlags, statvfs};

pub(super) mod mounts;

/// Why a path's resolution is not known to be stable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NotSettled(pub &'static str);

/// The most symlinks one resolution follows (the kernel's limit).
const MAX_LINKS: usize = 40;

/// The supervisor's memory of the paths it resolved.
#[derive(Debug)]
pub struct Settler {
    /// Directories found on read-only mounts (their entries cannot change), and whether
    /// anyone may search them (the execute bit for others).
    stable_dirs: HashMap<PathBuf, bool>,
    /// What the resolution of a path found: a file (device, inode), a stable absence, or why
    /// it is not stable. A path resolved through directories that cannot change resolves the
    /// same way for the whole session, and one that could is never answered: so every outcome
    /// is kept (up to [`MAX_KEPT`] paths).
    resolved: HashMap<PathBuf, Result<Found, NotSettled>>,
    /// Whether the mount of a path is read-only (tests put a view of their own here).
    read_only: fn(&Path) -> bool,
    /// The view's mounts, read at the first check (the view is complete by then, and mounts
    /// cannot change in the sandbox); `None` until then, or when unreadable.
    mounts: Option<Option<mounts::Mounts>>,
    /// Paths found to name a fixed program ([`Settler::fixed_program`]): the file (device,
    /// inode) they named then and its interpreter, or `None` where they did not.
    fixed: HashMap<PathBuf, Option<FixedFile>>,
    /// Program interpreter paths found to name a file for good, or not
    /// ([`Settler::stable_interpreter`]).
    interpreters: HashMap<PathBuf, Option<Interpreter>>,
}

/// The file (device, inode) a path named as a fixed program, and its interpreter.
type FixedFile = ((u64, u64), Option<Interpreter>);

/// The program interpreter (`PT_INTERP`) of a fixed program: the file the kernel loads with it
/// and starts instead of it (the dynamic loader, nearly always), itself a file nothing in the
/// sandbox can change, named by a path that resolves to it for good.
#[derive(Debug, Clone)]
pub struct Interpreter {
    pub path: PathBuf,
    pub file: std::fs::Metadata,
    /// The file, opened once, where its path could name another file later (read for its
    /// digest: what is decided is what was opened); `None` for one named for good.
    pub opened: Option<std::sync::Arc<std::fs::File>>,
}

/// The most resolutions kept.
const MAX_KEPT: usize = 4096;

/// What the resolution of a path found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Found {
    /// A file (device, inode), which the kernel may run, and whether anyone may search every
    /// directory its resolution walked.
    File((u64, u64), bool),
    /// Nothing the kernel can run: it fails the exec; with the error it fails with for any
    /// caller, where that is known (see [`Settler::failure`]).
    Fails(Option<i32>),
}

impl Default for Settler {
    fn default() -> Settler {
        Settler {
            stable_dirs: HashMap::new(),
            resolved: HashMap::new(),
            read_only,
            mounts: None,
            fixed: HashMap::new(),
            interpreters: HashMap::new(),
        }
    }
}

impl Settler {
    /// The error the kernel's exec of `path`, which the notification did not find, fails with
    /// for any caller, where the supervisor may answer it with that error instead of letting
    /// the call go on: the path names nothing, through directories that cannot change and
    /// that anyone may search, at a step that is missing (`ENOENT`) or not a directory
    /// (`ENOTDIR`). Failing an exec runs nothing, so the caller's memory does not matter: the
    /// kernel never reads it. Other failures (a directory, a device, a loop of symlinks) are
    /// left to the kernel.
    pub fn failure(&mut self, path: &Path) -> Option<i32> {
        // A longer path fails before any lookup (`ENAMETOOLONG`).
        let limit = usize::try_from(nix::libc::PATH_MAX).unwrap_or(0);
        if path.as_os_str().len() >= limit {
            return None;
        }
        match self.resolve(path) {
            Ok(Found::Fails(errno)) => errno,
            Ok(Found::File(..)) | Err(_) => None,
        }
    }

    /// Whether `path`, whose file the notification found to be `file` (`stat`), names a fixed
    /// program: whatever execs that path runs that file, and nothing in the sandbox can change
    /// what it is. So it is where the path is absolute and resolves, through directories that
    /// cannot change and that resolve alike for every process (as for [`Settler::failure`]:
    /// no proc filesystem, wherever it is mounted), to `file`; the file itself is on a
    /// read-only mount that no writable mount shows, with no other link (a hard link in a
    /// writable root would make it writable there); and it is an ELF file of this machine's
    /// own kind, which the kernel runs itself (a script runs its interpreter instead, and so
    /// does a file `binfmt_misc` claims: by its name's extension, which the path's last name
    /// must not have, or by its magic, which for the machine's own ELF files no ordinary host
    /// registers), whose program interpreter, if it names one, is such a file too, by an
    /// absolute path that names it for good ([`Settler::stable_interpreter`]). Checked once
    /// per path and file.
    /// `Some` where it is one, with its interpreter (`None` for a program the kernel runs
    /// without one).
    pub fn fixed_program(
        &mut self,
        path: &Path,
        file: &std::fs::Metadata,
    ) -> Option<Option<Interpreter>> {
        let id = (file.dev(), file.ino());
        if !file.is_file() || file.nlink() != 1 {
            return None;
        }
        if let Some(known) = self.fixed.get(path) {
            return known
                .as_ref()
                .filter(|(was, _)| *was == id)
                .map(|(_, interpreter)| interpreter.clone());
        }
        let fixed = self.check_fixed(path, id);
        if self.fixed.len() < MAX_KEPT {
            self.fixed.insert(
                path.to_path_buf(),
                fixed.clone().map(|interpreter| (id, interpreter)),
            );
        }
        fixed
    }

    /// A settler whose read-only mounts are everything outside `writable` (one per thread),
    /// with one read-only mount of everything: nothing is shown writable elsewhere.
    #[cfg(test)]
    pub(super) fn with_writable(writable: &Path) -> Settler {
        thread_local! { static WRITABLE: std::cell::RefCell<Option<PathBuf>> = const { std::cell::RefCell::new(None) }; }
        WRITABLE.with(|w| *w.borrow_mut() = Some(writable.to_path_buf()));
        fn view(path: &Path) -> bool {
            WRITABLE.with(|w| !w.borrow().as_ref().is_some_and(|dir| path.starts_with(dir)))
        }
        Settler {
            read_only: view,
            mounts: Some(mounts::parse(b"1 0 1:1 / / ro - ext4 /dev/x ro\n")),
            ..Settler::default()
        }
    }

    /// The file `path` names for good, with its `stat` (symlinks followed): the path is
    /// absolute and resolves through directories that cannot change and that anyone may search
    /// (as for [`Settler::failure`]: so it resolves alike for every caller) to a regular file
    /// on a read-only mount that no writable mount shows, with no other link (one in a writable
    /// root would let its mode change). Nothing in the sandbox can remove it or change its mode
    /// while the sandbox lives. `None` for anything else, including a path that names nothing.
    pub fn stable_file(&mut self, path: &Path) -> Option<std::fs::Metadata> {
        self.stable_at(path, true)
            .map(|(_, meta)| meta)
            .filter(|meta| meta.nlink() == 1)
    }

    /// The file `path` names, as [`Settler::stable_file`] but with other links allowed: the
    /// sandbox cannot remove it or rename it, though a link of it in a writable root could
    /// change its mode (as it could that of git's own files: an installed program is such a
    /// file, hard links and all).
    pub fn installed_file(&mut self, path: &Path) -> Option<std::fs::Metadata> {
        self.stable_at(path, true).map(|(_, meta)| meta)
    }

    /// The regular file `path` resolves to through directories that cannot change (that anyone
    /// may search, where `for_anyone`), on a read-only mount that no writable mount shows and
    /// on no proc filesystem: its canonical path and `stat`.
    fn stable_at(&mut self, path: &Path, for_anyone: bool) -> Option<(PathBuf, std::fs::Metadata)> {
        let Ok(Found::File(id, searchable)) = self.resolve(path) else {
            return None;
        };
        if for_anyone && !searchable {
            return None;
        }
        let canonical = std::fs::canonicalize(path).ok()?;
        let meta = std::fs::metadata(&canonical).ok()?;
        let stable = (meta.dev(), meta.ino()) == id
            && meta.is_file()
            && !on_procfs(&canonical)
            && (self.read_only)(&canonical)
            && self.not_writable_elsewhere(&canonical).is_ok();
        stable.then_some((canonical, meta))
    }

    /// Whether anyone may list the directory `dir`, which cannot change (its mode grants its
    /// owner, its group and others reading and searching, and no access ACL could take that
    /// from a named user).
    pub fn listable_by_anyone(&mut self, dir: &Path) -> bool {
        matches!(self.stable_dir(dir), Ok(true))
            && std::fs::metadata(dir).is_ok_and(|m| m.mode() & 0o444 == 0o444)
    }

    /// `Some`, with the program's interpreter (if it names one), where `path` names a fixed
    /// program (see [`Settler::fixed_program`]).
    fn check_fixed(&mut self, path: &Path, id: (u64, u64)) -> Option<Option<Interpreter>> {
        use std::io::Read;
        let extension = path
            .file_name()
            .is_none_or(|name| name.as_bytes().contains(&b'.'));
        if extension {
            return None;
        }
        let (canonical, meta) = self.stable_at(path, false)?;
        if (meta.dev(), meta.ino()) != id {
            return None;
        }
        // Its first bytes, from the file just checked (the same device and inode).
        let mut opened = super::facts::open_program(&canonical).ok()?;
        let mut header = [0u8; 20];
        let native = opened.metadata().is_ok_and(|m| (m.dev(), m.ino()) == id)
            && opened.read_exact(&mut header).is_ok()
            && native_elf(&header);
        if !native {
            return None;
        }
        // The interpreter the kernel loads: a path that names a file for good (the kernel
        // opens a relative one from the caller's working directory, which differs), on a
        // read-only mount, with a single link, as the program is.
        let Some(named) = super::elf::interpreter(&mut opened).ok()? else {
            return Some(None);
        };
        let named = PathBuf::from(std::ffi::OsString::from_vec(named));
        self.stable_interpreter(&named).map(Some)
    }

    /// The file the program interpreter path `path` names for good: an absolute path through
    /// directories that cannot change to a file on a read-only mount that no writable mount
    /// shows, with a single link. Checked once per path.
    pub fn stable_interpreter(&mut self, path: &Path) -> Option<Interpreter> {
        if let Some(known) = self.interpreters.get(path) {
            return known.clone();
        }
        let found = self
            .stable_at(path, false)
            .filter(|(_, file)| file.nlink() == 1)
            .map(|(_, file)| Interpreter {
                path: path.to_path_buf(),
                file,
                opened: None,
            });
        if self.interpreters.len() < MAX_KEPT {
            self.interpreters.insert(path.to_path_buf(), found.clone());
        }
        found
    }

    /// Resolves `path` as the kernel will, if every step is on a read-only mount.
    fn resolve(&mut self, path: &Path) -> Result<Found, NotSettled> {
        if !path.is_absolute() {
            return Err(NotSettled("a relative path"));
        }
        if let Some(&found) = self.resolved.get(path) {
            return found;
        }
        let found = self.walk(path);
        if self.resolved.len() < MAX_KEPT {
            self.resolved.insert(path.to_path_buf(), found);
        }
        found
    }

    fn walk(&mut self, path: &Path) -> Result<Found, NotSettled> {
        let mut at = PathBuf::from("/");
        let mut todo: Vec<std::ffi::OsString> = components(path);
        let mut links = 0;
        // Whether every directory walked so far may be searched by anyone: then a step that
        // is missing fails the same way for every caller.
        let mut searchable = true;
        while let Some(name) = todo.pop() {
            match name.as_bytes() {
                b"." => continue,
                b".." => {
                    at.pop();
                    continue;
                }
                _ => {}
            }
            searchable &= self.stable_dir(&at)?;
            let next = at.join(&name);
            let meta = match std::fs::symlink_metadata(&next) {
                Ok(meta) => meta,
                Err(e) => {
                    return match e.raw_os_error() {
                        Some(errno @ (nix::libc::ENOENT | nix::libc::ENOTDIR)) => {
                            Ok(Found::Fails(searchable.then_some(errno)))
                        }
                        _ => Err(NotSettled("a step of the path cannot be looked up")),
                    };
                }
            };
            if meta.file_type().is_symlink() {
                links += 1;
                if links > MAX_LINKS {
                    return Ok(Found::Fails(None));
                }
                let target = std::fs::read_link(&next)
                    .map_err(|_| NotSettled("a symlink cannot be read"))?;
                if target.is_absolute() {
                    at = PathBuf::from("/");
                }
                todo.extend(components(&target));
            } else if meta.is_dir() {
                at = next;
            } else if !todo.is_empty() {
                // A file in the middle of the path: the kernel fails with ENOTDIR.
                return Ok(Found::Fails(searchable.then_some(nix::libc::ENOTDIR)));
            } else if !meta.is_file() {
                return Ok(Found::Fails(None));
            } else {
                return Ok(Found::File((meta.dev(), meta.ino()), searchable));
            }
        }
        // The path ends at a directory: the kernel fails with EACCES.
        Ok(Found::Fails(None))
    }

    /// Whether `dir` is on a read-only mount (its entries cannot change), and then whether
    /// anyone may search it.
    fn stable_dir(&mut self, dir: &Path) -> Result<bool, NotSettled> {
        if let Some(&searchable) = self.stable_dirs.get(dir) {
            return Ok(searchable);
        }
        if on_procfs(dir) {
            return Err(NotSettled("a directory of a proc filesystem"));
        }
        if !(self.read_only)(dir) {
            return Err(NotSettled("a directory of the path is on a writable mount"));
        }
        self.not_writable_elsewhere(dir)?;
        // Searchable by its owner, its group and others (whoever the caller is: the kernel
        // checks the owner's bits for the owner, not others'), and no ACL that could grant a
        // named user less.
        let searchable = std::fs::metadata(dir).is_ok_and(|m| m.mode() & 0o111 == 0o111)
            && std::ffi::CString::new(dir.as_os_str().as_bytes())
                .is_ok_and(|c| crate::sys::has_access_acl(&c).is_ok_and(|acl| !acl));
        self.stable_dirs.insert(dir.to_path_buf(), searchable);
        Ok(searchable)
    }

    /// A read-only mount's view of a directory or file that a writable mount also shows (a
    /// bind mount, on the host, of a writable root) can change through that mount.
    fn not_writable_elsewhere(&mut self, path: &Path) -> Result<(), NotSettled> {
        let mounts = self
            .mounts
            .get_or_insert_with(mounts::Mounts::of_this_process);
        match mounts {
            Some(mounts) if !mounts.writable_elsewhere(path) => Ok(()),
            Some(_) => Err(NotSettled("a writable mount shows the same directory")),
            None => Err(NotSettled("the mounts cannot be read")),
        }
    }
}

/// The components of `path` after its root, last first (a stack to pop).
fn components(path: &Path) -> Vec<std::ffi::OsString> {
    let mut out: Vec<std::ffi::OsString> = path
        .components()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(n.to_os_string()),
            Component::ParentDir => Some("..".into()),
            Component::CurDir | Component::RootDir | Component::Prefix(_) => None,
        })
        .collect();
    out.reverse();
    out
}

/// Whether `path` is on a proc filesystem (or cannot be told): its `self`, `thread-self` and
/// per-process links name other things in the supervisor than in the caller, wherever it is
/// mounted (a chroot's `proc`, a container's view of the host's).
fn on_procfs(path: &Path) -> bool {
    use nix::sys::statfs::{PROC_SUPER_MAGIC, statfs};
    statfs(path).map_or(true, |fs| fs.filesystem_type() == PROC_SUPER_MAGIC)
}

/// The ELF machine of this build's architecture (`None`: no fixed programs here).
const NATIVE_MACHINE: Option<u16> = if cfg!(target_arch = "x86_64") {
    Some(62)
} else if cfg!(target_arch = "aarch64") {
    Some(183)
} else if cfg!(target_arch = "riscv64") {
    Some(243)
} else {
    None
};

/// Whether the first 20 bytes of a file are the header of a 64-bit little-endian ELF file for
/// this machine (`e_ident`, `e_type`, `e_machine`), which the kernel's own ELF loader runs.
fn native_elf(header: &[u8; 20]) -> bool {
    const ELFCLASS64: u8 = 2;
    const ELFDATA2LSB: u8 = 1;
    let machine = u16::from_le_bytes([header[18], header[19]]);
    header[..4] == *b"\x7fELF"
        && header[4] == ELFCLASS64
        && header[5] == ELFDATA2LSB
        && cfg!(target_endian = "little")
        && NATIVE_MACHINE == Some(machine)
}

fn read_only(path: &Path) -> bool {
    statvfs(path).is_ok_and(|s| s.flags().contains(FsFlags::ST_RDONLY))
}

#[cfg(test)]
mod tests;
