//! `bridle exec` and processes outside the command: it cannot stall host programs with file
//! leases, or weaken the sandbox's init by lowering its resource limits (G-PROC).

use super::support::{ExecEnv, path_str};

#[test]
fn file_leases_are_denied_while_locks_keep_working() {
    let e = ExecEnv::new();
    let outside = e.outside_file("config.txt", "host data\n");
    let inside = e.write("mine.txt", "workspace data\n");
    let r = e.python(&format!(
        r#"
import errno, fcntl, os
def attempt(name, f):
    try:
        f(); print(name + "=ok")
    except OSError as err:
        print(name + "=" + errno.errorcode.get(err.errno, "?"))
host = os.open("{outside}", os.O_RDONLY)
mine = os.open("{inside}", os.O_RDWR)
attempt("read_lease_host", lambda: fcntl.fcntl(host, fcntl.F_SETLEASE, fcntl.F_RDLCK))
attempt("write_lease_mine", lambda: fcntl.fcntl(mine, fcntl.F_SETLEASE, fcntl.F_WRLCK))
attempt("unlock_lease", lambda: fcntl.fcntl(host, fcntl.F_SETLEASE, fcntl.F_UNLCK))
attempt("get_lease", lambda: fcntl.fcntl(host, fcntl.F_GETLEASE))
attempt("flock", lambda: fcntl.flock(host, fcntl.LOCK_SH))
attempt("posix_lock", lambda: fcntl.lockf(mine, fcntl.LOCK_EX))
attempt("setfl", lambda: fcntl.fcntl(mine, fcntl.F_SETFL, os.O_NONBLOCK))
"#,
        outside = path_str(&outside),
        inside = path_str(&inside),
    ));
    r.assert_ok();
    for step in ["read_lease_host", "write_lease_mine", "unlock_lease"] {
        assert_eq!(r.value(step), "EPERM", "{step}\n{}", r.stdout);
    }
    for step in ["get_lease", "flock", "posix_lock", "setfl"] {
        assert_eq!(r.value(step), "ok", "{step}\n{}", r.stdout);
    }
}

#[test]
fn resource_limits_of_init_cannot_be_lowered_while_ulimit_keeps_working() {
    let e = ExecEnv::new();
    let r = e.sh(
        "limit() { awk -v name=\"$1\" '$0 ~ \"^Max \" name { print $(NF-2) }' /proc/1/limits; }
         echo init_before=$(limit 'open files')
         prlimit --pid 1 --nofile=5:5; echo prlimit_init=$?
         prlimit --pid 1 --nproc=1; echo prlimit_init_nproc=$?
         prlimit --pid 1 --nofile; echo prlimit_read_init=$?
         echo init_after=$(limit 'open files')
         ulimit -n 64; echo ulimit_set=$?
         echo ulimit_now=$(ulimit -n)
         echo prlimit_command=$(prlimit --nofile=32 sh -c 'ulimit -n')
         /usr/bin/python3 -c 'import resource; resource.setrlimit(resource.RLIMIT_NOFILE, (48, 48)); print(\"python_now=%d\" % resource.getrlimit(resource.RLIMIT_NOFILE)[0])'",
    );
    r.assert_ok();
    for step in ["prlimit_init", "prlimit_init_nproc", "prlimit_read_init"] {
        r.assert_failed(step);
    }
    assert!(!r.value("init_before").is_empty(), "{}", r.stdout);
    assert_eq!(r.value("init_after"), r.value("init_before"));
    r.assert_succeeded("ulimit_set");
    assert_eq!(r.value("ulimit_now"), "64");
    assert_eq!(r.value("prlimit_command"), "32");
    assert_eq!(r.value("python_now"), "48");
}
