//! A call in a few words, for progress lines, chat and ACP titles: read from the shape of its
//! arguments (the command it runs, the path or pattern it names), never from the tool's name.

/// The arguments as JSON when the model sent valid JSON, else the raw text as a string.
pub fn parsed_arguments(arguments: &str) -> serde_json::Value {
    serde_json::from_str(arguments).unwrap_or_else(|_| serde_json::Value::String(arguments.into()))
}

/// Argument keys that say what a call does, in the order they are looked for.
const TELLING_KEYS: &[&str] = &["command", "path", "pattern", "input", "plan"];

/// `name` and what its arguments say it does, on one line of at most about `max` characters:
/// `bash: ls -la`, `read_file: src/main.rs`, `str_replace_editor: view src/lib.rs`. Arguments
/// that are not a JSON object are shown raw. Control characters are left to the caller's
/// escaping (`printable`).
pub fn call_summary(name: &str, arguments: &str, max: usize) -> String {
    let args = parsed_arguments(arguments);
    let detail = match &args {
        serde_json::Value::Object(map) => {
            let mut parts: Vec<String> = Vec::new();
            for key in TELLING_KEYS {
                if let Some(serde_json::Value::String(text)) = map.get(*key) {
                    parts.push(text.clone());
                }
                // A command word (`view`) with a path says more than either alone.
                if parts.len() == 2 || (parts.len() == 1 && *key != "command") {
                    break;
                }
            }
            // An argument vector (an exec the supervisor asks about) reads as its command,
            // the program that runs first (its `argv[0]` is whatever the caller chose).
            if parts.is_empty()
                && let Some(serde_json::Value::Array(argv)) = map.get("argv")
            {
                let mut words: Vec<&str> = argv.iter().filter_map(|w| w.as_str()).collect();
                if let Some(program) = map.get("program").and_then(|p| p.as_str())
                    && !program.is_empty()
                    && !words.is_empty()
                {
                    words[0] = program;
                }
                if words.len() == argv.len() {
                    parts.push(words.join(" "));
                }
            }
            if parts.is_empty() {
                serde_json::to_string(&args).unwrap_or_default()
            } else {
                parts.join(" ")
            }
        }
        serde_json::Value::String(raw) => raw.clone(),
        other => other.to_string(),
    };
    let detail = detail.split('\n').next().unwrap_or("").to_owned();
    let cut = cut(&detail, max.saturating_sub(name.len() + 2).max(8));
    if cut.is_empty() {
        name.to_owned()
    } else {
        format!("{name}: {cut}")
    }
}

/// `text` cut to `max` characters, with `…` when something was left out.
pub(crate) fn cut(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let mut out: String = text.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_exec_question_is_summarised_by_its_command_line() {
        assert_eq!(
            call_summary(
                "exec",
                r#"{"program":"/usr/bin/git","argv":["git","push","origin","main"],"pid":7}"#,
                80
            ),
            "exec: /usr/bin/git push origin main"
        );
    }

    #[test]
    fn a_call_is_summarised_by_what_its_arguments_do() {
        assert_eq!(
            call_summary("bash", r#"{"command":"ls -la\nrm x"}"#, 80),
            "bash: ls -la"
        );
        assert_eq!(
            call_summary("read_file", r#"{"path":"src/main.rs","limit":3}"#, 80),
            "read_file: src/main.rs"
        );
        assert_eq!(
            call_summary(
                "str_replace_editor",
                r#"{"command":"view","path":"src/lib.rs"}"#,
                80
            ),
            "str_replace_editor: view src/lib.rs"
        );
        assert_eq!(
            call_summary("glob", r#"{"pattern":"**/*.rs"}"#, 80),
            "glob: **/*.rs"
        );
        assert_eq!(call_summary("x", "{not json", 80), "x: {not json");
        assert_eq!(call_summary("x", r#"{"n":1}"#, 80), r#"x: {"n":1}"#);
    }

    #[test]
    fn a_long_summary_is_cut_with_a_marker() {
        let long = format!(r#"{{"command":"{}"}}"#, "a".repeat(200));
        let s = call_summary("bash", &long, 40);
        assert!(s.chars().count() <= 40, "{s}");
        assert!(s.ends_with('…'), "{s}");
    }
}
