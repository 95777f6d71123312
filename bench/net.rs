//! Network allow-list benchmark (issue 10): one stream's throughput through bridle's proxy
//! against the same copy made directly on the loopback, side by side; the latency a new
//! connection gains from going through the proxy; and the proxy's memory per idle connection.
//!
//! The client is the same Python program for both paths: inside `bridle exec` (network
//! `allow-list`, through the relay and the proxy, HTTP CONNECT) and outside it (direct). The
//! server is a thread of this benchmark on the host's loopback.
//!
//! Run: `cargo bench --bench net` (builds the bridle binary). Writes `bench/results/net.json`.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::cast_precision_loss,
    clippy::cast_possible_truncation,
    missing_docs
)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::time::Duration;

const CLIENT: &str = r#"
import json, os, socket, sys, time
mode, target, arg = sys.argv[1], sys.argv[2], int(sys.argv[3])
host, port = target.rsplit(":", 1)
proxy = os.environ.get("HTTP_PROXY")
def connect():
    if proxy:
        p = int(proxy.rsplit(":", 1)[1])
        s = socket.create_connection(("127.0.0.1", p))
        s.sendall(b"CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (target.encode(), target.encode()))
        head = b""
        while b"\r\n\r\n" not in head:
            head += s.recv(1)
        assert head.startswith(b"HTTP/1.1 200"), head
    else:
        s = socket.create_connection(("127.0.0.1", int(port)))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s
out = {}
if mode == "throughput":
    s = connect()
    s.sendall(b"SEND %d\n" % arg)
    buf = bytearray(1 << 20)
    view = memoryview(buf)
    got = 0
    start = time.perf_counter()
    while got < arg:
        n = s.recv_into(view)
        if not n:
            break
        got += n
    out["seconds"] = time.perf_counter() - start
    out["bytes"] = got
elif mode == "latency":
    samples = []
    for i in range(arg):
        start = time.perf_counter()
        s = connect()
        s.sendall(b"ECHO\n")
        assert s.recv(3) == b"ok\n"
        samples.append(time.perf_counter() - start)
        s.close()
    samples.sort()
    out["median_ms"] = samples[len(samples) // 2] * 1000
    out["p90_ms"] = samples[int(len(samples) * 0.9)] * 1000
elif mode == "idle":
    held = []
    for i in range(arg):
        s = connect()
        s.sendall(b"IDLE\n")
        held.append(s)
        if i == 9:
            print("warm", flush=True)
            sys.stdin.readline()
    print("held", flush=True)
    sys.stdin.readline()
print(json.dumps(out), flush=True)
"#;

/// The server: `SEND n` writes n bytes, `ECHO` answers `ok`, `IDLE` holds the connection.
fn serve(listener: TcpListener) {
    for stream in listener.incoming().flatten() {
        std::thread::spawn(move || {
            let _ = stream.set_nodelay(true);
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut line = String::new();
            if reader.read_line(&mut line).is_err() {
                return;
            }
            let mut stream = stream;
            let words: Vec<&str> = line.split_whitespace().collect();
            match words.as_slice() {
                ["SEND", n] => {
                    let mut left: u64 = n.parse().unwrap();
                    let chunk = vec![7u8; 256 * 1024];
                    while left > 0 {
                        let take = left.min(chunk.len() as u64) as usize;
                        if stream.write_all(&chunk[..take]).is_err() {
                            return;
                        }
                        left -= take as u64;
                    }
                }
                ["ECHO"] => {
                    let _ = stream.write_all(b"ok\n");
                }
                _ => {
                    let mut sink = [0u8; 64];
                    while matches!(stream.read(&mut sink), Ok(n) if n > 0) {}
                }
            }
        });
    }
}

struct Setup {
    _dir: tempfile::TempDir,
    home: std::path::PathBuf,
    workspace: std::path::PathBuf,
    profile: String,
    client: String,
    target: String,
}

fn setup(port: u16) -> Setup {
    let dir = tempfile::Builder::new()
        .prefix("bridle-bench-net-")
        .tempdir_in("/var/tmp")
        .unwrap();
    let home = dir.path().join("home");
    let workspace = home.join("project");
    std::fs::create_dir_all(&workspace).unwrap();
    let profile = home.join("net.yaml");
    std::fs::write(
        &profile,
        format!(
            "extends: workspace-write\napproval: never\nnetwork:\n  mode: allow-list\n  allow: [\"bench.test:{port}\"]\n  resolve: {{bench.test: 127.0.0.1}}\n"
        ),
    )
    .unwrap();
    let client = home.join("client.py");
    std::fs::write(&client, CLIENT).unwrap();
    Setup {
        home: std::fs::canonicalize(&home).unwrap(),
        workspace: std::fs::canonicalize(&workspace).unwrap(),
        profile: profile.display().to_string(),
        client: client.display().to_string(),
        target: format!("bench.test:{port}"),
        _dir: dir,
    }
}

impl Setup {
    fn proxied(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_bridle"));
        cmd.env_clear()
            .env("HOME", &self.home)
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .current_dir(&self.workspace)
            .args(["--profile", &self.profile, "exec", "--", "/usr/bin/python3"])
            .arg(&self.client)
            .args(args);
        cmd
    }

    fn direct(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new("/usr/bin/python3");
        cmd.env_clear().arg(&self.client).args(args);
        cmd
    }
}

fn result(cmd: &mut Command) -> serde_json::Value {
    let out = cmd.stderr(Stdio::inherit()).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    serde_json::from_str(text.lines().last().unwrap()).unwrap()
}

fn vm_rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn main() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || serve(listener));
    let s = setup(port);
    let bytes: u64 = 2 << 30;
    let n = bytes.to_string();

    // Throughput: alternate direct and proxied, seven rounds each (the medians are compared).
    let (mut direct, mut proxied) = (Vec::new(), Vec::new());
    for _ in 0..7 {
        let d = result(&mut s.direct(&["throughput", &s.target, &n]));
        let p = result(&mut s.proxied(&["throughput", &s.target, &n]));
        for (v, list) in [(d, &mut direct), (p, &mut proxied)] {
            assert_eq!(v["bytes"].as_u64(), Some(bytes));
            list.push(bytes as f64 / v["seconds"].as_f64().unwrap() / 1e9);
        }
    }
    let (direct_gbs, proxied_gbs) = (median(direct.clone()), median(proxied.clone()));

    // Latency of a new connection (connect, CONNECT, a 3-byte exchange), 300 each.
    let d = result(&mut s.direct(&["latency", &s.target, "300"]));
    let p = result(&mut s.proxied(&["latency", &s.target, "300"]));
    let (direct_ms, proxied_ms) = (
        d["median_ms"].as_f64().unwrap(),
        p["median_ms"].as_f64().unwrap(),
    );

    // Memory per idle connection: bridle's RSS with 10 and with 250 idle tunnels.
    let idle: u32 = 250;
    let mut child = s
        .proxied(&["idle", &s.target, &idle.to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    assert_eq!(lines.next().unwrap().unwrap(), "warm");
    std::thread::sleep(Duration::from_millis(300));
    let warm = vm_rss_kib(pid);
    writeln!(stdin).unwrap();
    assert_eq!(lines.next().unwrap().unwrap(), "held");
    std::thread::sleep(Duration::from_millis(300));
    let held = vm_rss_kib(pid);
    writeln!(stdin).unwrap();
    drop(stdin);
    let _ = child.wait();
    let per_idle_kib = (held.saturating_sub(warm)) as f64 / f64::from(idle - 10);

    let report = serde_json::json!({
        "throughput_gb_per_s": {"direct": direct_gbs, "proxied": proxied_gbs,
                                "direct_samples": direct, "proxied_samples": proxied,
                                "ratio_direct_over_proxied": direct_gbs / proxied_gbs},
        "new_connection_ms": {"direct_median": direct_ms, "proxied_median": proxied_ms,
                              "added_median": proxied_ms - direct_ms,
                              "direct_p90": d["p90_ms"], "proxied_p90": p["p90_ms"]},
        "idle_connection_memory": {"bridle_rss_kib_with_10": warm, "bridle_rss_kib_with_250": held,
                                   "kib_per_idle_connection": per_idle_kib},
    });
    println!("{}", serde_json::to_string_pretty(&report).unwrap());
    println!(
        "throughput: direct {direct_gbs:.2} GB/s, proxied {proxied_gbs:.2} GB/s ({:.2}x)",
        direct_gbs / proxied_gbs
    );
    println!(
        "new connection: direct {direct_ms:.3} ms, proxied {proxied_ms:.3} ms (+{:.3} ms)",
        proxied_ms - direct_ms
    );
    println!("memory per idle connection: {per_idle_kib:.1} KiB");
    let out = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/results/net.json");
    std::fs::write(out, serde_json::to_string_pretty(&report).unwrap() + "\n").unwrap();
}
