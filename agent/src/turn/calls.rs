//! A step's tool calls: named so that no two calls of a session share an id, run (the
//! concurrency-safe ones together), and logged in the model's order with what the sandbox
//! moved aside.

use std::sync::Mutex;

use super::Agent;
use crate::AgentError;
use crate::log::{Event, ToolCall};
use crate::tools::{ToolNote, ToolOutcome, not_recorded};

/// One `sandbox/quarantine` event for each thing the sandbox facts of a call say bridle moved
/// aside when its command ended (`quarantined: [{path, reason, moved_to}]`).
pub(super) fn quarantine_events(call_id: &str, sandbox: Option<&serde_json::Value>) -> Vec<Event> {
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

/// The outcome of a call whose tool panicked.
pub(super) fn panicked() -> ToolOutcome {
    ToolOutcome {
        ok: false,
        content: "the tool failed unexpectedly (it panicked); nothing is known about its effects"
            .to_owned(),
        sandbox: None,
    }
}

/// One call of a step, with the id the log knows it by.
pub(super) struct PlannedCall {
    pub(super) call: ToolCall,
    concurrent: bool,
}

impl Agent<'_> {
    /// Gives every call an id no other call of the session has (a model may repeat or omit
    /// them), and decides which may run concurrently.
    pub(super) fn name_calls(&mut self, calls: Vec<ToolCall>) -> Vec<PlannedCall> {
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
    pub(super) fn run_calls(&mut self, calls: Vec<PlannedCall>) -> Result<(), AgentError> {
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
    pub(super) fn run_batch(&mut self, batch: &[ToolCall]) -> Result<Vec<ToolOutcome>, AgentError> {
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
                    ToolNote::Network(d) => {
                        Event::NetDecision(crate::log::NetDecision::of(call.call_id.clone(), d))
                    }
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
