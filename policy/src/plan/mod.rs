//! Planning: an effective [`Policy`] plus the session's facts become a [`SandboxSpec`] and the
//! decision functions the tool layer calls before anything runs.

mod cache;
mod decide;
mod env;
mod paths;

pub use cache::cache_dir_for;
use cache::plan_cache_home;
pub(crate) use decide::rule_verdict;
use env::plan_env;
pub use env::{EnvDecision, env_decisions};
pub use paths::normalize;
use paths::{check_root, expand, is_relative_entry, xdg_moved};

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::error::PolicyError;
use crate::origin::{AccountHome, Origin, Sourced, XdgMoved};
use crate::policy::Policy;
use crate::rules::{CommandRule, ExecRules, PathRule};
use crate::spec::{ResourceLimits, SandboxSpec, SeccompProfile};
use crate::vocab::{ApprovalPolicy, Decision, Guarantee, Network, SandboxMode, UnixSockets};

/// The facts about this session that planning needs. The caller gathers them (canonicalising
/// the workspace, reading the environment); planning itself does no I/O.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanContext {
    /// The workspace root, already canonicalised (symlinks resolved).
    pub workspace: PathBuf,
    /// The user's home directory (for `~` and the dangerous-root check).
    pub home: PathBuf,
    /// The home directory the password database gives the real user, when it is not `home`
    /// (`$HOME` set elsewhere, as CI and `sudo` do): the masks written under `~` apply there
    /// too, since that is where ssh and other tools keep that person's credentials.
    pub account_home: Option<PathBuf>,
    /// bridle's state directory (session logs live here).
    pub state_dir: PathBuf,
    /// bridle's configuration directory.
    pub config_dir: PathBuf,
    /// The session's private temp directory.
    pub temp_dir: PathBuf,
    /// Where bridle keeps per-workspace cache homes on the host (outside every writable root
    /// and every cache path); `None`: no cache home.
    pub cache_root: Option<PathBuf>,
    /// bridle's own temp directory on the host (`/var/tmp/bridle-UID`: the private temp dirs,
    /// the cache homes, the records of what a run protects), which must lie inside and around
    /// no writable root and no workspace; `None`: not checked.
    pub temp_base: Option<PathBuf>,
    /// The environment bridle was started with.
    pub host_env: BTreeMap<String, String>,
    /// Paths found on disk that need the protection the profile gives `.git` (the other git
    /// directories the repositories in writable roots use; see `bridle_exec::git_dirs`).
    pub found: Vec<FoundPath>,
    /// Paths masked in the session whatever its mode asks (`path`, what it is): bridle's own
    /// session directory, say.
    pub masks: Vec<(PathBuf, String)>,
    /// The paths of `masks` another run may remove at any moment (its session directories),
    /// and that nothing else needs hidden: every entry of `masks` naming one of them may vanish.
    pub masks_may_vanish: Vec<PathBuf>,
    /// The session's mode, when this plan is for one call escalated from it (`None`: the
    /// session's own plan). An escalation to `danger-full-access` from a confined mode keeps
    /// the protected paths read-only and bridle's own directories hidden
    /// ([`SandboxSpec::protected_kept`]).
    pub escalated_from: Option<SandboxMode>,
}

/// Who or what decided a [`Verdict`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum DecidedBy {
    /// A profile rule.
    Rule {
        /// The rule id.
        id: String,
        /// Where the rule was written.
        origin: Origin,
        /// What the rule matched, where that is not the command as written: `git push` for
        /// `git -c alias.p=push p`, `env -S 'git push'` or a renamed copy of git.
        #[serde(skip_serializing_if = "Option::is_none")]
        seen_as: Option<String>,
    },
    /// A protected path inside a writable root.
    ProtectedPath {
        /// The protected path.
        path: PathBuf,
        /// Where it was configured.
        origin: Origin,
    },
    /// A masked path.
    MaskedPath {
        /// The masked path.
        path: PathBuf,
        /// Where it was configured.
        origin: Origin,
    },
    /// A writable root contains the path.
    WritableRoot {
        /// The root.
        root: PathBuf,
    },
    /// No writable root contains the path.
    OutsideWritableRoots,
    /// The sandbox mode alone decided.
    Mode {
        /// The mode.
        mode: SandboxMode,
    },
    /// A part of the command the rules cannot see (a variable, a command substitution,
    /// `eval`, a script read from a here document, text that does not parse...) that an `ask`
    /// or `deny` rule could match.
    Hidden {
        /// What hid it: "the variable `$x`".
        what: String,
        /// The strictest rule it could match (the first of `rules`).
        rule: String,
        /// Every `ask` or `deny` rule it could match, strictest first, then in the profile's
        /// order: a hidden program name could be any rule's program.
        rules: Vec<String>,
    },
    /// A part of the command the rules cannot see that only rules on programs could match,
    /// in a sandbox whose exec supervisor decides every program that runs: allowed here, each
    /// exec it makes is decided by the rules when it happens.
    AtExec {
        /// What hid it: "the file `env.sh` that `.` runs".
        what: String,
        /// Every `ask` or `deny` rule it could match, strictest first, then in the profile's
        /// order.
        rules: Vec<String>,
    },
    /// A `network.allow` or `network.deny` entry decided a connection.
    NetworkEntry {
        /// Which list.
        list: crate::network::NetList,
        /// The entry, as canonical text.
        entry: String,
        /// Where it was written.
        origin: Origin,
    },
    /// The network setting alone (`off` or `on`) decided a connection.
    NetworkSetting {
        /// The setting.
        network: Network,
        /// Where it was set.
        origin: Origin,
    },
    /// No rule matched.
    Default,
}

/// A decision with the reason a person (or the model) can read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Verdict {
    /// The decision.
    pub decision: Decision,
    /// What decided it.
    pub by: DecidedBy,
    /// One sentence naming the input and the deciding rule or root.
    pub reason: String,
}

/// A path found on disk that needs the protection the profile gives `.git` (see
/// [`PlanContext::found`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FoundPath {
    /// The path.
    pub path: PathBuf,
    /// What it is, for provenance: "git dir of submodule `.git/modules/lib`".
    pub what: String,
    /// It does not exist and must not come into existence (rather than: it exists and stays
    /// read-only).
    pub absent: bool,
}

/// The result of planning: the spec for the sandbox, and what the tool layer needs to decide.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// What the sandbox enforces.
    pub spec: SandboxSpec,
    /// Who answers escalations.
    pub approval: ApprovalPolicy,
    /// Command-prefix rules.
    pub command_rules: Vec<CommandRule>,
    /// Path rules.
    pub path_rules: Vec<PathRule>,
    provenance: BTreeMap<PathBuf, Origin>,
    /// Where the network setting came from (for network decisions).
    network_origin: Origin,
}

/// Plans `policy` for a session.
pub fn plan(policy: &Policy, ctx: &PlanContext) -> Result<Plan, PolicyError> {
    for path in [
        &ctx.workspace,
        &ctx.home,
        &ctx.state_dir,
        &ctx.config_dir,
        &ctx.temp_dir,
    ] {
        if !path.is_absolute() {
            return Err(PolicyError::RelativePath { path: path.clone() });
        }
    }
    let workspace = normalize(&ctx.workspace);
    let mode = policy.mode.value;
    // Full access for one call of a confined session: still no write to the protected paths.
    let kept = mode == SandboxMode::DangerFullAccess
        && ctx
            .escalated_from
            .is_some_and(|from| from != SandboxMode::DangerFullAccess);
    let content_mode = mode == SandboxMode::WorkspaceWrite || kept;
    let allow_dangerous = policy.allow_dangerous_workspace_root.value;
    check_root("workspace root", &workspace, ctx, allow_dangerous)?;

    let mut provenance = BTreeMap::new();
    let expand_all =
        |list: &[Sourced<String>], provenance: &mut BTreeMap<PathBuf, Origin>| -> Vec<PathBuf> {
            let mut out = BTreeSet::new();
            for item in list {
                let path = expand(&item.value, &ctx.home, &workspace);
                provenance
                    .entry(path.clone())
                    .or_insert_with(|| item.origin.clone());
                out.insert(path);
            }
            out.into_iter().collect()
        };

    let readable_roots = expand_all(&policy.readable_roots, &mut provenance);
    let mut extra_roots = Vec::new();
    if content_mode {
        for root in expand_all(&policy.writable_roots, &mut provenance) {
            check_root("writable root", &root, ctx, allow_dangerous)?;
            if root != workspace && !extra_roots.contains(&root) {
                extra_roots.push(root);
            }
        }
    }
    let temp_dir = normalize(&ctx.temp_dir);
    let mut writable_roots = Vec::new();
    if content_mode {
        writable_roots.push(workspace.clone());
        writable_roots.extend(extra_roots.iter().cloned());
    }
    if mode != SandboxMode::DangerFullAccess || kept {
        writable_roots.push(temp_dir.clone());
        writable_roots.push(PathBuf::from("/dev/null"));
    }

    let mut protected = BTreeSet::new();
    if content_mode {
        let content_roots: Vec<&PathBuf> = writable_roots
            .iter()
            .filter(|r| **r != temp_dir && r.as_path() != Path::new("/dev/null"))
            .collect();
        for item in &policy.protected_paths {
            let targets: Vec<PathBuf> = if is_relative_entry(&item.value) {
                content_roots
                    .iter()
                    .map(|root| normalize(&root.join(&item.value)))
                    .collect()
            } else {
                vec![expand(&item.value, &ctx.home, &workspace)]
            };
            for path in targets {
                if content_roots.iter().any(|root| path.starts_with(root)) {
                    provenance
                        .entry(path.clone())
                        .or_insert_with(|| item.origin.clone());
                    protected.insert(path);
                }
            }
        }
        for layer in &policy.layers {
            if let Some(file) = &layer.path {
                let file = normalize(file);
                if content_roots.iter().any(|root| file.starts_with(root)) {
                    provenance
                        .entry(file.clone())
                        .or_insert_with(|| Origin::file(&layer.name, 1, 1));
                    protected.insert(file);
                }
            }
        }
    }
    if kept {
        // Outside the content roots too: full access reaches everywhere else.
        let config = normalize(&ctx.config_dir);
        provenance.entry(config.clone()).or_insert(Origin::Found {
            what: "bridle's configuration directory (deployer profiles)".into(),
        });
        protected.insert(config);
        for layer in &policy.layers {
            if let Some(file) = &layer.path {
                let file = normalize(file);
                provenance
                    .entry(file.clone())
                    .or_insert_with(|| Origin::file(&layer.name, 1, 1));
                protected.insert(file);
            }
        }
    }
    let masked_paths = if mode == SandboxMode::DangerFullAccess {
        Vec::new()
    } else {
        let mut masked = BTreeSet::new();
        for item in &policy.masked_paths {
            let path = expand(&item.value, &ctx.home, &workspace);
            // The same store where the person's environment moved its XDG base directory.
            let moved = xdg_moved(&path, &ctx.home, &ctx.host_env).map(|(moved, var)| {
                let origin = Origin::Xdg(Box::new(XdgMoved {
                    var: var.to_owned(),
                    entry: item.value.clone(),
                    at: item.origin.clone(),
                }));
                (moved, origin)
            });
            // The same store under the account's home, when `$HOME` points elsewhere.
            let account = ctx
                .account_home
                .as_deref()
                .filter(|_| item.value == "~" || item.value.starts_with("~/"))
                .map(|home| {
                    let origin = Origin::AccountHome(Box::new(AccountHome {
                        home: home.to_path_buf(),
                        entry: item.value.clone(),
                        at: item.origin.clone(),
                    }));
                    (expand(&item.value, home, &workspace), origin)
                });
            let all = std::iter::once((path, item.origin.clone()))
                .chain(moved)
                .chain(account);
            for (path, origin) in all {
                provenance.entry(path.clone()).or_insert(origin);
                masked.insert(path);
            }
        }
        masked.into_iter().collect()
    };

    let l = &policy.limits;
    let limits = ResourceLimits {
        processes: l.processes.value,
        memory_bytes: l.memory.value,
        file_size_bytes: l.file_size.value,
        open_files: l.open_files.value,
        cpu_time_secs: l.cpu_time.value,
        wall_time_secs: l.wall_time.value,
        command_timeout_secs: l.command_timeout.value,
        command_timeout_max_secs: l.command_timeout_max.value,
        spill_size_bytes: l.spill_size.value,
    };
    let (network, network_origin) = if mode == SandboxMode::DangerFullAccess {
        (Network::On, policy.mode.origin.clone())
    } else {
        (policy.network.value, policy.network.origin.clone())
    };
    let allow_list = (network == Network::AllowList)
        .then(|| crate::network::spec_allow_list(&policy.network_hosts));
    let guarantees = required_guarantees(
        mode,
        network,
        !protected.is_empty() || kept,
        !masked_paths.is_empty(),
        &limits,
    );
    // What keeps an escalation from the protected paths is not the profile's to waive.
    let accept_missing: BTreeSet<Guarantee> = policy
        .accept_missing
        .iter()
        .map(|g| g.value)
        .filter(|g| !kept || !matches!(g, Guarantee::FsProtect | Guarantee::FsMask))
        .collect();
    let seccomp = match (mode, network) {
        (SandboxMode::DangerFullAccess, _) if kept => SeccompProfile::MountLock,
        (SandboxMode::DangerFullAccess, _) => SeccompProfile::None,
        (_, Network::Off) => SeccompProfile::ConfinedNoNetwork,
        (_, Network::AllowList) => SeccompProfile::ConfinedAllowList,
        (_, Network::On) => SeccompProfile::Confined,
    };
    let cache_home = plan_cache_home(policy, ctx, &workspace, &writable_roots, &masked_paths)?;
    let mut env = plan_env(policy, &ctx.host_env, &temp_dir, network);
    if let Some(list) = &allow_list {
        crate::network::set_proxy_env(&mut env, policy, list.relay_port);
    }
    let spec = SandboxSpec {
        mode,
        workspace,
        guarantees,
        accept_missing: accept_missing.into_iter().collect(),
        readable_roots,
        writable_roots,
        protected_paths: protected.into_iter().collect(),
        must_stay_absent: Vec::new(),
        masked_paths,
        masks_may_vanish: Vec::new(),
        network,
        allow_list,
        unix_sockets: if mode == SandboxMode::DangerFullAccess {
            UnixSockets::Allow
        } else {
            policy.unix_sockets.value
        },
        seccomp,
        limits,
        env,
        temp_dir,
        private_tmp: mode != SandboxMode::DangerFullAccess,
        cache_home,
        exec_rules: ExecRules::of(&policy.command_rules),
        protected_kept: kept,
    };
    let mut plan = Plan {
        spec,
        approval: policy.approval.value,
        command_rules: policy.command_rules.clone(),
        path_rules: policy.path_rules.clone(),
        provenance,
        network_origin,
    };
    // The context's found paths and masks are part of the one plan: nothing patches it later.
    plan.protect_found(ctx.found.clone());
    // The masks that may vanish come last: one that covers a mask that may not leaves that
    // one listed, so what holds it stays pinned. Only an escalation's full view reads which
    // may vanish (to pin their parents or not).
    let (may_vanish, stay): (Vec<_>, Vec<_>) = ctx
        .masks
        .iter()
        .partition(|(path, _)| ctx.masks_may_vanish.contains(path));
    for (path, what) in stay {
        plan.mask_found(path, what);
    }
    for (path, what) in may_vanish {
        let path = normalize(path);
        let covered = plan.spec.masked_paths.iter().any(|m| path.starts_with(m));
        if plan.mask_found(&path, what) && !covered && plan.spec.protected_kept {
            plan.spec.masks_may_vanish.push(path);
        }
    }
    plan.spec.masks_may_vanish.sort();
    plan.spec.masks_may_vanish.dedup();
    Ok(plan)
}

fn required_guarantees(
    mode: SandboxMode,
    network: Network,
    protects: bool,
    masks: bool,
    limits: &ResourceLimits,
) -> Vec<Guarantee> {
    let confined = mode != SandboxMode::DangerFullAccess;
    Guarantee::ALL
        .into_iter()
        .filter(|g| match g {
            Guarantee::FsWrite
            | Guarantee::Ipc
            | Guarantee::Proc
            | Guarantee::Priv
            | Guarantee::Tty => confined,
            // An escalation that keeps the protected paths plans `protects` for every mode.
            Guarantee::FsProtect => {
                (mode == SandboxMode::WorkspaceWrite || mode == SandboxMode::DangerFullAccess)
                    && protects
            }
            Guarantee::FsMask => masks,
            Guarantee::Net => confined && network != Network::On,
            Guarantee::Tree | Guarantee::Fd | Guarantee::Env => true,
            Guarantee::Res => limits.any_os_limit(),
        })
        .collect()
}

impl Plan {
    /// The roots whose content the command may change: the writable roots other than the temp
    /// dir and `/dev/null`.
    pub fn content_roots(&self) -> Vec<&Path> {
        self.spec
            .writable_roots
            .iter()
            .filter(|r| **r != self.spec.temp_dir && r.as_path() != Path::new("/dev/null"))
            .map(PathBuf::as_path)
            .collect()
    }

    /// The names protected inside `root/.git` (`hooks`, `config` by default): what must be
    /// protected in every other git directory the repository uses.
    pub fn protected_git_names(&self, root: &Path) -> Vec<PathBuf> {
        let git = root.join(".git");
        self.spec
            .protected_paths
            .iter()
            .filter_map(|p| p.strip_prefix(&git).ok())
            .filter(|rest| !rest.as_os_str().is_empty())
            .map(Path::to_path_buf)
            .collect()
    }

    /// Adds `guarantee` to the spec's required guarantees (kept in their canonical order).
    fn require(&mut self, guarantee: Guarantee) {
        if !self.spec.guarantees.contains(&guarantee) {
            self.spec.guarantees.push(guarantee);
            self.spec.guarantees.sort_by_key(|g| {
                Guarantee::ALL
                    .iter()
                    .position(|x| x == g)
                    .unwrap_or(usize::MAX)
            });
        }
    }

    /// Masks `path` (for example bridle's own session directory) inside the sandbox, as if the
    /// profile listed it, recording `what` it is as its provenance. Returns whether it is
    /// masked: `danger-full-access` masks nothing, unless it keeps the protected paths.
    fn mask_found(&mut self, path: &Path, what: &str) -> bool {
        if self.spec.mode == SandboxMode::DangerFullAccess && !self.spec.protected_kept {
            return false;
        }
        let path = normalize(path);
        if self.spec.masked_paths.iter().any(|m| path.starts_with(m)) {
            return true;
        }
        self.spec.masked_paths.push(path.clone());
        self.spec.masked_paths.sort();
        self.provenance.entry(path).or_insert(Origin::Found {
            what: what.to_owned(),
        });
        self.require(Guarantee::FsMask);
        true
    }

    /// Protects paths found on disk in addition to the profile's, when they lie inside a
    /// content root; others are ignored. Only `workspace-write` (and an escalation that keeps
    /// the protected paths) has protected paths.
    fn protect_found(&mut self, found: Vec<FoundPath>) {
        if self.spec.mode != SandboxMode::WorkspaceWrite && !self.spec.protected_kept {
            return;
        }
        let roots: Vec<PathBuf> = self
            .content_roots()
            .into_iter()
            .map(Path::to_path_buf)
            .collect();
        let mut added = false;
        let mut known: BTreeSet<PathBuf> = self
            .spec
            .protected_paths
            .iter()
            .chain(&self.spec.must_stay_absent)
            .cloned()
            .collect();
        for item in found {
            let path = normalize(&item.path);
            if !roots.iter().any(|r| path.starts_with(r)) || !known.insert(path.clone()) {
                continue;
            }
            let list = if item.absent {
                &mut self.spec.must_stay_absent
            } else {
                &mut self.spec.protected_paths
            };
            list.push(path.clone());
            self.provenance
                .entry(path)
                .or_insert(Origin::Found { what: item.what });
            added = true;
        }
        if added {
            self.spec.protected_paths.sort();
            self.spec.must_stay_absent.sort();
            self.require(Guarantee::FsProtect);
        }
    }

    /// Where the network setting came from.
    pub(crate) fn network_origin(&self) -> &Origin {
        &self.network_origin
    }
}
