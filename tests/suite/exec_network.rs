//! `bridle exec` and the network: G-NET.
//!
//! The outside end is a socket the test itself owns on the host's loopback. Connections and
//! datagrams queue in it whether or not anyone accepts, so after the sandboxed command has
//! returned, one non-blocking `accept`/`recv` says whether anything ever arrived: no sleeps,
//! no races.

use std::io::ErrorKind;
use std::net::{TcpListener, UdpSocket};

use super::support::{ExecEnv, Run};

fn tcp_listener() -> (TcpListener, u16) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind an outside listener");
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    (listener, port)
}

/// Whether any connection reached `listener` (it has queued by the time the client returned).
fn was_reached(listener: &TcpListener) -> bool {
    match listener.accept() {
        Ok(_) => true,
        Err(e) if e.kind() == ErrorKind::WouldBlock => false,
        Err(e) => panic!("accept on the outside listener: {e}"),
    }
}

fn udp_socket() -> (UdpSocket, u16) {
    let socket = UdpSocket::bind("127.0.0.1:0").expect("bind an outside UDP socket");
    socket.set_nonblocking(true).unwrap();
    let port = socket.local_addr().unwrap().port();
    (socket, port)
}

fn datagram_arrived(socket: &UdpSocket) -> Option<String> {
    let mut buf = [0u8; 256];
    match socket.recv_from(&mut buf) {
        Ok((n, _)) => Some(String::from_utf8_lossy(&buf[..n]).into_owned()),
        Err(e) if e.kind() == ErrorKind::WouldBlock => None,
        Err(e) => panic!("recv on the outside socket: {e}"),
    }
}

fn tcp_clients(port: u16) -> String {
    format!(
        "/usr/bin/python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", {port}), timeout=2)'; echo python=$?
         /usr/bin/python3 -c 'import socket; s = socket.socket(socket.AF_INET6); s.settimeout(2); s.connect((\"::ffff:127.0.0.1\", {port}))'; echo python_v6=$?
         bash -c 'echo hello > /dev/tcp/127.0.0.1/{port}'; echo bash_dev_tcp=$?
         curl -sS --max-time 2 http://127.0.0.1:{port}/; echo curl=$?"
    )
}

#[test]
fn tcp_to_outside_listener_is_blocked() {
    let e = ExecEnv::new();
    let (listener, port) = tcp_listener();
    let r = e.sh(&tcp_clients(port));
    r.assert_ok();
    for step in ["python", "python_v6", "bash_dev_tcp", "curl"] {
        r.assert_failed(step);
    }
    assert!(
        !was_reached(&listener),
        "the outside listener received a connection\n{}{}",
        r.stdout,
        r.stderr
    );
}

#[test]
fn network_on_reaches_the_outside_listener() {
    let e = ExecEnv::new();
    let (listener, port) = tcp_listener();
    let r = e.sh_with(
        &[],
        &["--network", "on"],
        &format!("bash -c 'echo hello > /dev/tcp/127.0.0.1/{port}'; echo bash_dev_tcp=$?"),
    );
    r.assert_ok();
    r.assert_succeeded("bash_dev_tcp");
    assert!(was_reached(&listener), "{}{}", r.stdout, r.stderr);
}

#[test]
fn udp_to_outside_socket_is_blocked() {
    let e = ExecEnv::new();
    let (socket, port) = udp_socket();
    let r = e.sh(&format!(
        "/usr/bin/python3 -c '
import socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.sendto(b\"leak\", (\"127.0.0.1\", {port}))'; echo python=$?
         bash -c 'echo leak > /dev/udp/127.0.0.1/{port}'; echo bash_dev_udp=$?"
    ));
    r.assert_ok();
    // Inside a private network namespace the send itself may "succeed" into the sandbox's own
    // loopback; what matters is that nothing arrives outside.
    assert_eq!(datagram_arrived(&socket), None, "{}{}", r.stdout, r.stderr);
}

#[test]
fn udp_with_network_on_arrives() {
    let e = ExecEnv::new();
    let (socket, port) = udp_socket();
    let r = e.sh_with(
        &[],
        &["--network", "on"],
        &format!("bash -c 'printf arrived > /dev/udp/127.0.0.1/{port}'; echo bash_dev_udp=$?"),
    );
    r.assert_ok();
    r.assert_succeeded("bash_dev_udp");
    assert_eq!(datagram_arrived(&socket).as_deref(), Some("arrived"));
}

#[test]
fn loopback_server_and_client_inside_the_sandbox_work() {
    let e = ExecEnv::new();
    let r = e.python(
        r#"
import socket, threading
srv = socket.socket()
srv.bind(("127.0.0.1", 0))
srv.listen()
port = srv.getsockname()[1]
def serve():
    conn, _ = srv.accept()
    conn.sendall(conn.recv(64).upper())
    conn.close()
threading.Thread(target=serve, daemon=True).start()
c = socket.create_connection(("127.0.0.1", port), timeout=5)
c.sendall(b"ping")
print("reply=" + c.recv(64).decode())
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
u.bind(("127.0.0.1", 0))
socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"dgram", u.getsockname())
u.settimeout(5)
print("udp=" + u.recv(64).decode())
"#,
    );
    r.assert_ok();
    assert_eq!(r.value("reply"), "PING");
    assert_eq!(r.value("udp"), "dgram");
}

#[test]
fn loopback_server_in_background_serves_a_separate_client() {
    let e = ExecEnv::new();
    let r = e.sh("/usr/bin/python3 -c '
import socket
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((\"127.0.0.1\", 18080)); s.listen()
open(\"ready\", \"w\").close()
c, _ = s.accept(); c.sendall(b\"served-inside\"); c.close()' &
         for i in $(seq 200); do [ -e ready ] && break; sleep 0.02; done
         /usr/bin/python3 -c '
import socket
print(\"got=\" + socket.create_connection((\"127.0.0.1\", 18080), timeout=5).recv(64).decode())'
         wait");
    r.assert_ok();
    assert_eq!(r.value("got"), "served-inside");
}

#[test]
fn raw_packet_netlink_vsock_and_io_uring_are_denied() {
    let e = ExecEnv::new();
    let r = e.python(
        r#"
import ctypes, errno, os, socket
def attempt(name, fn):
    try:
        fn()
        print(name + "=ok")
    except OSError as ex:
        print(name + "=" + errno.errorcode.get(ex.errno, str(ex.errno)))
attempt("raw", lambda: socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP))
attempt("packet", lambda: socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0))
attempt("vsock", lambda: socket.socket(socket.AF_VSOCK, socket.SOCK_STREAM))
attempt("netlink_audit", lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 9))
attempt("bluetooth", lambda: socket.socket(31, socket.SOCK_STREAM, 0))
libc = ctypes.CDLL(None, use_errno=True)
params = ctypes.create_string_buffer(120)
nr = {"x86_64": 425, "aarch64": 425}[os.uname().machine]
fd = libc.syscall(nr, 8, params)
print("io_uring=" + ("ok" if fd >= 0 else errno.errorcode[ctypes.get_errno()]))
"#,
    );
    r.assert_ok();
    for family in [
        "raw",
        "packet",
        "vsock",
        "netlink_audit",
        "bluetooth",
        "io_uring",
    ] {
        assert_eq!(r.value(family), "EPERM", "{family}: {}", r.stdout);
    }
}

#[test]
fn network_off_has_only_loopback_inside() {
    let e = ExecEnv::new();
    let r: Run = e.python(
        "import socket; print('ifaces=' + ' '.join(sorted(n for _, n in socket.if_nameindex())))",
    );
    r.assert_ok();
    assert_eq!(r.value("ifaces"), "lo");
}
