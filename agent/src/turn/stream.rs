//! One model request of a step, streamed: chunks are logged as they come, and the whole answer
//! (text, reasoning, tool calls, and what the model reported about it) comes back to the loop.

use std::collections::BTreeMap;

use super::Agent;
use crate::log::{Event, Reply, ToolCall, Usage};
use crate::model::{Chunk, FinishReason, Model, ModelError, ModelRequest};

/// A model's whole answer to one request.
pub(super) struct Answer {
    pub(super) text: String,
    pub(super) reasoning: String,
    /// The tool calls, by index.
    pub(super) calls: Vec<ToolCall>,
    /// `None` when the model never said why it stopped.
    pub(super) finish: Option<FinishReason>,
    model: Option<String>,
    usage: Option<Usage>,
}

impl Answer {
    /// What the model reported about the answer, as logged.
    pub(super) fn reply(&self) -> Option<Reply> {
        let reply = Reply {
            model: self.model.clone(),
            finish: self.finish.as_ref().map(|f| f.as_str().to_owned()),
            usage: self.usage,
        };
        (reply != Reply::default()).then_some(reply)
    }
}

/// What the model's thread sends back while it answers a request.
enum FromModel {
    Chunk(Chunk),
    /// The answer is complete (the request was dropped before this is sent).
    Done(Result<(), ModelError>),
}

/// The model on a thread of its own, started at the first request and kept for the agent's
/// life: a request is handed over and its chunks come back, without a thread started per
/// request. A request a cancel abandoned leaves the thread (and the model) to finish it
/// alone.
pub(super) struct ModelThread {
    /// `None` once dropped, which tells the thread to stop.
    requests: Option<std::sync::mpsc::Sender<ModelRequest>>,
    replies: std::sync::mpsc::Receiver<FromModel>,
    thread: Option<std::thread::JoinHandle<()>>,
    /// A request was handed over and its answer not yet read to the end.
    busy: bool,
}

impl ModelThread {
    fn start(mut model: Box<dyn Model>) -> Result<Self, String> {
        let (requests, asked) = std::sync::mpsc::channel::<ModelRequest>();
        let (tx, replies) = std::sync::mpsc::channel::<FromModel>();
        let thread = std::thread::Builder::new()
            .name("bridle-model".to_owned())
            .spawn(move || {
                while let Ok(request) = asked.recv() {
                    let result = model.stream(&request, &mut |chunk| {
                        let _ = tx.send(FromModel::Chunk(chunk));
                    });
                    // The loop extends the messages in place only when nobody else holds them.
                    drop(request);
                    if tx.send(FromModel::Done(result)).is_err() {
                        break;
                    }
                }
            })
            .map_err(|e| format!("the model's thread could not be started: {e}"))?;
        Ok(Self {
            requests: Some(requests),
            replies,
            thread: Some(thread),
            busy: false,
        })
    }
}

impl Drop for ModelThread {
    fn drop(&mut self) {
        self.requests = None;
        // An idle thread ends now; one still answering an abandoned request is left to it.
        if let Some(thread) = self.thread.take()
            && !self.busy
        {
            let _ = thread.join();
        }
    }
}

/// The agent's model: not yet on its thread, on it, or gone.
pub(super) enum ModelSlot {
    Ready(Box<dyn Model>),
    Threaded(ModelThread),
    /// A cancelled turn abandoned its request, or the model panicked.
    Gone(&'static str),
}

impl Agent<'_> {
    /// Streams the answer, logging text and reasoning chunks as they come; returns the whole
    /// answer. The model runs on its own thread, so a cancel does not wait for a read that is
    /// blocked: the request is abandoned (and the model with it).
    pub(super) fn stream(&mut self, request: ModelRequest) -> Result<Answer, String> {
        let slot = std::mem::replace(
            &mut self.model,
            ModelSlot::Gone(
                "the model is gone: its last request was abandoned when a turn was cancelled",
            ),
        );
        let mut model = match slot {
            ModelSlot::Ready(model) => ModelThread::start(model)?,
            ModelSlot::Threaded(thread) => thread,
            ModelSlot::Gone(why) => {
                self.model = ModelSlot::Gone(why);
                return Err(why.to_owned());
            }
        };
        let sent = model
            .requests
            .as_ref()
            .is_some_and(|r| r.send(request).is_ok());
        if !sent {
            self.model = ModelSlot::Gone(PANICKED);
            return Err(PANICKED.to_owned());
        }
        model.busy = true;
        let mut text = String::new();
        let mut reasoning = String::new();
        let mut calls: BTreeMap<usize, ToolCall> = BTreeMap::new();
        let mut finish = None;
        let mut model_id = None;
        let mut usage = None;
        let result = loop {
            if self.cancelled().is_some() {
                return Err("the turn was cancelled".to_owned());
            }
            let chunk = match model
                .replies
                .recv_timeout(std::time::Duration::from_millis(50))
            {
                Ok(FromModel::Chunk(chunk)) => chunk,
                Ok(FromModel::Done(result)) => break result,
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => continue,
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                    self.model = ModelSlot::Gone(PANICKED);
                    return Err(PANICKED.to_owned());
                }
            };
            let logged = match chunk {
                Chunk::Text(piece) => {
                    text.push_str(&piece);
                    self.log.append(Event::AssistantChunk {
                        text: piece,
                        reasoning: false,
                    })
                }
                Chunk::Reasoning(piece) => {
                    reasoning.push_str(&piece);
                    self.log.append(Event::AssistantChunk {
                        text: piece,
                        reasoning: true,
                    })
                }
                Chunk::ToolCallDelta {
                    index,
                    id,
                    name,
                    arguments,
                } => {
                    let call = calls.entry(index).or_insert_with(|| ToolCall {
                        call_id: String::new(),
                        name: String::new(),
                        arguments: String::new(),
                    });
                    if let Some(id) = id {
                        call.call_id = id;
                    }
                    if let Some(name) = name {
                        call.name = name;
                    }
                    call.arguments.push_str(&arguments);
                    Ok(0)
                }
                Chunk::Usage { input, output } => {
                    usage = Some(Usage {
                        prompt_tokens: input,
                        completion_tokens: output,
                    });
                    Ok(0)
                }
                Chunk::Model(id) => {
                    model_id = Some(id);
                    Ok(0)
                }
                Chunk::Finish(reason) => {
                    finish = Some(reason);
                    Ok(0)
                }
            };
            if let Err(e) = logged {
                return Err(format!(
                    "the session log failed while the answer streamed: {e}"
                ));
            }
        };
        model.busy = false;
        self.model = ModelSlot::Threaded(model);
        result.map_err(|e| e.to_string())?;
        Ok(Answer {
            text,
            reasoning,
            calls: calls.into_values().collect(),
            finish,
            model: model_id,
            usage,
        })
    }
}

/// Why a request failed when the model's thread ended without answering.
const PANICKED: &str = "the model adapter failed unexpectedly (it panicked)";
