//! The turn/step loop: user input opens a turn; each step is one model request (built from
//! the session log alone) and the tool calls it produced; the turn ends when a step ends
//! without tool calls, on max-tokens, on an error, or at the step limit. Everything is
//! recorded in the session log before it is acted on.

mod calls;
mod derived;
mod stream;
#[cfg(test)]
mod tests;

use crate::AgentError;
use crate::log::{Event, PromptSection, RequestHeader, SessionLog, TurnEndReason};
use crate::model::{FinishReason, Model, ModelRequest};
use crate::plugin::PluginHost;

use crate::session::{Feed, Inbox, Input, PreStep, StepVerdict, StepView};
use crate::tools::ToolHost;

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

    /// Appends `events` and makes them durable together.
    pub(crate) fn commit_all(
        &mut self,
        events: impl IntoIterator<Item = Event>,
    ) -> Result<(), AgentError> {
        for event in events {
            self.log.append(event)?;
        }
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
        // A queued input a step of an earlier turn saw arriving is received-logged already.
        if let Some(opener) = opener
            && !opener.received_logged
        {
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
}
