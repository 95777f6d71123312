//! What reaches the terminal while the person types: every line goes through rustyline's
//! external printer, which prints it above the prompt and redraws the line being edited. Two
//! threads feed it: one renders the session's committed events, one shows each question the
//! session asks (and files it for the next typed line to answer).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use bridle_agent::log::Event;
use bridle_agent::session::{Committed, Questions};
use rustyline::ExternalPrinter;
use tokio::sync::mpsc::UnboundedReceiver;

use super::ask::Asked;
use super::render::Renderer;

/// The terminal's output side, shared by the threads that print.
#[derive(Clone)]
pub struct Screen {
    printer: Arc<Mutex<Box<dyn ExternalPrinter + Send>>>,
}

impl std::fmt::Debug for Screen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Screen").finish_non_exhaustive()
    }
}

impl Screen {
    pub fn new(printer: Box<dyn ExternalPrinter + Send>) -> Screen {
        Screen {
            printer: Arc::new(Mutex::new(printer)),
        }
    }

    /// Prints `lines` above the prompt (nothing when there are none).
    pub fn print(&self, lines: &[String]) {
        if lines.is_empty() {
            return;
        }
        self.raw(lines.join("\n"));
    }

    /// Prints one line.
    pub fn line(&self, line: &str) {
        self.raw(line.to_owned());
    }

    fn raw(&self, mut text: String) {
        // Outside the editor the printer writes the text as it is: end the line, so the next
        // prompt does not overwrite it.
        text.push('\n');
        let mut printer = self
            .printer
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        // A terminal that is gone has nobody to show this to.
        let _ = printer.print(text);
    }
}

/// Renders the committed events of `feed` from sequence number `first` on, until the session
/// ends (its feed closes); `turn_open` follows the turns the feed shows (the prompt's label).
pub fn show_events(
    screen: Screen,
    mut feed: UnboundedReceiver<Committed>,
    first: u64,
    colour: bool,
    turn_open: Arc<AtomicBool>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let mut renderer = Renderer::new(colour);
        while let Some(committed) = feed.blocking_recv() {
            // The question itself was shown when it was asked (with more than the log's line).
            if committed.seq < first || matches!(committed.event, Event::ApprovalAsked { .. }) {
                continue;
            }
            match committed.event {
                Event::TurnStart { .. } => turn_open.store(true, Ordering::SeqCst),
                Event::TurnEnd { .. } => turn_open.store(false, Ordering::SeqCst),
                _ => {}
            }
            let mut lines = renderer.event(&committed.event);
            // The turn is over: a blank line, and the prompt redrawn as idle.
            if matches!(committed.event, Event::TurnEnd { .. }) {
                lines.push(String::new());
            }
            screen.print(&lines);
        }
        screen.print(&renderer.flush());
    })
}

/// Shows each question the session asks and files it in `asked`, until the session's
/// answerer is gone.
pub fn show_questions(
    screen: Screen,
    mut questions: Questions,
    asked: Arc<Asked>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        loop {
            match questions.try_recv() {
                Ok(question) => {
                    if let Some(lines) = asked.push(question) {
                        screen.print(&lines);
                    }
                }
                // Meanwhile, a question the session gave up stops waiting for an answer.
                Err(tokio::sync::mpsc::error::TryRecvError::Empty) => {
                    screen.print(&asked.prune());
                    std::thread::sleep(std::time::Duration::from_millis(100));
                }
                Err(tokio::sync::mpsc::error::TryRecvError::Disconnected) => break,
            }
        }
    })
}
