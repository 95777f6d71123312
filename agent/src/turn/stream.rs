//! One model request of a step, streamed: chunks are logged as they come, and the whole answer
//! (text, reasoning, tool calls, and what the model reported about it) comes back to the loop.

use std::collections::BTreeMap;

use super::Agent;
use crate::log::{Event, Reply, ToolCall, Usage};
use crate::model::{Chunk, FinishReason, ModelRequest};

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

impl Agent<'_> {
    /// Streams the answer, logging text and reasoning chunks as they come; returns the whole
    /// answer. The model runs on its own thread, so a cancel does not wait for a read that is
    /// blocked: the request is abandoned (and the model with it).
    pub(super) fn stream(&mut self, request: &ModelRequest) -> Result<Answer, String> {
        let Some(mut model) = self.model.take() else {
            return Err(
                "the model is gone: its last request was abandoned when a turn was cancelled"
                    .to_owned(),
            );
        };
        let (tx, rx) = std::sync::mpsc::channel::<Chunk>();
        let asked = request.clone();
        let worker = std::thread::spawn(move || {
            let result = model.stream(&asked, &mut |chunk| {
                let _ = tx.send(chunk);
            });
            (model, result)
        });
        let mut text = String::new();
        let mut reasoning = String::new();
        let mut calls: BTreeMap<usize, ToolCall> = BTreeMap::new();
        let mut finish = None;
        let mut model_id = None;
        let mut usage = None;
        loop {
            if self.cancelled().is_some() {
                return Err("the turn was cancelled".to_owned());
            }
            let chunk = match rx.recv_timeout(std::time::Duration::from_millis(50)) {
                Ok(chunk) => chunk,
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => continue,
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
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
        }
        let (model, result) = worker
            .join()
            .map_err(|_| "the model adapter failed unexpectedly (it panicked)".to_owned())?;
        self.model = Some(model);
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
