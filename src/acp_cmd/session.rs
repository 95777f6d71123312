//! One ACP session's life: opened on a prepared bridle session, its log watched into
//! updates, prompts submitted (or steering), config choices applied by restarting it.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use agent_client_protocol::Error;
use agent_client_protocol::v1::Responder;
use agent_client_protocol::v1::schema::{ContentBlock, PromptResponse};
use anyhow::Result;
use bridle_agent::front::acp::{self, AcpUpdates, Ceiling, ConfigChoice};
use bridle_agent::log::Event;
use bridle_agent::session::{Questions, SessionError};

use super::{Entry, Out, internal, invalid, lock};
use crate::session_wiring::{Hooks, Live, Prepared};

/// Folds every event sealed into the log into updates for the client, in order; also
/// remembers the latest call of each tool, and under "" the latest of all (for the questions
/// that name no call).
pub(super) fn watch(
    prepared: &mut Prepared,
    ceiling: Ceiling,
    out: tokio::sync::mpsc::UnboundedSender<Out>,
    calls: Arc<Mutex<HashMap<String, String>>>,
) {
    let mut fold = AcpUpdates::live().with_ceiling(ceiling);
    for (_, event) in prepared.log.events() {
        fold.observe(event);
    }
    prepared.log.watch(move |_, event| {
        if let Event::ToolCall(call) = event {
            let mut calls = lock(&calls);
            calls.insert(call.name.clone(), call.call_id.clone());
            calls.insert(String::new(), call.call_id.clone());
        }
        for update in fold.updates(event) {
            let _ = out.send(Out::Update(Box::new(update)));
        }
    });
}

/// Starts `prepared`; its turn reports join the updates' channel after the turn's events.
pub(super) fn start(
    prepared: Prepared,
    out: &tokio::sync::mpsc::UnboundedSender<Out>,
) -> Result<(Live, Option<Questions>)> {
    let mut live = prepared.start(Hooks {
        // A turn that a signal to bridle ends says so.
        cancel: Some(Arc::new(|| {
            bridle_sandbox::launcher::termination_signal().map(|name| format!("signal {name}"))
        })),
        // Only this session's commands: the connection's other sessions go on.
        on_cancel: None,
    })?;
    if let Some(mut reports) = live.session.reports() {
        let out = out.clone();
        std::thread::Builder::new()
            .name("bridle-acp-reports".into())
            .spawn(move || {
                while let Some(report) = reports.blocking_recv() {
                    let _ = out.send(Out::Ended(report));
                }
            })?;
    }
    let questions = live.questions.take();
    Ok((live, questions))
}

impl Entry {
    /// Opens a turn with `text`, or steers the running one; `responder` answers when the
    /// turn ends.
    pub(super) fn prompt(
        &self,
        text: &str,
        responder: Responder<PromptResponse>,
    ) -> Result<(), Error> {
        let ticket = self.next_ticket.fetch_add(1, Ordering::SeqCst);
        lock(&self.waiters).push((ticket, responder));
        let submitted = {
            let live = lock(&self.live);
            match live.as_ref() {
                None => Err(SessionError::Closed),
                Some(live) => {
                    if !live.session.is_running() {
                        self.cancelled.store(false, Ordering::SeqCst);
                    }
                    match live.session.prompt(text) {
                        Err(SessionError::Busy { .. }) => live.session.steer(text),
                        other => other,
                    }
                }
            }
        };
        if let Err(e) = submitted {
            let mut waiters = lock(&self.waiters);
            if let Some(i) = waiters.iter().position(|(t, _)| *t == ticket) {
                let (_, responder) = waiters.remove(i);
                drop(waiters);
                return responder.respond_with_error(invalid(e));
            }
        }
        Ok(())
    }

    /// Applies a config option: the session (idle) restarts on the same log under the new
    /// policy, which the log records. Returns the new session's questions.
    pub(super) fn choose(&self, choice: ConfigChoice) -> Result<Option<Questions>, Error> {
        let mut slot = lock(&self.live);
        let live = slot
            .take()
            .ok_or_else(|| internal("the session is closed"))?;
        if live.session.is_running() {
            *slot = Some(live);
            return Err(invalid(
                "a turn is running: change the session's configuration when it has ended",
            ));
        }
        let mut overrides = live.request().overrides.clone();
        let mut approval = live.request().approval;
        let mut current = *lock(&self.current);
        match choice {
            ConfigChoice::Mode(m) => {
                overrides.mode = Some(m);
                current.mode = m;
            }
            ConfigChoice::Network(n) => {
                overrides.network = Some(n);
                current.network = n;
            }
            ConfigChoice::Approval(a) => {
                approval = Some(a);
                current.approval = a;
            }
        }
        let replanned = match live.replan(overrides, approval) {
            Ok(r) => r,
            Err(e) => {
                *slot = Some(live);
                return Err(invalid(format!("{e:#}")));
            }
        };
        let prepared = live
            .restart(replanned)
            .map_err(|e| internal(format!("{e:#}")))?;
        let (live, questions) =
            start(prepared, &self.out).map_err(|e| internal(format!("{e:#}")))?;
        *slot = Some(live);
        *lock(&self.current) = current;
        Ok(questions)
    }
}

pub(super) fn config_options(
    entry: &Entry,
) -> Vec<agent_client_protocol::v1::schema::SessionConfigOption> {
    acp::config_options(&entry.ceiling, *lock(&entry.current))
}

/// The prompt's text: its text blocks, and resource links as `[name](uri)`.
pub(super) fn prompt_text(blocks: &[ContentBlock]) -> Result<String, String> {
    let mut text = String::new();
    for block in blocks {
        match block {
            ContentBlock::Text(t) => text.push_str(&t.text),
            ContentBlock::ResourceLink(link) => {
                text.push_str(&format!("[{}]({})", link.name, link.uri));
            }
            _ => {
                return Err(
                    "prompt: only text and resource links are supported (see the agent's \
                     promptCapabilities)"
                        .to_owned(),
                );
            }
        }
    }
    Ok(text)
}
