//! The tools of a session on this machine: every call goes through exactly the pipeline
//! `bridle tool` uses (argument validation, rules, approvals, the sandbox, output caps), and,
//! under `bridle run`, reports its decisions to the session log before it runs.

use std::path::PathBuf;
use std::sync::Mutex;

use anyhow::Result;
use bridle_agent::tools::{Notes, ToolHost, ToolNote, ToolOutcome};
use std::io::IsTerminal;

use bridle_exec::approvals::{Answerer, Approvals, NoAnswerer, PipelineNote, TerminalAnswerer};
use bridle_exec::bash_tool::{self, BashContext, DEFAULT_OUTPUT_CAP, ToolResult};
use bridle_exec::fs_tools::{self, FsContext};
use bridle_exec::run::SandboxRunner;
use bridle_exec::terminal::Terminal;
use bridle_policy::{Overrides, Plan, SandboxMode, SandboxSpec};

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

/// The tools of one session, planned once.
pub struct LocalTools<'f> {
    facts: &'f Facts,
    global: &'f GlobalArgs,
    /// The command line's overrides (`--network`, `--allow-write`, `--env`, ...), kept in
    /// every plan an approved escalation makes.
    overrides: Overrides,
    plan: Plan,
    temp_dir: PathBuf,
    approvals: Approvals<'static>,
    runner: SandboxRunner,
    launcher: PathBuf,
    /// The file tools' confined worker (or why it could not start: then they refuse), started
    /// on first use, so sessions that never touch a file do not pay for it.
    fs: std::sync::OnceLock<Result<bridle_sandbox::confined_fs::ConfinedFs, String>>,
    /// The session's persistent terminal, when `persist_terminal`.
    terminal: Mutex<Option<Terminal>>,
    persist_terminal: bool,
    /// Paths masked in every plan of the session, escalations included (`path`, what it is).
    masks: Vec<(PathBuf, String)>,
}

impl std::fmt::Debug for LocalTools<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalTools")
            .field("mode", &self.plan.spec.mode)
            .finish_non_exhaustive()
    }
}

impl<'f> LocalTools<'f> {
    /// The tools for `plan`, asking `answerer` when an approval is needed. With
    /// `persist_terminal`, the terminal lives across calls until the tools are dropped.
    pub fn new(
        facts: &'f Facts,
        global: &'f GlobalArgs,
        overrides: Overrides,
        plan: Plan,
        temp_dir: PathBuf,
        answerer: Box<dyn Answerer>,
        persist_terminal: bool,
    ) -> Result<Self> {
        let launcher = std::env::current_exe()?;
        let mut runner = SandboxRunner::new(launcher.clone());
        // One proxy for the session's network allow-list; without it, such commands are
        // refused (G-NET), never run with the network open.
        if plan.spec.network == bridle_policy::Network::AllowList {
            match bridle_exec::net::NetProxy::start(
                &plan,
                std::sync::Arc::from(self::answerer()),
                bridle_exec::net::ProxyConfig::default(),
            ) {
                Ok(proxy) => runner = runner.with_proxy(std::sync::Arc::new(proxy)),
                Err(e) => tracing::warn!("network allow-list unavailable: {e}"),
            }
        }
        Ok(Self {
            facts,
            global,
            overrides,
            approvals: Approvals::new(plan.approval, answerer),
            plan,
            temp_dir,
            runner,
            launcher,
            fs: std::sync::OnceLock::new(),
            terminal: Mutex::new(None),
            persist_terminal,
            masks: Vec::new(),
        })
    }

    /// Masks `path` in this session's plan and in every plan an approved escalation makes
    /// (bridle's own session directory, say).
    pub fn mask(&mut self, path: PathBuf, what: &str) {
        self.plan.mask_found(&path, what);
        self.masks.push((path, what.to_owned()));
        // A worker confined by the plan before the mask must not serve the session.
        self.fs.take();
    }

    /// The file tools' worker, confined by the session's plan as it is now.
    fn fs(&self) -> &Result<bridle_sandbox::confined_fs::ConfinedFs, String> {
        self.fs.get_or_init(|| {
            bridle_sandbox::confined_fs::ConfinedFs::start(&self.plan.spec).map_err(|e| {
                format!("sandbox unavailable: G-FS-WRITE (file tools need Landlock: {e})")
            })
        })
    }

    /// Why the file tools cannot run here (Landlock could not confine their worker), if so.
    pub fn file_tools_unavailable(&self) -> Option<&str> {
        self.fs().as_ref().err().map(String::as_str)
    }

    /// Plans this session with a wider mode, for one approved call.
    fn replan(&self, mode: SandboxMode) -> Result<Plan, String> {
        let wider = self
            .facts
            .load_policy(
                self.global,
                Overrides {
                    mode: Some(mode),
                    ..self.overrides.clone()
                },
            )
            .map_err(|e| e.to_string())?;
        let mut plan = self
            .facts
            .plan(&wider, self.temp_dir.clone())
            .map_err(|e| e.to_string())?;
        for (path, what) in &self.masks {
            plan.mask_found(path, what);
        }
        Ok(plan)
    }

    /// Runs tool `name` through the pipeline, deciding through `approvals`.
    pub fn dispatch(&self, name: &str, arguments: &str, approvals: &Approvals<'_>) -> ToolResult {
        let replan_plan = |mode| self.replan(mode);
        let replan = |mode| self.replan(mode).map(|p| p.spec);
        let replan_spec: &dyn Fn(SandboxMode) -> Result<SandboxSpec, String> = &replan;
        match name {
            "bash" | "grep" => {
                let ctx = BashContext {
                    plan: &self.plan,
                    approvals,
                    runner: &self.runner,
                    replan: replan_spec,
                    output_cap: DEFAULT_OUTPUT_CAP,
                };
                if name == "bash" {
                    bash_tool::call(&ctx, arguments)
                } else {
                    bash_tool::grep(&ctx, arguments)
                }
            }
            "terminal" => {
                let mut slot = self
                    .terminal
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                bridle_exec::terminal::call_with_network(
                    &self.plan,
                    approvals,
                    self.launcher.clone(),
                    &mut slot,
                    arguments,
                    self.persist_terminal,
                    self.runner.proxy(),
                )
            }
            _ => {
                let fs = match self.fs() {
                    Ok(fs) => fs,
                    Err(why) => return refusal(&self.plan, why),
                };
                let ctx = FsContext {
                    plan: &self.plan,
                    approvals,
                    fs,
                    replan: Some(&replan_plan),
                };
                match name {
                    "read_file" => fs_tools::read_file(&ctx, arguments),
                    "write_file" => fs_tools::write_file(&ctx, arguments),
                    "edit_file" => fs_tools::edit_file(&ctx, arguments),
                    "glob" => fs_tools::glob(&ctx, arguments),
                    "list_dir" => fs_tools::list_dir(&ctx, arguments),
                    other => refusal(
                        &self.plan,
                        &format!("unknown tool `{other}` (available: {})", TOOLS.join(", ")),
                    ),
                }
            }
        }
    }

    /// Runs tool `name` with the session's own approvals seam (no log), as `bridle tool` does.
    pub fn call_unrecorded(&self, name: &str, arguments: &str) -> ToolResult {
        self.dispatch(name, arguments, &self.approvals)
    }

    /// Closes the persistent terminal (its whole tree); returns why the sandbox stopped it,
    /// when it did.
    pub fn close_terminal(&self) -> Option<String> {
        let mut slot = self
            .terminal
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        slot.take().and_then(Terminal::close)
    }
}

/// What the session log keeps of an exec supervisor's decision (`exec/decision`).
pub fn exec_decision(record: &bridle_sandbox::ExecRecord) -> bridle_agent::log::ExecDecision {
    bridle_agent::log::ExecDecision {
        pid: record.pid,
        program: record.program.clone(),
        argv: record.argv.clone(),
        decision: record.decision,
        rule: record.rule.clone(),
        reason: record.reason.clone(),
        outcome: serde_json::to_value(record.outcome)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default(),
        same_as: record.same_as.clone(),
        ancestry: record
            .ancestry
            .iter()
            .map(|a| format!("{} {}", a.pid, a.command))
            .collect(),
        answer: record.answer.clone(),
        message: record.message(),
    }
}

fn refusal(plan: &Plan, content: &str) -> ToolResult {
    ToolResult {
        ok: false,
        content: content.to_owned(),
        exit_code: None,
        timed_out: false,
        denied_by: None,
        sandbox: bash_tool::SandboxFacts {
            mode: plan.spec.mode,
            network: plan.spec.network,
            guarantees: plan.spec.guarantees.clone(),
            escalated: false,
            denied_by_sandbox: None,
            quarantined: Vec::new(),
            exec_decisions: Vec::new(),
            network_decisions: Vec::new(),
        },
    }
}

impl ToolHost for LocalTools<'_> {
    fn schemas(&self) -> Vec<serde_json::Value> {
        TOOLS
            .iter()
            .filter_map(|name| bridle_exec::schemas::schema(name))
            .collect()
    }

    fn concurrency_safe(&self, name: &str, _arguments: &str) -> bool {
        fs_tools::concurrency_safe(name)
    }

    fn call(&self, name: &str, arguments: &str, note: &mut Notes<'_>) -> ToolOutcome {
        let note = Mutex::new(note);
        let observer = |n: PipelineNote| -> Result<(), String> {
            let mut note = note.lock().map_err(|_| "the note lock was poisoned")?;
            (*note)(match n {
                PipelineNote::ApprovalAsked { question } => ToolNote::ApprovalAsked { question },
                PipelineNote::ApprovalDecided { answer, by } => {
                    ToolNote::ApprovalDecided { answer, by }
                }
                PipelineNote::Decided { decision, by } => ToolNote::Decided { decision, by },
                PipelineNote::ExecDecided { record } => {
                    ToolNote::ExecDecided(exec_decision(&record))
                }
                PipelineNote::Network(d) => ToolNote::NetDecision {
                    host: d.host,
                    port: d.port,
                    decision: d.decision,
                    by: d.by,
                    error: d.error,
                    connections: d.connections,
                    sent: d.sent,
                    received: d.received,
                },
            })
        };
        let approvals = self.approvals.observed(&observer);
        let result = self.dispatch(name, arguments, &approvals);
        let mut sandbox = serde_json::to_value(&result.sandbox).ok();
        // Who refused a call that never ran is part of what the log says about it.
        if let (Some(serde_json::Value::Object(facts)), Some(by)) = (&mut sandbox, result.denied_by)
            && let Ok(by) = serde_json::to_value(by)
        {
            facts.insert("denied_by".to_owned(), by);
        }
        ToolOutcome {
            ok: result.ok,
            content: result.content,
            sandbox,
        }
    }
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
        let policy = facts.load_policy(&global, Overrides::default()).unwrap();
        let temp = home.path().join("tmp");
        std::fs::create_dir_all(&temp).unwrap();
        let plan = facts.plan(&policy, temp.clone()).unwrap();
        let mut tools = LocalTools::new(
            &facts,
            &global,
            Overrides::default(),
            plan,
            temp,
            Box::new(bridle_exec::approvals::NoAnswerer),
            false,
        )
        .unwrap();
        let sessions = home.path().join("sessions");
        tools.mask(sessions.clone(), "bridle's session directory");
        for mode in [SandboxMode::WorkspaceWrite, SandboxMode::ReadOnly] {
            let wider = tools.replan(mode).unwrap();
            assert!(
                wider.spec.masked_paths.contains(&sessions),
                "{mode}: {:?}",
                wider.spec.masked_paths
            );
        }
    }
}
