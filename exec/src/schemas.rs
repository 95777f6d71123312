//! The shipped tools as values, and their model-facing definitions (`{name, description,
//! parameters}`, the shape chat-completion APIs take), generated from each tool's argument
//! type.

use std::sync::Arc;

use crate::pipeline::Registry;
use crate::tool::Tool;

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
    "str_replace_editor",
];

/// The shipped tool `name` (`terminal` with a shell that lives across calls when
/// `persist_terminal`).
pub fn tool(name: &str, persist_terminal: bool) -> Option<Arc<dyn Tool>> {
    use crate::{bash_tool, fs_tools, terminal};
    Some(match name {
        "bash" => Arc::new(bash_tool::Bash),
        "grep" => Arc::new(bash_tool::Grep),
        "read_file" => Arc::new(fs_tools::ReadFile),
        "write_file" => Arc::new(fs_tools::WriteFile),
        "edit_file" => Arc::new(fs_tools::EditFile),
        "list_dir" => Arc::new(fs_tools::ListDir),
        "glob" => Arc::new(fs_tools::Glob),
        "terminal" => Arc::new(terminal::TerminalTool::new(persist_terminal)),
        "str_replace_editor" => Arc::new(crate::editor::Editor::new()),
        _ => return None,
    })
}

/// A registry holding `names` (shipped tools, in that order) and the shipped guard is added by
/// the caller, who knows the session's own directories.
pub fn registry(names: &[&str], persist_terminal: bool) -> Registry {
    let registry = Registry::new();
    for name in names {
        if let Some(tool) = tool(name, persist_terminal) {
            // The names are distinct constants: a duplicate cannot happen.
            let _ = registry.add_tool(None, tool);
        }
    }
    registry
}

/// The definition of tool `name`, or `None` for a tool this crate does not have.
pub fn schema(name: &str) -> Option<serde_json::Value> {
    tool(name, false).map(|t| t.schema())
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
            assert_eq!(
                s["parameters"]["additionalProperties"], false,
                "{name}: {s}"
            );
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
