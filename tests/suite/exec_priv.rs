//! `bridle exec` and privileges: G-PRIV.

use std::os::unix::fs::{MetadataExt, PermissionsExt};

use pretty_assertions::assert_eq;

use super::support::{ExecEnv, is_root, path_str};

#[test]
fn confined_process_has_no_capabilities_and_is_filtered() {
    let e = ExecEnv::new();
    let r = e.sh(
        "grep -E '^(Cap(Inh|Prm|Eff|Bnd|Amb)|NoNewPrivs|Seccomp):' /proc/self/status | tr -d ' \\t' | tr ':' '='
         echo uid=$(id -u)",
    );
    r.assert_ok();
    for set in ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"] {
        assert_eq!(r.value(set), "0000000000000000", "{set}");
    }
    assert_eq!(r.value("NoNewPrivs"), "1");
    assert_eq!(r.value("Seccomp"), "2");
    // Root stays root by uid (file ownership keeps working) but holds nothing.
    assert_eq!(
        r.value("uid"),
        nix::unistd::geteuid().as_raw().to_string(),
        "the uid inside differs from bridle's"
    );
}

#[test]
fn files_created_inside_belong_to_the_invoking_user() {
    // Positive case: dropping privileges does not change who the command is; what it creates
    // in the workspace is the user's own, as without a sandbox.
    let e = ExecEnv::new();
    let r = e.sh("echo mine > mine.txt; mkdir dir; echo uid=$(id -u) gid=$(id -g)");
    r.assert_ok();
    let uid = nix::unistd::geteuid().as_raw();
    let gid = nix::unistd::getegid().as_raw();
    assert_eq!(r.value("uid"), format!("{uid} gid={gid}"));
    for name in ["mine.txt", "dir"] {
        let meta = std::fs::metadata(e.workspace.join(name)).unwrap();
        assert_eq!((meta.uid(), meta.gid()), (uid, gid), "{name}");
    }
}

#[test]
fn capabilities_cannot_be_regained_through_exec_or_setuid() {
    let e = ExecEnv::new();
    // `mount` is setuid root on most systems; under no_new_privs it gains nothing.
    let r = e.sh(
        "ls -l /usr/bin/mount | cut -c4 | sed 's/^/setuid_bit=/'
         /usr/bin/python3 -c 'print(\"child_capeff=\" + [l.split()[1] for l in open(\"/proc/self/status\") if l.startswith(\"CapEff\")][0])'
         /usr/bin/python3 -c 'import os; os.setuid(0)' 2>/dev/null; echo setuid0=$?
         /usr/bin/python3 -c 'import ctypes, sys; sys.exit(0 if ctypes.CDLL(None).prctl(39, 0, 0, 0, 0) == 1 else 1)'; echo nnp_in_child=$?",
    );
    r.assert_ok();
    assert_eq!(r.value("child_capeff"), "0000000000000000");
    r.assert_succeeded("nnp_in_child");
    if !is_root() {
        r.assert_failed("setuid0");
    }
}

#[test]
fn new_user_namespaces_are_denied() {
    let e = ExecEnv::new();
    let r = e.sh("unshare -r true; echo unshare_user=$?
         unshare -r -m sh -c 'echo inside-userns'; echo unshare_user_mount=$?
         unshare -n true; echo unshare_net=$?
         unshare -p -f true; echo unshare_pid=$?
         /usr/bin/python3 -c 'import os; os.unshare(os.CLONE_NEWUSER)'; echo python_unshare=$?");
    r.assert_ok();
    for step in [
        "unshare_user",
        "unshare_user_mount",
        "unshare_net",
        "unshare_pid",
        "python_unshare",
    ] {
        r.assert_failed(step);
    }
    assert!(!r.stdout.contains("inside-userns"));
}

#[test]
fn mounting_is_denied() {
    let e = ExecEnv::new();
    let r = e.sh("mkdir -p /tmp/x
         mount -t tmpfs none /tmp/x; echo mount_tmpfs=$?
         mount --bind /tmp/x \"$PWD\"; echo mount_bind=$?
         umount /proc; echo umount_proc=$?
         mount -o remount,rw /; echo remount_root=$?
         grep -c ' /tmp/x ' /proc/self/mountinfo | sed 's/^/tmpx_mounts=/'");
    r.assert_ok();
    for step in ["mount_tmpfs", "mount_bind", "umount_proc", "remount_root"] {
        r.assert_failed(step);
    }
    assert_eq!(r.value("tmpx_mounts"), "0");
}

#[test]
fn kernel_interfaces_are_denied() {
    let e = ExecEnv::new();
    let r = e.python(
        r#"
import ctypes, errno, os
libc = ctypes.CDLL(None, use_errno=True)
numbers = {
    "x86_64": {"bpf": 321, "perf_event_open": 298, "keyctl": 250, "add_key": 248,
               "userfaultfd": 323, "kexec_load": 246, "init_module": 175,
               "finit_module": 313, "open_by_handle_at": 304, "setns": 308, "reboot": 169},
    "aarch64": {"bpf": 280, "perf_event_open": 241, "keyctl": 219, "add_key": 217,
                "userfaultfd": 282, "kexec_load": 104, "init_module": 105,
                "finit_module": 273, "open_by_handle_at": 265, "setns": 268, "reboot": 142},
}[os.uname().machine]
buf = ctypes.create_string_buffer(256)
for name, nr in sorted(numbers.items()):
    ctypes.set_errno(0)
    if name == "reboot":
        # Bad magic numbers: a permitted call would fail with EINVAL, never reboot.
        ret = libc.syscall(nr, 0, 0, 0, 0)
    else:
        ret = libc.syscall(nr, 0, buf, 0, 0, 0)
    print(name + "=" + ("ok" if ret >= 0 else errno.errorcode.get(ctypes.get_errno(), "?")))
"#,
    );
    r.assert_ok();
    for name in [
        "bpf",
        "perf_event_open",
        "keyctl",
        "add_key",
        "userfaultfd",
        "kexec_load",
        "init_module",
        "finit_module",
        "open_by_handle_at",
        "setns",
        "reboot",
    ] {
        assert_eq!(r.value(name), "EPERM", "{name}\n{}", r.stdout);
    }
}

/// Even when the sandboxed process is uid 0 (bridle run by root), a root-owned file outside the
/// workspace keeps its content, mode and owner. Unprivileged, the same holds for the user's own
/// file, which the sandboxed process (same uid) owns.
#[test]
fn file_owned_by_the_sandboxed_uid_outside_stays_unchanged() {
    let e = ExecEnv::new();
    let victim = e.outside_file("owned.conf", "setting = 1\n");
    std::fs::set_permissions(&victim, std::fs::Permissions::from_mode(0o644)).unwrap();
    let before = std::fs::metadata(&victim).unwrap();
    assert_eq!(before.uid(), nix::unistd::geteuid().as_raw());
    let p = path_str(&victim);
    let r = e.sh(&format!(
        "echo uid=$(id -u)
         echo 'setting = 2' > {p}; echo write=$?
         chmod 666 {p}; echo chmod=$?
         chown 65534 {p}; echo chown=$?
         rm -f {p}; echo rm=$?
         /usr/bin/python3 -c 'import os; os.chmod(\"{p}\", 0o777)'; echo python_chmod=$?"
    ));
    r.assert_ok();
    if is_root() {
        assert_eq!(
            r.value("uid"),
            "0",
            "as root, the sandboxed process is expected to be uid 0"
        );
        assert_eq!(before.uid(), 0, "the victim is expected to be root-owned");
    } else {
        assert_eq!(r.value("uid"), before.uid().to_string());
    }
    for step in ["write", "chmod", "chown", "rm", "python_chmod"] {
        r.assert_failed(step);
    }
    let after = std::fs::metadata(&victim).unwrap();
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "setting = 1\n");
    assert_eq!(
        (
            after.mode(),
            after.uid(),
            after.gid(),
            after.ctime(),
            after.ctime_nsec()
        ),
        (
            before.mode(),
            before.uid(),
            before.gid(),
            before.ctime(),
            before.ctime_nsec()
        )
    );
}

#[test]
fn proc_and_sys_knobs_are_not_writable() {
    let e = ExecEnv::new();
    let r = e.python(
        r#"
import os
for name, path in [("hostname", "/proc/sys/kernel/hostname"),
                   ("core_pattern", "/proc/sys/kernel/core_pattern"),
                   ("sysrq", "/proc/sysrq-trigger"),
                   ("sys_kernel", "/sys/kernel/mm/transparent_hugepage/enabled")]:
    try:
        os.close(os.open(path, os.O_WRONLY))
        print(name + "=opened")
    except OSError as e:
        print(name + "=denied")
"#,
    );
    r.assert_ok();
    for name in ["hostname", "core_pattern", "sysrq", "sys_kernel"] {
        assert_eq!(r.value(name), "denied", "{name}\n{}", r.stdout);
    }
}

#[test]
fn setuid_and_setgid_files_cannot_be_made() {
    let e = ExecEnv::new();
    let r = e.sh(
        "cp /bin/true mytrue; chmod 4755 mytrue; echo chmod_suid=$?; chmod g+s mytrue; echo chmod_sgid=$?; \
         /usr/bin/python3 -c \"import os; os.open('made', os.O_CREAT | os.O_WRONLY, 0o4755)\"; echo create_suid=$?; \
         chmod 755 mytrue; echo chmod_plain=$?",
    );
    r.assert_failed("chmod_suid")
        .assert_failed("chmod_sgid")
        .assert_failed("create_suid")
        .assert_succeeded("chmod_plain");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(e.workspace.join("mytrue"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o6000, 0, "a setuid/setgid bit landed: {mode:o}");
    assert!(
        !e.workspace.join("made").exists()
            || std::fs::metadata(e.workspace.join("made"))
                .unwrap()
                .permissions()
                .mode()
                & 0o6000
                == 0
    );
}

#[test]
fn setuid_and_setgid_files_cannot_be_created_by_mknod_openat2_or_mkdir() {
    let e = ExecEnv::new();
    let r = e.python(
        r#"
import ctypes, errno, os, stat, struct
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
nr = {
    "x86_64": {"mknodat": 259, "mkdirat": 258, "mknod": 133, "mkdir": 83, "openat2": 437},
    "aarch64": {"mknodat": 33, "mkdirat": 34, "openat2": 437},
}[os.uname().machine]
AT_FDCWD = -100
def report(name, ret):
    print(name + "=" + ("ok" if ret >= 0 else errno.errorcode.get(ctypes.get_errno(), "?")))
def call(name, *args):
    ctypes.set_errno(0)
    return libc.syscall(nr[name], *args)
for bits, tag in [(0o4755, "suid"), (0o2755, "sgid"), (0o644, "plain")]:
    report("mknodat_" + tag, call("mknodat", AT_FDCWD, b"node-" + tag.encode(), stat.S_IFREG | bits, 0))
    report("mkdirat_" + tag, call("mkdirat", AT_FDCWD, b"dir-" + tag.encode(), bits))
    if "mknod" in nr:
        report("mknod_" + tag, call("mknod", b"oldnode-" + tag.encode(), stat.S_IFREG | bits, 0))
        report("mkdir_" + tag, call("mkdir", b"olddir-" + tag.encode(), bits))
    else:
        for old in ("mknod_", "mkdir_"):
            print(old + tag + "=" + ("ok" if tag == "plain" else "EPERM"))
# openat2 hides its mode in struct open_how; it is refused so callers fall back to openat.
how = ctypes.create_string_buffer(struct.pack("QQQ", os.O_CREAT | os.O_WRONLY, 0o4755, 0))
report("openat2_suid", call("openat2", AT_FDCWD, b"via-openat2", how, 24))
how = ctypes.create_string_buffer(struct.pack("QQQ", os.O_RDONLY, 0, 0))
report("openat2_plain", call("openat2", AT_FDCWD, b".", how, 24))
# What glibc and python use keeps working.
os.mknod("py-node", stat.S_IFREG | 0o644); os.mkdir("py-dir", 0o755)
with open("py-file", "w") as f: f.write("x")
print("python_plain=ok")
"#,
    );
    r.assert_ok();
    for tag in ["suid", "sgid"] {
        for call in ["mknodat", "mkdirat", "mknod", "mkdir"] {
            assert_eq!(r.value(&format!("{call}_{tag}")), "EPERM", "{call} {tag}");
        }
    }
    for call in ["mknodat", "mkdirat", "mknod", "mkdir"] {
        assert_eq!(r.value(&format!("{call}_plain")), "ok", "{call} plain");
    }
    assert_eq!(r.value("openat2_suid"), "ENOSYS");
    assert_eq!(r.value("openat2_plain"), "ENOSYS");
    assert_eq!(r.value("python_plain"), "ok");
    for entry in std::fs::read_dir(&e.workspace).unwrap().flatten() {
        let mode = entry.metadata().unwrap().mode();
        assert_eq!(
            mode & 0o6000,
            0,
            "{:?} has mode {mode:o}",
            entry.file_name()
        );
    }
    assert!(!e.workspace.join("via-openat2").exists());
}
