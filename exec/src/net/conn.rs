//! One connection through the proxy: read the request (HTTP or SOCKS5), decide, maybe ask,
//! resolve and connect, answer, tunnel, record. The listener it came from is served by
//! [`super::listener`].

use std::io;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use bridle_policy::network::RequestHost;
use bridle_policy::{DecidedBy, Decision};
use tokio::net::TcpStream;
use tokio::sync::{OwnedSemaphorePermit, watch};
use tokio::time::{Instant, timeout_at};

use super::addr::{self, ConnectError};
use super::tunnel::{self, Traffic};
use super::{NetDecision, Shared, http, socks};
use crate::approvals::{ApprovalOutcome, ApprovalRequest};

/// Resolves once `stop` is set (or its sender is gone).
pub(super) async fn stopped(stop: &mut watch::Receiver<bool>) {
    loop {
        if *stop.borrow_and_update() {
            return;
        }
        if stop.changed().await.is_err() {
            return;
        }
    }
}

/// Reads what is available into `buf`, up to `limit` bytes in all; `Ok(0)` at end of file or
/// when the limit is reached.
async fn read_more(stream: &TcpStream, buf: &mut Vec<u8>, limit: usize) -> io::Result<usize> {
    loop {
        let room = limit.saturating_sub(buf.len()).min(8192);
        if room == 0 {
            return Ok(0);
        }
        stream.readable().await?;
        let len = buf.len();
        buf.resize(len + room, 0);
        match stream.try_read(&mut buf[len..]) {
            Ok(n) => {
                buf.truncate(len + n);
                return Ok(n);
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => buf.truncate(len),
            Err(e) => {
                buf.truncate(len);
                return Err(e);
            }
        }
    }
}

enum Read {
    More,
    Closed,
    TimedOut,
}

async fn read_until(
    stream: &TcpStream,
    buf: &mut Vec<u8>,
    limit: usize,
    deadline: Instant,
) -> Read {
    match timeout_at(deadline, read_more(stream, buf, limit)).await {
        Ok(Ok(n)) if n > 0 => Read::More,
        Ok(_) => Read::Closed,
        Err(_) => Read::TimedOut,
    }
}

pub(super) async fn connection(
    shared: Arc<Shared>,
    launch: u64,
    client: TcpStream,
    stop: watch::Receiver<bool>,
    _permit: OwnedSemaphorePermit,
) {
    let _ = client.set_nodelay(true);
    let deadline = Instant::now() + shared.config.handshake_timeout;
    let mut buf = Vec::with_capacity(512);
    if !matches!(
        read_until(&client, &mut buf, shared.config.max_head, deadline).await,
        Read::More
    ) {
        return;
    }
    let conn = Conn {
        shared: &shared,
        launch,
        client,
        stop,
        deadline,
    };
    match buf.first() {
        Some(&socks::VERSION) => conn.socks(buf).await,
        // SOCKS4 and 4a: not spoken; closing is the clearest answer.
        Some(4) => {}
        _ => conn.http(buf).await,
    }
}

struct Conn<'a> {
    shared: &'a Arc<Shared>,
    launch: u64,
    client: TcpStream,
    stop: watch::Receiver<bool>,
    deadline: Instant,
}

/// The outcome of deciding a connection.
enum Decided {
    Allow {
        record: NetDecision,
        pinned: Option<IpAddr>,
    },
    Deny(NetDecision),
}

impl Conn<'_> {
    async fn http(mut self, mut buf: Vec<u8>) {
        let limit = self.shared.config.max_head;
        let (request, head_len) = loop {
            match http::parse(&buf) {
                Ok(Some(parsed)) => break parsed,
                Ok(None) if buf.len() >= limit => {
                    let body = format!("bridle: the request head is larger than {limit} bytes");
                    refuse(&mut self.client, &http::response(431, &body)).await;
                    return;
                }
                Ok(None) => match read_until(&self.client, &mut buf, limit, self.deadline).await {
                    Read::More => {}
                    Read::Closed => return,
                    Read::TimedOut => {
                        let body = "bridle: the request head did not arrive in time";
                        refuse(&mut self.client, &http::response(408, body)).await;
                        return;
                    }
                },
                Err(refused) => {
                    let body = format!("bridle: {}", refused.why);
                    let _ =
                        tunnel::send(&self.client, &http::response(refused.status, &body)).await;
                    return;
                }
            }
        };
        let leftover = buf.split_off(head_len);
        drop(buf);
        let (host, port, forward) = match request {
            http::Request::Connect { host, port } => (host, port, None),
            http::Request::Forward { host, port, head } => (host, port, Some(head)),
        };
        let Some(decided) = self.decide(&host, port).await else {
            return;
        };
        let (mut record, pinned) = match decided {
            Decided::Deny(record) => {
                let body = format!("bridle: {}", record.reason);
                // Recorded (and, under `bridle exec`, printed) before the client hears of it.
                self.shared.record(self.launch, record);
                refuse(&mut self.client, &http::response(403, &body)).await;
                return;
            }
            Decided::Allow { record, pinned } => (record, pinned),
        };
        let upstream = match self.connect(&host, port, pinned, &mut record).await {
            Ok(upstream) => upstream,
            Err(status) => {
                let body = format!(
                    "bridle: {}",
                    record.error.as_deref().unwrap_or(&record.reason)
                );
                self.shared.record(self.launch, record);
                refuse(&mut self.client, &http::response(status, &body)).await;
                return;
            }
        };
        let traffic = Traffic::default();
        let first = match &forward {
            None => {
                if tunnel::send(&self.client, &http::response(200, ""))
                    .await
                    .is_err()
                {
                    self.shared.record(self.launch, record);
                    return;
                }
                leftover
            }
            Some(head) => [head.as_slice(), leftover.as_slice()].concat(),
        };
        self.finish(
            upstream_send(&upstream, &first, &traffic).await,
            &upstream,
            traffic,
            record,
        )
        .await;
    }

    async fn socks(mut self, mut buf: Vec<u8>) {
        const LIMIT: usize = 600;
        let greeting = loop {
            match socks::greeting(&buf) {
                Ok(Some(len)) => break len,
                Ok(None) => {
                    if !matches!(
                        read_until(&self.client, &mut buf, LIMIT, self.deadline).await,
                        Read::More
                    ) {
                        return;
                    }
                }
                Err(_) => {
                    refuse(&mut self.client, &socks::METHOD_NONE).await;
                    return;
                }
            }
        };
        if tunnel::send(&self.client, &socks::METHOD_NO_AUTH)
            .await
            .is_err()
        {
            return;
        }
        buf.drain(..greeting);
        let (host, port, len) = loop {
            match socks::request(&buf) {
                Ok(Some(request)) => break request,
                Ok(None) => {
                    if !matches!(
                        read_until(&self.client, &mut buf, LIMIT, self.deadline).await,
                        Read::More
                    ) {
                        return;
                    }
                }
                Err(refused) => {
                    if let Some(code) = refused.reply {
                        refuse(&mut self.client, &socks::answer(code)).await;
                    }
                    return;
                }
            }
        };
        let leftover = buf.split_off(len);
        drop(buf);
        let Some(decided) = self.decide(&host, port).await else {
            return;
        };
        let (mut record, pinned) = match decided {
            Decided::Deny(record) => {
                self.shared.record(self.launch, record);
                refuse(&mut self.client, &socks::answer(socks::reply::NOT_ALLOWED)).await;
                return;
            }
            Decided::Allow { record, pinned } => (record, pinned),
        };
        let upstream = match self.connect(&host, port, pinned, &mut record).await {
            Ok(upstream) => upstream,
            Err(status) => {
                let code = match (status, &record.decision) {
                    (_, Decision::Deny) => socks::reply::NOT_ALLOWED,
                    (504, _) => socks::reply::TIMED_OUT,
                    (_, _)
                        if record
                            .error
                            .as_deref()
                            .is_some_and(|e| e.contains("refused")) =>
                    {
                        socks::reply::REFUSED
                    }
                    (_, _)
                        if record
                            .error
                            .as_deref()
                            .is_some_and(|e| e.contains("resolve")) =>
                    {
                        socks::reply::HOST_UNREACHABLE
                    }
                    _ => socks::reply::FAILURE,
                };
                self.shared.record(self.launch, record);
                refuse(&mut self.client, &socks::answer(code)).await;
                return;
            }
        };
        if tunnel::send(&self.client, &socks::answer(socks::reply::OK))
            .await
            .is_err()
        {
            self.shared.record(self.launch, record);
            return;
        }
        let traffic = Traffic::default();
        let sent = upstream_send(&upstream, &leftover, &traffic).await;
        self.finish(sent, &upstream, traffic, record).await;
    }

    /// Tunnels (when the first bytes went through) and records the connection with its bytes.
    async fn finish(
        self,
        first_sent: io::Result<()>,
        upstream: &TcpStream,
        traffic: Traffic,
        mut record: NetDecision,
    ) {
        if first_sent.is_ok() {
            tunnel::run(
                &self.client,
                upstream,
                (&self.shared.pool, &self.shared.pipes),
                &traffic,
                self.stop.clone(),
            )
            .await;
        }
        (record.sent, record.received) = traffic.totals();
        self.shared.record(self.launch, record);
    }

    /// Decides `host:port`; asks when the policy says so. `None` when the sandbox ended while
    /// a person was being asked.
    async fn decide(&mut self, host: &RequestHost, port: u16) -> Option<Decided> {
        let shown = host.to_string();
        let verdict = self.shared.plan.decide_connect(&shown, port);
        let record = |decision, by: String, reason: String| NetDecision {
            host: shown.clone(),
            port,
            decision,
            by,
            reason,
            error: None,
            connections: 1,
            sent: 0,
            received: 0,
            between_calls: false,
        };
        let pinned = || self.shared.plan.resolve_pin(&shown).map(|pin| pin.address);
        match verdict.decision {
            Decision::Deny => Some(Decided::Deny(record(
                Decision::Deny,
                by_text(&verdict.by),
                verdict.reason,
            ))),
            Decision::Allow => Some(Decided::Allow {
                record: record(Decision::Allow, by_text(&verdict.by), verdict.reason),
                pinned: pinned(),
            }),
            Decision::Ask => {
                let asked = ask(self.shared, &shown, port, &verdict.reason);
                let mut stop = self.stop.clone();
                let (decision, by) = tokio::select! {
                    answer = asked => answer,
                    () = stopped(&mut stop) => return None,
                };
                let target = format!("{shown}:{port}");
                let hint = verdict.reason.split_once("; ").map_or("", |(_, hint)| hint);
                Some(match decision {
                    Decision::Allow => Decided::Allow {
                        record: record(
                            Decision::Allow,
                            by.clone(),
                            format!(
                                "connection to `{target}` allowed: not in the allow-list, {by} (asked once per session)"
                            ),
                        ),
                        pinned: pinned(),
                    },
                    Decision::Ask | Decision::Deny => Decided::Deny(record(
                        Decision::Deny,
                        by.clone(),
                        format!(
                            "connection to `{target}` denied: not in the allow-list, and {by}; {hint}"
                        ),
                    )),
                })
            }
        }
    }

    /// Resolves and connects; on failure fills in the record (an address refusal turns it
    /// into a denial) and returns the HTTP status to answer.
    async fn connect(
        &self,
        host: &RequestHost,
        port: u16,
        pinned: Option<IpAddr>,
        record: &mut NetDecision,
    ) -> Result<TcpStream, u16> {
        match addr::connect(host, port, pinned, self.shared.config.connect_timeout).await {
            Ok((upstream, _)) => {
                let _ = upstream.set_nodelay(true);
                Ok(upstream)
            }
            Err(e @ ConnectError::Forbidden(ip, why)) => {
                record.decision = Decision::Deny;
                record.by = format!("address check: {why} address {ip}");
                record.reason = format!(
                    "connection to `{host}:{port}` refused: {}; only a name the profile pins in `network.resolve` may reach an internal address",
                    e.describe(host)
                );
                Err(403)
            }
            Err(e) => {
                record.error = Some(e.describe(host));
                Err(match e {
                    ConnectError::TimedOut => 504,
                    ConnectError::Forbidden(..)
                    | ConnectError::Unresolved(_)
                    | ConnectError::Failed(_) => 502,
                })
            }
        }
    }
}

/// Answers a refused request and closes without a reset: the answer is sent, our side is shut
/// down, and what the client still sends is read and dropped for a moment (closing with unread
/// input would reset the connection, and the client might never see the answer).
async fn refuse(client: &mut TcpStream, answer: &[u8]) {
    if tunnel::send(client, answer).await.is_err() {
        return;
    }
    let _ = std::future::poll_fn(|cx| {
        tokio::io::AsyncWrite::poll_shutdown(std::pin::Pin::new(&mut *client), cx)
    })
    .await;
    let client = &*client;
    let drain = async {
        let mut scratch = vec![0u8; 4096];
        let mut left: usize = 1 << 20;
        loop {
            if client.readable().await.is_err() {
                return;
            }
            match client.try_read(&mut scratch) {
                Ok(0) => return,
                Ok(n) => {
                    left = left.saturating_sub(n);
                    if left == 0 {
                        return;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(_) => return,
            }
        }
    };
    let _ = tokio::time::timeout(Duration::from_millis(500), drain).await;
}

async fn upstream_send(upstream: &TcpStream, data: &[u8], traffic: &Traffic) -> io::Result<()> {
    tunnel::send(upstream, data).await?;
    traffic.sent.fetch_add(
        u64::try_from(data.len()).unwrap_or(u64::MAX),
        std::sync::atomic::Ordering::Relaxed,
    );
    Ok(())
}

/// What decided, in a few words.
fn by_text(by: &DecidedBy) -> String {
    match by {
        DecidedBy::NetworkEntry {
            list,
            entry,
            origin,
        } => format!("`{}` entry `{entry}` ({origin})", list.key()),
        DecidedBy::NetworkSetting { network, origin } => format!("network {network} ({origin})"),
        DecidedBy::Default => "not in the allow-list".to_owned(),
        DecidedBy::Rule { id, .. } | DecidedBy::Hidden { rule: id, .. } => format!("rule `{id}`"),
        DecidedBy::ProtectedPath { .. }
        | DecidedBy::MaskedPath { .. }
        | DecidedBy::WritableRoot { .. }
        | DecidedBy::OutsideWritableRoots
        | DecidedBy::Mode { .. }
        | DecidedBy::AtExec { .. } => "the policy".to_owned(),
    }
}

/// Asks whoever can answer about `host:port`, once per session: an approval or a rejection is
/// remembered; a question nobody could answer is not. Questions come one at a time.
async fn ask(shared: &Arc<Shared>, host: &str, port: u16, reason: &str) -> (Decision, String) {
    let key = (host.to_owned(), port);
    if let Some(answer) = remembered(shared, &key) {
        return answer;
    }
    let shared = Arc::clone(shared);
    let reason = reason.to_owned();
    let question = tokio::task::spawn_blocking(move || {
        let _one_at_a_time = shared
            .asking
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(answer) = remembered(&shared, &key) {
            return answer;
        }
        let request = ApprovalRequest {
            tool: "network".to_owned(),
            arguments: serde_json::json!({ "connect": format!("{}:{}", key.0, key.1) }),
            reason,
            justification: None,
            escalation: None,
            call_id: None,
        };
        let outcome = shared.answerer.answer(&request);
        let who = shared.answerer.who();
        let decision = match outcome {
            ApprovalOutcome::AllowedOnce => Decision::Allow,
            ApprovalOutcome::Rejected
            | ApprovalOutcome::Cancelled
            | ApprovalOutcome::Withdrawn
            | ApprovalOutcome::Unavailable => Decision::Deny,
        };
        if matches!(
            outcome,
            ApprovalOutcome::AllowedOnce | ApprovalOutcome::Rejected
        ) {
            shared
                .answered
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .insert(key, decision);
        }
        let by = match outcome {
            ApprovalOutcome::AllowedOnce => format!("approved by {who}"),
            ApprovalOutcome::Rejected => format!("rejected by {who}"),
            ApprovalOutcome::Cancelled => "the approval question was cancelled".to_owned(),
            ApprovalOutcome::Withdrawn => "the approval question was withdrawn".to_owned(),
            ApprovalOutcome::Unavailable => format!("approval unavailable: {who}"),
        };
        (decision, by)
    });
    question
        .await
        .unwrap_or_else(|_| (Decision::Deny, "the approval question failed".to_owned()))
}

fn remembered(shared: &Shared, key: &(String, u16)) -> Option<(Decision, String)> {
    let answered = shared
        .answered
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    answered.get(key).map(|d| {
        let how = match d {
            Decision::Allow => "approved",
            Decision::Ask | Decision::Deny => "rejected",
        };
        (*d, format!("{how} earlier in this session"))
    })
}
