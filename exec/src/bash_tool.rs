//! The model-facing one-shot `bash` tool (`{command, timeout_secs?, workdir?,
//! sandbox_permissions?, justification?}` → `bash -c`) and `grep`, as tool values: each parses
//! its arguments and declares what it runs; the pipeline decides, and hands back the call's
//! spec and spawner. A failed command's denial is attributed: to the command rule that refused
//! an exec, or from its error lines ([`crate::attribution`]).

use std::path::{Path, PathBuf};
use std::time::Duration;

use bridle_policy::{Plan, SandboxMode, SandboxSpec};
use bridle_sandbox::confined_fs::FsDenied;
use serde::Deserialize;

pub use crate::attribution::{Attribution, attribute, root_without_capabilities};
use crate::fs_tools::{home_expanded, in_masked_path, resolve, sandbox_denied};
use crate::run::{RunRequest, RunStatus};
use crate::tool::{CallEnv, Declaration, Effect, Escalation, TypedTool};

pub use crate::pipeline::DEFAULT_OUTPUT_CAP;
pub use crate::tool::{DeniedBy, QuarantineNote, SandboxFacts, ToolResult};

/// The tool's arguments.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BashArgs {
    /// The command line, run with `bash -c`.
    pub command: String,
    /// Wall-clock limit in seconds (default and maximum from the profile).
    pub timeout_secs: Option<u64>,
    /// Working directory, relative to the workspace.
    pub workdir: Option<String>,
    /// A strictly wider sandbox mode for this one call; a person must approve it.
    #[serde(default)]
    #[schemars(schema_with = "crate::tool::mode_schema")]
    pub sandbox_permissions: Option<SandboxMode>,
    /// Why the wider mode is needed (required with sandbox_permissions).
    pub justification: Option<String>,
}

/// The notes for what an end-of-run inspection moved aside.
pub fn quarantine_notes(inspection: &bridle_sandbox::Inspection) -> Vec<QuarantineNote> {
    inspection
        .quarantined
        .iter()
        .map(|q| QuarantineNote {
            path: q.path.display().to_string(),
            reason: q.reason.clone(),
            moved_to: q.moved_to.as_ref().map(|p| p.display().to_string()),
        })
        .collect()
}

/// The `bash` tool.
#[derive(Debug, Clone, Copy, Default)]
pub struct Bash;

/// The wall-clock limit of a call asking for `asked` seconds: at most the profile's maximum,
/// and capped by the limit of every sandboxed command (`limits.wall_time`, `--timeout`).
fn timeout_for(spec: &SandboxSpec, asked: Option<u64>) -> Result<Option<u64>, String> {
    let limits = &spec.limits;
    let timeout = match (asked, limits.command_timeout_max_secs) {
        (Some(0), _) => return Err("`timeout_secs` must be at least 1".into()),
        (Some(t), Some(max)) if t > max => {
            return Err(format!(
                "`timeout_secs` {t} is above the profile's maximum of {max}"
            ));
        }
        (Some(t), _) => Some(t),
        (None, _) => limits.command_timeout_secs,
    };
    Ok(match (timeout, limits.wall_time_secs) {
        (Some(t), Some(w)) => Some(t.min(w)),
        (t, w) => t.or(w),
    })
}

impl TypedTool for Bash {
    type Args = BashArgs;

    fn name(&self) -> &str {
        "bash"
    }

    fn description(&self) -> &str {
        "Run one command line with `bash -c` in the sandbox. Output is capped (head and tail kept; the rest spilled to a file the result names)."
    }

    fn declare(&self, args: &BashArgs, plan: &Plan) -> Result<Declaration, String> {
        if args.command.trim().is_empty() {
            return Err("`command` is empty".into());
        }
        timeout_for(&plan.spec, args.timeout_secs)?;
        resolve_workdir(&plan.spec.workspace, args.workdir.as_deref())?;
        Ok(Declaration {
            effects: vec![Effect::Shell(args.command.clone())],
            escalation: args.sandbox_permissions.map(|mode| Escalation {
                mode,
                justification: args.justification.clone(),
            }),
            uses_files: false,
        })
    }

    fn execute(&self, args: BashArgs, env: &CallEnv<'_>) -> ToolResult {
        let spec = env.spec;
        let (timeout, cwd) = match (
            timeout_for(spec, args.timeout_secs),
            resolve_workdir(&spec.workspace, args.workdir.as_deref()),
        ) {
            (Ok(t), Ok(c)) => (t, c),
            (Err(e), _) | (_, Err(e)) => {
                return env.result(false, format!("invalid arguments for `bash`: {e}"), None);
            }
        };
        let request = RunRequest {
            argv: vec!["bash".into(), "-c".into(), args.command],
            cwd,
            spec: spec.clone(),
            timeout: timeout.map(Duration::from_secs),
            stdin: Vec::new(),
            output_cap: env.output_cap,
            spill_dir: spec.temp_dir.clone(),
        };
        let mut execs =
            crate::supervised::CallExecs::new(env.approvals).approving(env.approved_commands);
        let result = match env.spawner.run_observed(&request, &mut execs) {
            Ok(r) => r,
            Err(e) => return env.result(false, format!("running the command failed: {e}"), None),
        };
        let mut sandbox = env.facts();
        let mut content = String::new();
        let stdout = result.stdout.render();
        let stderr = result.stderr.render();
        if !stdout.is_empty() {
            content.push_str(&stdout);
            if !content.ends_with('\n') {
                content.push('\n');
            }
        }
        if !stderr.is_empty() {
            content.push_str("[stderr]\n");
            content.push_str(&stderr);
            if !content.ends_with('\n') {
                content.push('\n');
            }
        }
        let (ok, exit_code, timed_out, mut denied_by) = match &result.status {
            RunStatus::Exited(code) => {
                content.push_str(&format!("[exit code {code}]"));
                (*code == 0, Some(*code), false, None)
            }
            RunStatus::TimedOut => {
                content.push_str(&format!(
                    "[timed out after {}s; the whole process tree was killed]",
                    timeout.unwrap_or(0)
                ));
                (false, None, true, None)
            }
            RunStatus::NotExecuted { code, cause } => {
                content.push_str(&format!("[{cause}]"));
                (false, Some(*code), false, None)
            }
            RunStatus::Refused(r) => {
                content = format!("not run: {r}");
                (false, None, false, Some(DeniedBy::Sandbox))
            }
            RunStatus::Stopped(why) => {
                content.push_str(&format!("[stopped by the sandbox: {why}]"));
                (false, Some(137), false, Some(DeniedBy::Sandbox))
            }
        };
        content.push_str(&crate::net::summary(&result.network));
        // An exec a command rule refused fails with EACCES too: that is the rule's doing, and
        // no wider sandbox mode lifts it.
        let rule_denial = execs
            .records
            .iter()
            .find(|r| r.outcome != bridle_sandbox::ExecOutcome::Approved);
        let mut attribution = None;
        if denied_by.is_none() {
            sandbox.denied_by_sandbox = match rule_denial {
                Some(record) => Some(record.message()),
                None => {
                    attribution = bridle_sandbox::privileges::caller_is_root()
                        .then(|| root_without_capabilities(spec, &request.cwd, &stderr))
                        .flatten()
                        .map(Attribution::from)
                        .or_else(|| attribute(spec, &request.cwd, &stderr))
                        .or_else(|| {
                            crate::net::first_denial(&result.network).map(|d| {
                                format!("the network allow-list denied `{}`", d.target()).into()
                            })
                        })
                        .or_else(|| {
                            crate::attribution::network_attempts(
                                spec,
                                result.direct_network_attempts,
                            )
                        });
                    attribution.as_ref().map(|a| a.what.clone())
                }
            };
        }
        sandbox.network_decisions = result.network.clone();
        // A failed command one of whose execs a rule refused was denied by that rule, as far
        // as a caller branching on `denied_by` is concerned; the exec's record says which.
        if !ok && denied_by.is_none() && rule_denial.is_some() {
            denied_by = Some(DeniedBy::Rule);
        }
        match (&attribution, rule_denial) {
            (_, Some(_)) if !ok && sandbox.denied_by_sandbox.is_some() => content.push_str(
                "\n[denied by a command rule of the profile (below), not by the sandbox's mode: `sandbox_permissions` cannot lift a rule, so do not ask for it]",
            ),
            // A command that succeeded while git failed to update a protected config (`git
            // branch -D` leaves the branch's section) still gets the note: it says why.
            (Some(found), None) if !ok || !found.escalation_lifts => {
                content.push('\n');
                content.push_str(&found.note(spec.mode, env.approvals.policy()));
            }
            _ => {}
        }
        content.push_str(&execs.note());
        sandbox.exec_decisions = execs.records;
        content.push_str(&inspection_note(&result.inspection));
        sandbox.quarantined = quarantine_notes(&result.inspection);
        result.stdout.remove_spill_unless_named(&content);
        result.stderr.remove_spill_unless_named(&content);
        ToolResult {
            ok,
            content,
            exit_code,
            timed_out,
            denied_by,
            sandbox,
        }
    }
}

/// What a tool result says about what bridle moved aside when the run ended (empty when
/// nothing was).
pub fn inspection_note(inspection: &bridle_sandbox::Inspection) -> String {
    inspection
        .messages()
        .iter()
        .map(|line| format!("\n[bridle: {line}]"))
        .collect()
}

fn resolve_workdir(workspace: &Path, workdir: Option<&str>) -> Result<PathBuf, String> {
    let Some(dir) = workdir else {
        return Ok(workspace.to_path_buf());
    };
    let path = if Path::new(dir).is_absolute() {
        PathBuf::from(dir)
    } else {
        workspace.join(dir)
    };
    let real = std::fs::canonicalize(&path).map_err(|e| format!("`workdir` `{dir}`: {e}"))?;
    if !real.is_dir() {
        return Err(format!("`workdir` `{dir}` is not a directory"));
    }
    Ok(real)
}

/// The arguments of `grep`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GrepArgs {
    /// The regular expression.
    pattern: String,
    /// Where to search (default: the workspace).
    path: Option<String>,
    /// Only files whose name matches this glob.
    glob: Option<String>,
}

/// `grep {pattern, path?, glob?}`: GNU `grep -rnIE` run in the sandbox (so masked paths are
/// invisible to it exactly as to commands), without a shell: the pattern is one argument.
/// Binary files are skipped, and so are FIFOs, sockets and devices even when `path` names one
/// (`--devices=skip`: GNU grep reads those when named on its command line, and a FIFO without
/// a writer would block it until the timeout); output is capped like `bash`. A `path` in a
/// masked path is refused before anything runs, as the file tools refuse it; a failure shows
/// grep's own error lines, and one outside the readable roots is the sandbox's.
#[derive(Debug, Clone, Copy, Default)]
pub struct Grep;

impl TypedTool for Grep {
    type Args = GrepArgs;

    fn name(&self) -> &str {
        "grep"
    }

    fn description(&self) -> &str {
        "Search file contents with an extended regular expression (GNU grep -rnIE)."
    }

    fn concurrency_safe(&self, _args: &GrepArgs) -> bool {
        true
    }

    fn declare(&self, args: &GrepArgs, _plan: &Plan) -> Result<Declaration, String> {
        if args.pattern.is_empty() {
            return Err("`pattern` is empty".into());
        }
        Ok(Declaration {
            effects: vec![Effect::Confined(
                "grep reads inside the sandbox (masked paths stay hidden)".into(),
            )],
            escalation: None,
            uses_files: false,
        })
    }

    fn execute(&self, args: GrepArgs, env: &CallEnv<'_>) -> ToolResult {
        let spec = env.spec;
        let raw = args.path.as_deref().unwrap_or(".");
        // What the kernel will reach: the masks are compared with it, as the file tools do.
        let real = resolve(spec, raw);
        if in_masked_path(spec, &real) {
            return sandbox_denied(env, &FsDenied::Masked(real));
        }
        let target = home_expanded(spec, raw).to_string_lossy().into_owned();
        let mut argv: Vec<String> = [
            "grep",
            "-rnIE",
            "--color=never",
            "--devices=skip",
            "--exclude-dir=.git",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        if let Some(g) = &args.glob {
            argv.push(format!("--include={g}"));
        }
        argv.extend(["-e".to_owned(), args.pattern, "--".to_owned(), target]);
        let request = RunRequest {
            argv,
            cwd: spec.workspace.clone(),
            spec: spec.clone(),
            timeout: match (spec.limits.command_timeout_secs, spec.limits.wall_time_secs) {
                (Some(t), Some(w)) => Some(t.min(w)),
                (t, w) => t.or(w),
            }
            .map(Duration::from_secs),
            stdin: Vec::new(),
            output_cap: env.output_cap,
            spill_dir: spec.temp_dir.clone(),
        };
        let result = match env.spawner.run(&request) {
            Ok(r) => r,
            Err(e) => return env.result(false, format!("running grep failed: {e}"), None),
        };
        let stdout = result.stdout.render();
        let stderr = result.stderr.render();
        let (ok, content) = match &result.status {
            RunStatus::Exited(0) => (true, stdout),
            RunStatus::Exited(1) => (true, "no matches".to_owned()),
            // Matches, but some paths were unreadable (masked or without permission).
            RunStatus::Exited(2) if !stdout.trim().is_empty() => (
                true,
                format!(
                    "{stdout}[some paths could not be read and were skipped:\n{}]",
                    stderr.trim_end()
                ),
            ),
            RunStatus::Exited(code) if !readable(spec, &real) => {
                let why = format!(
                    "`{}` is outside the readable roots: grep failed (exit {code}): {}",
                    real.display(),
                    stderr.trim_end()
                );
                let mut denied = env.result(false, why, Some(DeniedBy::Sandbox));
                denied.sandbox.denied_by_sandbox = Some(denied.content.clone());
                return denied;
            }
            RunStatus::Exited(code) => (
                false,
                format!("grep failed (exit {code}): {}", stderr.trim_end()),
            ),
            RunStatus::TimedOut => (false, "grep timed out".to_owned()),
            RunStatus::NotExecuted { cause, .. } => (false, cause.clone()),
            RunStatus::Refused(r) => (false, format!("not run: {r}")),
            RunStatus::Stopped(why) => (false, format!("stopped by the sandbox: {why}")),
        };
        result.stdout.remove_spill_unless_named(&content);
        result.stderr.remove_spill_unless_named(&content);
        ToolResult {
            timed_out: matches!(result.status, RunStatus::TimedOut),
            ..env.result(ok, content, None)
        }
    }
}

/// Whether commands may read `real`: danger-full-access confines nothing; otherwise it must
/// be under a readable or a writable root.
fn readable(spec: &SandboxSpec, real: &Path) -> bool {
    spec.mode == SandboxMode::DangerFullAccess
        || spec
            .readable_roots
            .iter()
            .chain(&spec.writable_roots)
            .any(|r| {
                real.starts_with(r) || real.starts_with(bridle_sandbox::real_path::real_path(r))
            })
}
