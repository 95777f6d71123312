//! `script:FILE`: a scripted model. The file is a YAML list of responses consumed in order, one
//! per model request; each is `{text?, tool_calls?: [{name, arguments}]}`, where `arguments` is
//! a mapping, or a string taken verbatim as the raw JSON the model sent (so malformed arguments
//! can be scripted). Once the list is exhausted the model answers with an empty final text.

use serde::Deserialize;

use super::{Chunk, FinishReason, Model, ModelError, ModelRequest};

/// One scripted answer.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptedResponse {
    #[serde(default)]
    pub text: Option<String>,
    #[serde(default)]
    pub tool_calls: Vec<ScriptedCall>,
}

/// One scripted tool call.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptedCall {
    pub name: String,
    pub arguments: ScriptedArguments,
}

/// Arguments as a mapping (sent as its JSON) or as raw text (sent verbatim).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum ScriptedArguments {
    Raw(String),
    Mapping(serde_json::Map<String, serde_json::Value>),
}

impl ScriptedArguments {
    /// The text the model sends.
    pub fn text(&self) -> String {
        match self {
            Self::Raw(text) => text.clone(),
            Self::Mapping(map) => serde_json::Value::Object(map.clone()).to_string(),
        }
    }
}

/// A model that answers from a script and remembers every request it was sent.
#[derive(Debug, Clone)]
pub struct ScriptModel {
    route: String,
    responses: std::collections::VecDeque<ScriptedResponse>,
    /// Every request, in order, once [`ScriptModel::recorded`] (for tests and replays that
    /// check what the model saw).
    pub requests: std::sync::Arc<std::sync::Mutex<Vec<ModelRequest>>>,
    /// Whether requests are kept in `requests`: not by default, since every request holds
    /// the whole conversation (a long scripted session would keep each step's copy).
    record: bool,
    calls: u64,
}

impl ScriptModel {
    /// A model answering `responses` in order, logged as `route`.
    pub fn new(route: impl Into<String>, responses: Vec<ScriptedResponse>) -> Self {
        Self {
            route: route.into(),
            responses: responses.into(),
            requests: std::sync::Arc::default(),
            record: false,
            calls: 0,
        }
    }

    /// The same model, keeping every request it is sent in `requests`.
    pub fn recorded(mut self) -> Self {
        self.record = true;
        self
    }

    /// Parses a script file's text (`display` names it in errors, with line and column).
    pub fn parse(display: &str, text: &str) -> Result<Vec<ScriptedResponse>, String> {
        let src = bridle_policy::SourceFile::from_text(display, text);
        bridle_policy::parse_document::<Vec<ScriptedResponse>>(&src).map_err(|e| e.to_string())
    }
}

/// Splits `text` into a few pieces, as a streaming model would send it.
fn pieces(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    for c in text.chars() {
        current.push(c);
        if c == ' ' && current.len() >= 8 {
            out.push(std::mem::take(&mut current));
        }
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

impl Model for ScriptModel {
    fn route(&self) -> String {
        self.route.clone()
    }

    fn stream(
        &mut self,
        request: &ModelRequest,
        on_chunk: &mut dyn FnMut(Chunk),
    ) -> Result<(), ModelError> {
        if self.record
            && let Ok(mut requests) = self.requests.lock()
        {
            requests.push(request.clone());
        }
        let response = self.responses.pop_front().unwrap_or(ScriptedResponse {
            text: Some(String::new()),
            tool_calls: Vec::new(),
        });
        for piece in pieces(response.text.as_deref().unwrap_or("")) {
            on_chunk(Chunk::Text(piece));
        }
        for (index, call) in response.tool_calls.iter().enumerate() {
            self.calls += 1;
            let arguments = call.arguments.text();
            // The id and name first, then the arguments in two parts.
            let split = arguments
                .char_indices()
                .nth(arguments.chars().count() / 2)
                .map_or(arguments.len(), |(i, _)| i);
            on_chunk(Chunk::ToolCallDelta {
                index,
                id: Some(format!("call_{}", self.calls)),
                name: Some(call.name.clone()),
                arguments: arguments[..split].to_owned(),
            });
            on_chunk(Chunk::ToolCallDelta {
                index,
                id: None,
                name: None,
                arguments: arguments[split..].to_owned(),
            });
        }
        on_chunk(Chunk::Finish(if response.tool_calls.is_empty() {
            FinishReason::Stop
        } else {
            FinishReason::ToolCalls
        }));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scripts_parse_mappings_and_raw_argument_text() {
        let responses = ScriptModel::parse(
            "task.yaml",
            "- text: looking\n  tool_calls:\n    - name: bash\n      arguments: {command: ls}\n    - name: bash\n      arguments: '{\"command\": '\n- text: done\n",
        )
        .unwrap();
        assert_eq!(responses.len(), 2);
        assert_eq!(
            responses[0].tool_calls[0].arguments.text(),
            r#"{"command":"ls"}"#
        );
        assert_eq!(
            responses[0].tool_calls[1].arguments.text(),
            r#"{"command": "#
        );
    }

    #[test]
    fn a_bad_script_is_an_error_with_file_line_and_column() {
        let err = ScriptModel::parse("task.yaml", "- text: a\n  tools: []\n").unwrap_err();
        assert!(err.contains("task.yaml:2:"), "{err}");
        let err = ScriptModel::parse("task.yaml", "text: a\n").unwrap_err();
        assert!(err.contains("task.yaml:1:"), "{err}");
    }

    #[test]
    fn an_exhausted_script_answers_with_an_empty_final_text() {
        let mut model = ScriptModel::new("script:x", vec![]).recorded();
        let mut chunks = Vec::new();
        let request = ModelRequest {
            system: vec![],
            messages: Vec::new().into(),
            tools: vec![],
        };
        model.stream(&request, &mut |c| chunks.push(c)).unwrap();
        assert_eq!(chunks, vec![Chunk::Finish(FinishReason::Stop)]);
        assert_eq!(model.requests.lock().unwrap().len(), 1);
    }
}
