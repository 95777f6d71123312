//! The `terminal` tool: the session's persistent shell behind the tool pipeline (what a call
//! types is decided by the command rules; what it reads, the exec supervisor's decisions
//! included, is that call's result).

use std::sync::Mutex;
use std::time::{Duration, Instant};

use bridle_policy::Plan;

use crate::tool::{CallEnv, Declaration, DeniedBy, Effect, ToolResult, TypedTool};

use super::between_calls::{self, Asker, marked_between_calls};
use super::{Closed, Terminal};

/// Whether `input` is nothing but Ctrl-C (interrupting is always allowed: it runs nothing).
fn only_interrupts(input: &str) -> bool {
    !input.is_empty() && input.chars().all(|c| c == '\u{3}')
}

/// What terminal input declares. Line editing (Ctrl-U, Ctrl-W, arrows and other escape
/// sequences), completion (Tab) and carriage returns change what bash runs in ways the rule
/// checker cannot follow, so input with control characters other than newline needs approval;
/// otherwise `line` (the unsubmitted text before it, then the input) is decided like a `bash`
/// command line.
fn input_effect(input: &str, line: &str) -> Effect {
    if only_interrupts(input) {
        return Effect::Confined("Ctrl-C only interrupts".to_owned());
    }
    if line.trim().is_empty() {
        return Effect::Confined("empty input runs nothing".to_owned());
    }
    if input.chars().any(|c| c.is_control() && c != '\n') {
        return Effect::Ask(
            "needs approval: the input contains control characters (line editing, \
             completion, carriage return) the rule checker cannot see through"
                .to_owned(),
        );
    }
    Effect::Shell(line.to_owned())
}

/// The arguments of `terminal`.
#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TerminalArgs {
    /// Text to type (end with a newline to run it).
    input: Option<String>,
    /// How long to wait for output, in milliseconds (default 2000); given, also how long a
    /// quiet command is waited for before the call returns.
    wait_ms: Option<u64>,
    /// Close the shell and its whole process tree.
    #[serde(default)]
    close: bool,
}

/// The `terminal` tool: the session's shell, started on first use. A call feeds `input`
/// (decided by the command rules like a `bash` command line, together with what was typed
/// before and not yet submitted) and reads until the shell has read every line of it, quiet,
/// or `wait_ms` (default 2000); a call without `input` reads what a command still running
/// prints until it ends. With `persist`, the shell stays for the next call unless `close` is set;
/// without it, the shell is closed before the call returns. Either way a closed shell's whole
/// tree is gone when the call returns.
#[derive(Default)]
pub struct TerminalTool {
    slot: Mutex<Option<Terminal>>,
    persist: bool,
    /// Who answers the questions of execs made between calls.
    answerer: Option<std::sync::Arc<dyn crate::approvals::Answerer>>,
}

impl std::fmt::Debug for TerminalTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TerminalTool")
            .field("persist", &self.persist)
            .field("asks", &self.answerer.as_ref().map(|a| a.who()))
            .finish_non_exhaustive()
    }
}

impl TerminalTool {
    /// The tool; with `persist` its shell lives across calls until [`TerminalTool::close`].
    pub fn new(persist: bool) -> TerminalTool {
        TerminalTool {
            slot: Mutex::new(None),
            persist,
            answerer: None,
        }
    }

    /// Asks `answerer` (under the call's approval policy) about the execs the shell's
    /// processes make between calls; without one they are answered no.
    pub fn asking(mut self, answerer: std::sync::Arc<dyn crate::approvals::Answerer>) -> Self {
        self.answerer = Some(answerer);
        self
    }

    fn slot(&self) -> std::sync::MutexGuard<'_, Option<Terminal>> {
        self.slot
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Closes the persistent shell (its whole tree): what closing it found (why the sandbox
    /// stopped it, and the execs decided since the last call), `None` when none was open.
    pub fn close(&self) -> Option<Closed> {
        self.slot().take().map(Terminal::close_inspected)
    }
}

impl TypedTool for TerminalTool {
    type Args = TerminalArgs;

    fn name(&self) -> &str {
        "terminal"
    }

    fn description(&self) -> &str {
        "The session's persistent shell in a pseudo-terminal: input is written to it and the output until the shell has read every line of it (or wait_ms) comes back; a call without input waits for a command still running to end (or wait_ms)."
    }

    fn declare(&self, args: &TerminalArgs, _plan: &Plan) -> Result<Declaration, String> {
        let effect = match &args.input {
            // What the call does without input, said as it is for the audit log.
            None if args.close => Effect::Confined(
                "closing the session's terminal and its whole process tree".to_owned(),
            ),
            None if self.slot().is_some() => {
                Effect::Confined("reading the session's terminal".to_owned())
            }
            None => Effect::Confined("opening the session's terminal".to_owned()),
            Some(input) => {
                // What bash will see: the text typed before and not yet submitted, then this.
                let carried = self
                    .slot()
                    .as_ref()
                    .map_or_else(String::new, |t| t.unsubmitted.clone());
                input_effect(input, &format!("{carried}{input}"))
            }
        };
        Ok(Declaration {
            effects: vec![effect],
            escalation: None,
            uses_files: false,
        })
    }

    fn execute(&self, args: TerminalArgs, env: &CallEnv<'_>) -> ToolResult {
        let mut slot = self.slot();
        let spec = env.spec;
        // Closing what is not open must not start a shell first.
        if args.close && args.input.is_none() && slot.is_none() {
            return env.result(
                true,
                "no terminal was open; nothing to close".to_owned(),
                None,
            );
        }
        let mut terminal = match slot.take() {
            Some(t) => t,
            None => match env.spawner.start_terminal(spec, &spec.workspace) {
                Ok(t) => t,
                Err(e) => {
                    return env.result(false, format!("not run: {e}"), Some(DeniedBy::Sandbox));
                }
            },
        };
        // What the shell's background processes exec'd since the last call: on record before
        // this call's input, marked as not this call's.
        let (earlier, not_kept) = terminal.come_back();
        let earlier_network = marked_between_calls(terminal.take_network_decisions());
        terminal.refusal_unread |= between_calls::refused(&earlier);
        for record in &earlier {
            if let Err(e) = env.approvals.exec_decided_between_calls(record) {
                tracing::warn!("the session log could not record an exec decision: {e}");
            }
        }
        let carried = std::mem::take(&mut terminal.unsubmitted);
        // Closing without typing anything or asking to wait: what was printed, at once.
        let wait = if args.close && args.input.is_none() && args.wait_ms.is_none() {
            Duration::ZERO
        } else {
            Duration::from_millis(args.wait_ms.unwrap_or(2000).min(600_000))
        };
        let quiet = wait.min(Duration::from_millis(500));
        // Before every line typed was read, a pause in the output is more often a command at
        // work than a program reading the lines: waited out for two seconds, or for as long
        // as the call said it would wait.
        let patience = if args.wait_ms.is_some() {
            wait
        } else {
            quiet.saturating_mul(4)
        };
        // Listed first: they came before this call's input.
        let mut out = between_calls::note(&earlier, not_kept)
            .trim_start()
            .to_owned();
        if !out.is_empty() {
            out.push('\n');
        }
        let mut exec_decisions = Vec::new();
        let mut refusal_shown = false;
        // A terminal that takes no input (its shell exited) is closed, with what closing it
        // finds reported as for `close`.
        let mut input_failed = false;
        // The prompts to read up to: every line typed (a call returned at the first prompt
        // left the rest of several lines to run after it, unattributed); with nothing typed,
        // the one a command still running prints as it ends. None: nothing to read.
        let to_read = match &args.input {
            Some(input) => match terminal.input(input) {
                Err(e) => {
                    out.push_str(&e);
                    input_failed = true;
                    None
                }
                Ok(()) => {
                    terminal.unsubmitted = if only_interrupts(input) {
                        // Ctrl-C discards the line being edited.
                        String::new()
                    } else {
                        let line = format!("{carried}{input}");
                        line.rsplit(['\n', '\r']).next().unwrap_or("").to_owned()
                    };
                    Some(terminal.expected_prompts())
                }
            },
            None => {
                terminal.unsubmitted = carried;
                // At the prompt with nothing new: returns at once, unless the call asked to
                // wait (for what a background job prints).
                if terminal.nothing_to_read() && args.wait_ms.is_none() {
                    None
                } else {
                    Some(usize::from(!terminal.at_prompt()))
                }
            }
        };
        if let Some(lines) = to_read {
            let mut execs =
                crate::supervised::CallExecs::new(env.approvals).approving(env.approved_commands);
            out.push_str(&terminal.read_observed(wait, quiet, patience, lines, &mut execs));
            // A question answered as the read ended: its record is this call's, not the next.
            let settle = Instant::now() + Duration::from_secs(1);
            if let Some(running) = &terminal.running {
                while execs.awaiting_decision() && Instant::now() < settle {
                    running.pump_exec_events(&mut execs, Duration::from_millis(50));
                }
            }
            out.push_str(&execs.note());
            exec_decisions = execs.records;
            // What a refused exec printed (between calls too) has been read now; what one of
            // this call's prints later is the next read's.
            let refused_now = between_calls::refused(&exec_decisions);
            refusal_shown = std::mem::take(&mut terminal.refusal_unread) || refused_now;
            terminal.refusal_unread = refused_now;
        }
        let decisions: Vec<crate::net::NetDecision> = earlier_network
            .into_iter()
            .chain(terminal.take_network_decisions())
            .collect();
        out.push_str(&crate::net::summary(&decisions));
        // A refused exec's `Permission denied` (printed by a process refused between calls,
        // too, whenever it is read) is the rule's, not the sandbox's.
        // This call's own: counted until now, whatever decides the attribution.
        let direct_network = terminal.take_direct_network_attempts();
        let attribution = if refusal_shown {
            None
        } else {
            // The shell may have changed directory; relative names are looked up from where
            // it started (and above, as git names them).
            crate::attribution::attribute(spec, &spec.workspace, &out)
                .or_else(|| crate::attribution::network_attempts(spec, direct_network))
        };
        if let Some(found) = &attribution {
            out.push('\n');
            out.push_str(&found.note(spec.mode, env.approvals.policy()));
        }
        let result = |ok, content, denied_by| {
            let mut r = env.result(ok, content, denied_by);
            r.sandbox.network_decisions.clone_from(&decisions);
            r.sandbox.exec_decisions.clone_from(&exec_decisions);
            r.sandbox.denied_by_sandbox = attribution.as_ref().map(|a| a.what.clone());
            r
        };
        if self.persist && !args.close && !input_failed {
            terminal.leave(self.answerer.as_ref().map(|answerer| Asker {
                policy: env.approvals.policy(),
                answerer: std::sync::Arc::clone(answerer),
            }));
            *slot = Some(terminal);
            return result(true, out, None);
        }
        // No prompt after the last output: a command was still at work (or reading input).
        let cut_short = !input_failed && !terminal.at_prompt();
        let Closed {
            stopped,
            inspection,
            execs: last,
            network: last_network,
            ..
        } = terminal.close_inspected();
        // Reported while the tree died, after the read: this call's own.
        for record in &last {
            if let Err(e) = env.approvals.exec_decided(record) {
                tracing::warn!("the session log could not record an exec decision: {e}");
            }
        }
        out.push_str(&crate::supervised::result_note(&last));
        out.push_str(&crate::net::summary(&last_network));
        out.push_str(&crate::bash_tool::inspection_note(&inspection));
        let result = |ok, content, denied_by| {
            let mut r = result(ok, content, denied_by);
            r.sandbox.exec_decisions.extend(last.iter().cloned());
            r.sandbox
                .network_decisions
                .extend(last_network.iter().cloned());
            r
        };
        let mut done = match stopped {
            Some(why) => {
                out.push_str(&format!("\n[stopped by the sandbox: {why}]"));
                result(false, out, Some(DeniedBy::Sandbox))
            }
            None => {
                if cut_short {
                    if !out.is_empty() && !out.ends_with('\n') {
                        out.push('\n');
                    }
                    out.push_str(
                        "[the shell had not come back to its prompt: what was still running \
                         was stopped with the terminal; a call's `wait_ms` waits longer, and \
                         `bash` waits for a command to finish]\n",
                    );
                }
                if self.persist {
                    out.push_str("[the terminal was closed; the next call starts a new one]");
                }
                result(!input_failed, out, None)
            }
        };
        done.sandbox.quarantined = crate::bash_tool::quarantine_notes(&inspection);
        done
    }
}
