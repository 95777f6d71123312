//! A live session (`shared/spec/sessions.md`): a handle front ends drive from any thread or
//! from tokio. The agent runs on the session's own thread; the handle only puts inputs in the
//! inbox and reads the committed-event feed.
//!
//! - [`Session::prompt`] opens a turn (an error while one runs: send it as steering or queue
//!   it instead); [`Session::steer`] joins the next step of the running turn, or opens a turn
//!   when the agent is idle; [`Session::queue`] becomes the next turn; [`Session::inject`]
//!   joins the next step without waking an idle agent; [`Session::command`] runs a slash
//!   command a plugin registered (`/plan off`); [`Session::cancel`] cancels the running turn
//!   and drops the steering no step has taken (queued turns stay: each runs as its own turn).
//! - Every input has an id, returned by the call. The log records `input/received` and, when
//!   a step's request includes it (as a `user/message` carrying the id), the receipt
//!   `input/included {input_id, turn, step, carried}`. Steering that arrives after the last
//!   step of a turn is carried to the next turn, and its receipt says `carried`. An input
//!   that is dropped instead (a cancel, a front end that leaves, a close with injected context
//!   no step took) gets `input/dropped {input_id, kind, turn, reason}`, committed by the
//!   session's thread as soon as it can: the log says what became of every input it received.
//! - [`Session::events`] is a feed of committed events only (published right after each
//!   barrier made them durable); [`Session::reports`] yields each turn's [`TurnReport`].
//! - Approvals and plan reviews reach a front end through [`ChannelAnswerer`] /
//!   [`Questions`], handed to the pipeline when it is built (the CLI's wiring does that).
//!
//! Everything the handle returns is usable from another thread (`blocking_recv`, `try_recv`)
//! and from tokio (`recv().await`); no call of the handle waits for a turn, except
//! [`Session::command`] while the agent is idle (it waits for the idle agent to commit).

mod feed;
mod inbox;
mod interaction;
pub mod prestep;

use std::sync::Arc;

use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};

use crate::log::{DropReason, Event, SessionLog};
use crate::model::Model;
use crate::tools::ToolHost;
use crate::{Agent, AgentConfig, TurnReport};

pub use feed::{Committed, Feed};
use inbox::Dropped;
pub use inbox::{Inbox, Input, InputKind};
pub use interaction::{ChannelAnswerer, Question, Questions, Reply};
pub use prestep::{PreStep, StepVerdict, StepView};

/// Why the session refused an input or a command.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SessionError {
    /// The session was closed (or its thread ended).
    #[error("the session is closed")]
    Closed,
    /// A prompt while a turn runs.
    #[error("turn {turn} is running: send this as steering or queue it")]
    Busy { turn: u64 },
    /// Steering (or injected context) while the running turn is being cancelled: no step
    /// of it would take the text, and it must not open a turn nobody asked for.
    #[error("turn {turn} is being cancelled: send this again once it has ended")]
    Cancelling { turn: u64 },
    /// An empty input.
    #[error("the input is empty")]
    Empty,
    /// A command nobody registered.
    #[error("unknown command `{name}` (available: {available})")]
    UnknownCommand { name: String, available: String },
    /// A command failed; the text says how to use it, or why.
    #[error("{0}")]
    Command(String),
}

/// What a command sees.
pub struct CommandCtx<'c, 'h> {
    /// The idle agent (`None` while a turn runs: then nothing can be committed at once).
    pub agent: Option<&'c mut Agent<'h>>,
    /// Submits text through the steering path (an ordinary, logged user message).
    pub steer: &'c dyn Fn(&str) -> Result<String, SessionError>,
}

impl std::fmt::Debug for CommandCtx<'_, '_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CommandCtx")
            .field("idle", &self.agent.is_some())
            .finish_non_exhaustive()
    }
}

/// A slash command (`/plan`), registered by a plugin.
pub trait Command: Send + Sync {
    /// Its name, without the slash.
    fn name(&self) -> &str;

    /// Runs it with `args` (the text after the name, trimmed); the reply is shown to the user.
    fn run(&self, args: &str, ctx: &mut CommandCtx<'_, '_>) -> Result<String, String>;
}

/// How a session runs, beyond the agent's configuration.
#[derive(Default)]
pub struct SessionConfig {
    /// The agent (sections, plugins, listeners, limits).
    pub agent: AgentConfig,
    /// The slash commands.
    pub commands: Vec<Arc<dyn Command>>,
    /// Called by [`Session::cancel`] (the CLI kills the running tools' process trees).
    pub on_cancel: Option<Arc<dyn Fn() + Send + Sync>>,
    /// The front end's answerer, whose pending questions a cancel gives up.
    pub answerer: Option<ChannelAnswerer>,
}

impl std::fmt::Debug for SessionConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionConfig")
            .field("agent", &self.agent)
            .field("commands", &self.commands.len())
            .finish_non_exhaustive()
    }
}

/// The handle of a live session.
pub struct Session {
    inbox: Arc<Inbox>,
    feed: Arc<Feed>,
    commands: Arc<Vec<Arc<dyn Command>>>,
    on_cancel: Option<Arc<dyn Fn() + Send + Sync>>,
    answerer: Option<ChannelAnswerer>,
    reports: std::sync::Mutex<Option<UnboundedReceiver<TurnReport>>>,
    worker: Option<std::thread::JoinHandle<Result<SessionLog, String>>>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session").finish_non_exhaustive()
    }
}

impl Session {
    /// Starts the session's thread on `log` with `model` and `tools`. The events the log
    /// already holds are published first.
    pub fn start(
        log: SessionLog,
        model: Box<dyn Model>,
        tools: Arc<dyn ToolHost + Send>,
        config: SessionConfig,
    ) -> Session {
        let inbox = Arc::new(Inbox::default());
        inbox.lock().next_id = log
            .events()
            .iter()
            .filter(|(_, e)| matches!(e, Event::InputReceived { .. }))
            .count() as u64;
        let feed = Arc::new(Feed::starting_at(0));
        // The session's own commands, then the plugins'.
        let mut commands = config.commands;
        commands.extend(config.agent.plugins.commands());
        let commands = Arc::new(commands);
        let (reports_tx, reports_rx) = unbounded_channel();
        let mut agent_config = config.agent;
        let user_cancel = agent_config.cancel.take();
        let cancel_inbox = Arc::clone(&inbox);
        agent_config.cancel = Some(Arc::new(move || {
            cancel_inbox
                .cancelled()
                .or_else(|| user_cancel.as_ref().and_then(|c| c()))
        }));
        agent_config.inbox = Some(Arc::clone(&inbox));
        agent_config.feed = Some(Arc::clone(&feed));
        let worker = {
            let inbox = Arc::clone(&inbox);
            let commands = Arc::clone(&commands);
            let answerer = config.answerer.clone();
            std::thread::Builder::new()
                .name("bridle-session".into())
                .spawn(move || {
                    let mut agent = match Agent::new(log, model, tools.as_ref(), agent_config) {
                        Ok(agent) => agent,
                        Err(e) => {
                            ended(&inbox);
                            return Err(e.to_string());
                        }
                    };
                    agent.publish();
                    let result = run(
                        &mut agent,
                        &inbox,
                        &commands,
                        answerer.as_ref(),
                        &reports_tx,
                    );
                    ended(&inbox);
                    result.map(|()| agent.into_log())
                })
        };
        Session {
            inbox,
            feed,
            commands,
            on_cancel: config.on_cancel,
            answerer: config.answerer,
            reports: std::sync::Mutex::new(Some(reports_rx)),
            worker: worker.ok(),
        }
    }

    /// Opens a turn with `text`; refused while a turn runs.
    pub fn prompt(&self, text: &str) -> Result<String, SessionError> {
        self.submit(InputKind::Prompt, text)
    }

    /// Joins the next step of the running turn (or opens a turn when idle).
    pub fn steer(&self, text: &str) -> Result<String, SessionError> {
        self.submit(InputKind::Steer, text)
    }

    /// Becomes the next turn.
    pub fn queue(&self, text: &str) -> Result<String, SessionError> {
        self.submit(InputKind::Queue, text)
    }

    /// Joins the next step without waking an idle agent.
    pub fn inject(&self, text: &str) -> Result<String, SessionError> {
        self.submit(InputKind::Inject, text)
    }

    fn submit(&self, kind: InputKind, text: &str) -> Result<String, SessionError> {
        submit(&self.inbox, kind, text)
    }

    /// Runs a slash command (`/plan off`).
    pub fn command(&self, text: &str) -> Result<String, SessionError> {
        let text = text.trim();
        let Some(rest) = text.strip_prefix('/') else {
            return Err(SessionError::Command(format!(
                "`{text}` is not a command (commands start with `/`)"
            )));
        };
        let name = rest.split_whitespace().next().unwrap_or("");
        find(&self.commands, name)?;
        let mut state = self.inbox.lock();
        if state.closed {
            return Err(SessionError::Closed);
        }
        if state.running.is_some() {
            drop(state);
            // A turn runs: the command cannot commit now (PM5: it keeps a pending choice).
            let steer = |t: &str| submit(&self.inbox, InputKind::Steer, t);
            return run_command(&self.commands, text, None, &steer);
        }
        let (tx, rx) = std::sync::mpsc::channel();
        state.commands.push_back((text.to_owned(), tx));
        drop(state);
        self.inbox.notify();
        rx.recv()
            .map_err(|_| SessionError::Closed)?
            .map_err(SessionError::Command)
    }

    /// Cancels the running turn (nothing when idle); returns the ids of the steering and
    /// injected inputs it dropped (see [`Session::cancel_because`]).
    pub fn cancel(&self) -> Vec<String> {
        self.cancel_because("the session was cancelled")
    }

    /// Cancels the running turn, whose end then says it was cancelled by `who` (`signal
    /// SIGTERM`); nothing when idle. The steering and injected inputs no step has taken yet
    /// are dropped, and their ids returned: they were meant for a step of the turn being
    /// cancelled, and left in the inbox one would open a new turn that runs the model and its
    /// tools after the person (or the client) asked to stop. Queued turns stay queued. The
    /// log gets an `input/dropped {reason: cancelled}` for each.
    pub fn cancel_because(&self, who: &str) -> Vec<String> {
        let mut state = self.inbox.lock();
        let mut dropped = Vec::new();
        if state.running.is_some() {
            state.cancel = Some(who.to_owned());
            dropped = state.drop_inputs(
                |i| matches!(i.kind, InputKind::Steer | InputKind::Inject),
                DropReason::Cancelled,
            );
            drop(state);
            if let Some(a) = &self.answerer {
                a.cancel();
            }
            if let Some(hook) = &self.on_cancel {
                hook();
            }
        }
        dropped
    }

    /// A check of whether the running turn was cancelled, for what runs the turn's tools: a
    /// tool that was being started when [`Session::cancel_because`] ran its hook is killed
    /// once it is listed (the flag is set before the hook runs).
    pub fn cancel_check(&self) -> impl Fn() -> bool + Send + Sync + 'static {
        let inbox = Arc::clone(&self.inbox);
        move || {
            let state = inbox.lock();
            state.running.is_some() && state.cancel.is_some()
        }
    }

    /// Drops the inputs no step has taken yet (queued turns, steering not yet included) and
    /// returns their ids: a front end that leaves must not have them run with nobody there.
    /// The log gets an `input/dropped {reason: session-closed}` for each.
    pub fn discard_pending(&self) -> Vec<String> {
        let ids = self
            .inbox
            .lock()
            .drop_inputs(|_| true, DropReason::SessionClosed);
        self.inbox.notify();
        ids
    }

    /// Whether a turn runs.
    pub fn is_running(&self) -> bool {
        self.inbox.lock().running.is_some()
    }

    /// The feed of committed events from now on.
    pub fn events(&self) -> UnboundedReceiver<Committed> {
        self.feed.subscribe()
    }

    /// The turns' reports (one receiver per session: the first call takes it).
    pub fn reports(&self) -> Option<UnboundedReceiver<TurnReport>> {
        self.reports
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()
    }

    /// Closes the session once the running turn and the queued inputs are done, and gives
    /// the log back.
    pub fn close(mut self) -> Result<SessionLog, String> {
        self.shut();
        match self.worker.take() {
            Some(w) => w
                .join()
                .map_err(|_| "the session thread panicked".to_owned())?,
            None => Err("the session thread never started".to_owned()),
        }
    }

    fn shut(&self) {
        self.inbox.lock().closed = true;
        self.inbox.notify();
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        self.shut();
        if let Some(w) = self.worker.take() {
            let _ = w.join();
        }
    }
}

/// The worker is gone: nothing is taken any more, and a command still waiting for its answer
/// gets `Closed` (its reply channel is dropped) instead of waiting forever.
fn ended(inbox: &Inbox) {
    let mut state = inbox.lock();
    state.closed = true;
    state.commands.clear();
}

fn submit(inbox: &Inbox, kind: InputKind, text: &str) -> Result<String, SessionError> {
    if text.trim().is_empty() {
        return Err(SessionError::Empty);
    }
    let mut state = inbox.lock();
    if state.closed {
        return Err(SessionError::Closed);
    }
    if let (InputKind::Prompt, Some(turn)) = (kind, state.running) {
        return Err(SessionError::Busy { turn });
    }
    if let (InputKind::Steer | InputKind::Inject, Some(turn), Some(_)) =
        (kind, state.running, &state.cancel)
    {
        return Err(SessionError::Cancelling { turn });
    }
    state.next_id += 1;
    let id = format!("input-{}", state.next_id);
    let arrived_during = state.running;
    state.items.push_back(Input {
        id: id.clone(),
        kind,
        text: text.to_owned(),
        arrived_during,
        received_logged: false,
    });
    drop(state);
    inbox.notify();
    Ok(id)
}

fn find(commands: &[Arc<dyn Command>], name: &str) -> Result<Arc<dyn Command>, SessionError> {
    commands
        .iter()
        .find(|c| c.name() == name)
        .cloned()
        .ok_or_else(|| SessionError::UnknownCommand {
            name: format!("/{name}"),
            available: commands
                .iter()
                .map(|c| format!("/{}", c.name()))
                .collect::<Vec<_>>()
                .join(", "),
        })
}

/// Runs the slash command `text` (`/plan off`) among `commands`; `steer` submits a message
/// through the steering path.
pub(crate) fn run_command(
    commands: &[Arc<dyn Command>],
    text: &str,
    agent: Option<&mut Agent<'_>>,
    steer: &dyn Fn(&str) -> Result<String, SessionError>,
) -> Result<String, SessionError> {
    let rest = text.trim().trim_start_matches('/');
    let (name, args) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
    let command = find(commands, name)?;
    let mut ctx = CommandCtx { agent, steer };
    command
        .run(args.trim(), &mut ctx)
        .map_err(SessionError::Command)
}

/// The session thread: waits for an input that opens a turn (or a command for the idle
/// agent), runs it, and again, until the session is closed and nothing is left to run.
fn run(
    agent: &mut Agent<'_>,
    inbox: &Inbox,
    commands: &[Arc<dyn Command>],
    answerer: Option<&ChannelAnswerer>,
    reports: &UnboundedSender<TurnReport>,
) -> Result<(), String> {
    loop {
        let mut state = inbox.wait_until(|s| {
            s.closed
                || !s.dropped.is_empty()
                || !s.commands.is_empty()
                || s.items.iter().any(|i| i.kind != InputKind::Inject)
        });
        if !state.dropped.is_empty() {
            let dropped = std::mem::take(&mut state.dropped);
            drop(state);
            log_dropped(agent, dropped)?;
            continue;
        }
        if let Some((text, reply)) = state.commands.pop_front() {
            drop(state);
            let steer = |t: &str| submit(inbox, InputKind::Steer, t);
            let result =
                run_command(commands, &text, Some(agent), &steer).map_err(|e| e.to_string());
            let _ = reply.send(result);
            continue;
        }
        let opener = [InputKind::Prompt, InputKind::Queue, InputKind::Steer]
            .iter()
            .find_map(|k| state.items.iter().position(|i| i.kind == *k));
        let Some(index) = opener else {
            // Closed, with nothing left that opens a turn: injected context no step took
            // will never reach the model.
            state.drop_inputs(|_| true, DropReason::SessionClosed);
            let dropped = std::mem::take(&mut state.dropped);
            drop(state);
            return log_dropped(agent, dropped);
        };
        let Some(opener) = state.items.remove(index) else {
            return Ok(());
        };
        state.running = Some(agent.next_turn());
        state.cancel = None;
        drop(state);
        if let Some(a) = answerer {
            a.resume();
        }
        let report = agent.run_turn_input(Some(&opener), &opener.text);
        // What the turn's cancel dropped is logged before the turn counts as over, so a front
        // end that waits for it to end (and then exits) finds the log saying so.
        let logged = loop {
            let mut state = inbox.lock();
            if state.dropped.is_empty() || report.is_err() {
                state.running = None;
                break Ok(());
            }
            let dropped = std::mem::take(&mut state.dropped);
            drop(state);
            if let Err(e) = log_dropped(agent, dropped) {
                inbox.lock().running = None;
                break Err(e);
            }
        };
        logged?;
        match report {
            Ok(report) => {
                let _ = reports.send(report);
            }
            Err(e) => return Err(e.to_string()),
        }
    }
}

/// Commits `input/dropped` for each of `dropped` (after its `input/received`, when no step
/// logged that yet).
fn log_dropped(agent: &mut Agent<'_>, dropped: Vec<Dropped>) -> Result<(), String> {
    if dropped.is_empty() {
        return Ok(());
    }
    let events = dropped.into_iter().flat_map(|d| {
        let kind = d.input.kind.name().to_owned();
        let received = (!d.input.received_logged).then(|| Event::InputReceived {
            input_id: d.input.id.clone(),
            kind: kind.clone(),
        });
        received.into_iter().chain([Event::InputDropped {
            input_id: d.input.id,
            kind,
            turn: d.turn,
            reason: d.reason,
        }])
    });
    agent.commit_all(events).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests;
