//! Gathers the facts planning needs from the host: the canonical workspace, the home, state and
//! config directories, the environment, and the effective policy with all its layers.

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use bridle_policy::{
    FsProfileSource, LoadRequest, Overrides, Plan, PlanContext, Policy, PolicyError, SourceFile,
};

use crate::UsageError;
use crate::cli::GlobalArgs;

/// Where a workspace keeps its own (tighten-only) configuration.
pub const WORKSPACE_LAYER: &str = ".bridle/profile.yaml";

/// Where private temp directories live: outside `/tmp` (which the sandbox replaces with the
/// private directory itself) and outside any workspace: `/var/tmp/bridle-<uid>`.
pub fn temp_base() -> PathBuf {
    let uid = std::fs::metadata("/proc/self")
        .map(|m| m.uid())
        .unwrap_or(u32::MAX);
    PathBuf::from("/var/tmp").join(format!("bridle-{uid}"))
}

/// Creates [`temp_base`] if needed and checks it is safe to use: a real directory (not a
/// symlink) owned by us and not writable by anyone else. `/var/tmp` is shared and sticky, so
/// another user could have created the name first to make our private temp dirs theirs.
pub fn ensure_temp_base() -> Result<PathBuf> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    let base = temp_base();
    match std::fs::DirBuilder::new().mode(0o700).create(&base) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => {
            return Err(e)
                .with_context(|| format!("creating the temp dir base `{}`", base.display()));
        }
    }
    let meta = std::fs::symlink_metadata(&base)
        .with_context(|| format!("inspecting `{}`", base.display()))?;
    let me = std::fs::metadata("/proc/self")
        .map(|m| m.uid())
        .unwrap_or(u32::MAX);
    if !meta.is_dir() || meta.uid() != me || meta.permissions().mode() & 0o022 != 0 {
        bail!(
            "refusing the temp dir base `{}`: it must be a directory owned by uid {me} and writable only by it (found uid {}, mode {:o}{})",
            base.display(),
            meta.uid(),
            meta.permissions().mode() & 0o7777,
            if meta.file_type().is_symlink() {
                ", a symlink"
            } else {
                ""
            }
        );
    }
    Ok(base)
}

/// Where `$XDG_STATE_HOME` is when it is not set (relative to the home directory).
const DEFAULT_STATE_HOME: &str = ".local/state";

/// The host facts for one invocation.
#[derive(Debug, Clone)]
pub struct Facts {
    pub workspace: PathBuf,
    pub home: PathBuf,
    /// The real user's home from the password database, when it is not `home` (canonically).
    pub account_home: Option<PathBuf>,
    pub state_dir: PathBuf,
    pub config_dir: PathBuf,
    pub host_env: BTreeMap<String, String>,
    /// The session directories the registries list (see [`crate::session_registry`]).
    pub registered: Vec<PathBuf>,
}

/// The home directory the password database gives the real user, when it differs from `home`
/// (compared canonically); `None` when it is the same or there is no entry.
fn account_home(home: &Path) -> Option<PathBuf> {
    let user = nix::unistd::User::from_uid(nix::unistd::getuid()).ok()??;
    let dir = user.dir;
    // A home that does not exist (`/nonexistent`) holds no credentials to hide.
    if !dir.is_absolute() || !dir.is_dir() {
        return None;
    }
    let same = |a: &Path, b: &Path| match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => bridle_policy::normalize(a) == bridle_policy::normalize(b),
    };
    (!same(&dir, home)).then_some(dir)
}

/// `$HOME`, which must be absolute.
pub fn home_dir() -> Result<PathBuf> {
    match std::env::var_os("HOME") {
        Some(h) if Path::new(&h).is_absolute() => Ok(PathBuf::from(h)),
        _ => bail!(
            "HOME is not set to an absolute path; bridle needs it to find its state directory"
        ),
    }
}

/// An XDG base directory: `$VAR` when it is absolute, else `fallback` under `home`.
fn xdg_dir(home: &Path, var: &str, fallback: &str) -> PathBuf {
    match std::env::var_os(var) {
        Some(v) if Path::new(&v).is_absolute() => PathBuf::from(v),
        _ => home.join(fallback),
    }
}

/// A `--session-dir` made absolute (nothing resolved or created); `..` in it is refused, so
/// what the checks compare is where it really is.
pub(crate) fn absolute_session_dir(dir: &Path) -> Result<PathBuf> {
    let absolute = std::path::absolute(dir)
        .map_err(|e| UsageError(format!("session dir `{}`: {e}", dir.display())))?;
    if absolute
        .components()
        .any(|c| matches!(c, std::path::Component::ParentDir))
    {
        return Err(UsageError(format!(
            "session dir `{}`: `..` is not allowed in it (say where it is directly)",
            dir.display()
        ))
        .into());
    }
    Ok(absolute)
}

/// Where session logs live by default: `$XDG_STATE_HOME/bridle/sessions`.
pub fn default_session_dir() -> Result<PathBuf> {
    let home = home_dir()?;
    Ok(xdg_dir(&home, "XDG_STATE_HOME", DEFAULT_STATE_HOME).join("bridle/sessions"))
}

impl Facts {
    pub fn gather(global: &GlobalArgs) -> Result<Facts> {
        let requested = match &global.workspace {
            Some(dir) => dir.clone(),
            None => std::env::current_dir().context("cannot read the current directory")?,
        };
        let workspace = std::fs::canonicalize(&requested)
            .map_err(|e| UsageError(format!("workspace `{}`: {e}", requested.display())))?;
        if !workspace.is_dir() {
            return Err(UsageError(format!(
                "workspace `{}` is not a directory",
                requested.display()
            ))
            .into());
        }
        let home = home_dir()?;
        let account_home = account_home(&home);
        let state_dir = xdg_dir(&home, "XDG_STATE_HOME", DEFAULT_STATE_HOME).join("bridle");
        let config_dir = xdg_dir(&home, "XDG_CONFIG_HOME", ".config").join("bridle");
        let host_env = std::env::vars_os()
            .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
            .collect();
        let homes: Vec<&Path> = std::iter::once(home.as_path())
            .chain(account_home.as_deref())
            .collect();
        let registered = crate::session_registry::read(&homes)?;
        Ok(Facts {
            workspace,
            home,
            account_home,
            state_dir,
            config_dir,
            host_env,
            registered,
        })
    }

    /// Records `dir` as a session directory bridle keeps logs in, so that later sandboxes hide
    /// it whatever their environment says: in the registry under `$HOME` (an error when that
    /// fails) and under the account's home when it is another.
    pub fn record_session_dir(&self, dir: &Path) -> Result<()> {
        let dir = bridle_sandbox::real_path::real_path(dir);
        crate::session_registry::record(&self.home, &dir)?;
        if let Some(account) = &self.account_home {
            crate::session_registry::record_also(account, &dir);
        }
        Ok(())
    }

    /// A temp directory name for previews (`policy show`/`explain`); runs get their own.
    pub fn preview_temp_dir(&self) -> PathBuf {
        temp_base().join("preview")
    }

    /// A fresh private temp directory name for one run (created by the sandbox).
    pub fn run_temp_dir(&self) -> PathBuf {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        temp_base().join(format!("run-{}-{nanos:08x}", std::process::id()))
    }

    /// Plans `policy` for this invocation: the profile's decisions, plus protection for the
    /// other git directories the repositories in writable roots use (see
    /// [`bridle_exec::git_dirs`]), with `masks` (`path`, what it is) hidden.
    pub fn plan(
        &self,
        policy: &Policy,
        temp_dir: PathBuf,
        masks: &[(PathBuf, String)],
    ) -> Result<Plan, PolicyError> {
        self.plan_with(policy, temp_dir, masks, None)
    }

    /// Like [`Facts::plan`], for one call escalated from a session in mode `from`.
    pub fn plan_escalation(
        &self,
        policy: &Policy,
        temp_dir: PathBuf,
        masks: &[(PathBuf, String)],
        from: bridle_policy::SandboxMode,
    ) -> Result<Plan, PolicyError> {
        self.plan_with(policy, temp_dir, masks, Some(from))
    }

    fn plan_with(
        &self,
        policy: &Policy,
        temp_dir: PathBuf,
        masks: &[(PathBuf, String)],
        escalated_from: Option<bridle_policy::SandboxMode>,
    ) -> Result<Plan, PolicyError> {
        // Discovery needs the roots the policy gives this workspace: a first plan names them
        // (and is dropped); the plan the session uses is made once, from the whole context.
        let mut ctx = self.plan_context(temp_dir);
        ctx.escalated_from = escalated_from;
        let roots = bridle_policy::plan(policy, &ctx)?;
        ctx.found = bridle_exec::git_dirs::discover(&roots, &self.home);
        // A directory the caller masks too keeps the caller's account of it: the current
        // session directory is no registered one to the logged policy.
        ctx.masks = self
            .own_masks(&ctx.temp_dir)
            .into_iter()
            .filter(|(p, _)| !masks.iter().any(|(m, _)| m == p))
            .collect();
        ctx.masks.extend(masks.iter().cloned());
        // Another run removes its session directory when it likes (a test's, a CI job's): an
        // escalated call's view then passes over the mounts kept only to hide it.
        ctx.masks_may_vanish = crate::session_registry::masks_that_may_vanish(&ctx.masks);
        bridle_policy::plan(policy, &ctx)
    }

    /// What every sandbox of every consumer (`exec`, `shell`, `tool`, `run`) hides, whatever
    /// the caller masks besides: bridle's state directory, which holds the session logs and the
    /// key that seals them. Resolved, so that the directory the kernel reaches is what is
    /// hidden (a mount on a symlink would hide only the name).
    /// The default state directory is hidden too when `$XDG_STATE_HOME` moves it, under the
    /// account's home when `$HOME` is another, and so is every session directory the registry
    /// lists (an earlier `$XDG_STATE_HOME` or `--session-dir`). A registered directory that
    /// holds the workspace or `temp_dir` is hidden entry by entry around them.
    pub fn own_masks(&self, temp_dir: &Path) -> Vec<(PathBuf, String)> {
        let real = bridle_sandbox::real_path::real_path;
        let mut masks = vec![(
            real(&self.state_dir),
            "bridle's state directory (session logs and their key)".to_owned(),
        )];
        let default = crate::session_registry::default_state_dir(&self.home);
        if default != self.state_dir {
            masks.push((
                real(&default),
                "bridle's state directory without $XDG_STATE_HOME (session logs and their key)"
                    .to_owned(),
            ));
        }
        if let Some(account) = &self.account_home {
            masks.push((
                real(&crate::session_registry::default_state_dir(account)),
                "bridle's state directory under the account's home (session logs and their key)"
                    .to_owned(),
            ));
        }
        let keep = [self.workspace.as_path(), temp_dir];
        for dir in &self.registered {
            let what = crate::session_registry::REGISTERED;
            if !keep.iter().any(|k| k.starts_with(dir)) {
                masks.push((dir.clone(), what.to_owned()));
                continue;
            }
            masks.push((dir.join("log.key"), what.to_owned()));
            for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
                // bridle writes no symlinks there; one is not followed to mask what it names.
                let symlink = entry.file_type().is_ok_and(|t| t.is_symlink());
                let path = entry.path();
                if !symlink && !keep.iter().any(|k| k.starts_with(&path)) {
                    masks.push((path, what.to_owned()));
                }
            }
        }
        masks
    }

    pub fn plan_context(&self, temp_dir: PathBuf) -> PlanContext {
        PlanContext {
            workspace: self.workspace.clone(),
            home: self.home.clone(),
            account_home: self.account_home.clone(),
            state_dir: self.state_dir.clone(),
            config_dir: self.config_dir.clone(),
            temp_dir,
            cache_root: Some(temp_base().join("cache")),
            temp_base: Some(temp_base()),
            host_env: self.host_env.clone(),
            found: Vec::new(),
            masks: Vec::new(),
            masks_may_vanish: Vec::new(),
            escalated_from: None,
        }
    }

    /// The workspace's own configuration file, when it exists.
    pub fn workspace_layer(&self) -> Result<Option<SourceFile>> {
        let path = self.workspace.join(WORKSPACE_LAYER);
        match std::fs::metadata(&path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => {
                Err(e).with_context(|| format!("workspace configuration `{}`", path.display()))
            }
            Ok(meta) if !meta.is_file() => bail!(
                "workspace configuration `{}` is not a regular file",
                path.display()
            ),
            Ok(_) => Ok(Some(SourceFile::read(&path)?)),
        }
    }

    /// Logs (at `-v`) every variable of bridle's environment the sandbox does not get, and
    /// why; `-vv` also the ones it gets.
    pub fn report_env(&self, policy: &Policy) {
        for d in bridle_policy::env_decisions(policy, &self.host_env) {
            if d.passed {
                tracing::debug!("environment: passing `{}` ({})", d.name, d.reason);
            } else {
                tracing::info!("environment: dropping `{}`: {}", d.name, d.reason);
            }
        }
    }

    /// Loads the effective policy: `--profile` chain, then `overrides`, then workspace config.
    pub fn load_policy(&self, global: &GlobalArgs, overrides: Overrides) -> Result<Policy> {
        let request = LoadRequest {
            profile: global.profile.clone(),
            overrides,
            workspace_layer: self.workspace_layer()?,
        };
        Ok(bridle_policy::load(&FsProfileSource, &request)?)
    }
}
