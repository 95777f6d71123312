//! `str_replace_editor`: one tool for viewing and editing files — `view` (a file with line
//! numbers, optionally a `view_range`; a directory listed), `create`, `str_replace` (the
//! match must be unique), `insert` (after line `insert_line`, 0 for the top) and `undo_edit`
//! (the last edit of that file in this session). It runs on the same confined file system and
//! is decided by the same pipeline and policy as the other file tools.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Mutex;

use bridle_policy::Plan;
use serde::Deserialize;

use crate::fs_tools::{MAX_FILE_BYTES, MAX_READ_CONTENT, resolve, sandbox_denied, writes};
use crate::tool::{CallEnv, Declaration, Effect, ToolResult, TypedTool};

/// What the editor does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum EditorCommand {
    /// Show a file with line numbers, or list a directory.
    View,
    /// Create (or overwrite) a file with `file_text`.
    Create,
    /// Replace `old_str`, which must occur exactly once, with `new_str`.
    StrReplace,
    /// Insert `new_str` after line `insert_line` (0: at the top).
    Insert,
    /// Undo the last edit of the file in this session.
    UndoEdit,
}

/// The arguments of `str_replace_editor`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EditorArgs {
    /// view, create, str_replace, insert or undo_edit.
    #[schemars(schema_with = "command_schema")]
    command: EditorCommand,
    /// The file or directory, relative to the workspace or absolute.
    path: String,
    /// For view: the first and last line to show (1-based; -1 as last means the end).
    view_range: Option<[i64; 2]>,
    /// For create: the whole content.
    file_text: Option<String>,
    /// For str_replace: the exact text to replace.
    old_str: Option<String>,
    /// For str_replace: the replacement (default empty); for insert: the text to insert.
    new_str: Option<String>,
    /// For insert: the line after which to insert (0: at the top).
    insert_line: Option<usize>,
}

fn command_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "string",
        "enum": ["view", "create", "str_replace", "insert", "undo_edit"],
        "description": "view (a file with line numbers, or a directory), create, str_replace, insert or undo_edit",
    })
}

/// The editor, with the undo history of the session (previous contents per file).
#[derive(Debug, Default)]
pub struct Editor {
    history: Mutex<HashMap<PathBuf, Vec<Option<Vec<u8>>>>>,
}

impl Editor {
    /// An editor with no history.
    pub fn new() -> Editor {
        Editor::default()
    }

    fn history(&self) -> std::sync::MutexGuard<'_, HashMap<PathBuf, Vec<Option<Vec<u8>>>>> {
        self.history
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

fn need<'a>(value: &'a Option<String>, key: &str, command: &str) -> Result<&'a str, String> {
    value
        .as_deref()
        .ok_or_else(|| format!("`{command}` needs `{key}`"))
}

impl TypedTool for Editor {
    type Args = EditorArgs;

    fn name(&self) -> &str {
        "str_replace_editor"
    }

    fn description(&self) -> &str {
        "View, create and edit files: view (line numbers, view_range; directories listed), create, str_replace (unique match), insert (after insert_line), undo_edit."
    }

    fn concurrency_safe(&self, args: &EditorArgs) -> bool {
        args.command == EditorCommand::View
    }

    fn declare(&self, args: &EditorArgs, plan: &Plan) -> Result<Declaration, String> {
        let path = resolve(&plan.spec, &args.path);
        match args.command {
            EditorCommand::View => {
                if let Some([first, last]) = args.view_range
                    && (first < 1 || (last != -1 && last < first))
                {
                    return Err(format!(
                        "`view_range` [{first}, {last}]: lines start at 1 and the last is -1 or not before the first"
                    ));
                }
                return Ok(Declaration {
                    effects: vec![Effect::Confined(
                        "reads are allowed; masked paths stay hidden".into(),
                    )],
                    escalation: None,
                    uses_files: true,
                });
            }
            EditorCommand::Create => {
                need(&args.file_text, "file_text", "create")?;
            }
            EditorCommand::StrReplace => {
                if need(&args.old_str, "old_str", "str_replace")?.is_empty() {
                    return Err("`old_str` is empty".into());
                }
            }
            EditorCommand::Insert => {
                need(&args.new_str, "new_str", "insert")?;
                if args.insert_line.is_none() {
                    return Err("`insert` needs `insert_line`".into());
                }
            }
            EditorCommand::UndoEdit => {}
        }
        Ok(writes(path, None, None))
    }

    fn execute(&self, args: EditorArgs, env: &CallEnv<'_>) -> ToolResult {
        let path = resolve(env.spec, &args.path);
        let shown = path.display().to_string();
        let fail = |text: String| env.result(false, text, None);
        #[expect(
            clippy::result_large_err,
            reason = "the error is the finished tool result, moved once per call"
        )]
        let read = |path: &std::path::Path| -> Result<Option<String>, ToolResult> {
            match env.fs.read(path, MAX_FILE_BYTES + 1) {
                Ok((bytes, size)) => {
                    if bytes.len() > MAX_FILE_BYTES
                        || u64::try_from(bytes.len()).unwrap_or(0) < size
                    {
                        return Err(fail(format!(
                            "`{shown}` is larger than {MAX_FILE_BYTES} bytes; use bash"
                        )));
                    }
                    String::from_utf8(bytes)
                        .map(Some)
                        .map_err(|_| fail(format!("`{shown}` is not UTF-8 text; use bash")))
                }
                Err(bridle_sandbox::confined_fs::FsDenied::Io { message, .. })
                    if message.contains("No such file") =>
                {
                    Ok(None)
                }
                Err(e) => Err(sandbox_denied(env, &e)),
            }
        };
        let write = |before: Option<String>, after: String, done: String| match env.fs.write(
            &path,
            after.into_bytes(),
            env.links,
        ) {
            Ok(()) => {
                self.history()
                    .entry(path.clone())
                    .or_default()
                    .push(before.map(String::into_bytes));
                env.result(true, done, None)
            }
            Err(e) => sandbox_denied(env, &e),
        };
        match args.command {
            EditorCommand::View => {
                if let Ok(entries) = env.fs.list_dir(&path) {
                    let mut out: String = entries
                        .iter()
                        .map(|(name, dir)| format!("{name}{}\n", if *dir { "/" } else { "" }))
                        .collect();
                    if out.is_empty() {
                        out.push_str("(empty directory)\n");
                    }
                    return env.result(true, out, None);
                }
                let text = match read(&path) {
                    Ok(Some(t)) => t,
                    Ok(None) => return fail(format!("`{shown}` does not exist")),
                    Err(r) => return r,
                };
                let total = text.lines().count();
                let (first, last) = match args.view_range {
                    Some([f, l]) => (
                        usize::try_from(f).unwrap_or(1),
                        if l == -1 {
                            total
                        } else {
                            usize::try_from(l).unwrap_or(total).min(total)
                        },
                    ),
                    None => (1, total),
                };
                let mut out = String::new();
                for (i, line) in text.lines().enumerate().take(last).skip(first - 1) {
                    if out.len() + line.len() > MAX_READ_CONTENT {
                        out.push_str(&format!(
                            "[stopped at line {i}; use `view_range` for more]\n"
                        ));
                        break;
                    }
                    out.push_str(&format!("{:>6}\t{line}\n", i + 1));
                }
                env.result(true, out, None)
            }
            EditorCommand::Create => {
                let before = match read(&path) {
                    Ok(b) => b,
                    Err(r) => return r,
                };
                let text = args.file_text.unwrap_or_default();
                let len = text.len();
                // A reviewer must see that a file was clobbered, not only that one exists now.
                let done = match &before {
                    None => format!("created `{shown}` ({len} bytes)"),
                    Some(old) => format!(
                        "replaced the existing `{shown}` ({} bytes before, {len} bytes now; undo_edit restores it)",
                        old.len()
                    ),
                };
                write(before, text, done)
            }
            EditorCommand::StrReplace => {
                let text = match read(&path) {
                    Ok(Some(t)) => t,
                    Ok(None) => return fail(format!("`{shown}` does not exist")),
                    Err(r) => return r,
                };
                let old = args.old_str.unwrap_or_default();
                match text.matches(&old).count() {
                    0 => fail(format!("`old_str` was not found in `{shown}`")),
                    1 => {
                        let after = text.replacen(&old, &args.new_str.unwrap_or_default(), 1);
                        write(
                            Some(text),
                            after,
                            format!("replaced 1 occurrence in `{shown}`"),
                        )
                    }
                    n => fail(format!(
                        "`old_str` occurs {n} times in `{shown}`; add context to make it unique"
                    )),
                }
            }
            EditorCommand::Insert => {
                let text = match read(&path) {
                    Ok(Some(t)) => t,
                    Ok(None) => return fail(format!("`{shown}` does not exist")),
                    Err(r) => return r,
                };
                let at = args.insert_line.unwrap_or(0);
                let lines: Vec<&str> = text.split_inclusive('\n').collect();
                if at > lines.len() {
                    return fail(format!(
                        "`insert_line` {at} is past the end of `{shown}` ({} lines)",
                        lines.len()
                    ));
                }
                let mut new = args.new_str.unwrap_or_default();
                if !new.ends_with('\n') {
                    new.push('\n');
                }
                let mut after: String = lines[..at].concat();
                if !after.is_empty() && !after.ends_with('\n') {
                    after.push('\n');
                }
                after.push_str(&new);
                after.push_str(&lines[at..].concat());
                write(
                    Some(text),
                    after,
                    format!("inserted after line {at} of `{shown}`"),
                )
            }
            EditorCommand::UndoEdit => {
                let previous = self.history().get_mut(&path).and_then(Vec::pop);
                match previous {
                    None => fail(format!("no edit of `{shown}` to undo in this session")),
                    Some(None) => fail(format!(
                        "`{shown}` did not exist before it was created; delete it with `rm` in a shell (`terminal` or `bash`)"
                    )),
                    Some(Some(bytes)) => match env.fs.write(&path, bytes, env.links) {
                        Ok(()) => {
                            env.result(true, format!("undid the last edit of `{shown}`"), None)
                        }
                        Err(e) => sandbox_denied(env, &e),
                    },
                }
            }
        }
    }
}
