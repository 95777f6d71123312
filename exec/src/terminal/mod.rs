//! The persistent terminal: one interactive bash per session in a pseudo-terminal, started
//! through the sandbox launcher under the session's spec, with the pty as its controlling
//! terminal (job control and `/dev/tty` work; Ctrl-C is a real SIGINT to the foreground
//! group). Closing it kills the whole process tree.

use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use bridle_policy::SandboxSpec;
use bridle_sandbox::{Inspection, Outcome, Running, Sandbox, Spawned};

mod between_calls;
mod prompts;
mod tool;

pub use between_calls::{Asker, BetweenCalls, CLOSED_UNASKED, NOBODY_ASKED, marked_between_calls};
pub use prompts::{MORE_MARK, PROMPT_MARK};
use prompts::{Prompts, ends_at_prompt};
pub use tool::{TerminalArgs, TerminalTool};

/// Bytes of terminal output kept at the start and at the end of one read.
pub const OUTPUT_CAP: usize = 32 * 1024;

/// A running terminal.
#[derive(Debug)]
pub struct Terminal {
    running: Option<Running>,
    master: std::fs::File,
    output: mpsc::Receiver<Vec<u8>>,
    /// Output printed before the last input was typed (shown with the next read, never
    /// counted among its prompts).
    pending: Vec<u8>,
    /// The output seen so far ends at a prompt: the shell waits for a line (no command runs).
    at_prompt: bool,
    /// The prompts the last input makes the shell print once it has read all of it.
    expected_prompts: usize,
    /// What was typed since the last newline: bash has not run it yet, and the next input
    /// continues it, so the rules check both together.
    unsubmitted: String,
    /// The proxy's view of this terminal's connections (network `allow-list`).
    network: Option<crate::net::Attachment>,
    /// The kernel's count of direct attempts to reach the network, and how many of them
    /// were reported already.
    net_watch: Option<(bridle_sandbox::net_watch::NetWatch, u64)>,
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
        let mut running = match sandbox.spawn(launch) {
            Ok(Spawned::Running(r)) => r,
            Ok(Spawned::ExecFailed(f)) => return Err(f.cause),
            Err(r) => return Err(r.to_string()),
        };
        let net_watch = running.take_net_watch().map(|w| (w, 0));
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
            at_prompt: false,
            expected_prompts: 0,
            unsubmitted: String::new(),
            network,
            net_watch,
            registered: None,
            background: None,
            refusal_unread: false,
            _sandbox: sandbox,
        };
        terminal.read(Duration::from_secs(5), Duration::from_secs(5));
        // The prompts' marks stay out of the environment of what the shell runs (`env` would
        // print them, and a nested shell would mark its own prompts). Not shown: the first
        // call reads from here on.
        if terminal.input("export -n PS1 PS2\n").is_ok() {
            terminal.read_observed(
                Duration::from_secs(5),
                Duration::from_secs(5),
                Duration::from_secs(5),
                terminal.expected_prompts,
                &mut bridle_sandbox::supervisor::Unobserved,
            );
        }
        Ok(terminal)
    }

    /// How many times the kernel saw the terminal's processes try to reach the network
    /// directly since the last time this was asked (0 when it cannot count).
    pub fn take_direct_network_attempts(&mut self) -> u64 {
        let Some((watch, reported)) = &mut self.net_watch else {
            return 0;
        };
        let total = watch.attempts().unwrap_or(*reported);
        let new = total.saturating_sub(*reported);
        *reported = total;
        new
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
    /// What the shell printed before is kept for the next read, apart from what `input` makes
    /// it print ([`Terminal::expected_prompts`]).
    pub fn input(&mut self, input: &str) -> Result<(), String> {
        self.take_printed();
        self.expected_prompts = prompts::expected(input, self.at_prompt);
        self.master
            .write_all(input.as_bytes())
            .map_err(|e| format!("writing to the terminal: {e}"))
    }

    /// Whether the shell sits at its prompt with nothing printed since the last read: a call
    /// that types nothing has nothing to wait for.
    pub fn nothing_to_read(&mut self) -> bool {
        self.take_printed();
        self.pending.is_empty() && self.at_prompt
    }

    /// Keeps what the shell printed since the last read for the next one, and whether it
    /// ends at a prompt.
    fn take_printed(&mut self) {
        let earlier = self.pending.len();
        while let Ok(chunk) = self.output.try_recv() {
            self.pending.extend_from_slice(&chunk);
        }
        if self.pending.len() > earlier {
            self.at_prompt = ends_at_prompt(&self.pending);
        }
    }

    /// Whether the last output ended at the shell's prompt (no command still running).
    pub fn at_prompt(&self) -> bool {
        self.at_prompt
    }

    /// The prompts the shell prints once it has read the last input whole (when no program
    /// reads it instead), for [`Terminal::read_observed`].
    pub fn expected_prompts(&self) -> usize {
        self.expected_prompts
    }

    /// Sends Ctrl-C (the terminal turns it into SIGINT for the foreground process group).
    pub fn interrupt(&mut self) -> Result<(), String> {
        self.input("\u{3}")
    }

    /// Reads what the terminal prints until the prompt comes back, nothing arrives for `quiet`
    /// after some output, or `wait` passes. The prompt marker is shown as `$ `. What the exec
    /// supervisor reports meanwhile is logged; its questions are answered no.
    pub fn read(&mut self, wait: Duration, quiet: Duration) -> String {
        self.read_observed(
            wait,
            quiet,
            quiet,
            0,
            &mut bridle_sandbox::supervisor::Unobserved,
        )
    }

    /// Like [`Terminal::read`], until the shell has read the `lines` lines typed last (a
    /// prompt for each, when no program reads them instead: then until quiet for `patience`,
    /// a pause being more often a command at work than a program reading them); what the exec
    /// supervisor reports meanwhile (command rules at every exec of the shell's commands) goes
    /// to `observer`.
    pub fn read_observed(
        &mut self,
        wait: Duration,
        quiet: Duration,
        patience: Duration,
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
        let patience = patience.min(wait);
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
            let quiet = if prompts.count < lines {
                patience
            } else {
                quiet
            };
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
        let end = if tail.is_empty() {
            &head[head.len().saturating_sub(64)..]
        } else {
            &tail.iter().copied().collect::<Vec<u8>>()[tail.len().saturating_sub(64)..]
        };
        if !end.is_empty() {
            self.at_prompt = ends_at_prompt(end);
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
