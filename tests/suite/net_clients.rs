//! Network `allow-list` with the real clients (G-NET): each reaches a server the test starts
//! on the host's loopback, named through `network.resolve`, through bridle's proxy — and a
//! host the allow-list does not name is refused before anything reaches the server.
//!
//! Two names are pinned to 127.0.0.1: `registry.test` (allowed, with the server's port) and
//! `blocked.test` (not allowed). A denied request asks for a path that appears nowhere else,
//! so the server's request log shows it never arrived.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::net_support::{NetEnv, Outside, certificate, s};
use super::support::toolchain_bin;

const FIXTURES: &str = include_str!("net_fixtures.py");

/// A server with the clients' fixtures, and an environment allowing `registry.test:PORT`.
fn registry() -> (NetEnv, Outside) {
    let probe = NetEnv::new(&[], &[]);
    let root = probe.server_root("registry");
    let server = Outside::http(&root);
    let script = root.join(".fixtures.py");
    std::fs::write(&script, FIXTURES).unwrap();
    let ok = Command::new("/usr/bin/python3")
        .arg(&script)
        .arg(&root)
        .arg("registry.test")
        .arg(server.port.to_string())
        .status()
        .unwrap()
        .success();
    assert!(ok, "building the fixtures failed");
    let env = NetEnv {
        profile: probe.profile(
            "net.yaml",
            &super::net_support::profile_yaml(
                &[format!("registry.test:{}", server.port)],
                &["registry.test", "blocked.test"],
                &[],
                "approval: never\n",
            ),
        ),
        exec: probe.exec,
    };
    (env, server)
}

fn never_arrived(server: &Outside, marker: &str) {
    let requests = server.requests();
    assert!(
        !requests.iter().any(|r| r.contains(marker)),
        "a denied request reached the server: {requests:?}"
    );
}

#[test]
fn curl_reaches_an_allowed_host_and_is_refused_for_another() {
    let (e, server) = registry();
    let port = server.port;
    let r = e.sh(&format!(
        "curl -sS --fail http://registry.test:{port}/hello.txt; echo allowed=$?
         curl -sS -o denied.txt -w '%{{http_code}}\\n' http://blocked.test:{port}/denied-curl; echo denied=$?
         cat denied.txt"
    ));
    r.assert_ok();
    assert!(r.stdout.contains("hello from outside"), "{}", r.stdout);
    r.assert_succeeded("allowed");
    assert!(r.stdout.contains("403"), "{}", r.stdout);
    // The 403 body names the host and the profile key to change.
    assert!(
        r.stdout.contains(&format!("`blocked.test:{port}`")) && r.stdout.contains("network.allow"),
        "{}",
        r.stdout
    );
    // bridle exec says so on stderr, once.
    let line = format!("bridle: network: denied blocked.test:{port} (not in the allow-list");
    assert_eq!(r.stderr.matches(&line).count(), 1, "{}", r.stderr);
    never_arrived(&server, "denied-curl");
}

#[test]
fn curl_tunnels_https_through_connect_to_a_local_tls_server() {
    let probe = NetEnv::new(&[], &[]);
    let root = probe.server_root("tls");
    let (cert, key) = certificate(&root, "tls.test");
    std::fs::write(root.join("secret.txt"), "over tls\n").unwrap();
    let server = Outside::tls(&root, &cert, &key);
    let port = server.port;
    let ca = probe.workspace.join("ca.pem");
    std::fs::copy(&cert, &ca).unwrap();
    let e = NetEnv {
        profile: probe.profile(
            "net.yaml",
            &super::net_support::profile_yaml(
                &[format!("tls.test:{port}")],
                &["tls.test", "other-tls.test"],
                &[],
                "approval: never\n",
            ),
        ),
        exec: probe.exec,
    };
    let r = e.sh(&format!(
        "curl -sS --fail --cacert ca.pem https://tls.test:{port}/secret.txt; echo allowed=$?
         curl -sS --fail --cacert ca.pem https://other-tls.test:{port}/denied-tls; echo denied=$?"
    ));
    r.assert_ok();
    r.assert_succeeded("allowed");
    assert!(r.stdout.contains("over tls"), "{}", r.stdout);
    r.assert_failed("denied");
    assert!(r.stderr.contains("403"), "{}", r.stderr);
    never_arrived(&server, "denied-tls");
}

#[test]
fn curl_through_socks5_is_decided_the_same_way() {
    let (e, server) = registry();
    let port = server.port;
    let r = e.sh(&format!(
        "curl -sS --fail -x \"$ALL_PROXY\" http://registry.test:{port}/hello.txt; echo allowed=$?
         curl -sS --fail -x \"$ALL_PROXY\" http://blocked.test:{port}/denied-socks; echo denied=$?
         echo all_proxy=$ALL_PROXY"
    ));
    r.assert_ok();
    r.assert_succeeded("allowed");
    r.assert_failed("denied");
    assert!(r.value("all_proxy").starts_with("socks5h://127.0.0.1:"));
    never_arrived(&server, "denied-socks");
}

#[test]
fn python_urllib_uses_the_proxy_variables() {
    let (e, server) = registry();
    let port = server.port;
    let r = e.sh(&format!(
        "/usr/bin/python3 -c '
import urllib.request, urllib.error
print(\"allowed=\" + urllib.request.urlopen(\"http://registry.test:{port}/hello.txt\", timeout=20).read().decode().strip())
try:
    urllib.request.urlopen(\"http://blocked.test:{port}/denied-urllib\", timeout=20)
    print(\"denied=reached\")
except urllib.error.HTTPError as err:
    print(\"denied=\" + str(err.code))
'"
    ));
    r.assert_ok();
    assert_eq!(r.value("allowed"), "hello from outside");
    assert_eq!(r.value("denied"), "403");
    never_arrived(&server, "denied-urllib");
}

#[test]
fn pip_download_from_a_local_simple_index() {
    let (e, server) = registry();
    let port = server.port;
    let r = e.sh(&format!(
        "/usr/bin/python3 -m pip download --no-cache-dir --disable-pip-version-check --no-deps \
           --index-url http://registry.test:{port}/simple/ --trusted-host registry.test -d dl foo==0.1; echo allowed=$?
         ls dl
         /usr/bin/python3 -m pip download --no-cache-dir --disable-pip-version-check --no-deps --retries 0 \
           --index-url http://blocked.test:{port}/denied-pip/ --trusted-host blocked.test -d dl2 foo==0.1; echo denied=$?"
    ));
    r.assert_ok();
    r.assert_succeeded("allowed");
    assert!(
        r.stdout.contains("foo-0.1-py3-none-any.whl"),
        "{}",
        r.stdout
    );
    r.assert_failed("denied");
    never_arrived(&server, "denied-pip");
}

/// A bare repository with one commit, served by `git http-backend`.
fn bare_repo(root: &Path) -> PathBuf {
    let work = root.join("src-repo");
    let bare = root.join("git/repo.git");
    std::fs::create_dir_all(&work).unwrap();
    std::fs::write(work.join("README"), "cloned through the proxy\n").unwrap();
    let git = |dir: &Path, args: &[&str]| {
        let ok = Command::new("git")
            .args(args)
            .current_dir(dir)
            .env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env("HOME", root)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@example.invalid")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@example.invalid")
            .output()
            .unwrap();
        assert!(ok.status.success(), "git {args:?}: {ok:?}");
    };
    git(&work, &["init", "-q", "-b", "main"]);
    git(&work, &["add", "README"]);
    git(&work, &["commit", "-q", "-m", "one"]);
    git(root, &["clone", "-q", "--bare", s(&work), s(&bare)]);
    bare
}

#[test]
fn git_clone_over_smart_http() {
    let (e, server) = registry();
    bare_repo(&server.root);
    let port = server.port;
    let r = e.sh(&format!(
        "git clone -q http://registry.test:{port}/git/repo.git cloned; echo allowed=$?
         cat cloned/README
         git clone -q http://blocked.test:{port}/git/denied-git.git nope; echo denied=$?"
    ));
    r.assert_ok();
    r.assert_succeeded("allowed");
    assert!(
        r.stdout.contains("cloned through the proxy"),
        "{}",
        r.stdout
    );
    r.assert_failed("denied");
    assert!(
        server
            .requests()
            .iter()
            .any(|r| r.contains("git-upload-pack")),
        "not smart HTTP: {:?}",
        server.requests()
    );
    never_arrived(&server, "denied-git");
}

/// A project depending on `foo` from the sparse registry at `host:port` (its own
/// `.cargo/config.toml`), and the `CARGO_HOME` in the workspace that it shares with the other
/// test projects (the real registry cache is never touched).
fn cargo_project(e: &NetEnv, host: &str, port: u16) -> PathBuf {
    let home = e.workspace.join("cargo-home");
    std::fs::create_dir_all(&home).unwrap();
    let project = e.workspace.join(format!("app-{host}"));
    std::fs::create_dir_all(project.join(".cargo")).unwrap();
    std::fs::write(
        project.join(".cargo/config.toml"),
        format!(
            "[source.crates-io]\nreplace-with = \"local\"\n\n[source.local]\nregistry = \"sparse+http://{host}:{port}/index/\"\n\n[net]\nretry = 0\n"
        ),
    )
    .unwrap();
    std::fs::create_dir_all(project.join("src")).unwrap();
    std::fs::write(
        project.join("Cargo.toml"),
        "[package]\nname = \"app\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[dependencies]\nfoo = \"0.1\"\n",
    )
    .unwrap();
    std::fs::write(
        project.join("src/main.rs"),
        "fn main() { println!(\"{}\", foo::seven()); }\n",
    )
    .unwrap();
    home
}

#[test]
fn cargo_fetch_against_a_local_sparse_registry() {
    let (e, server) = registry();
    let port = server.port;
    let bin = toolchain_bin();
    let home = cargo_project(&e, "registry.test", port);
    cargo_project(&e, "blocked.test", port);
    let path = format!("{}:/usr/local/bin:/usr/bin:/bin", s(&bin));
    let env = [("CARGO_HOME", s(&home)), ("PATH", path.as_str())];
    let r = e.sh_env(
        &env,
        "cd app-registry.test && cargo fetch; echo allowed=$?
         cd ../app-blocked.test && cargo fetch; echo denied=$?",
    );
    r.assert_ok();
    r.assert_succeeded("allowed");
    r.assert_failed("denied");
    let cached = std::fs::read_dir(home.join("registry/cache"))
        .unwrap()
        .flatten()
        .any(|d| d.path().join("foo-0.1.0.crate").exists());
    assert!(cached, "foo-0.1.0.crate not downloaded\n{}", r.stderr);
    assert!(
        r.stderr.contains("bridle: network: denied blocked.test"),
        "{}",
        r.stderr
    );
}

/// The acceptance case: the shipped `ci-registries` profile, extended with a local mirror
/// (pinned and allowed by the deployer's own profile), fetches with cargo.
#[test]
fn ci_registries_fetches_with_cargo_from_a_pinned_mirror() {
    let (e, server) = registry();
    let port = server.port;
    let profile = e.profile(
        "ci-mirror.yaml",
        &format!(
            "extends: ci-registries\nnetwork:\n  allow: [\"registry.test:{port}\"]\n  resolve: {{registry.test: 127.0.0.1}}\n"
        ),
    );
    let bin = toolchain_bin();
    let home = cargo_project(&e, "registry.test", port);
    let mut cmd = e.exec_cmd(
        &["--profile", &profile],
        &[],
        &["sh", "-c", "cd app-registry.test && cargo fetch"],
    );
    cmd.env("CARGO_HOME", &home)
        .env("PATH", format!("{}:/usr/local/bin:/usr/bin:/bin", s(&bin)));
    let r = super::support::run_bounded(&mut cmd);
    r.assert_ok();
    assert!(r.stderr.contains("Downloaded foo v0.1.0"), "{}", r.stderr);
}

#[test]
fn npm_view_and_pack_against_a_local_registry() {
    if Command::new("npm").arg("--version").output().is_err() {
        panic!("npm is not installed (.ci/run installs nodejs and npm)");
    }
    let (e, server) = registry();
    let port = server.port;
    let r = e.sh(&format!(
        "export npm_config_cache=$PWD/npm-cache npm_config_update_notifier=false npm_config_fetch_retries=0 npm_config_audit=false
         npm view foo version --registry http://registry.test:{port}/npm/; echo view=$?
         npm pack foo --registry http://registry.test:{port}/npm/ >/dev/null; echo pack=$?
         ls foo-1.0.0.tgz
         npm view denied-npm version --registry http://blocked.test:{port}/npm/; echo denied=$?"
    ));
    r.assert_ok();
    r.assert_succeeded("view");
    r.assert_succeeded("pack");
    assert!(r.stdout.contains("1.0.0"), "{}", r.stdout);
    assert!(e.workspace.join("foo-1.0.0.tgz").exists(), "{}", r.stderr);
    r.assert_failed("denied");
    never_arrived(&server, "denied-npm");
}

#[test]
fn the_interactive_shell_reaches_an_allowed_host_and_is_refused_for_another() {
    let (e, server) = registry();
    let port = server.port;
    let input = format!(
        "curl -sS --fail http://registry.test:{port}/hello.txt; echo allowed=$?; \
         curl -sS -o /dev/null -w 'code=%{{http_code}}\\n' http://blocked.test:{port}/denied-shell; \
         exit 0\n"
    );
    let r = super::support::bridle_in_pty(
        &["--profile", &e.profile, "shell"],
        &e.home,
        &e.workspace,
        None,
        Some(&input),
    );
    assert_eq!(r.code, Some(0), "{}", r.stdout);
    assert!(r.stdout.contains("hello from outside"), "{}", r.stdout);
    assert!(
        r.stdout.contains("allowed=0") && r.stdout.contains("code=403"),
        "{}",
        r.stdout
    );
    // The denial is reported once the session is over, not inside the shell's screen.
    let line = format!("bridle: network: denied blocked.test:{port} (not in the allow-list");
    assert_eq!(r.stdout.matches(&line).count(), 1, "{}", r.stdout);
    never_arrived(&server, "denied-shell");
}
