//! `bridle exec`: run one command confined by the policy.

use std::io::Write;

use anyhow::Result;
use bridle_sandbox::{Outcome, Sandbox, Spawned};

use crate::cli::{ExecArgs, GlobalArgs};
use crate::session_facts::Facts;

/// Exit status when the sandbox could not be established.
pub const EXIT_SANDBOX_UNAVAILABLE: u8 = 125;
/// Exit status when `--timeout` passed.
pub const EXIT_TIMEOUT: u8 = 124;

fn say(line: &str) {
    // One write: the command writes to the same stderr at the same time.
    let mut err = std::io::stderr().lock();
    let _ = err.write_all(format!("bridle: {line}\n").as_bytes());
}

/// Runs `bridle exec`; returns the exit status.
pub fn run(global: &GlobalArgs, args: &ExecArgs) -> u8 {
    // From here on SIGTERM and SIGHUP cannot end bridle before what the run sets up on the
    // host (config locks, placeholders, the temp dir) is undone.
    bridle_sandbox::launcher::hold_termination();
    let code = match run_inner(global, args) {
        Ok(code) => code,
        Err(err) => {
            say(&crate::error_chain(&err));
            // A profile or flag that does not work is the caller's to fix (2); anything else
            // kept the sandbox from being set up (125). Neither ran the command.
            match crate::exit_code_of(&err) {
                crate::EXIT_USAGE => crate::EXIT_USAGE,
                _ => EXIT_SANDBOX_UNAVAILABLE,
            }
        }
    };
    // Killed by SIGTERM or SIGHUP: the run was cleaned up; now die of it.
    bridle_sandbox::launcher::die_of_forwarded_signal();
    code
}

fn run_inner(global: &GlobalArgs, args: &ExecArgs) -> Result<u8> {
    let facts = Facts::gather(global)?;
    let overrides = args.confine.overrides()?;
    let policy = facts.load_policy(global, overrides)?;
    facts.report_env(&policy);
    crate::session_facts::ensure_temp_base()?;
    sweep_stale_run_dirs();
    let temp_dir = facts.run_temp_dir();
    let plan = facts.plan(&policy, temp_dir.clone(), &[])?;
    let approved = match refused_by_rules(&plan, &args.argv) {
        Checked::Refused(code) => return Ok(code),
        Checked::Allowed => None,
        Checked::Approved => Some(args.argv.clone()),
    };
    let approvals =
        bridle_exec::approvals::Approvals::new(plan.approval, crate::agent_host::answerer());
    let proxy = match crate::net_wiring::exec_proxy(&plan) {
        Ok(proxy) => proxy,
        Err(refusal) => {
            say(&refusal.to_string());
            return Ok(EXIT_SANDBOX_UNAVAILABLE);
        }
    };
    let launcher = std::env::current_exe()?;
    // The quick probe assumes namespaces work; the launch verifies it (and re-plans if not).
    let mut sandbox = match Sandbox::prepare(plan.spec, &bridle_sandbox::probe::quick(), launcher) {
        Ok(s) => s,
        Err(refusal) => {
            say(&refusal.to_string());
            return Ok(EXIT_SANDBOX_UNAVAILABLE);
        }
    };
    let cwd = start_dir(sandbox.spec())?;
    // The profile's wall-time limit caps --timeout.
    let wall = sandbox
        .spec()
        .limits
        .wall_time_secs
        .map(std::time::Duration::from_secs);
    let timeout = match (args.confine.timeout, wall) {
        (Some(t), Some(w)) => Some(t.min(w)),
        (t, w) => t.or(w),
    };
    // An interactive command may run long: say that git outside cannot change the config.
    if std::io::IsTerminal::is_terminal(&std::io::stdin())
        && let Some(note) = sandbox.config_locks_note()
    {
        say(&note);
    }
    bridle_sandbox::launcher::ignore_terminal_signals();
    // Orphans of a launcher the command managed to kill (danger-full-access has no PID
    // namespace) are reparented to bridle, which kills them when the run ends.
    bridle_sandbox::launcher::become_subreaper();
    // bridle exec is single-threaded here and passes its stdio through: fork the launcher
    // instead of re-executing bridle (same launcher code, one exec less). The re-executed
    // launcher (what multi-threaded callers use) can be selected for testing and comparison.
    // A person's own command at their terminal keeps it (job control, /dev/tty).
    let launch = sandbox.launch(args.argv.clone(), &cwd).keeping_terminal();
    // With the allow-list the proxy's threads already run: the launcher is re-executed.
    let network = sandbox.spec().network;
    let (launch, relay) = match crate::net_wiring::with_relay(launch, network, proxy.as_ref()) {
        Ok(pair) => pair,
        Err(refusal) => {
            say(&refusal.to_string());
            return Ok(EXIT_SANDBOX_UNAVAILABLE);
        }
    };
    let launch =
        if std::env::var_os("BRIDLE_LAUNCHER").is_some_and(|v| v == "exec") || relay.is_some() {
            launch
        } else {
            launch.in_process()
        };
    // Stdio that is a plain file (a redirection) reaches the command as a pipe bridle pumps:
    // a file descriptor would let it fchmod, futimens or ftruncate a file outside its roots.
    let (stdio, pumps) = StdioPumps::prepare()?;
    let launch = launch.with_stdio(stdio);
    // A signal that came while the sandbox was prepared: do not start the command at all.
    let spawned =
        (!bridle_sandbox::launcher::termination_requested()).then(|| sandbox.spawn(launch));
    let pumps = pumps.start();
    let code = match spawned {
        // Not seen by anyone: bridle dies of the signal once the run is undone.
        None => 128 + 15,
        Some(Err(refusal)) => {
            say(&refusal.to_string());
            EXIT_SANDBOX_UNAVAILABLE
        }
        Some(Ok(Spawned::ExecFailed(failure))) => {
            say(&failure.cause);
            u8::try_from(failure.code).unwrap_or(127)
        }
        Some(Ok(Spawned::Running(mut running))) => {
            // SIGTERM or SIGHUP to bridle ends the sandbox; the run then ends as usual.
            running.forward_termination();
            let mut net_watch = running.take_net_watch();
            // The proxy serves the sandbox's relay; if it cannot, the command is stopped (125).
            let attached = crate::net_wiring::attach(proxy.as_ref(), relay);
            if attached.is_err() {
                running.kill_tree();
            }
            let approved: Vec<Vec<String>> = approved.into_iter().collect();
            let mut execs =
                Reported(bridle_exec::supervised::CallExecs::new(&approvals).approving(&approved));
            let finished = running.finish_observed(timeout, &mut execs);
            for line in finished.inspection.messages() {
                say(&line);
            }
            let outcome = crate::net_wiring::after_run(attached, finished.outcome);
            let code = match outcome {
                Outcome::Exited(code) => u8::try_from(code).unwrap_or(255),
                Outcome::TimedOut => {
                    let secs = timeout.map_or(0.0, |d| d.as_secs_f64());
                    say(&format!(
                        "timed out after {secs}s; the whole process tree was killed"
                    ));
                    EXIT_TIMEOUT
                }
                Outcome::Stopped(why) => {
                    say(&why);
                    137
                }
            };
            if code != 0 {
                network_hint(net_watch.as_mut(), sandbox.spec());
            }
            code
        }
    };
    bridle_sandbox::launcher::kill_orphans();
    pumps.finish();
    crate::net_wiring::print_deferred(proxy.as_ref());
    drop(sandbox);
    let _ = crate::remove_tree::remove_tree(&temp_dir);
    Ok(code)
}

/// What `bridle exec` and `bridle shell` do with what the exec supervisor reports: one
/// `bridle:` line on stderr for each denial; an exec an `ask` rule matched goes to the person
/// at the terminal (with nobody to ask: denied).
pub struct Reported<'a>(pub bridle_exec::supervised::CallExecs<'a>);

impl bridle_sandbox::ExecObserver for Reported<'_> {
    fn decided(&mut self, record: &bridle_sandbox::ExecRecord) {
        say(&record.message());
        self.0.decided(record);
    }

    fn approve(
        &mut self,
        record: &bridle_sandbox::ExecRecord,
        withdrawn: &dyn Fn() -> bool,
    ) -> bool {
        self.0.approve(record, withdrawn)
    }
}

/// Where a command starts: the current directory when it is inside the workspace (a
/// subdirectory of it), else the workspace (`bridle --workspace ../proj exec -- make` builds
/// `../proj`, not the directory bridle was started in, which the sandbox would show read-only).
pub fn start_dir(spec: &bridle_policy::SandboxSpec) -> std::io::Result<std::path::PathBuf> {
    let cwd = std::env::current_dir()?;
    let cwd = std::fs::canonicalize(&cwd).unwrap_or(cwd);
    Ok(if cwd.starts_with(&spec.workspace) {
        cwd
    } else {
        spec.workspace.clone()
    })
}

/// What the command rules say of the top-level command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Checked {
    /// A rule allows it (or none matched).
    Allowed,
    /// An `ask` rule matched and the person approved it.
    Approved,
    /// Not run: the exit status (126), after a `bridle:` line naming the rule.
    Refused(u8),
}

/// After a command failed with the network off or an allow-list: one line saying so, when the
/// kernel saw it try to reach the network directly (see [`bridle_sandbox::net_watch`]). Under an
/// allow-list that is a client bypassing the proxy (its own connection or DNS lookup): the line
/// names the variables it must honour, as `bridle tool bash` does.
pub fn network_hint(
    watch: Option<&mut bridle_sandbox::net_watch::NetWatch>,
    spec: &bridle_policy::SandboxSpec,
) {
    let Some(attempts) = watch.and_then(|w| w.attempts()).filter(|n| *n > 0) else {
        return;
    };
    let times = if attempts == 1 {
        "once"
    } else {
        "more than once"
    };
    match spec.network {
        bridle_policy::Network::Off => say(&format!(
            "network: the command tried to reach the network {times}, but the network is off in this sandbox (profile key `network`; `--network on` for this run)"
        )),
        bridle_policy::Network::AllowList => {
            let port = spec
                .allow_list
                .as_ref()
                .map_or(bridle_policy::RELAY_PORT, |l| l.relay_port);
            say(&format!(
                "network: the command tried to connect directly (not through the proxy) {times}: {}",
                bridle_exec::net::proxy_bypass_attribution(port)
            ));
        }
        bridle_policy::Network::On => {}
    }
}

/// Checks the top-level command (`bridle exec`'s CMD, `bridle shell`'s shell) against the
/// command rules before any sandbox is prepared: `deny` refuses; `ask` asks the person at the
/// terminal and refuses when nobody can be asked. What the command then runs is checked by
/// the same rules at every exec (the sandbox's exec supervisor).
pub fn refused_by_rules(plan: &bridle_policy::Plan, argv: &[String]) -> Checked {
    use bridle_exec::approvals::{ApprovalRequest, Approvals};
    const EXIT_REFUSED_BY_RULE: u8 = 126;
    let verdict = plan.decide_exec(argv);
    match verdict.decision {
        bridle_policy::Decision::Allow => Checked::Allowed,
        bridle_policy::Decision::Deny => {
            say(&verdict.reason);
            Checked::Refused(EXIT_REFUSED_BY_RULE)
        }
        bridle_policy::Decision::Ask => {
            let approvals = Approvals::new(plan.approval, crate::agent_host::answerer());
            let outcome = approvals.ask(&ApprovalRequest {
                tool: "exec".into(),
                arguments: serde_json::json!({ "argv": argv }),
                reason: verdict.reason.clone(),
                justification: None,
                escalation: None,
                call_id: None,
            });
            let Some(text) = outcome.denial(plan.approval) else {
                return Checked::Approved;
            };
            say(&format!("{}; not run: {text}", verdict.reason));
            Checked::Refused(EXIT_REFUSED_BY_RULE)
        }
    }
}

/// Removes private temp dirs left by earlier runs whose bridle process is gone (killed before
/// it could clean up). Names are `run-<pid>-<nonce>`; a live pid is never touched.
fn sweep_stale_run_dirs() {
    // Cache homes of workspaces no run has used for 30 days.
    bridle_sandbox::mounts::cache::sweep_unused(
        &crate::session_facts::temp_base().join("cache"),
        std::time::Duration::from_secs(30 * 24 * 3600),
    );
    let Ok(entries) = std::fs::read_dir(crate::session_facts::temp_base()) else {
        return;
    };
    let day = std::time::Duration::from_secs(24 * 3600);
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        let (kind, rest) = match name.split_once('-') {
            Some(("run", rest)) => ("run", rest),
            // `bridle tool` keeps its dir while a spill file in it may still be read: a day.
            Some(("tool", rest)) => ("tool", rest),
            _ => continue,
        };
        let Some(pid) = rest.split('-').next().filter(|p| p.parse::<u32>().is_ok()) else {
            continue;
        };
        if std::path::Path::new("/proc").join(pid).exists() {
            continue;
        }
        let old = entry
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age > day);
        if kind == "run" || old {
            let _ = crate::remove_tree::remove_tree(&entry.path());
        }
    }
}

/// Pipes standing in for stdio descriptors that are plain files, and the copying between them.
struct StdioPumps {
    stdin: Option<std::io::PipeWriter>,
    outputs: Vec<(std::io::PipeReader, bool)>,
}

/// Running pump threads.
struct RunningPumps {
    outputs: Vec<std::thread::JoinHandle<()>>,
}

impl StdioPumps {
    /// Decides which of fds 0, 1, 2 need a pipe; returns the command's ends and the pumps.
    fn prepare() -> Result<([Option<std::os::fd::OwnedFd>; 3], StdioPumps)> {
        use std::os::fd::AsFd;
        let mut ends: [Option<std::os::fd::OwnedFd>; 3] = [None, None, None];
        let mut pumps = StdioPumps {
            stdin: None,
            outputs: Vec::new(),
        };
        if bridle_sandbox::launcher::needs_pipe(std::io::stdin().as_fd()) {
            let (reader, writer) = std::io::pipe()?;
            ends[0] = Some(reader.into());
            pumps.stdin = Some(writer);
        }
        for (index, is_stdout) in [(1usize, true), (2, false)] {
            let needs = if is_stdout {
                bridle_sandbox::launcher::needs_pipe(std::io::stdout().as_fd())
            } else {
                bridle_sandbox::launcher::needs_pipe(std::io::stderr().as_fd())
            };
            if needs {
                let (reader, writer) = std::io::pipe()?;
                ends[index] = Some(writer.into());
                pumps.outputs.push((reader, is_stdout));
            }
        }
        Ok((ends, pumps))
    }

    /// Starts copying (after the launcher was forked: threads must not exist before).
    fn start(self) -> RunningPumps {
        if let Some(mut writer) = self.stdin {
            // Ends at end of input, or with EPIPE once the command is gone; never joined.
            std::thread::spawn(move || {
                let _ = std::io::copy(&mut std::io::stdin().lock(), &mut writer);
            });
        }
        let outputs = self
            .outputs
            .into_iter()
            .map(|(mut reader, is_stdout)| {
                std::thread::spawn(move || {
                    if is_stdout {
                        pump(&mut reader, std::io::stdout);
                    } else {
                        pump(&mut reader, std::io::stderr);
                    }
                })
            })
            .collect();
        RunningPumps { outputs }
    }
}

/// Copies `reader` to the stream `out` gives until end of input, locking it for each chunk
/// only: bridle's own lines (`say`) go between the command's, in the order they happened.
fn pump<W: Write>(reader: &mut std::io::PipeReader, out: impl Fn() -> W) {
    use std::io::Read;
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match reader.read(&mut buf) {
            Ok(0) => return,
            Ok(n) => {
                let mut out = out();
                if out.write_all(&buf[..n]).and_then(|()| out.flush()).is_err() {
                    return;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return,
        }
    }
}

impl RunningPumps {
    /// Waits until the command's output has been copied (the tree is gone, so the pipes end).
    fn finish(self) {
        for pump in self.outputs {
            let _ = pump.join();
        }
    }
}
