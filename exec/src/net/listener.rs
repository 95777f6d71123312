//! Serving one sandbox's relay listener: a task per accepted connection ([`super::conn`]),
//! until the sandbox's end of the channel closes or the attachment stops.

use std::io;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, UnixStream};
use tokio::sync::watch;

use super::Shared;
use super::conn::{connection, stopped};

/// What [`serve_launch`] needs.
pub(crate) struct Launch {
    pub shared: Arc<Shared>,
    pub id: u64,
    pub listener: TcpListener,
    pub channel: UnixStream,
    pub stop_rx: watch::Receiver<bool>,
    pub stop_tx: Arc<watch::Sender<bool>>,
    pub done: std::sync::mpsc::Sender<()>,
}

/// Accepts the sandbox's connections (one permit each, so a flood waits in the listen queue)
/// until the sandbox's end of the channel closes or the attachment stops; then closes the
/// listener, stops the sandbox's connections and reports done.
pub(crate) async fn serve_launch(launch: Launch) {
    let Launch {
        shared,
        id,
        listener,
        channel,
        mut stop_rx,
        stop_tx,
        done,
    } = launch;
    let mut tasks = tokio::task::JoinSet::new();
    loop {
        while tasks.try_join_next().is_some() {}
        let permit = tokio::select! {
            biased;
            () = stopped(&mut stop_rx) => break,
            () = closed(&channel) => break,
            permit = Arc::clone(&shared.permits).acquire_owned() => match permit {
                Ok(permit) => permit,
                Err(_) => break,
            },
        };
        let accepted = tokio::select! {
            biased;
            () = stopped(&mut stop_rx) => break,
            () = closed(&channel) => break,
            accepted = listener.accept() => accepted,
        };
        match accepted {
            Ok((stream, _)) => {
                tasks.spawn(connection(
                    Arc::clone(&shared),
                    id,
                    stream,
                    stop_rx.clone(),
                    permit,
                ));
            }
            // Out of descriptors or a connection reset before it was accepted: try again.
            Err(e) => {
                tracing::debug!("network proxy: accept: {e}");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }
    drop(listener);
    let _ = stop_tx.send(true);
    while tasks.join_next().await.is_some() {}
    let _ = done.send(());
}

/// Resolves once the sandbox's end of the relay channel is closed.
async fn closed(channel: &UnixStream) {
    let mut scratch = [0u8; 16];
    loop {
        if channel.readable().await.is_err() {
            return;
        }
        match channel.try_read(&mut scratch) {
            Ok(0) => return,
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(_) => return,
        }
    }
}
