//! Network `allow-list` for the commands: one proxy per run under `bridle exec`, its denials
//! printed once per host, and the launch's relay served or the run refused.

use std::collections::HashSet;
use std::io::Write;
use std::os::fd::AsFd;
use std::os::unix::net::UnixStream;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bridle_exec::approvals::NoAnswerer;
use bridle_exec::net::{Attachment, NetDecision, NetProxy, ProxyConfig};
use bridle_exec::printable::printable;
use bridle_policy::{Decision, Guarantee, Network, Plan};
use bridle_sandbox::{Launch, Outcome, Refusal};

/// The proxy of one `bridle exec` run, and the denial lines not printed yet.
pub struct ExecProxy {
    proxy: NetProxy,
    /// Lines held back until the run is over (stderr is a file that a pump writes to).
    deferred: Option<Arc<Mutex<Vec<String>>>>,
}

/// The proxy of one `bridle exec` run, when the network is `allow-list`. Nobody is asked about
/// a host the allow-list does not name (the command owns the terminal): it is denied. Each
/// denied `host:port` is printed once: as it happens, or, when stderr is a file (a pump copies
/// the command's output into it, and a write beside the pump could be overwritten), when the
/// run is over.
pub fn exec_proxy(plan: &Plan) -> Result<Option<ExecProxy>, Refusal> {
    let hold = bridle_sandbox::launcher::needs_pipe(std::io::stderr().as_fd());
    proxy_for_run(plan, hold)
}

/// The proxy of one `bridle shell` session: its denial lines are all printed when the session
/// is over (the terminal is the shell's while it runs, in raw mode).
pub fn shell_proxy(plan: &Plan) -> Result<Option<ExecProxy>, Refusal> {
    proxy_for_run(plan, true)
}

fn proxy_for_run(plan: &Plan, hold_lines: bool) -> Result<Option<ExecProxy>, Refusal> {
    if plan.spec.network != Network::AllowList {
        return Ok(None);
    }
    let proxy =
        NetProxy::start(plan, Arc::new(NoAnswerer), ProxyConfig::default()).map_err(|e| {
            Refusal {
                guarantee: Some(Guarantee::Net),
                cause: format!("network allow-list: {e}"),
            }
        })?;
    let deferred = hold_lines.then(|| Arc::new(Mutex::new(Vec::new())));
    // Live lines go to a duplicate of fd 2, not through `std::io::stderr()`, whose lock a stdio
    // pump may hold: the proxy's threads must never wait.
    let live = std::io::stderr()
        .as_fd()
        .try_clone_to_owned()
        .map(std::fs::File::from)
        .ok();
    let held = deferred.clone();
    let printed = Mutex::new(HashSet::new());
    proxy.observe(Box::new(move |d: &NetDecision| {
        let first = printed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(d.target());
        if d.decision != Decision::Deny || !first {
            return;
        }
        let line = format!("bridle: {}\n", printable(&d.denial_line()));
        match (&held, live.as_ref()) {
            (Some(held), _) => held
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .push(line),
            (None, Some(mut err)) => {
                let _ = err.write_all(line.as_bytes());
            }
            (None, None) => {}
        }
    }));
    Ok(Some(ExecProxy { proxy, deferred }))
}

/// `launch` with its relay channel when the network is `allow-list`.
pub fn with_relay(
    launch: Launch,
    network: Network,
    proxy: Option<&ExecProxy>,
) -> Result<(Launch, Option<UnixStream>), Refusal> {
    bridle_exec::net::prepare_launch(launch, network, proxy.map(|p| &p.proxy))
}

/// Serves the running launch's relay.
pub fn attach(
    proxy: Option<&ExecProxy>,
    relay: Option<UnixStream>,
) -> Result<Option<Attachment>, Refusal> {
    bridle_exec::net::attach_launch(proxy.map(|p| &p.proxy), relay)
}

/// The run's outcome, or 125 when its relay could not be served (the tree was killed).
pub fn after_run(attached: Result<Option<Attachment>, Refusal>, outcome: Outcome) -> Outcome {
    match attached {
        Ok(attachment) => {
            if let Some(attachment) = attachment {
                attachment.finish(Duration::from_secs(2));
            }
            outcome
        }
        Err(refusal) => {
            let mut err = std::io::stderr().lock();
            let _ = writeln!(err, "bridle: {}", printable(&refusal.to_string()));
            Outcome::Exited(125)
        }
    }
}

/// Prints the denial lines held back during the run (call once the stdio pumps are done).
pub fn print_deferred(proxy: Option<&ExecProxy>) {
    let Some(held) = proxy.and_then(|p| p.deferred.as_ref()) else {
        return;
    };
    let lines = std::mem::take(
        &mut *held
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner),
    );
    let mut err = std::io::stderr().lock();
    for line in lines {
        let _ = err.write_all(line.as_bytes());
    }
}
