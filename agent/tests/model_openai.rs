//! The OpenAI-compatible adapter against a real HTTP server on loopback that speaks the
//! protocol: streaming server-sent events, tool-call deltas, errors, retries.

#![cfg(test)]

use std::net::TcpListener;
use std::time::Duration;

use bridle_agent::log::{PromptSection, ToolCall};
use bridle_agent::model::openai::{OpenAiModel, Retry};
use bridle_agent::model::{Chunk, FinishReason, Message, Model, ModelError, ModelRequest};
use pretty_assertions::assert_eq;

#[path = "support/http_server.rs"]
mod http_server;

use http_server::{Reply, hang_up, raw_sse, serve, sse, status};

fn quick_retry() -> Retry {
    Retry {
        attempts: 3,
        base_delay: Duration::from_millis(10),
        max_delay: Duration::from_millis(50),
        stall: Duration::from_millis(400),
    }
}

fn model(url: &str) -> OpenAiModel {
    OpenAiModel::new(
        "openai:test-model",
        "test-model",
        url,
        Some("sk-test".into()),
        quick_retry(),
    )
    .unwrap()
}

fn request() -> ModelRequest {
    ModelRequest {
        system: vec![
            PromptSection {
                name: "later".into(),
                order: 50,
                text: "Plan first.".into(),
            },
            PromptSection {
                name: "base".into(),
                order: 10,
                text: "You are careful.".into(),
            },
        ],
        messages: vec![
            Message::User {
                text: "list files".into(),
            },
            Message::Assistant {
                text: String::new(),
                tool_calls: vec![ToolCall {
                    call_id: "call_1".into(),
                    name: "bash".into(),
                    arguments: r#"{"command":"ls"}"#.into(),
                }],
                reasoning: "I should look first.".into(),
            },
            Message::Tool {
                call_id: "call_1".into(),
                content: "README.md".into(),
            },
        ]
        .into(),
        tools: vec![serde_json::json!({
            "name": "bash",
            "description": "run a command",
            "parameters": {"type": "object"},
        })],
    }
}

fn collect(model: &mut OpenAiModel) -> Result<Vec<Chunk>, ModelError> {
    let mut chunks = Vec::new();
    model.stream(&request(), &mut |c| chunks.push(c))?;
    Ok(chunks)
}

fn delta(d: serde_json::Value, finish: Option<&str>) -> serde_json::Value {
    serde_json::json!({"choices": [{"index": 0, "delta": d, "finish_reason": finish}]})
}

#[test]
fn a_streamed_answer_with_tool_calls_arrives_as_chunks() {
    let (url, received) = serve(vec![sse(&[
        delta(
            serde_json::json!({"role": "assistant", "reasoning_content": "hmm"}),
            None,
        ),
        delta(serde_json::json!({"content": "Let me "}), None),
        delta(serde_json::json!({"content": "look."}), None),
        delta(
            serde_json::json!({"tool_calls": [{"index": 0, "id": "call_9", "type": "function",
                "function": {"name": "bash", "arguments": "{\"comm"}}]}),
            None,
        ),
        delta(
            serde_json::json!({"tool_calls": [{"index": 0, "function": {"arguments": "and\":\"ls\"}"}}]}),
            None,
        ),
        delta(serde_json::json!({}), Some("tool_calls")),
        serde_json::json!({"choices": [], "usage": {"prompt_tokens": 12, "completion_tokens": 7}}),
    ])]);
    let chunks = collect(&mut model(&url)).unwrap();
    assert_eq!(
        chunks,
        vec![
            Chunk::Reasoning("hmm".into()),
            Chunk::Text("Let me ".into()),
            Chunk::Text("look.".into()),
            Chunk::ToolCallDelta {
                index: 0,
                id: Some("call_9".into()),
                name: Some("bash".into()),
                arguments: "{\"comm".into()
            },
            Chunk::ToolCallDelta {
                index: 0,
                id: None,
                name: None,
                arguments: "and\":\"ls\"}".into()
            },
            Chunk::Finish(FinishReason::ToolCalls),
            Chunk::Usage {
                input: 12,
                output: 7
            },
        ]
    );
    let got = received.lock().unwrap()[0].clone();
    assert_eq!(got.request_line, "POST /v1/chat/completions HTTP/1.1");
    assert!(
        got.headers
            .contains(&("authorization".into(), "Bearer sk-test".into()))
    );
    let body = got.body;
    assert_eq!(body["model"], "test-model");
    assert_eq!(body["stream"], true);
    // Sections in render order, joined into one system message.
    assert_eq!(body["messages"][0]["role"], "system");
    assert_eq!(
        body["messages"][0]["content"],
        "You are careful.\n\nPlan first."
    );
    assert_eq!(body["messages"][2]["tool_calls"][0]["id"], "call_1");
    assert_eq!(
        body["messages"][2]["tool_calls"][0]["function"]["arguments"],
        r#"{"command":"ls"}"#
    );
    // An `openai:` model does not send reasoning back.
    assert_eq!(body["messages"][2].get("reasoning_content"), None);
    assert_eq!(body["messages"][3]["role"], "tool");
    assert_eq!(body["messages"][3]["tool_call_id"], "call_1");
    assert_eq!(body["tools"][0]["type"], "function");
    assert_eq!(body["tools"][0]["function"]["name"], "bash");
}

#[test]
fn rate_limits_and_server_errors_are_retried_then_the_answer_streams() {
    let (url, received) = serve(vec![
        Reply {
            status: 429,
            headers: vec![("Retry-After", "0".into())],
            body: r#"{"error":{"message":"slow down"}}"#.into(),
            stall: Duration::ZERO,
        },
        status(503, "overloaded"),
        sse(&[delta(serde_json::json!({"content": "ok"}), Some("stop"))]),
    ]);
    let chunks = collect(&mut model(&url)).unwrap();
    assert_eq!(
        chunks,
        vec![Chunk::Text("ok".into()), Chunk::Finish(FinishReason::Stop)]
    );
    assert_eq!(received.lock().unwrap().len(), 3);
}

#[test]
fn failures_are_classified_and_only_transient_ones_retried() {
    let (url, received) = serve(vec![status(401, r#"{"error":"bad key"}"#)]);
    let err = collect(&mut model(&url)).unwrap_err();
    assert!(matches!(err, ModelError::Auth { .. }), "{err}");
    assert!(err.to_string().contains("HTTP 401"), "{err}");
    assert_eq!(received.lock().unwrap().len(), 1, "no retry on auth");

    let (url, _) = serve(vec![status(
        400,
        r#"{"error":{"code":"context_length_exceeded","message":"This model's maximum context length is 8192 tokens"}}"#,
    )]);
    let err = collect(&mut model(&url)).unwrap_err();
    assert!(matches!(err, ModelError::ContextWindow { .. }), "{err}");

    let (url, received) = serve(vec![status(500, "a"), status(502, "b"), status(500, "c")]);
    let err = collect(&mut model(&url)).unwrap_err();
    assert!(matches!(err, ModelError::Server { .. }), "{err}");
    assert_eq!(received.lock().unwrap().len(), 3, "attempts in all");

    let (url, _) = serve(vec![status(404, "no such route")]);
    let err = collect(&mut model(&url)).unwrap_err();
    assert!(matches!(err, ModelError::Protocol { .. }), "{err}");
}

#[test]
fn a_broken_stream_is_a_protocol_error_not_an_answer() {
    let (url, _) = serve(vec![raw_sse(
        "data: {\"choices\":[{\"delta\":{\"content\":\"par\"}}]}\n\ndata: {not json\n\n",
    )]);
    let err = collect(&mut model(&url)).unwrap_err();
    assert!(matches!(err, ModelError::Protocol { .. }), "{err}");
    // A stream cut before any finish reason or [DONE].
    let (url, _) = serve(vec![raw_sse(
        "data: {\"choices\":[{\"delta\":{\"content\":\"par\"}}]}\n\n",
    )]);
    let err = collect(&mut model(&url)).unwrap_err();
    assert!(err.to_string().contains("ended before"), "{err}");
    // A cut answer is reported as such.
    let (url, _) = serve(vec![sse(&[delta(
        serde_json::json!({"content": "half"}),
        Some("length"),
    )])]);
    let chunks = collect(&mut model(&url)).unwrap();
    assert_eq!(chunks.last(), Some(&Chunk::Finish(FinishReason::Length)));
}

#[test]
fn an_unreachable_server_is_retried_then_reported_with_its_address() {
    // A port nothing listens on.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    drop(listener);
    let err = collect(&mut model(&url)).unwrap_err();
    assert!(matches!(err, ModelError::Server { .. }), "{err}");
    assert!(err.to_string().contains("cannot reach"), "{err}");
}

#[test]
fn routes_pick_the_provider_base_url_and_key() {
    let env = |k: &str| match k {
        "BRIDLE_BASE_URL" => Some("http://127.0.0.1:9/v1".to_owned()),
        "BRIDLE_API_KEY" => Some("k1".to_owned()),
        "DEEPSEEK_API_KEY" => Some("k2".to_owned()),
        _ => None,
    };
    let m = OpenAiModel::from_route("openai:gpt-test", &env).unwrap();
    assert_eq!(m.route(), "openai:gpt-test");
    assert_eq!(m.body(&request())["model"], "gpt-test");
    OpenAiModel::from_route("deepseek:deepseek-chat", &env).unwrap();
    for bad in ["openai:", "gpt", "anthropic:x"] {
        let err = OpenAiModel::from_route(bad, &env).unwrap_err();
        assert!(err.contains(bad), "{err}");
    }
    let err = OpenAiModel::from_route("openai:x", &|k| {
        (k == "BRIDLE_BASE_URL").then(|| "ftp://example.com".to_owned())
    })
    .unwrap_err();
    assert!(err.contains("only http and https"), "{err}");
}

#[test]
fn streams_ending_without_a_blank_line_or_with_bare_cr_are_read_whole() {
    let (url, _) = serve(vec![raw_sse(
        "data: {\"choices\":[{\"delta\":{\"content\":\"ok\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n",
    )]);
    let chunks = collect(&mut model(&url)).unwrap();
    assert_eq!(
        chunks,
        vec![Chunk::Text("ok".into()), Chunk::Finish(FinishReason::Stop)]
    );
    let (url, _) = serve(vec![raw_sse(
        ": comment\rdata: {\"choices\":[{\"delta\":{\"content\":\"cr\"},\"finish_reason\":\"stop\"}]}\r\rdata: [DONE]\r\r",
    )]);
    let chunks = collect(&mut model(&url)).unwrap();
    assert_eq!(
        chunks,
        vec![Chunk::Text("cr".into()), Chunk::Finish(FinishReason::Stop)]
    );
}

#[test]
fn calls_sent_without_an_index_stay_separate() {
    let (url, _) = serve(vec![sse(&[
        delta(
            serde_json::json!({"tool_calls": [{"id": "a", "function": {"name": "list_dir", "arguments": "{\"path\":"}}]}),
            None,
        ),
        delta(
            serde_json::json!({"tool_calls": [{"function": {"arguments": "\"x\"}"}}]}),
            None,
        ),
        delta(
            serde_json::json!({"tool_calls": [{"id": "b", "function": {"name": "list_dir", "arguments": "{\"path\":\".\"}"}}]}),
            Some("tool_calls"),
        ),
    ])]);
    let chunks = collect(&mut model(&url)).unwrap();
    let indexes: Vec<usize> = chunks
        .iter()
        .filter_map(|c| match c {
            Chunk::ToolCallDelta { index, .. } => Some(*index),
            _ => None,
        })
        .collect();
    assert_eq!(indexes, vec![0, 0, 1]);
}

#[test]
fn a_stalled_stream_is_a_timeout_and_is_retried_before_any_output() {
    let (url, received) = serve(vec![
        Reply {
            stall: Duration::from_secs(3),
            ..sse(&[delta(serde_json::json!({"content": "late"}), Some("stop"))])
        },
        sse(&[delta(
            serde_json::json!({"content": "on time"}),
            Some("stop"),
        )]),
    ]);
    let chunks = collect(&mut model(&url)).unwrap();
    assert_eq!(chunks[0], Chunk::Text("on time".into()));
    assert_eq!(received.lock().unwrap().len(), 2);
    let (url, _) = serve(vec![Reply {
        stall: Duration::from_secs(3),
        ..sse(&[delta(serde_json::json!({"content": "late"}), Some("stop"))])
    }]);
    let err = OpenAiModel::new(
        "openai:m",
        "m",
        &url,
        None,
        Retry {
            attempts: 1,
            ..quick_retry()
        },
    )
    .unwrap()
    .stream(&request(), &mut |_| {})
    .unwrap_err();
    assert!(matches!(err, ModelError::Timeout { .. }), "{err}");
}

#[test]
fn credentials_in_the_base_url_never_reach_an_error() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    let url = format!("http://user:hunter2@127.0.0.1:{port}/v1?key=sk-secret");
    let mut m =
        OpenAiModel::new("openai:m", "m", &url, Some("sk-live".into()), quick_retry()).unwrap();
    let err = m.stream(&request(), &mut |_| {}).unwrap_err().to_string();
    for secret in ["hunter2", "sk-secret", "sk-live"] {
        assert!(!err.contains(secret), "{err}");
    }
    assert!(!format!("{m:?}").contains("sk-live"));
}

#[test]
fn deepseek_sends_the_reasoning_back_with_the_calls_it_led_to() {
    let env = |k: &str| (k == "DEEPSEEK_API_KEY").then(|| "k".to_owned());
    let deepseek = OpenAiModel::from_route("deepseek:deepseek-chat", &env).unwrap();
    let mut asked = request();
    std::sync::Arc::make_mut(&mut asked.messages).push(Message::Assistant {
        text: "All listed.".into(),
        tool_calls: vec![],
        reasoning: "Nothing more to do.".into(),
    });
    let body = deepseek.body(&asked);
    let messages = body["messages"].as_array().unwrap();
    assert_eq!(messages[2]["role"], "assistant");
    assert_eq!(messages[2]["reasoning_content"], "I should look first.");
    // An answer without calls does not need it (DeepSeek ignores it there).
    assert_eq!(messages[4]["role"], "assistant");
    assert_eq!(messages[4].get("reasoning_content"), None);
}

#[test]
fn the_model_id_the_provider_reports_arrives_once_as_a_chunk() {
    let with_model = |mut v: serde_json::Value, m: &str| {
        v["model"] = serde_json::json!(m);
        v
    };
    let (url, _) = serve(vec![sse(&[
        with_model(
            delta(serde_json::json!({"content": "a"}), None),
            "gpt-x-2025",
        ),
        with_model(
            delta(serde_json::json!({"content": "b"}), None),
            "gpt-x-2025",
        ),
        with_model(delta(serde_json::json!({}), Some("stop")), "gpt-x-2025"),
    ])]);
    let chunks = collect(&mut model(&url)).unwrap();
    assert_eq!(
        chunks,
        vec![
            Chunk::Model("gpt-x-2025".into()),
            Chunk::Text("a".into()),
            Chunk::Text("b".into()),
            Chunk::Finish(FinishReason::Stop),
        ]
    );
}

#[test]
fn a_connection_closed_before_the_first_byte_is_retried() {
    // No response at all, then headers with no body: both failed before the answer began.
    let empty = Reply {
        body: String::new(),
        ..sse(&[])
    };
    let (url, received) = serve(vec![
        hang_up(),
        empty,
        sse(&[delta(serde_json::json!({"content": "ok"}), Some("stop"))]),
    ]);
    let chunks = collect(&mut model(&url)).unwrap();
    assert_eq!(
        chunks,
        vec![Chunk::Text("ok".into()), Chunk::Finish(FinishReason::Stop)]
    );
    assert_eq!(received.lock().unwrap().len(), 3);
    // Within the budget: three attempts, then the failure is reported as one in transit.
    let (url, received) = serve(vec![hang_up(), hang_up(), hang_up(), hang_up()]);
    let err = collect(&mut model(&url)).unwrap_err();
    assert!(matches!(err, ModelError::Server { .. }), "{err}");
    assert_eq!(received.lock().unwrap().len(), 3);
}

/// `at` as an IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`).
fn imf_fixdate(at: std::time::SystemTime) -> String {
    let secs = at.duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    // The date and time from the log's RFC 3339 clock, the weekday from the day count
    // (1970-01-01 was a Thursday).
    let stamp = bridle_agent::log::rfc3339(Duration::from_secs(secs));
    let (year, month, day) = (&stamp[0..4], &stamp[5..7], &stamp[8..10]);
    let days = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    let months = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let weekday = days[usize::try_from(secs / 86_400 % 7).unwrap()];
    let month = months[month.parse::<usize>().unwrap() - 1];
    format!("{weekday}, {day} {month} {year} {} GMT", &stamp[11..19])
}

/// How long a request takes whose first answer is a 429 with `Retry-After: after` (then the
/// answer), with retries waiting up to 5 s.
fn waited_for(after: String) -> Duration {
    let retry = Retry {
        max_delay: Duration::from_secs(5),
        ..quick_retry()
    };
    let slow = Reply {
        status: 429,
        headers: vec![("Retry-After", after)],
        body: "{}".into(),
        stall: Duration::ZERO,
    };
    let (url, received) = serve(vec![
        slow,
        sse(&[delta(serde_json::json!({"content": "ok"}), Some("stop"))]),
    ]);
    let mut m = OpenAiModel::new("openai:m", "m", &url, None, retry).unwrap();
    let started = std::time::Instant::now();
    m.stream(&request(), &mut |_| {}).unwrap();
    assert_eq!(received.lock().unwrap().len(), 2);
    started.elapsed()
}

#[test]
fn a_retry_after_date_is_honoured() {
    let now = std::time::SystemTime::now();
    // Dates have whole seconds: at least two of the three remain, less the time the test's
    // server takes to start (a loaded machine has measured 170 ms); without the header the
    // retry would come after milliseconds.
    let waited = waited_for(imf_fixdate(now + Duration::from_secs(3)));
    assert!(waited >= Duration::from_millis(1500), "{waited:?}");
    // A date already past asks for no wait.
    let waited = waited_for(imf_fixdate(now - Duration::from_secs(60)));
    assert!(waited < Duration::from_secs(1), "{waited:?}");
}
