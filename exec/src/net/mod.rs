//! bridle's network proxy: what network `allow-list` connections go through.
//!
//! It runs in bridle's own process, outside every sandbox, on a small tokio runtime. A sandbox
//! reaches it only through its relay listener (`bridle_sandbox::relay`): the launcher opens it on
//! the sandbox's loopback and hands it over a socketpair, and [`NetProxy::attach`] serves it.
//! No address on the host leads to the proxy, so no other process can use it (see the relay's
//! docs for why that makes per-session credentials hold without a token).
//!
//! Per connection: the client speaks HTTP (`CONNECT host:port`, or a plain request with an
//! absolute URI) or SOCKS5 (CONNECT); the proxy asks [`Plan::decide_connect`] (the one
//! decision function, which `bridle policy explain connect` also asks), asks a person once per
//! session for a host no entry matches when the approval policy is `ask` and someone can
//! answer, resolves the name itself (the sandbox has no DNS), refuses loopback, private,
//! link-local, multicast and metadata addresses unless the name is pinned by `network.resolve`,
//! connects, and copies bytes both ways. TLS is tunnelled, never looked into. A denied HTTP
//! request gets `403` with a body naming the host and the profile key to change; SOCKS gets
//! "not allowed by ruleset".
//!
//! Bounded: at most [`ProxyConfig::max_connections`] connections are served at once (more wait
//! in the relay's listen queue), a request head is at most [`ProxyConfig::max_head`] bytes and
//! must arrive within [`ProxyConfig::handshake_timeout`], copy buffers come from a pool and only
//! busy connections hold one.
//!
//! Every decision is recorded for the launch it came from ([`Attachment`]): host, port,
//! allow or deny, what decided, bytes each way. The tools put them in the call's result and the
//! session log; `bridle exec` prints denials as they happen.

mod addr;
mod conn;
mod http;
mod listener;
mod socks;
mod tunnel;

use std::collections::HashMap;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use bridle_policy::{Decision, Plan};
use serde::Serialize;
use tokio::sync::{Semaphore, watch};

use crate::approvals::Answerer;
use crate::error::ExecError;

pub use addr::forbidden;

/// Limits of one proxy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProxyConfig {
    /// Connections served at once, across the proxy's sandboxes.
    pub max_connections: usize,
    /// How long a client has to send its whole request head (HTTP) or handshake (SOCKS).
    pub handshake_timeout: Duration,
    /// How long resolving and connecting upstream may take.
    pub connect_timeout: Duration,
    /// The largest request head accepted (HTTP `431` beyond it).
    pub max_head: usize,
    /// The size of one copy buffer (used when no splice pipe can be had).
    pub buffer_size: usize,
    /// The runtime's worker threads.
    pub worker_threads: usize,
}

impl Default for ProxyConfig {
    fn default() -> Self {
        ProxyConfig {
            max_connections: 256,
            handshake_timeout: Duration::from_secs(10),
            connect_timeout: Duration::from_secs(15),
            max_head: 32 * 1024,
            buffer_size: 64 * 1024,
            worker_threads: 2,
        }
    }
}

/// One network decision, with the connections it covered: what `net/decision` events, tool
/// results and `bridle exec`'s denial lines report. Connections to the same host and port,
/// decided the same way by the same thing, are counted together.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NetDecision {
    /// The host as the client named it (lower-case; IPv6 in brackets).
    pub host: String,
    /// The port.
    pub port: u16,
    /// `allow` or `deny` (a question has been answered by then).
    pub decision: Decision,
    /// What decided: the entry, the missing entry, the approval, the address check.
    pub by: String,
    /// One sentence for the person and the model, naming the profile key to change.
    pub reason: String,
    /// An allowed connection that could not be made: why.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// How many connections this covers.
    pub connections: u64,
    /// Bytes from the sandbox to the host.
    pub sent: u64,
    /// Bytes from the host to the sandbox.
    pub received: u64,
    /// Decided, or ended, while no call read the persistent terminal (its processes outlive
    /// their calls): reported with the next call, or when the session ends, and not that
    /// call's doing.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub between_calls: bool,
}

impl NetDecision {
    /// `bridle: network: ...` as `bridle exec` prints a denial.
    pub fn denial_line(&self) -> String {
        format!(
            "network: denied {} ({})",
            self.target(),
            self.reason_after_target()
        )
    }

    /// `host:port`.
    pub fn target(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }

    /// The reason without its leading "connection to `host:port` denied" when it has one.
    fn reason_after_target(&self) -> &str {
        let reason = self.reason.as_str();
        reason
            .split_once(" denied: ")
            .or_else(|| reason.split_once(" refused: "))
            .map_or(reason, |(_, rest)| rest)
    }

    fn same_kind(&self, other: &NetDecision) -> bool {
        self.host == other.host
            && self.port == other.port
            && self.decision == other.decision
            && self.by == other.by
            && self.error == other.error
    }
}

/// Called for every decision as it is recorded (a denial right away, an allowed connection when
/// it ends), on the proxy's own threads: it must not block (no lock another thread may hold for
/// long, such as `std::io::stderr()`'s). `bridle exec` prints denials with it.
pub type DecisionObserver = dyn Fn(&NetDecision) + Send + Sync;

/// The proxy of one session (`bridle run`, `bridle tool`) or run (`bridle exec`).
pub struct NetProxy {
    runtime: Option<tokio::runtime::Runtime>,
    shared: Arc<Shared>,
}

impl std::fmt::Debug for NetProxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NetProxy")
            .field("config", &self.shared.config)
            .finish_non_exhaustive()
    }
}

pub(crate) struct Shared {
    pub(crate) plan: Plan,
    pub(crate) config: ProxyConfig,
    pub(crate) answerer: Arc<dyn Answerer>,
    /// Answers given this session, by `(host, port)`: approved or rejected hosts are not asked
    /// again.
    pub(crate) answered: Mutex<HashMap<(String, u16), Decision>>,
    /// Held while a person is asked, so questions come one at a time.
    pub(crate) asking: Mutex<()>,
    pub(crate) permits: Arc<Semaphore>,
    pub(crate) pool: tunnel::BufferPool,
    pub(crate) pipes: tunnel::PipePool,
    launches: Mutex<HashMap<u64, Vec<NetDecision>>>,
    next_launch: AtomicU64,
    observer: OnceLock<Box<DecisionObserver>>,
}

impl Shared {
    /// Adds a decision to its launch's record (merged with an earlier one of the same kind).
    pub(crate) fn record(&self, launch: u64, decision: NetDecision) {
        if let Some(observer) = self.observer.get() {
            observer(&decision);
        }
        let mut launches = self
            .launches
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let list = launches.entry(launch).or_default();
        match list.iter_mut().find(|d| d.same_kind(&decision)) {
            Some(known) => {
                known.connections += decision.connections;
                known.sent += decision.sent;
                known.received += decision.received;
            }
            None => list.push(decision),
        }
    }

    fn take(&self, launch: u64, remove: bool) -> Vec<NetDecision> {
        let mut launches = self
            .launches
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if remove {
            launches.remove(&launch).unwrap_or_default()
        } else {
            launches
                .get_mut(&launch)
                .map(std::mem::take)
                .unwrap_or_default()
        }
    }
}

impl NetProxy {
    /// Starts a proxy deciding by `plan` (its allow-list and approval policy), asking
    /// `answerer` when a host no entry matches may be asked.
    pub fn start(
        plan: &Plan,
        answerer: Arc<dyn Answerer>,
        config: ProxyConfig,
    ) -> Result<NetProxy, ExecError> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(config.worker_threads.max(1))
            .max_blocking_threads(8)
            .thread_name("bridle-netproxy")
            .enable_io()
            .enable_time()
            .build()
            .map_err(|source| ExecError::ProxyStart { source })?;
        let shared = Arc::new(Shared {
            plan: plan.clone(),
            permits: Arc::new(Semaphore::new(config.max_connections.max(1))),
            pool: tunnel::BufferPool::new(config.buffer_size, 32),
            pipes: tunnel::PipePool::new(32),
            config,
            answerer,
            answered: Mutex::new(HashMap::new()),
            asking: Mutex::new(()),
            launches: Mutex::new(HashMap::new()),
            next_launch: AtomicU64::new(1),
            observer: OnceLock::new(),
        });
        Ok(NetProxy {
            runtime: Some(runtime),
            shared,
        })
    }

    /// Sets the observer every decision is reported to (once; later calls are ignored).
    pub fn observe(&self, observer: Box<DecisionObserver>) {
        let _ = self.shared.observer.set(observer);
    }

    /// Serves the relay listener that a launch passed on `channel` (bridle's end of
    /// `bridle_sandbox::relay::channel`), after the launch reported ready. The sandbox's
    /// connections are served until its end of the channel closes (the sandbox is gone) or the
    /// attachment is finished or dropped.
    pub fn attach(&self, channel: UnixStream) -> Result<Attachment, ExecError> {
        let attach_error = |source| ExecError::ProxyAttach { source };
        let runtime = self.runtime.as_ref().ok_or_else(|| {
            attach_error(std::io::Error::other("the network proxy was shut down"))
        })?;
        let port = self
            .shared
            .plan
            .spec
            .allow_list
            .as_ref()
            .map_or(bridle_policy::RELAY_PORT, |l| l.relay_port);
        let listener =
            bridle_sandbox::relay::receive_listener(&channel, port).map_err(attach_error)?;
        channel.set_nonblocking(true).map_err(attach_error)?;
        let id = self.shared.next_launch.fetch_add(1, Ordering::Relaxed);
        let (stop_tx, stop_rx) = watch::channel(false);
        let stop_tx = Arc::new(stop_tx);
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        let (listener, channel) = {
            let _guard = runtime.enter();
            (
                tokio::net::TcpListener::from_std(listener).map_err(attach_error)?,
                tokio::net::UnixStream::from_std(channel).map_err(attach_error)?,
            )
        };
        runtime.spawn(listener::serve_launch(listener::Launch {
            shared: Arc::clone(&self.shared),
            id,
            listener,
            channel,
            stop_rx,
            stop_tx: Arc::clone(&stop_tx),
            done: done_tx,
        }));
        Ok(Attachment {
            id,
            shared: Arc::clone(&self.shared),
            stop: stop_tx,
            done: Some(done_rx),
        })
    }

    /// Stops the proxy now: every relay listener is closed (connections inside the sandboxes
    /// then fail) and every connection through it ends.
    pub fn shutdown(mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

impl Drop for NetProxy {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            // A question a person has not answered yet must not hold bridle up.
            runtime.shutdown_background();
        }
    }
}

/// One sandbox served by the proxy, and the decisions its connections got.
pub struct Attachment {
    id: u64,
    shared: Arc<Shared>,
    stop: Arc<watch::Sender<bool>>,
    done: Option<std::sync::mpsc::Receiver<()>>,
}

impl std::fmt::Debug for Attachment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Attachment")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

impl Attachment {
    /// The decisions recorded since the last call (a long-lived sandbox, such as the
    /// terminal's, reports them per tool call).
    pub fn take_decisions(&self) -> Vec<NetDecision> {
        self.shared.take(self.id, false)
    }

    /// Stops serving this sandbox (it has ended, or is about to), waits up to `grace` for its
    /// connections to finish their accounting, and returns the decisions not yet taken.
    pub fn finish(mut self, grace: Duration) -> Vec<NetDecision> {
        let _ = self.stop.send(true);
        if let Some(done) = self.done.take() {
            let _ = done.recv_timeout(grace);
        }
        self.shared.take(self.id, true)
    }
}

impl Drop for Attachment {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
        if self.done.is_some() {
            self.shared.take(self.id, true);
        }
    }
}

/// Gives `launch` its relay channel when its network is `allow-list` (returning bridle's
/// end, for [`attach_launch`] once the launch is running). Without a proxy such a launch is
/// refused (`G-NET`): it must never run with a network nobody decides for.
pub fn prepare_launch(
    launch: bridle_sandbox::Launch,
    network: bridle_policy::Network,
    proxy: Option<&NetProxy>,
) -> Result<(bridle_sandbox::Launch, Option<UnixStream>), bridle_sandbox::Refusal> {
    if network != bridle_policy::Network::AllowList {
        return Ok((launch, None));
    }
    if proxy.is_none() {
        return Err(net_refusal(
            "network allow-list: this command has no network proxy to connect through",
        ));
    }
    let (outside, inside) = bridle_sandbox::relay::channel().map_err(|e| {
        net_refusal(format!(
            "network allow-list: creating the relay channel: {e}"
        ))
    })?;
    Ok((launch.with_network_relay(inside), Some(outside)))
}

/// Serves a running launch's relay (see [`prepare_launch`]). An error means the launch runs
/// but the proxy cannot serve it: stop it.
pub fn attach_launch(
    proxy: Option<&NetProxy>,
    relay: Option<UnixStream>,
) -> Result<Option<Attachment>, bridle_sandbox::Refusal> {
    match (proxy, relay) {
        (Some(proxy), Some(relay)) => proxy
            .attach(relay)
            .map(Some)
            .map_err(|e| net_refusal(format!("network allow-list: {e}"))),
        (None, Some(_)) => Err(net_refusal(
            "network allow-list: the relay has no proxy to serve it",
        )),
        (_, None) => Ok(None),
    }
}

/// How many decisions a tool result lists before it says how many more the log has.
const SUMMARY_LINES: usize = 20;

/// The lines a tool result ends with: one per decision, `[network: ...]`.
pub fn summary(decisions: &[NetDecision]) -> String {
    let mut out = String::new();
    for d in decisions.iter().take(SUMMARY_LINES) {
        let count = if d.connections == 1 {
            "1 connection".to_owned()
        } else {
            format!("{} connections", d.connections)
        };
        let line = match (d.decision, &d.error) {
            (Decision::Allow, None) => format!(
                "allowed {} by {} ({count}, {} bytes sent, {} received)",
                d.target(),
                d.by,
                d.sent,
                d.received
            ),
            (Decision::Allow, Some(error)) => {
                format!("allowed {} by {}, but {error} ({count})", d.target(), d.by)
            }
            (Decision::Ask | Decision::Deny, _) => format!(
                "denied {} ({}; {count})",
                d.target(),
                d.reason_after_target()
            ),
        };
        let when = if d.between_calls {
            "between calls: "
        } else {
            ""
        };
        out.push_str(&format!("\n[network: {when}{line}]"));
    }
    if decisions.len() > SUMMARY_LINES {
        out.push_str(&format!(
            "\n[network: {} more decisions are in the session log]",
            decisions.len() - SUMMARY_LINES
        ));
    }
    out
}

/// What a client that did not use the proxy under the allow-list is told: the proxy is the
/// only way out, names do not resolve inside, and which variables to honour (`relay_port` is
/// where the sandbox's relay listens).
pub fn proxy_bypass_attribution(relay_port: u16) -> String {
    format!(
        "the network is an allow-list reached only through bridle's proxy, and there is no DNS \
         inside the sandbox: this client seems not to use the proxy; it must honour \
         HTTPS_PROXY/HTTP_PROXY (http://127.0.0.1:{relay_port}) or ALL_PROXY \
         (socks5h://127.0.0.1:{relay_port})"
    )
}

/// The first denial among `decisions`.
pub fn first_denial(decisions: &[NetDecision]) -> Option<&NetDecision> {
    decisions.iter().find(|d| d.decision != Decision::Allow)
}

fn net_refusal(cause: impl Into<String>) -> bridle_sandbox::Refusal {
    bridle_sandbox::Refusal {
        guarantee: Some(bridle_policy::Guarantee::Net),
        cause: cause.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decision(reason: &str) -> NetDecision {
        NetDecision {
            host: "evil.test".into(),
            port: 443,
            decision: Decision::Deny,
            by: "not in the allow-list".into(),
            reason: reason.into(),
            error: None,
            connections: 1,
            sent: 0,
            received: 0,
            between_calls: false,
        }
    }

    #[test]
    fn the_denial_line_says_what_decided() {
        let d = decision(
            "connection to `evil.test:443` denied: not in the allow-list; add `evil.test` to `network.allow` in the profile",
        );
        assert_eq!(
            d.denial_line(),
            "network: denied evil.test:443 (not in the allow-list; add `evil.test` to `network.allow` in the profile)"
        );
    }
}
