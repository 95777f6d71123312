//! Masks written under `~` apply under the account's home from the password database too,
//! when `$HOME` points elsewhere (CI, `sudo`): ssh and other tools keep credentials there.

#![cfg(test)]

mod support;

use std::path::{Path, PathBuf};

use bridle_policy::{AccountHome, Decision, Origin, plan};

use support::{HOME, ctx, shipped, shipped_plan, shipped_text};

const ACCOUNT: &str = "/var/lib/dev";

#[test]
fn home_relative_masks_apply_under_the_account_home_when_home_points_elsewhere() {
    let mut ctx = ctx();
    ctx.account_home = Some(PathBuf::from(ACCOUNT));
    for profile in ["read-only", "workspace-write", "ci-locked"] {
        let masked = plan(&shipped(profile), &ctx).unwrap().spec.masked_paths;
        for store in [".ssh", ".aws", ".config/gh", ".m2/settings.xml"] {
            assert!(
                masked.contains(&Path::new(ACCOUNT).join(store)),
                "{profile}: {store}"
            );
            assert!(
                masked.contains(&Path::new(HOME).join(store)),
                "{profile}: {store}"
            );
        }
        let defaults = shipped_plan(profile).spec.masked_paths;
        assert_eq!(masked.len(), 2 * defaults.len(), "{profile}: {masked:?}");
    }
}

#[test]
fn a_mask_under_the_account_home_names_its_entry_and_that_home() {
    let mut ctx = ctx();
    ctx.account_home = Some(PathBuf::from(ACCOUNT));
    let plan = plan(&shipped("workspace-write"), &ctx).unwrap();
    let at = support::origin_of(
        "profiles/workspace-write.yaml",
        shipped_text("workspace-write"),
        "~/.aws",
    );
    let aws = Path::new(ACCOUNT).join(".aws");
    let expected = Origin::AccountHome(Box::new(AccountHome {
        home: PathBuf::from(ACCOUNT),
        entry: "~/.aws".into(),
        at,
    }));
    assert_eq!(plan.origin_of(&aws), expected);
    let shown = expected.to_string();
    assert!(
        shown.contains("`~/.aws`") && shown.contains(ACCOUNT),
        "{shown}"
    );
    assert_eq!(
        plan.decide_write(&aws.join("credentials")).decision,
        Decision::Deny
    );
}
