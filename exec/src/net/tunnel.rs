//! Copying bytes both ways between the sandbox's side of a connection and the upstream one.
//!
//! Bytes move inside the kernel (`splice` from one socket into a pipe and from the pipe into the
//! other), never through the proxy's memory. Pipes (and, when none can be had, copy buffers)
//! come from pools and are held only while a direction has data to move, so an idle connection
//! holds neither (its cost is two sockets and a small task), and what busy ones hold is bounded
//! by the connection limit times two.

use std::io;
use std::os::fd::AsFd;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use bridle_sandbox::relay::SplicePipe;
use tokio::io::Interest;
use tokio::net::TcpStream;
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

/// Reusable splice pipes (only empty ones are kept).
#[derive(Debug)]
pub struct PipePool {
    max_spare: usize,
    spare: Mutex<Vec<SplicePipe>>,
}

impl PipePool {
    /// A pool keeping at most `max_spare` unused pipes.
    pub fn new(max_spare: usize) -> PipePool {
        PipePool {
            max_spare,
            spare: Mutex::new(Vec::new()),
        }
    }

    fn take(&self) -> io::Result<SplicePipe> {
        let reused = self
            .spare
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .pop();
        match reused {
            Some(pipe) => Ok(pipe),
            None => SplicePipe::new(),
        }
    }

    fn give(&self, pipe: SplicePipe) {
        let mut spare = self
            .spare
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if pipe.held() == 0 && spare.len() < self.max_spare {
            spare.push(pipe);
        }
    }
}

/// Copies both ways until both sides finished (each end of file is passed on as a half-close),
/// one side failed, or `stop` fires. Counts into `traffic`. Bytes move with `splice` through a
/// pipe (never through the proxy's memory); when no pipe can be had, through a pooled buffer.
pub async fn run(
    client: &TcpStream,
    upstream: &TcpStream,
    pools: (&BufferPool, &PipePool),
    traffic: &Traffic,
    mut stop: watch::Receiver<bool>,
) {
    let out = pump(client, upstream, pools, &traffic.sent);
    let back = pump(upstream, client, pools, &traffic.received);
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
    from: &TcpStream,
    to: &TcpStream,
    (buffers, pipes): (&BufferPool, &PipePool),
    count: &AtomicU64,
) -> io::Result<()> {
    loop {
        from.readable().await?;
        let ended = match pipes.take() {
            Ok(mut pipe) => {
                let ended = splice_available(from, to, &mut pipe, count).await;
                pipes.give(pipe);
                ended?
            }
            Err(_) => copy_available(from, to, buffers, count).await?,
        };
        if ended {
            // End of file: pass the half-close on; the other direction may still run.
            let _ = bridle_sandbox::relay::shutdown_write(to.as_fd());
            return Ok(());
        }
    }
}

/// Moves what `from` has through `pipe` into `to`; `Ok(true)` at end of file.
async fn splice_available(
    from: &TcpStream,
    to: &TcpStream,
    pipe: &mut SplicePipe,
    count: &AtomicU64,
) -> io::Result<bool> {
    loop {
        match from.try_io(Interest::READABLE, || pipe.fill(from.as_fd())) {
            Ok(0) => return Ok(true),
            Ok(n) => count.fetch_add(u64::try_from(n).unwrap_or(u64::MAX), Ordering::Relaxed),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
            Err(e) => return Err(e),
        };
        while pipe.held() > 0 {
            match to.try_io(Interest::WRITABLE, || pipe.drain(to.as_fd())) {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => to.writable().await?,
                Err(e) => return Err(e),
            }
        }
    }
}

/// Copies what `from` has into `to` through a pooled buffer; `Ok(true)` at end of file.
async fn copy_available(
    from: &TcpStream,
    to: &TcpStream,
    pool: &BufferPool,
    count: &AtomicU64,
) -> io::Result<bool> {
    let mut buffer = pool.take();
    let result = loop {
        match from.try_read(&mut buffer) {
            Ok(0) => break Ok(true),
            Ok(n) => {
                if let Err(e) = send(to, &buffer[..n]).await {
                    break Err(e);
                }
                count.fetch_add(u64::try_from(n).unwrap_or(u64::MAX), Ordering::Relaxed);
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break Ok(false),
            Err(e) => break Err(e),
        }
    };
    pool.give(buffer);
    result
}

/// Writes all of `data` (the socket is non-blocking: waits for room as needed).
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
