//! `bridle acp`: the Agent Client Protocol over stdin/stdout (`shared/spec/acp.md`), served
//! with the official SDK. Each ACP session is a live bridle session
//! ([`crate::session_wiring`]); what the client sees of it is
//! [`bridle_agent::front::acp`]'s mapping of the session's log events, sent as they are sealed
//! into the log (so text streams chunk by chunk).
//!
//! - A `session/prompt` while a turn runs steers that turn (it joins the next step); both
//!   prompts are answered when that turn ends.
//! - Approvals and plan reviews are `session/request_permission`s; a cancelled request or an
//!   error is a denial.
//! - The client's `fs/*` and `terminal/*` are never used: they would run outside the sandbox.
//! - stdout is the protocol channel: diagnostics and tracing go to stderr, and the tools'
//!   stdio are pipes or `/dev/null`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use agent_client_protocol::v1::schema::{
    AgentCapabilities, CancelNotification, Implementation, InitializeRequest, InitializeResponse,
    LoadSessionRequest, LoadSessionResponse, NewSessionRequest, NewSessionResponse,
    PromptCapabilities, PromptRequest, PromptResponse, SessionConfigOptionValue,
    SessionNotification, SessionUpdate, SetSessionConfigOptionRequest,
    SetSessionConfigOptionResponse, SetSessionModeRequest, SetSessionModeResponse,
};
use agent_client_protocol::v1::{ConnectionTo, Responder};
use agent_client_protocol::{Client, Error};
use anyhow::Result;
use bridle_agent::TurnReport;
use bridle_agent::front::acp::{self, Ceiling, Current};
use bridle_agent::session::{Questions, SessionError};
use bridle_policy::Overrides;

use crate::cli::{AcpArgs, GlobalArgs};

mod questions;
mod session;
mod wire;
use crate::session_wiring::{self, Asking, Live, Open, Request, say};
use questions::spawn_questions;
use session::{config_options, prompt_text, start, watch};

/// Runs `bridle acp` until the client closes stdin, or SIGTERM or SIGHUP comes; then every
/// session's running turn is cancelled, its tools killed and its log closed (after a signal,
/// bridle then dies of it).
pub fn run(global: &GlobalArgs, args: &AcpArgs) -> Result<u8> {
    // Held from the start, so that a signal never cuts a log or a sandbox's preparation short.
    bridle_sandbox::launcher::hold_termination();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let agent = Arc::new(AcpAgent {
        global: global.clone(),
        model: args.session.model.clone(),
        store: args.session.store.clone(),
        session_dir: args.session.session_dir.clone(),
        sessions: Mutex::default(),
    });
    let (transport, writer) = wire::stdio()?;
    let served = runtime.block_on(async {
        tokio::select! {
            served = serve(Arc::clone(&agent), transport) => served,
            () = terminated() => Ok(()),
        }
    });
    // The client is gone, or told to stop: nothing more can be answered. Cancel what runs,
    // close every log.
    let sessions: Vec<Arc<Entry>> = lock(&agent.sessions).drain().map(|(_, e)| e).collect();
    let why = bridle_sandbox::launcher::termination_signal().map_or_else(
        || "the ACP client closed the connection".to_owned(),
        |name| format!("signal {name}"),
    );
    for entry in &sessions {
        if let Some(live) = lock(&entry.live).as_ref() {
            // Nobody is left to answer: nothing waiting in the inbox may run (closing a
            // session runs what is queued), and the cancel drops the turn's steering.
            live.session.discard_pending();
            live.session.cancel_because(&why);
        }
    }
    for entry in sessions {
        if let Some(live) = lock(&entry.live).take()
            && let Err(e) = live.stop()
        {
            say(&format!("session {}: {e:#}", entry.id));
        }
    }
    runtime.shutdown_timeout(std::time::Duration::from_secs(1));
    // What was answered reaches stdout before bridle exits (the writer ends once the
    // connection and stdin are done; after a signal stdin may never end: bounded).
    let flushed = std::time::Instant::now() + std::time::Duration::from_secs(2);
    while !writer.is_finished() && std::time::Instant::now() < flushed {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    if bridle_sandbox::launcher::termination_requested() {
        bridle_sandbox::launcher::die_of_forwarded_signal();
    }
    match served {
        Ok(()) => Ok(0),
        Err(e) => {
            say(&format!("the ACP connection failed: {e}"));
            Ok(1)
        }
    }
}

/// Resolves once SIGTERM or SIGHUP came (they are held: see [`run`]).
async fn terminated() {
    while !bridle_sandbox::launcher::termination_requested() {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// The agent: what every session is planned from, and the live sessions by id.
struct AcpAgent {
    global: GlobalArgs,
    model: String,
    store: String,
    session_dir: Option<PathBuf>,
    sessions: Mutex<HashMap<String, Arc<Entry>>>,
}

/// One live ACP session.
struct Entry {
    id: String,
    /// `None` only while the session restarts under a new policy.
    live: Mutex<Option<Live>>,
    /// The prompts waiting for the running turn to end, by ticket.
    waiters: Mutex<Vec<(u64, Responder<PromptResponse>)>>,
    next_ticket: AtomicU64,
    /// Set by `session/cancel`: the turn's prompts answer `cancelled`.
    cancelled: AtomicBool,
    /// The profile's own policy: config options never go wider.
    ceiling: Ceiling,
    current: Mutex<Current>,
    /// The latest call announced per tool name, and under "" of all: what a question that
    /// names no call is about (the plan review, the network proxy's).
    calls: Arc<Mutex<HashMap<String, String>>>,
    out: tokio::sync::mpsc::UnboundedSender<Out>,
}

/// What a session's forwarding task sends, in order.
enum Out {
    Update(Box<SessionUpdate>),
    Ended(TurnReport),
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn invalid(message: impl std::fmt::Display) -> Error {
    Error::invalid_params().data(message.to_string())
}

fn internal(message: impl std::fmt::Display) -> Error {
    Error::internal_error().data(message.to_string())
}

fn not_found(id: &str) -> Error {
    agent_client_protocol::v1::schema::Error::session_not_found(id.to_owned()).into()
}

async fn serve(
    agent: Arc<AcpAgent>,
    transport: impl agent_client_protocol::ConnectTo<agent_client_protocol::Agent> + 'static,
) -> agent_client_protocol::Result<()> {
    let new_agent = Arc::clone(&agent);
    let load_agent = Arc::clone(&agent);
    let prompt_agent = Arc::clone(&agent);
    let cancel_agent = Arc::clone(&agent);
    let mode_agent = Arc::clone(&agent);
    let config_agent = Arc::clone(&agent);
    agent_client_protocol::Agent
        .v1()
        .name("bridle")
        .on_receive_request(
            async move |_: InitializeRequest,
                        responder: Responder<InitializeResponse>,
                        _: ConnectionTo<Client>| {
                responder.respond(
                    InitializeResponse::new(agent_client_protocol::schema::ProtocolVersion::V1)
                        .agent_capabilities(
                            AgentCapabilities::new()
                                .load_session(true)
                                .prompt_capabilities(PromptCapabilities::new()),
                        )
                        .agent_info(Implementation::new("bridle", env!("CARGO_PKG_VERSION"))),
                )
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: NewSessionRequest,
                        responder: Responder<NewSessionResponse>,
                        cx: ConnectionTo<Client>| {
                let opened = open_blocking(
                    &new_agent,
                    request.cwd,
                    request.additional_directories,
                    !request.mcp_servers.is_empty(),
                    Open::New,
                );
                let (entry, opened) = match opened.await {
                    Ok(o) => o,
                    Err(e) => return responder.respond_with_error(e),
                };
                let response = NewSessionResponse::new(entry.id.clone())
                    .modes(acp::modes(opened.plan_active))
                    .config_options(config_options(&entry));
                responder.respond(response)?;
                start_tasks(&cx, &entry, opened)
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: LoadSessionRequest,
                        responder: Responder<LoadSessionResponse>,
                        cx: ConnectionTo<Client>| {
                let agent = Arc::clone(&load_agent);
                let id = request.session_id.0.to_string();
                if lock(&agent.sessions).contains_key(&id) {
                    return responder.respond_with_error(invalid(format!(
                        "session {id} is already open on this connection"
                    )));
                }
                let opened = open_blocking(
                    &agent,
                    request.cwd,
                    request.additional_directories,
                    !request.mcp_servers.is_empty(),
                    Open::Resume(id),
                );
                let (entry, opened) = match opened.await {
                    Ok(o) => o,
                    Err(e) => return responder.respond_with_error(e),
                };
                for update in &opened.replay {
                    cx.send_notification(SessionNotification::new(
                        entry.id.clone(),
                        update.clone(),
                    ))?;
                }
                let response = LoadSessionResponse::new()
                    .modes(acp::modes(opened.plan_active))
                    .config_options(config_options(&entry));
                responder.respond(response)?;
                start_tasks(&cx, &entry, opened)
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: PromptRequest,
                        responder: Responder<PromptResponse>,
                        _: ConnectionTo<Client>| {
                let id = request.session_id.0.to_string();
                let Some(entry) = prompt_agent.entry(&id) else {
                    return responder.respond_with_error(not_found(&id));
                };
                let text = match prompt_text(&request.prompt) {
                    Ok(t) => t,
                    Err(e) => return responder.respond_with_error(invalid(e)),
                };
                entry.prompt(&text, responder)
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_notification(
            async move |cancel: CancelNotification, _: ConnectionTo<Client>| {
                if let Some(entry) = cancel_agent.entry(&cancel.session_id.0) {
                    entry.cancelled.store(true, Ordering::SeqCst);
                    if let Some(live) = lock(&entry.live).as_ref() {
                        live.session.cancel();
                    }
                }
                Ok(())
            },
            agent_client_protocol::on_receive_notification!(),
        )
        .on_receive_request(
            async move |request: SetSessionModeRequest,
                        responder: Responder<SetSessionModeResponse>,
                        _: ConnectionTo<Client>| {
                let id = request.session_id.0.to_string();
                let Some(entry) = mode_agent.entry(&id) else {
                    return responder.respond_with_error(not_found(&id));
                };
                let plan = match acp::parse_mode(&request.mode_id.0) {
                    Ok(p) => p,
                    Err(e) => return responder.respond_with_error(invalid(e)),
                };
                let command = if plan { "/plan" } else { "/plan off" };
                let done = tokio::task::spawn_blocking(move || {
                    let live = lock(&entry.live);
                    let live = live.as_ref().ok_or(SessionError::Closed)?;
                    live.session.command(command)
                })
                .await;
                match done {
                    Ok(Ok(reply)) => {
                        say(&format!("session {id}: {reply}"));
                        responder.respond(SetSessionModeResponse::new())
                    }
                    Ok(Err(e)) => responder.respond_with_error(invalid(e)),
                    Err(e) => responder.respond_with_error(internal(e)),
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: SetSessionConfigOptionRequest,
                        responder: Responder<SetSessionConfigOptionResponse>,
                        cx: ConnectionTo<Client>| {
                let id = request.session_id.0.to_string();
                let Some(entry) = config_agent.entry(&id) else {
                    return responder.respond_with_error(not_found(&id));
                };
                let value = match &request.value {
                    SessionConfigOptionValue::ValueId { value } => value.0.to_string(),
                    other => {
                        return responder.respond_with_error(invalid(format!(
                            "config option `{}`: {other:?} is not one of its values",
                            request.config_id.0
                        )));
                    }
                };
                let choice = match acp::config_choice(&entry.ceiling, &request.config_id.0, &value)
                {
                    Ok(c) => c,
                    Err(e) => return responder.respond_with_error(invalid(e)),
                };
                let worker = Arc::clone(&entry);
                let changed = tokio::task::spawn_blocking(move || worker.choose(choice)).await;
                match changed {
                    Ok(Ok(questions)) => {
                        responder
                            .respond(SetSessionConfigOptionResponse::new(config_options(&entry)))?;
                        if let Some(questions) = questions {
                            spawn_questions(&cx, &entry, questions)?;
                        }
                        Ok(())
                    }
                    Ok(Err(e)) => responder.respond_with_error(e),
                    Err(e) => responder.respond_with_error(internal(e)),
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .connect_to(transport)
        .await
}

/// [`AcpAgent::open`] off the runtime's threads (it plans, opens the log, starts a thread).
async fn open_blocking(
    agent: &Arc<AcpAgent>,
    cwd: PathBuf,
    additional: Vec<PathBuf>,
    mcp: bool,
    open: Open,
) -> Result<(Arc<Entry>, Opened), Error> {
    let agent = Arc::clone(agent);
    tokio::task::spawn_blocking(move || agent.open(&cwd, &additional, mcp, open))
        .await
        .map_err(internal)?
}

/// What opening a session gives the tasks that serve it.
struct Opened {
    plan_active: bool,
    /// `session/load`: the history, as updates.
    replay: Vec<SessionUpdate>,
    out: tokio::sync::mpsc::UnboundedReceiver<Out>,
    questions: Option<Questions>,
}

impl AcpAgent {
    fn entry(&self, id: &str) -> Option<Arc<Entry>> {
        lock(&self.sessions).get(id).cloned()
    }

    /// Opens a session in the workspace `cwd` (new, or the one `open` resumes) and starts it.
    fn open(
        &self,
        cwd: &Path,
        additional: &[PathBuf],
        mcp: bool,
        open: Open,
    ) -> Result<(Arc<Entry>, Opened), Error> {
        if mcp {
            return Err(invalid(
                "mcpServers: bridle does not support MCP servers yet; connect the session \
                 without them",
            ));
        }
        if !cwd.is_absolute() {
            return Err(invalid(format!(
                "cwd `{}`: it must be an absolute path",
                cwd.display()
            )));
        }
        let mut global = self.global.clone();
        global.workspace = Some(cwd.to_owned());
        let loading = matches!(open, Open::Resume(_));
        let mut prepared = session_wiring::prepare(Request {
            global,
            model: self.model.clone(),
            store: self.store.clone(),
            session_dir: self.session_dir.clone(),
            open,
            overrides: Overrides::default(),
            asking: Asking::FrontEnd,
            approval: None,
            persist_terminal: true,
            commands_needed: Vec::new(),
            // Checked before the session's log exists: a refused `session/new` leaves none.
            readable: additional.to_vec(),
        })
        .map_err(|e| invalid(format!("{e:#}")))?;
        let ceiling = Ceiling::of(&prepared.summary);
        let current = Current {
            mode: prepared.summary.mode,
            network: prepared.summary.network,
            approval: prepared.summary.approval,
        };
        let events = prepared.log.events();
        let replay = if loading {
            acp::replay(events.iter().map(|(_, e)| e))
        } else {
            Vec::new()
        };
        let plan_active = bridle_agent::plan_mode::fold_plan_mode(events.iter().map(|(_, e)| e));
        let (out, out_rx) = tokio::sync::mpsc::unbounded_channel();
        let calls = Arc::new(Mutex::new(HashMap::new()));
        watch(&mut prepared, ceiling, out.clone(), Arc::clone(&calls));
        let id = prepared.log.id().to_owned();
        let (live, questions) = start(prepared, &out).map_err(|e| internal(format!("{e:#}")))?;
        let entry = Arc::new(Entry {
            id: id.clone(),
            live: Mutex::new(Some(live)),
            waiters: Mutex::default(),
            next_ticket: AtomicU64::new(0),
            cancelled: AtomicBool::new(false),
            ceiling,
            current: Mutex::new(current),
            calls,
            out,
        });
        lock(&self.sessions).insert(id, Arc::clone(&entry));
        Ok((
            entry,
            Opened {
                plan_active,
                replay,
                out: out_rx,
                questions,
            },
        ))
    }
}

/// Starts the tasks that serve a session: its updates and turn ends, and its questions.
fn start_tasks(cx: &ConnectionTo<Client>, entry: &Arc<Entry>, opened: Opened) -> Result<(), Error> {
    cx.send_notification(SessionNotification::new(
        entry.id.clone(),
        acp::available_commands(),
    ))?;
    let Opened { out, questions, .. } = opened;
    spawn_updates(cx, entry, out)?;
    if let Some(questions) = questions {
        spawn_questions(cx, entry, questions)?;
    }
    Ok(())
}

/// Sends the session's updates in order; at a turn's end, answers the prompts waiting on it.
fn spawn_updates(
    cx: &ConnectionTo<Client>,
    entry: &Arc<Entry>,
    mut out: tokio::sync::mpsc::UnboundedReceiver<Out>,
) -> Result<(), Error> {
    let cx2 = cx.clone();
    let entry = Arc::clone(entry);
    cx.spawn(async move {
        while let Some(item) = out.recv().await {
            match item {
                Out::Update(update) => {
                    cx2.send_notification(SessionNotification::new(entry.id.clone(), *update))?;
                }
                Out::Ended(report) => {
                    let cancelled = entry.cancelled.swap(false, Ordering::SeqCst);
                    let answer =
                        acp::stop_reason(report.reason, report.error.as_deref(), cancelled);
                    let waiters: Vec<_> = lock(&entry.waiters).drain(..).collect();
                    for (_, responder) in waiters {
                        match &answer {
                            Ok(reason) => responder.respond(PromptResponse::new(*reason))?,
                            Err(e) => responder.respond_with_error(internal(e))?,
                        }
                    }
                }
            }
        }
        Ok(())
    })
}
