//! Harness for `bridle acp`: the official SDK's client side drives the real binary over real
//! pipes (the SDK spawns it), with a scripted model; every wait is bounded so a hang fails.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    InitializeRequest, NewSessionRequest, NewSessionResponse, RequestPermissionOutcome,
    RequestPermissionRequest, RequestPermissionResponse, SelectedPermissionOutcome,
    SessionNotification, SessionUpdate,
};
use agent_client_protocol::{AcpAgent, AcpAgentConfig, Agent, Client, LineDirection};

use super::support::{ExecEnv, path_str};

/// How long one client conversation may take before the test fails as a hang.
pub const CONVERSATION: Duration = Duration::from_secs(60);

/// What the client answers to `session/request_permission`, in order (then: cancelled).
#[derive(Debug, Clone)]
pub enum Reply {
    Option(&'static str),
    Cancelled,
    /// No answer for [`HELD`] (then cancelled): the question stays open meanwhile.
    Held,
}

/// How long a [`Reply::Held`] question stays unanswered.
pub const HELD: std::time::Duration = std::time::Duration::from_secs(20);

/// What one conversation saw.
#[derive(Debug, Default)]
pub struct Seen {
    pub updates: Vec<SessionUpdate>,
    pub asked: Vec<RequestPermissionRequest>,
    /// Every line the agent wrote on stdout.
    pub stdout: Vec<String>,
    pub stderr: Vec<String>,
}

/// The shared record of a conversation.
#[derive(Clone, Default)]
pub struct Record(pub Arc<Mutex<Seen>>);

impl Record {
    pub fn updates(&self) -> Vec<SessionUpdate> {
        self.0.lock().unwrap().updates.clone()
    }
}

/// Writes `script` as the model's and returns the `bridle acp` agent the SDK spawns.
pub fn agent(e: &ExecEnv, profile: Option<&str>, script: &str, record: &Record) -> AcpAgent {
    let file = e.home.join("script.yaml");
    std::fs::write(&file, script).unwrap();
    let mut config = AcpAgentConfig::new(env!("CARGO_BIN_EXE_bridle"))
        .env("HOME", path_str(&e.home))
        .env("PATH", "/usr/local/bin:/usr/bin:/bin");
    if let Some(p) = profile {
        config = config.arg("--profile").arg(p);
    }
    config = config
        .arg("acp")
        .arg("--model")
        .arg(format!("script:{}", path_str(&file)))
        .arg("--session-dir")
        .arg(path_str(&sessions(e)));
    let record = record.clone();
    AcpAgent::new(config).with_debug(move |line, direction| {
        let mut seen = record.0.lock().unwrap();
        match direction {
            LineDirection::Stdout => seen.stdout.push(line.to_owned()),
            LineDirection::Stderr => seen.stderr.push(line.to_owned()),
            LineDirection::Stdin => {}
        }
    })
}

pub fn sessions(e: &ExecEnv) -> PathBuf {
    e.home.join("sessions")
}

/// Runs `body` as the client of `agent`, recording updates and answering permission requests
/// with `replies`; fails when the conversation does not end within [`CONVERSATION`].
pub fn converse<T: Send + 'static>(
    agent: AcpAgent,
    record: &Record,
    replies: Vec<Reply>,
    body: impl AsyncFnOnce(ConnectionTo<Agent>) -> Result<T, agent_client_protocol::Error>,
) -> T {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let replies = Arc::new(Mutex::new(VecDeque::from(replies)));
    let updates = record.clone();
    let asked = record.clone();
    let result = runtime.block_on(async move {
        let client = Client
            .v1()
            .on_receive_notification(
                async move |n: SessionNotification, _cx| {
                    updates.0.lock().unwrap().updates.push(n.update);
                    Ok(())
                },
                agent_client_protocol::on_receive_notification!(),
            )
            .on_receive_request(
                async move |r: RequestPermissionRequest, responder, _cx| {
                    asked.0.lock().unwrap().asked.push(r);
                    let reply = replies.lock().unwrap().pop_front();
                    let outcome = match reply {
                        Some(Reply::Option(id)) => RequestPermissionOutcome::Selected(
                            SelectedPermissionOutcome::new(id.to_owned()),
                        ),
                        // Answered later, off the connection's loop (which a handler that
                        // waits would hold up).
                        Some(Reply::Held) => {
                            tokio::spawn(async move {
                                tokio::time::sleep(HELD).await;
                                let _ = responder.respond(RequestPermissionResponse::new(
                                    RequestPermissionOutcome::Cancelled,
                                ));
                            });
                            return Ok(());
                        }
                        _ => RequestPermissionOutcome::Cancelled,
                    };
                    responder.respond(RequestPermissionResponse::new(outcome))
                },
                agent_client_protocol::on_receive_request!(),
            )
            .connect_with(agent, body);
        tokio::time::timeout(CONVERSATION, client).await
    });
    let stderr = record.0.lock().unwrap().stderr.join("\n");
    match result {
        Ok(Ok(t)) => t,
        Ok(Err(e)) => panic!("the ACP conversation failed: {e:?}\nstderr:\n{stderr}"),
        Err(_) => panic!("the ACP conversation hung\nstderr:\n{stderr}"),
    }
}

/// `initialize`, then `session/new` in the workspace.
pub async fn new_session(
    cx: &ConnectionTo<Agent>,
    e: &ExecEnv,
) -> Result<NewSessionResponse, agent_client_protocol::Error> {
    cx.send_request(InitializeRequest::new(
        agent_client_protocol::schema::ProtocolVersion::V1,
    ))
    .block_task()
    .await?;
    cx.send_request(NewSessionRequest::new(e.workspace.clone()))
        .block_task()
        .await
}

/// The updates a client shows as a session's history: the agent's text and thoughts, tool
/// calls and their updates, plans and mode changes (not the command list, the config options
/// or the user's own messages).
pub fn history(updates: &[SessionUpdate]) -> Vec<serde_json::Value> {
    updates
        .iter()
        .filter(|u| {
            !matches!(
                u,
                SessionUpdate::AvailableCommandsUpdate(_)
                    | SessionUpdate::ConfigOptionUpdate(_)
                    | SessionUpdate::UserMessageChunk(_)
            )
        })
        .map(|u| serde_json::to_value(u).unwrap())
        .collect()
}
