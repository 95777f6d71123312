//! The stdio transport of `bridle acp`: the SDK's line transport over stdin and stdout, with
//! a check of each request's envelope and parameters before the SDK sees it.
//!
//! Why: the SDK answers a request whose envelope it cannot read (`"jsonrpc":"1.0"`, `params`
//! that are not an object) with `-32600` and `"id": null`, although the id is right there, and
//! a request whose parameters do not fit the method gets `-32602` only after several warning
//! lines on stderr (one of them kilobytes of nested escapes, one naming `-32603`). JSON-RPC 2.0
//! wants the request's id whenever it can be read, and `-32602` for bad parameters: this check
//! answers those requests itself, with one short line on stderr, and passes every other line
//! on unchanged (notifications, responses, lines that are not JSON, unknown methods: the SDK
//! answers those as the protocol says).

use std::io::{BufRead, Write};

use agent_client_protocol::v1::schema::{
    InitializeRequest, LoadSessionRequest, NewSessionRequest, PromptRequest,
    SetSessionConfigOptionRequest, SetSessionModeRequest,
};
use serde_json::{Value, json};

use crate::session_wiring::say;

/// The SDK's side of [`stdio`].
pub(super) type Transport = agent_client_protocol::Lines<
    futures::sink::Unfold<
        std::sync::mpsc::Sender<String>,
        fn(std::sync::mpsc::Sender<String>, String) -> Sent,
        Sent,
    >,
    futures::channel::mpsc::UnboundedReceiver<std::io::Result<String>>,
>;

/// A line handed to the writer thread.
type Sent = std::future::Ready<std::io::Result<std::sync::mpsc::Sender<String>>>;

/// What to do with one line from the client.
#[derive(Debug, PartialEq)]
pub(super) enum Checked {
    /// The SDK takes it.
    Pass,
    /// Answered here: the response line, and the short diagnostic for stderr.
    Answer {
        response: String,
        diagnostic: String,
    },
}

/// JSON-RPC 2.0's codes for the two refusals made here.
const INVALID_REQUEST: i64 = -32600;
const INVALID_PARAMS: i64 = -32602;

/// Checks one line from the client (see the module docs).
pub(super) fn check(line: &str) -> Checked {
    let Ok(Value::Object(message)) = serde_json::from_str::<Value>(line) else {
        return Checked::Pass;
    };
    // Without an id that can be echoed it is a notification, or its error has `id: null`
    // anyway: the SDK's answer is right.
    let id = match message.get("id") {
        Some(id @ (Value::Number(_) | Value::String(_))) => id.clone(),
        _ => return Checked::Pass,
    };
    let method = message.get("method");
    if method.is_none() && (message.contains_key("result") || message.contains_key("error")) {
        // A response to one of our requests.
        return Checked::Pass;
    }
    let name = method.and_then(Value::as_str);
    let refuse = |code: i64, why: String| answer(&id, name, code, why);
    if message.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return refuse(INVALID_REQUEST, "`jsonrpc` must be \"2.0\"".to_owned());
    }
    let Some(name) = name else {
        return refuse(
            INVALID_REQUEST,
            "`method` is missing or not a string".to_owned(),
        );
    };
    let params = message.get("params").cloned();
    if let Some(p) = &params
        && !(p.is_object() || p.is_array())
    {
        return refuse(
            INVALID_PARAMS,
            "`params` must be an object or an array".to_owned(),
        );
    }
    match fits(name, params.unwrap_or(Value::Null)) {
        Ok(()) => Checked::Pass,
        Err(why) => refuse(INVALID_PARAMS, format!("`params`: {why}")),
    }
}

/// Whether `params` are what the method `name` takes (methods bridle does not serve are the
/// SDK's to refuse).
fn fits(name: &str, params: Value) -> Result<(), String> {
    fn parse<T: serde::de::DeserializeOwned>(params: Value) -> Result<(), String> {
        serde_json::from_value::<T>(params)
            .map(drop)
            .map_err(|e| e.to_string())
    }
    match name {
        "initialize" => parse::<InitializeRequest>(params),
        "session/new" => parse::<NewSessionRequest>(params),
        "session/load" => parse::<LoadSessionRequest>(params),
        "session/prompt" => parse::<PromptRequest>(params),
        "session/set_mode" => parse::<SetSessionModeRequest>(params),
        "session/set_config_option" => parse::<SetSessionConfigOptionRequest>(params),
        _ => Ok(()),
    }
}

fn answer(id: &Value, method: Option<&str>, code: i64, why: String) -> Checked {
    let message = if code == INVALID_PARAMS {
        "Invalid params"
    } else {
        "Invalid request"
    };
    let response = json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": {"code": code, "message": message, "data": why},
    });
    let what = method.map_or_else(String::new, |m| format!(" ({m})"));
    // The reason may quote what the client sent: cut, and escaped by `say`.
    let short: String = why.chars().take(160).collect();
    Checked::Answer {
        response: response.to_string(),
        diagnostic: format!("ACP request {id}{what} refused with {code} ({message}): {short}"),
    }
}

/// The transport: stdin's lines, checked, to the SDK; the SDK's lines and the answers made
/// here to stdout, one writer so that lines never interleave. Returns it and the writer
/// thread, which ends once both the SDK and the reader are done with stdout.
pub(super) fn stdio() -> std::io::Result<(Transport, std::thread::JoinHandle<()>)> {
    let (out_tx, out_rx) = std::sync::mpsc::channel::<String>();
    let writer = std::thread::Builder::new()
        .name("bridle-acp-out".into())
        .spawn(move || {
            let stdout = std::io::stdout();
            for line in out_rx {
                let mut out = stdout.lock();
                if writeln!(out, "{line}").and_then(|()| out.flush()).is_err() {
                    // The client is gone: nothing more can reach it.
                    return;
                }
            }
        })?;
    let (in_tx, in_rx) = futures::channel::mpsc::unbounded::<std::io::Result<String>>();
    let answers = out_tx.clone();
    std::thread::Builder::new()
        .name("bridle-acp-in".into())
        .spawn(move || {
            for line in std::io::stdin().lock().lines() {
                let pass = match &line {
                    Ok(text) => match check(text) {
                        Checked::Pass => true,
                        Checked::Answer {
                            response,
                            diagnostic,
                        } => {
                            say(&diagnostic);
                            let _ = answers.send(response);
                            false
                        }
                    },
                    Err(_) => true,
                };
                if pass && in_tx.unbounded_send(line).is_err() {
                    return;
                }
            }
        })?;
    let send: fn(std::sync::mpsc::Sender<String>, String) -> Sent = |out, line| {
        std::future::ready(
            out.send(line)
                .map(|()| out)
                .map_err(|_| std::io::Error::other("the ACP output writer has stopped")),
        )
    };
    let outgoing = futures::sink::unfold(out_tx, send);
    Ok((agent_client_protocol::Lines::new(outgoing, in_rx), writer))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(line: &str) -> Value {
        match check(line) {
            Checked::Answer { response, .. } => serde_json::from_str(&response).unwrap(),
            Checked::Pass => panic!("{line} passed"),
        }
    }

    #[test]
    fn a_bad_envelope_is_answered_with_the_requests_id() {
        let r = refused(r#"{"jsonrpc":"1.0","id":14,"method":"initialize","params":{}}"#);
        assert_eq!(r["id"], 14);
        assert_eq!(r["error"]["code"], -32600);
        let r = refused(r#"{"jsonrpc":"2.0","id":"x"}"#);
        assert_eq!(r["id"], "x");
        assert_eq!(r["error"]["code"], -32600);
    }

    #[test]
    fn params_that_do_not_fit_the_method_are_invalid_params_with_the_id() {
        let r = refused(r#"{"jsonrpc":"2.0","id":15,"method":"initialize","params":"oops"}"#);
        assert_eq!(
            (r["id"].clone(), r["error"]["code"].clone()),
            (json!(15), json!(-32602))
        );
        let r = refused(r#"{"jsonrpc":"2.0","id":16,"method":"session/new","params":{"cwd":5}}"#);
        assert_eq!(
            (r["id"].clone(), r["error"]["code"].clone()),
            (json!(16), json!(-32602))
        );
        match check(r#"{"jsonrpc":"2.0","id":17,"method":"session/prompt","params":"x"}"#) {
            Checked::Answer { diagnostic, .. } => {
                assert!(diagnostic.len() < 300, "{diagnostic}");
                assert!(diagnostic.contains("-32602"), "{diagnostic}");
            }
            Checked::Pass => panic!("passed"),
        }
    }

    #[test]
    fn good_requests_notifications_responses_and_garbage_go_to_the_sdk() {
        for line in [
            r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}"#,
            r#"{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/w","mcpServers":[]}}"#,
            r#"{"jsonrpc":"2.0","method":"session/cancel","params":"x"}"#,
            r#"{"jsonrpc":"2.0","id":3,"result":{}}"#,
            r#"{"jsonrpc":"2.0","id":4,"method":"nosuch","params":{}}"#,
            "{not json",
            "[]",
        ] {
            assert_eq!(check(line), Checked::Pass, "{line}");
        }
    }
}
