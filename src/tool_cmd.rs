//! `bridle tool NAME [--session-dir DIR] JSON`: one tool call through exactly the pipeline the
//! agent uses (argument validation, rules, approval, sandbox, output limits), without a model.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use bridle_exec::approvals::{Answerer, Approvals, NoAnswerer, TerminalAnswerer};
use bridle_exec::bash_tool::{self, BashContext, DEFAULT_OUTPUT_CAP};
use bridle_exec::fs_tools::{self, FsContext};
use bridle_exec::run::SandboxRunner;
use bridle_policy::Overrides;

use crate::cli::GlobalArgs;
use crate::session_facts::{Facts, ensure_temp_base};

/// The tools `bridle tool` can call today.
pub const TOOLS: &[&str] = &[
    "bash",
    "read_file",
    "write_file",
    "edit_file",
    "list_dir",
    "glob",
    "grep",
    "terminal",
];

/// Exit status for a usage error.
pub const EXIT_USAGE: u8 = 2;

pub fn run(
    global: &GlobalArgs,
    name: &str,
    session_dir: Option<&Path>,
    arguments: &str,
) -> Result<u8> {
    if !TOOLS.contains(&name) {
        let mut err = std::io::stderr().lock();
        let _ = writeln!(
            err,
            "bridle: unknown tool `{name}` (available: {})",
            TOOLS.join(", ")
        );
        return Ok(EXIT_USAGE);
    }
    let facts = Facts::gather(global)?;
    let temp_dir = private_temp_dir(session_dir)?;
    let policy = facts.load_policy(global, Overrides::default())?;
    let plan = facts.plan(&policy, temp_dir.clone())?;
    if let Some(dir) = session_dir {
        let dir = std::fs::canonicalize(dir)
            .with_context(|| format!("session dir `{}`", dir.display()))?;
        if let Some(root) = plan
            .spec
            .writable_roots
            .iter()
            .find(|r| dir.starts_with(r) && **r != temp_dir)
        {
            bail!(
                "refusing session dir `{}`: it lies inside the writable root `{}`",
                dir.display(),
                root.display()
            );
        }
    }
    // With no terminal on stdin nobody can answer: approvals are `unavailable` (fail closed).
    let answerer: Box<dyn Answerer> =
        if std::io::stdin().is_terminal() && TerminalAnswerer::available() {
            Box::new(TerminalAnswerer)
        } else {
            Box::new(NoAnswerer)
        };
    let approvals = Approvals::new(plan.approval, answerer);
    let runner = SandboxRunner::new(std::env::current_exe()?);
    // An approved escalation re-plans the session with the wider mode for that one call.
    let replan_plan = |mode| -> Result<bridle_policy::Plan, String> {
        let wider = facts
            .load_policy(
                global,
                Overrides {
                    mode: Some(mode),
                    ..Overrides::default()
                },
            )
            .map_err(|e| e.to_string())?;
        facts
            .plan(&wider, temp_dir.clone())
            .map_err(|e| e.to_string())
    };
    let replan = |mode| replan_plan(mode).map(|p| p.spec);
    let ctx = BashContext {
        plan: &plan,
        approvals: &approvals,
        runner: &runner,
        replan: &replan,
        output_cap: DEFAULT_OUTPUT_CAP,
    };
    let result = if name == "bash" {
        bash_tool::call(&ctx, arguments)
    } else if name == "grep" {
        bash_tool::grep(&ctx, arguments)
    } else if name == "terminal" {
        bridle_exec::terminal::call_once(&plan, &approvals, std::env::current_exe()?, arguments)
    } else {
        let fs = match bridle_sandbox::confined_fs::ConfinedFs::start(&plan.spec) {
            Ok(fs) => fs,
            Err(e) => {
                let mut err = std::io::stderr().lock();
                let _ = writeln!(
                    err,
                    "bridle: sandbox unavailable: G-FS-WRITE (file tools need Landlock: {e})"
                );
                return Ok(125);
            }
        };
        let fctx = FsContext {
            plan: &plan,
            approvals: &approvals,
            fs: &fs,
            replan: Some(&replan_plan),
        };
        match name {
            "read_file" => fs_tools::read_file(&fctx, arguments),
            "write_file" => fs_tools::write_file(&fctx, arguments),
            "edit_file" => fs_tools::edit_file(&fctx, arguments),
            "glob" => fs_tools::glob(&fctx, arguments),
            _ => fs_tools::list_dir(&fctx, arguments),
        }
    };
    let mut out = std::io::stdout().lock();
    writeln!(out, "{}", serde_json::to_string(&result)?)?;
    if session_dir.is_none() && !result.content.contains(&temp_dir.display().to_string()) {
        // Kept only when the result names a spill file inside it (swept after a day).
        let _ = std::fs::remove_dir_all(&temp_dir);
    }
    Ok(if result.ok { 0 } else { 1 })
}

/// The private temp dir for this call: `<session-dir>/tmp` (kept across calls), or a fresh
/// directory under the temp base that is kept after the call so a spill file it names stays
/// readable.
fn private_temp_dir(session_dir: Option<&Path>) -> Result<PathBuf> {
    use std::os::unix::fs::DirBuilderExt;
    let dir = match session_dir {
        Some(d) => {
            std::fs::create_dir_all(d)
                .with_context(|| format!("creating session dir `{}`", d.display()))?;
            std::fs::canonicalize(d)?.join("tmp")
        }
        None => {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.subsec_nanos())
                .unwrap_or(0);
            ensure_temp_base()?.join(format!("tool-{}-{nanos:08x}", std::process::id()))
        }
    };
    match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
        Ok(()) => Ok(dir),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(dir),
        Err(e) => {
            Err(e).with_context(|| format!("creating the private temp dir `{}`", dir.display()))
        }
    }
}
