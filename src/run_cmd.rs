//! `bridle run [OPTIONS] TASK`: the agent, headless, on one task until the turn ends. Every
//! tool call goes through the same pipeline as `bridle tool`, and the session log records what
//! was asked, what decided each call and what came back. The session is the live one every
//! front end drives ([`crate::session_wiring`]): one prompt, its turn's report, then closed.

use std::io::{IsTerminal, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::Result;
use bridle_agent::TurnReport;
use bridle_agent::front::json;
use bridle_agent::log::{SessionLog, TurnEndReason};
use bridle_agent::plan_mode::PlanArgs;

use crate::UsageError;
use crate::cli::{GlobalArgs, RunArgs};
use crate::session_wiring::{self, Asking, Hooks, Open, Request, say};
use bridle_exec::printable::printable;

/// Runs `bridle run`; returns the exit status. Ctrl-C, SIGTERM and SIGHUP cancel the turn:
/// running tools' trees are killed, a model answer being streamed is abandoned, calls not
/// started are answered "aborted before dispatch", the turn ends `aborted`, and bridle then
/// dies of the signal.
pub fn run(global: &GlobalArgs, args: &RunArgs) -> Result<u8> {
    bridle_sandbox::launcher::hold_interruption();
    // `--timeout` bounds the whole run: past it, the turn is cancelled like on Ctrl-C.
    let deadline = args
        .confine
        .timeout
        .map(|t| (std::time::Instant::now() + t, t));
    let done = Arc::new(AtomicBool::new(false));
    let watcher = {
        let done = Arc::clone(&done);
        std::thread::spawn(move || kill_tools_on_cancel(&done, deadline.map(|(at, _)| at)))
    };
    let result = run_turn(global, args, deadline);
    done.store(true, Ordering::SeqCst);
    let _ = watcher.join();
    // A signal that came at any point, even after the turn ended: die of it, as the caller
    // who sent it expects.
    if bridle_sandbox::launcher::termination_requested() {
        bridle_sandbox::launcher::die_of_forwarded_signal();
    }
    result
}

/// Once a held signal came (or the deadline passed), kills the running tools' trees (SIGTERM to
/// each launcher), again every 50 ms until the turn has ended, so a tool that was being started
/// is not missed.
fn kill_tools_on_cancel(done: &AtomicBool, deadline: Option<std::time::Instant>) {
    while !done.load(Ordering::SeqCst) {
        let late = deadline.is_some_and(|d| std::time::Instant::now() >= d);
        if late || bridle_sandbox::launcher::termination_requested() {
            bridle_sandbox::launcher::terminate_children();
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// Exit status of a run that `--timeout` ended.
const EXIT_TIMEOUT: u8 = 124;

fn run_turn(
    global: &GlobalArgs,
    args: &RunArgs,
    deadline: Option<(std::time::Instant, std::time::Duration)>,
) -> Result<u8> {
    // Checked before anything exists: a task that asks for nothing leaves no session.
    let task = Task::of(&args.task)?;
    let open = match (&args.resume, &args.fork) {
        (Some(id), _) => Open::Resume(id.clone()),
        (None, Some(spec)) => Open::Fork(spec.clone()),
        (None, None) => Open::New,
    };
    let mut prepared = session_wiring::prepare(Request {
        global: global.clone(),
        model: args.session.model.clone(),
        store: args.session.store.clone(),
        session_dir: args.session.session_dir.clone(),
        open,
        overrides: args.confine.overrides()?,
        asking: Asking::Terminal,
        approval: None,
        persist_terminal: true,
        commands_needed: [
            (args.plan, "--plan"),
            (args.plan_off, "--plan-off"),
            (matches!(task, Task::Command { .. }), "the task `/plan`"),
        ]
        .into_iter()
        .filter(|(given, _)| *given)
        .map(|(_, flag)| ("plan", flag))
        .collect(),
        readable: Vec::new(),
    })?;
    watch_events(&mut prepared.log, args.json, global.quiet);
    let timed_out = move || deadline.is_some_and(|(at, _)| std::time::Instant::now() >= at);
    let cancelled_by = move || {
        bridle_sandbox::launcher::termination_signal()
            .map(|name| format!("signal {name}"))
            .or_else(|| {
                timed_out().then(|| {
                    format!(
                        "--timeout {}s passed",
                        deadline.map_or(0.0, |(_, t)| t.as_secs_f64())
                    )
                })
            })
    };
    let live = prepared.start(Hooks {
        cancel: Some(Arc::new(cancelled_by)),
        on_cancel: Some(Arc::new(bridle_sandbox::launcher::terminate_children)),
    })?;
    let session_id = live.id.clone();
    let mut reports = live
        .session
        .reports()
        .ok_or_else(|| anyhow::anyhow!("the session's reports were taken"))?;
    let switch = |text: &str| -> Result<String> {
        let reply = live.session.command(text)?;
        Ok(reply
            .strip_prefix("committed: ")
            .unwrap_or(&reply)
            .to_owned())
    };
    if args.plan {
        switch("/plan")?;
    }
    if args.plan_off {
        say(&switch("/plan off")?);
    }
    match task {
        Task::Prompt(text) => {
            live.session.prompt(text)?;
        }
        // `/plan MSG` (PM23): plan mode on, then MSG through the steering path, which opens
        // the turn.
        Task::Command { text, turn: true } => say(&switch(text)?),
        // `/plan` or `/plan off` alone: the switch is logged, no turn runs.
        Task::Command { text, turn: false } => {
            let reply = switch(text)?;
            say(&reply);
            live.stop()?;
            if args.json {
                let line = json::final_command_line(&session_id, text, &reply);
                quietly(writeln!(std::io::stdout().lock(), "{line}"))?;
            }
            return Ok(0);
        }
    }
    let report = reports.blocking_recv();
    let closed = live.stop();
    let Some(report) = report else {
        // The session thread ended without a report: its error says why.
        closed?;
        anyhow::bail!("the session ended before the turn did");
    };
    closed?;
    quietly(print_answer(&session_id, &report, args.json))?;
    if report.reason == TurnEndReason::Completed {
        return Ok(0);
    }
    if report.reason == TurnEndReason::Aborted && timed_out() {
        say(&format!(
            "timed out after {}s; the turn was cancelled and every tool's process tree killed",
            deadline.map_or(0.0, |(_, t)| t.as_secs_f64())
        ));
        return Ok(EXIT_TIMEOUT);
    }
    let reason = bridle_agent::log::turn_end_name(report.reason);
    match report.error {
        Some(e) => say(&format!("the turn ended {reason}: {e}")),
        None => say(&format!("the turn ended {reason}")),
    }
    Ok(1)
}

/// The answer on stdout: the `final` line with `json`, else the text.
fn print_answer(session: &str, report: &TurnReport, json: bool) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    if json {
        let line = json::final_line(session, report.turn, report.reason, &report.answer);
        writeln!(out, "{line}")?;
    } else if !report.answer.is_empty() {
        // On a terminal the model's text must not drive it (OSC 52 would set the clipboard,
        // say): escaped line by line. A pipe or a file gets the answer byte for byte.
        if out.is_terminal() {
            let lines: Vec<String> = report.answer.split('\n').map(printable).collect();
            writeln!(out, "{}", lines.join("\n"))?;
        } else {
            writeln!(out, "{}", report.answer)?;
        }
    }
    out.flush()
}

/// `written`, except that a reader who went away (`| head`) is no error: the run ends
/// quietly with the status its turn gives, as `bridle log` does.
fn quietly(written: std::io::Result<()>) -> std::io::Result<()> {
    match written {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => other,
    }
}

/// What the task asks for: a turn, or a plan-mode command as `bridle chat` takes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Task<'t> {
    Prompt(&'t str),
    /// `/plan`, `/plan off` (no turn) or `/plan MSG` (`turn`: MSG opens one).
    Command {
        text: &'t str,
        turn: bool,
    },
}

impl<'t> Task<'t> {
    fn of(task: &'t str) -> Result<Task<'t>, UsageError> {
        let text = task.trim();
        if text.is_empty() {
            return Err(UsageError(
                "the task is empty: say what the agent should do".to_owned(),
            ));
        }
        let Some(rest) = text.strip_prefix("/plan") else {
            return Ok(Task::Prompt(task));
        };
        if !rest.is_empty() && !rest.starts_with(char::is_whitespace) {
            // `/planner ...`: not the command.
            return Ok(Task::Prompt(task));
        }
        // A `/plan` the command would refuse is refused here, before a session exists.
        let args = bridle_agent::plan_mode::parse_plan_args(rest.trim()).map_err(UsageError)?;
        Ok(Task::Command {
            text,
            turn: matches!(args, PlanArgs::OnWith(_)),
        })
    }
}

/// Shows the session's events as they are committed: with `json`, its `--json` lines on stdout
/// (the header first, so a resumed session names itself too); else one progress line per
/// tool call on stderr, unless `quiet`.
fn watch_events(log: &mut SessionLog, json: bool, quiet: bool) {
    if json {
        if let Some((seq, header)) = log.events().first()
            && let Some(line) = json::json_line(*seq, header)
        {
            print_json_line(&line);
        }
        log.watch(|seq, event| {
            if let Some(line) = json::json_line(seq, event) {
                print_json_line(&line);
            }
        });
    } else if !quiet {
        let mut progress = json::ProgressLines::default();
        log.watch(move |_, event| {
            if let Some(line) = progress.line(event) {
                say(&line);
            }
        });
    }
}

/// One `--json` line, flushed at once (a script reads it as it happens). A closed stdout does
/// not stop the session.
fn print_json_line(line: &serde_json::Value) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}").and_then(|()| out.flush());
}

#[cfg(test)]
mod tests {
    use super::Task;

    #[test]
    fn a_plan_command_task_is_taken_as_chat_takes_it_and_an_empty_task_is_refused() {
        let command = |text, turn| Task::Command { text, turn };
        assert_eq!(Task::of("/plan").unwrap(), command("/plan", false));
        assert_eq!(
            Task::of(" /plan off ").unwrap(),
            command("/plan off", false)
        );
        assert_eq!(
            Task::of("/plan write a plan").unwrap(),
            command("/plan write a plan", true)
        );
        assert_eq!(Task::of("/planets").unwrap(), Task::Prompt("/planets"));
        assert_eq!(Task::of("fix it").unwrap(), Task::Prompt("fix it"));
        assert!(Task::of(" \n").is_err());
    }

    /// A `/plan` with arguments the command refuses is a usage error before any session.
    #[test]
    fn a_plan_task_with_bad_arguments_is_a_usage_error_naming_it() {
        for task in ["/plan -x", "/plan on", "/plan off now", " /plan --now "] {
            let err = Task::of(task).unwrap_err().0;
            assert!(err.contains(&format!("`{}`", task.trim())), "{task}: {err}");
            assert!(err.contains("usage: `/plan`"), "{task}: {err}");
        }
    }
}
