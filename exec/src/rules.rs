//! Pre-execute rules for tool calls: the profile's command-prefix and path rules decide
//! `allow` / `ask` / `deny` before anything runs; the strictest decision wins.

use bridle_policy::{DecidedBy, Decision, Plan, Verdict};

use crate::shell_split;

/// The verdict for a `bash -c` command line: every simple command is checked against the
/// command rules (looking through `env`, `sudo`, `timeout` and the like), and a line the
/// splitter cannot fully see is at least `ask`.
pub fn check_bash(plan: &Plan, command: &str) -> Verdict {
    let split = shell_split::split(command);
    if split.commands.is_empty() && split.opaque.is_empty() {
        return Verdict {
            decision: Decision::Deny,
            by: DecidedBy::Default,
            reason: "empty command denied".into(),
        };
    }
    let mut verdict = Verdict {
        decision: Decision::Allow,
        by: DecidedBy::Default,
        reason: format!(
            "no rule matched; it runs confined (mode {})",
            plan.spec.mode
        ),
    };
    for argv in &split.commands {
        let v = plan.decide_exec(argv);
        if v.decision > verdict.decision {
            verdict = v;
        }
    }
    if !split.opaque.is_empty() && verdict.decision < Decision::Ask {
        let mut what = split.opaque.clone();
        what.dedup();
        verdict = Verdict {
            decision: Decision::Ask,
            by: DecidedBy::Default,
            reason: format!(
                "needs approval: the command uses {} which the rule checker cannot see through",
                what.join(", ")
            ),
        };
    }
    verdict
}

#[cfg(test)]
mod tests {
    use bridle_policy::{LoadRequest, Overrides, PlanContext, ShippedOnly, load, plan};

    use super::*;

    fn ci_locked() -> Plan {
        let policy = load(
            &ShippedOnly,
            &LoadRequest {
                profile: "ci-locked".into(),
                overrides: Overrides::default(),
                workspace_layer: None,
            },
        )
        .unwrap();
        let ctx = PlanContext {
            workspace: "/home/dev/project".into(),
            home: "/home/dev".into(),
            state_dir: "/home/dev/.local/state/bridle".into(),
            config_dir: "/home/dev/.config/bridle".into(),
            temp_dir: "/var/tmp/bridle-1000/s".into(),
            cache_root: None,
            host_env: Default::default(),
        };
        plan(&policy, &ctx).unwrap()
    }

    #[test]
    fn git_push_inside_a_compound_command_is_denied() {
        let plan = ci_locked();
        for line in [
            "cd x && git push",
            "echo hi; git push origin main",
            "(cd x && git push)",
            "true | env A=1 git push",
        ] {
            let v = check_bash(&plan, line);
            assert_eq!(v.decision, Decision::Deny, "{line}");
            assert!(
                matches!(&v.by, DecidedBy::Rule { id, .. } if id == "deny-git-push"),
                "{line}: {v:?}"
            );
        }
    }

    #[test]
    fn plain_commands_are_allowed_and_opaque_ones_ask() {
        let plan = ci_locked();
        assert_eq!(
            check_bash(&plan, "cargo build && cargo test").decision,
            Decision::Allow
        );
        let v = check_bash(&plan, "echo $(date)");
        assert_eq!(v.decision, Decision::Ask);
        assert!(v.reason.contains("command substitution"), "{}", v.reason);
        // A denial still wins over an opaque part.
        assert_eq!(
            check_bash(&plan, "echo $(date); git push").decision,
            Decision::Deny
        );
        assert_eq!(check_bash(&plan, "   ").decision, Decision::Deny);
    }
}
