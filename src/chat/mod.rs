//! `bridle chat`: the interactive terminal on a live session (sessions.md "Front ends").
//!
//! The session is the one every front end opens ([`crate::session_wiring`]), with a
//! [`ChannelAnswerer`](bridle_agent::session::ChannelAnswerer) whose questions this terminal
//! answers. Three threads share the terminal: the line editor ([`repl`], the main thread),
//! the committed-event feed rendered above the prompt ([`render`], [`screen`]), and the
//! questions the session asks ([`ask`]). rustyline follows resizes (SIGWINCH) itself.
//!
//! Signals: Ctrl-C is a key here (the editor reads it raw); SIGINT outside the editor is
//! ignored, so it never kills bridle while a turn runs. SIGTERM and SIGHUP cancel the turn,
//! kill the tools' trees, restore the terminal and make bridle die of the signal.

pub mod ask;
pub mod input;
pub mod render;
mod repl;
mod screen;

use std::io::IsTerminal;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::{Context, Result};
use bridle_agent::log::SessionDir;
use rustyline::config::{Behavior, ColorMode, Config};

use crate::UsageError;
use crate::cli::{ChatArgs, GlobalArgs};
use crate::session_wiring::{self, Asking, Hooks, Open, Request, say};

use repl::{Ending, Repl};

/// Runs `bridle chat`; returns the exit status (0 when the person leaves).
pub fn run(global: &GlobalArgs, args: &ChatArgs) -> Result<u8> {
    if !std::io::stdin().is_terminal() || !std::io::stdout().is_terminal() {
        return Err(UsageError(
            "bridle chat needs a terminal on stdin and stdout (for scripts: bridle run TASK)"
                .to_owned(),
        )
        .into());
    }
    bridle_sandbox::launcher::hold_termination();
    bridle_sandbox::launcher::ignore_terminal_signals();
    let terminal = nix::sys::termios::tcgetattr(std::io::stdin()).ok();
    let colour = render::colour();
    let config = Config::builder()
        .auto_add_history(false)
        .history_ignore_space(true)
        .max_history_size(1000)?
        .behavior(Behavior::PreferTerm)
        .color_mode(if colour {
            ColorMode::Forced
        } else {
            ColorMode::Disabled
        })
        .build();
    let mut editor = rustyline::DefaultEditor::with_config(config)?;
    // The no-op helper: with it rustyline draws the prompt's styled (coloured) form.
    editor.set_helper(Some(()));
    let ctrl_c = input::CtrlC::default();
    let line_was_empty = std::sync::Arc::clone(&ctrl_c.line_was_empty);
    editor.bind_sequence(
        rustyline::KeyEvent::ctrl('C'),
        rustyline::EventHandler::Conditional(Box::new(ctrl_c)),
    );
    let history = history_file(args);
    if let Some(file) = &history {
        let _ = editor.load_history(file);
    }
    let mut open = match &args.resume {
        Some(id) => Open::Resume(id.clone()),
        None => Open::New,
    };
    // The session a `/resume` left: if the one it asked for cannot be opened, the chat goes
    // back to it instead of ending.
    let mut left: Option<String> = None;
    loop {
        let ended = session(
            global,
            args,
            &mut editor,
            &line_was_empty,
            open,
            colour,
            terminal.as_ref(),
        );
        let ending = match (ended, left.take()) {
            (Ok(ending), _) => ending,
            (Err(e), Some(back)) => {
                say(&format!(
                    "{}; continuing session {back}",
                    crate::error_chain(&e)
                ));
                open = Open::Resume(back);
                continue;
            }
            (Err(e), None) => return Err(e),
        };
        if let Some(file) = &history {
            let _ = editor.save_history(file);
        }
        if matches!(ending.0, Ending::Resume(_)) {
            left = Some(ending.1.clone());
        }
        match ending {
            (Ending::Exit, _) => break,
            (Ending::Resume(Some(id)), _) => open = Open::Resume(id),
            (Ending::Resume(None), current) => match newest_other(global, args, &current)? {
                Some(id) => open = Open::Resume(id),
                None => {
                    say("no other session of this workspace to resume; continuing this one");
                    open = Open::Resume(current);
                }
            },
        }
    }
    if bridle_sandbox::launcher::termination_requested() {
        bridle_sandbox::launcher::die_of_forwarded_signal();
    }
    Ok(0)
}

/// One live session in the terminal, until the person exits or resumes another; returns how
/// it ended and the session's id.
fn session(
    global: &GlobalArgs,
    args: &ChatArgs,
    editor: &mut rustyline::DefaultEditor,
    line_was_empty: &std::sync::atomic::AtomicBool,
    open: Open,
    colour: bool,
    terminal: Option<&nix::sys::termios::Termios>,
) -> Result<(Ending, String)> {
    let resumed = matches!(open, Open::Resume(_));
    let prepared = session_wiring::prepare(Request {
        global: global.clone(),
        model: args.session.model.clone(),
        store: args.session.store.clone(),
        session_dir: args.session.session_dir.clone(),
        open,
        overrides: args.confine.overrides()?,
        asking: Asking::FrontEnd,
        approval: None,
        persist_terminal: true,
        commands_needed: Vec::new(),
        readable: Vec::new(),
    })?;
    // What the log held before is not shown again (`bridle log show` has it): a resumed
    // session starts as clean as a new one, whatever the feed republishes.
    let first_new = prepared.log.events().last().map_or(0, |(seq, _)| seq + 1);
    let mut live = prepared.start(Hooks {
        cancel: Some(Arc::new(|| {
            bridle_sandbox::launcher::termination_signal().map(|name| format!("signal {name}"))
        })),
        on_cancel: Some(Arc::new(bridle_sandbox::launcher::terminate_children)),
    })?;
    let id = live.id.clone();
    let screen = screen::Screen::new(Box::new(editor.create_external_printer()?));
    let asked = Arc::new(ask::Asked::default());
    let turn_open = Arc::new(AtomicBool::new(false));
    let events = screen::show_events(
        screen.clone(),
        live.session.events(),
        first_new,
        colour,
        Arc::clone(&turn_open),
    );
    let questions = live
        .questions
        .take()
        .context("the session was started without a channel for its questions")?;
    let asking = screen::show_questions(screen.clone(), questions, Arc::clone(&asked));
    if resumed {
        screen.line(&format!(
            "resumed: its history so far is in `bridle log show {id}`"
        ));
    }
    screen.line(&format!(
        "session {id}: /help for the commands, Ctrl-D to leave"
    ));
    let done = AtomicBool::new(false);
    let cancelling = AtomicBool::new(false);
    let ending = std::thread::scope(|scope| {
        // Kills the tools' trees again every 50 ms while a cancelled turn winds down (a tool
        // being started when the cancel came is not missed), and carries out SIGTERM/SIGHUP.
        let saved = terminal.cloned();
        let (session, cancel_flag, done_flag) = (&live.session, &cancelling, &done);
        let watcher = scope.spawn(move || watch(session, cancel_flag, done_flag, saved.as_ref()));
        let on_cancel = || cancelling.store(true, Ordering::SeqCst);
        let sessions = args.session.session_dir.clone();
        let find = move |wanted: &str| find_session(sessions.as_deref(), wanted);
        let ending = Repl {
            editor: &mut *editor,
            session: &live.session,
            asked: &asked,
            turn_open: &turn_open,
            screen: screen.clone(),
            colour,
            on_cancel: &on_cancel,
            line_was_empty,
            find: &find,
        }
        .run();
        // Leaving: what was queued does not run, and the running turn is cancelled, not
        // waited for.
        live.session.discard_pending();
        if live.session.is_running() {
            live.session.cancel();
            asked.give_up();
            cancelling.store(true, Ordering::SeqCst);
        }
        done.store(true, Ordering::SeqCst);
        let _ = watcher.join();
        ending
    });
    let stopped = live.stop();
    let _ = events.join();
    let _ = asking.join();
    stopped?;
    Ok((ending?, id))
}

/// While the session lives: after a cancel, kills the tools' trees until the turn ended; on
/// SIGTERM or SIGHUP, cancels the turn, then restores the terminal and dies of the signal.
fn watch(
    session: &bridle_agent::session::Session,
    cancelling: &AtomicBool,
    done: &AtomicBool,
    terminal: Option<&nix::sys::termios::Termios>,
) {
    let tick = std::time::Duration::from_millis(50);
    let mut signalled_at = None;
    loop {
        let finished = done.load(Ordering::SeqCst);
        if bridle_sandbox::launcher::termination_requested() && signalled_at.is_none() {
            signalled_at = Some(std::time::Instant::now());
            // The log says the signal ended the turn, not the person.
            let who = bridle_sandbox::launcher::termination_signal()
                .map_or_else(|| "a signal".to_owned(), |name| format!("signal {name}"));
            session.cancel_because(&who);
            cancelling.store(true, Ordering::SeqCst);
        }
        if cancelling.load(Ordering::SeqCst) {
            if session.is_running() {
                bridle_sandbox::launcher::terminate_children();
            } else {
                cancelling.store(false, Ordering::SeqCst);
            }
        }
        if let Some(at) = signalled_at
            && (!session.is_running() || at.elapsed() > std::time::Duration::from_secs(5))
        {
            // The editor still holds the terminal in raw mode: give it back as it was.
            if let Some(t) = terminal {
                let _ = nix::sys::termios::tcsetattr(
                    std::io::stdin(),
                    nix::sys::termios::SetArg::TCSANOW,
                    t,
                );
            }
            bridle_sandbox::launcher::die_of_forwarded_signal();
        }
        if finished && !cancelling.load(Ordering::SeqCst) {
            return;
        }
        std::thread::sleep(tick);
    }
}

/// The newest session of this workspace other than `current`, for `/resume` without an id.
fn newest_other(global: &GlobalArgs, args: &ChatArgs, current: &str) -> Result<Option<String>> {
    let dir = match &args.session.session_dir {
        Some(d) => d.clone(),
        None => crate::session_facts::default_session_dir()?,
    };
    let workspace = crate::session_facts::Facts::gather(global)?
        .workspace
        .display()
        .to_string();
    let sessions = SessionDir::existing(&dir)?.list()?;
    Ok(sessions
        .into_iter()
        .rev()
        .find(|s| s.id != current && s.workspace == workspace)
        .map(|s| s.id))
}

/// The session `/resume ID` names (an id, a prefix of one, or `last`, as `bridle log` takes
/// them), or why there is none: checked before the running session is left.
fn find_session(dir: Option<&std::path::Path>, wanted: &str) -> Result<String, String> {
    let dir = match dir {
        Some(d) => d.to_path_buf(),
        None => crate::session_facts::default_session_dir().map_err(|e| format!("{e:#}"))?,
    };
    let sessions = SessionDir::existing(&dir).map_err(|e| e.to_string())?;
    match crate::log_cmd::resolve(&sessions, wanted).map_err(|e| e.to_string())? {
        crate::log_cmd::Named::One(id) => Ok(id),
        crate::log_cmd::Named::None(why) => Err(why),
        crate::log_cmd::Named::Several(ids) => Err(format!(
            "{} sessions start with {wanted:?}; give more of the id: {}",
            ids.len(),
            ids.join(", ")
        )),
    }
}

/// Where the typed lines are remembered across chats: beside the session logs (hidden from
/// the agent like them). None when there is no such directory yet.
fn history_file(args: &ChatArgs) -> Option<std::path::PathBuf> {
    let dir = match &args.session.session_dir {
        Some(d) => d.clone(),
        None => crate::session_facts::default_session_dir().ok()?,
    };
    Some(dir.join("chat-history.txt"))
}
