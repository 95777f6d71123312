//! `bridle run [OPTIONS] TASK`: the agent, headless, on one task until the turn ends. Every
//! tool call goes through the same pipeline as `bridle tool`, and the session log records what
//! was asked, what decided each call and what came back.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::{Context, Result, bail};
use bridle_agent::log::{
    Backend, Event, NewSession, PromptSection, SessionDir, SessionLog, TurnEndReason,
};
use bridle_agent::model::Model;
use bridle_agent::model::openai::OpenAiModel;
use bridle_agent::model::script::ScriptModel;
use bridle_agent::plan_mode::{DEFAULT_SECTION, PlanMode};
use bridle_agent::{Agent, AgentConfig};
use bridle_policy::{Overrides, Plan};

use crate::agent_host::{LocalTools, answerer};
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
    let done = Arc::new(AtomicBool::new(false));
    let watcher = {
        let done = Arc::clone(&done);
        std::thread::spawn(move || kill_tools_on_cancel(&done))
    };
    let result = run_turn(global, args);
    done.store(true, Ordering::SeqCst);
    let _ = watcher.join();
    // A signal that came at any point, even after the turn ended: die of it, as the caller
    // who sent it expects.
    if bridle_sandbox::launcher::termination_requested() {
        bridle_sandbox::launcher::die_of_forwarded_signal();
    }
    result
}

/// Once a held signal came, kills the running tools' trees (SIGTERM to each launcher), again
/// every 50 ms until the turn has ended, so a tool that was being started is not missed.
fn kill_tools_on_cancel(done: &AtomicBool) {
    while !done.load(Ordering::SeqCst) {
        if bridle_sandbox::launcher::termination_requested() {
            bridle_sandbox::launcher::terminate_children();
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

fn run_turn(global: &GlobalArgs, args: &RunArgs) -> Result<u8> {
    let model = model(&args.model)?;
    let backend: Backend = args.store.parse().map_err(anyhow::Error::msg)?;
    let facts = Facts::gather(global)?;
    let policy = facts.load_policy(global, Overrides::default())?;
    let temp_dir = crate::tool_cmd::private_temp_dir(None)?;
    let plan = facts.plan(&policy, temp_dir.clone())?;
    let dir = session_dir(args.session_dir.as_deref(), &plan, &temp_dir)?;
    let real_dir = std::fs::canonicalize(dir.path())?;
    let new = NewSession {
        workspace: plan.spec.workspace.display().to_string(),
        profile: global.profile.clone(),
        policy_digest: bridle_agent::log::chain::sha256_hex(&serde_json::to_vec(&plan.spec)?),
    };
    let log = open_log(&dir, args, backend, &new, &plan)?;
    say(&format!("session {}", log.id()));
    let sections = vec![base_section(&plan)];
    let mut tools = LocalTools::new(&facts, global, plan, temp_dir.clone(), answerer(), true)?;
    // The agent's commands and file tools must not read the logs or the key that seals them,
    // in this plan or any escalation of it.
    tools.mask(real_dir, "bridle's session directory");
    let config = AgentConfig {
        sections,
        plan_mode: Some(PlanMode::new(DEFAULT_SECTION).map_err(anyhow::Error::msg)?),
        cancel: Some(Arc::new(bridle_sandbox::launcher::termination_requested)),
        ..AgentConfig::default()
    };
    let mut agent = Agent::new(log, model, &tools, config);
    if args.plan {
        agent.enter_plan_mode()?;
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
    if !report.answer.is_empty() {
        writeln!(out, "{}", report.answer)?;
    }
    if report.reason == TurnEndReason::Completed {
        return Ok(0);
    }
    let reason = bridle_agent::log::turn_end_name(report.reason);
    match report.error {
        Some(e) => say(&format!("the turn ended {reason}: {e}")),
        None => say(&format!("the turn ended {reason}")),
    }
    Ok(1)
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

/// The session directory: `--session-dir` or the default, never inside the workspace or a
/// writable root (checked before anything is created, on the real path).
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
    plan: &Plan,
) -> Result<SessionLog> {
    if let Some(id) = &args.resume {
        let (mut log, repairs) = dir.resume(id)?;
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
        if header.policy_digest != new.policy_digest {
            // The policy changed since the session began: the log says so before the turn.
            say(&format!(
                "session {id}: the policy differs from the one it began with (profile `{}`)",
                header.profile
            ));
            log.append(Event::SandboxMode {
                mode: plan.spec.mode,
            })?;
            log.append(Event::ApprovalPolicy {
                policy: plan.approval,
            })?;
            log.barrier()?;
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

/// What the model is told about where it works and what confines it.
fn base_section(plan: &Plan) -> PromptSection {
    let spec = &plan.spec;
    let mut section = base_section_text(plan);
    if let Some(list) = &spec.allow_list {
        let hosts: Vec<&str> = list
            .allow
            .iter()
            .take(30)
            .map(|e| e.entry.as_str())
            .collect();
        section.text.push_str(&format!(
            " The network is an allow-list: commands reach only these hosts, through a proxy the \
             HTTPS_PROXY/HTTP_PROXY/ALL_PROXY variables name (there is no DNS inside; a client \
             must use the proxy): {}.",
            if hosts.is_empty() {
                "none".to_owned()
            } else {
                hosts.join(", ")
            }
        ));
    }
    section
}

fn base_section_text(plan: &Plan) -> PromptSection {
    let spec = &plan.spec;
    PromptSection {
        name: "bridle:environment".to_owned(),
        order: 10,
        text: format!(
            "You are a coding agent working in the workspace `{}`. Every command and file tool \
             runs in a sandbox the kernel enforces: sandbox mode `{}`, network `{}`, approval \
             policy `{}`. A denial is final: do not retry a denied call unchanged; explain what \
             you could not do instead. Relative paths are relative to the workspace.",
            spec.workspace.display(),
            spec.mode,
            spec.network,
            plan.approval
        ),
    }
}
