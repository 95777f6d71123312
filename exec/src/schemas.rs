//! The model-facing definitions of the tools: name, description and JSON schema of the
//! arguments, in the shape chat-completion APIs take (`{name, description, parameters}`).

use serde_json::{Value, json};

/// Every tool this crate offers a model, in the order they are shown.
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

const MODES: [&str; 3] = ["read-only", "workspace-write", "danger-full-access"];

fn escalation() -> [(&'static str, Value); 2] {
    [
        (
            "sandbox_permissions",
            json!({"type": "string", "enum": MODES,
                   "description": "a strictly wider sandbox mode for this one call; a person must approve it"}),
        ),
        (
            "justification",
            json!({"type": "string", "description": "why the wider mode is needed (required with sandbox_permissions)"}),
        ),
    ]
}

fn object(required: &[&str], properties: Vec<(&str, Value)>) -> Value {
    let properties: serde_json::Map<String, Value> = properties
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
    json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false,
    })
}

/// The definition of tool `name`, or `None` for a tool this crate does not have.
pub fn schema(name: &str) -> Option<Value> {
    let string = |d: &str| json!({"type": "string", "description": d});
    let integer = |d: &str| json!({"type": "integer", "minimum": 0, "description": d});
    let (description, parameters) = match name {
        "bash" => (
            "Run one command line with `bash -c` in the sandbox. Output is capped (head and tail kept; the rest spilled to a file the result names).",
            object(
                &["command"],
                [
                    ("command", string("the command line")),
                    ("timeout_secs", integer("wall-clock limit in seconds")),
                    (
                        "workdir",
                        string("working directory, relative to the workspace"),
                    ),
                ]
                .into_iter()
                .chain(escalation())
                .collect(),
            ),
        ),
        "read_file" => (
            "Read a text file, with line numbers.",
            object(
                &["path"],
                vec![
                    (
                        "path",
                        string("the file, relative to the workspace or absolute"),
                    ),
                    ("offset", integer("first line to show (1-based)")),
                    ("limit", integer("most lines to show")),
                ],
            ),
        ),
        "write_file" => (
            "Create or overwrite a file with the given content.",
            object(
                &["path", "content"],
                [
                    ("path", string("the file")),
                    ("content", string("the whole new content")),
                ]
                .into_iter()
                .chain(escalation())
                .collect(),
            ),
        ),
        "edit_file" => (
            "Replace an exact string in a file; it must occur once unless replace_all is set.",
            object(
                &["path", "old_string", "new_string"],
                [
                    ("path", string("the file")),
                    ("old_string", string("the exact text to replace")),
                    ("new_string", string("the replacement")),
                    (
                        "replace_all",
                        json!({"type": "boolean", "description": "replace every occurrence"}),
                    ),
                ]
                .into_iter()
                .chain(escalation())
                .collect(),
            ),
        ),
        "list_dir" => (
            "List a directory (directories end in /).",
            object(&["path"], vec![("path", string("the directory"))]),
        ),
        "glob" => (
            "Find paths matching a glob pattern (*, ?, **/, [...]) below a directory.",
            object(
                &["pattern"],
                vec![
                    ("pattern", string("the pattern, relative to path")),
                    ("path", string("where to search (default: the workspace)")),
                ],
            ),
        ),
        "grep" => (
            "Search file contents with an extended regular expression (GNU grep -rnIE).",
            object(
                &["pattern"],
                vec![
                    ("pattern", string("the regular expression")),
                    ("path", string("where to search (default: the workspace)")),
                    ("glob", string("only files whose name matches this glob")),
                ],
            ),
        ),
        "terminal" => (
            "The session's persistent shell in a pseudo-terminal: input is written to it and the output until the prompt returns (or wait_ms) comes back.",
            object(
                &[],
                vec![
                    (
                        "input",
                        string("text to type (end with a newline to run it)"),
                    ),
                    ("wait_ms", integer("how long to wait for output")),
                    (
                        "close",
                        json!({"type": "boolean", "description": "close the shell and its whole process tree"}),
                    ),
                ],
            ),
        ),
        _ => return None,
    };
    Some(json!({"name": name, "description": description, "parameters": parameters}))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_tool_has_an_object_schema_naming_its_required_arguments() {
        for &name in TOOLS {
            let s = schema(name).unwrap();
            assert_eq!(s["name"], name);
            assert_eq!(s["parameters"]["type"], "object");
            for required in s["parameters"]["required"].as_array().unwrap() {
                let key = required.as_str().unwrap();
                assert!(
                    s["parameters"]["properties"].get(key).is_some(),
                    "{name}: {key}"
                );
            }
        }
        assert_eq!(schema("rm_rf"), None);
    }
}
