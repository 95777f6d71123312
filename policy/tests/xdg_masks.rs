//! Masks under a default XDG base directory (`~/.config/gh`) follow the person's environment:
//! when `$XDG_CONFIG_HOME` (or `$XDG_DATA_HOME`) moves the directory, the store there is masked
//! too, with provenance naming the entry and the variable.

#![cfg(test)]

mod support;

use std::path::{Path, PathBuf};

use bridle_policy::{DecidedBy, Decision, Origin, PlanContext, XdgMoved, plan};

use support::{HOME, ctx, load_with_workspace, shipped, shipped_plan, shipped_text};

fn ctx_with(vars: &[(&str, &str)]) -> PlanContext {
    let mut ctx = ctx();
    for (k, v) in vars {
        ctx.host_env.insert((*k).to_owned(), (*v).to_owned());
    }
    ctx
}

fn masked_with(profile: &str, vars: &[(&str, &str)]) -> Vec<PathBuf> {
    plan(&shipped(profile), &ctx_with(vars))
        .unwrap_or_else(|e| panic!("{e}"))
        .spec
        .masked_paths
}

#[test]
fn credential_stores_under_an_absolute_xdg_config_home_are_masked_too() {
    let vars = [
        ("XDG_CONFIG_HOME", "/home/dev/xdg"),
        ("XDG_DATA_HOME", "/srv/data/"),
    ];
    for profile in [
        "read-only",
        "workspace-write",
        "workstation",
        "ci-locked",
        "ci-registries",
    ] {
        let masked = masked_with(profile, &vars);
        for path in [
            "/home/dev/xdg/gh",
            "/home/dev/xdg/hub",
            "/home/dev/xdg/gcloud",
            "/home/dev/xdg/git/credentials",
            "/home/dev/xdg/containers/auth.json",
            "/srv/data/keyrings",
        ] {
            assert!(masked.contains(&PathBuf::from(path)), "{profile}: {path}");
        }
        // The default places stay masked: a tool may still look there.
        let home = Path::new(HOME);
        for path in [
            ".config/gh",
            ".config/git/credentials",
            ".local/share/keyrings",
        ] {
            assert!(masked.contains(&home.join(path)), "{profile}: {path}");
        }
        let defaults = shipped_plan(profile).spec.masked_paths;
        assert_eq!(masked.len(), defaults.len() + 6, "{profile}: {masked:?}");
    }
}

#[test]
fn a_mask_moved_by_xdg_config_home_names_its_entry_and_the_variable() {
    let plan = plan(
        &shipped("workspace-write"),
        &ctx_with(&[("XDG_CONFIG_HOME", "/home/dev/xdg")]),
    )
    .unwrap();
    let moved = Path::new("/home/dev/xdg/gh");
    let at = support::origin_of(
        "profiles/workspace-write.yaml",
        shipped_text("workspace-write"),
        "~/.config/gh",
    );
    let expected = Origin::Xdg(Box::new(XdgMoved {
        var: "XDG_CONFIG_HOME".into(),
        entry: "~/.config/gh".into(),
        at: at.clone(),
    }));
    assert_eq!(plan.origin_of(moved), expected);
    assert_eq!(plan.origin_of(&Path::new(HOME).join(".config/gh")), at);
    let shown = expected.to_string();
    assert!(
        shown.contains("profiles/workspace-write.yaml:")
            && shown.contains("`~/.config/gh`")
            && shown.contains("$XDG_CONFIG_HOME"),
        "{shown}"
    );
    let verdict = plan.decide_write(&moved.join("hosts.yml"));
    assert_eq!(verdict.decision, Decision::Deny);
    assert!(
        matches!(&verdict.by, DecidedBy::MaskedPath { path, .. } if path == moved),
        "{verdict:?}"
    );
    assert!(
        verdict.reason.contains("$XDG_CONFIG_HOME"),
        "{}",
        verdict.reason
    );
}

#[test]
fn a_relative_empty_or_default_xdg_base_adds_no_mask() {
    let defaults = shipped_plan("workspace-write").spec.masked_paths;
    for (config, data) in [
        ("", ""),
        ("xdg", "data"),
        ("./xdg", "./data"),
        ("../etc", "../srv"),
        ("/home/dev/.config", "/home/dev/.local/share"),
        ("/home/dev/.config/", "/home/dev/./.local/share"),
    ] {
        assert_eq!(
            masked_with(
                "workspace-write",
                &[("XDG_CONFIG_HOME", config), ("XDG_DATA_HOME", data)]
            ),
            defaults,
            "XDG_CONFIG_HOME={config:?} XDG_DATA_HOME={data:?}"
        );
    }
}

#[test]
fn danger_full_access_masks_nothing_whatever_xdg_config_home_says() {
    assert_eq!(
        masked_with(
            "danger-full-access",
            &[("XDG_CONFIG_HOME", "/home/dev/xdg")]
        ),
        Vec::<PathBuf>::new()
    );
}

#[test]
fn removing_a_default_mask_removes_it_under_xdg_config_home_too() {
    let policy = load_with_workspace("workspace-write", "masked_paths: [~/.config/extra]\n")
        .unwrap_or_else(|e| panic!("{e}"));
    let masked = plan(&policy, &ctx_with(&[("XDG_CONFIG_HOME", "/x")]))
        .unwrap()
        .spec
        .masked_paths;
    assert!(masked.contains(&PathBuf::from("/x/extra")), "{masked:?}");

    let text = "extends: workspace-write\nmasked_paths: {remove: [~/.config/gh]}\n";
    let policy = support::load_text(text).unwrap_or_else(|e| panic!("{e}"));
    let masked = plan(&policy, &ctx_with(&[("XDG_CONFIG_HOME", "/x")]))
        .unwrap()
        .spec
        .masked_paths;
    assert!(!masked.contains(&PathBuf::from("/x/gh")), "{masked:?}");
    assert!(!masked.contains(&Path::new(HOME).join(".config/gh")));
    assert!(masked.contains(&PathBuf::from("/x/git/credentials")));
}
