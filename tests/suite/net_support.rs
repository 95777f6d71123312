//! Harness for the network allow-list tests: servers the test starts on the host's loopback
//! (outside every sandbox), profiles that name them through `network.resolve`, and
//! `bridle exec` runs against them.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use super::support::{ExecEnv, Run, path_str, run_bounded};

const SERVER: &str = include_str!("net_server.py");

/// A server on the host's loopback, killed when dropped.
pub struct Outside {
    child: Child,
    pub port: u16,
    pub root: PathBuf,
}

impl Outside {
    /// Serves `root` over plain HTTP.
    pub fn http(root: &Path) -> Outside {
        Outside::start(root, None)
    }

    /// Serves `root` over TLS with `cert` and `key`.
    pub fn tls(root: &Path, cert: &Path, key: &Path) -> Outside {
        Outside::start(root, Some((cert, key)))
    }

    fn start(root: &Path, tls: Option<(&Path, &Path)>) -> Outside {
        std::fs::create_dir_all(root).expect("server root");
        let script = root.join(".net_server.py");
        std::fs::write(&script, SERVER).expect("write the server script");
        let mut cmd = Command::new("/usr/bin/python3");
        cmd.arg(&script).arg(root);
        if let Some((cert, key)) = tls {
            cmd.arg(cert).arg(key);
        }
        let mut child = cmd
            .env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start the test server");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("server stdout"))
            .read_line(&mut line)
            .expect("read the server's port");
        let port = line.trim().parse().unwrap_or_else(|_| {
            let _ = child.kill();
            panic!("the test server did not start: {line:?}")
        });
        Outside {
            child,
            port,
            root: root.to_path_buf(),
        }
    }

    /// The requests that arrived, as `METHOD /path` lines.
    pub fn requests(&self) -> Vec<String> {
        std::fs::read_to_string(self.root.join("requests.log"))
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    /// `/stats` asked directly (not through bridle).
    pub fn stats(&self) -> serde_json::Value {
        let mut s = TcpStream::connect(("127.0.0.1", self.port)).expect("connect to the server");
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        write!(
            s,
            "GET /stats HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        let mut text = String::new();
        s.read_to_string(&mut text).unwrap();
        let body = text.split("\r\n\r\n").nth(1).unwrap_or_default();
        serde_json::from_str(body).unwrap_or_else(|e| panic!("stats: {e}: {text}"))
    }
}

impl Drop for Outside {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An [`ExecEnv`] with a profile whose allow-list names `allowed` and pins `pinned` names to
/// 127.0.0.1.
pub struct NetEnv {
    pub exec: ExecEnv,
    pub profile: String,
}

impl std::ops::Deref for NetEnv {
    type Target = ExecEnv;
    fn deref(&self) -> &ExecEnv {
        &self.exec
    }
}

impl NetEnv {
    /// `allowed`: entries of `network.allow`; `pinned`: names pinned to 127.0.0.1.
    pub fn new(allowed: &[String], pinned: &[&str]) -> NetEnv {
        NetEnv::with_profile_tail(allowed, pinned, "approval: never\n")
    }

    /// The same, with more profile text (e.g. `approval: ask`, `deny: [...]`).
    pub fn with_profile_tail(allowed: &[String], pinned: &[&str], tail: &str) -> NetEnv {
        let exec = ExecEnv::new();
        let yaml = profile_yaml(allowed, pinned, &[], tail);
        let profile = exec.profile("net.yaml", &yaml);
        NetEnv { exec, profile }
    }

    /// A directory for a server's files (outside the workspace).
    pub fn server_root(&self, name: &str) -> PathBuf {
        let root = self.outside.join(name);
        std::fs::create_dir_all(&root).expect("server root");
        root
    }

    /// `bridle --profile <net.yaml> exec -- sh -c <script>`.
    pub fn sh(&self, script: &str) -> Run {
        self.sh_env(&[], script)
    }

    /// The same with extra environment for bridle (passed on when the profile allows it).
    pub fn sh_env(&self, env: &[(&str, &str)], script: &str) -> Run {
        let mut cmd = self.exec_cmd(&["--profile", &self.profile], &[], &["sh", "-c", script]);
        for (k, v) in env {
            cmd.env(k, v);
        }
        run_bounded(&mut cmd)
    }
}

/// A profile with network `allow-list`.
pub fn profile_yaml(allowed: &[String], pinned: &[&str], denied: &[String], tail: &str) -> String {
    let list = |items: &[String]| {
        items
            .iter()
            .map(|e| format!("\"{e}\""))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let resolve = pinned
        .iter()
        .map(|n| format!("{n}: 127.0.0.1"))
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        "extends: workspace-write\n{tail}network:\n  mode: allow-list\n  allow: [{}]\n  deny: [{}]\n  resolve: {{{resolve}}}\n",
        list(allowed),
        list(denied)
    )
}

/// A self-signed certificate for `name` (`openssl`), as `(cert, key)` in `dir`.
pub fn certificate(dir: &Path, name: &str) -> (PathBuf, PathBuf) {
    let cert = dir.join("cert.pem");
    let key = dir.join("key.pem");
    let status = Command::new("openssl")
        .args([
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
        ])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .args(["-subj", &format!("/CN={name}")])
        .args(["-addext", &format!("subjectAltName=DNS:{name}")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("run openssl (install it: .ci/run does)");
    assert!(status.success(), "openssl could not make a certificate");
    (cert, key)
}

/// `path` as a `&str` (tests use UTF-8 paths).
pub fn s(path: &Path) -> &str {
    path_str(path)
}
