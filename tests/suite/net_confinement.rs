//! Network `allow-list` keeps everything else in (G-NET): direct connections, UDP and DNS fail;
//! names that resolve to internal addresses are refused unless pinned; hostile requests are
//! refused without harming the proxy; a flood is bounded; a proxy that dies or cannot be
//! reached fails closed.

use std::io::ErrorKind;
use std::net::{TcpListener, UdpSocket};
use std::process::Stdio;
use std::time::{Duration, Instant};

use bridle_sandbox::fault::{Fault, inject};

use super::net_support::{NetEnv, Outside, profile_yaml, s};
use super::support::{is_root, processes_with, run, run_bounded, token};

fn hello_server(e: &NetEnv) -> Outside {
    let root = e.server_root("srv");
    std::fs::write(root.join("hello.txt"), "hello from outside\n").unwrap();
    Outside::http(&root)
}

/// An environment allowing `registry.test:PORT` (pinned) of a fresh server.
fn allowed_env() -> (NetEnv, Outside) {
    let probe = NetEnv::new(&[], &[]);
    let server = hello_server(&probe);
    let yaml = profile_yaml(
        &[format!("registry.test:{}", server.port)],
        &["registry.test"],
        &[],
        "approval: never\n",
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

/// The host's address on its default route (not loopback), when it has one.
fn host_address() -> Option<std::net::IpAddr> {
    let probe = UdpSocket::bind("0.0.0.0:0").ok()?;
    probe.connect("192.0.2.1:9").ok()?;
    let ip = probe.local_addr().ok()?.ip();
    (!ip.is_loopback() && !ip.is_unspecified()).then_some(ip)
}

#[test]
fn direct_connections_udp_and_dns_fail_while_the_proxy_works() {
    let (e, server) = allowed_env();
    let listener = TcpListener::bind("0.0.0.0:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let lport = listener.local_addr().unwrap().port();
    let udp = UdpSocket::bind("0.0.0.0:0").unwrap();
    udp.set_nonblocking(true).unwrap();
    let uport = udp.local_addr().unwrap().port();
    let targets: Vec<String> = std::iter::once("127.0.0.1".to_owned())
        .chain(host_address().map(|ip| ip.to_string()))
        .collect();
    let mut script = format!(
        "curl -sS --fail http://registry.test:{}/hello.txt >/dev/null; echo proxied=$?\n",
        server.port
    );
    for (i, ip) in targets.iter().enumerate() {
        script.push_str(&format!(
            "curl -sS --max-time 3 --noproxy '*' http://{ip}:{lport}/; echo noproxy{i}=$?
             /usr/bin/python3 -c 'import socket; socket.create_connection((\"{ip}\", {lport}), timeout=3)'; echo raw{i}=$?
             bash -c 'echo leak > /dev/tcp/{ip}/{lport}'; echo devtcp{i}=$?
             /usr/bin/python3 -c 'import socket; socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b\"leak\", (\"{ip}\", {uport}))'; echo udp{i}=$?
"
        ));
    }
    script.push_str(
        "getent hosts registry.test; echo dns_getent=$?
         /usr/bin/python3 -c 'import socket; socket.getaddrinfo(\"registry.test\", 80)'; echo dns_python=$?
         curl -sS --max-time 3 --noproxy '*' http://registry.test/; echo dns_curl=$?",
    );
    let r = e.sh(&script);
    r.assert_ok();
    r.assert_succeeded("proxied");
    for i in 0..targets.len() {
        for step in ["noproxy", "raw", "devtcp"] {
            r.assert_failed(&format!("{step}{i}"));
        }
    }
    for step in ["dns_getent", "dns_python", "dns_curl"] {
        r.assert_failed(step);
    }
    assert!(
        matches!(listener.accept(), Err(e) if e.kind() == ErrorKind::WouldBlock),
        "a direct connection reached the host\n{}{}",
        r.stdout,
        r.stderr
    );
    let mut buf = [0u8; 16];
    assert!(
        matches!(udp.recv_from(&mut buf), Err(e) if e.kind() == ErrorKind::WouldBlock),
        "a datagram reached the host"
    );
}

#[test]
fn names_that_resolve_to_internal_addresses_are_refused_unless_pinned() {
    let probe = NetEnv::new(&[], &[]);
    let server = hello_server(&probe);
    let port = server.port;
    // `localhost` resolves to 127.0.0.1 (/etc/hosts); `0x7f000001` and `0xa9fea9fe` are names
    // to the allow-list, which the resolver turns into 127.0.0.1 and 169.254.169.254.
    let yaml = profile_yaml(
        &[
            format!("localhost:{port}"),
            format!("0x7f000001:{port}"),
            "0xa9fea9fe".to_owned(),
            format!("pinned.test:{port}"),
        ],
        &["pinned.test"],
        &[],
        "approval: never\n",
    );
    let e = NetEnv {
        profile: probe.profile("net.yaml", &yaml),
        exec: probe.exec,
    };
    let r = e.sh(&format!(
        "curl -sS http://localhost:{port}/via-localhost; echo
         /usr/bin/python3 -c '
import urllib.request, urllib.error
# curl would rewrite these as addresses itself; urllib sends the names as written.
for url in (\"http://0x7f000001:{port}/via-hex\", \"http://0xa9fea9fe/latest/meta-data/\"):
    try:
        urllib.request.urlopen(url, timeout=20)
    except urllib.error.HTTPError as err:
        print(err.read().decode())
'

         curl -sS --fail http://pinned.test:{port}/hello.txt; echo pinned=$?"
    ));
    r.assert_ok();
    r.assert_succeeded("pinned");
    assert!(
        r.stdout
            .contains("`localhost` resolves only to a loopback address"),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout
            .contains("`0x7f000001` resolves only to a loopback address"),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout
            .contains("`0xa9fea9fe` resolves only to a cloud metadata address (169.254.169.254)"),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("network.resolve"), "{}", r.stdout);
    let requests = server.requests();
    assert!(!requests.iter().any(|q| q.contains("via-")), "{requests:?}");
}

#[test]
fn hostile_requests_are_refused_and_the_proxy_keeps_serving() {
    let (e, server) = allowed_env();
    let port = server.port;
    let r = e.sh(&format!(
        r#"/usr/bin/python3 - <<'EOF'
import os, socket
proxy = int(os.environ["HTTP_PROXY"].rsplit(":", 1)[1])
def exchange(name, *parts):
    s = socket.create_connection(("127.0.0.1", proxy), timeout=20)
    try:
        for part in parts:
            s.sendall(part)
        reply = s.recv(300)
    except OSError as err:
        reply = ("error " + type(err).__name__).encode()
    s.close()
    line = reply.split(b"\r\n", 1)[0] if not reply.startswith(b"\x05") else reply.hex().encode()
    print(name + "=" + (line.decode("latin-1") or "closed"))
P = {port}
exchange("no_port", b"CONNECT registry.test HTTP/1.1\r\n\r\n")
exchange("crlf_in_host", b"CONNECT registry.test\r\nX: y:%d HTTP/1.1\r\n\r\n" % P)
exchange("encoded_crlf", b"CONNECT registry%%0d%%0a.test:%d HTTP/1.1\r\n\r\n" % P)
exchange("control_char", b"CONNECT regi\x01stry.test:%d HTTP/1.1\r\n\r\n" % P)
exchange("space_in_host", b"GET http://regi stry.test:%d/x HTTP/1.1\r\n\r\n" % P)
exchange("overlong_header", b"GET http://registry.test:%d/overlong HTTP/1.1\r\nX-Long: " % P, b"a" * 40000, b"\r\n\r\n")
exchange("many_headers", b"GET http://registry.test:%d/many HTTP/1.1\r\n" % P + b"X: y\r\n" * 300 + b"\r\n")
exchange("origin_form", b"GET /hello.txt HTTP/1.1\r\nHost: registry.test\r\n\r\n")
exchange("tls_garbage", b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + os.urandom(64))
exchange("socks_no_method", b"\x05\x01\x02")
exchange("socks_bind", b"\x05\x01\x00", b"\x05\x02\x00\x03\x0dregistry.test" + P.to_bytes(2, "big"))
exchange("socks_bad_atyp", b"\x05\x01\x00", b"\x05\x01\x00\x09" + os.urandom(20))
exchange("socks_crlf_name", b"\x05\x01\x00", b"\x05\x01\x00\x03\x0bregi\r\nstry." + P.to_bytes(2, "big"))
exchange("socks4", b"\x04\x01\x00\x50\x7f\x00\x00\x01user\x00")
EOF
curl -sS --fail http://registry.test:{port}/hello.txt; echo alive=$?"#
    ));
    r.assert_ok();
    for (case, want) in [
        ("no_port", "HTTP/1.1 400"),
        ("crlf_in_host", "HTTP/1.1 400"),
        ("encoded_crlf", "HTTP/1.1 400"),
        ("control_char", "HTTP/1.1 400"),
        ("space_in_host", "HTTP/1.1 400"),
        ("overlong_header", "HTTP/1.1 431"),
        ("many_headers", "HTTP/1.1 431"),
        ("origin_form", "HTTP/1.1 400"),
        ("tls_garbage", "HTTP/1.1 400"),
        ("socks_no_method", "05ff"),
        ("socks_bind", "0500"),
        ("socks_bad_atyp", "0500"),
        ("socks_crlf_name", "0500"),
        ("socks4", "closed"),
    ] {
        assert!(r.value(case).starts_with(want), "{case}: {}", r.value(case));
    }
    // SOCKS: the method answer, then the refusal code in the same read or the next.
    for case in ["socks_bind", "socks_bad_atyp", "socks_crlf_name"] {
        assert!(
            !r.value(case)[4..].starts_with("0500"),
            "{case} was allowed"
        );
    }
    r.assert_succeeded("alive");
    assert!(!r.stderr.contains("panicked"), "{}", r.stderr);
    let requests = server.requests();
    assert!(
        requests.iter().all(|q| q.ends_with("/hello.txt")),
        "a refused request reached the server: {requests:?}"
    );
}

#[test]
fn a_flood_of_connections_is_bounded_and_the_sandbox_keeps_working() {
    let (e, server) = allowed_env();
    let port = server.port;
    let r = e.sh(&format!(
        r#"/usr/bin/python3 - <<'EOF'
import os, resource, socket, time
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (min(4096, hard), hard))
proxy = int(os.environ["HTTP_PROXY"].rsplit(":", 1)[1])
held = []
for i in range(1000):
    s = socket.create_connection(("127.0.0.1", proxy), timeout=30)
    s.sendall(b"GET http://registry.test:{port}/hold HTTP/1.1\r\nHost: registry.test\r\n\r\n")
    held.append(s)
print("opened=%d" % len(held))
time.sleep(4)
for s in held:
    s.close()
EOF
for i in $(seq 100); do curl -sS --fail --max-time 5 http://registry.test:{port}/hello.txt >/dev/null && break; sleep 0.1; done
curl -sS --fail http://registry.test:{port}/hello.txt; echo after=$?"#
    ));
    r.assert_ok();
    assert_eq!(r.value("opened"), "1000");
    r.assert_succeeded("after");
    let stats = server.stats();
    let max = stats["max_active"].as_u64().unwrap();
    // The server counts a connection until it has read its close. When the script closes its
    // 1000 sockets at once, the proxy frees permits and starts waiting connections upstream
    // before the server has read every earlier close, so its count overshoots the proxy's
    // 256 a little on a loaded machine (265 seen as bridle-ci); far below the 1000 opened.
    assert!(
        (200..=300).contains(&max),
        "the proxy served {max} connections at once (limit 256): {stats}"
    );
}

/// `bridle exec` dies (SIGKILL) while its command fetches through the proxy: the command's
/// whole tree goes with it, and nothing reaches the network afterwards.
#[test]
fn killing_bridle_and_its_proxy_mid_run_ends_the_sandbox_and_opens_nothing() {
    let (e, server) = allowed_env();
    let port = server.port;
    let mark = token("netkill");
    let listener = TcpListener::bind("0.0.0.0:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let lport = listener.local_addr().unwrap().port();
    let script = format!(
        "sleep 300 {mark} & while :; do curl -s -o /dev/null --max-time 2 http://registry.test:{port}/hello.txt && echo ok >> fetched; curl -s --noproxy '*' --max-time 1 http://127.0.0.1:{lport}/ ; sleep 0.05; done"
    );
    let mut child = e
        .exec_cmd(&["--profile", &e.profile], &[], &["sh", "-c", &script])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let fetched = e.workspace.join("fetched");
    let start = Instant::now();
    while !fetched.exists() && start.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        fetched.exists(),
        "the command never fetched through the proxy"
    );
    child.kill().unwrap();
    child.wait().unwrap();
    let start = Instant::now();
    while !processes_with(&mark).is_empty() && start.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(
        processes_with(&mark),
        Vec::<i32>::new(),
        "the sandbox outlived bridle"
    );
    let before = server.requests().len();
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(
        server.requests().len(),
        before,
        "requests after bridle died"
    );
    assert!(
        matches!(listener.accept(), Err(e) if e.kind() == ErrorKind::WouldBlock),
        "a direct connection reached the host"
    );
}

/// The proxy stops while the sandbox keeps running (its listener is closed with it): the
/// command's next connections fail, through the proxy or around it.
#[test]
fn a_proxy_that_stops_mid_run_fails_the_connections_and_never_opens_the_network() {
    let (e, server) = allowed_env();
    let port = server.port;
    let policy = bridle_policy::load(
        &bridle_policy::FsProfileSource,
        &bridle_policy::LoadRequest {
            profile: e.profile.clone(),
            overrides: bridle_policy::Overrides::default(),
            workspace_layer: None,
        },
    )
    .unwrap();
    let temp = e.home.join("session-tmp");
    std::fs::create_dir_all(&temp).unwrap();
    let ctx = bridle_policy::PlanContext {
        workspace: e.workspace.clone(),
        home: e.home.clone(),
        account_home: None,
        state_dir: e.home.join(".local/state/bridle"),
        config_dir: e.home.join(".config/bridle"),
        temp_dir: temp,
        cache_root: None,
        temp_base: None,
        host_env: [("PATH".to_owned(), "/usr/local/bin:/usr/bin:/bin".to_owned())].into(),
        found: Vec::new(),
        masks: Vec::new(),
        masks_may_vanish: Vec::new(),
        escalated_from: None,
    };
    let plan = bridle_policy::plan(&policy, &ctx).unwrap();
    let proxy = bridle_exec::net::NetProxy::start(
        &plan,
        std::sync::Arc::new(bridle_exec::approvals::NoAnswerer),
        bridle_exec::net::ProxyConfig::default(),
    )
    .unwrap();
    let mut sandbox = bridle_sandbox::Sandbox::prepare(
        plan.spec.clone(),
        &bridle_sandbox::probe::quick(),
        env!("CARGO_BIN_EXE_bridle").into(),
    )
    .unwrap();
    let script = format!(
        "for i in $(seq 200); do
           code=$(curl -s -o /dev/null -w '%{{http_code}}' --max-time 2 http://registry.test:{port}/hello.txt)
           echo \"$code\" >> codes
           [ -e stop ] && break
           sleep 0.05
         done
         curl -s --noproxy '*' --max-time 2 http://127.0.0.1:{port}/hello.txt; echo direct=$? >> codes"
    );
    let mut launch = sandbox.launch(vec!["sh".into(), "-c".into(), script], &e.workspace);
    launch
        .command
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let (launch, relay) =
        bridle_exec::net::prepare_launch(launch, plan.spec.network, Some(&proxy)).unwrap();
    let running = match sandbox.spawn(launch).unwrap() {
        bridle_sandbox::Spawned::Running(r) => r,
        other => panic!("{other:?}"),
    };
    let attachment = bridle_exec::net::attach_launch(Some(&proxy), relay).unwrap();
    let codes = e.workspace.join("codes");
    let read = || std::fs::read_to_string(&codes).unwrap_or_default();
    let start = Instant::now();
    while !read().contains("200") && start.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(read().contains("200"), "never fetched: {}", read());
    proxy.shutdown();
    let served = server.requests().len();
    let stopped_at = read().lines().count();
    while read().lines().count() < stopped_at + 5 && start.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(20));
    }
    std::fs::write(e.workspace.join("stop"), "").unwrap();
    let _ = running.wait(Some(Duration::from_secs(30)));
    drop(attachment);
    let text = read();
    let after: Vec<&str> = text.lines().skip(stopped_at + 1).collect();
    assert!(after.len() >= 4, "{text}");
    assert!(
        after
            .iter()
            .all(|c| *c == "000" || c.starts_with("direct=")),
        "a connection worked after the proxy stopped: {text}"
    );
    assert!(
        text.lines()
            .last()
            .is_some_and(|l| l.starts_with("direct=") && l != "direct=0"),
        "{text}"
    );
    assert!(
        server.requests().len() <= served + 1,
        "{:?}",
        server.requests()
    );
}

#[test]
fn a_relay_that_cannot_be_passed_to_bridle_is_a_refusal() {
    let (e, _server) = allowed_env();
    let marker = e.workspace.join("RAN");
    let mut cmd = e.exec_cmd(&["--profile", &e.profile], &[], &["touch", s(&marker)]);
    inject(&mut cmd, Fault::FdPassingDenied).unwrap();
    let r = run(&mut cmd);
    r.assert_code(125);
    assert_eq!(r.stderr.lines().count(), 1, "{}", r.stderr);
    assert!(
        r.stderr.starts_with(
            "bridle: sandbox unavailable: G-NET (network allow-list: passing the relay listener"
        ),
        "{}",
        r.stderr
    );
    assert!(!marker.exists(), "the command ran");
}

#[test]
fn without_network_namespaces_the_allow_list_is_refused_or_provided_by_root() {
    let (e, _server) = allowed_env();
    let mut cmd = e.bridle();
    cmd.args(["--profile", &e.profile, "probe", "--json"]);
    inject(&mut cmd, Fault::UserNamespacesDenied).unwrap();
    let r = run(&mut cmd);
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    let net = v["guarantees"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["guarantee"] == "G-NET")
        .unwrap()
        .clone();
    if is_root() {
        // Root creates the network namespace without a user namespace.
        assert_eq!(
            net["provided_by"],
            serde_json::json!(["net-namespace", "seccomp-sockets", "allow-list-proxy"]),
            "{net}"
        );
    } else {
        assert_eq!(net["provided_by"], serde_json::json!([]), "{net}");
        assert!(
            net["note"]
                .as_str()
                .unwrap()
                .contains("allow-list needs a private network namespace"),
            "{net}"
        );
        r.assert_code(125);
    }
}

#[test]
fn probe_reports_the_allow_list_and_its_mechanisms() {
    let (e, _server) = allowed_env();
    let r = run(e
        .bridle()
        .args(["--profile", "ci-registries", "probe", "--json"]));
    r.assert_code(0);
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(v["network"], "allow-list");
    assert_eq!(v["allow_list"]["relay_port"], bridle_policy::RELAY_PORT);
    let net = v["guarantees"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["guarantee"] == "G-NET")
        .unwrap();
    assert_eq!(
        net["provided_by"],
        serde_json::json!(["net-namespace", "seccomp-sockets", "allow-list-proxy"])
    );
    let r = run(e.bridle().args(["--profile", "ci-registries", "probe"]));
    assert!(
        r.stdout.contains("network allow-list: 14 allowed"),
        "{}",
        r.stdout
    );
}

#[test]
fn network_allow_list_on_the_command_line_allows_what_the_profile_lists_and_nothing_else() {
    let (e, server) = allowed_env();
    // The same profile with the network off; `--network allow-list` turns its list on.
    let off = e.profile(
        "off.yaml",
        &format!("extends: {}\nnetwork: off\n", e.profile),
    );
    let script = format!(
        "curl -sS --fail http://registry.test:{}/hello.txt",
        server.port
    );
    let r = run_bounded(&mut e.exec_cmd(&["--profile", &off], &[], &["sh", "-c", &script]));
    assert_ne!(r.code, Some(0), "{}", r.stdout);
    let r = run_bounded(&mut e.exec_cmd(
        &["--profile", &off],
        &["--network", "allow-list"],
        &["sh", "-c", &script],
    ));
    r.assert_ok();
    assert!(r.stdout.contains("hello from outside"));
    // The default profile lists nothing: everything is denied.
    let r = run_bounded(&mut e.exec_cmd(&[], &["--network", "allow-list"], &["sh", "-c", &script]));
    assert_ne!(r.code, Some(0));
    assert!(
        r.stderr.contains("bridle: network: denied registry.test"),
        "{}",
        r.stderr
    );
}

#[test]
fn explain_connect_names_the_entry_and_exits_by_decision() {
    let e = NetEnv::with_profile_tail(&["crates.io".to_owned()], &[], "approval: ask\n");
    let yaml = profile_yaml(
        &["crates.io".to_owned()],
        &[],
        &["bad.example.com".to_owned()],
        "approval: ask\n",
    );
    let profile = e.profile("ask.yaml", &yaml);
    for (target, code, needle) in [
        (
            "crates.io",
            0,
            "allowed by `network.allow` entry `crates.io`",
        ),
        ("crates.io:22", 3, "needs approval: not in the allow-list"),
        (
            "bad.example.com",
            1,
            "denied by `network.deny` entry `bad.example.com`",
        ),
        ("example.com", 3, "add `example.com` to `network.allow`"),
    ] {
        let r = run(e.bridle().args([
            "--profile",
            &profile,
            "policy",
            "explain",
            "connect",
            target,
        ]));
        r.assert_code(code);
        assert!(r.stdout.contains(needle), "{target}: {}", r.stdout);
    }
    let r = run(e.bridle().args([
        "--profile",
        &profile,
        "policy",
        "explain",
        "connect",
        "--json",
        "crates.io",
    ]));
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(v["by"]["kind"], "network-entry");
    assert_eq!(v["by"]["entry"], "crates.io");
    let r = run(e
        .bridle()
        .args(["policy", "explain", "connect", "evil.test\r\nx"]));
    r.assert_code(2);
}
