//! Program identity: which of the programs the rules name a file is, whatever it is called.
//!
//! When a session starts, every name a rule starts with (`git`, `curl`, ...) is looked up in
//! every directory of the command's `PATH` and the usual system and git exec-path
//! directories; each file found (symlinks followed) is a [`KnownProgram`] with its device,
//! inode and size. At an exec, the executed file is the program if it is the same file (a hard
//! link, a symlink, the same path) or, for a file of the same size, if its SHA-256 equals the
//! program's (a copy). Digests are computed only on a size match, so an ordinary exec costs
//! one `stat`. A digest is cached per file (device, inode, size, change time) only where
//! nothing in the sandbox can write the file: on a filesystem no mount of the view shows
//! writable, and once it has not changed for 2 s (a rewrite within one timestamp tick keeps
//! the change time). A writable file's change time does not follow its content: a write
//! through a shared mapping changes it only when a clean page first becomes dirty, and on
//! tmpfs never (a red-team pass on 2026-12-07 poisoned the cache so: a copy of git digested as
//! "not git" through a dirty page, restored through the same page, pushed).
//!
//! The dynamic loader is known the same way (as [`LOADER`]): a program run through it
//! (`ld.so /tmp/x push`) is a file the loader opens after the exec, which the supervisor
//! cannot pin, so its exec asks when a rule could match it.
//!
//! Not recognised: a modified copy (a byte changed, bytes appended), or another program doing
//! the same thing (a re-implementation of git's protocol): that is the network policy's job.

use std::collections::HashMap;
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Binaries that decide what they do by the name they are called by, and are called by their
/// own name to run the applet their first argument names.
const MULTI_CALL: &[&str] = &["busybox", "toybox"];

/// Binaries that decide what they do by the name they are called by, and are something else
/// under their own name: rustup, whose proxies (`cargo`, `rustc`, `rustfmt`) are links of it.
const BY_NAME: &[&str] = &["rustup"];

/// corepack's entry points for the package managers it runs in its own node process, and the
/// program each is.
const COREPACK_ENTRIES: &[(&str, &str)] = &[
    ("npm.js", "npm"),
    ("pnpm.js", "pnpm"),
    ("yarn.js", "yarn"),
    ("yarnpkg.js", "yarn"),
];

/// The name a known dynamic loader has in the identity table.
pub const LOADER: &str = "ld.so";

/// Where the dynamic loaders of the supported architectures live.
const LOADER_PATHS: &[&str] = &[
    "/lib64/ld-linux-x86-64.so.2",
    "/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2",
    "/usr/lib64/ld-linux-x86-64.so.2",
    "/lib/ld-linux-aarch64.so.1",
    "/lib/aarch64-linux-gnu/ld-linux-aarch64.so.1",
    "/usr/lib/ld-linux-aarch64.so.1",
    "/lib/ld-musl-x86_64.so.1",
    "/lib/ld-musl-aarch64.so.1",
];

/// Searched besides the command's `PATH`: system directories and git's exec paths.
const EXTRA_DIRS: &[&str] = &[
    "/usr/local/sbin",
    "/usr/local/bin",
    "/usr/sbin",
    "/usr/bin",
    "/sbin",
    "/bin",
    "/usr/lib/git-core",
    "/usr/libexec/git-core",
    "/usr/local/libexec/git-core",
];

/// A program a rule names, found when the session started.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KnownProgram {
    /// The name the rules use (`git`), or [`LOADER`].
    pub name: String,
    /// The file (symlinks resolved).
    pub path: PathBuf,
    /// Device of the file.
    pub dev: u64,
    /// Inode of the file.
    pub ino: u64,
    /// Size in bytes.
    pub size: u64,
}

/// The most entries of one git exec-path directory looked at.
const MAX_GIT_DIR_ENTRIES: usize = 2048;

/// Finds the files the rules' program `names` are, through `path_var` (a `PATH` value) and the
/// usual directories, and the dynamic loaders. Files that cannot be read are left out.
///
/// When `git` is among them, so are git's programs of its own (`git-http-push`,
/// `git-remote-http`, ...): files named `git-SUB` that are not git itself (a link or a copy of
/// it, which git's builtins are) in its exec-path directories (the usual ones, those of each
/// git found: its own when it is a `git-core`, `<prefix>/libexec/git-core` and
/// `<prefix>/lib/git-core`, and
/// `git_exec_path`, the session's `GIT_EXEC_PATH`). git runs one for `git SUB`, and a renamed
/// copy of one is still `git SUB` to the rules (`git-http-push` is how `git http-push` pushes).
///
/// `more_dirs` are searched too: where a program is installed off `PATH` and run through a
/// proxy on it ([`toolchain_dirs`]).
pub fn resolve(
    names: &[String],
    path_var: Option<&str>,
    git_exec_path: Option<&str>,
    more_dirs: &[PathBuf],
) -> Vec<KnownProgram> {
    let mut found = resolve_in(names, path_var, more_dirs);
    by_name_programs(&mut found);
    corepack_entries(&mut found, names, path_var);
    valgrind_tools(&mut found);
    if names.iter().any(|n| n == "git") {
        let mut git_dirs: Vec<PathBuf> = EXTRA_DIRS
            .iter()
            .filter(|d| d.ends_with("/git-core"))
            .map(PathBuf::from)
            .collect();
        for git in found.iter().filter(|k| k.name == "git") {
            let Some(dir) = git.path.parent() else {
                continue;
            };
            // Its own directory when it is an exec path (`/usr/lib/git-core/git`); `/usr/bin`
            // is not one, and long to list.
            if dir.ends_with("git-core") {
                git_dirs.push(dir.to_path_buf());
            }
            if let Some(prefix) = dir.parent() {
                git_dirs.push(prefix.join("libexec/git-core"));
                git_dirs.push(prefix.join("lib/git-core"));
            }
        }
        git_dirs.extend(
            git_exec_path
                .filter(|d| d.starts_with('/'))
                .map(PathBuf::from),
        );
        let mut seen = std::collections::HashSet::new();
        git_dirs.retain(|d| seen.insert(d.clone()));
        for (name, path) in git_programs(&found, &git_dirs) {
            add_known(&mut found, &name, &path);
        }
    }
    found
}

/// Where valgrind keeps its tools, besides `libexec/valgrind` and `lib/valgrind` beside each
/// valgrind found.
const VALGRIND_DIRS: &[&str] = &[
    "/usr/libexec/valgrind",
    "/usr/lib/valgrind",
    "/usr/lib64/valgrind",
    "/usr/lib/x86_64-linux-gnu/valgrind",
    "/usr/lib/aarch64-linux-gnu/valgrind",
    "/usr/local/libexec/valgrind",
    "/usr/local/lib/valgrind",
];

/// valgrind's tools (`none-amd64-linux`, `memcheck-amd64-linux`, ...), which the launcher
/// runs and which load the program into their own process like it: each is valgrind to the
/// rules whatever it is called (an eighth red-team pass ran `none-amd64-linux --tool=none
/// git push` directly).
fn valgrind_tools(found: &mut Vec<KnownProgram>) {
    let mut dirs: Vec<PathBuf> = VALGRIND_DIRS.iter().map(PathBuf::from).collect();
    for k in found.iter().filter(|k| k.name.starts_with("valgrind")) {
        if let Some(prefix) = k.path.parent().and_then(Path::parent) {
            dirs.push(prefix.join("libexec/valgrind"));
            dirs.push(prefix.join("lib/valgrind"));
        }
    }
    let mut tools = Vec::new();
    for dir in dirs {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten().take(MAX_GIT_DIR_ENTRIES) {
            let name = entry.file_name();
            if name
                .to_str()
                .is_some_and(|n| n.ends_with("-linux") && n.contains('-'))
            {
                tools.push(entry.path());
            }
        }
    }
    for tool in tools {
        add_known(found, "valgrind", &tool);
    }
}

/// Adds rustup's own file for each program found that is a link of it (a rustup proxy): such a
/// file is called by many names and is what each says ([`Identity::is_multi_call`]), so a
/// `rustc` run through its proxy is rustc, not a renamed cargo.
fn by_name_programs(found: &mut Vec<KnownProgram>) {
    let mut siblings = Vec::new();
    for k in found.iter() {
        for name in BY_NAME {
            let sibling = k.path.with_file_name(name);
            if std::fs::metadata(&sibling).is_ok_and(|m| (m.dev(), m.ino()) == (k.dev, k.ino)) {
                siblings.push((*name, sibling));
            }
        }
    }
    for (name, path) in siblings {
        add_known(found, name, &path);
    }
}

/// corepack's entry points for the package managers among `names` (`.../corepack/dist/npm.js`
/// beside the `corepack.js` a `corepack` on the path is): `node .../dist/npm.js publish` runs
/// npm in node's process, found by review on 2026-12-07.
fn corepack_entries(found: &mut Vec<KnownProgram>, names: &[String], path_var: Option<&str>) {
    if !COREPACK_ENTRIES
        .iter()
        .any(|(_, program)| names.iter().any(|n| n == program))
    {
        return;
    }
    let mut dists = Vec::new();
    for dir in search_dirs(path_var, &[]) {
        if let Ok(real) = std::fs::canonicalize(dir.join("corepack"))
            && let Some(dist) = real.parent()
            && !dists.contains(&dist.to_path_buf())
        {
            dists.push(dist.to_path_buf());
        }
    }
    for dist in dists {
        for (file, program) in COREPACK_ENTRIES {
            if names.iter().any(|n| n == program) {
                add_known(found, program, &dist.join(file));
            }
        }
        // corepack itself under another name runs them too (`./y npm@11 publish`).
        add_known(found, "corepack", &dist.join("corepack.js"));
    }
}

/// The directories searched for programs: `path_var`'s, the usual ones and `more_dirs`, each
/// once.
fn search_dirs(path_var: Option<&str>, more_dirs: &[PathBuf]) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = path_var
        .unwrap_or_default()
        .split(':')
        .filter(|d| d.starts_with('/'))
        .map(PathBuf::from)
        .collect();
    dirs.extend(EXTRA_DIRS.iter().map(PathBuf::from));
    dirs.extend(more_dirs.iter().filter(|d| d.is_absolute()).cloned());
    let mut seen = std::collections::HashSet::new();
    dirs.retain(|d| seen.insert(d.clone()));
    dirs
}

/// The most toolchains of one `rustup` home looked at.
const MAX_TOOLCHAINS: usize = 64;

/// The `bin` directory of each toolchain rustup installed under `rustup_home`
/// (`~/.rustup/toolchains/*/bin`): `PATH` holds rustup's proxies, and the toolchain's own
/// `cargo`, run by its path or through a link, is cargo too (found by a red-team pass on
/// 2026-12-07).
pub fn toolchain_dirs(rustup_home: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(rustup_home.join("toolchains")) else {
        return Vec::new();
    };
    let mut dirs: Vec<PathBuf> = entries
        .take(MAX_TOOLCHAINS)
        .filter_map(Result::ok)
        .map(|e| e.path().join("bin"))
        .filter(|bin| bin.is_dir())
        .collect();
    dirs.sort();
    dirs
}

/// The programs `names` through `path_var`, the usual directories and `more_dirs`, and the
/// loaders.
fn resolve_in(
    names: &[String],
    path_var: Option<&str>,
    more_dirs: &[PathBuf],
) -> Vec<KnownProgram> {
    let dirs = search_dirs(path_var, more_dirs);
    let mut found: Vec<KnownProgram> = Vec::new();
    for name in names {
        if name.is_empty() || name.contains('/') {
            continue;
        }
        for dir in &dirs {
            add_known(&mut found, name, &dir.join(name));
        }
    }
    for loader in LOADER_PATHS {
        add_known(&mut found, LOADER, Path::new(loader));
    }
    found
}

/// Adds the file `candidate` names as program `name`, once, if it is an executable file.
fn add_known(found: &mut Vec<KnownProgram>, name: &str, candidate: &Path) {
    // One `stat` for the usual miss; the path is resolved only for a file that is there
    // (resolving costs a `readlink` per component).
    if std::fs::metadata(candidate).is_err() {
        return;
    }
    let Ok(path) = std::fs::canonicalize(candidate) else {
        return;
    };
    let Ok(meta) = std::fs::metadata(&path) else {
        return;
    };
    if !meta.is_file() || meta.mode() & 0o111 == 0 {
        return;
    }
    let known = KnownProgram {
        name: name.to_owned(),
        path,
        dev: meta.dev(),
        ino: meta.ino(),
        size: meta.size(),
    };
    if !found
        .iter()
        .any(|k| k.name == known.name && k.dev == known.dev && k.ino == known.ino)
    {
        found.push(known);
    }
}

/// The files of `git_dirs` named `git-SUB` that are none of the gits in `found`: not the same
/// file, and not a copy (a file of a git's size is compared by content, each file digested
/// once).
fn git_programs(found: &[KnownProgram], git_dirs: &[PathBuf]) -> Vec<(String, PathBuf)> {
    let digest_of = |path: &Path| {
        std::fs::File::open(path)
            .and_then(|f| digest_reader(&f))
            .ok()
    };
    let gits: Vec<&KnownProgram> = found.iter().filter(|k| k.name == "git").collect();
    let mut git_digests: HashMap<usize, Option<[u8; 32]>> = HashMap::new();
    let mut out = Vec::new();
    for dir in git_dirs {
        let Ok(entries) = std::fs::read_dir(dir) else {
            continue;
        };
        for entry in entries.flatten().take(MAX_GIT_DIR_ENTRIES) {
            let name = entry.file_name();
            let Some(name) = name.to_str() else {
                continue;
            };
            if name.strip_prefix("git-").is_none_or(str::is_empty) {
                continue;
            }
            let path = dir.join(name);
            let Ok(meta) = std::fs::metadata(&path) else {
                continue;
            };
            if gits
                .iter()
                .any(|g| (g.dev, g.ino) == (meta.dev(), meta.ino()))
            {
                continue;
            }
            let mut this: Option<Option<[u8; 32]>> = None;
            let copy = gits.iter().enumerate().any(|(i, g)| {
                if g.size != meta.size() {
                    return false;
                }
                let git = *git_digests.entry(i).or_insert_with(|| digest_of(&g.path));
                let this = *this.get_or_insert_with(|| digest_of(&path));
                // Unreadable: taken for a copy (a renamed git is then git, not `git SUB`).
                git.is_none() || this.is_none() || git == this
            });
            if !copy {
                out.push((name.to_owned(), path));
            }
        }
    }
    out
}

/// A file's identity for the digest cache: a change to the file changes its ctime.
type FileKey = (u64, u64, u64, i64, i64);

/// How long ago a file must have changed last for its digest to be cached: more than the
/// granularity of file timestamps, so that any change after the digest gives another ctime.
const SETTLED: std::time::Duration = std::time::Duration::from_secs(2);

/// Whether the file `meta` describes last changed more than [`SETTLED`] ago. A file changed
/// more recently could be changed again within the same timestamp tick, keeping its
/// [`FileKey`] with another content: its digest is computed again at every exec instead.
fn settled(meta: &std::fs::Metadata) -> bool {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let changed = std::time::Duration::new(
        u64::try_from(meta.ctime()).unwrap_or(u64::MAX),
        u32::try_from(meta.ctime_nsec()).unwrap_or(0),
    );
    now.checked_sub(changed).is_some_and(|ago| ago > SETTLED)
}

fn file_key(meta: &std::fs::Metadata) -> FileKey {
    (
        meta.dev(),
        meta.ino(),
        meta.size(),
        meta.ctime(),
        meta.ctime_nsec(),
    )
}

/// The names an executed file is, computed at exec time (see the module docs).
#[derive(Debug)]
pub struct Identity {
    known: Vec<KnownProgram>,
    /// Digests of known programs, by index, computed on first need and kept only where their
    /// file is [`Identity::cacheable`] (a rule program the sandbox can write, as one installed
    /// in a writable root, is read again each time: a digest kept of it could be poisoned).
    known_digests: HashMap<usize, [u8; 32]>,
    /// Digests of other files, by [`FileKey`].
    digests: HashMap<FileKey, Option<[u8; 32]>>,
    /// The view's mounts, read at the first digest (they cannot change in the sandbox);
    /// `None` until then, or when unreadable.
    mounts: Option<Option<super::settled::mounts::Mounts>>,
    /// Whether digests may be kept at all: only where this process sees the sandbox's own
    /// mount view, which cannot change (not the host's, where the launcher traces the tree).
    keeping: bool,
}

/// Files larger than this are never digested (no rule program is this large).
const MAX_DIGEST_SIZE: u64 = 512 << 20;

impl Identity {
    /// The identity table of a session.
    pub fn new(known: Vec<KnownProgram>) -> Identity {
        Identity {
            known,
            known_digests: HashMap::new(),
            digests: HashMap::new(),
            mounts: None,
            keeping: true,
        }
    }

    /// This table, keeping digests between execs or not (see [`Identity::cacheable`]).
    #[must_use]
    pub fn keeping_digests(mut self, keeping: bool) -> Identity {
        self.keeping = keeping;
        self
    }

    /// Whether the digest of the file `meta` describes may be remembered: nothing in the
    /// sandbox can write it, and it has not changed for [`SETTLED`].
    fn cacheable(&mut self, meta: &std::fs::Metadata) -> bool {
        if !self.keeping || !settled(meta) {
            return false;
        }
        let dev = meta.dev();
        self.mounts
            .get_or_insert_with(super::settled::mounts::Mounts::of_this_process)
            .as_ref()
            .is_some_and(|m| {
                !m.device_writable(nix::sys::stat::major(dev), nix::sys::stat::minor(dev))
            })
    }

    /// The known names of the file `meta` describes (`stat` of `/proc/PID/exe` or of the path
    /// an exec names): every program it is, by inode or, for a file of a known size, by
    /// content. `open` opens it, and is called only when its digest is needed and not cached;
    /// the digest is then of the file opened, and so are the names.
    pub fn names_of(
        &mut self,
        meta: &std::fs::Metadata,
        open: impl FnOnce() -> std::io::Result<std::fs::File>,
    ) -> Vec<String> {
        let (mut names, same_size) = self.by_inode(meta);
        if same_size.is_empty() || meta.size() > MAX_DIGEST_SIZE {
            return names;
        }
        let digest = match self.digests.get(&file_key(meta)) {
            Some(digest) => *digest,
            None => {
                let Ok(file) = open() else {
                    return names;
                };
                return self.names_of_file(&file);
            }
        };
        self.add_copies(digest, same_size, &mut names);
        names
    }

    /// The known names of the file open as `file` (see [`Identity::names_of`]).
    pub fn names_of_file(&mut self, file: &std::fs::File) -> Vec<String> {
        let Ok(meta) = file.metadata() else {
            return Vec::new();
        };
        let (mut names, same_size) = self.by_inode(&meta);
        if same_size.is_empty() || meta.size() > MAX_DIGEST_SIZE {
            return names;
        }
        let key = file_key(&meta);
        let digest = match self.digests.get(&key) {
            Some(digest) => *digest,
            None => {
                let digest = digest_reader(file).ok();
                if self.cacheable(&meta) {
                    self.digests.insert(key, digest);
                }
                digest
            }
        };
        self.add_copies(digest, same_size, &mut names);
        names
    }

    /// The names of the known programs that are the file `meta` describes (same device and
    /// inode), and the indices of the other known programs of its size (it may be a copy).
    fn by_inode(&self, meta: &std::fs::Metadata) -> (Vec<String>, Vec<usize>) {
        let names: Vec<String> = self
            .known
            .iter()
            .filter(|k| k.dev == meta.dev() && k.ino == meta.ino())
            .map(|k| k.name.clone())
            .collect();
        let same_size = (0..self.known.len())
            .filter(|&i| {
                let k = &self.known[i];
                k.size == meta.size() && !names.contains(&k.name)
            })
            .collect();
        (names, same_size)
    }

    /// Adds to `names` each known program of `same_size` whose content has `digest`.
    fn add_copies(
        &mut self,
        digest: Option<[u8; 32]>,
        same_size: Vec<usize>,
        names: &mut Vec<String>,
    ) {
        let Some(digest) = digest else {
            return;
        };
        for i in same_size {
            let known = match self.known_digests.get(&i) {
                Some(known) => Some(*known),
                None => self.known_digest(i),
            };
            if known == Some(digest) && !names.contains(&self.known[i].name) {
                names.push(self.known[i].name.clone());
            }
        }
    }

    /// The digest of the known program `i`'s file as it is now, remembered where it may be.
    fn known_digest(&mut self, i: usize) -> Option<[u8; 32]> {
        let file = std::fs::File::open(&self.known[i].path).ok()?;
        let meta = file.metadata().ok()?;
        let digest = digest_reader(&file).ok()?;
        if self.cacheable(&meta) {
            self.known_digests.insert(i, digest);
        }
        Some(digest)
    }

    /// Whether `name` is a name a file known as `names` is found under (then `argv[0]` of that
    /// name is the program itself, not a renamed copy). Any other name makes a renamed copy
    /// (`npm-cli.js publish` is `npm publish`, `nc.openbsd` is `nc`: found by red-team passes
    /// on 2026-12-07), except for a multi-call binary ([`Identity::is_multi_call`]).
    pub fn is_known_as(&self, names: &[String], argv0_basename: &str) -> bool {
        names.iter().any(|n| n == argv0_basename)
    }

    /// Whether the file `meta` describes is a multi-call binary a rule program is (busybox,
    /// toybox: `wget` a symlink to busybox): it runs the program the name it is called by
    /// says, or, called by its own name (any name starting with it), the one its first
    /// argument names. So it is never a renamed copy of the rule programs it also is (`sh`
    /// called on a busybox system is `sh`, not `wget`).
    pub fn is_multi_call(&self, meta: &std::fs::Metadata) -> bool {
        self.known.iter().any(|k| {
            (k.dev, k.ino) == (meta.dev(), meta.ino())
                && k.path
                    .file_name()
                    .and_then(|f| f.to_str())
                    .is_some_and(|f| MULTI_CALL.contains(&f) || BY_NAME.contains(&f))
        })
    }

    /// Whether `argv0_basename` calls a multi-call binary by its own name (busybox treats any
    /// name starting with `busybox` so), to run the applet its first argument names.
    pub fn calls_multi_call_itself(argv0_basename: &str) -> bool {
        MULTI_CALL.iter().any(|m| argv0_basename.starts_with(m))
    }
}

fn digest_reader(mut file: &std::fs::File) -> std::io::Result<[u8; 32]> {
    use std::io::{Seek, SeekFrom};
    file.seek(SeekFrom::Start(0))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 256 * 1024];
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hasher.finalize().into())
}

#[cfg(test)]
mod tests;
