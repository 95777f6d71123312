//! The setup every front end (`bridle run`, `chat`, `acp`) shares: profile → plan, the session
//! directory, the log (new, resumed or forked), the effective policy logged, the model, the
//! answerer, the tools, the prompt sections, and a live [`Session`] started on all of it.
//!
//! Two phases, so a front end can watch the log before the session's thread owns it:
//! [`prepare`] opens the log; [`Prepared::start`] logs the policy when it is not the one in
//! force there, builds what the session runs with ([`parts`]: the one place the registry,
//! sections, commands and listeners come from the profile) and starts it. [`Live::stop`] gives the log back, so a front end can
//! start the same session again under another policy ([`Live::restart`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result};
use bridle_agent::AgentConfig;
use bridle_agent::log::{Backend, NewSession, PolicySummary, SessionLog};
use bridle_agent::model::Model;
use bridle_agent::model::openai::OpenAiModel;
use bridle_agent::model::script::ScriptModel;
use bridle_agent::plugin::{PluginHost, RuntimeFacts, Shipped};
use bridle_agent::session::{ChannelAnswerer, Questions, Session, SessionConfig};
use bridle_exec::approvals::Answerer;
use bridle_exec::printable::printable;
use bridle_policy::{AgentSection, ApprovalPolicy, Overrides, Plan};

use crate::agent_host::{LocalTools, SessionSetup};

mod log_setup;
use crate::cli::GlobalArgs;
use crate::session_facts::Facts;
use log_setup::{SESSION_DIR, log_policy, open_log, policy_summary, session_dir};

/// Writes a diagnostic line on stderr (never stdout: it may be a protocol channel).
pub fn say(line: &str) {
    use std::io::Write;
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "bridle: {}", printable(line));
}

/// Which log the session runs on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Open {
    New,
    /// `--resume ID`.
    Resume(String),
    /// `--fork ID[@SEQ]`.
    Fork(String),
}

/// Who answers approvals and plan reviews.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Asking {
    /// The person at the terminal when there is one, else nobody (`bridle run`).
    Terminal,
    /// The front end, through a [`ChannelAnswerer`] and its [`Questions`].
    FrontEnd,
}

/// What a front end asks for.
#[derive(Debug, Clone)]
pub struct Request {
    pub global: GlobalArgs,
    /// `--model`.
    pub model: String,
    /// `--store`.
    pub store: String,
    /// `--session-dir`.
    pub session_dir: Option<PathBuf>,
    pub open: Open,
    /// The command line's overrides (`--mode`, `--network`, ...).
    pub overrides: Overrides,
    pub asking: Asking,
    /// The approval policy, when a front end chose one (no wider than the profile's: the
    /// front end checks).
    pub approval: Option<ApprovalPolicy>,
    /// The terminal persists across the session's calls.
    pub persist_terminal: bool,
    /// Slash commands the front end will send, with the flag that asks for each (`plan`,
    /// `--plan`): a profile whose plugins do not offer one is refused before any session.
    pub commands_needed: Vec<(&'static str, &'static str)>,
    /// Directories that must be readable under the session's plan (ACP's
    /// `additionalDirectories`), refused before any session: never made writable.
    pub readable: Vec<PathBuf>,
}

/// A session whose log is open and whose policy is logged, not started yet.
pub struct Prepared {
    pub request: Request,
    facts: Facts,
    pub plan: Plan,
    /// The effective policy as logged.
    pub summary: PolicySummary,
    /// The profile's `agent:` section (its plugin configurations checked).
    agent: AgentSection,
    temp_dir: PathBuf,
    masks: Vec<(PathBuf, String)>,
    /// The log: install a watcher on it before [`Prepared::start`].
    pub log: SessionLog,
    /// The model `--model` names, built before the log was opened (a bad route is a usage
    /// error that leaves no session behind).
    model: Box<dyn Model>,
}

impl std::fmt::Debug for Prepared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Prepared")
            .field("session", &self.log.id())
            .finish_non_exhaustive()
    }
}

/// Plans the request's policy and opens its log. Says `session <ID>` on stderr.
pub fn prepare(request: Request) -> Result<Prepared> {
    let backend: Backend = request.store.parse().map_err(anyhow::Error::msg)?;
    // First: a model that cannot be built is the caller's to fix, and no session may be
    // created for it.
    let model = model(&request.model)?;
    let facts = Facts::gather(&request.global)?;
    let policy = facts.load_policy(&request.global, request.overrides.clone())?;
    facts.report_env(&policy);
    let temp_dir = crate::tool_cmd::private_temp_dir()?;
    // Whatever fails from here leaves nothing behind.
    prepare_in(request, backend, model, facts, policy, &temp_dir).inspect_err(|_| {
        let _ = std::fs::remove_dir_all(&temp_dir);
    })
}

/// [`prepare`], once the session's private temp dir exists.
fn prepare_in(
    request: Request,
    backend: Backend,
    model: Box<dyn Model>,
    facts: Facts,
    policy: bridle_policy::Policy,
    temp_dir: &Path,
) -> Result<Prepared> {
    let temp_dir = temp_dir.to_path_buf();
    let preview = facts.plan(&policy, temp_dir.clone(), &[])?;
    // A host that cannot enforce the profile gets no session: the agent would work with
    // every command refused (exit 125, the line `bridle exec` prints).
    if let Some(missing) =
        bridle_sandbox::assess::assess(&preview.spec, bridle_sandbox::probe()).refusal()
    {
        let why = missing
            .note
            .as_ref()
            .map(|note| format!(" ({note})"))
            .unwrap_or_default();
        return Err(crate::SandboxUnavailable(format!("{}{why}", missing.guarantee)).into());
    }
    // The profile's `agent:` section: a plugin configuration that does not parse fails the
    // profile load, before any session exists.
    let plugins = Arc::new(plugin_host(&policy.agent, &preview)?);
    for (command, flag) in &request.commands_needed {
        if !plugins.commands().iter().any(|c| c.name() == *command) {
            return Err(not_loaded(flag));
        }
    }
    // The log reads and writes the event types these plugins declare (and refuses others).
    let dir = session_dir(request.session_dir.as_deref(), &preview, &temp_dir)?
        .with_kinds(plugins as Arc<dyn bridle_agent::log::EventKinds>);
    // Later invocations hide it whatever their `--session-dir` or `$XDG_STATE_HOME` says.
    facts.record_session_dir(dir.path())?;
    let real_dir = std::fs::canonicalize(dir.path())?;
    // The agent's commands and file tools must not read the logs or the key that seals them,
    // in this plan or any escalation of it.
    let masks = vec![(real_dir, SESSION_DIR.to_owned())];
    let mut plan = facts.plan(&policy, temp_dir.clone(), &masks)?;
    if let Some(approval) = request.approval {
        plan.approval = approval;
    }
    readable_only(&plan, &request.global.profile, &request.readable)?;
    let summary = policy_summary(&plan, &temp_dir, &request.global.profile)?;
    let new = NewSession {
        workspace: plan.spec.workspace.display().to_string(),
        profile: request.global.profile.clone(),
        policy_digest: summary.digest.clone(),
    };
    let log = open_log(&dir, &request.open, backend, &new)?;
    say(&format!("session {}", log.id()));
    Ok(Prepared {
        request,
        facts,
        plan,
        summary,
        agent: policy.agent,
        temp_dir,
        masks,
        log,
        model,
    })
}

/// `dirs` are readable roots only: each must exist and be readable under `plan` (the
/// session directory masked); none is ever made writable.
fn readable_only(plan: &Plan, profile: &str, dirs: &[PathBuf]) -> Result<()> {
    let spec = &plan.spec;
    for dir in dirs {
        let real = std::fs::canonicalize(dir)
            .with_context(|| format!("additionalDirectories `{}`", dir.display()))?;
        let readable = spec.readable_roots.iter().any(|r| real.starts_with(r))
            && !spec.masked_paths.iter().any(|m| real.starts_with(m));
        anyhow::ensure!(
            readable,
            "additionalDirectories `{}`: the profile `{profile}` does not make it readable \
             (they are readable roots only, never writable)",
            dir.display()
        );
    }
    Ok(())
}

/// The plugins the profile's `agent:` section loads for a session under `plan`; a plugin
/// configuration that does not parse is the caller's to fix (exit 2).
fn plugin_host(section: &AgentSection, plan: &Plan) -> Result<PluginHost> {
    let shipped = Shipped::new(RuntimeFacts::from_plan(plan));
    bridle_agent::plugin::load(section, &shipped)
        .map_err(|e| crate::UsageError(e.to_string()).into())
}

/// `flag` given to a session without the plugin whose command it needs: a usage error.
pub fn not_loaded(flag: &str) -> anyhow::Error {
    crate::UsageError(format!(
        "{flag}: the plan-mode plugin is not loaded (the profile's `agent:` section leaves it out)"
    ))
    .into()
}

/// What a front end adds to the session it starts.
#[derive(Default)]
pub struct Hooks {
    /// Asked often whether the turn is cancelled from outside (a signal, a deadline).
    pub cancel: Option<Arc<dyn Fn() -> Option<String> + Send + Sync>>,
    /// Called by [`Session::cancel`], after the session's own running commands were killed
    /// (a process that runs one session at a time may kill every child it has).
    pub on_cancel: Option<Arc<dyn Fn() + Send + Sync>>,
}

/// A live session and what it owns.
pub struct Live {
    pub session: Session,
    pub id: String,
    /// The questions for the front end ([`Asking::FrontEnd`]).
    pub questions: Option<Questions>,
    tools: Arc<LocalTools>,
    /// What [`Live::restart`] needs.
    rest: Rest,
}

struct Rest {
    request: Request,
    facts: Facts,
    agent: AgentSection,
    temp_dir: PathBuf,
    masks: Vec<(PathBuf, String)>,
}

impl std::fmt::Debug for Live {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Live")
            .field("session", &self.id)
            .finish_non_exhaustive()
    }
}

/// What a session runs with, built from the profile's plan: its tools (the pipeline) and the
/// plugins the profile's `agent:` section loads (their tools, sections, listeners, commands,
/// event types and guards).
pub struct Parts {
    pub tools: LocalTools,
    pub plugins: PluginHost,
}

/// The session's parts for `plan`, asking `answerer`.
fn parts(prepared: &PreparedRef<'_>, answerer: Arc<dyn Answerer>) -> Result<Parts> {
    let plugins = plugin_host(prepared.agent, prepared.plan)?;
    let tools = LocalTools::new(
        SessionSetup {
            facts: prepared.facts,
            global: &prepared.request.global,
            overrides: prepared.request.overrides.clone(),
            plan: prepared.plan.clone(),
            temp_dir: prepared.temp_dir.to_owned(),
            masks: prepared.masks.to_vec(),
            persist_terminal: prepared.request.persist_terminal,
        },
        answerer,
    )?;
    Ok(Parts { tools, plugins })
}

/// The borrowed view [`parts`] builds from (a [`Prepared`], or a stopped [`Live`] re-planned).
struct PreparedRef<'p> {
    request: &'p Request,
    facts: &'p Facts,
    plan: &'p Plan,
    agent: &'p AgentSection,
    temp_dir: &'p Path,
    masks: &'p [(PathBuf, String)],
}

impl Prepared {
    /// Starts the session: its thread owns the log, the model and the tools.
    pub fn start(mut self, hooks: Hooks) -> Result<Live> {
        // Logged here, not in `prepare`: a front end's watcher sees the policy events too.
        log_policy(&mut self.log, &self.summary)?;
        let model = self.model;
        let (answerer, questions): (Arc<dyn Answerer>, _) = match self.request.asking {
            Asking::Terminal => (Arc::from(crate::agent_host::answerer()), None),
            Asking::FrontEnd => {
                let (a, q) = ChannelAnswerer::new();
                (Arc::new(a.clone()) as Arc<dyn Answerer>, Some((a, q)))
            }
        };
        let view = PreparedRef {
            request: &self.request,
            facts: &self.facts,
            plan: &self.plan,
            agent: &self.agent,
            temp_dir: &self.temp_dir,
            masks: &self.masks,
        };
        let parts = parts(&view, answerer)?;
        let tools = Arc::new(parts.tools);
        let (channel, questions) = match questions {
            Some((a, q)) => (Some(a), Some(q)),
            None => (None, None),
        };
        let config = SessionConfig {
            agent: AgentConfig {
                plugins: Arc::new(parts.plugins),
                cancel: hooks.cancel,
                ..AgentConfig::default()
            },
            // The plugins' commands are added by the session.
            commands: Vec::new(),
            on_cancel: Some(on_cancel(&tools, hooks.on_cancel)),
            answerer: channel,
        };
        let id = self.log.id().to_owned();
        let host: Arc<dyn bridle_agent::tools::ToolHost + Send> = tools.clone();
        let session = Session::start(self.log, model, host, config);
        tools.cancel_runs_with(bridle_exec::run::CancelCheck(Arc::new(
            session.cancel_check(),
        )));
        Ok(Live {
            session,
            id,
            questions,
            tools,
            rest: Rest {
                request: self.request,
                facts: self.facts,
                agent: self.agent,
                temp_dir: self.temp_dir,
                masks: self.masks,
            },
        })
    }
}

/// What [`Session::cancel`] does: kills the process trees of this session's running
/// commands, then whatever the front end adds.
fn on_cancel(
    tools: &Arc<LocalTools>,
    then: Option<Arc<dyn Fn() + Send + Sync>>,
) -> Arc<dyn Fn() + Send + Sync> {
    let tools = Arc::downgrade(tools);
    Arc::new(move || {
        if let Some(tools) = tools.upgrade() {
            tools.terminate_running();
        }
        if let Some(then) = &then {
            then();
        }
    })
}

/// A new plan for a live session (a front end's policy change), not applied yet.
#[derive(Debug)]
pub struct Replanned {
    overrides: Overrides,
    agent: AgentSection,
    approval: Option<ApprovalPolicy>,
    pub plan: Plan,
    pub summary: PolicySummary,
}

impl Live {
    /// Plans the session anew with `overrides`; nothing changes until [`Live::restart`].
    pub fn replan(
        &self,
        overrides: Overrides,
        approval: Option<ApprovalPolicy>,
    ) -> Result<Replanned> {
        let rest = &self.rest;
        let policy = rest
            .facts
            .load_policy(&rest.request.global, overrides.clone())?;
        let mut plan = rest
            .facts
            .plan(&policy, rest.temp_dir.clone(), &rest.masks)?;
        if let Some(approval) = approval {
            plan.approval = approval;
        }
        let summary = policy_summary(&plan, &rest.temp_dir, &rest.request.global.profile)?;
        Ok(Replanned {
            overrides,
            agent: policy.agent,
            approval,
            plan,
            summary,
        })
    }

    /// Stops the session (once its turn is done) and prepares it again under `replanned`;
    /// [`Prepared::start`] logs the policy change.
    pub fn restart(self, replanned: Replanned) -> Result<Prepared> {
        let Rest {
            mut request,
            facts,
            temp_dir,
            masks,
            ..
        } = Rest {
            request: self.rest.request.clone(),
            facts: self.rest.facts.clone(),
            agent: self.rest.agent.clone(),
            temp_dir: self.rest.temp_dir.clone(),
            masks: self.rest.masks.clone(),
        };
        let model = model(&request.model)?;
        let log = self.stop_keeping_temp()?;
        request.overrides = replanned.overrides;
        request.approval = replanned.approval;
        request.open = Open::Resume(log.id().to_owned());
        Ok(Prepared {
            request,
            facts,
            plan: replanned.plan,
            summary: replanned.summary,
            agent: replanned.agent,
            temp_dir,
            masks,
            log,
            model,
        })
    }

    /// What the session was started with.
    pub fn request(&self) -> &Request {
        &self.rest.request
    }

    /// Closes the session (the running turn and queued inputs finish first), closes its
    /// terminal, removes its temp directory, and gives the log back.
    pub fn stop(self) -> Result<SessionLog> {
        let temp_dir = self.rest.temp_dir.clone();
        let log = self.stop_keeping_temp();
        let _ = std::fs::remove_dir_all(&temp_dir);
        log
    }

    fn stop_keeping_temp(self) -> Result<SessionLog> {
        let Live { session, tools, .. } = self;
        let log = session.close().map_err(anyhow::Error::msg);
        let Some(closed) = tools.close_terminal() else {
            return log;
        };
        if let Some(why) = closed.message() {
            say(&why);
        }
        if closed.not_kept > 0 {
            say(&format!(
                "between calls: {} more exec decisions of the terminal's processes, not kept",
                closed.not_kept
            ));
        }
        let mut log = log?;
        // What the terminal's background processes did after its last call (execs,
        // connections): on record, belonging to no call.
        for record in &closed.execs {
            let event = bridle_agent::log::Event::ExecDecision {
                call_id: String::new(),
                exec: bridle_exec::supervised::ExecDecision::between_calls(record),
            };
            if let Err(e) = log.append(event) {
                say(&format!(
                    "the session log could not record an exec decision ({}): {e}",
                    record.message()
                ));
            }
        }
        for d in bridle_exec::terminal::marked_between_calls(closed.network) {
            let (host, port) = (d.host.clone(), d.port);
            let event = bridle_agent::log::Event::NetDecision(bridle_agent::log::NetDecision::of(
                String::new(),
                d,
            ));
            if let Err(e) = log.append(event) {
                say(&format!(
                    "the session log could not record a network decision ({host}:{port}): {e}"
                ));
            }
        }
        if let Err(e) = log.barrier() {
            say(&format!("the session log could not be written: {e}"));
        }
        Ok(log)
    }
}

/// The model a `--model` route names; a route that names none is a usage error.
pub fn model(route: &str) -> Result<Box<dyn Model>> {
    built(route).map_err(|e| crate::UsageError(crate::error_chain(&e)).into())
}

fn built(route: &str) -> Result<Box<dyn Model>> {
    if let Some(file) = route.strip_prefix("script:") {
        anyhow::ensure!(
            !file.is_empty(),
            "model {route:?}: the script file is missing"
        );
        let text = std::fs::read_to_string(file)
            .with_context(|| format!("model {route:?}: reading the script file `{file}`"))?;
        let responses = ScriptModel::parse(file, &text)
            .map_err(|e| anyhow::anyhow!("model {route:?}: the script does not parse: {e}"))?;
        return Ok(Box::new(ScriptModel::new(route, responses)));
    }
    let model =
        OpenAiModel::from_route(route, &|k| std::env::var(k).ok()).map_err(anyhow::Error::msg)?;
    Ok(Box::new(model))
}
