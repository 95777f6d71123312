//! `openai:MODEL` (OpenAI-compatible chat completions: base URL from `BRIDLE_BASE_URL`, key
//! from `BRIDLE_API_KEY`) and `deepseek:MODEL` (the same protocol at DeepSeek's public base
//! URL, key from `DEEPSEEK_API_KEY`). Streams server-sent events; retries with backoff on rate
//! limits, server errors and timeouts before the first chunk; classifies every failure.

use std::io::BufRead;
use std::time::Duration;

use serde_json::{Value, json};

use super::{Chunk, FinishReason, Message, Model, ModelError, ModelRequest};

/// DeepSeek's public API.
pub const DEEPSEEK_BASE_URL: &str = "https://api.deepseek.com";

/// How failed requests are retried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retry {
    /// Attempts in all (1: no retry).
    pub attempts: u32,
    /// The wait before the first retry; doubled each time, capped at `max_delay`. A
    /// `Retry-After` from the server is honoured up to `max_delay`.
    pub base_delay: Duration,
    pub max_delay: Duration,
    /// How long the server may send nothing before the request counts as timed out.
    pub stall: Duration,
}

impl Default for Retry {
    fn default() -> Self {
        Self {
            attempts: 4,
            base_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(20),
            stall: Duration::from_secs(120),
        }
    }
}

/// A chat-completions model over HTTP.
pub struct OpenAiModel {
    route: String,
    model: String,
    url: String,
    /// The URL as errors show it: no user, password or query (where credentials hide).
    shown_url: String,
    api_key: Option<String>,
    client: reqwest::blocking::Client,
    retry: Retry,
    /// Send each assistant message's reasoning back with the tool calls it led to (DeepSeek
    /// rejects a request that leaves it out).
    replay_reasoning: bool,
}

impl std::fmt::Debug for OpenAiModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiModel")
            .field("route", &self.route)
            .field("url", &self.shown_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<set>"))
            .finish_non_exhaustive()
    }
}

impl OpenAiModel {
    /// A model at `base_url` (the part before `/chat/completions`).
    pub fn new(
        route: impl Into<String>,
        model: impl Into<String>,
        base_url: &str,
        api_key: Option<String>,
        retry: Retry,
    ) -> Result<Self, String> {
        // Errors name the base URL without what may hold a secret (user, password, query).
        let mut parsed = reqwest::Url::parse(base_url).map_err(|e| format!("base URL: {e}"))?;
        if !matches!(parsed.scheme(), "https" | "http") {
            return Err(format!(
                "base URL: scheme {:?}: only http and https are supported",
                parsed.scheme()
            ));
        }
        let path = format!("{}/chat/completions", parsed.path().trim_end_matches('/'));
        parsed.set_path(&path);
        let url = parsed.to_string();
        let host = parsed.host_str().unwrap_or("");
        let loopback = host == "localhost"
            || host
                .trim_start_matches('[')
                .trim_end_matches(']')
                .parse::<std::net::IpAddr>()
                .is_ok_and(|ip| ip.is_loopback());
        let mut builder = reqwest::blocking::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            // Per read: a model that sends nothing for this long has stalled.
            .timeout(retry.stall);
        if loopback {
            builder = builder.no_proxy();
        }
        let client = builder.build().map_err(|e| format!("HTTP client: {e}"))?;
        let mut shown = parsed.clone();
        let _ = shown.set_username("");
        let _ = shown.set_password(None);
        shown.set_query(None);
        Ok(Self {
            route: route.into(),
            model: model.into(),
            shown_url: shown.to_string(),
            url,
            api_key,
            client,
            retry,
            replay_reasoning: false,
        })
    }

    /// Whether assistant messages with tool calls carry their reasoning back to the model
    /// (`reasoning_content`), as DeepSeek's thinking mode requires. On for `deepseek:`.
    #[must_use]
    pub fn replaying_reasoning(mut self, replay: bool) -> Self {
        self.replay_reasoning = replay;
        self
    }

    /// The model a `--model` route names: `openai:MODEL` or `deepseek:MODEL`, configured from
    /// `env` (the process environment, or a test's).
    pub fn from_route(route: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<Self, String> {
        let (provider, model) = route
            .split_once(':')
            .ok_or_else(|| format!("model {route:?}: expected PROVIDER:MODEL"))?;
        if model.is_empty() {
            return Err(format!("model {route:?}: the model name is empty"));
        }
        let (base_url, key) = match provider {
            "openai" => (
                env("BRIDLE_BASE_URL").unwrap_or_else(|| "https://api.openai.com/v1".to_owned()),
                env("BRIDLE_API_KEY"),
            ),
            "deepseek" => {
                let model = Self::new(
                    route,
                    model,
                    DEEPSEEK_BASE_URL,
                    env("DEEPSEEK_API_KEY"),
                    Retry::default(),
                )?;
                return Ok(model.replaying_reasoning(true));
            }
            other => {
                return Err(format!(
                    "model {route:?}: unknown provider {other:?} (openai, deepseek or script)"
                ));
            }
        };
        Self::new(route, model, &base_url, key, Retry::default())
    }

    /// The JSON body of a streaming chat-completions request.
    pub fn body(&self, request: &ModelRequest) -> Value {
        let mut sections = request.system.clone();
        sections.sort_by_key(|s| s.order);
        let system: Vec<&str> = sections.iter().map(|s| s.text.as_str()).collect();
        let mut messages = Vec::new();
        if !system.is_empty() {
            messages.push(json!({"role": "system", "content": system.join("\n\n")}));
        }
        for message in request.messages.iter() {
            messages.push(match message {
                Message::User { text } => json!({"role": "user", "content": text}),
                Message::Assistant {
                    text, tool_calls, ..
                } if tool_calls.is_empty() => {
                    json!({"role": "assistant", "content": text})
                }
                Message::Assistant {
                    text,
                    tool_calls,
                    reasoning,
                } => {
                    let mut message = json!({
                        "role": "assistant",
                        "content": if text.is_empty() { Value::Null } else { json!(text) },
                        "tool_calls": tool_calls.iter().map(|c| json!({
                            "id": c.call_id,
                            "type": "function",
                            "function": {"name": c.name, "arguments": c.arguments},
                        })).collect::<Vec<_>>(),
                    });
                    if self.replay_reasoning && !reasoning.is_empty() {
                        message["reasoning_content"] = json!(reasoning);
                    }
                    message
                }
                Message::Tool { call_id, content } => {
                    json!({"role": "tool", "tool_call_id": call_id, "content": content})
                }
            });
        }
        let mut body = json!({
            "model": self.model,
            "stream": true,
            "stream_options": {"include_usage": true},
            "messages": messages,
        });
        if !request.tools.is_empty() {
            body["tools"] = request
                .tools
                .iter()
                .map(|t| json!({"type": "function", "function": t}))
                .collect();
        }
        body
    }

    fn error(&self, class: fn(String, String) -> ModelError, detail: String) -> ModelError {
        class(self.route.clone(), detail)
    }

    /// One attempt: the response, or the failure and how long the server asked us to wait.
    fn send(
        &self,
        body: &Value,
    ) -> Result<reqwest::blocking::Response, (ModelError, Option<Duration>)> {
        let mut request = self
            .client
            .post(&self.url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header(reqwest::header::ACCEPT, "text/event-stream")
            .body(body.to_string());
        if let Some(key) = &self.api_key {
            request = request.bearer_auth(key);
        }
        let response = request.send().map_err(|e| {
            // reqwest's message would repeat the URL, query included.
            let timed_out = e.is_timeout();
            let detail = e.without_url().to_string();
            let error = if timed_out {
                self.error(
                    |route, detail| ModelError::Timeout { route, detail },
                    detail,
                )
            } else {
                self.error(
                    |route, detail| ModelError::Server { route, detail },
                    format!("cannot reach {}: {detail}", self.shown_url),
                )
            };
            (error, None)
        })?;
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        let wait = response
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| super::retry_after::retry_after(v, std::time::SystemTime::now()));
        let text = response.text().unwrap_or_default();
        let detail = format!("HTTP {}: {}", status.as_u16(), brief(&text));
        let lower = text.to_lowercase();
        let error = match status.as_u16() {
            401 | 403 => self.error(|route, detail| ModelError::Auth { route, detail }, detail),
            429 => self.error(
                |route, detail| ModelError::RateLimit { route, detail },
                detail,
            ),
            408 => self.error(
                |route, detail| ModelError::Timeout { route, detail },
                detail,
            ),
            400 | 413
                if lower.contains("context_length")
                    || lower.contains("context length")
                    || lower.contains("maximum context")
                    || lower.contains("too many tokens") =>
            {
                self.error(
                    |route, detail| ModelError::ContextWindow { route, detail },
                    detail,
                )
            }
            500..=599 => self.error(|route, detail| ModelError::Server { route, detail }, detail),
            _ => self.error(
                |route, detail| ModelError::Protocol { route, detail },
                detail,
            ),
        };
        Err((error, wait))
    }
}

/// At most 300 characters of an error body, on one line.
fn brief(text: &str) -> String {
    let one_line: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut out: String = one_line.chars().take(300).collect();
    if out.len() < one_line.len() {
        out.push('…');
    }
    out
}

fn retryable(error: &ModelError) -> bool {
    matches!(
        error,
        ModelError::RateLimit { .. } | ModelError::Server { .. } | ModelError::Timeout { .. }
    )
}

impl Model for OpenAiModel {
    fn route(&self) -> String {
        self.route.clone()
    }

    fn stream(
        &mut self,
        request: &ModelRequest,
        on_chunk: &mut dyn FnMut(Chunk),
    ) -> Result<(), ModelError> {
        let body = self.body(request);
        let mut delay = self.retry.base_delay;
        let mut attempt = 1;
        loop {
            // A failure is retried only while nothing of the answer reached the loop.
            let (error, wait) = match self.send(&body) {
                Ok(response) => match read_events(&self.route, response, on_chunk) {
                    Ok(()) => return Ok(()),
                    Err((error, true)) => return Err(error),
                    Err((error, false)) => (error, None),
                },
                Err(failed) => failed,
            };
            if !retryable(&error) || attempt >= self.retry.attempts {
                return Err(error);
            }
            let pause = wait.unwrap_or(delay).min(self.retry.max_delay);
            tracing::warn!("{error}; retrying in {pause:?} (attempt {attempt})");
            std::thread::sleep(pause);
            delay = (delay * 2).min(self.retry.max_delay);
            attempt += 1;
        }
    }
}

/// Whether an I/O error while reading the body is reqwest's read timeout.
fn is_timeout(e: &std::io::Error) -> bool {
    if e.kind() == std::io::ErrorKind::TimedOut {
        return true;
    }
    let mut source: Option<&(dyn std::error::Error + 'static)> = e.get_ref().map(|r| r as _);
    while let Some(err) = source {
        if let Some(r) = err.downcast_ref::<reqwest::Error>()
            && r.is_timeout()
        {
            return true;
        }
        if err
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::TimedOut)
        {
            return true;
        }
        source = err.source();
    }
    false
}

/// The lines of an event stream: ended by LF, CRLF or a lone CR, as the SSE format allows.
fn split_lines(raw: &[u8]) -> impl Iterator<Item = String> + '_ {
    let raw = raw.strip_suffix(b"\n").unwrap_or(raw);
    let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
    raw.split(|&b| b == b'\r')
        .map(|part| String::from_utf8_lossy(part).into_owned())
}

/// Reads the server-sent events of a streaming response into chunks. On failure, also says
/// whether any chunk already reached `on_chunk` (then the request cannot be retried).
fn read_events(
    route: &str,
    response: reqwest::blocking::Response,
    on_chunk: &mut dyn FnMut(Chunk),
) -> Result<(), (ModelError, bool)> {
    let protocol = |detail: String| ModelError::Protocol {
        route: route.to_owned(),
        detail,
    };
    let mut state = StreamState::default();
    let mut data = String::new();
    let mut reader = std::io::BufReader::new(response);
    let mut raw = Vec::new();
    // A connection that closes before the first byte of the answer (a server that dropped an
    // idle pooled connection, a proxy restarting) failed in transit: retried like a 5xx.
    let closed_early = |detail: String| ModelError::Server {
        route: route.to_owned(),
        detail: format!("the connection closed before the answer began: {detail}"),
    };
    let mut any_byte = false;
    loop {
        raw.clear();
        let read = reader.read_until(b'\n', &mut raw);
        any_byte |= !raw.is_empty();
        let eof = match read {
            Ok(0) if !any_byte => {
                return Err((closed_early("no data".to_owned()), false));
            }
            Ok(0) => true,
            Ok(_) => false,
            Err(e) => {
                let error = if is_timeout(&e) {
                    ModelError::Timeout {
                        route: route.to_owned(),
                        detail: "the stream stalled".to_owned(),
                    }
                } else if !any_byte {
                    closed_early(e.to_string())
                } else {
                    protocol(format!("reading the stream: {e}"))
                };
                return Err((error, state.delivered));
            }
        };
        // At the end, a pending event counts as ended (some servers omit the blank line).
        let lines: Vec<String> = if eof {
            vec![String::new()]
        } else {
            split_lines(&raw).collect()
        };
        for line in lines {
            if let Some(rest) = line.strip_prefix("data:") {
                if !data.is_empty() {
                    data.push('\n');
                }
                data.push_str(rest.strip_prefix(' ').unwrap_or(rest));
                continue;
            }
            if !line.is_empty() {
                // `event:`, `id:`, `retry:` and comments carry nothing for us.
                continue;
            }
            let event = std::mem::take(&mut data);
            if event.is_empty() {
                continue;
            }
            if event == "[DONE]" {
                if !state.finished {
                    on_chunk(Chunk::Finish(FinishReason::Stop));
                }
                return Ok(());
            }
            let value: Value = serde_json::from_str(&event).map_err(|e| {
                (
                    protocol(format!(
                        "a stream event is not JSON ({e}): {}",
                        brief(&event)
                    )),
                    state.delivered,
                )
            })?;
            if let Some(error) = value.get("error") {
                let error = ModelError::Server {
                    route: route.to_owned(),
                    detail: format!("error in the stream: {}", brief(&error.to_string())),
                };
                return Err((error, state.delivered));
            }
            state.take(&value, on_chunk);
        }
        if eof {
            break;
        }
    }
    if state.finished {
        Ok(())
    } else {
        Err((
            protocol("the stream ended before the answer did".to_owned()),
            state.delivered,
        ))
    }
}

/// What a stream has carried so far.
#[derive(Debug, Default)]
struct StreamState {
    finished: bool,
    delivered: bool,
    /// The model id the stream last reported.
    model: Option<String>,
    /// The next free tool-call index, and the call the last delta without an index went to.
    next_index: usize,
    current: Option<(usize, Option<String>)>,
}

impl StreamState {
    /// The index of a tool-call delta: its own, or (when the server sends none) the current
    /// call's, unless the delta starts a call with a new id.
    fn index_of(&mut self, explicit: Option<usize>, id: Option<&str>) -> usize {
        let index = match (explicit, &self.current) {
            (Some(i), _) => i,
            (None, Some((i, current_id))) if id.is_none() || id == current_id.as_deref() => *i,
            (None, _) => self.next_index,
        };
        self.next_index = self.next_index.max(index + 1);
        let keep = self
            .current
            .as_ref()
            .filter(|(i, _)| *i == index)
            .and_then(|(_, id)| id.clone());
        self.current = Some((index, id.map(str::to_owned).or(keep)));
        index
    }

    /// Emits the chunks in one `chat.completion.chunk`.
    fn take(&mut self, value: &Value, emit: &mut dyn FnMut(Chunk)) {
        if let Some(model) = value["model"].as_str().filter(|m| !m.is_empty())
            && self.model.as_deref() != Some(model)
        {
            // Not content: a retry after it sends it again, and the later one counts.
            self.model = Some(model.to_owned());
            emit(Chunk::Model(model.to_owned()));
        }
        let mut send = |c: Chunk, state: &mut Self| {
            state.delivered = true;
            emit(c);
        };
        if let Some(choice) = value["choices"].get(0) {
            let delta = &choice["delta"];
            if let Some(text) = delta["reasoning_content"]
                .as_str()
                .filter(|t| !t.is_empty())
            {
                send(Chunk::Reasoning(text.to_owned()), self);
            }
            if let Some(text) = delta["content"].as_str().filter(|t| !t.is_empty()) {
                send(Chunk::Text(text.to_owned()), self);
            }
            if let Some(calls) = delta["tool_calls"].as_array() {
                for call in calls {
                    let explicit = call["index"].as_u64().and_then(|i| usize::try_from(i).ok());
                    let id = call["id"].as_str();
                    let index = self.index_of(explicit, id);
                    send(
                        Chunk::ToolCallDelta {
                            index,
                            id: id.map(str::to_owned),
                            name: call["function"]["name"].as_str().map(str::to_owned),
                            arguments: call["function"]["arguments"]
                                .as_str()
                                .unwrap_or("")
                                .to_owned(),
                        },
                        self,
                    );
                }
            }
            if let Some(reason) = choice["finish_reason"].as_str() {
                self.finished = true;
                send(
                    Chunk::Finish(match reason {
                        "stop" => FinishReason::Stop,
                        "tool_calls" | "function_call" => FinishReason::ToolCalls,
                        "length" => FinishReason::Length,
                        other => FinishReason::Other(other.to_owned()),
                    }),
                    self,
                );
            }
        }
        if let Some(usage) = value.get("usage").filter(|u| u.is_object()) {
            send(
                Chunk::Usage {
                    input: usage["prompt_tokens"].as_u64().unwrap_or(0),
                    output: usage["completion_tokens"].as_u64().unwrap_or(0),
                },
                self,
            );
        }
    }
}
