//! `bridle tool NAME [--session-dir DIR] JSON`: one tool call through exactly the pipeline the
//! agent uses (argument validation, rules, approval, sandbox, output limits), without a model.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::agent_host::{LocalTools, SessionSetup, TOOLS, answerer};

use crate::UsageError;
use crate::cli::{ConfineArgs, GlobalArgs};
use crate::session_facts::{Facts, ensure_temp_base};

pub fn run(
    global: &GlobalArgs,
    confine: &ConfineArgs,
    name: &str,
    session_dir: Option<&Path>,
    arguments: &str,
) -> Result<u8> {
    if !TOOLS.contains(&name) {
        return Err(crate::UsageError(format!(
            "unknown tool `{name}` (available: {})",
            TOOLS.join(", ")
        ))
        .into());
    }
    let facts = Facts::gather(global)?;
    // Everything is checked before anything is created: a refused session dir leaves nothing
    // behind (in the workspace, say).
    let session = session_dir.map(resolve_session_dir).transpose()?;
    let temp_dir = match &session {
        Some(dir) => dir.join("tmp"),
        None => fresh_temp_dir_name(),
    };
    let overrides = confine.overrides()?;
    let policy = facts.load_policy(global, overrides.clone())?;
    facts.report_env(&policy);
    let masks = session
        .as_deref()
        .map(session_dir_masks)
        .unwrap_or_default();
    let plan = facts.plan(&policy, temp_dir.clone(), &masks)?;
    if let Some(dir) = &session {
        check_session_dir(dir, &plan, &temp_dir)?;
        facts.record_session_dir(dir)?;
    }
    // From here on the call's own temp dir is removed however the call ends (a spill file its
    // result names is kept).
    let mut cleanup = TempCleanup {
        dir: session.is_none().then(|| temp_dir.clone()),
        keep_named_in: None,
    };
    create_private_temp_dir(session.as_deref(), &temp_dir)?;
    let tools = LocalTools::new(
        SessionSetup {
            facts: &facts,
            global,
            overrides,
            plan,
            temp_dir: temp_dir.clone(),
            masks,
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
    // The pipeline (its file worker, its terminal) is done with the temp dir before it goes.
    drop(tools);
    cleanup.keep_named_in = Some(result.content.clone());
    let mut out = std::io::stdout().lock();
    writeln!(out, "{}", serde_json::to_string(&result)?)?;
    Ok(if result.ok { 0 } else { 1 })
}

/// Removes the call's private temp dir when the call ends, however it ends (see
/// [`remove_unnamed`]); `dir` is `None` under `--session-dir`, whose `tmp` is kept across calls.
struct TempCleanup {
    dir: Option<PathBuf>,
    /// The result's content: files it names are kept.
    keep_named_in: Option<String>,
}

impl Drop for TempCleanup {
    fn drop(&mut self) {
        if let Some(dir) = &self.dir {
            remove_unnamed(dir, self.keep_named_in.as_deref().unwrap_or_default());
        }
    }
}

/// `--session-dir DIR` made absolute with its existing part resolved (it may not exist yet);
/// nothing is created.
fn resolve_session_dir(dir: &Path) -> Result<PathBuf> {
    let absolute = crate::session_facts::absolute_session_dir(dir)?;
    Ok(bridle_sandbox::real_path::real_path(&absolute))
}

/// What the sandbox hides of a `--session-dir`: everything in it but the call's `tmp` (a
/// session directory `bridle run` also uses holds logs and the key that seals them), and its
/// `log.key` even before it exists.
fn session_dir_masks(dir: &Path) -> Vec<(PathBuf, String)> {
    let what = "the session directory's logs and key";
    let mut masks = vec![(dir.join("log.key"), what.to_owned())];
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        // bridle writes no symlinks there; one is not followed to mask what it names.
        let symlink = entry.file_type().is_ok_and(|t| t.is_symlink());
        if !symlink && entry.file_name() != "tmp" && entry.file_name() != "log.key" {
            masks.push((entry.path(), what.to_owned()));
        }
    }
    masks
}

/// Refuses a session dir inside a root the command can write (it could plant files there for
/// later calls, or rewrite a log kept there) or holding one (its masks would hide them).
fn check_session_dir(dir: &Path, plan: &bridle_policy::Plan, temp_dir: &Path) -> Result<()> {
    let roots = std::iter::once(&plan.spec.workspace).chain(
        plan.spec
            .writable_roots
            .iter()
            .filter(|r| r.as_path() != temp_dir && r.as_path() != Path::new("/dev/null")),
    );
    for root in roots {
        if dir.starts_with(root) {
            return Err(UsageError(format!(
                "refusing session dir `{}`: it lies inside the writable root `{}`",
                dir.display(),
                root.display()
            ))
            .into());
        }
        if root.starts_with(dir) {
            return Err(UsageError(format!(
                "refusing session dir `{}`: it contains the writable root `{}`, which the \
                 sandbox would hide; choose a directory outside it",
                dir.display(),
                root.display()
            ))
            .into());
        }
    }
    Ok(())
}

/// Removes what the call left in its private temp dir (the command's `/tmp`) except the files
/// its result names (spill files, kept so they can be read; swept after a day), and the
/// directory itself when none is kept.
fn remove_unnamed(temp_dir: &Path, content: &str) {
    if !content.contains(&temp_dir.display().to_string()) {
        let _ = crate::remove_tree::remove_tree(temp_dir);
        return;
    }
    for entry in std::fs::read_dir(temp_dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if content.contains(&path.display().to_string()) {
            continue;
        }
        let _ = match entry.file_type() {
            Ok(t) if t.is_dir() => crate::remove_tree::remove_tree(&path),
            _ => std::fs::remove_file(&path),
        };
    }
    // The result may name the directory without naming a file in it (`echo $TMPDIR`): one
    // left empty goes too (this fails while a named file is kept there).
    let _ = std::fs::remove_dir(temp_dir);
}

/// A fresh name for a call's private temp dir under the temp base (not created yet).
fn fresh_temp_dir_name() -> PathBuf {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    crate::session_facts::temp_base().join(format!("tool-{}-{nanos:08x}", std::process::id()))
}

/// Creates the call's private temp dir `dir`: `<session-dir>/tmp` (kept across calls), or
/// `dir` under the temp base.
fn create_private_temp_dir(session_dir: Option<&Path>, dir: &Path) -> Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    match session_dir {
        Some(d) => std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(d)
            .with_context(|| format!("creating session dir `{}`", d.display()))?,
        None => {
            ensure_temp_base()?;
        }
    }
    match std::fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => {
            Err(e).with_context(|| format!("creating the private temp dir `{}`", dir.display()))
        }
    }
}

/// A fresh private temp dir under the temp base, created (for a session of `bridle run`).
pub(crate) fn private_temp_dir() -> Result<PathBuf> {
    let dir = fresh_temp_dir_name();
    create_private_temp_dir(None, &dir)?;
    Ok(dir)
}
