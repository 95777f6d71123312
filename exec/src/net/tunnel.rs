//! Copying bytes both ways between the sandbox's side of a connection and the upstream one.
//!
//! Buffers are taken from a shared pool only while a direction has data to move and returned
//! as soon as its socket has nothing more to read, so an idle connection holds no buffer (its
//! cost is two sockets and a small task), and the memory of busy ones is bounded by the
//! connection limit times two buffers.

use std::future::poll_fn;
use std::io;
use std::pin::Pin;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::io::AsyncWrite;
use tokio::net::TcpStream;
use tokio::net::tcp::{ReadHalf, WriteHalf};
use tokio::sync::watch;

/// Reusable copy buffers.
#[derive(Debug)]
pub struct BufferPool {
    size: usize,
    max_spare: usize,
    spare: Mutex<Vec<Box<[u8]>>>,
}

impl BufferPool {
    /// A pool of `size`-byte buffers keeping at most `max_spare` unused ones.
    pub fn new(size: usize, max_spare: usize) -> BufferPool {
        BufferPool {
            size,
            max_spare,
            spare: Mutex::new(Vec::new()),
        }
    }

    fn take(&self) -> Box<[u8]> {
        let reused = self
            .spare
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .pop();
        reused.unwrap_or_else(|| vec![0u8; self.size].into_boxed_slice())
    }

    fn give(&self, buffer: Box<[u8]>) {
        let mut spare = self
            .spare
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if spare.len() < self.max_spare {
            spare.push(buffer);
        }
    }
}

/// Bytes moved by one tunnel.
#[derive(Debug, Default)]
pub struct Traffic {
    /// From the sandbox to upstream.
    pub sent: AtomicU64,
    /// From upstream to the sandbox.
    pub received: AtomicU64,
}

impl Traffic {
    /// `(sent, received)`.
    pub fn totals(&self) -> (u64, u64) {
        (
            self.sent.load(Ordering::Relaxed),
            self.received.load(Ordering::Relaxed),
        )
    }
}

/// Copies both ways until both sides finished (each end of file is passed on as a half-close),
/// one side failed, or `stop` fires. Counts into `traffic`.
pub async fn run(
    client: &mut TcpStream,
    upstream: &mut TcpStream,
    pool: &BufferPool,
    traffic: &Traffic,
    mut stop: watch::Receiver<bool>,
) {
    let (client_read, mut client_write) = client.split();
    let (upstream_read, mut upstream_write) = upstream.split();
    let out = pump(&client_read, &mut upstream_write, pool, &traffic.sent);
    let back = pump(&upstream_read, &mut client_write, pool, &traffic.received);
    tokio::pin!(out, back);
    let (mut out_done, mut back_done) = (false, false);
    while !(out_done && back_done) {
        if *stop.borrow() {
            return;
        }
        tokio::select! {
            result = &mut out, if !out_done => {
                out_done = true;
                if result.is_err() {
                    return;
                }
            }
            result = &mut back, if !back_done => {
                back_done = true;
                if result.is_err() {
                    return;
                }
            }
            changed = stop.changed() => {
                if changed.is_err() {
                    return;
                }
            }
        }
    }
}

async fn pump(
    from: &ReadHalf<'_>,
    to: &mut WriteHalf<'_>,
    pool: &BufferPool,
    count: &AtomicU64,
) -> io::Result<()> {
    loop {
        from.readable().await?;
        let mut buffer = pool.take();
        let drained = loop {
            match from.try_read(&mut buffer) {
                Ok(0) => break Ok(true),
                Ok(n) => {
                    if let Err(e) = write_all(to, &buffer[..n]).await {
                        break Err(e);
                    }
                    count.fetch_add(u64::try_from(n).unwrap_or(u64::MAX), Ordering::Relaxed);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break Ok(false),
                Err(e) => break Err(e),
            }
        };
        pool.give(buffer);
        if drained? {
            // End of file: pass the half-close on; the other direction may still run.
            let _ = poll_fn(|cx| Pin::new(&mut *to).poll_shutdown(cx)).await;
            return Ok(());
        }
    }
}

/// Writes all of `data` (the socket is non-blocking: waits for room as needed).
pub async fn write_all(to: &WriteHalf<'_>, mut data: &[u8]) -> io::Result<()> {
    while !data.is_empty() {
        to.writable().await?;
        match to.try_write(data) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => data = &data[n..],
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// [`write_all`] on a whole stream.
pub async fn send(stream: &TcpStream, mut data: &[u8]) -> io::Result<()> {
    while !data.is_empty() {
        stream.writable().await?;
        match stream.try_write(data) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => data = &data[n..],
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
