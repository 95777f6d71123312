//! `bridle exec` and other processes: G-PROC.
//!
//! The victim is a `sleep 300` the test starts outside the sandbox (argv[0] set to a unique
//! token); it is judged from outside: still alive, not traced, never stopped.

use super::support::{ExecEnv, Victim};

/// The victim's `State` and `TracerPid` lines from the host's /proc.
fn status_of(pid: i32) -> (String, String) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("victim status");
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .map(|v| v.trim().to_owned())
            .unwrap_or_default()
    };
    (field("State:"), field("TracerPid:"))
}

#[test]
fn outside_process_cannot_be_signalled() {
    let e = ExecEnv::new();
    let mut victim = Victim::sleeper();
    let pid = victim.pid();
    let r = e.sh(&format!(
        "kill -9 {pid}; echo kill=$?
         kill -STOP {pid}; echo stop=$?
         /usr/bin/python3 -c 'import os; os.kill({pid}, 9)'; echo python=$?
         pkill -9 -x sleep; echo pkill=$?
         sleep 30 & kill -9 -1; echo kill_all=$?"
    ));
    r.assert_ok();
    for step in ["kill", "stop", "python", "pkill"] {
        r.assert_failed(step);
    }
    assert!(victim.alive(), "the outside process was killed from inside");
    let (state, _) = status_of(pid);
    assert!(state.starts_with('S'), "victim state {state}");
}

#[test]
fn outside_process_cannot_be_traced() {
    let e = ExecEnv::new();
    let mut victim = Victim::sleeper();
    let pid = victim.pid();
    let r = e.sh(&format!(
        "/usr/bin/python3 -c '
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
PTRACE_ATTACH, PTRACE_SEIZE = 16, 0x4206
for req in (PTRACE_ATTACH, PTRACE_SEIZE):
    if libc.ptrace(req, {pid}, 0, 0) == 0:
        sys.exit(0)
sys.exit(1)'; echo ptrace=$?
         timeout 5 strace -p {pid} -e trace=none -o /dev/null; echo strace=$?
         timeout 10 gdb -p {pid} -batch -ex 'call (int)kill({pid}, 9)' > /dev/null 2>&1; echo gdb=$?
         /usr/bin/python3 -c 'open(\"/proc/{pid}/mem\", \"rb\")'; echo mem=$?
         /usr/bin/python3 -c '
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
buf = ctypes.create_string_buffer(8)
class iovec(ctypes.Structure):
    _fields_ = [(\"base\", ctypes.c_void_p), (\"len\", ctypes.c_size_t)]
local = iovec(ctypes.addressof(buf), 8)
remote = iovec(0x400000, 8)
sys.exit(0 if libc.process_vm_readv({pid}, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0) >= 0 else 1)'; echo vm_read=$?"
    ));
    r.assert_ok();
    for step in ["ptrace", "strace", "gdb", "mem", "vm_read"] {
        r.assert_failed(step);
    }
    assert!(victim.alive(), "the outside process died");
    let (state, tracer) = status_of(pid);
    assert_eq!(tracer, "0", "the outside process is being traced");
    assert!(state.starts_with('S'), "victim state {state}");
}

#[test]
fn outside_process_is_not_visible() {
    let e = ExecEnv::new();
    let victim = Victim::sleeper();
    let pid = victim.pid();
    // The script must not carry the token itself (its own command line would match): it is
    // put together from two halves inside.
    let (head, tail) = victim.token.split_at(8);
    let r = e.sh(&format!(
        "test -e /proc/{pid}; echo proc_entry=$?
         cat /proc/{pid}/environ > /dev/null 2>&1; echo environ=$?
         t={head}; t=${{t}}{tail}
         /usr/bin/python3 -c '
import os, sys
for p in os.listdir(\"/proc\"):
    try:
        if p.isdigit() and sys.argv[1].encode() in open(\"/proc/%s/cmdline\" % p, \"rb\").read():
            print(\"seen=\" + p)
    except OSError:
        pass' \"$t\"
         ps -eo args > ps.txt; grep -c -F -e \"$t\" ps.txt | sed 's/^/ps_matches=/'
         ls /proc | grep -E '^[0-9]+$' | wc -l | sed 's/^ */pids=/'"
    ));
    r.assert_ok();
    r.assert_failed("proc_entry");
    r.assert_failed("environ");
    // Only the python process itself (which carries the token as its argument) may match.
    let seen: Vec<&str> = r
        .stdout
        .lines()
        .filter(|l| l.starts_with("seen="))
        .collect();
    assert!(seen.len() <= 1, "{}", r.stdout);
    assert_eq!(r.value("ps_matches"), "0");
    let pids: usize = r.value("pids").parse().unwrap();
    assert!(pids < 20, "the sandbox sees {pids} processes: {}", r.stdout);
}

#[test]
fn processes_inside_can_signal_each_other() {
    let e = ExecEnv::new();
    let r = e.sh("sleep 30 & child=$!
         kill -TERM $child; echo kill=$?
         wait $child; echo waited=$?
         /usr/bin/python3 -c '
import os, signal, time
pid = os.fork()
if pid == 0:
    time.sleep(30)
    os._exit(0)
os.kill(pid, signal.SIGUSR1)
_, status = os.waitpid(pid, 0)
print(\"child_signal=%d\" % os.WTERMSIG(status))'");
    r.assert_ok();
    r.assert_succeeded("kill");
    assert_eq!(r.value("waited"), "143");
    assert_eq!(r.value("child_signal"), "10");
    assert!(r.elapsed.as_secs() < 20, "took {:?}", r.elapsed);
}

#[test]
fn ptrace_is_denied_even_within_the_sandbox() {
    // ptrace is denied outright (G-PROC is kept by seccomp as well as by the PID namespace);
    // what still works inside is inspecting one's own /proc.
    let e = ExecEnv::new();
    let r = e.sh("sleep 30 & child=$!
         timeout 5 strace -p $child -o /dev/null; echo strace_own_child=$?
         cat /proc/$child/status > /dev/null; echo own_status=$?
         kill $child");
    r.assert_ok();
    r.assert_failed("strace_own_child");
    r.assert_succeeded("own_status");
}
