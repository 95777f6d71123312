//! Every shipped profile loads, plans and matches its snapshot; the snapshots themselves are
//! checked against the guarantees table of `shared/spec/sandbox.md`.

#![cfg(test)]

mod support;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use bridle_policy::{
    FsProfileSource, Guarantee, LoadRequest, Network, Overrides, SHIPPED, SandboxMode,
    SeccompProfile, ShippedOnly, load,
};
use pretty_assertions::assert_eq;

use support::{HOME, TEMP, WORKSPACE, shipped, shipped_plan};

fn profiles_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../profiles")
}

#[test]
fn every_shipped_profile_plans_to_its_snapshot() {
    for (name, _) in SHIPPED {
        let plan = shipped_plan(name);
        insta::assert_yaml_snapshot!(format!("spec-{name}"), plan.spec);
    }
}

#[test]
fn ci_locked_entries_show_where_each_value_was_set() {
    insta::assert_yaml_snapshot!("entries-ci-locked", shipped("ci-locked").entries());
}

#[test]
fn every_file_in_the_profiles_directory_is_shipped_verbatim() {
    let mut on_disk = BTreeSet::new();
    for entry in std::fs::read_dir(profiles_dir()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "yaml" || e == "yml") {
            let name = path.file_stem().unwrap().to_str().unwrap().to_owned();
            let text = std::fs::read_to_string(&path).unwrap();
            let embedded = support::shipped_text(&name);
            assert_eq!(embedded, text, "{name} differs from the embedded copy");
            on_disk.insert(name);
        }
    }
    let shipped: BTreeSet<String> = SHIPPED.iter().map(|(n, _)| (*n).to_owned()).collect();
    assert_eq!(shipped, on_disk);
}

#[test]
fn shipped_profiles_load_from_disk_the_same_as_embedded() {
    for (name, _) in SHIPPED {
        let path = profiles_dir().join(format!("{name}.yaml"));
        let from_disk = load(
            &FsProfileSource,
            &LoadRequest {
                profile: path.display().to_string(),
                overrides: Overrides::default(),
                workspace_layer: None,
            },
        )
        .unwrap_or_else(|e| panic!("{name}: {e}"));
        let embedded = shipped(name);
        assert_eq!(embedded.mode.value, from_disk.mode.value, "{name}");
        assert_eq!(
            embedded.command_rules.len(),
            from_disk.command_rules.len(),
            "{name}"
        );
        assert_eq!(
            without_list_origins(support::plan_fixed(&embedded).spec),
            without_list_origins(support::plan_fixed(&from_disk).spec),
            "{name}"
        );
    }
}

/// The spec with the allow-list's origins (which name the file as it was loaded) cleared.
fn without_list_origins(mut spec: bridle_policy::SandboxSpec) -> bridle_policy::SandboxSpec {
    // The rules the spec carries for the exec supervisor, likewise.
    for rule in spec
        .exec_rules
        .iter_mut()
        .flat_map(|r| r.rules_mut().iter_mut())
    {
        rule.origin = bridle_policy::Origin::Builtin;
    }
    if let Some(list) = &mut spec.allow_list {
        for entry in list.allow.iter_mut().chain(list.deny.iter_mut()) {
            entry.origin = bridle_policy::Origin::Builtin;
        }
        for pin in &mut list.resolve {
            pin.origin = bridle_policy::Origin::Builtin;
        }
    }
    spec
}

/// Every shipped profile's commented `network:` example, uncommented, is a valid layer on top
/// of that profile: the examples cannot go stale.
#[test]
fn commented_network_examples_in_shipped_profiles_load() {
    let mut checked = 0;
    for (name, text) in SHIPPED {
        let lines: Vec<&str> = text.lines().collect();
        let Some(start) = lines.iter().position(|l| *l == "# network:") else {
            continue;
        };
        let example: String = lines[start..]
            .iter()
            .take_while(|l| {
                l.starts_with("# ") && (l.starts_with("# network:") || l.starts_with("#  "))
            })
            .map(|l| format!("{}\n", &l[2..]))
            .collect();
        let layer = format!("extends: {name}\napproval: never\n{example}");
        let source = support::MemSource::new().with("example.yaml", layer.as_str());
        let policy = load(&source, &support::request("example.yaml")).unwrap_or_else(|e| {
            panic!("{name}: the commented example does not load: {e}\n{layer}")
        });
        let plan = support::plan_fixed(&policy);
        assert_eq!(plan.spec.network, Network::AllowList, "{name}");
        assert_eq!(
            plan.decide_connect("crates.io", 443).decision,
            bridle_policy::Decision::Allow,
            "{name}"
        );
        assert_eq!(
            plan.decide_connect("x.example.invalid", 443).decision,
            bridle_policy::Decision::Deny,
            "{name}"
        );
        checked += 1;
    }
    assert!(checked >= 4, "only {checked} profiles carry the example");
}

#[test]
fn ci_registries_allows_the_public_registries_and_nothing_else() {
    let plan = shipped_plan("ci-registries");
    for (host, port) in [
        ("index.crates.io", 443),
        ("static.crates.io", 443),
        ("static.rust-lang.org", 443),
        ("pypi.org", 443),
        ("files.pythonhosted.org", 443),
        ("registry.npmjs.org", 443),
        ("proxy.golang.org", 443),
        ("sum.golang.org", 443),
        ("github.com", 443),
        ("codeload.github.com", 443),
    ] {
        assert_eq!(
            plan.decide_connect(host, port).decision,
            bridle_policy::Decision::Allow,
            "{host}:{port}"
        );
    }
    for (host, port) in [
        ("github.com", 80),
        ("github.com", 22),
        ("gist.github.com", 443),
        ("example.com", 443),
        ("169.254.169.254", 80),
    ] {
        assert_eq!(
            plan.decide_connect(host, port).decision,
            bridle_policy::Decision::Deny,
            "{host}:{port}"
        );
    }
    let rules: Vec<&str> = plan.command_rules.iter().map(|r| r.id.as_str()).collect();
    assert!(!rules.contains(&"deny-network-clients"), "{rules:?}");
    assert!(rules.contains(&"deny-git-push") && rules.contains(&"deny-package-publish"));
}

#[test]
fn every_shipped_profile_records_the_kernel_abi_it_was_tested_with() {
    for (name, _) in SHIPPED {
        let abi = shipped(name).tested_kernel_abi;
        assert!(
            abi.is_some_and(|a| a.value >= 1),
            "{name} has no tested_kernel_abi"
        );
    }
}

#[test]
fn shipped_profiles_scrub_secrets_and_keep_ordinary_variables() {
    for (name, _) in SHIPPED {
        let env = shipped_plan(name).spec.env;
        for secret in [
            "GITHUB_TOKEN",
            "AWS_SECRET_ACCESS_KEY",
            "SSH_AUTH_SOCK",
            "MY_API_KEY",
        ] {
            assert!(!env.contains_key(secret), "{name} passes {secret}");
        }
        for kept in ["PATH", "HOME", "LANG", "LC_ALL", "EDITOR"] {
            assert!(env.contains_key(kept), "{name} drops {kept}");
        }
    }
}

#[test]
fn shipped_profiles_export_the_private_temp_dir() {
    for (name, _) in SHIPPED {
        let spec = shipped_plan(name).spec;
        assert_eq!(spec.temp_dir, Path::new(TEMP), "{name}");
        for var in ["TMPDIR", "TMP", "TEMP", "TEMPDIR"] {
            assert_eq!(
                spec.env.get(var).map(String::as_str),
                Some(TEMP),
                "{name} {var}"
            );
        }
        assert_eq!(
            spec.private_tmp,
            spec.mode != SandboxMode::DangerFullAccess,
            "{name}"
        );
    }
}

#[test]
fn shipped_profiles_require_the_guarantees_of_their_mode() {
    use Guarantee::*;
    let confined = [
        FsWrite, FsProtect, FsMask, Net, Ipc, Proc, Priv, Tty, Tree, Fd, Env,
    ];
    let expected: [(&str, Vec<Guarantee>); 6] = [
        (
            "read-only",
            vec![FsWrite, FsMask, Net, Ipc, Proc, Priv, Tty, Tree, Fd, Env],
        ),
        ("workspace-write", confined.to_vec()),
        ("danger-full-access", vec![Tree, Fd, Env]),
        ("workstation", confined.to_vec()),
        (
            "ci-locked",
            vec![
                FsWrite, FsProtect, FsMask, Net, Ipc, Proc, Priv, Tty, Tree, Fd, Env, Res,
            ],
        ),
        (
            "ci-registries",
            vec![
                FsWrite, FsProtect, FsMask, Net, Ipc, Proc, Priv, Tty, Tree, Fd, Env, Res,
            ],
        ),
    ];
    assert_eq!(expected.len(), SHIPPED.len());
    for (name, guarantees) in expected {
        assert_eq!(shipped_plan(name).spec.guarantees, guarantees, "{name}");
    }
}

#[test]
fn shipped_profiles_pick_network_and_seccomp_by_mode() {
    for (name, network, seccomp) in [
        ("read-only", Network::Off, SeccompProfile::ConfinedNoNetwork),
        (
            "workspace-write",
            Network::Off,
            SeccompProfile::ConfinedNoNetwork,
        ),
        ("danger-full-access", Network::On, SeccompProfile::None),
        (
            "workstation",
            Network::Off,
            SeccompProfile::ConfinedNoNetwork,
        ),
        ("ci-locked", Network::Off, SeccompProfile::ConfinedNoNetwork),
        (
            "ci-registries",
            Network::AllowList,
            SeccompProfile::ConfinedAllowList,
        ),
    ] {
        let spec = shipped_plan(name).spec;
        assert_eq!((spec.network, spec.seccomp), (network, seccomp), "{name}");
    }
}

#[test]
fn every_confined_profile_masks_the_credential_stores() {
    // Issue 8: what the agent reads can reach the model provider, so the defaults mask the
    // credential stores peers forget too (npm, PyPI, cargo, gcloud, Azure, docker).
    let expected: Vec<PathBuf> = [
        ".aws",
        ".azure",
        ".cargo/credentials",
        ".cargo/credentials.toml",
        ".config/containers/auth.json",
        ".config/gcloud",
        ".config/gh",
        ".config/git/credentials",
        ".config/hub",
        ".docker/config.json",
        ".gem/credentials",
        ".git-credentials",
        ".gnupg",
        ".kube",
        ".local/share/keyrings",
        ".m2/settings.xml",
        ".netrc",
        ".npmrc",
        ".password-store",
        ".pypirc",
        ".ssh",
        ".terraform.d/credentials.tfrc.json",
        ".vault-token",
    ]
    .iter()
    .map(|p| Path::new(HOME).join(p))
    .collect();
    for name in [
        "read-only",
        "workspace-write",
        "workstation",
        "ci-locked",
        "ci-registries",
    ] {
        assert_eq!(shipped_plan(name).spec.masked_paths, expected, "{name}");
    }
    assert_eq!(
        shipped_plan("danger-full-access").spec.masked_paths,
        Vec::<PathBuf>::new()
    );
}

#[test]
fn protected_paths_are_absolute_and_under_the_workspace() {
    let expected: Vec<PathBuf> = [".bridle", ".git/config", ".git/hooks"]
        .iter()
        .map(|p| Path::new(WORKSPACE).join(p))
        .collect();
    for name in [
        "workspace-write",
        "workstation",
        "ci-locked",
        "ci-registries",
    ] {
        assert_eq!(shipped_plan(name).spec.protected_paths, expected, "{name}");
    }
    for name in ["read-only", "danger-full-access"] {
        assert_eq!(
            shipped_plan(name).spec.protected_paths,
            Vec::<PathBuf>::new(),
            "{name}"
        );
    }
}

#[test]
fn writable_roots_follow_the_mode() {
    let confined_write = vec![
        PathBuf::from(WORKSPACE),
        PathBuf::from(TEMP),
        PathBuf::from("/dev/null"),
    ];
    for (name, roots) in [
        (
            "read-only",
            vec![PathBuf::from(TEMP), PathBuf::from("/dev/null")],
        ),
        ("workspace-write", confined_write.clone()),
        ("danger-full-access", vec![]),
        ("workstation", confined_write.clone()),
        ("ci-locked", confined_write.clone()),
        ("ci-registries", confined_write),
    ] {
        assert_eq!(shipped_plan(name).spec.writable_roots, roots, "{name}");
    }
}

#[test]
fn ci_locked_limits_are_set_in_bytes_and_seconds() {
    let limits = shipped_plan("ci-locked").spec.limits;
    assert_eq!(limits.processes, Some(512));
    assert_eq!(limits.memory_bytes, Some(8 << 30));
    assert_eq!(limits.file_size_bytes, Some(2 << 30));
    assert_eq!(limits.open_files, Some(4096));
    assert_eq!(limits.cpu_time_secs, Some(3600));
    assert_eq!(limits.wall_time_secs, Some(7200));
    assert_eq!(limits.command_timeout_secs, Some(600));
    assert_eq!(limits.command_timeout_max_secs, Some(1800));
    assert_eq!(
        limits.spill_size_bytes,
        Some(64 << 20),
        "the built-in default"
    );
}

#[test]
fn shipped_only_source_refuses_file_references() {
    let err = load(&ShippedOnly, &support::request("./mine.yaml")).unwrap_err();
    assert!(
        matches!(&err, bridle_policy::PolicyError::UnknownProfile { name, .. } if name == "./mine.yaml"),
        "{err:?}"
    );
    assert!(err.to_string().contains("ci-locked"), "{err}");
}
