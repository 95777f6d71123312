//! Wiring: the tool pipeline of one session on this machine — the shipped tools, the shipped
//! guard, the approvals seam, the local file system and spawner, and the escalation re-plan.
//! `bridle tool` and `bridle run` both call what this builds; nothing here decides a call.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Result;
use bridle_exec::approvals::{Answerer, Approvals, NoAnswerer, TerminalAnswerer};
use bridle_exec::backend::{LocalFs, LocalSpawner};
use bridle_exec::pipeline::{Pipeline, ProtectedPaths, Registry};
use bridle_exec::run::SandboxRunner;
use bridle_exec::terminal::TerminalTool;
use bridle_policy::{Overrides, Plan, SandboxMode};

use crate::cli::GlobalArgs;
use crate::session_facts::Facts;

pub use bridle_exec::schemas::TOOLS;

/// Who answers approval questions: the person at the terminal, or, with no terminal on stdin,
/// nobody (every question is answered `unavailable`: fail closed).
pub fn answerer() -> Box<dyn Answerer> {
    if std::io::stdin().is_terminal() && TerminalAnswerer::available() {
        Box::new(TerminalAnswerer)
    } else {
        Box::new(NoAnswerer)
    }
}

/// The pipeline of a session, and its terminal (to close when the session ends).
#[derive(Debug)]
pub struct LocalTools {
    pub pipeline: Pipeline,
    terminal: Arc<TerminalTool>,
    /// What launches the session's commands (a clone sharing its list of runs in progress).
    runner: SandboxRunner,
}

/// What a session's pipeline is built from.
#[derive(Debug)]
pub struct SessionSetup<'f> {
    pub facts: &'f Facts,
    pub global: &'f GlobalArgs,
    /// The command line's overrides (`--network`, `--allow-write`, `--env`, ...), kept in
    /// every plan an approved escalation makes.
    pub overrides: Overrides,
    /// The session's plan, final.
    pub plan: Plan,
    pub temp_dir: PathBuf,
    /// Paths masked in every plan of the session, escalations included (`path`, what it is).
    pub masks: Vec<(PathBuf, String)>,
    /// The terminal lives across calls until the session ends.
    pub persist_terminal: bool,
}

impl LocalTools {
    /// The pipeline for `setup`, asking `answerer` when an approval is needed (a command's
    /// and the network allow-list's).
    pub fn new(setup: SessionSetup<'_>, answerer: Arc<dyn Answerer>) -> Result<Self> {
        let SessionSetup {
            facts,
            global,
            overrides,
            plan,
            temp_dir,
            masks,
            persist_terminal,
        } = setup;
        let launcher = std::env::current_exe()?;
        let mut runner = SandboxRunner::new(launcher.clone());
        // One proxy for the session's network allow-list; without it, such commands are
        // refused (G-NET), never run with the network open.
        if plan.spec.network == bridle_policy::Network::AllowList {
            match bridle_exec::net::NetProxy::start(
                &plan,
                Arc::clone(&answerer),
                bridle_exec::net::ProxyConfig::default(),
            ) {
                Ok(proxy) => runner = runner.with_proxy(Arc::new(proxy)),
                Err(e) => tracing::warn!("network allow-list unavailable: {e}"),
            }
        }
        let terminal = Arc::new(TerminalTool::new(persist_terminal).asking(Arc::clone(&answerer)));
        let registry = Registry::new();
        for name in TOOLS {
            let tool = match *name {
                "terminal" => Some(Arc::clone(&terminal) as Arc<dyn bridle_exec::tool::Tool>),
                other => bridle_exec::schemas::tool(other, persist_terminal),
            };
            if let Some(tool) = tool {
                registry.add_tool(None, tool)?;
            }
        }
        let own = masks
            .iter()
            .chain(&facts.own_masks(&temp_dir))
            .map(|(p, _)| p.clone())
            .collect();
        registry.add_guard(
            None,
            Arc::new(ProtectedPaths::new(
                &plan.spec,
                own,
                vec![facts.config_dir.clone()],
            )),
        );
        let replan = {
            let facts = facts.clone();
            let global = global.clone();
            let from = plan.spec.mode;
            move |mode: SandboxMode| -> Result<Plan, String> {
                replan(&facts, &global, &overrides, &temp_dir, &masks, from, mode)
            }
        };
        let pipeline = Pipeline::new(
            plan.clone(),
            registry,
            Approvals::new(plan.approval, Box::new(Shared(answerer))),
            Box::new(LocalFs::new(&plan.spec)),
            Box::new(LocalSpawner::new(launcher, runner.clone())),
        )
        .with_replan(Box::new(replan));
        Ok(Self {
            pipeline,
            terminal,
            runner,
        })
    }

    /// Kills the process trees of this session's commands that are running (its terminal's
    /// too), and of no other session of the process.
    pub fn terminate_running(&self) {
        self.runner.terminate_running();
    }

    /// Has the runs ask `check` whether the session's turn was cancelled (see
    /// [`SandboxRunner::cancel_with`]).
    pub fn cancel_runs_with(&self, check: bridle_exec::run::CancelCheck) {
        self.runner.cancel_with(check);
    }

    /// Closes the persistent terminal (its whole tree); returns what closing it found (why the
    /// sandbox stopped it; the execs decided since its last call), `None` when none was open.
    pub fn close_terminal(&self) -> Option<bridle_exec::terminal::Closed> {
        self.terminal.close()
    }
}

/// One answerer shared by the approvals seam and the network proxy.
struct Shared(Arc<dyn Answerer>);

impl Answerer for Shared {
    fn answer(
        &self,
        request: &bridle_exec::approvals::ApprovalRequest,
    ) -> bridle_exec::approvals::ApprovalOutcome {
        self.0.answer(request)
    }

    fn answer_unless(
        &self,
        request: &bridle_exec::approvals::ApprovalRequest,
        withdrawn: &dyn Fn() -> bool,
    ) -> bridle_exec::approvals::ApprovalOutcome {
        self.0.answer_unless(request, withdrawn)
    }

    fn review_plan(&self, plan: &str) -> bridle_exec::approvals::PlanReview {
        self.0.review_plan(plan)
    }

    fn who(&self) -> &'static str {
        self.0.who()
    }
}

/// The session's tools are its pipeline's.
impl bridle_agent::tools::ToolHost for LocalTools {
    fn schemas(&self) -> Vec<serde_json::Value> {
        self.pipeline.schemas()
    }

    fn concurrency_safe(&self, name: &str, arguments: &str) -> bool {
        self.pipeline.concurrency_safe(name, arguments)
    }

    fn call(
        &self,
        call: &bridle_agent::log::ToolCall,
        note: &mut bridle_agent::tools::Notes<'_>,
    ) -> bridle_agent::tools::ToolOutcome {
        bridle_agent::tools::ToolHost::call(&self.pipeline, call, note)
    }

    fn add_tool(&self, owner: &str, tool: Arc<dyn bridle_exec::tool::Tool>) -> Result<(), String> {
        bridle_agent::tools::ToolHost::add_tool(&self.pipeline, owner, tool)
    }

    fn add_guard(
        &self,
        owner: &str,
        guard: Arc<dyn bridle_exec::pipeline::Guard>,
    ) -> Result<(), String> {
        bridle_agent::tools::ToolHost::add_guard(&self.pipeline, owner, guard)
    }

    fn remove_tool(&self, name: &str) -> bool {
        bridle_agent::tools::ToolHost::remove_tool(&self.pipeline, name)
    }

    fn unload(&self, owner: &str) {
        bridle_agent::tools::ToolHost::unload(&self.pipeline, owner);
    }
}

/// Plans the session with a wider mode, for one approved call.
fn replan(
    facts: &Facts,
    global: &GlobalArgs,
    overrides: &Overrides,
    temp_dir: &std::path::Path,
    masks: &[(PathBuf, String)],
    from: SandboxMode,
    mode: SandboxMode,
) -> Result<Plan, String> {
    let wider = facts
        .load_policy(
            global,
            Overrides {
                mode: Some(mode),
                ..overrides.clone()
            },
        )
        .map_err(|e| e.to_string())?;
    facts
        .plan_escalation(&wider, temp_dir.to_path_buf(), masks, from)
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An approved escalation plans the session anew: what the session masked (its own logs)
    /// must stay masked in that plan too.
    #[test]
    fn masks_hold_in_every_escalated_plan() {
        let workspace = tempfile::tempdir().unwrap();
        let home = tempfile::tempdir().unwrap();
        let global = GlobalArgs {
            profile: "read-only".into(),
            workspace: Some(workspace.path().to_owned()),
            verbose: 0,
            quiet: false,
        };
        let facts = Facts::gather(&global).unwrap();
        let temp = home.path().join("tmp");
        std::fs::create_dir_all(&temp).unwrap();
        let sessions = home.path().join("sessions");
        let masks = vec![(sessions.clone(), "bridle's session directory".to_owned())];
        for mode in [
            SandboxMode::WorkspaceWrite,
            SandboxMode::ReadOnly,
            SandboxMode::DangerFullAccess,
        ] {
            let from = SandboxMode::ReadOnly;
            let wider = replan(
                &facts,
                &global,
                &Overrides::default(),
                &temp,
                &masks,
                from,
                mode,
            )
            .unwrap();
            assert!(
                wider.spec.masked_paths.contains(&sessions),
                "{mode}: {:?}",
                wider.spec.masked_paths
            );
        }
    }
}
