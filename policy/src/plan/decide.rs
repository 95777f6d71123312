//! The decision functions the tool layer calls before anything runs: a write, an exec, a bash
//! script, each against the rules and the plan's paths.

use std::path::Path;

use super::{DecidedBy, Plan, Verdict, normalize};
use crate::origin::Origin;
use crate::rules::{Findings, HiddenParts, PathRule, check_command, check_script, command_verdict};
use crate::shell::{self, Word};
use crate::vocab::{Decision, SandboxMode};

impl Plan {
    /// Where one of the spec's paths (a root, a protected or a masked path) came from.
    pub fn origin_of(&self, path: &Path) -> Origin {
        self.provenance
            .get(path)
            .cloned()
            .unwrap_or(Origin::Builtin)
    }

    /// Decides a write to `path` (absolute and canonicalised by the caller; a relative path is
    /// taken relative to the workspace). Protected and masked paths deny, a path outside every
    /// writable root denies, and path rules can only make the decision stricter.
    pub fn decide_write(&self, path: &Path) -> Verdict {
        let spec = &self.spec;
        let path = if path.is_absolute() {
            normalize(path)
        } else {
            normalize(&spec.workspace.join(path))
        };
        let shown = path.display();
        let mut verdict = if spec.mode == SandboxMode::DangerFullAccess && !spec.protected_kept {
            Verdict {
                decision: Decision::Allow,
                by: DecidedBy::Mode { mode: spec.mode },
                reason: format!(
                    "write to `{shown}` allowed: mode danger-full-access confines nothing"
                ),
            }
        } else if let Some(masked) = spec.masked_paths.iter().find(|m| path.starts_with(m)) {
            let origin = self.origin_of(masked);
            Verdict {
                decision: Decision::Deny,
                reason: format!(
                    "write to `{shown}` denied: inside masked path `{}` ({origin})",
                    masked.display()
                ),
                by: DecidedBy::MaskedPath {
                    path: masked.clone(),
                    origin,
                },
            }
        } else if let Some(protected) = spec
            .protected_paths
            .iter()
            .chain(&spec.must_stay_absent)
            .find(|p| path.starts_with(p))
        {
            let origin = self.origin_of(protected);
            Verdict {
                decision: Decision::Deny,
                reason: format!(
                    "write to `{shown}` denied: inside protected path `{}` ({origin})",
                    protected.display()
                ),
                by: DecidedBy::ProtectedPath {
                    path: protected.clone(),
                    origin,
                },
            }
        } else if spec.mode == SandboxMode::DangerFullAccess {
            Verdict {
                decision: Decision::Allow,
                by: DecidedBy::Mode { mode: spec.mode },
                reason: format!(
                    "write to `{shown}` allowed: mode danger-full-access keeps only the protected paths and bridle's own directories"
                ),
            }
        } else if let Some(root) = spec
            .writable_roots
            .iter()
            .filter(|r| path.starts_with(r))
            .max_by_key(|r| r.as_os_str().len())
        {
            Verdict {
                decision: Decision::Allow,
                reason: format!(
                    "write to `{shown}` allowed: inside writable root `{}`",
                    root.display()
                ),
                by: DecidedBy::WritableRoot { root: root.clone() },
            }
        } else {
            Verdict {
                decision: Decision::Deny,
                reason: format!(
                    "write to `{shown}` denied: outside every writable root (mode {})",
                    spec.mode
                ),
                by: DecidedBy::OutsideWritableRoots,
            }
        };
        let relative = path
            .strip_prefix(&spec.workspace)
            .ok()
            .map(|r| r.display().to_string());
        let absolute = path.display().to_string();
        let strictest = self
            .path_rules
            .iter()
            .filter(|r| r.matches(&absolute, relative.as_deref()))
            .fold(None, |best: Option<&PathRule>, r| match best {
                Some(b) if b.decision >= r.decision => Some(b),
                _ => Some(r),
            });
        if let Some(rule) = strictest
            && rule.decision > verdict.decision
        {
            verdict = rule_verdict(
                &rule.id,
                &rule.origin,
                rule.decision,
                rule.justification.as_deref(),
                &format!("write to `{shown}`"),
                None,
            );
        }
        verdict
    }

    /// Decides running `argv` (one program and its arguments, as `bridle exec` and a kernel
    /// exec supervisor see it). Command rules are matched through wrappers, shells' `-c`
    /// scripts and programs' global options (see [`crate::rules`]); the strictest matching
    /// rule decides. With no match, the command is allowed and confined by the sandbox.
    pub fn decide_exec(&self, argv: &[String]) -> Verdict {
        if argv.is_empty() {
            return Verdict {
                decision: Decision::Deny,
                by: DecidedBy::Default,
                reason: "empty command denied".into(),
            };
        }
        let shown = argv.join(" ");
        let words: Vec<Word> = argv.iter().cloned().map(Word::Literal).collect();
        let mut findings = Findings::default();
        check_command(&self.command_rules, &words, None, &shown, 0, &mut findings);
        self.verdict(&findings, &shown)
    }

    /// Decides a bash script (the `bash` tool's command, terminal input, `bridle policy
    /// explain bash`): every simple command it can run is checked like [`Plan::decide_exec`]
    /// and the strictest decision wins. A part the rules cannot see gives `ask` only when an
    /// `ask` or `deny` rule could match it, and then only where no exec supervisor decides
    /// what it runs, or a rule naming a shell builtin could match it; plain shell syntax with
    /// literal commands is decided by the rules alone. Text with no statement at all (only
    /// blanks and comments) is denied.
    pub fn decide_bash(&self, script: &str) -> Verdict {
        let parsed = shell::parse(script);
        if parsed.empty && parsed.hidden.is_empty() {
            return Verdict {
                decision: Decision::Deny,
                by: DecidedBy::Default,
                reason: "empty command denied".into(),
            };
        }
        let mut findings = Findings::default();
        check_script(&self.command_rules, &parsed, script, 0, &mut findings);
        self.verdict(&findings, script)
    }

    pub(super) fn verdict(&self, findings: &Findings<'_>, whole: &str) -> Verdict {
        command_verdict(
            findings,
            format!(
                "`{}` allowed: no rule matched; it runs confined (mode {})",
                shell::short(whole),
                self.spec.mode
            ),
            self.hidden_parts(),
        )
    }

    /// A confined sandbox with command rules has an exec supervisor that decides every
    /// program it runs, so what the rules cannot see in the text is decided there. Under
    /// `danger-full-access` the supervisor is a best effort (a process can leave it), so the
    /// text asks.
    fn hidden_parts(&self) -> HiddenParts {
        if self.spec.exec_rules.is_some() && self.spec.mode != SandboxMode::DangerFullAccess {
            HiddenParts::AtExec
        } else {
            HiddenParts::Ask
        }
    }
}

pub(crate) fn rule_verdict(
    id: &str,
    origin: &Origin,
    decision: Decision,
    justification: Option<&str>,
    subject: &str,
    seen_as: Option<&str>,
) -> Verdict {
    let verb = match decision {
        Decision::Allow => "allowed",
        Decision::Ask => "needs approval",
        Decision::Deny => "denied",
    };
    let why = justification.map(|j| format!(": {j}")).unwrap_or_default();
    let seen = seen_as.map(|v| format!(" (as `{v}`)")).unwrap_or_default();
    Verdict {
        decision,
        by: DecidedBy::Rule {
            id: id.to_owned(),
            origin: origin.clone(),
            seen_as: seen_as.map(str::to_owned),
        },
        reason: format!("{subject}{seen} {verb} by rule `{id}` ({origin}){why}"),
    }
}
