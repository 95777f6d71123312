//! Planning one call escalated to `danger-full-access` from a confined session: full access,
//! except that the protected paths stay read-only and bridle's own directories stay hidden.

#![cfg(test)]

mod support;

use std::path::{Path, PathBuf};

use bridle_policy::{
    Decision, Guarantee, LoadRequest, Network, Overrides, Plan, SandboxMode, SeccompProfile,
    ShippedOnly, UnixSockets, load, plan,
};

use support::{CONFIG, STATE, WORKSPACE, ctx};

const SESSIONS: &str = "/home/dev/.local/state/bridle/sessions";

/// `profile` planned in `mode`, as one call escalated from a session in `from`.
fn escalated(profile: &str, mode: SandboxMode, from: Option<SandboxMode>) -> Plan {
    let policy = load(
        &ShippedOnly,
        &LoadRequest {
            profile: profile.into(),
            overrides: Overrides {
                mode: Some(mode),
                ..Overrides::default()
            },
            workspace_layer: None,
        },
    )
    .unwrap();
    let mut ctx = ctx();
    ctx.masks = vec![(PathBuf::from(SESSIONS), "bridle's session directory".into())];
    ctx.escalated_from = from;
    plan(&policy, &ctx).unwrap()
}

#[test]
fn full_access_escalation_keeps_protected_paths_and_hides_the_session_directory() {
    let plan = escalated(
        "workstation",
        SandboxMode::DangerFullAccess,
        Some(SandboxMode::WorkspaceWrite),
    );
    insta::assert_yaml_snapshot!("spec-escalated-danger-full-access", plan.spec);
    let spec = &plan.spec;
    assert!(spec.protected_kept);
    assert_eq!(spec.seccomp, SeccompProfile::MountLock);
    assert_eq!(spec.network, Network::On);
    assert_eq!(spec.unix_sockets, UnixSockets::Allow);
    assert!(!spec.private_tmp);
    for p in [".git/hooks", ".git/config", ".bridle"] {
        assert!(
            spec.protected_paths.contains(&Path::new(WORKSPACE).join(p)),
            "{p}: {:?}",
            spec.protected_paths
        );
    }
    assert!(spec.protected_paths.contains(&PathBuf::from(CONFIG)));
    // Only bridle's own directory is masked: the profile's credential masks are not.
    assert_eq!(spec.masked_paths, [PathBuf::from(SESSIONS)]);
    assert!(spec.guarantees.contains(&Guarantee::FsProtect));
    assert!(spec.guarantees.contains(&Guarantee::FsMask));
    assert!(!spec.guarantees.contains(&Guarantee::FsWrite));
}

#[test]
fn full_access_escalation_decides_writes_as_its_sandbox_does() {
    let plan = escalated(
        "workspace-write",
        SandboxMode::DangerFullAccess,
        Some(SandboxMode::ReadOnly),
    );
    let allowed = plan.decide_write(Path::new("/var/tmp/report.txt"));
    assert_eq!(allowed.decision, Decision::Allow, "{}", allowed.reason);
    for denied in [
        format!("{WORKSPACE}/.git/hooks/pre-commit"),
        format!("{WORKSPACE}/.bridle/x.yaml"),
        format!("{CONFIG}/profiles/p.yaml"),
        format!("{SESSIONS}/s1/log.jsonl"),
    ] {
        let v = plan.decide_write(Path::new(&denied));
        assert_eq!(v.decision, Decision::Deny, "{denied}: {}", v.reason);
    }
    // State outside the session directory is bridle's business too, but it is not masked.
    assert!(!plan.spec.masked_paths.contains(&PathBuf::from(STATE)));
}

#[test]
fn a_profile_cannot_accept_the_escalation_losing_its_view() {
    let policy = support::load_text(
        "extends: workspace-write\naccept_missing: [G-FS-PROTECT, G-FS-MASK, G-NET]\n",
    )
    .unwrap();
    let mut policy = policy;
    policy.mode.value = SandboxMode::DangerFullAccess;
    let mut ctx = ctx();
    ctx.masks = vec![(PathBuf::from(SESSIONS), "bridle's session directory".into())];
    ctx.escalated_from = Some(SandboxMode::WorkspaceWrite);
    let spec = plan(&policy, &ctx).unwrap().spec;
    assert!(!spec.accept_missing.contains(&Guarantee::FsProtect));
    assert!(!spec.accept_missing.contains(&Guarantee::FsMask));
    assert!(spec.accept_missing.contains(&Guarantee::Net));
}

#[test]
fn danger_full_access_chosen_by_the_user_stays_unconfined() {
    for from in [None, Some(SandboxMode::DangerFullAccess)] {
        let spec = escalated("workspace-write", SandboxMode::DangerFullAccess, from).spec;
        assert!(!spec.protected_kept, "{from:?}");
        assert_eq!(spec.seccomp, SeccompProfile::None);
        assert!(spec.protected_paths.is_empty() && spec.masked_paths.is_empty());
        assert!(spec.writable_roots.is_empty());
    }
}

#[test]
fn an_escalation_to_workspace_write_is_planned_as_the_mode_is() {
    let escalated = escalated(
        "workspace-write",
        SandboxMode::WorkspaceWrite,
        Some(SandboxMode::ReadOnly),
    );
    let mut own = escalated.spec.clone();
    own.protected_kept = false;
    assert_eq!(escalated.spec, own, "workspace-write needs nothing more");
}

#[test]
fn only_the_masks_the_context_says_may_vanish_are_listed_as_such() {
    let policy = load(
        &ShippedOnly,
        &LoadRequest {
            profile: "workstation".into(),
            overrides: Overrides {
                mode: Some(SandboxMode::DangerFullAccess),
                ..Overrides::default()
            },
            workspace_layer: None,
        },
    )
    .unwrap();
    let other_run = PathBuf::from("/var/tmp/ci-job-7/sessions");
    // A registered directory that holds the current one: both stay masked, and only the one
    // another run owns may vanish (what holds the current one stays pinned).
    let around = PathBuf::from("/srv/runs");
    let current = around.join("now/sessions");
    let mut ctx = ctx();
    ctx.escalated_from = Some(SandboxMode::WorkspaceWrite);
    ctx.masks = vec![
        (other_run.clone(), "another run's session directory".into()),
        (around.clone(), "another run's session directory".into()),
        (current.clone(), "bridle's session directory".into()),
    ];
    ctx.masks_may_vanish = vec![other_run.clone(), around.clone()];
    let spec = plan(&policy, &ctx).unwrap().spec;
    for path in [&other_run, &around, &current] {
        assert!(spec.masked_paths.contains(path), "{}", path.display());
    }
    assert_eq!(spec.masks_may_vanish, [around, other_run.clone()]);

    // Without the escalation, danger-full-access masks nothing, so nothing may vanish either.
    ctx.escalated_from = None;
    let spec = plan(&policy, &ctx).unwrap().spec;
    assert!(spec.masked_paths.is_empty() && spec.masks_may_vanish.is_empty());

    // A session's own plan masks them all, and leaves which may vanish to an escalation's view.
    let policy = load(
        &ShippedOnly,
        &LoadRequest {
            profile: "workstation".into(),
            overrides: Overrides::default(),
            workspace_layer: None,
        },
    )
    .unwrap();
    let spec = plan(&policy, &ctx).unwrap().spec;
    assert_eq!(spec.mode, SandboxMode::WorkspaceWrite);
    assert!(spec.masked_paths.contains(&other_run));
    assert!(
        spec.masks_may_vanish.is_empty(),
        "{:?}",
        spec.masks_may_vanish
    );
}
