//! `bridle exec` and local IPC: G-IPC.
//!
//! The daemons are unix socket listeners the test owns outside the sandbox; a connection
//! queues in the listener's backlog whether or not anyone accepts, so one non-blocking
//! `accept` after the run says whether anything reached it.

use std::io::ErrorKind;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixListener};
use std::path::Path;
use std::process::Command;

use super::support::{ExecEnv, is_root, path_str, token};

fn was_reached(listener: &UnixListener) -> bool {
    listener.set_nonblocking(true).unwrap();
    match listener.accept() {
        Ok(_) => true,
        Err(e) if e.kind() == ErrorKind::WouldBlock => false,
        Err(e) => panic!("accept on the outside unix listener: {e}"),
    }
}

/// A python client that connects to the pathname socket `path` and sends a line.
fn python_client(path: &Path) -> String {
    let p = path_str(path);
    format!(
        "/usr/bin/python3 -c '
import socket
s = socket.socket(socket.AF_UNIX)
s.connect(\"{p}\")
s.sendall(b\"hello daemon\")'; echo python=$?"
    )
}

/// [`python_client`], then a datagram sender and curl.
fn connect_pathname(path: &Path) -> String {
    let p = path_str(path);
    format!(
        "{}
         /usr/bin/python3 -c '
import socket
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.sendto(b\"hello daemon\", \"{p}\")'; echo python_dgram=$?
         curl -sS --max-time 2 --unix-socket {p} http://daemon/; echo curl=$?",
        python_client(path)
    )
}

const ALLOW_UNIX: &str = "extends: workspace-write\nunix_sockets: allow\n";

/// Like git's fsmonitor daemon or a language server: a socket inside the workspace, served by a
/// process outside the sandbox.
#[test]
fn pathname_socket_in_workspace_served_outside_is_unreachable() {
    let e = ExecEnv::new();
    std::fs::create_dir_all(e.workspace.join(".git")).unwrap();
    let path = e.workspace.join(".git/fsmonitor--daemon.ipc");
    let listener = UnixListener::bind(&path).unwrap();
    let r = e.sh(&connect_pathname(&path));
    r.assert_ok();
    r.assert_failed("python");
    r.assert_failed("python_dgram");
    r.assert_failed("curl");
    assert!(!was_reached(&listener), "{}{}", r.stdout, r.stderr);
}

#[test]
fn pathname_socket_outside_workspace_is_unreachable() {
    let e = ExecEnv::new();
    let path = e.outside.join("agent.sock");
    let listener = UnixListener::bind(&path).unwrap();
    for profile in [None, Some(e.profile("allow-unix.yaml", ALLOW_UNIX))] {
        let global: Vec<&str> = match &profile {
            Some(p) => vec!["--profile", p.as_str()],
            None => vec![],
        };
        let client = if profile.is_none() {
            connect_pathname(&path)
        } else {
            // (curl would wait for an HTTP answer that never comes)
            python_client(&path)
        };
        let r = e.sh_with(&global, &[], &client);
        r.assert_ok();
        if profile.is_none() {
            r.assert_failed("python");
            assert!(!was_reached(&listener), "{}{}", r.stdout, r.stderr);
        } else {
            // `unix_sockets: allow` documents that a socket outside /run, /var/run and /tmp is
            // reachable; this half proves that the listener and the client are wired right.
            r.assert_succeeded("python");
            assert!(was_reached(&listener), "{}{}", r.stdout, r.stderr);
        }
    }
}

#[test]
fn abstract_socket_outside_is_unreachable() {
    let e = ExecEnv::new();
    let name = token("abstract");
    let addr = SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
    let listener = UnixListener::bind_addr(&addr).unwrap();
    let allow = e.profile("allow-unix.yaml", ALLOW_UNIX);
    let client = format!(
        "/usr/bin/python3 -c '
import socket
s = socket.socket(socket.AF_UNIX)
s.connect(\"\\0{name}\")'; echo python=$?"
    );
    // The default profile denies unix sockets; with `unix_sockets: allow` the network namespace
    // and Landlock's abstract-socket scope still keep the outside namespace out of reach.
    for global in [vec![], vec!["--profile", allow.as_str()]] {
        let r = e.sh_with(&global, &[], &client);
        r.assert_ok();
        r.assert_failed("python");
        assert!(
            !was_reached(&listener),
            "{global:?}: {}{}",
            r.stdout,
            r.stderr
        );
    }
}

#[test]
fn abstract_socket_outside_is_reachable_without_sandbox() {
    // Positive control for the test above: the same client, unconfined, connects.
    let name = token("abstract-control");
    let addr = SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
    let listener = UnixListener::bind_addr(&addr).unwrap();
    let out = Command::new("/usr/bin/python3")
        .args([
            "-c",
            &format!("import socket; socket.socket(socket.AF_UNIX).connect('\\0{name}')"),
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(was_reached(&listener));
}

#[test]
fn socketpair_ipc_inside_works() {
    let e = ExecEnv::new();
    let r = e.python(
        r#"
import socket, multiprocessing, os
a, b = socket.socketpair()
a.sendall(b"over a socketpair")
print("pair=" + b.recv(64).decode())
if os.fork() == 0:
    b.sendall(b"from the child")
    os._exit(0)
print("fork=" + a.recv(64).decode())
def child(conn):
    conn.send("through a pipe")
    conn.close()
parent, child_end = multiprocessing.Pipe()
p = multiprocessing.Process(target=child, args=(child_end,))
p.start()
print("pipe=" + parent.recv())
p.join()
"#,
    );
    r.assert_ok();
    assert_eq!(r.value("pair"), "over a socketpair");
    assert_eq!(r.value("fork"), "from the child");
    assert_eq!(r.value("pipe"), "through a pipe");
}

#[test]
fn daemon_socket_directories_are_hidden() {
    let e = ExecEnv::new();
    let host_entries: Vec<String> = std::fs::read_dir("/run")
        .unwrap()
        .map(|d| d.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    // The resolver configuration may live below /run; it stays visible, nothing else.
    let kept = std::fs::canonicalize("/etc/resolv.conf")
        .ok()
        .and_then(|p| {
            p.strip_prefix("/run")
                .ok()
                .and_then(|rest| rest.components().next())
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
        });
    // As root the test can put a daemon socket there itself; unprivileged it relies on what
    // the host has (/run is never empty on a running system).
    let planted = is_root().then(|| {
        let path = Path::new("/run").join(format!("{}.sock", token("daemon")));
        let listener = UnixListener::bind(&path).unwrap();
        (path, listener)
    });
    assert!(
        !host_entries.is_empty() || planted.is_some(),
        "the host's /run is empty: nothing to hide, the test proves nothing"
    );
    let probe = match &planted {
        Some((path, _)) => connect_pathname(path),
        None => String::new(),
    };
    let r = e.sh_with(
        &["--profile", &e.profile("allow-unix.yaml", ALLOW_UNIX)],
        &[],
        &format!(
            "{probe}
             ls -A /run /var/run | grep -v -e ':$' -e '^$' | sed 's/^/entry=/'
             find /run /var/run -type s 2>/dev/null | sed 's/^/socket=/'
             echo done=0"
        ),
    );
    if let Some((path, listener)) = &planted {
        let reached = was_reached(listener);
        let _ = std::fs::remove_file(path);
        assert!(!reached, "{}{}", r.stdout, r.stderr);
        r.assert_failed("python");
    }
    r.assert_ok();
    r.assert_succeeded("done");
    assert!(!r.stdout.contains("socket="), "{}", r.stdout);
    let visible: Vec<&str> = r
        .stdout
        .lines()
        .filter_map(|l| l.strip_prefix("entry="))
        .filter(|name| kept.as_deref() != Some(*name))
        .collect();
    assert_eq!(
        visible,
        Vec::<&str>::new(),
        "host /run entries visible inside (host has {host_entries:?})"
    );
}

#[test]
fn sysv_message_queues_are_private() {
    let e = ExecEnv::new();
    let out = Command::new("ipcmk").args(["-Q"]).output().unwrap();
    assert!(
        out.status.success(),
        "ipcmk: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let id = text
        .split_whitespace()
        .last()
        .expect("ipcmk prints the id")
        .to_owned();
    let r = e.sh(&format!(
        "ipcs -q | grep -c . | sed 's/^/lines=/'
         ipcrm -q {id}; echo ipcrm=$?
         ipcmk -Q > /dev/null; echo own_queue=$?"
    ));
    let still_there = Command::new("ipcs")
        .args(["-q", "-i", &id])
        .output()
        .unwrap()
        .status
        .success();
    let _ = Command::new("ipcrm").args(["-q", &id]).status();
    r.assert_ok();
    r.assert_failed("ipcrm");
    r.assert_succeeded("own_queue");
    assert!(!r.stdout.contains(&format!(" {id} ")), "{}", r.stdout);
    assert!(still_there, "the outside message queue {id} was removed");
}
