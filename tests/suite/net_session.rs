//! Network decisions where a reviewer looks for them: `net/decision` events in the session
//! log of `bridle run`, per call in `bridle log show`, in the tool result `bridle tool` prints;
//! and the question a person is asked (once per session) for a host the allow-list does not
//! name, never for a denied one, and nobody when there is no terminal.

use bridle_agent::log::{Event, SessionDir};

use super::net_support::{NetEnv, Outside, profile_yaml, s};
use super::run_cli::tool_results;
use super::support::{bridle_in_pty, run, run_bounded};

/// An environment allowing `registry.test:PORT`, denying `*.denied.test`; `approval` as given.
/// Every name used is pinned to the test server, so only the proxy's decision keeps a
/// request from arriving.
fn session_env(approval: &str) -> (NetEnv, Outside) {
    let probe = NetEnv::new(&[], &[]);
    let root = probe.server_root("srv");
    std::fs::write(root.join("hello.txt"), "hello from outside\n").unwrap();
    let server = Outside::http(&root);
    let yaml = profile_yaml(
        &[format!("registry.test:{}", server.port)],
        &[
            "registry.test",
            "blocked.test",
            "asked.test",
            "x.denied.test",
        ],
        &["*.denied.test".to_owned()],
        &format!("approval: {approval}\n"),
    );
    let profile = probe.profile("net.yaml", &yaml);
    (
        NetEnv {
            exec: probe.exec,
            profile,
        },
        server,
    )
}

/// Runs `bridle run` with the model `script` under `e`'s profile; the session directory, the
/// session's id and its events.
fn run_session(e: &NetEnv, script: &str, task: &str) -> (std::path::PathBuf, String, Vec<Event>) {
    let file = e.home.join("script.yaml");
    std::fs::write(&file, script).unwrap();
    let sessions = e.home.join("sessions");
    let r = run_bounded(
        e.bridle()
            .args(["--profile", &e.profile, "run", "--model"])
            .arg(format!("script:{}", s(&file)))
            .arg("--session-dir")
            .arg(&sessions)
            .arg(task),
    );
    r.assert_ok();
    let id = r
        .stderr
        .lines()
        .find_map(|l| l.strip_prefix("bridle: session "))
        .unwrap()
        .trim()
        .to_owned();
    let dir = SessionDir::existing(&sessions).unwrap();
    let events: Vec<Event> = dir
        .read(&id)
        .unwrap()
        .iter()
        .filter_map(|r| r.event().unwrap())
        .collect();
    (sessions, id, events)
}

#[test]
fn bridle_run_logs_each_network_decision_and_log_show_lists_it_under_the_call() {
    let (e, server) = session_env("never");
    let port = server.port;
    let command = format!(
        "curl -sS --fail http://registry.test:{port}/hello.txt; curl -sS --fail http://blocked.test:{port}/never; true"
    );
    let script = format!(
        "- tool_calls:\n    - name: bash\n      arguments: {{command: {}}}\n- text: done\n",
        serde_json::to_string(&command).unwrap()
    );
    let (sessions, id, events) = run_session(&e, &script, "fetch");
    let net: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            Event::NetDecision(d) => Some(d.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(net.len(), 2, "{net:?}");
    let allowed = net.iter().find(|d| d.host == "registry.test").unwrap();
    assert_eq!(allowed.decision, bridle_policy::Decision::Allow);
    assert!(
        allowed.by.contains("`network.allow` entry `registry.test:"),
        "{}",
        allowed.by
    );
    assert!(allowed.received > 0 && allowed.sent > 0, "{allowed:?}");
    let denied = net.iter().find(|d| d.host == "blocked.test").unwrap();
    assert_eq!(denied.decision, bridle_policy::Decision::Deny);
    assert_eq!(denied.by, "not in the allow-list");
    // Recorded before the call's result, which names them too.
    let net_at = events
        .iter()
        .position(|e| matches!(e, Event::NetDecision(_)))
        .unwrap();
    let result_at = events
        .iter()
        .position(|e| matches!(e, Event::ToolResult { .. }))
        .unwrap();
    assert!(net_at < result_at);
    let Event::ToolResult {
        content, sandbox, ..
    } = &events[result_at]
    else {
        unreachable!()
    };
    assert!(
        content.contains(&format!("[network: allowed registry.test:{port}")),
        "{content}"
    );
    assert!(
        content.contains(&format!("[network: denied blocked.test:{port}")),
        "{content}"
    );
    assert_eq!(
        sandbox.as_ref().unwrap()["network_decisions"]
            .as_array()
            .map(Vec::len),
        Some(2)
    );
    let shown = run(e
        .bridle()
        .args(["log", "show", &id, "--session-dir"])
        .arg(&sessions));
    shown.assert_ok();
    assert!(
        shown.stdout.contains(&format!(
            "network: allow registry.test:{port} by `network.allow` entry"
        )),
        "{}",
        shown.stdout
    );
    assert!(
        shown.stdout.contains(&format!(
            "network: deny blocked.test:{port} by not in the allow-list"
        )),
        "{}",
        shown.stdout
    );
    assert!(!server.requests().iter().any(|q| q.contains("never")));
}

#[test]
fn bridle_tool_reports_the_decisions_in_its_result() {
    let (e, server) = session_env("never");
    let port = server.port;
    let args = serde_json::json!({
        "command": format!("curl -sS --fail http://x.denied.test:{port}/never")
    });
    let r =
        run_bounded(
            e.bridle()
                .args(["--profile", &e.profile, "tool", "bash", &args.to_string()]),
        );
    r.assert_code(1);
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    let decisions = v["sandbox"]["network_decisions"].as_array().unwrap();
    assert_eq!(decisions.len(), 1, "{v}");
    assert_eq!(decisions[0]["decision"], "deny");
    assert!(
        decisions[0]["by"]
            .as_str()
            .unwrap()
            .contains("`network.deny` entry `*.denied.test`"),
        "{v}"
    );
    assert!(
        v["sandbox"]["denied_by_sandbox"]
            .as_str()
            .unwrap()
            .contains(&format!(
                "the network allow-list denied `x.denied.test:{port}`"
            )),
        "{v}"
    );
    assert!(
        v["content"]
            .as_str()
            .unwrap()
            .contains("[network: denied x.denied.test"),
        "{v}"
    );
}

#[test]
fn a_client_that_ignores_the_proxy_is_told_which_variable_to_honour() {
    let (e, _server) = session_env("never");
    let args = serde_json::json!({"command": "curl -sS --noproxy '*' http://registry.test/"});
    let r =
        run_bounded(
            e.bridle()
                .args(["--profile", &e.profile, "tool", "bash", &args.to_string()]),
        );
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    let why = v["sandbox"]["denied_by_sandbox"]
        .as_str()
        .unwrap_or_default();
    assert!(why.contains("HTTPS_PROXY") && why.contains("no DNS"), "{v}");
}

/// `bridle exec` says the same when the failed command tried to connect directly: by name
/// (its DNS lookup) or to an address, but not when the proxy was used or nothing failed.
#[test]
fn exec_names_the_variable_to_honour_when_a_client_bypasses_the_proxy() {
    let (e, server) = session_env("never");
    let port = server.port;
    for target in [
        format!("http://registry.test:{port}/hello.txt"),
        "http://192.0.2.1:9/".to_owned(),
    ] {
        let r = e.sh(&format!("curl -sS --max-time 5 --noproxy '*' {target}"));
        assert_ne!(r.code, Some(0), "{target}: {}", r.stderr);
        assert!(
            r.stderr
                .contains("bridle: network: the command tried to connect directly")
                && r.stderr.contains("HTTPS_PROXY")
                && r.stderr.contains("ALL_PROXY"),
            "{target}: {}",
            r.stderr
        );
    }
    // Through the proxy, or failing for another reason: no such line.
    let r = e.sh(&format!(
        "curl -sS --fail http://registry.test:{port}/hello.txt && exit 3"
    ));
    assert_eq!(r.code, Some(3), "{}", r.stderr);
    assert!(!r.stderr.contains("network:"), "{}", r.stderr);
}

#[test]
fn an_unmatched_host_is_asked_once_per_session_and_a_denied_one_never() {
    let (e, server) = session_env("ask");
    let port = server.port;
    let command = format!(
        "curl -sS --fail http://asked.test:{port}/hello.txt && echo first=ok; \
         curl -sS --fail http://asked.test:{port}/hello.txt && echo second=ok; \
         curl -sS --fail http://x.denied.test:{port}/never; echo denied=$?"
    );
    let args = serde_json::json!({ "command": command }).to_string();
    let pty = bridle_in_pty(
        &["--profile", &e.profile, "tool", "bash", &args],
        &e.home,
        &e.workspace,
        Some("y"),
        None,
    );
    let shown = pty.stdout.replace('\r', "");
    assert_eq!(
        shown.matches("approval needed for tool `network`").count(),
        1,
        "{shown}"
    );
    assert!(shown.contains(&format!("asked.test:{port}")), "{shown}");
    assert!(
        shown.contains("first=ok") && shown.contains("second=ok"),
        "{shown}"
    );
    assert!(!shown.contains("denied=0"), "{shown}");
    let asked = server
        .requests()
        .iter()
        .filter(|q| q.ends_with("/hello.txt"))
        .count();
    assert_eq!(asked, 2, "{:?}", server.requests());
    assert!(!server.requests().iter().any(|q| q.contains("never")));
}

#[test]
fn headless_an_unmatched_host_is_denied_without_asking() {
    let (e, server) = session_env("ask");
    let port = server.port;
    let args = serde_json::json!({
        "command": format!("curl -sS --fail http://asked.test:{port}/hello.txt")
    });
    let r =
        run_bounded(
            e.bridle()
                .args(["--profile", &e.profile, "tool", "bash", &args.to_string()]),
        );
    r.assert_code(1);
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    let d = &v["sandbox"]["network_decisions"][0];
    assert_eq!(d["decision"], "deny", "{v}");
    assert!(
        d["by"].as_str().unwrap().contains("approval unavailable"),
        "{v}"
    );
    assert!(server.requests().is_empty(), "{:?}", server.requests());
}

#[test]
fn the_terminal_reaches_allowed_hosts_through_the_proxy_and_reports_each_call() {
    let (e, server) = session_env("never");
    let port = server.port;
    let args = serde_json::json!({
        "input": format!(
            "curl -sS --fail http://registry.test:{port}/hello.txt; curl -sS --fail http://blocked.test:{port}/never\n"
        ),
        "wait_ms": 10000,
    });
    let r = run_bounded(e.bridle().args([
        "--profile",
        &e.profile,
        "tool",
        "terminal",
        &args.to_string(),
    ]));
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    let content = v["content"].as_str().unwrap();
    assert!(content.contains("hello from outside"), "{v}");
    assert!(
        content.contains(&format!("[network: allowed registry.test:{port}")),
        "{v}"
    );
    assert!(
        content.contains(&format!("[network: denied blocked.test:{port}")),
        "{v}"
    );
    assert_eq!(
        v["sandbox"]["network_decisions"].as_array().map(Vec::len),
        Some(2),
        "{v}"
    );
    assert!(!server.requests().iter().any(|q| q.contains("never")));
}

#[test]
fn connections_of_the_terminals_background_processes_are_recorded_as_between_calls() {
    let (e, server) = session_env("never");
    let port = server.port;
    // The first connection comes a second after the first terminal call returned (the next
    // terminal call reports it); the second after the last terminal call (the session's end
    // records it).
    let first = format!("(sleep 1; curl -sS http://blocked.test:{port}/bg1) &\n");
    let second =
        format!("(sleep 1; curl -sS --fail http://registry.test:{port}/hello.txt >/dev/null) &\n");
    let call = |name: &str, args: serde_json::Value| {
        format!("- tool_calls:\n    - name: {name}\n      arguments: {args}\n")
    };
    let script = [
        call(
            "terminal",
            serde_json::json!({"input": first, "wait_ms": 2000}),
        ),
        call("bash", serde_json::json!({"command": "sleep 3"})),
        call(
            "terminal",
            serde_json::json!({"input": second, "wait_ms": 300}),
        ),
        call("bash", serde_json::json!({"command": "sleep 3"})),
        "- text: done\n".to_owned(),
    ]
    .concat();
    let (sessions, id, events) = run_session(&e, &script, "fetch in the background");
    let calls: Vec<String> = events
        .iter()
        .filter_map(|e| match e {
            Event::ToolCall(c) => Some(c.call_id.clone()),
            _ => None,
        })
        .collect();
    let net: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            Event::NetDecision(d) => Some(d.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(net.len(), 2, "{net:?}");
    let denied = net.iter().find(|d| d.host == "blocked.test").unwrap();
    assert_eq!(denied.call_id, calls[2], "{net:?}");
    assert!(denied.between_calls, "{net:?}");
    let allowed = net.iter().find(|d| d.host == "registry.test").unwrap();
    assert_eq!(allowed.call_id, "", "{net:?}");
    assert!(allowed.between_calls, "{net:?}");
    assert!(allowed.received > 0, "{allowed:?}");
    let third = tool_results(&events)[2].clone();
    assert!(
        third.contains(&format!(
            "[network: between calls: denied blocked.test:{port}"
        )),
        "{third}"
    );
    let shown = run(e
        .bridle()
        .args(["log", "show", &id, "--session-dir"])
        .arg(&sessions));
    shown.assert_ok();
    assert!(
        shown
            .stdout
            .contains("(between calls, before this call) network: deny blocked.test"),
        "{}",
        shown.stdout
    );
    assert!(
        shown
            .stdout
            .contains("between calls: network: allow registry.test"),
        "{}",
        shown.stdout
    );
    assert!(!server.requests().iter().any(|q| q.contains("bg1")));
}
