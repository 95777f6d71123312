//! `bridle tool NAME [--session-dir DIR] JSON`: one tool call through exactly the pipeline the
//! agent uses (argument validation, rules, approval, sandbox, output limits), without a model.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use crate::agent_host::{LocalTools, SessionSetup, TOOLS, answerer};

use crate::cli::{ConfineArgs, GlobalArgs};
use crate::session_facts::{Facts, ensure_temp_base};

/// Exit status for a usage error.
pub const EXIT_USAGE: u8 = 2;

pub fn run(
    global: &GlobalArgs,
    confine: &ConfineArgs,
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
    let overrides = confine.overrides();
    let policy = facts.load_policy(global, overrides.clone())?;
    facts.report_env(&policy);
    let plan = facts.plan(&policy, temp_dir.clone(), &[])?;
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
    let tools = LocalTools::new(
        SessionSetup {
            facts: &facts,
            global,
            overrides,
            plan,
            temp_dir: temp_dir.clone(),
            masks: Vec::new(),
            persist_terminal: false,
        },
        std::sync::Arc::from(answerer()),
    )?;
    let file_tool = !matches!(name, "bash" | "grep" | "terminal");
    if file_tool && let Some(why) = tools.pipeline.fs().unavailable() {
        let mut err = std::io::stderr().lock();
        let _ = writeln!(err, "bridle: {why}");
        return Ok(125);
    }
    let result = tools.pipeline.call(name, arguments);
    let mut out = std::io::stdout().lock();
    writeln!(out, "{}", serde_json::to_string(&result)?)?;
    if session_dir.is_none() {
        remove_unnamed(&temp_dir, &result.content);
    }
    Ok(if result.ok { 0 } else { 1 })
}

/// Removes what the call left in its private temp dir (the command's `/tmp`) except the files
/// its result names (spill files, kept so they can be read; swept after a day), and the
/// directory itself when the result names nothing in it.
fn remove_unnamed(temp_dir: &Path, content: &str) {
    if !content.contains(&temp_dir.display().to_string()) {
        let _ = std::fs::remove_dir_all(temp_dir);
        return;
    }
    for entry in std::fs::read_dir(temp_dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if content.contains(&path.display().to_string()) {
            continue;
        }
        let _ = match entry.file_type() {
            Ok(t) if t.is_dir() => std::fs::remove_dir_all(&path),
            _ => std::fs::remove_file(&path),
        };
    }
}

/// The private temp dir for this call: `<session-dir>/tmp` (kept across calls), or a fresh
/// directory under the temp base that is kept after the call so a spill file it names stays
/// readable.
pub(crate) fn private_temp_dir(session_dir: Option<&Path>) -> Result<PathBuf> {
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
