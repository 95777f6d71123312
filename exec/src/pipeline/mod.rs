//! The one tool pipeline (`shared/spec/agent.md`, "Tool pipeline"): every call of every tool,
//! in this order — validate (the tool parses and declares), rules (`Plan::decide_bash`,
//! `decide_exec`, `decide_write`), approval (one question per call with all its reasons),
//! guards (deny-only, final), execute under the call's spec, post-process (network
//! decisions reported), and the decision recorded before the call runs. No tool asks,
//! decides or records by itself; `bridle tool`, `bridle run` and every front end call this.
//!
//! Guards are checked before the question is asked, so a question about a call a guard denies
//! says so (the person's answer cannot change it); they are applied after the approval, and
//! their denial is final.

pub mod guard;
mod registry;

use std::path::Path;
use std::sync::Arc;

use bridle_policy::{Decision, Plan, SandboxMode, Verdict};
use bridle_sandbox::confined_fs::HardLinks;

use crate::approvals::{ApprovalRequest, Approvals, Observer, PipelineNote, not_recorded};
use crate::backend::{FileSystem, Spawner};
use crate::tool::{CallEnv, DeniedBy, Effect, Tool, ToolResult};

pub use guard::{DeclaredCall, Denial, Guard, ProtectedPaths};
pub use registry::Registry;

/// Default bytes of head and of tail kept per output stream.
pub const DEFAULT_OUTPUT_CAP: usize = 16 * 1024;

/// Plans the session again with a wider mode, for one approved call (from the same plan
/// context: never by patching a plan).
pub type Replan = dyn Fn(SandboxMode) -> Result<Plan, String> + Send + Sync;

/// The pipeline of one session.
pub struct Pipeline {
    registry: Registry,
    plan: Plan,
    replan: Option<Box<Replan>>,
    approvals: Approvals<'static>,
    fs: Box<dyn FileSystem>,
    spawner: Box<dyn Spawner>,
    output_cap: usize,
}

impl std::fmt::Debug for Pipeline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pipeline")
            .field("mode", &self.plan.spec.mode)
            .field("tools", &self.registry.names())
            .finish_non_exhaustive()
    }
}

/// A decided call, ready to run.
struct Allowed {
    by: String,
    links: HardLinks,
    /// What a person approved to run (empty when nobody was asked).
    approved_commands: Vec<Vec<String>>,
}

impl Pipeline {
    /// The pipeline for `plan`, its tools and guards in `registry`, asking `approvals`, with
    /// the session's file system and spawner.
    pub fn new(
        plan: Plan,
        registry: Registry,
        approvals: Approvals<'static>,
        fs: Box<dyn FileSystem>,
        spawner: Box<dyn Spawner>,
    ) -> Pipeline {
        Pipeline {
            registry,
            plan,
            replan: None,
            approvals,
            fs,
            spawner,
            output_cap: DEFAULT_OUTPUT_CAP,
        }
    }

    /// Offers escalations: `replan` plans the session with the wider mode.
    pub fn with_replan(mut self, replan: Box<Replan>) -> Pipeline {
        self.replan = Some(replan);
        self
    }

    /// The session's plan (immutable).
    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    /// The tools and guards (plugins add and remove theirs here).
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// The session's file system.
    pub fn fs(&self) -> &dyn FileSystem {
        self.fs.as_ref()
    }

    /// The tools' schemas, in registration order.
    pub fn schemas(&self) -> Vec<serde_json::Value> {
        self.registry.tools().iter().map(|t| t.schema()).collect()
    }

    /// Whether this call may run beside other such calls.
    pub fn concurrency_safe(&self, name: &str, raw_arguments: &str) -> bool {
        self.registry
            .tool(name)
            .is_some_and(|t| t.concurrency_safe(raw_arguments))
    }

    /// Runs one call, unobserved (`bridle tool`).
    pub fn call(&self, name: &str, raw_arguments: &str) -> ToolResult {
        self.call_observed(name, raw_arguments, None)
    }

    /// Runs one call through the whole pipeline, reporting every decision to `observer`
    /// before it takes effect (a decision that cannot be reported is not acted on).
    pub fn call_observed(
        &self,
        name: &str,
        raw_arguments: &str,
        observer: Option<&Observer<'_>>,
    ) -> ToolResult {
        self.call_identified(None, name, raw_arguments, observer)
    }

    /// [`Pipeline::call_observed`] for the call `call_id`: every question asked during it,
    /// the exec supervisor's included, names that call.
    pub fn call_identified(
        &self,
        call_id: Option<&str>,
        name: &str,
        raw_arguments: &str,
        observer: Option<&Observer<'_>>,
    ) -> ToolResult {
        let none: &Observer<'_> = &unobserved;
        let approvals = self.approvals.for_call(observer.unwrap_or(none), call_id);
        let spec = &self.plan.spec;
        let Some(tool) = self.registry.tool(name) else {
            return ToolResult::plain(
                spec,
                false,
                format!(
                    "unknown tool `{name}` (available: {})",
                    self.registry.names().join(", ")
                ),
            );
        };
        let prepared = match tool.prepare(raw_arguments, &self.plan) {
            Ok(p) => p,
            Err(e) => return ToolResult::plain(spec, false, e),
        };
        let declaration = &prepared.declaration;
        if declaration.uses_files
            && let Some(why) = self.fs.unavailable()
        {
            return ToolResult::plain(spec, false, why);
        }
        let invalid = |m: &str| {
            ToolResult::plain(spec, false, format!("invalid arguments for `{name}`: {m}"))
        };
        // The plan of this call: the session's, or the escalation's, planned anew.
        let escalated = match &declaration.escalation {
            None => None,
            Some(esc) => {
                if esc.mode <= spec.mode {
                    return invalid(&format!(
                        "`sandbox_permissions` must be wider than the current mode `{}`",
                        spec.mode
                    ));
                }
                if esc
                    .justification
                    .as_deref()
                    .is_none_or(|j| j.trim().is_empty())
                {
                    return invalid("`sandbox_permissions` needs a `justification`");
                }
                let Some(replan) = &self.replan else {
                    return invalid("escalation is not available in this session");
                };
                match replan(esc.mode) {
                    Ok(p) => Some(p),
                    Err(e) => {
                        let _ = approvals
                            .decided(Decision::Deny, "the escalated sandbox cannot be planned");
                        return ToolResult::denied(
                            spec,
                            format!("cannot plan the escalated sandbox: {e}"),
                            Some(DeniedBy::Sandbox),
                        );
                    }
                }
            }
        };
        let call_plan = escalated.as_ref().unwrap_or(&self.plan);
        let allowed = match self.decide(
            tool.as_ref(),
            raw_arguments,
            declaration,
            call_plan,
            &approvals,
        ) {
            Ok(a) => a,
            Err(denied) => return denied,
        };
        // The escalated file system is confined before the decision is recorded: one that
        // cannot be confined never runs.
        let escalated_fs = match (&escalated, declaration.uses_files) {
            (Some(p), true) => match self.fs.confined_by(&p.spec) {
                Ok(fs) => Some(fs),
                Err(e) => {
                    let _ =
                        approvals.decided(Decision::Deny, "the escalated sandbox is unavailable");
                    return ToolResult::denied(
                        spec,
                        format!("not run: sandbox unavailable: {e}"),
                        Some(DeniedBy::Sandbox),
                    );
                }
            },
            _ => None,
        };
        // Recorded before it runs; a decision that cannot be recorded does not run.
        if let Err(e) = approvals.decided(Decision::Allow, &allowed.by) {
            return ToolResult::plain(spec, false, not_recorded(&e));
        }
        let env = CallEnv {
            spec: &call_plan.spec,
            escalated: escalated.is_some(),
            fs: escalated_fs.as_deref().unwrap_or(self.fs.as_ref()),
            spawner: self.spawner.as_ref(),
            links: allowed.links,
            output_cap: self.output_cap,
            answerer: self.approvals.answerer(),
            approvals: &approvals,
            approved_commands: &allowed.approved_commands,
        };
        let result = (prepared.execute)(&env);
        // Post-process: what the proxy decided for the call's connections, before its result.
        for decision in &result.sandbox.network_decisions {
            if let Err(e) = approvals.network(decision) {
                tracing::warn!("a network decision could not be recorded: {e}");
            }
        }
        result
    }

    /// Rules, then the approval (one question with every reason), then the guards.
    #[expect(
        clippy::result_large_err,
        reason = "the denial is the finished tool result, moved once per call"
    )]
    fn decide(
        &self,
        tool: &dyn Tool,
        raw_arguments: &str,
        declaration: &crate::tool::Declaration,
        call_plan: &Plan,
        approvals: &Approvals<'_>,
    ) -> Result<Allowed, ToolResult> {
        let spec = &self.plan.spec;
        let name = tool.name();
        #[expect(
            clippy::result_large_err,
            reason = "the denial is the finished tool result, moved once per call"
        )]
        let deny = |by: &str, content: String, who: DeniedBy| {
            let _ = approvals.decided(Decision::Deny, by);
            Err(ToolResult::denied(spec, content, Some(who)))
        };
        let mut allowed_by = Vec::new();
        let mut asks = Vec::new();
        for effect in &declaration.effects {
            let verdict = match effect {
                Effect::Shell(text) => call_plan.decide_bash(text),
                Effect::Exec(argv) => call_plan.decide_exec(argv),
                Effect::Write(path) => write_verdict(call_plan, path),
                Effect::Confined(why) | Effect::Session(why) => {
                    allowed_by.push(why.clone());
                    continue;
                }
                Effect::Ask(why) => {
                    asks.push(why.clone());
                    continue;
                }
            };
            match verdict.decision {
                Decision::Allow => allowed_by.push(verdict.reason),
                Decision::Ask => asks.push(verdict.reason),
                Decision::Deny => {
                    let who = match (effect, &verdict.by) {
                        (Effect::Shell(_) | Effect::Exec(_), _)
                        | (_, bridle_policy::DecidedBy::Rule { .. }) => DeniedBy::Rule,
                        _ => DeniedBy::Policy,
                    };
                    let content = match &declaration.escalation {
                        Some(esc) if matches!(effect, Effect::Write(_)) => {
                            format!("denied even with `{}`: {}", esc.mode, verdict.reason)
                        }
                        _ => format!("denied: {}", verdict.reason),
                    };
                    return deny(&verdict.reason, content, who);
                }
            }
        }
        if let Some(esc) = &declaration.escalation {
            let mut ask = format!(
                "asks to run with sandbox mode `{}` instead of `{}`",
                esc.mode, spec.mode
            );
            let runs = declaration
                .effects
                .iter()
                .any(|e| matches!(e, Effect::Shell(_) | Effect::Exec(_)));
            if runs && esc.mode == SandboxMode::DangerFullAccess {
                // No guard can see what a command writes: the person must know exactly what
                // the sandbox still keeps before answering (SECURITY.md).
                ask.push_str(&format!(
                    "; if approved, the command runs with full access (any file, the network, \
                     devices, other processes' sockets) except: the protected paths stay \
                     read-only ({}, the profile files, bridle's configuration directory), \
                     bridle's session directory and the disks' and memory's device nodes are \
                     hidden, and no privilege over the host is kept (root stays root over \
                     files and to the host's daemons)",
                    protected_list(&call_plan.spec)
                ));
            }
            asks.push(ask);
        }
        let call = DeclaredCall {
            tool: name,
            declaration,
            spec: &call_plan.spec,
        };
        let guarded = self.registry.guards().iter().find_map(|g| g.check(&call));
        let mut approved = false;
        if !asks.is_empty() {
            let mut reason = asks.join("; ");
            if let Some(d) = &guarded {
                reason.push_str(&format!(
                    "; note: the guard `{}` denies this call whatever the answer ({})",
                    d.guard, d.reason
                ));
            }
            let request = ApprovalRequest {
                tool: name.to_owned(),
                arguments: serde_json::from_str(raw_arguments).unwrap_or(serde_json::Value::Null),
                reason: reason.clone(),
                justification: declaration
                    .escalation
                    .as_ref()
                    .and_then(|e| e.justification.clone()),
                escalation: declaration.escalation.as_ref().map(|e| e.mode),
                call_id: None,
            };
            let outcome = approvals.ask(&request);
            if let Some(text) = outcome.denial(approvals.policy()) {
                return deny(
                    &format!("approval {}", outcome.name()),
                    format!("denied ({reason}): {text}"),
                    DeniedBy::Approval,
                );
            }
            approved = true;
            allowed_by = vec![format!("approved ({reason})")];
        }
        // Guards: final, whatever was approved.
        if let Some(d) = guarded {
            return deny(
                &format!("guard {}: {}", d.guard, d.reason),
                format!("denied by the guard `{}`: {}", d.guard, d.reason),
                DeniedBy::Guard,
            );
        }
        let links = if approved || call_plan.path_rules.is_empty() {
            HardLinks::Allowed
        } else {
            HardLinks::Refused
        };
        let approved_commands = if approved {
            approved_commands(&declaration.effects)
        } else {
            Vec::new()
        };
        Ok(Allowed {
            by: allowed_by.join("; "),
            links,
            approved_commands,
        })
    }
}

/// The command lines a person saw and approved in a call's effects, exactly as they will be
/// exec'd: a shell text as `bash -c TEXT`, an argv as it is. The exec supervisor does not ask
/// again about these, nor about what they run (see [`CallExecs::approving`]).
///
/// [`CallExecs::approving`]: crate::supervised::CallExecs::approving
fn approved_commands(effects: &[Effect]) -> Vec<Vec<String>> {
    effects
        .iter()
        .filter_map(|effect| match effect {
            Effect::Shell(text) => Some(vec!["bash".to_owned(), "-c".to_owned(), text.clone()]),
            Effect::Exec(argv) => Some(argv.clone()),
            _ => None,
        })
        .collect()
}

/// The workspace's default protected paths and the spec's own, for a question (the first
/// few, then how many more).
fn protected_list(spec: &bridle_policy::SandboxSpec) -> String {
    const SHOWN: usize = 4;
    let mut paths: Vec<std::path::PathBuf> = bridle_policy::DEFAULT_PROTECTED
        .iter()
        .map(|p| spec.workspace.join(p))
        .collect();
    for p in &spec.protected_paths {
        if !paths.contains(p) {
            paths.push(p.clone());
        }
    }
    let mut list: Vec<String> = paths
        .iter()
        .take(SHOWN)
        .map(|p| format!("`{}`", p.display()))
        .collect();
    if paths.len() > SHOWN {
        list.push(format!("{} more", paths.len() - SHOWN));
    }
    list.join(", ")
}

/// The policy's decision on a write to `path`, at least `ask` when the profile has path rules
/// and the file has more than one name: path rules match names, and a hard link is another
/// name for the same file (`ln .env notes.txt`, then a write to `notes.txt`, would change
/// `.env` past a rule on `.env*`). The worker re-checks on the opened file unless approved.
fn write_verdict(plan: &Plan, path: &Path) -> Verdict {
    use std::os::unix::fs::MetadataExt;
    let mut verdict = plan.decide_write(path);
    if plan.path_rules.is_empty() || verdict.decision == Decision::Deny {
        return verdict;
    }
    let links = std::fs::symlink_metadata(path)
        .ok()
        .filter(std::fs::Metadata::is_file)
        .map_or(1, |m| m.nlink());
    if links > 1 {
        let why = format!(
            "`{}` has {links} hard links: path rules match names, and another name of this file may be one a rule covers",
            path.display()
        );
        verdict.reason = if verdict.decision == Decision::Ask {
            format!("{}; {why}", verdict.reason)
        } else {
            format!("write to `{}` needs approval: {why}", path.display())
        };
        verdict.decision = Decision::Ask;
    }
    verdict
}

/// Reports pipeline notes nowhere (an unobserved call).
pub fn unobserved(_: PipelineNote) -> Result<(), String> {
    Ok(())
}

/// Shared handle on a tool, as registries hold them.
pub type ToolRef = Arc<dyn Tool>;

#[cfg(test)]
mod tests;
