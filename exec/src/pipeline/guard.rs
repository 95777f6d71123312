//! Guards: checks that run after the rules and the approval, and can only deny. A guard's
//! denial is final: nothing after it (an approval, a rule, a later plugin) can turn it back.

use std::path::{Component, Path, PathBuf};

use bridle_policy::SandboxSpec;

use crate::tool::{Declaration, Effect};

/// A call as a guard sees it: what its tool declared, and the spec it would run under.
#[derive(Debug)]
pub struct DeclaredCall<'a> {
    /// The tool's name.
    pub tool: &'a str,
    /// What the call will do.
    pub declaration: &'a Declaration,
    /// The spec it would run under (an escalation's, when it asks for one).
    pub spec: &'a SandboxSpec,
}

/// Why a guard denied a call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denial {
    /// The guard's name.
    pub guard: String,
    /// One sentence naming the input.
    pub reason: String,
}

/// A deny-only check, registered in the pipeline's registry.
pub trait Guard: Send + Sync {
    /// Its name, as decisions record it.
    fn name(&self) -> &str;

    /// `Some` denies the call, finally.
    fn check(&self, call: &DeclaredCall<'_>) -> Option<Denial>;
}

/// The shipped guard, always on: file-tool writes never reach a protected path (the plan's
/// protected and must-stay-absent paths), bridle's own directories (the session directory,
/// the profile files, the workspace's `.bridle/`), or git metadata (anything inside a `.git`
/// of any repository), whatever a person approved. An escalated command must still run under
/// a spec that keeps bridle's own directories masked and the protected paths (the session's,
/// the profile files, the workspace's `.bridle/`) read-only, `danger-full-access` included:
/// an escalated spec that would not is denied.
#[derive(Debug, Clone)]
pub struct ProtectedPaths {
    /// The plan's protected and must-stay-absent paths.
    protected: Vec<PathBuf>,
    /// bridle's own directories that every sandbox hides (the session directory).
    own: Vec<PathBuf>,
    /// Further paths file tools never write (profile files, the workspace's `.bridle/`).
    extra: Vec<PathBuf>,
}

/// The shipped guard's name.
pub const PROTECTED_PATHS: &str = "protected-paths";

impl ProtectedPaths {
    /// The guard for the session's spec; `own`: bridle's directories every sandbox of the
    /// session hides (the session directory); `extra`: more paths file tools never write (the
    /// profile directory). The workspace's `.bridle/` is always guarded.
    pub fn new(spec: &SandboxSpec, own: Vec<PathBuf>, extra: Vec<PathBuf>) -> ProtectedPaths {
        let protected = spec
            .protected_paths
            .iter()
            .chain(&spec.must_stay_absent)
            .cloned()
            .collect();
        let extra = extra
            .into_iter()
            .chain(std::iter::once(spec.workspace.join(".bridle")))
            .collect();
        ProtectedPaths {
            protected,
            own,
            extra,
        }
    }

    /// What `path` is, when the guard keeps it unwritten.
    fn guarded(&self, path: &Path) -> Option<String> {
        let path = bridle_policy::normalize(path);
        if let Some(p) = self.own.iter().find(|p| path.starts_with(p)) {
            return Some(format!(
                "`{}` is inside bridle's own `{}`",
                path.display(),
                p.display()
            ));
        }
        if let Some(p) = self
            .protected
            .iter()
            .chain(&self.extra)
            .find(|p| path.starts_with(p))
        {
            return Some(format!(
                "`{}` is inside the protected path `{}`",
                path.display(),
                p.display()
            ));
        }
        if path
            .components()
            .any(|c| c == Component::Normal(".git".as_ref()))
        {
            return Some(format!(
                "`{}` is git metadata (inside a `.git`)",
                path.display()
            ));
        }
        None
    }
}

impl ProtectedPaths {
    /// Why the spec an escalated command would run under does not keep what this guard keeps:
    /// bridle's own directories hidden, every protected path read-only.
    fn check_escalated_spec(&self, spec: &SandboxSpec) -> Option<String> {
        use bridle_policy::SandboxMode;
        if spec.mode == SandboxMode::DangerFullAccess && !spec.protected_kept {
            return Some(
                "the escalated sandbox (`danger-full-access` with no mount view) would keep neither the protected paths nor bridle's own directories"
                    .to_owned(),
            );
        }
        let hidden = |p: &PathBuf| spec.masked_paths.iter().any(|m| p.starts_with(m));
        // A path that must stay absent is watched by the sandbox's init, which stops the run
        // when it appears.
        let read_only = |p: &PathBuf| {
            spec.protected_paths
                .iter()
                .chain(&spec.must_stay_absent)
                .any(|q| p.starts_with(q))
        };
        // Outside the writable roots is read-only, except under full access.
        let kept = |p: &PathBuf| {
            hidden(p)
                || read_only(p)
                || (spec.mode != SandboxMode::DangerFullAccess
                    && !spec.writable_roots.iter().any(|r| p.starts_with(r)))
        };
        if let Some(p) = self.own.iter().find(|p| !hidden(p)) {
            return Some(format!(
                "the escalated sandbox would not hide bridle's own `{}`",
                p.display()
            ));
        }
        if let Some(p) = self.protected.iter().chain(&self.extra).find(|p| !kept(p)) {
            return Some(format!(
                "the escalated sandbox would leave the protected path `{}` writable",
                p.display()
            ));
        }
        None
    }
}

impl Guard for ProtectedPaths {
    fn name(&self) -> &str {
        PROTECTED_PATHS
    }

    fn check(&self, call: &DeclaredCall<'_>) -> Option<Denial> {
        let deny = |reason: String| {
            Some(Denial {
                guard: PROTECTED_PATHS.to_owned(),
                reason,
            })
        };
        for effect in &call.declaration.effects {
            if let Effect::Write(path) = effect
                && let Some(what) = self.guarded(path)
            {
                return deny(format!("{} must not write it: {what}", call.tool));
            }
        }
        let escalated_shell = call.declaration.escalation.is_some()
            && call
                .declaration
                .effects
                .iter()
                .any(|e| matches!(e, Effect::Shell(_) | Effect::Exec(_)));
        if escalated_shell {
            return self.check_escalated_spec(call.spec).map(|reason| Denial {
                guard: PROTECTED_PATHS.to_owned(),
                reason,
            });
        }
        None
    }
}
