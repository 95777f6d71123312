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
use bridle_agent::log::{Backend, NewSession, PolicySummary, PromptSection, SessionLog};
use bridle_agent::model::Model;
use bridle_agent::model::openai::OpenAiModel;
use bridle_agent::model::script::ScriptModel;
use bridle_agent::plan_mode::{DEFAULT_SECTION, PlanMode};
use bridle_agent::session::{ChannelAnswerer, Command, Questions, Session, SessionConfig};
use bridle_exec::approvals::Answerer;
use bridle_exec::printable::printable;
use bridle_policy::{ApprovalPolicy, Overrides, Plan};

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
}

/// A session whose log is open and whose policy is logged, not started yet.
pub struct Prepared {
    pub request: Request,
    facts: Facts,
    pub plan: Plan,
    /// The effective policy as logged.
    pub summary: PolicySummary,
    temp_dir: PathBuf,
    masks: Vec<(PathBuf, String)>,
    /// The log: install a watcher on it before [`Prepared::start`].
    pub log: SessionLog,
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
    let facts = Facts::gather(&request.global)?;
    let policy = facts.load_policy(&request.global, request.overrides.clone())?;
    facts.report_env(&policy);
    let temp_dir = crate::tool_cmd::private_temp_dir(None)?;
    let preview = facts.plan(&policy, temp_dir.clone(), &[]);
    let preview = match preview {
        Ok(p) => p,
        Err(e) => {
            let _ = std::fs::remove_dir_all(&temp_dir);
            return Err(e.into());
        }
    };
    let dir = session_dir(request.session_dir.as_deref(), &preview, &temp_dir)?;
    let real_dir = std::fs::canonicalize(dir.path())?;
    // The agent's commands and file tools must not read the logs or the key that seals them,
    // in this plan or any escalation of it.
    let masks = vec![(real_dir, SESSION_DIR.to_owned())];
    let mut plan = facts.plan(&policy, temp_dir.clone(), &masks)?;
    if let Some(approval) = request.approval {
        plan.approval = approval;
    }
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
        temp_dir,
        masks,
        log,
    })
}

/// What a front end adds to the session it starts.
#[derive(Default)]
pub struct Hooks {
    /// Asked often whether the turn is cancelled from outside (a signal, a deadline).
    pub cancel: Option<Arc<dyn Fn() -> Option<String> + Send + Sync>>,
    /// Called by [`Session::cancel`].
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

/// What a session runs with, built from the profile's plan: its tools (the pipeline), its
/// prompt sections, its slash commands and the agent's plugins. Plugins a profile loads are
/// added here.
pub struct Parts {
    pub tools: LocalTools,
    pub sections: Vec<PromptSection>,
    pub commands: Vec<Arc<dyn Command>>,
    pub plan_mode: PlanMode,
}

/// The session's parts for `plan`, asking `answerer`.
fn parts(prepared: &PreparedRef<'_>, answerer: Arc<dyn Answerer>) -> Result<Parts> {
    let plan_mode = PlanMode::new(DEFAULT_SECTION).map_err(anyhow::Error::msg)?;
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
    Ok(Parts {
        tools,
        sections: vec![base_section(prepared.plan)],
        commands: vec![plan_mode.command()],
        plan_mode,
    })
}

/// The borrowed view [`parts`] builds from (a [`Prepared`], or a stopped [`Live`] re-planned).
struct PreparedRef<'p> {
    request: &'p Request,
    facts: &'p Facts,
    plan: &'p Plan,
    temp_dir: &'p Path,
    masks: &'p [(PathBuf, String)],
}

impl Prepared {
    /// Starts the session: its thread owns the log, the model and the tools.
    pub fn start(mut self, hooks: Hooks) -> Result<Live> {
        // Logged here, not in `prepare`: a front end's watcher sees the policy events too.
        log_policy(&mut self.log, &self.summary)?;
        let model = model(&self.request.model)?;
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
                sections: parts.sections,
                plan_mode: Some(parts.plan_mode),
                cancel: hooks.cancel,
                ..AgentConfig::default()
            },
            commands: parts.commands,
            on_cancel: hooks.on_cancel,
            answerer: channel,
        };
        let id = self.log.id().to_owned();
        let host: Arc<dyn bridle_agent::tools::ToolHost + Send> = tools.clone();
        let session = Session::start(self.log, model, host, config);
        Ok(Live {
            session,
            id,
            questions,
            tools,
            rest: Rest {
                request: self.request,
                facts: self.facts,
                temp_dir: self.temp_dir,
                masks: self.masks,
            },
        })
    }
}

/// A new plan for a live session (a front end's policy change), not applied yet.
#[derive(Debug)]
pub struct Replanned {
    overrides: Overrides,
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
        } = Rest {
            request: self.rest.request.clone(),
            facts: self.rest.facts.clone(),
            temp_dir: self.rest.temp_dir.clone(),
            masks: self.rest.masks.clone(),
        };
        let log = self.stop_keeping_temp()?;
        request.overrides = replanned.overrides;
        request.approval = replanned.approval;
        request.open = Open::Resume(log.id().to_owned());
        Ok(Prepared {
            request,
            facts,
            plan: replanned.plan,
            summary: replanned.summary,
            temp_dir,
            masks,
            log,
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
        if let Some(why) = tools.close_terminal() {
            say(&why);
        }
        log
    }
}

/// The model a `--model` route names.
pub fn model(route: &str) -> Result<Box<dyn Model>> {
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
