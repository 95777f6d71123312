//! The model-facing file tools: `read_file {path, offset?, limit?}`, `write_file {path,
//! content}`, `edit_file {path, old_string, new_string, replace_all?}`, `list_dir {path}`.
//!
//! Every path is resolved against the workspace and decided by the policy first (protected and
//! masked paths, writable roots, path rules, approvals for `ask`); then the operation runs on
//! the Landlock-confined worker ([`bridle_sandbox::confined_fs::ConfinedFs`]) with `openat2`
//! and no symlink following for writes, so the kernel enforces the same roots as for commands.
//! Reads and listings may run concurrently; writes and edits may not.

#![expect(
    clippy::result_large_err,
    reason = "the helpers return the finished tool result as their error, moved once per call"
)]

use std::path::{Path, PathBuf};

use bridle_policy::{Decision, Plan, SandboxMode};
use bridle_sandbox::confined_fs::{ConfinedFs, FsDenied, HardLinks, write_unconfined};
use serde::Deserialize;

use crate::approvals::{ApprovalRequest, Approvals, not_recorded};
use crate::bash_tool::{DeniedBy, SandboxFacts, ToolResult};

/// Largest file `read_file` and `edit_file` load (bytes).
pub const MAX_FILE_BYTES: usize = 10 * 1024 * 1024;
/// Most text `read_file` returns at once (bytes); the rest is reachable with `offset`/`limit`.
pub const MAX_READ_CONTENT: usize = 256 * 1024;

/// Whether a tool's calls may run in parallel with each other.
pub fn concurrency_safe(tool: &str) -> bool {
    matches!(tool, "read_file" | "list_dir" | "glob" | "grep")
}

/// What the file tools need from their session.
pub struct FsContext<'a> {
    /// The session's plan.
    pub plan: &'a Plan,
    /// The approvals seam.
    pub approvals: &'a Approvals<'a>,
    /// The confined worker.
    pub fs: &'a ConfinedFs,
    /// Plans the session for a wider mode (an approved escalation of one call); `None` when
    /// escalation is not offered.
    pub replan: Option<&'a dyn Fn(SandboxMode) -> Result<Plan, String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ReadArgs {
    path: String,
    offset: Option<usize>,
    limit: Option<usize>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct WriteArgs {
    path: String,
    content: String,
    sandbox_permissions: Option<SandboxMode>,
    justification: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct EditArgs {
    path: String,
    old_string: String,
    new_string: String,
    #[serde(default)]
    replace_all: bool,
    sandbox_permissions: Option<SandboxMode>,
    justification: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ListArgs {
    path: String,
}

fn facts(plan: &Plan) -> SandboxFacts {
    SandboxFacts {
        mode: plan.spec.mode,
        network: plan.spec.network,
        guarantees: plan.spec.guarantees.clone(),
        escalated: false,
        denied_by_sandbox: None,
        quarantined: Vec::new(),
        exec_decisions: Vec::new(),
        network_decisions: Vec::new(),
    }
}

fn done(plan: &Plan, ok: bool, content: String, denied_by: Option<DeniedBy>) -> ToolResult {
    let mut sandbox = facts(plan);
    if denied_by == Some(DeniedBy::Sandbox) {
        sandbox.denied_by_sandbox = Some(content.clone());
    }
    ToolResult {
        ok,
        content,
        exit_code: None,
        timed_out: false,
        denied_by,
        sandbox,
    }
}

fn parse<T: for<'de> Deserialize<'de>>(
    plan: &Plan,
    tool: &str,
    raw: &str,
) -> Result<T, ToolResult> {
    serde_json::from_str(raw).map_err(|e| {
        done(
            plan,
            false,
            format!("invalid arguments for `{tool}`: {e}"),
            None,
        )
    })
}

/// Resolves a tool path: relative to the workspace, lexically normalised, then with symlinks
/// in its existing ancestors resolved (what the kernel will actually reach).
pub fn resolve(spec: &bridle_policy::SandboxSpec, raw: &str) -> PathBuf {
    // `~` means what it means to the commands of the sandbox: their `HOME`.
    let home = spec.env.get("HOME").map(PathBuf::from);
    let joined = match (raw.strip_prefix('~'), &home) {
        (Some(""), Some(home)) => home.clone(),
        (Some(rest), Some(home)) if rest.starts_with('/') => home.join(&rest[1..]),
        _ if Path::new(raw).is_absolute() => PathBuf::from(raw),
        _ => spec.workspace.join(raw),
    };
    bridle_sandbox::real_path::real_path(&joined)
}

/// The policy's decision on a write to `path`, at least `ask` when the profile has path rules
/// and the file has more than one name: path rules match names, and a hard link is another
/// name for the same file (`ln .env notes.txt`, then a write to `notes.txt`, would change
/// `.env` past a rule on `.env*`).
fn write_verdict(plan: &Plan, path: &Path) -> bridle_policy::Verdict {
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

/// Whether the worker must refuse a file with several names: only when the profile has path
/// rules and nobody approved this write (then a link made after [`write_verdict`] looked is
/// caught on the opened file).
fn links_for(plan: &Plan, approved: bool) -> HardLinks {
    if approved || plan.path_rules.is_empty() {
        HardLinks::Allowed
    } else {
        HardLinks::Refused
    }
}

/// An allowed write: what the worker checks on the opened file, and who allowed it (logged).
struct Allowed {
    links: HardLinks,
    by: String,
}

/// Policy, then approval, for a write to `path`.
fn allow_write(
    ctx: &FsContext<'_>,
    tool: &str,
    raw_args: &str,
    path: &Path,
) -> Result<Allowed, ToolResult> {
    let verdict = write_verdict(ctx.plan, path);
    match verdict.decision {
        Decision::Allow => Ok(Allowed {
            links: links_for(ctx.plan, false),
            by: verdict.reason,
        }),
        Decision::Deny => {
            let by = if matches!(verdict.by, bridle_policy::DecidedBy::Rule { .. }) {
                DeniedBy::Rule
            } else {
                DeniedBy::Policy
            };
            Err(done(
                ctx.plan,
                false,
                format!("denied: {}", verdict.reason),
                Some(by),
            ))
        }
        Decision::Ask => {
            let request = ApprovalRequest {
                tool: tool.into(),
                arguments: serde_json::from_str(raw_args).unwrap_or(serde_json::Value::Null),
                reason: verdict.reason.clone(),
                justification: None,
                escalation: None,
            };
            match ctx.approvals.ask(&request).denial(ctx.approvals.policy()) {
                None => Ok(Allowed {
                    links: links_for(ctx.plan, true),
                    by: format!("approved ({})", verdict.reason),
                }),
                Some(text) => Err(done(
                    ctx.plan,
                    false,
                    format!("denied ({}): {text}", verdict.reason),
                    Some(DeniedBy::Approval),
                )),
            }
        }
    }
}

fn sandbox_denied(plan: &Plan, err: &FsDenied) -> ToolResult {
    let by = match err {
        FsDenied::OutsideWritableRoots(_)
        | FsDenied::Masked(_)
        | FsDenied::Symlink(_)
        | FsDenied::Landlock(_)
        | FsDenied::HostProc(_) => Some(DeniedBy::Sandbox),
        FsDenied::HardLinked { .. } => Some(DeniedBy::Policy),
        _ => None,
    };
    done(plan, false, err.to_string(), by)
}

impl std::fmt::Debug for FsContext<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FsContext")
            .field("fs", &self.fs)
            .finish_non_exhaustive()
    }
}

/// Where an allowed write goes.
enum Writer<'a> {
    /// The session's confined worker.
    Session(&'a ConfinedFs),
    /// A worker confined by an approved wider (but still confined) mode.
    Escalated(ConfinedFs),
    /// Approved danger-full-access: a plain write.
    Unconfined,
}

impl Writer<'_> {
    fn write(&self, path: &Path, bytes: Vec<u8>, links: HardLinks) -> Result<(), FsDenied> {
        match self {
            Writer::Session(fs) => fs.write(path, bytes, links),
            Writer::Escalated(fs) => fs.write(path, bytes, links),
            Writer::Unconfined => write_unconfined(path, &bytes, links),
        }
    }
}

/// Decides a write, reports the decision (an allowed write whose decision cannot be recorded
/// does not happen) and returns where it goes.
fn writer_for<'a>(
    ctx: &'a FsContext<'_>,
    tool: &str,
    raw_args: &str,
    path: &Path,
    escalation: Option<(SandboxMode, Option<&str>)>,
) -> Result<(Writer<'a>, HardLinks), ToolResult> {
    match decide_writer(ctx, tool, raw_args, path, escalation) {
        Ok((writer, allowed)) => {
            ctx.approvals
                .decided(Decision::Allow, &allowed.by)
                .map_err(|e| done(ctx.plan, false, not_recorded(&e), None))?;
            Ok((writer, allowed.links))
        }
        Err(denied) => {
            if denied.denied_by.is_some() {
                let by = denied
                    .content
                    .strip_prefix("denied: ")
                    .unwrap_or(&denied.content);
                let _ = ctx.approvals.decided(Decision::Deny, by);
            }
            Err(denied)
        }
    }
}

/// Decides a write (policy, rules, approvals; an escalation needs a person's approval and runs
/// this one call under the wider mode) and returns where it goes.
fn decide_writer<'a>(
    ctx: &'a FsContext<'_>,
    tool: &str,
    raw_args: &str,
    path: &Path,
    escalation: Option<(SandboxMode, Option<&str>)>,
) -> Result<(Writer<'a>, Allowed), ToolResult> {
    let Some((wider, justification)) = escalation else {
        let allowed = allow_write(ctx, tool, raw_args, path)?;
        return Ok((Writer::Session(ctx.fs), allowed));
    };
    let invalid = |m: String| {
        done(
            ctx.plan,
            false,
            format!("invalid arguments for `{tool}`: {m}"),
            None,
        )
    };
    if wider <= ctx.plan.spec.mode {
        return Err(invalid(format!(
            "`sandbox_permissions` must be wider than the current mode `{}`",
            ctx.plan.spec.mode
        )));
    }
    let Some(justification) = justification.filter(|j| !j.trim().is_empty()) else {
        return Err(invalid(
            "`sandbox_permissions` needs a `justification`".into(),
        ));
    };
    let Some(replan) = ctx.replan else {
        return Err(invalid(
            "escalation is not available in this session".into(),
        ));
    };
    let wide = replan(wider).map_err(|e| {
        done(
            ctx.plan,
            false,
            format!("cannot plan the escalated sandbox: {e}"),
            Some(DeniedBy::Sandbox),
        )
    })?;
    let verdict = write_verdict(&wide, path);
    if verdict.decision == Decision::Deny {
        return Err(done(
            ctx.plan,
            false,
            format!("denied even with `{wider}`: {}", verdict.reason),
            Some(DeniedBy::Policy),
        ));
    }
    let mut reason = format!(
        "asks to write `{}` with sandbox mode `{wider}` instead of `{}`",
        path.display(),
        ctx.plan.spec.mode
    );
    if verdict.decision == Decision::Ask {
        reason.push_str(&format!("; {}", verdict.reason));
    }
    let request = ApprovalRequest {
        tool: tool.into(),
        arguments: serde_json::from_str(raw_args).unwrap_or(serde_json::Value::Null),
        reason: reason.clone(),
        justification: Some(justification.to_owned()),
        escalation: Some(wider),
    };
    if let Some(text) = ctx.approvals.ask(&request).denial(ctx.approvals.policy()) {
        return Err(done(
            ctx.plan,
            false,
            format!("denied ({reason}): {text}"),
            Some(DeniedBy::Approval),
        ));
    }
    // A person approved this write: whatever names the file has.
    let allowed = Allowed {
        links: HardLinks::Allowed,
        by: "approved escalation of this one write".to_owned(),
    };
    if wider == SandboxMode::DangerFullAccess {
        return Ok((Writer::Unconfined, allowed));
    }
    ConfinedFs::start(&wide.spec)
        .map(|fs| (Writer::Escalated(fs), allowed))
        .map_err(|e| {
            done(
                ctx.plan,
                false,
                format!("not run: sandbox unavailable: {e}"),
                Some(DeniedBy::Sandbox),
            )
        })
}

/// How reads are decided: the mode allows them; the confined worker keeps masked paths out.
const READS_ALLOWED: &str = "reads are allowed; masked paths stay hidden";

/// `read_file`.
pub fn read_file(ctx: &FsContext<'_>, raw: &str) -> ToolResult {
    let args: ReadArgs = match parse(ctx.plan, "read_file", raw) {
        Ok(a) => a,
        Err(r) => return r,
    };
    let path = resolve(&ctx.plan.spec, &args.path);
    if let Err(e) = ctx.approvals.decided(Decision::Allow, READS_ALLOWED) {
        return done(ctx.plan, false, not_recorded(&e), None);
    }
    let (bytes, size) = match ctx.fs.read(&path, MAX_FILE_BYTES) {
        Ok(r) => r,
        Err(e) => return sandbox_denied(ctx.plan, &e),
    };
    if bytes.iter().take(8192).any(|b| *b == 0) {
        return done(
            ctx.plan,
            true,
            format!(
                "`{}` is a binary file ({size} bytes); not shown",
                path.display()
            ),
            None,
        );
    }
    let text = String::from_utf8_lossy(&bytes);
    let first = args.offset.unwrap_or(1).max(1);
    let mut out = String::new();
    let mut shown_last = first.saturating_sub(1);
    let total_lines = text.lines().count();
    for (i, line) in text
        .lines()
        .enumerate()
        .skip(first - 1)
        .take(args.limit.unwrap_or(usize::MAX))
    {
        if out.len() + line.len() > MAX_READ_CONTENT {
            break;
        }
        out.push_str(&format!("{:>6}\t{line}\n", i + 1));
        shown_last = i + 1;
    }
    let complete = shown_last >= total_lines && u64::try_from(bytes.len()).unwrap_or(0) == size;
    if !complete {
        out.push_str(&format!(
            "[showing lines {first}-{shown_last} of {total_lines}{}; use `offset` and `limit` for more]\n",
            if u64::try_from(bytes.len()).unwrap_or(0) < size { format!(", first {MAX_FILE_BYTES} bytes of {size}") } else { String::new() }
        ));
    }
    done(ctx.plan, true, out, None)
}

/// `write_file`.
pub fn write_file(ctx: &FsContext<'_>, raw: &str) -> ToolResult {
    let args: WriteArgs = match parse(ctx.plan, "write_file", raw) {
        Ok(a) => a,
        Err(r) => return r,
    };
    let path = resolve(&ctx.plan.spec, &args.path);
    let escalation = args
        .sandbox_permissions
        .map(|m| (m, args.justification.as_deref()));
    let (writer, links) = match writer_for(ctx, "write_file", raw, &path, escalation) {
        Ok(w) => w,
        Err(denied) => return denied,
    };
    let len = args.content.len();
    match writer.write(&path, args.content.into_bytes(), links) {
        Ok(()) => done(
            ctx.plan,
            true,
            format!("wrote {len} bytes to `{}`", path.display()),
            None,
        ),
        Err(e) => sandbox_denied(ctx.plan, &e),
    }
}

/// `edit_file`: exact string replacement; the match must be unique unless `replace_all`.
pub fn edit_file(ctx: &FsContext<'_>, raw: &str) -> ToolResult {
    let args: EditArgs = match parse(ctx.plan, "edit_file", raw) {
        Ok(a) => a,
        Err(r) => return r,
    };
    if args.old_string.is_empty() {
        return done(
            ctx.plan,
            false,
            "invalid arguments for `edit_file`: `old_string` is empty".into(),
            None,
        );
    }
    if args.old_string == args.new_string {
        return done(
            ctx.plan,
            false,
            "invalid arguments for `edit_file`: `old_string` and `new_string` are the same".into(),
            None,
        );
    }
    let path = resolve(&ctx.plan.spec, &args.path);
    let escalation = args
        .sandbox_permissions
        .map(|m| (m, args.justification.as_deref()));
    let (writer, links) = match writer_for(ctx, "edit_file", raw, &path, escalation) {
        Ok(w) => w,
        Err(denied) => return denied,
    };
    let (bytes, size) = match ctx.fs.read(&path, MAX_FILE_BYTES + 1) {
        Ok(r) => r,
        Err(e) => return sandbox_denied(ctx.plan, &e),
    };
    if u64::try_from(bytes.len()).unwrap_or(u64::MAX) < size || bytes.len() > MAX_FILE_BYTES {
        return done(
            ctx.plan,
            false,
            format!(
                "`{}` is larger than {MAX_FILE_BYTES} bytes; edit it with bash",
                path.display()
            ),
            None,
        );
    }
    let Ok(text) = String::from_utf8(bytes) else {
        return done(
            ctx.plan,
            false,
            format!("`{}` is not UTF-8 text; edit it with bash", path.display()),
            None,
        );
    };
    let count = text.matches(&args.old_string).count();
    let updated = match (count, args.replace_all) {
        (0, _) => {
            return done(
                ctx.plan,
                false,
                format!("`old_string` was not found in `{}`", path.display()),
                None,
            );
        }
        (1, _) | (_, true) => text.replace(&args.old_string, &args.new_string),
        (n, false) => {
            return done(
                ctx.plan,
                false,
                format!(
                    "`old_string` occurs {n} times in `{}`; add context to make it unique, or set `replace_all`",
                    path.display()
                ),
                None,
            );
        }
    };
    match writer.write(&path, updated.into_bytes(), links) {
        Ok(()) => done(
            ctx.plan,
            true,
            format!("replaced {count} occurrence(s) in `{}`", path.display()),
            None,
        ),
        Err(e) => sandbox_denied(ctx.plan, &e),
    }
}

/// `list_dir`.
pub fn list_dir(ctx: &FsContext<'_>, raw: &str) -> ToolResult {
    let args: ListArgs = match parse(ctx.plan, "list_dir", raw) {
        Ok(a) => a,
        Err(r) => return r,
    };
    let path = resolve(&ctx.plan.spec, &args.path);
    if let Err(e) = ctx.approvals.decided(Decision::Allow, READS_ALLOWED) {
        return done(ctx.plan, false, not_recorded(&e), None);
    }
    match ctx.fs.list_dir(&path) {
        Ok(entries) => {
            let mut out = String::new();
            for (name, is_dir) in &entries {
                out.push_str(name);
                if *is_dir {
                    out.push('/');
                }
                out.push('\n');
            }
            if entries.is_empty() {
                out.push_str("(empty directory)\n");
            }
            done(ctx.plan, true, out, None)
        }
        Err(e) => sandbox_denied(ctx.plan, &e),
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct GlobArgs {
    pattern: String,
    path: Option<String>,
}

/// Most entries `glob` visits, and most matches it returns.
pub const GLOB_MAX_VISITED: usize = 100_000;
/// Most matches `glob` returns.
pub const GLOB_MAX_MATCHES: usize = 2_000;

/// `glob {pattern, path?}`: paths below `path` (default: the workspace) matching the pattern
/// (`*`, `?`, `**/`, `[...]`), relative to it. Symlinks are not followed, `.git` and masked
/// directories are skipped.
pub fn glob(ctx: &FsContext<'_>, raw: &str) -> ToolResult {
    let args: GlobArgs = match parse(ctx.plan, "glob", raw) {
        Ok(a) => a,
        Err(r) => return r,
    };
    let pattern = match bridle_policy::glob::Glob::new(&args.pattern) {
        Ok(p) => p,
        Err(e) => {
            return done(
                ctx.plan,
                false,
                format!("invalid arguments for `glob`: {e}"),
                None,
            );
        }
    };
    let base = resolve(&ctx.plan.spec, args.path.as_deref().unwrap_or("."));
    if let Err(e) = ctx.approvals.decided(Decision::Allow, READS_ALLOWED) {
        return done(ctx.plan, false, not_recorded(&e), None);
    }
    let (entries, stopped) = match ctx.fs.walk(&base, GLOB_MAX_VISITED) {
        Ok(r) => r,
        Err(e) => return sandbox_denied(ctx.plan, &e),
    };
    let mut out = String::new();
    let mut matches = 0;
    for (path, is_dir) in &entries {
        let text = path.to_string_lossy();
        if pattern.is_match(&text) {
            matches += 1;
            if matches > GLOB_MAX_MATCHES {
                continue;
            }
            out.push_str(&text);
            if *is_dir {
                out.push('/');
            }
            out.push('\n');
        }
    }
    if matches == 0 {
        out.push_str("no matches\n");
    }
    if matches > GLOB_MAX_MATCHES {
        out.push_str(&format!(
            "[{matches} matches; the first {GLOB_MAX_MATCHES} are shown; narrow the pattern]\n"
        ));
    }
    if stopped {
        out.push_str(&format!(
            "[stopped after visiting {GLOB_MAX_VISITED} entries; search a smaller `path`]\n"
        ));
    }
    done(ctx.plan, true, out, None)
}
