//! `network:` in profiles: the scalar and mapping forms, strict validation with
//! `file:line:column`, layering (append / remove / replace, tighten-only workspace rules),
//! provenance, and [`Plan::decide_connect`], the one decision the proxy and `explain connect`
//! take.

#![cfg(test)]

mod support;

use std::net::IpAddr;

use bridle_policy::{
    DecidedBy, Decision, LoadRequest, NetList, Network, Origin, Overrides, PolicyError,
    SeccompProfile, SourceFile, load,
};
use pretty_assertions::assert_eq;

use support::{MemSource, load_text, origin_of, plan_fixed, request};

const BASE: &str = "\
mode: workspace-write
approval: never
network:
  mode: allow-list
  allow: [crates.io, \"*.crates.io\", \"github.com:443\", registry.test]
  deny: [\"bad.crates.io\"]
  resolve: {registry.test: 127.0.0.1}
";

fn base() -> MemSource {
    MemSource::new().with("base.yaml", BASE)
}

fn child(text: &str) -> Result<bridle_policy::Policy, PolicyError> {
    let source = base().with("child.yaml", format!("extends: base.yaml\n{text}"));
    load(&source, &request("child.yaml"))
}

fn workspace(text: &str) -> Result<bridle_policy::Policy, PolicyError> {
    load(
        &base(),
        &LoadRequest {
            workspace_layer: Some(SourceFile::from_text(".bridle/profile.yaml", text)),
            ..request("base.yaml")
        },
    )
}

fn values(list: &[bridle_policy::Sourced<String>]) -> Vec<&str> {
    list.iter().map(|s| s.value.as_str()).collect()
}

#[test]
fn scalar_forms_stay_valid_and_allow_list_is_one_of_them() {
    for (text, network) in [
        ("mode: read-only\nnetwork: off\n", Network::Off),
        ("mode: read-only\nnetwork: on\n", Network::On),
        ("mode: read-only\nnetwork: allow-list\n", Network::AllowList),
    ] {
        let policy = load_text(text).unwrap();
        assert_eq!(policy.network.value, network, "{text}");
        let (line, column) = support::position(text, &format!("network: {network}"));
        assert_eq!(
            policy.network.origin,
            Origin::file("p.yaml", line, column + 9),
            "{text}"
        );
    }
}

#[test]
fn the_mapping_form_sets_mode_lists_and_pins_with_provenance() {
    let policy = load(&base(), &request("base.yaml")).unwrap();
    assert_eq!(policy.network.value, Network::AllowList);
    assert_eq!(
        policy.network.origin,
        origin_of("base.yaml", BASE, "allow-list")
    );
    let hosts = &policy.network_hosts;
    assert_eq!(
        values(&hosts.allow),
        [
            "crates.io",
            "*.crates.io",
            "github.com:443",
            "registry.test"
        ]
    );
    assert_eq!(
        hosts.allow[1].origin,
        origin_of("base.yaml", BASE, "\"*.crates.io\"")
    );
    assert_eq!(values(&hosts.deny), ["bad.crates.io"]);
    let pin = &hosts.resolve["registry.test"];
    assert_eq!(pin.value, "127.0.0.1".parse::<IpAddr>().unwrap());
    assert_eq!(pin.origin, origin_of("base.yaml", BASE, "127.0.0.1"));
    let shown: Vec<(String, String)> = policy
        .entries()
        .into_iter()
        .filter(|e| e.key.starts_with("network"))
        .map(|e| (e.key, e.value))
        .collect();
    assert_eq!(
        shown,
        [
            ("network", "allow-list"),
            ("network.allow", "crates.io"),
            ("network.allow", "*.crates.io"),
            ("network.allow", "github.com:443"),
            ("network.allow", "registry.test"),
            ("network.deny", "bad.crates.io"),
            ("network.resolve", "registry.test=127.0.0.1"),
        ]
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
    );
}

#[test]
fn the_allow_list_plans_into_the_spec_with_the_proxy_environment() {
    let plan = plan_fixed(&load(&base(), &request("base.yaml")).unwrap());
    let spec = &plan.spec;
    assert_eq!(spec.seccomp, SeccompProfile::ConfinedAllowList);
    assert!(spec.guarantees.contains(&bridle_policy::Guarantee::Net));
    let list = spec.allow_list.as_ref().unwrap();
    assert_eq!(list.relay_port, bridle_policy::RELAY_PORT);
    assert_eq!(list.resolve[0].host, "registry.test");
    let proxy = format!("http://127.0.0.1:{}", bridle_policy::RELAY_PORT);
    for var in [
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "http_proxy",
        "https_proxy",
        "npm_config_proxy",
        "npm_config_https_proxy",
        "PIP_PROXY",
        "CARGO_HTTP_PROXY",
        "YARN_HTTPS_PROXY",
    ] {
        assert_eq!(spec.env.get(var), Some(&proxy), "{var}");
    }
    assert_eq!(
        spec.env.get("ALL_PROXY").map(String::as_str),
        Some(format!("socks5h://127.0.0.1:{}", bridle_policy::RELAY_PORT).as_str())
    );
    for var in ["NO_PROXY", "no_proxy"] {
        assert!(!spec.env.contains_key(var), "{var}");
    }
}

#[test]
fn no_proxy_is_cleared_even_when_the_host_and_the_allow_list_pass_it() {
    let text = "mode: workspace-write\nnetwork: {mode: allow-list, allow: [crates.io]}\nenvironment:\n  allow: [NO_PROXY, no_proxy]\n";
    let policy = load_text(text).unwrap();
    let mut ctx = support::ctx();
    ctx.host_env.insert("NO_PROXY".into(), "*".into());
    ctx.host_env.insert("no_proxy".into(), "crates.io".into());
    let spec = bridle_policy::plan(&policy, &ctx).unwrap().spec;
    assert!(!spec.env.contains_key("NO_PROXY") && !spec.env.contains_key("no_proxy"));
    // A deployer who sets it explicitly (servers inside the sandbox) keeps it.
    let text = "mode: workspace-write\nnetwork: {mode: allow-list, allow: [crates.io]}\nenvironment:\n  set: {NO_PROXY: \"127.0.0.1,localhost\"}\n";
    let spec = plan_fixed(&load_text(text).unwrap()).spec;
    assert_eq!(
        spec.env.get("NO_PROXY").map(String::as_str),
        Some("127.0.0.1,localhost")
    );
}

#[test]
fn other_network_settings_carry_no_allow_list_and_no_proxy_variables() {
    for text in [
        "mode: workspace-write\nnetwork: off\n",
        "mode: workspace-write\nnetwork: on\n",
    ] {
        let spec = plan_fixed(&load_text(text).unwrap()).spec;
        assert_eq!(spec.allow_list, None, "{text}");
        assert!(!spec.env.contains_key("HTTPS_PROXY"), "{text}");
    }
    // danger-full-access has the network on whatever the profile lists.
    let text = "mode: danger-full-access\nnetwork: {mode: allow-list, allow: [crates.io]}\n";
    let spec = plan_fixed(&load_text(text).unwrap()).spec;
    assert_eq!((spec.network, spec.allow_list), (Network::On, None));
}

#[test]
fn lists_append_remove_and_replace_like_every_other_list() {
    let p = child("network:\n  allow: [pypi.org]\n").unwrap();
    assert_eq!(
        values(&p.network_hosts.allow),
        [
            "crates.io",
            "*.crates.io",
            "github.com:443",
            "registry.test",
            "pypi.org"
        ]
    );
    let p = child("network:\n  allow: {remove: [Crates.IO.], append: [pypi.org]}\n").unwrap();
    assert_eq!(
        values(&p.network_hosts.allow),
        ["*.crates.io", "github.com:443", "registry.test", "pypi.org"]
    );
    let p = child("network:\n  allow: {replace: [pypi.org]}\n  deny: {replace: []}\n").unwrap();
    assert_eq!(values(&p.network_hosts.allow), ["pypi.org"]);
    assert!(p.network_hosts.deny.is_empty());
    let p =
        child("network:\n  resolve: {registry.test: \"::1\", mirror.test: 10.0.0.2}\n").unwrap();
    assert_eq!(p.network_hosts.resolve.len(), 2);
    assert_eq!(
        p.network_hosts.resolve["registry.test"].value,
        "::1".parse::<IpAddr>().unwrap()
    );
    // A scalar in a later layer changes the mode and keeps the lists.
    let p = child("network: off\n").unwrap();
    assert_eq!(p.network.value, Network::Off);
    assert_eq!(p.network_hosts.allow.len(), 4);
    let err = child("network:\n  allow: {remove: [pypi.org]}\n").unwrap_err();
    assert!(
        err.to_string().contains("cannot remove `pypi.org`"),
        "{err}"
    );
}

#[test]
fn command_line_network_overrides_the_mode_only() {
    let policy = load(
        &base(),
        &LoadRequest {
            overrides: Overrides {
                network: Some(Network::Off),
                ..Overrides::default()
            },
            ..request("base.yaml")
        },
    )
    .unwrap();
    assert_eq!(policy.network.value, Network::Off);
    assert_eq!(policy.network.origin, Origin::flag("--network"));
    let plan = plan_fixed(&policy);
    assert_eq!(plan.spec.allow_list, None);
    assert_eq!(
        plan.decide_connect("crates.io", 443).decision,
        Decision::Deny
    );
}

#[test]
fn malformed_entries_are_load_errors_at_their_line_and_column() {
    for (entry, needle) in [
        ("\"*\"", "every host"),
        ("\"*.com\"", "public suffix"),
        ("\"*.co.uk\"", "public suffix"),
        ("10.1.2.3", "IP address"),
        ("\"[::1]:443\"", "IP address"),
        ("\"a*.example.com\"", "leading `*.`"),
        ("\"example.com:99999\"", "between 1 and 65535"),
        ("\"exa mple.com\"", "contains"),
        ("\"bad\\r\\nHost: x.com\"", "contains"),
    ] {
        for key in ["allow", "deny"] {
            let text = format!(
                "mode: workspace-write\nnetwork:\n  mode: allow-list\n  {key}: [ok.example.com, {entry}]\n"
            );
            let err = load_text(text.as_str()).unwrap_err();
            let msg = err.to_string();
            let (line, column) = support::position(&text, entry);
            assert!(
                msg.starts_with(&format!("p.yaml:{line}:{column}: `network.{key}`")),
                "{entry} in {key}: {msg}"
            );
            assert!(msg.contains(needle), "{entry}: {msg}");
        }
    }
}

#[test]
fn malformed_network_values_are_load_errors() {
    for (text, needle, at) in [
        (
            "mode: read-only\nnetwork: sometimes\n",
            "unknown network setting `sometimes`",
            "sometimes",
        ),
        (
            "mode: read-only\nnetwork: {mode: maybe}\n",
            "maybe",
            "maybe",
        ),
        (
            "mode: read-only\nnetwork: {mode: allow-list, alow: [x.com]}\n",
            "unknown field `alow`",
            "alow",
        ),
        (
            "mode: read-only\nnetwork:\n  mode: allow-list\n  resolve: {registry.test: not-an-ip}\n",
            "not an IP address",
            "not-an-ip",
        ),
        (
            "mode: read-only\nnetwork:\n  mode: allow-list\n  resolve: {\"*.test\": 10.0.0.1}\n",
            "contains `*`",
            "10.0.0.1",
        ),
        (
            "mode: read-only\nnetwork: [off]\n",
            "network: expected one of off, allow-list, on",
            "[off]",
        ),
        (
            "mode: read-only\nnetwork: true\n",
            "not a network setting",
            "true",
        ),
    ] {
        let err = load_text(text).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains(needle), "{text}: {msg}");
        let (line, _) = support::position(text, at);
        assert!(msg.starts_with(&format!("p.yaml:{line}:")), "{text}: {msg}");
    }
}

#[test]
fn an_allow_list_that_would_do_nothing_is_refused() {
    // The classic silent failure: allow entries while the mode is still `off`.
    let text = "mode: workspace-write\nnetwork:\n  allow: [crates.io]\n";
    let err = load_text(text).unwrap_err().to_string();
    assert!(
        err.contains("has no effect while the network is `off`"),
        "{err}"
    );
    assert!(err.starts_with("p.yaml:3:"), "{err}");
    let text = "mode: workspace-write\nnetwork:\n  mode: on\n  allow: [crates.io]\n";
    assert!(load_text(text).unwrap_err().to_string().contains("`on`"));
    // Lowering the mode later (flags, another layer) is deliberate and fine.
    assert!(child("network: off\n").is_ok());
}

#[test]
fn the_workspace_layer_may_remove_allowed_hosts_add_denied_ones_and_lower_the_mode() {
    let p =
        workspace("network:\n  allow: {remove: [\"github.com:443\"]}\n  deny: [\"*.evil.test\"]\n")
            .unwrap();
    assert_eq!(
        values(&p.network_hosts.allow),
        ["crates.io", "*.crates.io", "registry.test"]
    );
    assert_eq!(
        values(&p.network_hosts.deny),
        ["bad.crates.io", "*.evil.test"]
    );
    let p = workspace("network: off\n").unwrap();
    assert_eq!(p.network.value, Network::Off);
}

#[test]
fn the_workspace_layer_may_not_widen_the_network() {
    for (text, key) in [
        ("network: on\n", "network"),
        ("network:\n  mode: on\n", "network.mode"),
        ("network:\n  allow: [pypi.org]\n", "network.allow"),
        (
            "network:\n  allow: {replace: [crates.io]}\n",
            "network.allow.replace",
        ),
        (
            "network:\n  deny: {remove: [bad.crates.io]}\n",
            "network.deny.remove",
        ),
        (
            "network:\n  resolve: {crates.io: 10.0.0.1}\n",
            "network.resolve.crates.io",
        ),
    ] {
        match workspace(text) {
            Err(PolicyError::WorkspaceLayerWidens { key: k, at, .. }) => {
                assert_eq!(k, key, "{text}");
                assert!(
                    matches!(&at, Origin::File { file, .. } if file == ".bridle/profile.yaml"),
                    "{at:?}"
                );
            }
            other => panic!("{text}: expected a widening error, got {other:?}"),
        }
    }
}

#[test]
fn decide_connect_names_the_entry_that_decides() {
    let plan = plan_fixed(&load(&base(), &request("base.yaml")).unwrap());
    let at = |needle| origin_of("base.yaml", BASE, needle);
    let entry = |list, entry: &str, needle| DecidedBy::NetworkEntry {
        list,
        entry: entry.to_owned(),
        origin: at(needle),
    };
    for (host, port, decision, by) in [
        (
            "crates.io",
            443,
            Decision::Allow,
            entry(NetList::Allow, "crates.io", "crates.io"),
        ),
        (
            "CRATES.IO.",
            80,
            Decision::Allow,
            entry(NetList::Allow, "crates.io", "crates.io"),
        ),
        (
            "static.crates.io",
            443,
            Decision::Allow,
            entry(NetList::Allow, "*.crates.io", "\"*.crates.io\""),
        ),
        (
            "bad.crates.io",
            443,
            Decision::Deny,
            entry(NetList::Deny, "bad.crates.io", "\"bad.crates.io\""),
        ),
        (
            "github.com",
            443,
            Decision::Allow,
            entry(NetList::Allow, "github.com:443", "\"github.com:443\""),
        ),
        (
            "registry.test",
            80,
            Decision::Allow,
            entry(NetList::Allow, "registry.test", "registry.test"),
        ),
    ] {
        let verdict = plan.decide_connect(host, port);
        assert_eq!(
            (verdict.decision, &verdict.by),
            (decision, &by),
            "{host}:{port}"
        );
        assert!(verdict.reason.contains("base.yaml:"), "{}", verdict.reason);
    }
    for (host, port, needle) in [
        ("github.com", 80, "add `github.com` to `network.allow`"),
        ("crates.io", 8080, "add `crates.io:8080` to `network.allow`"),
        ("evilcrates.io", 443, "not in the allow-list"),
        ("169.254.169.254", 80, "names hosts"),
        ("[::1]", 443, "names hosts"),
        ("evil.test\r\nX: y", 443, "host names are letters"),
        ("127.1", 443, "looks like an IP address"),
    ] {
        let verdict = plan.decide_connect(host, port);
        assert_eq!(verdict.decision, Decision::Deny, "{host}:{port}");
        assert!(
            verdict.reason.contains(needle),
            "{host}: {}",
            verdict.reason
        );
        assert!(
            !verdict.reason.contains('\r') && !verdict.reason.contains('\n'),
            "{:?}",
            verdict.reason
        );
    }
    assert_eq!(
        plan.resolve_pin("Registry.Test")
            .map(|p| p.address.to_string()),
        Some("127.0.0.1".into())
    );
    assert_eq!(plan.resolve_pin("crates.io"), None);
}

#[test]
fn an_unmatched_host_is_asked_under_approval_ask_and_a_denied_one_never() {
    let text = "mode: workspace-write\napproval: ask\nnetwork:\n  mode: allow-list\n  allow: [crates.io]\n  deny: [evil.test]\n";
    let plan = plan_fixed(&load_text(text).unwrap());
    assert_eq!(
        plan.decide_connect("example.com", 443).decision,
        Decision::Ask
    );
    assert_eq!(
        plan.decide_connect("evil.test", 443).decision,
        Decision::Deny
    );
    // A deny entry without a port denies every port: never asked about.
    assert_eq!(
        plan.decide_connect("evil.test", 8443).decision,
        Decision::Deny
    );
    assert_eq!(
        plan.decide_connect("crates.io", 443).decision,
        Decision::Allow
    );
}

#[test]
fn network_off_and_on_decide_by_the_setting() {
    for (text, decision) in [
        ("mode: workspace-write\nnetwork: off\n", Decision::Deny),
        ("mode: workspace-write\nnetwork: on\n", Decision::Allow),
    ] {
        let plan = plan_fixed(&load_text(text).unwrap());
        let verdict = plan.decide_connect("crates.io", 443);
        assert_eq!(verdict.decision, decision, "{text}");
        assert!(
            matches!(verdict.by, DecidedBy::NetworkSetting { .. }),
            "{:?}",
            verdict.by
        );
        assert!(verdict.reason.contains("p.yaml:2:"), "{}", verdict.reason);
    }
}

proptest::proptest! {
    /// Whatever a client sends as a host, parsing is total, and a host that parses can only
    /// hold the characters of a name or an address: nothing that could end a request line.
    #[test]
    fn any_host_text_parses_or_is_refused_without_panicking(text in "\\PC{0,80}|[a-z0-9.:\\[\\]\\r\\n*%-]{0,40}") {
        if let Ok(host) = bridle_policy::network::parse_host(&text) {
            let shown = host.to_string();
            proptest::prop_assert!(shown.chars().all(|c| c.is_ascii_alphanumeric() || ".-_:[]".contains(c)), "{shown:?}");
        }
        let _ = bridle_policy::network::HostPattern::parse(&text);
        let _ = bridle_policy::network::split_host_port(&text, 443);
        let plan = plan_fixed(&load(&base(), &request("base.yaml")).unwrap());
        let verdict = plan.decide_connect(&text, 443);
        proptest::prop_assert!(!verdict.reason.contains('\n') && !verdict.reason.contains('\r'));
    }
}
