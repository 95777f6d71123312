//! Roots planning refuses whatever the profile says about dangerous roots' other reasons:
//! bridle's temp directory (its private temp dirs, cache homes and protect records) and the
//! kernel's pseudo filesystems are never a workspace or a writable root.

#![cfg(test)]

mod support;

use std::path::Path;

use bridle_policy::{LoadRequest, Overrides, Policy, PolicyError, ShippedOnly, load, plan};

use support::{ctx, ctx_in, request, shipped};

fn with_allow_write(dirs: &[&str]) -> Policy {
    load(
        &ShippedOnly,
        &LoadRequest {
            overrides: Overrides {
                allow_write: dirs.iter().map(|d| (*d).to_owned()).collect(),
                ..Overrides::default()
            },
            ..request("workspace-write")
        },
    )
    .unwrap()
}

#[test]
fn a_writable_root_around_or_inside_the_temp_base_is_refused() {
    // The support context's temp base is /var/tmp/bridle-1000.
    for root in [
        "/var/tmp",
        "/var/tmp/bridle-1000",
        "/var/tmp/bridle-1000/protect/pending",
        "/var/tmp/bridle-1000/cache/other-workspace",
    ] {
        let err = plan(&with_allow_write(&[root]), &ctx()).unwrap_err();
        match &err {
            PolicyError::TempBaseInWritableRoot { what, path, base } => {
                assert_eq!(*what, "writable root");
                assert_eq!(path, Path::new(root));
                assert_eq!(base, Path::new("/var/tmp/bridle-1000"));
            }
            other => panic!("{root}: expected TempBaseInWritableRoot, got {other:?}"),
        }
        assert!(err.to_string().contains(root), "{err}");
    }
    // A sibling with a longer name is not inside it.
    assert!(plan(&with_allow_write(&["/var/tmp/bridle-10000"]), &ctx()).is_ok());
}

#[test]
fn a_workspace_around_the_temp_base_is_refused() {
    let err = plan(&shipped("workspace-write"), &ctx_in("/var/tmp")).unwrap_err();
    assert!(
        matches!(
            &err,
            PolicyError::TempBaseInWritableRoot {
                what: "workspace root",
                ..
            }
        ),
        "{err:?}"
    );
}

#[test]
fn pseudo_filesystems_are_never_roots() {
    for root in [
        "/proc",
        "/proc/1",
        "/sys",
        "/sys/fs/cgroup",
        "/dev",
        "/dev/shm",
    ] {
        let err = plan(&with_allow_write(&[root]), &ctx()).unwrap_err();
        assert!(
            matches!(
                &err,
                PolicyError::PseudoFilesystemRoot {
                    what: "writable root",
                    ..
                }
            ),
            "{root}: {err:?}"
        );
        assert!(err.to_string().contains("kernel interface"), "{err}");
    }
    let err = plan(&shipped("read-only"), &ctx_in("/proc/self")).unwrap_err();
    assert!(
        matches!(
            &err,
            PolicyError::PseudoFilesystemRoot {
                what: "workspace root",
                ..
            }
        ),
        "{err:?}"
    );
    // Only whole components count.
    assert!(plan(&with_allow_write(&["/devel"]), &ctx()).is_ok());
}
