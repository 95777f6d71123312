//! The relay of network `allow-list`: how a connection made inside the sandbox reaches bridle's
//! proxy, which runs outside it.
//!
//! The sandbox has its own network namespace with nothing but loopback. Right after bringing
//! loopback up, the launcher opens a listening TCP socket on `127.0.0.1:<relay port>` inside
//! that namespace and hands it to bridle over a unix socketpair it inherited as a descriptor
//! ([`RELAY_FD`]): an `SCM_RIGHTS` message. bridle's proxy accepts connections from that
//! listener directly, so a connection from inside is a socket the proxy reads and writes (no
//! process copies bytes in between), and every upstream connection is the proxy's own, made
//! from bridle's network namespace after it decided.
//!
//! Why this makes "per-session credentials" hold without a token: the proxy has no address any
//! other process can name. It listens on no host port and no path; its only way in is the
//! listener inside the sandbox's private namespace, whose descriptor travelled over a
//! socketpair that only bridle and this sandbox's launcher ever held. Another local process
//! (another user, another sandbox, a container on the host) cannot connect to it at all. The
//! one exception is a process of the same user outside any sandbox, which may enter the
//! sandbox's namespaces (it owns them) — and that process already has the network unconfined,
//! so it gains nothing. The command inside cannot hand the listener on (it never holds it: the
//! launcher closes its copy after sending, and the command's descriptors above 2 are closed
//! before exec), and cannot bind the relay port itself after a failure (below 1024, and the
//! command has no capabilities).
//!
//! Lifetime: the launcher (and the sandbox's init) keep their end of the socketpair open while
//! the sandbox lives; the command's copy is closed before exec. When the sandbox ends, bridle's
//! end reads end-of-file, and the proxy drops the listener and that sandbox's connections.
//!
//! Fail closed: a launch with network `allow-list` and no relay descriptor, a listener that
//! cannot be opened, or one that cannot be passed is a refusal (`G-NET`); the command never
//! runs. If bridle's proxy stops, the listener is closed with it, connections inside fail, and
//! nothing else ever leaves the namespace.

use std::io::{self, IoSlice, IoSliceMut};
use std::net::{Ipv4Addr, SocketAddrV4, TcpListener};
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;

use nix::sys::socket::{
    Backlog, ControlMessage, ControlMessageOwned, MsgFlags, SockType, getsockopt, listen, recvmsg,
    sendmsg, sockopt,
};

use crate::sys;

pub use crate::launcher::protocol::RELAY_FD;

/// How many connections may wait for the proxy to accept them: more than the proxy serves at
/// once, so a burst queues instead of being refused.
pub const RELAY_BACKLOG: i32 = 4096;

/// A new relay channel: bridle's end (the proxy receives the listener on it and watches it for
/// the sandbox's end), and the launcher's end (give it to [`crate::Launch::with_network_relay`]).
pub fn channel() -> io::Result<(UnixStream, OwnedFd)> {
    let (outside, inside) = UnixStream::pair()?;
    Ok((outside, inside.into()))
}

/// In the launcher, inside the sandbox's new network namespace with loopback up: opens the
/// relay listener on `127.0.0.1:port` and passes it over the inherited channel at [`RELAY_FD`],
/// which stays open (it tells bridle when the sandbox is gone). Returns why not, as a cause for
/// a `G-NET` refusal.
pub(crate) fn hand_over_listener(port: u16) -> Result<(), String> {
    let channel = sys::take_raw_fd(RELAY_FD).map_err(|e| {
        format!(
            "network allow-list: no relay descriptor was passed to the launcher ({e}); this command cannot reach bridle's proxy"
        )
    })?;
    match getsockopt(&channel, sockopt::SockType) {
        Ok(SockType::Stream) => {}
        other => {
            return Err(format!(
                "network allow-list: descriptor {RELAY_FD} is not the relay socketpair ({other:?})"
            ));
        }
    }
    let listener = TcpListener::bind(SocketAddrV4::new(Ipv4Addr::LOCALHOST, port))
        .map_err(|e| format!("network allow-list: binding the relay to 127.0.0.1:{port}: {e}"))?;
    // A second listen() on a listening socket only changes its queue length.
    let backlog = Backlog::new(RELAY_BACKLOG).unwrap_or(Backlog::MAXCONN);
    listen(&listener, backlog)
        .map_err(|e| format!("network allow-list: listening on 127.0.0.1:{port}: {e}"))?;
    let fds = [listener.as_raw_fd()];
    sendmsg::<()>(
        channel.as_raw_fd(),
        &[IoSlice::new(b"L")],
        &[ControlMessage::ScmRights(&fds)],
        MsgFlags::MSG_NOSIGNAL,
        None,
    )
    .map_err(|e| format!("network allow-list: passing the relay listener to bridle: {e}"))?;
    drop(listener);
    // Kept open at RELAY_FD for the sandbox's lifetime (closed in the command before exec).
    std::mem::forget(channel);
    Ok(())
}

/// bridle's side: the relay listener the launcher passed on `channel`, checked to be a
/// listening TCP socket on `127.0.0.1:port`, set non-blocking. A launch that was retried (see
/// [`crate::Sandbox::spawn`]) may have passed one before it failed, so every queued listener
/// is taken and the last one kept: it belongs to the launch that reported ready.
pub fn receive_listener(channel: &UnixStream, port: u16) -> io::Result<TcpListener> {
    let mut last = None;
    while let Some(fd) = receive_one(channel.as_fd().as_raw_fd())? {
        last = Some(fd);
    }
    let fd = last.ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::NotFound,
            "the launcher passed no relay listener",
        )
    })?;
    let expected = std::net::SocketAddr::from(SocketAddrV4::new(Ipv4Addr::LOCALHOST, port));
    let listening = getsockopt(&fd, sockopt::AcceptConn).map_err(io::Error::from)?;
    let stream = getsockopt(&fd, sockopt::SockType).map_err(io::Error::from)? == SockType::Stream;
    let listener = TcpListener::from(fd);
    let bound = listener.local_addr()?;
    if bound != expected || !listening || !stream {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("the relay descriptor is not a TCP listener on {expected} (found {bound})"),
        ));
    }
    listener.set_nonblocking(true)?;
    Ok(listener)
}

/// One queued descriptor, without blocking; `None` when nothing (more) is queued.
fn receive_one(channel: RawFd) -> io::Result<Option<OwnedFd>> {
    let mut byte = [0u8; 1];
    let mut iov = [IoSliceMut::new(&mut byte)];
    let mut space = nix::cmsg_space!([RawFd; 1]);
    let msg = match recvmsg::<()>(
        channel,
        &mut iov,
        Some(&mut space),
        MsgFlags::MSG_DONTWAIT | MsgFlags::MSG_CMSG_CLOEXEC,
    ) {
        Ok(msg) => msg,
        Err(nix::errno::Errno::EAGAIN) => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    if msg.bytes == 0 {
        // End of file: the launcher is gone.
        return Ok(None);
    }
    let mut received = None;
    for cmsg in msg.cmsgs().map_err(io::Error::from)? {
        if let ControlMessageOwned::ScmRights(fds) = cmsg {
            for fd in fds {
                let owned = owned_received(fd);
                // One descriptor per message; any other is closed here (the drop).
                received.get_or_insert(owned);
            }
        }
    }
    received.map(Some).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            "a relay message without a descriptor",
        )
    })
}

/// A pipe for moving a connection's bytes from one socket to another inside the kernel
/// (`splice`), without copying them through the proxy's memory. Both ends are non-blocking.
#[derive(Debug)]
pub struct SplicePipe {
    read: OwnedFd,
    write: OwnedFd,
    held: usize,
}

/// How many bytes a [`SplicePipe`] asks the kernel to hold (it may give less).
pub const SPLICE_PIPE_BYTES: usize = 1 << 20;

impl SplicePipe {
    /// A new, empty pipe (its capacity raised towards [`SPLICE_PIPE_BYTES`] where allowed).
    pub fn new() -> io::Result<SplicePipe> {
        use nix::fcntl::{FcntlArg, OFlag, fcntl};
        let (read, write) = nix::unistd::pipe2(OFlag::O_CLOEXEC | OFlag::O_NONBLOCK)?;
        let size = i32::try_from(SPLICE_PIPE_BYTES).unwrap_or(1 << 16);
        // Above /proc/sys/fs/pipe-max-size this fails for an unprivileged user: keep the default.
        let _ = fcntl(&write, FcntlArg::F_SETPIPE_SZ(size));
        Ok(SplicePipe {
            read,
            write,
            held: 0,
        })
    }

    /// Bytes in the pipe, not yet passed on.
    pub fn held(&self) -> usize {
        self.held
    }

    /// Moves what `socket` has to read (up to the pipe's room) into the pipe; `Ok(0)` at end of
    /// file. `WouldBlock` when nothing is there.
    pub fn fill(&mut self, socket: std::os::fd::BorrowedFd<'_>) -> io::Result<usize> {
        let n = nix::fcntl::splice(
            socket,
            None,
            &self.write,
            None,
            SPLICE_PIPE_BYTES,
            nix::fcntl::SpliceFFlags::SPLICE_F_MOVE | nix::fcntl::SpliceFFlags::SPLICE_F_NONBLOCK,
        )?;
        self.held += n;
        Ok(n)
    }

    /// Moves what the pipe holds into `socket`, as much as it takes. `WouldBlock` when the
    /// socket has no room.
    pub fn drain(&mut self, socket: std::os::fd::BorrowedFd<'_>) -> io::Result<usize> {
        let n = nix::fcntl::splice(
            &self.read,
            None,
            socket,
            None,
            self.held,
            nix::fcntl::SpliceFFlags::SPLICE_F_MOVE | nix::fcntl::SpliceFFlags::SPLICE_F_NONBLOCK,
        )?;
        self.held -= n.min(self.held);
        Ok(n)
    }
}

/// Shuts down the sending side of a connected socket (passes an end of file on).
pub fn shutdown_write(socket: std::os::fd::BorrowedFd<'_>) -> io::Result<()> {
    nix::sys::socket::shutdown(socket.as_raw_fd(), nix::sys::socket::Shutdown::Write)
        .map_err(io::Error::from)
}

/// Takes ownership of a descriptor the kernel just installed in this process for an
/// `SCM_RIGHTS` message.
#[allow(unsafe_code)]
fn owned_received(fd: RawFd) -> OwnedFd {
    // SAFETY: `fd` was installed in our descriptor table by this recvmsg call and is referenced
    // by nothing else in the process: we are its only owner, and take it exactly once.
    unsafe { OwnedFd::from_raw_fd(fd) }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The receiving half against a listener passed the way the launcher passes it.
    #[test]
    fn the_last_passed_listener_is_received_and_checked() {
        let (outside, inside) = channel().unwrap();
        let inside = UnixStream::from(inside);
        let stale = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = {
            let l = TcpListener::bind("127.0.0.1:0").unwrap();
            let port = l.local_addr().unwrap().port();
            for listener in [&stale, &l] {
                sendmsg::<()>(
                    inside.as_raw_fd(),
                    &[IoSlice::new(b"L")],
                    &[ControlMessage::ScmRights(&[listener.as_raw_fd()])],
                    MsgFlags::empty(),
                    None,
                )
                .unwrap();
            }
            port
        };
        let received = receive_listener(&outside, port).unwrap();
        assert_eq!(received.local_addr().unwrap().port(), port);
        // Nothing is left queued, and a wrong port is refused.
        assert!(receive_listener(&outside, port).is_err());
    }

    #[test]
    fn a_splice_pipe_moves_bytes_between_sockets() {
        use std::io::{Read, Write};
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut a = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (b, _) = listener.accept().unwrap();
        let mut c = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (d, _) = listener.accept().unwrap();
        b.set_nonblocking(true).unwrap();
        let mut pipe = SplicePipe::new().unwrap();
        assert_eq!(
            pipe.fill(b.as_fd()).unwrap_err().kind(),
            io::ErrorKind::WouldBlock
        );
        a.write_all(b"through the kernel").unwrap();
        a.shutdown(std::net::Shutdown::Write).unwrap();
        while pipe.held() < 18 {
            let _ = pipe.fill(b.as_fd());
        }
        assert_eq!(pipe.fill(b.as_fd()).unwrap(), 0, "end of file");
        while pipe.held() > 0 {
            pipe.drain(d.as_fd()).unwrap();
        }
        shutdown_write(d.as_fd()).unwrap();
        let mut got = String::new();
        c.read_to_string(&mut got).unwrap();
        assert_eq!(got, "through the kernel");
    }

    #[test]
    fn a_descriptor_that_is_not_the_expected_listener_is_refused() {
        let (outside, inside) = channel().unwrap();
        let inside = UnixStream::from(inside);
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        sendmsg::<()>(
            inside.as_raw_fd(),
            &[IoSlice::new(b"L")],
            &[ControlMessage::ScmRights(&[listener.as_raw_fd()])],
            MsgFlags::empty(),
            None,
        )
        .unwrap();
        let wrong = listener.local_addr().unwrap().port().wrapping_add(1);
        let err = receive_listener(&outside, wrong).unwrap_err();
        assert!(err.to_string().contains("not a TCP listener"), "{err}");
        drop(inside);
        let err = receive_listener(&outside, wrong).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
    }
}
