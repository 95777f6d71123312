//! The line-editor loop of `bridle chat`: reads lines with rustyline (editing, history) and
//! carries out what [`super::input`] decided: a prompt, steering, `/queue`, a session
//! command, an answer to the question shown, Ctrl-C and Ctrl-D. The prompt's label follows
//! the session: `you` when idle, `steer` while a turn runs, `y/n` or `review` while a question
//! waits; it is redrawn whenever something is printed above it.

use std::sync::atomic::{AtomicBool, Ordering};

use bridle_agent::session::{Session, SessionError};
use rustyline::error::ReadlineError;
use rustyline::history::History;

use super::ask::{Answered, Asked};
use super::input::{self, HELP, Input, KeyAction};
use super::screen::Screen;

/// How the loop ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Ending {
    /// Ctrl-D, or Ctrl-C at an empty prompt.
    Exit,
    /// `/resume [ID]`.
    Resume(Option<String>),
}

/// The prompt, as wide in every state (rustyline measures it once per line).
struct LivePrompt<'a> {
    turn_open: &'a AtomicBool,
    asked: &'a Asked,
    raw: [String; 4],
    styled: [String; 4],
}

const LABELS: [&str; 4] = ["you", "steer", "y/n", "review"];

impl<'a> LivePrompt<'a> {
    fn new(turn_open: &'a AtomicBool, asked: &'a Asked, colour: bool) -> Self {
        let raw = LABELS.map(|l| format!("{l:>6} › "));
        let styled = LABELS.map(|l| {
            if colour {
                format!("\u{1b}[1;36m{l:>6}\u{1b}[0m › ")
            } else {
                format!("{l:>6} › ")
            }
        });
        LivePrompt {
            turn_open,
            asked,
            raw,
            styled,
        }
    }

    fn state(&self) -> usize {
        if self.asked.waiting() {
            if self.asked.reviewing() { 3 } else { 2 }
        } else if self.turn_open.load(Ordering::SeqCst) {
            1
        } else {
            0
        }
    }
}

impl rustyline::Prompt for LivePrompt<'_> {
    fn raw(&self) -> &str {
        &self.raw[self.state()]
    }

    fn styled(&self) -> &str {
        &self.styled[self.state()]
    }
}

/// The line editor and what it drives.
pub struct Repl<'a, H: History> {
    pub editor: &'a mut rustyline::Editor<(), H>,
    pub session: &'a Session,
    pub asked: &'a Asked,
    /// Whether the feed shows a turn open (what the prompt's label follows; the session may
    /// have started or ended one a moment earlier).
    pub turn_open: &'a AtomicBool,
    pub screen: Screen,
    pub colour: bool,
    /// Called when a Ctrl-C cancels the running turn (after [`Session::cancel`]).
    pub on_cancel: &'a dyn Fn(),
    /// Whether the line was empty at the last Ctrl-C (set by [`input::CtrlC`]).
    pub line_was_empty: &'a AtomicBool,
    /// The session a `/resume ID` names, or why none: a bad id keeps this session.
    pub find: &'a dyn Fn(&str) -> Result<String, String>,
}

impl<H: History> Repl<'_, H> {
    /// Reads and carries out lines until the person exits or switches sessions.
    pub fn run(&mut self) -> anyhow::Result<Ending> {
        loop {
            let prompt = LivePrompt::new(self.turn_open, self.asked, self.colour);
            let read = self.editor.readline(&prompt);
            drop(prompt);
            let line = match read {
                Ok(line) => line,
                Err(ReadlineError::Interrupted) => {
                    let running = self.session.is_running() || self.asked.waiting();
                    let empty = self.line_was_empty.load(Ordering::SeqCst);
                    match input::ctrl_c(running, empty) {
                        KeyAction::CancelTurn => self.cancel(),
                        KeyAction::Cleared => {}
                        KeyAction::Exit => return Ok(Ending::Exit),
                    }
                    continue;
                }
                Err(ReadlineError::Eof) => return Ok(Ending::Exit),
                // The terminal changed size: rustyline redraws; nothing else to do.
                Err(ReadlineError::Signal(_)) => continue,
                Err(e) => return Err(anyhow::Error::new(e).context("reading the terminal")),
            };
            // A question waits: the line answers it (a `/` command still runs, so `/help`
            // works while the agent waits).
            if self.asked.waiting() && !line.trim_start().starts_with('/') {
                match self.asked.answer(&line) {
                    Answered::Done { what, next } => {
                        self.screen.line(&format!("  → {what}"));
                        self.screen.print(&next);
                    }
                    Answered::Again(why) => self.screen.line(&format!("  {why}")),
                }
                continue;
            }
            if !line.trim().is_empty() {
                let _ = self.editor.add_history_entry(line.trim());
            }
            if let Some(ending) = self.carry_out(input::parse(&line, self.session.is_running())) {
                return Ok(ending);
            }
        }
    }

    fn carry_out(&self, input: Input) -> Option<Ending> {
        let said = match input {
            Input::Nothing => return None,
            Input::Prompt(text) => match self.session.prompt(&text) {
                // A turn began meanwhile (a queued one): the text steers it.
                Err(SessionError::Busy { .. }) => self.session.steer(&text).map(|_| None),
                other => other.map(|_| None),
            },
            Input::Steer(text) => self.session.steer(&text).map(|_| None),
            Input::Queue(text) => self
                .session
                .queue(&text)
                .map(|_| Some("queued: it runs as the next turn".to_owned())),
            Input::Command(text) => self.session.command(&text).map(Some),
            Input::Resume(None) => return Some(Ending::Resume(None)),
            Input::Resume(Some(id)) => match (self.find)(&id) {
                Ok(id) => return Some(Ending::Resume(Some(id))),
                Err(why) => {
                    self.screen
                        .line(&format!("bridle: {}", lines(&why).join(" ")));
                    return None;
                }
            },
            Input::Help => Ok(Some(HELP.to_owned())),
            Input::Refused(why) => Ok(Some(why)),
        };
        match said {
            Ok(Some(text)) => self.screen.print(&lines(&text)),
            Ok(None) => {}
            Err(e) => self.screen.line(&format!("bridle: {e}")),
        }
        None
    }

    fn cancel(&self) {
        let dropped = self.session.cancel();
        (self.on_cancel)();
        let given_up = self.asked.give_up();
        self.screen
            .line(&cancel_notice(given_up > 0, dropped.len()));
    }
}

/// What the person is told when Ctrl-C cancels the turn: the question withdrawn, and the
/// steering messages no step took (the cancel drops them: they never reach the model).
fn cancel_notice(question: bool, dropped: usize) -> String {
    let mut notice = "(cancelling the turn".to_owned();
    if question {
        notice.push_str("; the question is withdrawn");
    }
    match dropped {
        0 => {}
        1 => notice.push_str("; your message not yet sent to the model is dropped"),
        n => notice.push_str(&format!(
            "; your {n} messages not yet sent to the model are dropped"
        )),
    }
    notice.push(')');
    notice
}

/// `text` as escaped lines (a command's reply may quote what the model wrote).
fn lines(text: &str) -> Vec<String> {
    text.lines()
        .map(bridle_exec::printable::printable)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::cancel_notice;

    #[test]
    fn a_cancel_says_which_messages_it_dropped() {
        assert_eq!(cancel_notice(false, 0), "(cancelling the turn)");
        assert_eq!(
            cancel_notice(true, 1),
            "(cancelling the turn; the question is withdrawn; your message not yet sent to \
             the model is dropped)"
        );
        assert!(cancel_notice(false, 2).contains("your 2 messages"));
    }
}
