//! The tool layer's questions: may this path be written, may this command run. Each verdict
//! names what decided it.

#![cfg(test)]

mod support;

use std::path::{Path, PathBuf};

use bridle_policy::{DecidedBy, Decision, Origin, Plan, SandboxMode, Verdict};
use pretty_assertions::assert_eq;

use support::{
    HOME, TEMP, WORKSPACE, argv, load_text, origin_of, plan_fixed, shipped_plan, shipped_text,
};

fn write(plan: &Plan, path: &str) -> Verdict {
    plan.decide_write(Path::new(path))
}

fn exec(plan: &Plan, cmd: &str) -> Verdict {
    plan.decide_exec(&argv(cmd))
}

fn ci(needle: &str) -> Origin {
    origin_of("profiles/ci-locked.yaml", shipped_text("ci-locked"), needle)
}

fn ws(needle: &str) -> Origin {
    origin_of(
        "profiles/workstation.yaml",
        shipped_text("workstation"),
        needle,
    )
}

fn rule(id: &str, origin: Origin) -> DecidedBy {
    DecidedBy::Rule {
        id: id.to_owned(),
        origin,
        seen_as: None,
    }
}

fn custom(text: &str) -> Plan {
    plan_fixed(&load_text(text).unwrap_or_else(|e| panic!("{e}")))
}

// --- writes -----------------------------------------------------------------------------------

#[test]
fn write_inside_the_workspace_is_allowed_by_the_workspace_root() {
    let plan = shipped_plan("workstation");
    let verdict = write(&plan, "/home/dev/project/src/main.rs");
    assert_eq!(
        verdict,
        Verdict {
            decision: Decision::Allow,
            by: DecidedBy::WritableRoot {
                root: PathBuf::from(WORKSPACE)
            },
            reason: "write to `/home/dev/project/src/main.rs` allowed: inside writable root `/home/dev/project`".into(),
        }
    );
}

#[test]
fn relative_write_is_taken_relative_to_the_workspace() {
    let plan = shipped_plan("workspace-write");
    let verdict = write(&plan, "src/lib.rs");
    assert_eq!(verdict.decision, Decision::Allow);
    assert!(
        verdict.reason.contains("`/home/dev/project/src/lib.rs`"),
        "{}",
        verdict.reason
    );
}

#[test]
fn write_outside_every_writable_root_is_denied() {
    let plan = shipped_plan("workstation");
    for path in [
        "/etc/passwd",
        "/home/dev/other/x",
        "/home/dev/projectile/x",
        "/usr/bin/git",
        HOME,
    ] {
        let verdict = write(&plan, path);
        assert_eq!(verdict.decision, Decision::Deny, "{path}");
        assert_eq!(verdict.by, DecidedBy::OutsideWritableRoots, "{path}");
        assert!(
            verdict
                .reason
                .contains("outside every writable root (mode workspace-write)"),
            "{}",
            verdict.reason
        );
    }
}

#[test]
fn dotdot_escape_is_normalised_and_denied() {
    let plan = shipped_plan("workstation");
    let verdict = write(&plan, "/home/dev/project/../.bashrc");
    assert_eq!(verdict.decision, Decision::Deny);
    assert_eq!(verdict.by, DecidedBy::OutsideWritableRoots);
    assert!(
        verdict
            .reason
            .starts_with("write to `/home/dev/.bashrc` denied"),
        "{}",
        verdict.reason
    );
    for path in [
        "../../etc/cron.d/x",
        "src/../../x",
        "/home/dev/project/a/../../../../../etc/x",
    ] {
        assert_eq!(write(&plan, path).decision, Decision::Deny, "{path}");
    }
    // `..` that stays inside is fine.
    assert_eq!(write(&plan, "src/../README.md").decision, Decision::Allow);
}

#[test]
fn write_to_a_git_hook_is_denied_naming_the_protected_path() {
    let plan = shipped_plan("workstation");
    let verdict = write(&plan, "/home/dev/project/.git/hooks/pre-commit");
    assert_eq!(verdict.decision, Decision::Deny);
    assert_eq!(
        verdict.by,
        DecidedBy::ProtectedPath {
            path: PathBuf::from("/home/dev/project/.git/hooks"),
            origin: Origin::Builtin,
        }
    );
    assert_eq!(
        verdict.reason,
        "write to `/home/dev/project/.git/hooks/pre-commit` denied: inside protected path `/home/dev/project/.git/hooks` (built-in default)"
    );
    for path in [".git/config", ".bridle/profile.yaml", ".git/hooks"] {
        assert_eq!(write(&plan, path).decision, Decision::Deny, "{path}");
    }
    // The rest of .git stays writable so commits work.
    for path in [".git/index", ".git/objects/ab/cdef", ".git/refs/heads/main"] {
        assert_eq!(write(&plan, path).decision, Decision::Allow, "{path}");
    }
}

#[test]
fn protected_path_from_a_profile_names_its_origin() {
    let text = "extends: workspace-write\nprotected_paths: [Cargo.lock]\n";
    let plan = custom(text);
    let verdict = write(&plan, "Cargo.lock");
    assert_eq!(
        verdict.by,
        DecidedBy::ProtectedPath {
            path: PathBuf::from("/home/dev/project/Cargo.lock"),
            origin: origin_of("p.yaml", text, "Cargo.lock"),
        }
    );
    assert!(
        verdict.reason.contains("(p.yaml:2:19)"),
        "{}",
        verdict.reason
    );
}

#[test]
fn write_into_a_masked_credential_store_is_denied() {
    let plan = shipped_plan("workstation");
    let ww = |needle: &str| {
        origin_of(
            "profiles/workspace-write.yaml",
            shipped_text("workspace-write"),
            needle,
        )
    };
    let verdict = write(&plan, "/home/dev/.ssh/id_rsa");
    assert_eq!(verdict.decision, Decision::Deny);
    assert_eq!(
        verdict.by,
        DecidedBy::MaskedPath {
            path: PathBuf::from("/home/dev/.ssh"),
            origin: ww("~/.ssh"),
        }
    );
    assert!(
        verdict
            .reason
            .contains("masked path `/home/dev/.ssh` (profiles/workspace-write.yaml:20:5)"),
        "{}",
        verdict.reason
    );
    assert_eq!(
        write(&plan, "/home/dev/.sshx").by,
        DecidedBy::OutsideWritableRoots
    );
}

#[test]
fn masked_path_inside_the_workspace_is_denied_even_though_the_root_is_writable() {
    let plan = custom("extends: workspace-write\nmasked_paths: [secrets]\n");
    let verdict = write(&plan, "secrets/prod.key");
    assert_eq!(verdict.decision, Decision::Deny);
    assert!(
        matches!(verdict.by, DecidedBy::MaskedPath { .. }),
        "{verdict:?}"
    );
}

#[test]
fn dotenv_write_asks_by_path_rule() {
    let plan = shipped_plan("workstation");
    for path in [
        ".env",
        "app/.env.local",
        "/home/dev/project/deep/er/.env.production",
    ] {
        let verdict = write(&plan, path);
        assert_eq!(verdict.decision, Decision::Ask, "{path}");
        assert_eq!(
            verdict.by,
            rule("ask-env-files", ws("ask-env-files")),
            "{path}"
        );
        assert!(
            verdict
                .reason
                .contains("needs approval by rule `ask-env-files`"),
            "{}",
            verdict.reason
        );
        assert!(
            verdict
                .reason
                .ends_with(": .env files usually hold credentials"),
            "{}",
            verdict.reason
        );
    }
    assert_eq!(write(&plan, "src/environment.rs").decision, Decision::Allow);
}

#[test]
fn deny_path_rule_beats_the_writable_root() {
    let text = "extends: workspace-write\nrules:\n  paths:\n    - {id: no-migrations, pattern: 'db/migrations/**', decision: deny}\n    - {id: ask-db, pattern: 'db/**', decision: ask}\n";
    let plan = custom(text);
    let verdict = write(&plan, "db/migrations/001.sql");
    assert_eq!(verdict.decision, Decision::Deny);
    assert_eq!(
        verdict.by,
        rule("no-migrations", origin_of("p.yaml", text, "no-migrations"))
    );
    assert_eq!(write(&plan, "db/seed.sql").decision, Decision::Ask);
    assert_eq!(write(&plan, "src/db.rs").decision, Decision::Allow);
}

#[test]
fn allow_path_rule_cannot_open_a_denied_path() {
    let plan = custom(
        "extends: workspace-write\nrules:\n  paths:\n    - {id: etc-ok, pattern: '/etc/**', decision: allow}\n    - {id: hooks-ok, pattern: '.git/hooks/*', decision: allow}\n",
    );
    assert_eq!(
        write(&plan, "/etc/hosts").by,
        DecidedBy::OutsideWritableRoots
    );
    assert!(matches!(
        write(&plan, ".git/hooks/pre-push").by,
        DecidedBy::ProtectedPath { .. }
    ));
}

#[test]
fn absolute_path_rule_applies_outside_the_workspace_too() {
    let plan = custom(
        "extends: workspace-write\nrules:\n  paths:\n    - {id: no-tmp-sh, pattern: '/tmp/**/*.sh', decision: deny}\n",
    );
    let verdict = write(&plan, &format!("{TEMP}/run.sh"));
    assert_eq!(verdict.decision, Decision::Deny);
    assert_eq!(
        write(&plan, &format!("{TEMP}/run.txt")).decision,
        Decision::Allow
    );
}

#[test]
fn danger_mode_allows_writes_anywhere_but_rules_still_apply() {
    let plan = shipped_plan("danger-full-access");
    let verdict = write(&plan, "/etc/passwd");
    assert_eq!(verdict.decision, Decision::Allow);
    assert_eq!(
        verdict.by,
        DecidedBy::Mode {
            mode: SandboxMode::DangerFullAccess
        }
    );
    assert_eq!(
        write(&plan, "/home/dev/.ssh/id_rsa").decision,
        Decision::Allow
    );
    let plan = custom(
        "extends: danger-full-access\nrules:\n  paths:\n    - {id: no-etc, pattern: '/etc/**', decision: deny}\n",
    );
    assert_eq!(write(&plan, "/etc/passwd").decision, Decision::Deny);
}

#[test]
fn read_only_mode_allows_only_the_temp_dir_and_dev_null() {
    let plan = shipped_plan("read-only");
    assert_eq!(write(&plan, "src/main.rs").decision, Decision::Deny);
    assert_eq!(
        write(&plan, &format!("{TEMP}/scratch.txt")).by,
        DecidedBy::WritableRoot {
            root: PathBuf::from(TEMP)
        }
    );
    assert_eq!(write(&plan, "/dev/null").decision, Decision::Allow);
    assert_eq!(write(&plan, "/dev/zero").decision, Decision::Deny);
    assert!(
        write(&plan, "README.md")
            .reason
            .contains("(mode read-only)")
    );
}

#[test]
fn deepest_writable_root_is_named() {
    let plan = custom("extends: workspace-write\nwritable_roots: [target]\n");
    assert_eq!(
        write(&plan, "target/debug/app").by,
        DecidedBy::WritableRoot {
            root: PathBuf::from("/home/dev/project/target")
        }
    );
}

// --- commands -------------------------------------------------------------------------------------

#[test]
fn git_push_is_denied_under_ci_locked_by_its_rule() {
    let plan = shipped_plan("ci-locked");
    let verdict = exec(&plan, "git push origin main");
    assert_eq!(verdict.decision, Decision::Deny);
    assert_eq!(verdict.by, rule("deny-git-push", ci("deny-git-push\n")));
    assert_eq!(
        verdict.reason,
        "`git push origin main` denied by rule `deny-git-push` (profiles/ci-locked.yaml:22:13): CI agents do not publish; the pipeline pushes after review"
    );
}

#[test]
fn wrapped_git_push_is_still_denied() {
    let plan = shipped_plan("ci-locked");
    for (cmd, seen_as) in [
        ("env X=1 git push", "git push"),
        (
            "env -i PATH=/bin git send-pack origin",
            "git send-pack origin",
        ),
        ("nice -n 10 git push", "git push"),
        ("timeout 5 git push", "git push"),
        (
            "nohup /usr/bin/git push --force",
            "/usr/bin/git push --force",
        ),
        ("command git push", "git push"),
        ("git -c alias.p=push p origin", "git push origin"),
        ("env -S 'git push origin'", "git push origin"),
    ] {
        let verdict = exec(&plan, cmd);
        assert_eq!(verdict.decision, Decision::Deny, "{cmd}");
        // The reason says what the rule saw as well as the command.
        assert_eq!(
            verdict.by,
            DecidedBy::Rule {
                id: "deny-git-push".into(),
                origin: ci("deny-git-push\n"),
                seen_as: Some(seen_as.into()),
            },
            "{cmd}"
        );
        assert!(
            verdict
                .reason
                .contains(&format!("(as `{seen_as}`) denied by rule")),
            "{cmd}: {}",
            verdict.reason
        );
    }
    // A command that is what the rule names says nothing more.
    let verdict = exec(&plan, "git push origin main");
    assert_eq!(verdict.by, rule("deny-git-push", ci("deny-git-push\n")));
}

#[test]
fn ordinary_git_is_allowed_by_default() {
    let plan = shipped_plan("ci-locked");
    for cmd in [
        "git status",
        "git commit -m push",
        "git pull",
        "cargo build",
        "ls -la",
    ] {
        let verdict = exec(&plan, cmd);
        assert_eq!(verdict.decision, Decision::Allow, "{cmd}");
        assert_eq!(verdict.by, DecidedBy::Default, "{cmd}");
    }
    assert_eq!(
        exec(&plan, "git status").reason,
        "`git status` allowed: no rule matched; it runs confined (mode workspace-write)"
    );
}

#[test]
fn sudo_is_denied_by_the_workstation_rule() {
    let plan = shipped_plan("ci-locked");
    let verdict = exec(&plan, "sudo ls");
    assert_eq!(verdict.decision, Decision::Deny);
    assert_eq!(verdict.by, rule("deny-sudo", ws("deny-sudo")));
    for cmd in ["doas sh", "/usr/bin/pkexec bash", "su -", "env sudo id"] {
        assert_eq!(exec(&plan, cmd).decision, Decision::Deny, "{cmd}");
    }
    assert_eq!(exec(&plan, "sudoku").decision, Decision::Allow);
}

#[test]
fn network_clients_are_denied_under_ci_locked() {
    let plan = shipped_plan("ci-locked");
    let verdict = exec(&plan, "curl x");
    assert_eq!(verdict.decision, Decision::Deny);
    assert_eq!(
        verdict.by,
        rule("deny-network-clients", ci("deny-network-clients"))
    );
    for cmd in [
        "/usr/bin/wget -q http://x",
        "ssh host",
        "timeout 3 nc -l 80",
    ] {
        assert_eq!(exec(&plan, cmd).decision, Decision::Deny, "{cmd}");
    }
}

#[test]
fn publishing_is_denied_under_ci_locked() {
    let plan = shipped_plan("ci-locked");
    for cmd in [
        "cargo publish",
        "npm publish --access public",
        "gem push x.gem",
    ] {
        assert_eq!(
            exec(&plan, cmd).by,
            rule("deny-package-publish", ci("deny-package-publish")),
            "{cmd}"
        );
    }
}

#[test]
fn git_push_asks_on_a_workstation() {
    let plan = shipped_plan("workstation");
    let verdict = exec(&plan, "git push");
    assert_eq!(verdict.decision, Decision::Ask);
    assert_eq!(verdict.by, rule("ask-git-push", ws("ask-git-push")));
    assert!(
        verdict.reason.contains("needs approval"),
        "{}",
        verdict.reason
    );
}

#[test]
fn strictest_rule_wins_when_several_match() {
    let plan = shipped_plan("workstation");
    // `sudo git push` matches ask-git-push (through the wrapper) and deny-sudo.
    let verdict = exec(&plan, "sudo git push");
    assert_eq!(verdict.decision, Decision::Deny);
    assert_eq!(verdict.by, rule("deny-sudo", ws("deny-sudo")));
}

#[test]
fn empty_command_is_denied() {
    let plan = shipped_plan("ci-locked");
    let verdict = plan.decide_exec(&[]);
    assert_eq!(verdict.decision, Decision::Deny);
    assert_eq!(verdict.by, DecidedBy::Default);
}

#[test]
fn commands_are_allowed_by_default_without_rules() {
    let plan = shipped_plan("read-only");
    let verdict = exec(&plan, "git push");
    assert_eq!(verdict.decision, Decision::Allow);
    assert!(
        verdict.reason.contains("(mode read-only)"),
        "{}",
        verdict.reason
    );
}
