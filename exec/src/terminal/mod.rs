//! The persistent terminal: one interactive bash per session in a pseudo-terminal, started
//! through the sandbox launcher under the session's spec, with the pty as its controlling
//! terminal (job control and `/dev/tty` work; Ctrl-C is a real SIGINT to the foreground
//! group). Closing it kills the whole process tree.

use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Mutex, mpsc};
use std::time::{Duration, Instant};

use bridle_policy::{Plan, SandboxSpec};
use bridle_sandbox::{Inspection, Outcome, Running, Sandbox, Spawned};

use crate::tool::{CallEnv, Declaration, DeniedBy, Effect, ToolResult, TypedTool};

mod between_calls;
mod prompts;

pub use between_calls::{Asker, BetweenCalls, CLOSED_UNASKED, NOBODY_ASKED, marked_between_calls};
pub use prompts::{MORE_MARK, PROMPT_MARK};
use prompts::{Prompts, ends_at_prompt};

/// Bytes of terminal output kept at the start and at the end of one read.
pub const OUTPUT_CAP: usize = 32 * 1024;

/// A running terminal.
#[derive(Debug)]
pub struct Terminal {
    running: Option<Running>,
    master: std::fs::File,
    output: mpsc::Receiver<Vec<u8>>,
    pending: Vec<u8>,
    /// What was typed since the last newline: bash has not run it yet, and the next input
    /// continues it, so the rules check both together.
    unsubmitted: String,
    /// The proxy's view of this terminal's connections (network `allow-list`).
    network: Option<crate::net::Attachment>,
    /// Listed among the session's runs in progress (a cancel kills it with them).
    pub(crate) registered: Option<crate::run::RunningGuard>,
    /// Takes the exec supervisor's reports while no call reads the terminal (see
    /// [`Terminal::leave`]).
    background: Option<bridle_sandbox::Background<BetweenCalls>>,
    /// An exec was refused between calls and no read since has shown what it printed.
    refusal_unread: bool,
    // Dropped last: removes placeholders only after the tree is gone.
    _sandbox: Sandbox,
}

impl Terminal {
    /// The pid of the terminal's launcher, while it runs.
    pub fn launcher_pid(&self) -> Option<u32> {
        self.running.as_ref().map(Running::launcher_pid)
    }

    /// Starts `bash -i` in a new pty, confined by `spec`, in `cwd`. `launcher` is the bridle
    /// binary. Waits for the first prompt (up to five seconds).
    pub fn start(
        spec: &SandboxSpec,
        launcher: PathBuf,
        cwd: &Path,
        rows: u16,
        cols: u16,
    ) -> Result<Terminal, String> {
        Terminal::start_with_network(spec, launcher, cwd, rows, cols, None)
    }

    /// [`Terminal::start`], connected to the session's network `proxy` (needed when the spec's
    /// network is `allow-list`: without one the terminal is refused).
    pub fn start_with_network(
        spec: &SandboxSpec,
        launcher: PathBuf,
        cwd: &Path,
        rows: u16,
        cols: u16,
        proxy: Option<&crate::net::NetProxy>,
    ) -> Result<Terminal, String> {
        let (master, slave) = bridle_sandbox::tty::open_pty(rows, cols)
            .map_err(|e| format!("opening a pseudo-terminal: {e}"))?;
        let mut sandbox = Sandbox::prepare(spec.clone(), &bridle_sandbox::probe::quick(), launcher)
            .map_err(|r| r.to_string())?;
        let argv = ["bash", "--noprofile", "--norc", "-i"]
            .map(String::from)
            .to_vec();
        let mut launch = sandbox
            .launch(argv, cwd)
            .env("PS1", PROMPT_MARK)
            .env("PS2", MORE_MARK)
            .env("TERM", "dumb")
            .env("HISTFILE", "/dev/null")
            .with_controlling_terminal();

        let dup = |fd: &OwnedFd| {
            fd.try_clone()
                .map(Stdio::from)
                .map_err(|e| format!("duplicating the pty: {e}"))
        };
        launch
            .command
            .stdin(dup(&slave)?)
            .stdout(dup(&slave)?)
            .stderr(dup(&slave)?);
        let (launch, relay) =
            crate::net::prepare_launch(launch, spec.network, proxy).map_err(|r| r.to_string())?;
        let running = match sandbox.spawn(launch) {
            Ok(Spawned::Running(r)) => r,
            Ok(Spawned::ExecFailed(f)) => return Err(f.cause),
            Err(r) => return Err(r.to_string()),
        };
        let network = match crate::net::attach_launch(proxy, relay) {
            Ok(network) => network,
            Err(r) => {
                running.kill_tree();
                let _ = running.wait(None);
                return Err(r.to_string());
            }
        };
        drop(slave);
        let master = std::fs::File::from(master);
        let mut reader = master
            .try_clone()
            .map_err(|e| format!("cloning the pty: {e}"))?;
        let (tx, output) = mpsc::channel();
        std::thread::spawn(move || {
            let mut buf = vec![0u8; 64 * 1024];
            // EIO once every slave is closed (the shell exited).
            while let Ok(n) = reader.read(&mut buf) {
                if n == 0 || tx.send(buf[..n].to_vec()).is_err() {
                    break;
                }
            }
        });
        let mut terminal = Terminal {
            running: Some(running),
            master,
            output,
            pending: Vec::new(),
            unsubmitted: String::new(),
            network,
            registered: None,
            background: None,
            refusal_unread: false,
            _sandbox: sandbox,
        };
        terminal.read(Duration::from_secs(5), Duration::from_secs(5));
        Ok(terminal)
    }

    /// What the network proxy decided for this terminal's connections since the last call.
    pub fn take_network_decisions(&self) -> Vec<crate::net::NetDecision> {
        self.network
            .as_ref()
            .map(crate::net::Attachment::take_decisions)
            .unwrap_or_default()
    }

    /// The caller stops reading: from now until [`Terminal::come_back`], each exec of the
    /// shell's processes (what a call left running) is decided when it happens, on a thread of
    /// its own: a denial is kept for `come_back`, a question goes to `asker` at once (nobody:
    /// answered no, [`NOBODY_ASKED`]). Without command rules there is nothing to decide and no
    /// thread.
    pub fn leave(&mut self, asker: Option<Asker>) {
        let Some(running) = &mut self.running else {
            return;
        };
        if self.background.is_some() || !running.is_supervised() {
            return;
        }
        match running.observe_in_background(BetweenCalls::asking(asker)) {
            Ok(background) => self.background = Some(background),
            // The reports stay with the run, for the next call (a denial is held at most a
            // second meanwhile).
            Err(e) => tracing::warn!("could not observe the terminal's execs between calls: {e}"),
        }
    }

    /// The caller reads again: what the exec supervisor decided since [`Terminal::leave`], in
    /// order, and how many more decisions were not kept; the questions it kept are the next
    /// read's to ask.
    pub fn come_back(&mut self) -> (Vec<bridle_sandbox::ExecRecord>, u64) {
        self.stop_observing(false)
    }

    /// Ends the thread between calls; `withdraw` gives up a question it is asking (the
    /// terminal is being closed) instead of waiting for its answer.
    fn stop_observing(&mut self, withdraw: bool) -> (Vec<bridle_sandbox::ExecRecord>, u64) {
        let (Some(running), Some(background)) = (&mut self.running, self.background.take()) else {
            return (Vec::new(), 0);
        };
        let observer = if withdraw {
            running.withdraw_background(background)
        } else {
            running.end_background(background)
        };
        observer.map(BetweenCalls::into_records).unwrap_or_default()
    }

    /// Writes `input` to the terminal as typed (include `\n` to run a line, `\u{3}` for Ctrl-C).
    pub fn input(&mut self, input: &str) -> Result<(), String> {
        self.master
            .write_all(input.as_bytes())
            .map_err(|e| format!("writing to the terminal: {e}"))
    }

    /// Sends Ctrl-C (the terminal turns it into SIGINT for the foreground process group).
    pub fn interrupt(&mut self) -> Result<(), String> {
        self.input("\u{3}")
    }

    /// Reads what the terminal prints until the prompt comes back, nothing arrives for `quiet`
    /// after some output, or `wait` passes. The prompt marker is shown as `$ `. What the exec
    /// supervisor reports meanwhile is logged; its questions are answered no.
    pub fn read(&mut self, wait: Duration, quiet: Duration) -> String {
        self.read_observed(wait, quiet, 0, &mut bridle_sandbox::supervisor::Unobserved)
    }

    /// Like [`Terminal::read`], until the shell has read the `lines` lines typed last (a
    /// prompt for each, when no program reads them instead: then until quiet); what the exec
    /// supervisor reports meanwhile (command rules at every exec of the shell's commands) goes
    /// to `observer`.
    pub fn read_observed(
        &mut self,
        wait: Duration,
        quiet: Duration,
        lines: usize,
        observer: &mut dyn bridle_sandbox::ExecObserver,
    ) -> String {
        let deadline = Instant::now() + wait;
        // Memory stays bounded whatever the program prints: the first and the last
        // `OUTPUT_CAP` bytes are kept, the middle is counted.
        let mut head = std::mem::take(&mut self.pending);
        let mut tail: std::collections::VecDeque<u8> = std::collections::VecDeque::new();
        let mut dropped: u64 = 0;
        let mut last = Instant::now();
        let mut prompts = Prompts::default();
        prompts.feed(&head);
        loop {
            if let Some(running) = &self.running {
                running.pump_exec_events(observer, Duration::ZERO);
            }
            let recent: Vec<u8> = if tail.is_empty() {
                head.clone()
            } else {
                tail.iter().copied().collect()
            };
            if ends_at_prompt(&recent) && prompts.count >= lines {
                break;
            }
            let now = Instant::now();
            let seen = !head.is_empty();
            if now >= deadline || (seen && now.duration_since(last) >= quiet) {
                break;
            }
            // Short steps: a process the exec supervisor holds for a question waits for them.
            let step = deadline
                .saturating_duration_since(now)
                .min(if seen { quiet } else { wait })
                .min(Duration::from_millis(50));
            match self.output.recv_timeout(step) {
                Ok(chunk) => {
                    prompts.feed(&chunk);
                    let room = OUTPUT_CAP.saturating_sub(head.len());
                    let (to_head, rest) = chunk.split_at(room.min(chunk.len()));
                    head.extend_from_slice(to_head);
                    tail.extend(rest);
                    if tail.len() > OUTPUT_CAP {
                        let excess = tail.len() - OUTPUT_CAP;
                        tail.drain(..excess);
                        dropped += u64::try_from(excess).unwrap_or(u64::MAX);
                    }
                    last = Instant::now();
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
            }
        }
        // A record is delivered before the process it is about goes on: whatever the output
        // shows, its records are here by now.
        if let Some(running) = &self.running {
            running.pump_exec_events(observer, Duration::ZERO);
        }
        let mut text = String::from_utf8_lossy(&head).into_owned();
        if dropped > 0 {
            text.push_str(&format!(
                "\n[... {dropped} bytes of terminal output omitted ...]\n"
            ));
        }
        if !tail.is_empty() {
            text.push_str(&String::from_utf8_lossy(
                &tail.into_iter().collect::<Vec<u8>>(),
            ));
        }
        text.replace('\r', "")
            .replace(PROMPT_MARK, "$ ")
            .replace(MORE_MARK, "")
    }

    /// Kills the whole process tree and waits until it is gone. Returns what the user must be
    /// told: why bridle stopped the run, when it left something that must not exist
    /// ([`Outcome::Stopped`]), and what bridle moved aside from repositories the shell's
    /// commands left; one message per line, each line after the first starting `bridle: `.
    pub fn close(self) -> Option<String> {
        self.close_inspected().message()
    }

    /// Like [`Terminal::close`], with why the run was stopped, the end-of-run inspection and
    /// what the exec supervisor reported since the last read apart.
    pub fn close_inspected(mut self) -> Closed {
        let (mut execs, not_kept) = self.stop_observing(true);
        let Some(running) = self.running.take() else {
            return Closed {
                execs,
                not_kept,
                ..Closed::default()
            };
        };
        running.kill_tree();
        // What comes while the tree dies is still decided (and kept): questions answered no.
        let mut last = BetweenCalls::closing();
        let finished = running.finish_observed(None, &mut last);
        execs.extend(last.into_records().0);
        Closed {
            stopped: match finished.outcome {
                Outcome::Stopped(why) => Some(why),
                _ => None,
            },
            inspection: finished.inspection,
            execs,
            not_kept,
            network: self
                .network
                .take()
                .map(|a| a.finish(Duration::from_secs(2)))
                .unwrap_or_default(),
        }
    }
}

/// What closing a terminal found.
#[derive(Debug, Default)]
pub struct Closed {
    /// Why bridle stopped the run, when it left something that must not exist.
    pub stopped: Option<String>,
    /// The end-of-run inspection.
    pub inspection: Inspection,
    /// What the exec supervisor reported since the last read (between calls, and while the
    /// tree died), in order.
    pub execs: Vec<bridle_sandbox::ExecRecord>,
    /// How many more exec decisions between calls were not kept.
    pub not_kept: u64,
    /// What the network proxy decided since the last read.
    pub network: Vec<crate::net::NetDecision>,
}

impl Closed {
    /// What the user must be told (see [`Terminal::close`]).
    pub fn message(&self) -> Option<String> {
        let lines: Vec<String> = self
            .stopped
            .iter()
            .cloned()
            .chain(self.inspection.messages())
            .collect();
        (!lines.is_empty()).then(|| lines.join("\nbridle: "))
    }
}

impl Drop for Terminal {
    fn drop(&mut self) {
        // Dropped unclosed (an error path): what nobody else will report goes to the log.
        let (execs, not_kept) = self.stop_observing(true);
        for record in &execs {
            tracing::warn!("between calls: {}", record.message());
        }
        if not_kept > 0 {
            tracing::warn!("between calls: {not_kept} more exec decisions, not kept");
        }
        if let Some(running) = self.running.take() {
            running.kill_tree();
            if let Outcome::Stopped(why) = running.wait(None) {
                tracing::warn!("{why}");
            }
        }
    }
}

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
    /// How long to wait for output, in milliseconds.
    wait_ms: Option<u64>,
    /// Close the shell and its whole process tree.
    #[serde(default)]
    close: bool,
}

/// The `terminal` tool: the session's shell, started on first use. A call feeds `input`
/// (decided by the command rules like a `bash` command line, together with what was typed
/// before and not yet submitted) and reads until the prompt returns, quiet, or `wait_ms`
/// (default 2000). With `persist`, the shell stays for the next call unless `close` is set;
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
        "The session's persistent shell in a pseudo-terminal: input is written to it and the output until the prompt returns (or wait_ms) comes back."
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
        let wait = Duration::from_millis(args.wait_ms.unwrap_or(2000).min(600_000));
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
        if let Some(input) = &args.input
            && let Err(e) = terminal.input(input)
        {
            out.push_str(&e);
            input_failed = true;
        } else if let Some(input) = &args.input {
            terminal.unsubmitted = if only_interrupts(input) {
                // Ctrl-C discards the line being edited.
                String::new()
            } else {
                let line = format!("{carried}{input}");
                line.rsplit('\n').next().unwrap_or("").to_owned()
            };
            let mut execs =
                crate::supervised::CallExecs::new(env.approvals).approving(env.approved_commands);
            // Until every line typed has been read (a call returned at the first prompt
            // left the rest of several lines to run after it, unattributed).
            let lines = input.matches(['\n', '\r']).count();
            out.push_str(&terminal.read_observed(
                wait,
                wait.min(Duration::from_millis(500)),
                lines,
                &mut execs,
            ));
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
        } else {
            terminal.unsubmitted = carried;
        }
        let decisions: Vec<crate::net::NetDecision> = earlier_network
            .into_iter()
            .chain(terminal.take_network_decisions())
            .collect();
        out.push_str(&crate::net::summary(&decisions));
        // A refused exec's `Permission denied` (printed by a process refused between calls,
        // too, whenever it is read) is the rule's, not the sandbox's.
        let attribution = if refusal_shown {
            None
        } else {
            // The shell may have changed directory; relative names are looked up from where
            // it started (and above, as git names them).
            crate::attribution::attribute(spec, &spec.workspace, &out)
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
