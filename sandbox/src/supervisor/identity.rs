//! Program identity: which of the programs the rules name a file is, whatever it is called.
//!
//! When a session starts, every name a rule starts with (`git`, `curl`, ...) is looked up in
//! every directory of the command's `PATH` and the usual system and git exec-path
//! directories; each file found (symlinks followed) is a [`KnownProgram`] with its device,
//! inode and size. At an exec, the executed file is the program if it is the same file (a hard
//! link, a symlink, the same path) or, for a file of the same size, if its SHA-256 equals the
//! program's (a copy). Digests are computed only on a size match and cached per file
//! (device, inode, size, change time) once the file has not changed for 2 s (a rewrite within
//! one timestamp tick keeps the change time), so an ordinary exec costs one `stat`.
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
    let mut dirs: Vec<PathBuf> = path_var
        .unwrap_or_default()
        .split(':')
        .filter(|d| d.starts_with('/'))
        .map(PathBuf::from)
        .collect();
    dirs.extend(EXTRA_DIRS.iter().map(PathBuf::from));
    dirs.extend(more_dirs.iter().filter(|d| d.is_absolute()).cloned());
    // Each directory once (`PATH` names some of the usual ones again).
    let mut seen = std::collections::HashSet::new();
    dirs.retain(|d| seen.insert(d.clone()));
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
    /// Digests of known programs, by index, computed on first need.
    known_digests: HashMap<usize, Option<[u8; 32]>>,
    /// Digests of other files, by [`FileKey`].
    digests: HashMap<FileKey, Option<[u8; 32]>>,
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
        }
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
                if settled(&meta) {
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
            let known = self
                .known_digests
                .entry(i)
                .or_insert_with(|| {
                    std::fs::File::open(&self.known[i].path)
                        .and_then(|f| digest_reader(&f))
                        .ok()
                })
                .as_ref()
                .copied();
            if known == Some(digest) && !names.contains(&self.known[i].name) {
                names.push(self.known[i].name.clone());
            }
        }
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
                    .is_some_and(|f| MULTI_CALL.contains(&f))
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
mod tests {
    use super::*;

    fn sh_names() -> Vec<String> {
        vec!["sh".to_owned()]
    }

    #[test]
    fn a_copy_is_the_program_and_one_byte_more_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let known = resolve(&sh_names(), Some("/bin:/usr/bin"), None, &[]);
        let sh = known.iter().find(|k| k.name == "sh").expect("sh is found");
        let copy = dir.path().join("renamed");
        std::fs::copy(&sh.path, &copy).unwrap();
        let mut identity = Identity::new(known.clone());
        let names = identity.names_of_file(&std::fs::File::open(&copy).unwrap());
        assert!(names.contains(&"sh".to_owned()), "{names:?}");
        let same = identity.names_of_file(&std::fs::File::open(&sh.path).unwrap());
        assert!(same.contains(&"sh".to_owned()), "{same:?}");
        // One byte more is another program.
        let mut bytes = std::fs::read(&copy).unwrap();
        bytes.push(0);
        let changed = dir.path().join("changed");
        std::fs::write(&changed, bytes).unwrap();
        assert!(
            identity
                .names_of_file(&std::fs::File::open(&changed).unwrap())
                .is_empty()
        );
    }

    #[test]
    fn a_hard_link_is_the_program_by_its_inode_without_reading_it() {
        // A program resolved from a directory of this test's own (a hard link of a file one
        // does not own needs root), and a hard link of it under another name elsewhere.
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("bin");
        std::fs::create_dir(&bin).unwrap();
        std::fs::copy("/bin/sh", bin.join("sh")).unwrap();
        let known = resolve(&sh_names(), bin.to_str(), None, &[]);
        assert!(known.iter().any(|k| k.path == bin.join("sh")), "{known:?}");
        let linked = dir.path().join("harmless");
        std::fs::hard_link(bin.join("sh"), &linked).unwrap();
        let mut identity = Identity::new(known);
        let meta = std::fs::metadata(&linked).unwrap();
        // Matched by device and inode: its content is never read.
        let names = identity.names_of(&meta, || -> std::io::Result<std::fs::File> {
            panic!("the content of a hard link was read")
        });
        assert!(names.contains(&"sh".to_owned()), "{names:?}");
    }

    #[test]
    fn a_file_rewritten_with_a_copy_of_the_program_is_the_program() {
        let dir = tempfile::tempdir().unwrap();
        let known = resolve(&sh_names(), Some("/bin:/usr/bin"), None, &[]);
        let sh = known.iter().find(|k| k.name == "sh").expect("sh is found");
        let content = std::fs::read(&sh.path).unwrap();
        let file = dir.path().join("tool");
        let mut identity = Identity::new(known.clone());
        let names = |identity: &mut Identity| {
            let meta = std::fs::metadata(&file).unwrap();
            identity.names_of(&meta, || std::fs::File::open(&file))
        };
        // Of the program's size, another content: not the program (its digest was computed).
        std::fs::write(&file, vec![b'#'; content.len()]).unwrap();
        assert_eq!(names(&mut identity), Vec::<String>::new());
        // The same file (same inode and size) rewritten at once with the program's content,
        // as fast as its timestamps could not tell: the program.
        std::fs::OpenOptions::new()
            .write(true)
            .open(&file)
            .and_then(|mut f| std::io::Write::write_all(&mut f, &content))
            .unwrap();
        assert_eq!(names(&mut identity), sh_names());
        // And back.
        std::fs::write(&file, vec![b'#'; content.len()]).unwrap();
        assert_eq!(names(&mut identity), Vec::<String>::new());
    }

    #[test]
    fn a_settled_file_keeps_its_digest_and_a_fresh_one_does_not() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        std::fs::write(&file, b"x").unwrap();
        assert!(!settled(&std::fs::metadata(&file).unwrap()));
        assert!(
            settled(&std::fs::metadata("/").unwrap())
                || settled(&std::fs::metadata("/bin/sh").unwrap())
        );
    }

    #[test]
    fn gits_own_programs_are_known_and_its_links_and_copies_are_git() {
        use std::os::unix::fs::symlink;
        let dir = tempfile::tempdir().unwrap();
        let core = dir.path().join("git-core");
        std::fs::create_dir(&core).unwrap();
        // A stand-in for git (any program), its builtins as a hard link, a symlink and a
        // copy, and a program of its own.
        std::fs::copy("/bin/sh", core.join("git")).unwrap();
        std::fs::hard_link(core.join("git"), core.join("git-push")).unwrap();
        symlink("git", core.join("git-status")).unwrap();
        std::fs::copy(core.join("git"), core.join("git-commit")).unwrap();
        std::fs::copy("/bin/true", core.join("git-http-push")).unwrap();
        std::fs::copy("/bin/true", core.join("git-")).unwrap();
        let names = vec!["git".to_owned()];
        // Found as the git beside its exec-path directory (here, the same one).
        let known = resolve(&names, core.to_str(), None, &[]);
        let mut dashed: Vec<&str> = known
            .iter()
            .filter(|k| k.name.starts_with("git-") && k.path.starts_with(&core))
            .map(|k| k.name.as_str())
            .collect();
        dashed.sort_unstable();
        assert_eq!(dashed, ["git-http-push"], "{known:?}");
        // A renamed copy of git's own program is that program; of git, git alone.
        let copy = dir.path().join("hp");
        std::fs::copy(core.join("git-http-push"), &copy).unwrap();
        let mut identity = Identity::new(known);
        let names = identity.names_of_file(&std::fs::File::open(&copy).unwrap());
        assert_eq!(names, ["git-http-push"]);
        let names = identity.names_of_file(&std::fs::File::open(core.join("git-commit")).unwrap());
        assert_eq!(names, ["git"]);
        // Without a rule naming git, none of them is looked for.
        let known = resolve(&sh_names(), core.to_str(), core.to_str(), &[]);
        assert!(
            known.iter().all(|k| !k.name.starts_with("git")),
            "{known:?}"
        );
    }

    #[test]
    fn a_file_called_by_its_own_name_is_the_program_unless_it_is_multi_call() {
        use std::os::unix::fs::{PermissionsExt, symlink};
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("bin");
        let lib = dir.path().join("lib");
        std::fs::create_dir(&bin).unwrap();
        std::fs::create_dir(&lib).unwrap();
        // `npm` a symlink to a script of another name, `nc` to a binary of another name,
        // `wget` to a multi-call binary.
        std::fs::write(lib.join("npm-cli.js"), "#!/usr/bin/env node\n").unwrap();
        std::fs::copy("/bin/true", lib.join("nc.openbsd")).unwrap();
        std::fs::copy("/bin/sh", lib.join("busybox")).unwrap();
        for f in ["npm-cli.js", "nc.openbsd", "busybox"] {
            std::fs::set_permissions(lib.join(f), std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        symlink(lib.join("npm-cli.js"), bin.join("npm")).unwrap();
        symlink(lib.join("nc.openbsd"), bin.join("nc")).unwrap();
        symlink(lib.join("busybox"), bin.join("wget")).unwrap();
        let names: Vec<String> = ["npm", "nc", "wget"].map(str::to_owned).to_vec();
        let identity = Identity::new(resolve(&names, bin.to_str(), None, &[]));
        let named = |n: &str| vec![n.to_owned()];
        assert!(identity.is_known_as(&named("npm"), "npm"));
        assert!(!identity.is_known_as(&named("npm"), "npm-cli.js"));
        assert!(!identity.is_known_as(&named("nc"), "nc.openbsd"));
        let meta = |f: &str| std::fs::metadata(lib.join(f)).unwrap();
        assert!(identity.is_multi_call(&meta("busybox")));
        assert!(!identity.is_multi_call(&meta("nc.openbsd")));
        assert!(Identity::calls_multi_call_itself("busybox-x"));
        assert!(!Identity::calls_multi_call_itself("sh"));
    }

    #[test]
    fn a_toolchains_own_cargo_off_path_is_cargo() {
        use std::os::unix::fs::PermissionsExt;
        let home = tempfile::tempdir().unwrap();
        let bin = home.path().join("toolchains/stable-x86_64/bin");
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::create_dir_all(home.path().join("toolchains/not-a-toolchain")).unwrap();
        std::fs::copy("/bin/true", bin.join("cargo")).unwrap();
        std::fs::set_permissions(bin.join("cargo"), std::fs::Permissions::from_mode(0o755))
            .unwrap();
        let dirs = toolchain_dirs(home.path());
        assert_eq!(dirs, std::slice::from_ref(&bin));
        let names = vec!["cargo".to_owned()];
        let identity = Identity::new(resolve(&names, Some("/nonexistent"), None, &dirs));
        let file = std::fs::metadata(bin.join("cargo")).unwrap();
        let open = || std::fs::File::open(bin.join("cargo"));
        let mut identity = identity;
        assert_eq!(identity.names_of(&file, open), ["cargo"]);
        assert!(toolchain_dirs(&home.path().join("none")).is_empty());
    }

    #[test]
    fn the_same_name_is_not_a_rename() {
        let known = resolve(&sh_names(), Some("/bin"), None, &[]);
        let identity = Identity::new(known);
        assert!(identity.is_known_as(&sh_names(), "sh"));
        assert!(!identity.is_known_as(&sh_names(), "x"));
    }
}
