use super::*;

/// The quick probe: namespaces assumed to work (what the FS-PROTECT rule looks at).
fn capable_host() -> HostProbe {
    crate::probe::quick()
}

fn protecting_spec() -> SandboxSpec {
    planned(None, None)
}

/// `workspace-write` planned in `mode`, for a call escalated from `from`.
fn planned(mode: Option<SandboxMode>, from: Option<SandboxMode>) -> SandboxSpec {
    let policy = bridle_policy::load(
        &bridle_policy::ShippedOnly,
        &bridle_policy::LoadRequest {
            profile: "workspace-write".into(),
            overrides: bridle_policy::Overrides {
                mode,
                ..bridle_policy::Overrides::default()
            },
            workspace_layer: None,
        },
    )
    .unwrap();
    let ctx = bridle_policy::PlanContext {
        workspace: "/home/dev/project".into(),
        home: "/home/dev".into(),
        account_home: None,
        state_dir: "/home/dev/.local/state/bridle".into(),
        config_dir: "/home/dev/.config/bridle".into(),
        temp_dir: "/var/tmp/bridle-1000/s".into(),
        cache_root: None,
        temp_base: None,
        host_env: Default::default(),
        found: Vec::new(),
        masks: vec![(
            "/home/dev/.local/state/bridle/sessions".into(),
            "bridle's session directory".into(),
        )],
        masks_may_vanish: Vec::new(),
        escalated_from: from,
    };
    bridle_policy::plan(&policy, &ctx).unwrap().spec
}

fn full_access_kept() -> SandboxSpec {
    planned(
        Some(SandboxMode::DangerFullAccess),
        Some(SandboxMode::WorkspaceWrite),
    )
}

fn status_of(spec: &SandboxSpec, probe: &HostProbe, g: Guarantee) -> GuaranteeStatus {
    assess(spec, probe)
        .guarantees
        .into_iter()
        .find(|s| s.guarantee == g)
        .unwrap()
}

#[test]
fn an_escalation_to_full_access_keeps_its_view_and_nothing_else() {
    let spec = full_access_kept();
    for root in [false, true] {
        let probe = HostProbe {
            root,
            ..capable_host()
        };
        let plan = assess(&spec, &probe).plan;
        assert!(plan.full_view && plan.mount_view && plan.pid_ns && plan.seccomp);
        assert!(!plan.confine && !plan.landlock && !plan.net_ns && !plan.ipc_ns);
        // Everyone runs in a user namespace: root maps every id to itself there (root over
        // files, nothing over the host); anyone else has no capabilities in it.
        assert!(plan.user_ns);
        assert_eq!(plan.map_every_id, root);
        assert_eq!(plan.drop_privileges, !root);
        for g in [Guarantee::FsProtect, Guarantee::FsMask] {
            let status = status_of(&spec, &probe, g);
            assert!(
                status.provided_by.contains(&Mechanism::SeccompMountLock),
                "{status:?}"
            );
        }
    }
    let chosen = planned(Some(SandboxMode::DangerFullAccess), None);
    let plan = assess(&chosen, &capable_host()).plan;
    assert!(!plan.full_view && !plan.mount_view && !plan.seccomp);
}

#[test]
fn an_escalation_to_full_access_is_refused_where_its_view_cannot_hold() {
    let spec = full_access_kept();
    let cases = [
        (
            HostProbe {
                user_ns: Err("EPERM".into()),
                root: false,
                ..capable_host()
            },
            "user namespace",
        ),
        // Root too: with its real capabilities it could make a device node of the disk.
        (
            HostProbe {
                user_ns: Err("EPERM".into()),
                root: true,
                ..capable_host()
            },
            "user namespace",
        ),
        (
            HostProbe {
                seccomp: Err("EINVAL".into()),
                root: true,
                ..capable_host()
            },
            "seccomp",
        ),
        (
            HostProbe {
                pid_ns: Err("EPERM".into()),
                ..capable_host()
            },
            "PID namespace",
        ),
    ];
    for (probe, why) in cases {
        let assessment = assess(&spec, &probe);
        let refused = assessment.refusal().expect(why);
        assert_eq!(refused.guarantee, Guarantee::FsProtect, "{why}");
        assert!(
            refused.note.as_deref().is_some_and(|n| n.contains(why)),
            "{why}: {refused:?}"
        );
    }
}

#[test]
fn a_supervised_mount_lock_filter_also_denies_writing_other_processes() {
    use crate::seccomp::{SeccompOptions, evaluate, mount_lock_rules, supervised_rules};
    let options = SeccompOptions {
        network_off: false,
        netns_isolates: false,
        deny_unix_sockets: false,
    };
    let supervised = supervised_rules(bridle_policy::SeccompProfile::MountLock, options);
    let plain = mount_lock_rules();
    let args = [0u64; 6];
    for nr in [
        nix::libc::SYS_ptrace,
        nix::libc::SYS_process_vm_writev,
        nix::libc::SYS_pidfd_getfd,
    ] {
        assert!(evaluate(&supervised, nr, &args).is_some(), "{nr} allowed");
        assert!(
            evaluate(&plain, nr, &args).is_none(),
            "{nr} denied without rules"
        );
    }
}

#[test]
fn the_mount_lock_filter_denies_what_undoes_a_view_and_nothing_else() {
    use crate::seccomp::{evaluate, mount_lock_rules};
    let table = mount_lock_rules();
    let args = [0u64; 6];
    for nr in [
        nix::libc::SYS_mount,
        nix::libc::SYS_umount2,
        nix::libc::SYS_move_mount,
        nix::libc::SYS_open_tree,
        nix::libc::SYS_fsopen,
        nix::libc::SYS_fsmount,
        nix::libc::SYS_fsconfig,
        nix::libc::SYS_fspick,
        nix::libc::SYS_mount_setattr,
        nix::libc::SYS_pivot_root,
        nix::libc::SYS_open_by_handle_at,
        nix::libc::SYS_setns,
        nix::libc::SYS_bpf,
    ] {
        assert!(evaluate(&table, nr, &args).is_some(), "{nr} allowed");
    }
    for nr in [
        nix::libc::SYS_openat,
        nix::libc::SYS_chroot,
        nix::libc::SYS_unshare,
        nix::libc::SYS_ptrace,
        nix::libc::SYS_socket,
    ] {
        assert!(evaluate(&table, nr, &args).is_none(), "{nr} denied");
    }
    crate::seccomp::compile(
        bridle_policy::SeccompProfile::MountLock,
        crate::seccomp::SeccompOptions {
            network_off: false,
            netns_isolates: false,
            deny_unix_sockets: false,
        },
    )
    .expect("the mount-lock filter compiles");
}

fn protect_status(probe: &HostProbe) -> GuaranteeStatus {
    assess(&protecting_spec(), probe)
        .guarantees
        .into_iter()
        .find(|g| g.guarantee == Guarantee::FsProtect)
        .unwrap()
}

fn net_status(spec: &SandboxSpec, probe: &HostProbe) -> GuaranteeStatus {
    assess(spec, probe)
        .guarantees
        .into_iter()
        .find(|g| g.guarantee == Guarantee::Net)
        .unwrap()
}

#[test]
fn the_allow_list_needs_the_private_network_namespace() {
    let mut spec = protecting_spec();
    spec.network = Network::AllowList;
    let status = net_status(&spec, &capable_host());
    assert_eq!(
        status.provided_by,
        vec![
            Mechanism::NetNamespace,
            Mechanism::SeccompSockets,
            Mechanism::AllowListProxy
        ]
    );
    let plan = assess(&spec, &capable_host()).plan;
    assert!(plan.net_ns && plan.seccomp_network_off && !plan.landlock_deny_tcp);
    let without_netns = HostProbe {
        net_ns: Err("EPERM".into()),
        ..capable_host()
    };
    let status = net_status(&spec, &without_netns);
    assert!(status.missing(), "{status:?}");
    assert!(
        status
            .note
            .as_deref()
            .is_some_and(|n| n.contains("allow-list needs a private network namespace")),
        "{status:?}"
    );
}

#[test]
fn protected_paths_need_the_pid_namespace_whose_init_watches_them() {
    let status = protect_status(&capable_host());
    assert!(!status.missing(), "{status:?}");
    assert!(status.provided_by.contains(&Mechanism::PidNamespace));
    let without_pid_ns = HostProbe {
        pid_ns: Err("EPERM".into()),
        ..capable_host()
    };
    let status = protect_status(&without_pid_ns);
    assert!(status.missing(), "{status:?}");
    assert!(
        status
            .note
            .as_deref()
            .is_some_and(|n| n.contains("PID namespace")),
        "{status:?}"
    );
}
