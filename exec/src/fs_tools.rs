//! The model-facing file tools: `read_file {path, offset?, limit?}`, `write_file {path,
//! content}`, `edit_file {path, old_string, new_string, replace_all?}`, `list_dir {path}`.
//!
//! Each is a tool value: it resolves its path against the workspace and declares the write (or
//! the read); the pipeline decides (protected and masked paths, writable roots, path rules,
//! approvals, guards) and hands it the call's [`FileSystem`](crate::backend::FileSystem) —
//! locally the Landlock-confined worker with `openat2` and no symlink following for writes, so
//! the kernel enforces the same roots as for commands. Reads and listings may run
//! concurrently; writes and edits may not.

use std::path::{Path, PathBuf};

use bridle_policy::{Plan, SandboxMode};
use bridle_sandbox::confined_fs::FsDenied;
use serde::Deserialize;

use crate::tool::{CallEnv, Declaration, DeniedBy, Effect, Escalation, ToolResult, TypedTool};

/// Largest file `read_file` and `edit_file` load (bytes).
pub const MAX_FILE_BYTES: usize = 10 * 1024 * 1024;
/// Most text `read_file` returns at once (bytes); the rest is reachable with `offset`/`limit`.
pub const MAX_READ_CONTENT: usize = 256 * 1024;

/// The arguments of `read_file`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadArgs {
    /// The file, relative to the workspace or absolute.
    path: String,
    /// First line to show (1-based).
    offset: Option<usize>,
    /// Most lines to show.
    limit: Option<usize>,
}

/// The arguments of `write_file`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WriteArgs {
    /// The file.
    path: String,
    /// The whole new content.
    content: String,
    /// A strictly wider sandbox mode for this one call; a person must approve it.
    #[serde(default)]
    #[schemars(schema_with = "crate::tool::mode_schema")]
    sandbox_permissions: Option<SandboxMode>,
    /// Why the wider mode is needed (required with sandbox_permissions).
    justification: Option<String>,
}

/// The arguments of `edit_file`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EditArgs {
    /// The file.
    path: String,
    /// The exact text to replace.
    old_string: String,
    /// The replacement.
    new_string: String,
    /// Replace every occurrence.
    #[serde(default)]
    replace_all: bool,
    /// A strictly wider sandbox mode for this one call; a person must approve it.
    #[serde(default)]
    #[schemars(schema_with = "crate::tool::mode_schema")]
    sandbox_permissions: Option<SandboxMode>,
    /// Why the wider mode is needed (required with sandbox_permissions).
    justification: Option<String>,
}

/// The arguments of `list_dir`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListArgs {
    /// The directory.
    path: String,
}

fn done(env: &CallEnv<'_>, ok: bool, content: String, denied_by: Option<DeniedBy>) -> ToolResult {
    let mut result = env.result(ok, content, denied_by);
    if denied_by == Some(DeniedBy::Sandbox) {
        result.sandbox.denied_by_sandbox = Some(result.content.clone());
    }
    result
}

/// Resolves a tool path: relative to the workspace, lexically normalised, then with symlinks
/// in its existing ancestors resolved (what the kernel will actually reach).
pub fn resolve(spec: &bridle_policy::SandboxSpec, raw: &str) -> PathBuf {
    bridle_sandbox::real_path::real_path(&spec.workspace.join(home_expanded(spec, raw)))
}

/// `raw` with a leading `~` replaced by what it means to the commands of the sandbox: their
/// `HOME` (anything else as written).
pub(crate) fn home_expanded(spec: &bridle_policy::SandboxSpec, raw: &str) -> PathBuf {
    match (raw.strip_prefix('~'), spec.env.get("HOME")) {
        (Some(""), Some(home)) => PathBuf::from(home),
        (Some(rest), Some(home)) if rest.starts_with('/') => Path::new(home).join(&rest[1..]),
        _ => PathBuf::from(raw),
    }
}

/// Whether `path` is in one of the spec's masked paths, each taken as written and resolved (a
/// mask hides what its path resolves to as well: `~/.netrc -> /opt/netrc`).
pub(crate) fn in_masked_path(spec: &bridle_policy::SandboxSpec, path: &Path) -> bool {
    spec.masked_paths
        .iter()
        .any(|m| path.starts_with(m) || path.starts_with(bridle_sandbox::real_path::real_path(m)))
}

/// A failure of the file system, attributed.
pub(crate) fn sandbox_denied(env: &CallEnv<'_>, err: &FsDenied) -> ToolResult {
    let by = match err {
        FsDenied::OutsideWritableRoots(_)
        | FsDenied::Masked(_)
        | FsDenied::Symlink(_)
        | FsDenied::Landlock(_)
        | FsDenied::RootWithoutCapabilities { .. }
        | FsDenied::HostProc(_) => Some(DeniedBy::Sandbox),
        FsDenied::HardLinked { .. } => Some(DeniedBy::Policy),
        _ => None,
    };
    done(env, false, err.to_string(), by)
}

/// What reading declares.
fn reads() -> Declaration {
    Declaration {
        effects: vec![Effect::Confined(READS_ALLOWED.into())],
        escalation: None,
        uses_files: true,
    }
}

/// What writing `path` declares, with the wider mode asked for.
pub(crate) fn writes(
    path: PathBuf,
    mode: Option<SandboxMode>,
    justification: Option<&String>,
) -> Declaration {
    Declaration {
        effects: vec![Effect::Write(path)],
        escalation: mode.map(|mode| Escalation {
            mode,
            justification: justification.cloned(),
        }),
        uses_files: true,
    }
}

/// How reads are decided: the mode allows them; the confined worker keeps masked paths out.
const READS_ALLOWED: &str = "reads are allowed; masked paths stay hidden";

/// `read_file`.
#[derive(Debug, Clone, Copy, Default)]
pub struct ReadFile;

impl TypedTool for ReadFile {
    type Args = ReadArgs;

    fn name(&self) -> &str {
        "read_file"
    }

    fn description(&self) -> &str {
        "Read a text file, with line numbers."
    }

    fn concurrency_safe(&self, _args: &ReadArgs) -> bool {
        true
    }

    fn declare(&self, _args: &ReadArgs, _plan: &Plan) -> Result<Declaration, String> {
        Ok(reads())
    }

    fn execute(&self, args: ReadArgs, env: &CallEnv<'_>) -> ToolResult {
        read_file(env, args)
    }
}

fn read_file(env: &CallEnv<'_>, args: ReadArgs) -> ToolResult {
    let path = resolve(env.spec, &args.path);
    let (bytes, size) = match env.fs.read(&path, MAX_FILE_BYTES) {
        Ok(r) => r,
        Err(e) => return sandbox_denied(env, &e),
    };
    if bytes.iter().take(8192).any(|b| *b == 0) {
        return done(
            env,
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
    done(env, true, out, None)
}

/// `write_file`.
#[derive(Debug, Clone, Copy, Default)]
pub struct WriteFile;

impl TypedTool for WriteFile {
    type Args = WriteArgs;

    fn name(&self) -> &str {
        "write_file"
    }

    fn description(&self) -> &str {
        "Create or overwrite a file with the given content."
    }

    fn declare(&self, args: &WriteArgs, plan: &Plan) -> Result<Declaration, String> {
        Ok(writes(
            resolve(&plan.spec, &args.path),
            args.sandbox_permissions,
            args.justification.as_ref(),
        ))
    }

    fn execute(&self, args: WriteArgs, env: &CallEnv<'_>) -> ToolResult {
        write_file(env, args)
    }
}

fn write_file(env: &CallEnv<'_>, args: WriteArgs) -> ToolResult {
    let path = resolve(env.spec, &args.path);
    let len = args.content.len();
    match env.fs.write(&path, args.content.into_bytes(), env.links) {
        Ok(()) => done(
            env,
            true,
            format!("wrote {len} bytes to `{}`", path.display()),
            None,
        ),
        Err(e) => sandbox_denied(env, &e),
    }
}

/// `edit_file`: exact string replacement; the match must be unique unless `replace_all`.
#[derive(Debug, Clone, Copy, Default)]
pub struct EditFile;

impl TypedTool for EditFile {
    type Args = EditArgs;

    fn name(&self) -> &str {
        "edit_file"
    }

    fn description(&self) -> &str {
        "Replace an exact string in a file; it must occur once unless replace_all is set."
    }

    fn declare(&self, args: &EditArgs, plan: &Plan) -> Result<Declaration, String> {
        if args.old_string.is_empty() {
            return Err("`old_string` is empty".into());
        }
        if args.old_string == args.new_string {
            return Err("`old_string` and `new_string` are the same".into());
        }
        Ok(writes(
            resolve(&plan.spec, &args.path),
            args.sandbox_permissions,
            args.justification.as_ref(),
        ))
    }

    fn execute(&self, args: EditArgs, env: &CallEnv<'_>) -> ToolResult {
        edit_file(env, args)
    }
}

fn edit_file(env: &CallEnv<'_>, args: EditArgs) -> ToolResult {
    let path = resolve(env.spec, &args.path);
    let (bytes, size) = match env.fs.read(&path, MAX_FILE_BYTES + 1) {
        Ok(r) => r,
        Err(e) => return sandbox_denied(env, &e),
    };
    if u64::try_from(bytes.len()).unwrap_or(u64::MAX) < size || bytes.len() > MAX_FILE_BYTES {
        return done(
            env,
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
            env,
            false,
            format!("`{}` is not UTF-8 text; edit it with bash", path.display()),
            None,
        );
    };
    let count = text.matches(&args.old_string).count();
    let updated = match (count, args.replace_all) {
        (0, _) => {
            return done(
                env,
                false,
                format!("`old_string` was not found in `{}`", path.display()),
                None,
            );
        }
        (1, _) | (_, true) => text.replace(&args.old_string, &args.new_string),
        (n, false) => {
            return done(
                env,
                false,
                format!(
                    "`old_string` occurs {n} times in `{}`; add context to make it unique, or set `replace_all`",
                    path.display()
                ),
                None,
            );
        }
    };
    match env.fs.write(&path, updated.into_bytes(), env.links) {
        Ok(()) => done(
            env,
            true,
            format!("replaced {count} occurrence(s) in `{}`", path.display()),
            None,
        ),
        Err(e) => sandbox_denied(env, &e),
    }
}

/// `list_dir`.
#[derive(Debug, Clone, Copy, Default)]
pub struct ListDir;

impl TypedTool for ListDir {
    type Args = ListArgs;

    fn name(&self) -> &str {
        "list_dir"
    }

    fn description(&self) -> &str {
        "List a directory (directories end in /)."
    }

    fn concurrency_safe(&self, _args: &ListArgs) -> bool {
        true
    }

    fn declare(&self, _args: &ListArgs, _plan: &Plan) -> Result<Declaration, String> {
        Ok(reads())
    }

    fn execute(&self, args: ListArgs, env: &CallEnv<'_>) -> ToolResult {
        list_dir(env, args)
    }
}

fn list_dir(env: &CallEnv<'_>, args: ListArgs) -> ToolResult {
    let path = resolve(env.spec, &args.path);
    match env.fs.list_dir(&path) {
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
            done(env, true, out, None)
        }
        Err(e) => sandbox_denied(env, &e),
    }
}

/// The arguments of `glob`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GlobArgs {
    /// The pattern, relative to path.
    pattern: String,
    /// Where to search (default: the workspace).
    path: Option<String>,
}

/// Most entries `glob` visits, and most matches it returns.
pub const GLOB_MAX_VISITED: usize = 100_000;
/// Most matches `glob` returns.
pub const GLOB_MAX_MATCHES: usize = 2_000;

/// `glob {pattern, path?}`: paths below `path` (default: the workspace) matching the pattern
/// (`*`, `?`, `**/`, `[...]`), relative to it. Symlinks are not followed, `.git` and masked
/// directories are skipped.
#[derive(Debug, Clone, Copy, Default)]
pub struct Glob;

impl TypedTool for Glob {
    type Args = GlobArgs;

    fn name(&self) -> &str {
        "glob"
    }

    fn description(&self) -> &str {
        "Find paths matching a glob pattern (*, ?, **/, [...]) below a directory."
    }

    fn concurrency_safe(&self, _args: &GlobArgs) -> bool {
        true
    }

    fn declare(&self, args: &GlobArgs, _plan: &Plan) -> Result<Declaration, String> {
        bridle_policy::glob::Glob::new(&args.pattern).map_err(|e| e.to_string())?;
        Ok(reads())
    }

    fn execute(&self, args: GlobArgs, env: &CallEnv<'_>) -> ToolResult {
        glob(env, args)
    }
}

fn glob(env: &CallEnv<'_>, args: GlobArgs) -> ToolResult {
    let pattern = match bridle_policy::glob::Glob::new(&args.pattern) {
        Ok(p) => p,
        Err(e) => {
            return done(
                env,
                false,
                format!("invalid arguments for `glob`: {e}"),
                None,
            );
        }
    };
    let base = resolve(env.spec, args.path.as_deref().unwrap_or("."));
    let (entries, stopped) = match env.fs.walk(&base, GLOB_MAX_VISITED) {
        Ok(r) => r,
        Err(e) => return sandbox_denied(env, &e),
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
    done(env, true, out, None)
}
