//! The turn/step loop: user input opens a turn; each step is one model request (built from
//! the session log alone) and the tool calls it produced; the turn ends when a step ends
//! without tool calls, on max-tokens, on an error, or at the step limit. Everything is
//! recorded in the session log before it is acted on.

mod derived;
mod stream;
#[cfg(test)]
mod tests;

use std::sync::Mutex;

use crate::AgentError;
use crate::log::{Event, PromptSection, RequestHeader, SessionLog, ToolCall, TurnEndReason};
use crate::model::{FinishReason, Model, ModelRequest};
use crate::plugin::PluginHost;

use crate::session::{Feed, Inbox, Input, PreStep, StepVerdict, StepView};
use crate::tools::{ToolHost, ToolNote, ToolOutcome, not_recorded};

/// How a session's turns run.
#[derive(Clone)]
pub struct AgentConfig {
    /// System prompt sections, in render order.
    pub sections: Vec<PromptSection>,
    /// Steps a turn may take before it is ended as aborted.
    pub max_steps: u64,
    /// Concurrency-safe calls run at once, at most.
    pub max_parallel: usize,
    /// The plugins: their sections, listeners (asked around `pre_step`), commands, tools
    /// and guards.
    pub plugins: std::sync::Arc<PluginHost>,
    /// Says whether the turn is cancelled, and by whom or what (`SIGINT`, say): then no
    /// further step or call starts, a model answer being streamed is abandoned, calls not
    /// started are answered "aborted before dispatch", and the turn ends `aborted` with the
    /// cause logged. Running tools are the caller's to kill.
    pub cancel: Option<Cancel>,
    /// Pre-step listeners, in order (plugins register them).
    pub pre_step: Vec<std::sync::Arc<dyn PreStep>>,
    /// A live session's inbox: steering and injected inputs join the next step.
    pub inbox: Option<std::sync::Arc<Inbox>>,
    /// A live session's feed of committed events.
    pub feed: Option<std::sync::Arc<Feed>>,
}

/// A cancellation check, asked often (before each step and call, while a model streams):
/// `Some(cause)` once the turn is cancelled.
pub type Cancel = std::sync::Arc<dyn Fn() -> Option<String> + Send + Sync>;

impl std::fmt::Debug for AgentConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentConfig")
            .field("sections", &self.sections)
            .field("max_steps", &self.max_steps)
            .field("max_parallel", &self.max_parallel)
            .field("plugins", &self.plugins)
            .field("cancel", &self.cancel.is_some())
            .field("pre_step", &self.pre_step.len())
            .finish_non_exhaustive()
    }
}

impl Default for AgentConfig {
    fn default() -> Self {
        Self {
            sections: Vec::new(),
            max_steps: 50,
            max_parallel: 4,
            plugins: std::sync::Arc::default(),
            cancel: None,
            pre_step: Vec::new(),
            inbox: None,
            feed: None,
        }
    }
}

/// How a turn ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TurnReport {
    pub turn: u64,
    pub reason: TurnEndReason,
    /// The model's final answer text (of the last step).
    pub answer: String,
    /// Why the turn did not complete, when it did not.
    pub error: Option<String>,
}

/// An agent: a session log, a model and the tools, driven turn by turn.
pub struct Agent<'h> {
    log: SessionLog,
    /// The model (on its thread once asked); gone once a cancelled turn abandoned a request.
    model: stream::ModelSlot,
    /// The model's route, as logged.
    route: String,
    tools: &'h dyn ToolHost,
    config: AgentConfig,
    /// What was derived from the log so far (extended each step, never redone).
    derived: derived::Derived,
}

impl std::fmt::Debug for Agent<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Agent")
            .field("session", &self.log.id())
            .field("model", &self.route)
            .finish_non_exhaustive()
    }
}

/// The outcome of a call whose tool panicked.
/// One `sandbox/quarantine` event for each thing the sandbox facts of a call say bridle moved
/// aside when its command ended (`quarantined: [{path, reason, moved_to}]`).
fn quarantine_events(call_id: &str, sandbox: Option<&serde_json::Value>) -> Vec<Event> {
    let Some(items) = sandbox
        .and_then(|s| s.get("quarantined"))
        .and_then(serde_json::Value::as_array)
    else {
        return Vec::new();
    };
    let text = |item: &serde_json::Value, key: &str| {
        item.get(key)
            .and_then(serde_json::Value::as_str)
            .map(str::to_owned)
    };
    items
        .iter()
        .map(|item| Event::SandboxQuarantine {
            call_id: call_id.to_owned(),
            path: text(item, "path").unwrap_or_default(),
            reason: text(item, "reason").unwrap_or_default(),
            moved_to: text(item, "moved_to"),
        })
        .collect()
}

fn panicked() -> ToolOutcome {
    ToolOutcome {
        ok: false,
        content: "the tool failed unexpectedly (it panicked); nothing is known about its effects"
            .to_owned(),
        sandbox: None,
    }
}

/// How a turn ends.
struct Ending {
    reason: TurnEndReason,
    /// Why it did not complete.
    error: Option<String>,
    /// Who or what cancelled it.
    cancelled_by: Option<String>,
}

impl Ending {
    fn completed() -> Self {
        Self {
            reason: TurnEndReason::Completed,
            error: None,
            cancelled_by: None,
        }
    }

    fn failed(reason: TurnEndReason, why: String) -> Self {
        Self {
            reason,
            error: Some(why),
            cancelled_by: None,
        }
    }
}

/// One call of a step, with the id the log knows it by.
struct PlannedCall {
    call: ToolCall,
    concurrent: bool,
}

impl<'h> Agent<'h> {
    /// An agent on `log`; fails when a plugin's tools or guards cannot join `tools`.
    pub fn new(
        log: SessionLog,
        model: Box<dyn Model>,
        tools: &'h dyn ToolHost,
        config: AgentConfig,
    ) -> Result<Self, AgentError> {
        // A plugin's guard that is not in the pipeline would let through what it denies.
        config
            .plugins
            .attach(tools)
            .map_err(|source| AgentError::AttachPlugins { source })?;
        Ok(Self {
            log,
            route: model.route(),
            model: stream::ModelSlot::Ready(model),
            tools,
            config,
            derived: derived::Derived::default(),
        })
    }

    /// The session log.
    pub fn log(&self) -> &SessionLog {
        &self.log
    }

    /// Gives the session log back (dropping it makes it durable).
    pub fn into_log(self) -> SessionLog {
        self.log
    }

    /// Runs a plugin's slash command on the idle agent (`/plan`, `/plan off`): what a live
    /// session's `command` does, for a caller without a session (`bridle run --plan`). There is
    /// no steering path here: a command that would send a message fails.
    pub fn command(&mut self, text: &str) -> Result<String, crate::session::SessionError> {
        let commands = self.config.plugins.commands();
        let steer = |_: &str| -> Result<String, crate::session::SessionError> {
            Err(crate::session::SessionError::Command(
                "no session to send a message through here".to_owned(),
            ))
        };
        crate::session::run_command(&commands, text, Some(self), &steer)
    }

    /// The plugin host.
    pub fn plugins(&self) -> &PluginHost {
        &self.config.plugins
    }

    /// Unloads plugin `name`: its sections, listeners, commands, event types, tools and guards
    /// are gone from the next step on. Whether it was loaded.
    pub fn unload_plugin(&self, name: &str) -> bool {
        self.config.plugins.unload(name, self.tools)
    }

    /// Appends `event`, checked first against the validator of the plugin that declares its
    /// type, if one does.
    fn append_checked(&mut self, event: Event) -> Result<u64, AgentError> {
        let kind = event.kind();
        if self.config.plugins.declares(kind) {
            let data = event.data();
            if let Err(reason) = self.config.plugins.validate(kind, &data) {
                return Err(AgentError::RecordEvent {
                    path: self.log.path().to_owned(),
                    kind: kind.to_owned(),
                    reason,
                });
            }
        }
        self.log.append(event)
    }

    /// Makes the log durable, then publishes what became durable to the feed.
    fn durable(&mut self) -> Result<(), AgentError> {
        self.log.barrier()?;
        self.publish();
        Ok(())
    }

    /// Publishes the committed events not yet published (a live session's feed).
    pub fn publish(&self) {
        if let Some(feed) = &self.config.feed {
            feed.publish(self.log.events());
        }
    }

    /// Appends `event` and makes it durable (a command of an idle session: PM6).
    pub fn commit(&mut self, event: Event) -> Result<(), AgentError> {
        self.log.append(event)?;
        self.durable()
    }

    /// The number the next turn gets.
    pub fn next_turn(&self) -> u64 {
        self.log.progress().next_turn()
    }

    /// Runs one turn on `input` until it ends.
    pub fn run_turn(&mut self, input: &str) -> Result<TurnReport, AgentError> {
        self.run_turn_input(None, input)
    }

    /// Runs one turn opened by `input` (with its id when it came through a live session's
    /// inbox) until it ends.
    pub fn run_turn_input(
        &mut self,
        opener: Option<&Input>,
        input: &str,
    ) -> Result<TurnReport, AgentError> {
        let turn = self.log.progress().next_turn();
        self.log.append(Event::TurnStart { turn })?;
        if let Some(opener) = opener {
            self.log.append(Event::InputReceived {
                input_id: opener.id.clone(),
                kind: opener.kind.name().to_owned(),
            })?;
        }
        self.log.append(Event::UserMessage {
            id: opener.map(|o| o.id.clone()),
            text: input.to_owned(),
        })?;
        let mut answer = String::new();
        for step in 0..self.config.max_steps {
            if let Some(cause) = self.cancelled() {
                return self.abort(turn, None, answer, cause);
            }
            self.log.append(Event::StepStart { turn, step })?;
            if step == 0
                && let Some(opener) = opener
            {
                self.log.append(Event::InputIncluded {
                    input_id: opener.id.clone(),
                    turn,
                    step,
                    carried: opener.arrived_during.is_some_and(|t| t != turn),
                })?;
            }
            if let Some(ending) = self.before_step(turn, step)? {
                return self.end(turn, Some(step), answer, ending);
            }
            let request = self.request()?;
            self.durable()?;
            let streamed = self.stream(request);
            if let Some(cause) = self.cancelled() {
                // Whatever the model sent after the cancel is not acted on.
                return self.abort(turn, Some(step), answer, cause);
            }
            let streamed = match streamed {
                Ok(streamed) => streamed,
                Err(error) => {
                    let ending = Ending::failed(TurnEndReason::Error, error);
                    return self.end(turn, Some(step), answer, ending);
                }
            };
            let reply = streamed.reply();
            let finish = streamed.finish.unwrap_or(FinishReason::Stop);
            answer.clone_from(&streamed.text);
            let calls = self.name_calls(streamed.calls);
            self.log.append(Event::AssistantMessage {
                text: streamed.text,
                tool_calls: calls.iter().map(|c| c.call.clone()).collect(),
                reasoning: streamed.reasoning,
                reply,
            })?;
            if finish == FinishReason::Length {
                // Calls of a cut answer are not run, but are answered: the next request must
                // not carry a call without a result.
                for planned in &calls {
                    self.log.append(Event::ToolResult {
                        call_id: planned.call.call_id.clone(),
                        ok: false,
                        content: "not run: the answer was cut at the model's output token limit"
                            .to_owned(),
                        sandbox: None,
                    })?;
                }
                let why = "the model's answer was cut at its output token limit".to_owned();
                let ending = Ending::failed(TurnEndReason::MaxTokens, why);
                return self.end(turn, Some(step), answer, ending);
            }
            if calls.is_empty() {
                return self.end(turn, Some(step), answer, Ending::completed());
            }
            self.run_calls(calls)?;
            if let Some(cause) = self.cancelled() {
                return self.abort(turn, Some(step), answer, cause);
            }
            self.log.append(Event::StepEnd { turn, step })?;
        }
        let why = format!(
            "the turn reached its limit of {} steps",
            self.config.max_steps
        );
        self.end(
            turn,
            None,
            answer,
            Ending::failed(TurnEndReason::Aborted, why),
        )
    }

    /// Who or what cancelled the turn, once it is cancelled.
    fn cancelled(&self) -> Option<String> {
        self.config.cancel.as_ref().and_then(|c| c())
    }

    /// Ends a turn `cause` cancelled.
    fn abort(
        &mut self,
        turn: u64,
        step: Option<u64>,
        answer: String,
        cause: String,
    ) -> Result<TurnReport, AgentError> {
        let ending = Ending {
            reason: TurnEndReason::Aborted,
            error: Some(format!("the turn was cancelled ({cause})")),
            cancelled_by: Some(cause),
        };
        self.end(turn, step, answer, ending)
    }

    /// Ends the turn (and the open step) and makes the log durable; why it did not complete,
    /// and who cancelled it, are logged with the end.
    fn end(
        &mut self,
        turn: u64,
        step: Option<u64>,
        answer: String,
        ending: Ending,
    ) -> Result<TurnReport, AgentError> {
        let Ending {
            reason,
            error,
            cancelled_by,
        } = ending;
        if let Some(step) = step {
            self.log.append(Event::StepEnd { turn, step })?;
        }
        self.log.append(Event::TurnEnd {
            turn,
            reason,
            detail: error.clone(),
            cancelled_by,
        })?;
        self.durable()?;
        Ok(TurnReport {
            turn,
            reason,
            answer,
            error,
        })
    }

    /// The pre-step: steering and injected inputs join this step (with their receipts), then
    /// the listeners decide, in order; after all accepted, each is told so. A block ends the
    /// turn `blocked`; a listener that panics ends it `error`, with the listener named.
    fn before_step(&mut self, turn: u64, step: u64) -> Result<Option<Ending>, AgentError> {
        if let Some(inbox) = self.config.inbox.clone() {
            let (received, included) = inbox.take_for_step();
            for (input_id, kind) in received {
                self.log.append(Event::InputReceived {
                    input_id,
                    kind: kind.name().to_owned(),
                })?;
            }
            for input in included {
                self.log.append(Event::UserMessage {
                    id: Some(input.id.clone()),
                    text: input.text,
                })?;
                self.log.append(Event::InputIncluded {
                    input_id: input.id,
                    turn,
                    step,
                    carried: input.arrived_during.is_some_and(|t| t != turn),
                })?;
            }
        }
        let (first, plugins) = self.config.plugins.listeners();
        let listeners: Vec<_> = first
            .into_iter()
            .chain(self.config.pre_step.iter().cloned())
            .chain(plugins)
            .collect();
        if listeners.is_empty() {
            return Ok(None);
        }
        let mut view = StepView {
            turn,
            step,
            events: self.log.events(),
            add_messages: Vec::new(),
            append: Vec::new(),
        };
        let guarded = |name: &str, f: &mut dyn FnMut() -> Option<Ending>| {
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_else(|_| {
                tracing::error!("the pre-step listener `{name}` panicked");
                Some(Ending::failed(
                    TurnEndReason::Error,
                    format!("the pre-step listener `{name}` failed (it panicked)"),
                ))
            })
        };
        for listener in &listeners {
            let ending = guarded(
                listener.name(),
                &mut || match listener.before_step(&mut view) {
                    StepVerdict::Accept => None,
                    StepVerdict::Block(why) => Some(Ending {
                        reason: TurnEndReason::Blocked,
                        error: Some(format!("blocked by `{}`: {why}", listener.name())),
                        cancelled_by: None,
                    }),
                },
            );
            if ending.is_some() {
                return Ok(ending);
            }
        }
        // Which listener put which events to append (so a failed append is told to it).
        let mut owners: Vec<(usize, usize)> = Vec::new();
        if self.cancelled().is_none() {
            for (index, listener) in listeners.iter().enumerate() {
                let before = view.append.len();
                let ending = guarded(listener.name(), &mut || {
                    listener.accepted(&mut view);
                    None
                });
                owners.extend((before..view.append.len()).map(|i| (i, index)));
                if ending.is_some() {
                    return Ok(ending);
                }
            }
        }
        let StepView {
            add_messages,
            append,
            ..
        } = view;
        for (i, event) in append.into_iter().enumerate() {
            let owner = owners.iter().find(|(e, _)| *e == i).map(|(_, l)| *l);
            if let Err(e) = self.append_checked(event.clone()) {
                // A listener's event that cannot be logged does not block the step.
                let name = owner.map_or("?", |l| listeners[l].name());
                tracing::warn!("the pre-step listener `{name}`: its event was not logged: {e}");
                if let Some(l) = owner {
                    listeners[l].append_failed(&event, &e.to_string());
                }
            }
        }
        for text in add_messages {
            self.log.append(Event::UserMessage { id: None, text })?;
        }
        Ok(None)
    }

    /// The next request, built from the log alone; its header is logged when it changed.
    fn request(&mut self) -> Result<ModelRequest, AgentError> {
        let mut sections = self.config.sections.clone();
        sections.extend(self.config.plugins.sections(self.log.events()));
        let tools = self.tools.schemas();
        self.derived.update(&self.log);
        sections.sort_by_key(|s| s.order);
        let header = RequestHeader {
            sections,
            tools,
            model: self.route.clone(),
        };
        if self.derived.header.as_ref() != Some(&header) {
            self.log.append(Event::RequestHeader(header))?;
            self.derived.update(&self.log);
        }
        let header = self.derived.header.clone().unwrap_or(RequestHeader {
            sections: Vec::new(),
            tools: Vec::new(),
            model: String::new(),
        });
        Ok(ModelRequest {
            system: header.sections,
            messages: std::sync::Arc::clone(&self.derived.messages),
            tools: header.tools,
        })
    }

    /// Gives every call an id no other call of the session has (a model may repeat or omit
    /// them), and decides which may run concurrently.
    fn name_calls(&mut self, calls: Vec<ToolCall>) -> Vec<PlannedCall> {
        self.derived.update(&self.log);
        // The session's ids and this step's, without copying the session's.
        let used = &self.derived.call_ids;
        let mut named = std::collections::HashSet::new();
        let next = self.log.next_seq();
        let tools = self.tools;
        calls
            .into_iter()
            .enumerate()
            .map(|(i, mut call)| {
                let seen = |id: &String, named: &std::collections::HashSet<String>| {
                    used.contains(id) || named.contains(id)
                };
                if call.call_id.is_empty() || seen(&call.call_id, &named) {
                    let mut n = 0;
                    call.call_id = format!("bridle_{next}_{i}");
                    while seen(&call.call_id, &named) {
                        n += 1;
                        call.call_id = format!("bridle_{next}_{i}_{n}");
                    }
                }
                named.insert(call.call_id.clone());
                let concurrent = tools.concurrency_safe(&call.name, &call.arguments);
                PlannedCall { call, concurrent }
            })
            .collect()
    }

    /// Runs a step's calls: consecutive concurrency-safe calls together (up to the limit),
    /// every other call alone after the ones before it. Results are logged in the model's
    /// order.
    fn run_calls(&mut self, calls: Vec<PlannedCall>) -> Result<(), AgentError> {
        let mut batches: Vec<Vec<ToolCall>> = Vec::new();
        let mut open_batch = false;
        for planned in calls {
            let fits = open_batch
                && batches
                    .last()
                    .is_some_and(|b| b.len() < self.config.max_parallel.max(1));
            if planned.concurrent && fits {
                if let Some(batch) = batches.last_mut() {
                    batch.push(planned.call);
                }
            } else {
                batches.push(vec![planned.call]);
            }
            open_batch = planned.concurrent;
        }
        for batch in batches {
            if self.cancelled().is_some() {
                // Never started: answered, so the log stays balanced.
                for call in &batch {
                    self.log.append(Event::ToolResult {
                        call_id: call.call_id.clone(),
                        ok: false,
                        content: "aborted before dispatch: the turn was cancelled".to_owned(),
                        sandbox: None,
                    })?;
                }
                continue;
            }
            for call in &batch {
                self.log.append(Event::ToolCall(call.clone()))?;
            }
            let outcomes = self.run_batch(&batch)?;
            for (call, outcome) in batch.iter().zip(outcomes) {
                for event in quarantine_events(&call.call_id, outcome.sandbox.as_ref()) {
                    self.log.append(event)?;
                }
                self.log.append(Event::ToolResult {
                    call_id: call.call_id.clone(),
                    ok: outcome.ok,
                    content: outcome.content,
                    sandbox: outcome.sandbox,
                })?;
            }
        }
        Ok(())
    }

    /// Runs `batch` (alone, or side by side), recording every decision as it is taken and
    /// making the log durable before an allowed call runs.
    fn run_batch(&mut self, batch: &[ToolCall]) -> Result<Vec<ToolOutcome>, AgentError> {
        let tools = self.tools;
        let feed = self.config.feed.clone();
        let log = Mutex::new(&mut self.log);
        let run = |call: &ToolCall| {
            let note = |n: ToolNote| -> Result<(), String> {
                let mut log = log
                    .lock()
                    .map_err(|_| "the session log lock was poisoned")?;
                let event = match n {
                    ToolNote::ApprovalAsked { question } => Event::ApprovalAsked {
                        call_id: call.call_id.clone(),
                        question,
                    },
                    ToolNote::ApprovalDecided { answer, by } => Event::ApprovalDecided {
                        call_id: call.call_id.clone(),
                        answer,
                        by,
                    },
                    ToolNote::Decided { decision, by } => Event::ToolDecision {
                        call_id: call.call_id.clone(),
                        decision,
                        by,
                    },
                    ToolNote::ExecDecided(exec) => Event::ExecDecision {
                        call_id: call.call_id.clone(),
                        exec,
                    },
                    ToolNote::Network(d) => Event::NetDecision(crate::log::NetDecision {
                        call_id: call.call_id.clone(),
                        host: d.host,
                        port: d.port,
                        decision: d.decision,
                        by: d.by,
                        error: d.error,
                        connections: d.connections,
                        sent: d.sent,
                        received: d.received,
                    }),
                };
                let runs = matches!(
                    event,
                    Event::ToolDecision {
                        decision: bridle_policy::Decision::Allow,
                        ..
                    }
                );
                log.append(event).map_err(|e| e.to_string())?;
                // A barrier before each tool execution.
                if runs {
                    log.barrier().map_err(|e| e.to_string())?;
                    if let Some(feed) = &feed {
                        feed.publish(log.events());
                    }
                }
                Ok(())
            };
            let mut failed = None;
            let outcome = tools.call(call, &mut |n| {
                note(n).inspect_err(|e| {
                    failed.get_or_insert(e.clone());
                })
            });
            match failed {
                Some(reason) => not_recorded(&reason),
                None => outcome,
            }
        };
        let outcomes: Vec<ToolOutcome> = if batch.len() == 1 {
            // A tool that panics fails its call; the turn goes on and the log stays balanced.
            batch
                .iter()
                .map(|call| {
                    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run(call)))
                        .unwrap_or_else(|_| panicked())
                })
                .collect()
        } else {
            std::thread::scope(|scope| {
                let handles: Vec<_> = batch.iter().map(|call| scope.spawn(|| run(call))).collect();
                handles
                    .into_iter()
                    .map(|h| h.join().unwrap_or_else(|_| panicked()))
                    .collect()
            })
        };
        Ok(outcomes)
    }
}
