use super::*;

fn w() -> &'static Path {
    Path::new("/w")
}

fn spec() -> SandboxSpec {
    SandboxSpec {
        mode: SandboxMode::WorkspaceWrite,
        workspace: "/w".into(),
        guarantees: vec![],
        accept_missing: vec![],
        readable_roots: vec!["/".into()],
        writable_roots: vec!["/w".into(), "/var/tmp/t".into(), "/dev/null".into()],
        protected_paths: vec!["/w/.git/hooks".into()],
        must_stay_absent: Vec::new(),
        masked_paths: vec!["/home/u/.ssh".into()],
        network: Network::Off,
        allow_list: None,
        unix_sockets: bridle_policy::UnixSockets::Block,
        seccomp: bridle_policy::SeccompProfile::ConfinedNoNetwork,
        limits: bridle_policy::ResourceLimits {
            processes: None,
            memory_bytes: None,
            file_size_bytes: None,
            open_files: None,
            cpu_time_secs: None,
            wall_time_secs: None,
            command_timeout_secs: None,
            command_timeout_max_secs: None,
            spill_size_bytes: None,
        },
        env: Default::default(),
        temp_dir: "/var/tmp/t".into(),
        private_tmp: true,
        cache_home: None,
        exec_rules: None,
        masks_may_vanish: Vec::new(),
        protected_kept: false,
    }
}

#[test]
fn a_host_path_the_private_tmp_does_not_show_is_attributed() {
    let host = tempfile::Builder::new()
        .prefix("bridle-attr-")
        .tempdir_in("/tmp")
        .unwrap();
    let lib = host.path().join("lib");
    let ws = host.path().join("ws");
    std::fs::create_dir_all(&lib).unwrap();
    std::fs::create_dir_all(&ws).unwrap();
    let mut s = spec();
    s.workspace.clone_from(&ws);
    s.writable_roots = vec![ws.clone()];
    let said = attribute(
        &s,
        &ws,
        &format!("fatal: repository '{}' does not exist", lib.display()),
    )
    .unwrap();
    assert!(
        said.what.contains("private one") && said.escalation_lifts,
        "{said:?}"
    );
    let said = attribute(
        &s,
        &ws,
        "ls: cannot access '../lib': No such file or directory",
    )
    .unwrap();
    assert!(said.what.contains(&lib.display().to_string()), "{said:?}");
    // Missing on the host too, inside the workspace, or with the host's /tmp: not the sandbox.
    for line in [
        "ls: cannot access '../nothing': No such file or directory",
        "ls: cannot access 'src': No such file or directory",
    ] {
        assert_eq!(attribute(&s, &ws, line), None, "{line}");
    }
    s.private_tmp = false;
    assert_eq!(
        attribute(
            &s,
            &ws,
            "ls: cannot access '../lib': No such file or directory"
        ),
        None
    );
}

#[test]
fn sandbox_caused_errors_are_attributed() {
    let s = spec();
    assert!(
        attribute(
            &s,
            w(),
            "touch: cannot touch '/etc/x': Read-only file system"
        )
        .unwrap()
        .what
        .contains("/etc/x")
    );
    assert!(
        attribute(
            &s,
            w(),
            "sh: 1: cannot create /w/.git/hooks/pre-commit: Read-only file system"
        )
        .unwrap()
        .what
        .contains("protected")
    );
    assert!(
        attribute(
            &s,
            w(),
            "error: could not lock config file /w/.git/hooks/x: File exists"
        )
        .unwrap()
        .what
        .contains("protected")
    );
    assert!(
        attribute(&s, w(), "cat: /home/u/.ssh/id_rsa: Permission denied")
            .unwrap()
            .what
            .contains("masked")
    );
    assert!(
        attribute(&s, w(), "curl: (6) Could not resolve host: example.com")
            .unwrap()
            .what
            .contains("network is off")
    );
    assert!(
        attribute(
            &s,
            w(),
            "python3: socket.socket: [Errno 1] Operation not permitted"
        )
        .is_some()
    );
}

#[test]
fn under_full_access_only_what_the_view_keeps_is_attributed() {
    let s = SandboxSpec {
        mode: bridle_policy::SandboxMode::DangerFullAccess,
        masks_may_vanish: Vec::new(),
        protected_kept: true,
        ..spec()
    };
    assert!(
        attribute(&s, w(), "bash: line 2: /dev/vda: Read-only file system")
            .unwrap()
            .what
            .contains("reaches a disk")
    );
    assert!(
        attribute(
            &s,
            w(),
            "sh: 1: cannot create /w/.git/hooks/x: Read-only file system"
        )
        .unwrap()
        .what
        .contains("protected")
    );
    // Nothing else is read-only because of the sandbox there.
    assert_eq!(
        attribute(
            &s,
            w(),
            "touch: cannot touch '/etc/x': Read-only file system"
        ),
        None
    );
    assert_eq!(attribute(&s, w(), "cat: /root/x: Permission denied"), None);
}

#[test]
fn ordinary_permission_errors_are_not_attributed() {
    let s = spec();
    assert_eq!(
        attribute(&s, w(), "cat: /w/secret.txt: Permission denied"),
        None
    );
    assert_eq!(
        attribute(&s, w(), "git@github.com: Permission denied (publickey)."),
        None
    );
    assert_eq!(
        attribute(&s, w(), "rm: cannot remove 'x': Operation not permitted"),
        None
    );
    assert_eq!(attribute(&s, w(), "everything is fine"), None);
}

#[test]
fn a_denied_target_of_a_masked_symlink_is_attributed_to_the_mask() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("netrc");
    std::fs::write(&target, "secret").unwrap();
    let link = dir.path().join(".netrc");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let mut s = spec();
    s.masked_paths = vec![link];
    let real = std::fs::canonicalize(&target).unwrap();
    let said = attribute(
        &s,
        w(),
        &format!("cat: {}: Permission denied", real.display()),
    );
    assert!(said.is_some_and(|m| m.what.contains("masked") && !m.escalation_lifts));
}

#[test]
fn a_relative_path_in_a_protected_directory_is_attributed() {
    let s = spec();
    let said = attribute(
        &s,
        w(),
        "touch: cannot touch '.git/hooks/x': Read-only file system",
    )
    .unwrap();
    assert!(said.what.contains("`/w/.git/hooks/x` is a protected path"));
    assert!(!said.escalation_lifts);
    assert!(
        said.note(SandboxMode::WorkspaceWrite, ApprovalPolicy::Ask)
            .contains("do not ask")
    );
}

#[test]
fn git_names_a_protected_config_from_the_top_of_the_work_tree() {
    let mut s = spec();
    s.protected_paths.push("/w/.git/config".into());
    // git moved to the top of the work tree; the command ran in `/w/src/lib`.
    let said = attribute(
        &s,
        Path::new("/w/src/lib"),
        "error: could not lock config file .git/config: File exists",
    )
    .unwrap();
    assert!(said.what.contains("`/w/.git/config` is a protected path"));
    assert!(said.what.contains("git -c NAME=VALUE"));
    assert!(!said.escalation_lifts);
}

#[test]
fn a_relative_path_is_never_resolved_to_a_path_outside_the_writable_roots() {
    // The command may have changed directory before naming it: a read-only file system
    // names the path as the command did, and a permission error is left alone.
    let s = spec();
    let said = attribute(&s, w(), "touch: cannot touch '../x': Read-only file system")
        .unwrap()
        .what;
    assert!(said.starts_with("`../x` is outside"), "{said}");
    assert!(!said.contains("`/x`"), "{said}");
    assert_eq!(
        attribute(&s, w(), "sh: 1: cannot create x: Permission denied"),
        None
    );
}

#[test]
fn what_an_escalated_call_would_get_past_says_how_to_ask() {
    let s = spec();
    let said = attribute(
        &s,
        w(),
        "touch: cannot touch '/etc/x': Read-only file system",
    )
    .unwrap();
    assert!(said.escalation_lifts);
    assert!(
        said.note(SandboxMode::WorkspaceWrite, ApprovalPolicy::Ask)
            .contains("call again with `sandbox_permissions`")
    );
    assert!(
        said.note(SandboxMode::WorkspaceWrite, ApprovalPolicy::Never)
            .contains("no wider mode can be approved")
    );
}
