//! `bridle shell`: an interactive bash in a pseudo-terminal, confined like `bridle exec`.
//!
//! The user's terminal is put in raw mode and relayed to a new pty whose slave is the shell's
//! controlling terminal, so the shell never holds the user's real terminal (TIOCSTI-style
//! injection has nothing outside to reach even apart from seccomp). The window size follows
//! the user's terminal. Exits with the shell's status.

use std::io::{IsTerminal, Read, Write};
use std::os::fd::AsFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{Context, Result};
use bridle_sandbox::{Outcome, Sandbox, Spawned};

use crate::cli::{GlobalArgs, ShellArgs};
use crate::exec_cmd::EXIT_SANDBOX_UNAVAILABLE;
use crate::session_facts::{Facts, ensure_temp_base};

fn say(line: &str) {
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "bridle: {line}");
}

pub fn run(global: &GlobalArgs, args: &ShellArgs) -> Result<u8> {
    if !std::io::stdin().is_terminal() || !std::io::stdout().is_terminal() {
        say("`bridle shell` needs a terminal; for scripts use `bridle exec -- bash -c ...`");
        return Ok(2);
    }
    // From here on SIGTERM and SIGHUP cannot end bridle before what the run sets up on the
    // host is undone; once it is, bridle dies of the signal.
    bridle_sandbox::launcher::hold_termination();
    let code = run_held(global, args);
    bridle_sandbox::launcher::die_of_forwarded_signal();
    code
}

fn run_held(global: &GlobalArgs, args: &ShellArgs) -> Result<u8> {
    let facts = Facts::gather(global)?;
    let policy = facts.load_policy(global, args.confine.overrides()?)?;
    facts.report_env(&policy);
    ensure_temp_base()?;
    let temp_dir = facts.run_temp_dir();
    let plan = facts.plan(&policy, temp_dir.clone(), &[])?;
    if let crate::exec_cmd::Checked::Refused(code) =
        crate::exec_cmd::refused_by_rules(&plan, &["bash".into(), "-i".into()])
    {
        return Ok(code);
    }
    let proxy = match crate::net_wiring::shell_proxy(&plan) {
        Ok(proxy) => proxy,
        Err(refusal) => {
            say(&refusal.to_string());
            return Ok(EXIT_SANDBOX_UNAVAILABLE);
        }
    };
    let mut sandbox = match Sandbox::prepare(
        plan.spec,
        &bridle_sandbox::probe::quick(),
        std::env::current_exe()?,
    ) {
        Ok(s) => s,
        Err(refusal) => {
            say(&refusal.to_string());
            return Ok(EXIT_SANDBOX_UNAVAILABLE);
        }
    };
    let wall_time = sandbox
        .spec()
        .limits
        .wall_time_secs
        .map(Duration::from_secs);
    let (rows, cols) = bridle_sandbox::tty::size(std::io::stdin().as_fd()).unwrap_or((24, 80));
    let (master, slave) =
        bridle_sandbox::tty::open_pty(rows, cols).context("opening a pseudo-terminal")?;
    let cwd = crate::exec_cmd::start_dir(sandbox.spec())?;
    let launch = sandbox
        .launch(vec!["bash".into(), "-i".into()], &cwd)
        .with_controlling_terminal();
    let network = sandbox.spec().network;
    let (mut launch, relay) = match crate::net_wiring::with_relay(launch, network, proxy.as_ref()) {
        Ok(pair) => pair,
        Err(refusal) => {
            say(&refusal.to_string());
            return Ok(EXIT_SANDBOX_UNAVAILABLE);
        }
    };
    launch
        .command
        .stdin(slave.try_clone()?)
        .stdout(slave.try_clone()?)
        .stderr(slave.try_clone()?);
    if bridle_sandbox::launcher::termination_requested() {
        // Not seen by anyone: bridle dies of the signal once the sandbox is undone.
        drop(sandbox);
        let _ = crate::remove_tree::remove_tree(&temp_dir);
        return Ok(128 + 15);
    }
    let mut running = match sandbox.spawn(launch) {
        Ok(Spawned::Running(r)) => r,
        Ok(Spawned::ExecFailed(f)) => {
            say(&f.cause);
            return Ok(u8::try_from(f.code).unwrap_or(127));
        }
        Err(refusal) => {
            say(&refusal.to_string());
            return Ok(EXIT_SANDBOX_UNAVAILABLE);
        }
    };
    drop(slave);
    // The proxy serves the sandbox's relay; if it cannot, the session is stopped (125).
    let attached = crate::net_wiring::attach(proxy.as_ref(), relay);
    if attached.is_err() {
        running.kill_tree();
    }
    if let Some(note) = sandbox.config_locks_note() {
        say(&note);
    }
    // A closed terminal (SIGHUP) or SIGTERM ends the sandbox, then this process as usual.
    running.forward_termination();
    let mut net_watch = running.take_net_watch();
    // What the exec supervisor denies is said on the screen as it happens. The shell has the
    // terminal, so nobody can be asked: an exec an `ask` rule matches is denied.
    if let Some(events) = running.take_exec_events() {
        std::thread::spawn(move || events.run(&mut ShellExecs));
    }
    // The wall-clock limit (`limits.wall_time`, `--timeout`) ends the whole session.
    let timed_out = Arc::new(AtomicBool::new(false));
    if let Some(limit) = wall_time {
        let controller = running
            .controller()
            .map_err(|r| anyhow::anyhow!(r.to_string()))?;
        let timed_out = Arc::clone(&timed_out);
        std::thread::spawn(move || {
            std::thread::sleep(limit);
            timed_out.store(true, Ordering::SeqCst);
            controller.kill_tree();
        });
    }

    let saved = bridle_sandbox::tty::make_raw(std::io::stdin().as_fd())
        .context("putting the terminal in raw mode")?;
    let mut master_out = std::fs::File::from(master);
    let mut master_in = master_out.try_clone()?;
    let resize_target = master_out.try_clone()?;
    let done = Arc::new(AtomicBool::new(false));
    // Keyboard → shell. Ends when stdin ends or the shell is gone.
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        let mut stdin = std::io::stdin().lock();
        while let Ok(n) = stdin.read(&mut buf) {
            if n == 0 || master_in.write_all(&buf[..n]).is_err() {
                break;
            }
        }
    });
    // The window size follows the user's terminal.
    {
        let done = done.clone();
        std::thread::spawn(move || {
            let mut last = (rows, cols);
            while !done.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(200));
                if let Some(size) = bridle_sandbox::tty::size(std::io::stdin().as_fd())
                    && size != last
                {
                    let _ = bridle_sandbox::tty::set_size(resize_target.as_fd(), size.0, size.1);
                    last = size;
                }
            }
        });
    }
    // Shell → screen, until the pty reports the end (EIO once the shell and its tree are gone).
    let mut buf = [0u8; 16 * 1024];
    let mut stdout = std::io::stdout().lock();
    while let Ok(n) = master_out.read(&mut buf) {
        if n == 0
            || stdout
                .write_all(&buf[..n])
                .and_then(|()| stdout.flush())
                .is_err()
        {
            break;
        }
    }
    drop(stdout);
    done.store(true, Ordering::SeqCst);
    let _ = bridle_sandbox::tty::restore(std::io::stdin().as_fd(), &saved);
    let finished = running.finish(None);
    for line in finished.inspection.messages() {
        say(&line);
    }
    let outcome = crate::net_wiring::after_run(attached, finished.outcome);
    let code = match outcome {
        Outcome::Exited(_) if timed_out.load(Ordering::SeqCst) => {
            say(&format!(
                "timed out after {}s; the whole process tree was killed",
                wall_time.map_or(0, |d| d.as_secs())
            ));
            124
        }
        Outcome::Exited(code) => u8::try_from(code).unwrap_or(255),
        Outcome::TimedOut => 124,
        Outcome::Stopped(why) => {
            say(&why);
            137
        }
    };
    crate::exec_cmd::network_hint(net_watch.as_mut(), sandbox.spec());
    crate::net_wiring::print_deferred(proxy.as_ref());
    drop(sandbox);
    let _ = crate::remove_tree::remove_tree(&temp_dir);
    Ok(code)
}

/// The exec supervisor's reports during `bridle shell` (see where it is used).
struct ShellExecs;

impl bridle_sandbox::ExecObserver for ShellExecs {
    fn decided(&mut self, record: &bridle_sandbox::ExecRecord) {
        // The terminal is in raw mode: a line needs its carriage return.
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "\r\nbridle: {}\r\n", record.message());
    }

    fn approve(
        &mut self,
        _record: &bridle_sandbox::ExecRecord,
        _withdrawn: &dyn Fn() -> bool,
    ) -> bool {
        false
    }
}
