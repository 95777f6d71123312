//! `bridle run [OPTIONS] TASK`: the agent, headless, on one task until the turn ends. Every
//! tool call goes through the same pipeline as `bridle tool`, and the session log records what
//! was asked, what decided each call and what came back.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::{Context, Result, bail};
use bridle_agent::front::json;
use bridle_agent::log::{
    Backend, Event, NewSession, PolicyRule, PolicySummary, SessionDir, SessionLog, TurnEndReason,
};
use bridle_agent::model::Model;
use bridle_agent::model::openai::OpenAiModel;
use bridle_agent::model::script::ScriptModel;
use bridle_agent::plugin::{PluginHost, RuntimeFacts, Shipped};
use bridle_agent::{Agent, AgentConfig};
use bridle_policy::Plan;

use crate::agent_host::{LocalTools, SessionSetup, answerer};
use crate::cli::{GlobalArgs, RunArgs};
use crate::session_facts::Facts;
use bridle_exec::printable::printable;

fn say(line: &str) {
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "bridle: {}", printable(line));
}

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
    let model = model(&args.model)?;
    let backend: Backend = args.store.parse().map_err(anyhow::Error::msg)?;
    let facts = Facts::gather(global)?;
    let overrides = args.confine.overrides();
    let policy = facts.load_policy(global, overrides.clone())?;
    facts.report_env(&policy);
    let temp_dir = crate::tool_cmd::private_temp_dir(None)?;
    let preview = facts.plan(&policy, temp_dir.clone(), &[])?;
    // The profile's `agent:` section: a plugin configuration that does not parse fails the
    // profile load, before any session exists.
    let plugins = plugin_host(&policy.agent, &preview)?;
    let plan_flag_given = [(args.plan, "--plan"), (args.plan_off, "--plan-off")];
    if let Some((_, flag)) = plan_flag_given.iter().find(|(given, _)| *given)
        && !plugins.commands().iter().any(|c| c.name() == "plan")
    {
        return Err(not_loaded(flag));
    }
    let dir = session_dir(args.session_dir.as_deref(), &preview, &temp_dir)?;
    let real_dir = std::fs::canonicalize(dir.path())?;
    // The agent's commands and file tools must not read the logs or the key that seals them,
    // in this plan or any escalation of it.
    let masks = vec![(real_dir, SESSION_DIR.to_owned())];
    let plan = facts.plan(&policy, temp_dir.clone(), &masks)?;
    let summary = policy_summary(&plan, &temp_dir, &global.profile)?;
    let new = NewSession {
        workspace: plan.spec.workspace.display().to_string(),
        profile: global.profile.clone(),
        policy_digest: summary.digest.clone(),
    };
    let mut log = open_log(&dir, args, backend, &new)?;
    watch_events(&mut log, args.json, global.quiet);
    log_policy(&mut log, &summary)?;
    say(&format!("session {}", log.id()));
    let session_id = log.id().to_owned();
    let tools = LocalTools::new(
        SessionSetup {
            facts: &facts,
            global,
            overrides,
            plan,
            temp_dir: temp_dir.clone(),
            masks,
            persist_terminal: true,
        },
        answerer(),
    )?;
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
    let config = AgentConfig {
        plugins: Arc::new(plugins),
        cancel: Some(Arc::new(cancelled_by)),
        ..AgentConfig::default()
    };
    let mut agent = Agent::new(log, model, &tools.pipeline, config);
    if args.plan {
        agent.command("/plan").map_err(plan_flag("--plan"))?;
    }
    // `/plan off` as the task is the headless way to leave plan mode, like `--plan-off`.
    let only_leave = args.task.trim() == "/plan off";
    if args.plan_off || only_leave {
        say(&agent
            .command("/plan off")
            .map_err(plan_flag("--plan-off"))?);
    }
    if only_leave {
        drop(agent);
        drop(tools);
        let _ = std::fs::remove_dir_all(&temp_dir);
        return Ok(0);
    }
    let report = agent.run_turn(&args.task);
    drop(agent);
    if let Some(why) = tools.close_terminal() {
        say(&why);
    }
    drop(tools);
    let _ = std::fs::remove_dir_all(&temp_dir);
    let report = report?;
    let mut out = std::io::stdout().lock();
    if args.json {
        let line = json::final_line(&session_id, report.turn, report.reason, &report.answer);
        writeln!(out, "{line}")?;
        out.flush()?;
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

/// The model a `--model` route names.
fn model(route: &str) -> Result<Box<dyn Model>> {
    if let Some(file) = route.strip_prefix("script:") {
        anyhow::ensure!(
            !file.is_empty(),
            "model {route:?}: the script file is missing"
        );
        let text = std::fs::read_to_string(file)
            .with_context(|| format!("reading the model script `{file}`"))?;
        let responses = ScriptModel::parse(file, &text).map_err(anyhow::Error::msg)?;
        return Ok(Box::new(ScriptModel::new(route, responses)));
    }
    let model =
        OpenAiModel::from_route(route, &|k| std::env::var(k).ok()).map_err(anyhow::Error::msg)?;
    Ok(Box::new(model))
}

/// What the session directory is called where it is masked.
const SESSION_DIR: &str = "bridle's session directory";

/// How the session's private temp directory (a new one every run) is written in the policy
/// digest and summary, so the same policy has the same digest on every run.
const TEMP_DIR: &str = "<session temp dir>";

/// `text` with the temp directory `temp` (a path, or a path inside it) written [`TEMP_DIR`].
fn without_temp_dir(text: &str, temp: &str) -> String {
    match text.strip_prefix(temp) {
        Some(rest) if rest.is_empty() || rest.starts_with('/') => format!("{TEMP_DIR}{rest}"),
        _ => text.to_owned(),
    }
}

/// `value` with every string naming the temp directory rewritten by [`without_temp_dir`].
fn stable(value: serde_json::Value, temp: &str) -> serde_json::Value {
    use serde_json::Value;
    match value {
        Value::String(s) => Value::String(without_temp_dir(&s, temp)),
        Value::Array(items) => Value::Array(items.into_iter().map(|v| stable(v, temp)).collect()),
        Value::Object(map) => Value::Object(
            map.into_iter()
                .map(|(k, v)| (without_temp_dir(&k, temp), stable(v, temp)))
                .collect(),
        ),
        other => other,
    }
}

/// The effective policy of `plan` as logged: what a reviewer needs to see, and the digest of
/// all of it (spec, approval policy, rules), the same on every run of the same policy.
fn policy_summary(plan: &Plan, temp_dir: &Path, profile: &str) -> Result<PolicySummary> {
    let temp = temp_dir.display().to_string();
    let everything = serde_json::json!({
        "spec": plan.spec,
        "approval": plan.approval,
        "command_rules": plan.command_rules,
        "path_rules": plan.path_rules,
    });
    // Sorted keys: the digest must not depend on serde_json's map order (the ACP SDK turns
    // on `preserve_order` in this build).
    let mut everything = stable(everything, &temp);
    everything.sort_all_objects();
    let digest = bridle_agent::log::chain::sha256_hex(&serde_json::to_vec(&everything)?);
    let paths = |paths: &[PathBuf]| -> Vec<String> {
        paths
            .iter()
            .map(|p| without_temp_dir(&p.display().to_string(), &temp))
            .collect()
    };
    let spec = &plan.spec;
    let rules = plan
        .command_rules
        .iter()
        .map(|r| (r.id.clone(), "command", r.decision))
        .chain(
            plan.path_rules
                .iter()
                .map(|r| (r.id.clone(), "path", r.decision)),
        )
        .map(|(id, applies_to, decision)| PolicyRule {
            id,
            applies_to: applies_to.to_owned(),
            decision,
        })
        .collect();
    Ok(PolicySummary {
        digest,
        profile: profile.to_owned(),
        mode: spec.mode,
        approval: plan.approval,
        network: spec.network,
        writable_roots: paths(&spec.writable_roots),
        protected_paths: paths(&spec.protected_paths),
        masked_paths: paths(&spec.masked_paths),
        rules,
    })
}

/// Logs the effective policy when it is not the one in force in the log (a new session, or
/// one resumed or forked under another policy); a change also logs the new sandbox mode and
/// approval policy, and says so.
fn log_policy(log: &mut SessionLog, summary: &PolicySummary) -> Result<()> {
    let mut header_digest = None;
    let mut logged = None;
    for (_, event) in log.events() {
        match event {
            Event::SessionHeader(h) => header_digest = Some(h.policy_digest.clone()),
            Event::PolicyEffective(p) => logged = Some(p.digest.clone()),
            _ => {}
        }
    }
    let in_force = logged.clone().or(header_digest);
    if in_force.as_deref() != Some(summary.digest.as_str()) {
        // The policy changed since the session last ran: the log says so before the turn.
        say(&format!(
            "session {}: the policy differs from the one it last ran under (profile `{}`)",
            log.id(),
            summary.profile
        ));
        log.append(Event::SandboxMode { mode: summary.mode })?;
        log.append(Event::ApprovalPolicy {
            policy: summary.approval,
        })?;
    }
    if logged.as_deref() != Some(summary.digest.as_str()) {
        log.append(Event::PolicyEffective(summary.clone()))?;
    }
    log.barrier()?;
    Ok(())
}

/// The session directory: `--session-dir` or the default, never inside the workspace or a
/// writable root, nor containing one (checked before anything is created, on the real path).
fn session_dir(requested: Option<&Path>, plan: &Plan, temp_dir: &Path) -> Result<SessionDir> {
    let dir: PathBuf = match requested {
        Some(d) => std::path::absolute(d)?,
        None => crate::session_facts::default_session_dir()?,
    };
    if dir
        .components()
        .any(|c| matches!(c, std::path::Component::ParentDir))
    {
        bail!(
            "session dir `{}`: `..` is not allowed in it (say where it is directly)",
            dir.display()
        );
    }
    let real = real_path(&dir);
    let forbidden = std::iter::once(&plan.spec.workspace).chain(
        plan.spec
            .writable_roots
            .iter()
            .filter(|r| r.as_path() != temp_dir),
    );
    for root in forbidden {
        if real.starts_with(root) {
            bail!(
                "refusing session dir `{}`: it lies inside `{}`, which the agent can write, so \
                 it could rewrite its own log",
                real.display(),
                root.display()
            );
        }
    }
    // The session directory is masked in the sandbox: one that holds the workspace or a
    // writable root would hide the agent's work from it, and puts the log beside what the
    // agent writes.
    let held = std::iter::once(&plan.spec.workspace).chain(plan.spec.writable_roots.iter());
    for root in held {
        if root.starts_with(&real) {
            bail!(
                "refusing session dir `{}`: it contains `{}`, which the agent can write (the \
                 session directory is hidden from the agent, and its log must lie outside \
                 what the agent writes); choose a directory outside it",
                real.display(),
                root.display()
            );
        }
    }
    Ok(SessionDir::open(&dir)?)
}

/// `path` with its existing part resolved (symlinks followed) and the rest appended.
fn real_path(path: &Path) -> PathBuf {
    let mut existing = path.to_path_buf();
    let mut rest = Vec::new();
    while !existing.exists() {
        match (existing.file_name(), existing.parent()) {
            (Some(name), Some(parent)) => {
                rest.push(name.to_owned());
                existing = parent.to_path_buf();
            }
            _ => break,
        }
    }
    let mut real = std::fs::canonicalize(&existing).unwrap_or(existing);
    for name in rest.iter().rev() {
        real.push(name);
    }
    real
}

/// A new session, or the one `--resume` or `--fork` names.
fn open_log(
    dir: &SessionDir,
    args: &RunArgs,
    backend: Backend,
    new: &NewSession,
) -> Result<SessionLog> {
    if let Some(id) = &args.resume {
        let (log, repairs) = dir.resume(id)?;
        for repair in repairs {
            say(&format!("session {id}: {repair}"));
        }
        let Some((_, Event::SessionHeader(header))) = log.events().first().cloned() else {
            bail!("session {id} has no header");
        };
        if header.workspace != new.workspace {
            bail!(
                "session {id} belongs to the workspace `{}`; resume it from there, or branch \
                 it into this workspace with --fork",
                header.workspace
            );
        }
        return Ok(log);
    }
    if let Some(spec) = &args.fork {
        let (id, at) = match spec.split_once('@') {
            Some((id, seq)) => {
                let seq = seq
                    .parse::<u64>()
                    .with_context(|| format!("--fork {spec:?}: `{seq}` is not an event number"))?;
                (id, Some(seq))
            }
            None => (spec.as_str(), None),
        };
        return Ok(dir.fork(id, at, backend, new)?);
    }
    Ok(dir.create(backend, new)?)
}

/// The plugin host of the profile's `agent:` section (a bad plugin configuration is a bad
/// profile: exit 2, naming file:line:col).
fn plugin_host(section: &bridle_policy::AgentSection, plan: &Plan) -> Result<PluginHost> {
    let shipped = Shipped::new(RuntimeFacts::from_plan(plan));
    bridle_agent::plugin::load(section, &shipped)
        .map_err(|e| crate::UsageError(e.to_string()).into())
}

/// The error of `--plan`/`--plan-off` in a session without plan mode, or whose switch failed.
fn plan_flag(flag: &'static str) -> impl Fn(bridle_agent::session::SessionError) -> anyhow::Error {
    move |e| match e {
        bridle_agent::session::SessionError::UnknownCommand { .. } => not_loaded(flag),
        other => anyhow::anyhow!("{flag}: {other}"),
    }
}

/// `flag` given to a session without the plan-mode plugin: a usage error.
fn not_loaded(flag: &str) -> anyhow::Error {
    crate::UsageError(format!(
        "{flag}: the plan-mode plugin is not loaded (the profile's `agent:` section leaves it out)"
    ))
    .into()
}
