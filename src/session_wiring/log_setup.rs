//! The session's log: where it lives (never where the agent writes), which one is opened
//! (new, resumed, forked), and the effective policy as it is logged.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use bridle_agent::log::{
    Backend, Event, NewSession, PolicyRule, PolicySummary, SessionDir, SessionLog,
};
use bridle_policy::Plan;

use super::{Open, say};
use crate::UsageError;
use crate::log_cmd::Named;

/// What the session directory is called where it is masked.
pub(super) const SESSION_DIR: &str = "bridle's session directory";

/// How the session's private temp directory (a new one every run) is written in the policy
/// digest and summary, so the same policy has the same digest on every run.
const TEMP_DIR: &str = "<session temp dir>";

/// `text` with the temp directory `temp` (a path, or a path inside it) written [`TEMP_DIR`].
fn without_temp_dir(text: &str, temp: &str) -> String {
    match text.strip_prefix(temp) {
        Some(rest) if rest.is_empty() || rest.starts_with('/') => format!("{TEMP_DIR}{rest}"),
        _ => text.to_owned(),
    }
}

/// `value` with every string naming the temp directory rewritten by [`without_temp_dir`].
fn stable(value: serde_json::Value, temp: &str) -> serde_json::Value {
    use serde_json::Value;
    match value {
        Value::String(s) => Value::String(without_temp_dir(&s, temp)),
        Value::Array(items) => Value::Array(items.into_iter().map(|v| stable(v, temp)).collect()),
        Value::Object(map) => Value::Object(
            map.into_iter()
                .map(|(k, v)| (without_temp_dir(&k, temp), stable(v, temp)))
                .collect(),
        ),
        other => other,
    }
}

/// The effective policy of `plan` as logged: what a reviewer needs to see, and the digest of
/// all of it (spec, approval policy, rules), the same on every run of the same policy.
pub(super) fn policy_summary(plan: &Plan, temp_dir: &Path, profile: &str) -> Result<PolicySummary> {
    let temp = temp_dir.display().to_string();
    // The registry's directories are masked but are no part of the policy: each new session
    // directory would change the digest of every later run.
    let mut spec = plan.spec.clone();
    spec.masked_paths
        .retain(|p| !crate::session_registry::is_registered_mask(plan, p));
    spec.masks_may_vanish.clear();
    let everything = serde_json::json!({
        "spec": spec,
        "approval": plan.approval,
        "command_rules": plan.command_rules,
        "path_rules": plan.path_rules,
    });
    // Sorted keys: the digest must not depend on serde_json's map order (the ACP SDK turns
    // on `preserve_order` in this build).
    let mut everything = stable(everything, &temp);
    everything.sort_all_objects();
    let digest = bridle_agent::log::chain::sha256_hex(&serde_json::to_vec(&everything)?);
    let paths = |paths: &[PathBuf]| -> Vec<String> {
        paths
            .iter()
            .map(|p| without_temp_dir(&p.display().to_string(), &temp))
            .collect()
    };
    let spec = &spec;
    let rules = plan
        .command_rules
        .iter()
        .map(|r| (r.id.clone(), "command", r.decision))
        .chain(
            plan.path_rules
                .iter()
                .map(|r| (r.id.clone(), "path", r.decision)),
        )
        .map(|(id, applies_to, decision)| PolicyRule {
            id,
            applies_to: applies_to.to_owned(),
            decision,
        })
        .collect();
    Ok(PolicySummary {
        digest,
        profile: profile.to_owned(),
        mode: spec.mode,
        approval: plan.approval,
        network: spec.network,
        writable_roots: paths(&spec.writable_roots),
        protected_paths: paths(&spec.protected_paths),
        masked_paths: paths(&spec.masked_paths),
        rules,
    })
}

/// Logs the effective policy when it is not the one in force in the log (a new session, or
/// one resumed or forked under another policy); a change also logs the new sandbox mode and
/// approval policy, and says so.
pub(super) fn log_policy(log: &mut SessionLog, summary: &PolicySummary) -> Result<()> {
    let mut header_digest = None;
    let mut logged = None;
    for (_, event) in log.events() {
        match event {
            Event::SessionHeader(h) => header_digest = Some(h.policy_digest.clone()),
            Event::PolicyEffective(p) => logged = Some(p.digest.clone()),
            _ => {}
        }
    }
    let in_force = logged.clone().or(header_digest);
    if in_force.as_deref() != Some(summary.digest.as_str()) {
        // The policy changed since the session last ran: the log says so before the turn.
        say(&format!(
            "session {}: the policy differs from the one it last ran under (profile `{}`)",
            log.id(),
            summary.profile
        ));
        log.append(Event::SandboxMode { mode: summary.mode })?;
        log.append(Event::ApprovalPolicy {
            policy: summary.approval,
        })?;
    }
    if logged.as_deref() != Some(summary.digest.as_str()) {
        log.append(Event::PolicyEffective(summary.clone()))?;
    }
    log.barrier()?;
    Ok(())
}

/// The session directory: `--session-dir` or the default, never inside the workspace or a
/// writable root, nor containing one (checked before anything is created, on the real path).
pub(super) fn session_dir(
    requested: Option<&Path>,
    plan: &Plan,
    temp_dir: &Path,
) -> Result<SessionDir> {
    let dir: PathBuf = match requested {
        Some(d) => crate::session_facts::absolute_session_dir(d)?,
        None => crate::session_facts::default_session_dir()?,
    };
    let real = real_path(&dir);
    let forbidden = std::iter::once(&plan.spec.workspace).chain(
        plan.spec
            .writable_roots
            .iter()
            .filter(|r| r.as_path() != temp_dir),
    );
    for root in forbidden {
        if real.starts_with(root) {
            return Err(UsageError(format!(
                "refusing session dir `{}`: it lies inside `{}`, which the agent can write, so \
                 it could rewrite its own log",
                real.display(),
                root.display()
            ))
            .into());
        }
    }
    // The session directory is masked in the sandbox: one that holds the workspace or a
    // writable root would hide the agent's work from it, and puts the log beside what the
    // agent writes.
    let held = std::iter::once(&plan.spec.workspace).chain(plan.spec.writable_roots.iter());
    for root in held {
        if root.starts_with(&real) {
            return Err(UsageError(format!(
                "refusing session dir `{}`: it contains `{}`, which the agent can write (the \
                 session directory is hidden from the agent, and its log must lie outside \
                 what the agent writes); choose a directory outside it",
                real.display(),
                root.display()
            ))
            .into());
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

/// The one session `wanted` names for `flag`, as `bridle log` takes it: an id, a prefix only
/// one id starts with, or `last`. A prefix several ids start with is a usage error listing
/// them.
fn named(dir: &SessionDir, flag: &str, wanted: &str) -> Result<String> {
    match crate::log_cmd::resolve(dir, wanted)? {
        Named::One(id) => Ok(id),
        Named::None(why) => bail!("{why}"),
        Named::Several(ids) => Err(crate::UsageError(format!(
            "{flag} {wanted:?}: {} sessions start with it; give more of the id: {}",
            ids.len(),
            ids.join(", ")
        ))
        .into()),
    }
}

/// A new session, or the one `--resume` or `--fork` names.
pub(super) fn open_log(
    dir: &SessionDir,
    open: &Open,
    backend: Backend,
    new: &NewSession,
) -> Result<SessionLog> {
    match open {
        Open::Resume(wanted) => {
            let id = &named(dir, "--resume", wanted)?;
            let (log, repairs) = dir.resume(id)?;
            for repair in repairs {
                say(&format!("session {id}: {repair}"));
            }
            let Some((_, Event::SessionHeader(header))) = log.events().first().cloned() else {
                bail!("session {id} has no header");
            };
            if header.workspace != new.workspace {
                bail!(
                    "session {id} belongs to the workspace `{}`; resume it from there, or \
                     branch it into this workspace with --fork",
                    header.workspace
                );
            }
            Ok(log)
        }
        Open::Fork(spec) => {
            let (id, at) = match spec.split_once('@') {
                Some((id, seq)) => {
                    let seq = seq.parse::<u64>().with_context(|| {
                        format!("--fork {spec:?}: `{seq}` is not an event number")
                    })?;
                    (id, Some(seq))
                }
                None => (spec.as_str(), None),
            };
            let id = named(dir, "--fork", id)?;
            Ok(dir.fork(&id, at, backend, new)?)
        }
        Open::New => Ok(dir.create(backend, new)?),
    }
}
