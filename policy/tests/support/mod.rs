//! Shared helpers for the policy integration tests: a fixed session context, an in-memory
//! profile source, and shortcuts for loading and planning.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use bridle_policy::{
    LoadRequest, Overrides, Plan, PlanContext, Policy, PolicyError, ProfileSource, SourceFile,
    load, plan,
};

pub const WORKSPACE: &str = "/home/dev/project";
pub const HOME: &str = "/home/dev";
pub const STATE: &str = "/home/dev/.local/state/bridle";
pub const CONFIG: &str = "/home/dev/.config/bridle";
pub const TEMP: &str = "/tmp/bridle-1000/session";

/// The fixed session every snapshot and decision test plans against.
pub fn ctx() -> PlanContext {
    let host_env = [
        ("PATH", "/usr/local/bin:/usr/bin:/bin"),
        ("HOME", HOME),
        ("LANG", "en_US.UTF-8"),
        ("LC_ALL", "en_US.UTF-8"),
        ("GITHUB_TOKEN", "ghp_not_a_real_token"),
        ("AWS_SECRET_ACCESS_KEY", "not-a-real-secret"),
        ("SSH_AUTH_SOCK", "/run/user/1000/ssh-agent.sock"),
        ("MY_API_KEY", "not-a-real-key"),
        ("EDITOR", "vim"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect::<BTreeMap<_, _>>();
    PlanContext {
        workspace: PathBuf::from(WORKSPACE),
        home: PathBuf::from(HOME),
        account_home: None,
        state_dir: PathBuf::from(STATE),
        config_dir: PathBuf::from(CONFIG),
        temp_dir: PathBuf::from(TEMP),
        cache_root: Some(PathBuf::from("/var/tmp/bridle-1000/cache")),
        temp_base: Some(PathBuf::from("/var/tmp/bridle-1000")),
        host_env,
        found: Vec::new(),
        masks: Vec::new(),
        masks_may_vanish: Vec::new(),
        escalated_from: None,
    }
}

/// The fixed context with another workspace.
pub fn ctx_in(workspace: impl Into<PathBuf>) -> PlanContext {
    PlanContext {
        workspace: workspace.into(),
        ..ctx()
    }
}

/// Profiles held in memory by display name; anything else resolves to a shipped profile.
#[derive(Debug, Default, Clone)]
pub struct MemSource {
    files: BTreeMap<String, Vec<u8>>,
}

impl MemSource {
    pub fn new() -> Self {
        MemSource::default()
    }

    pub fn with(mut self, name: &str, text: impl Into<Vec<u8>>) -> Self {
        self.files.insert(name.to_owned(), text.into());
        self
    }
}

impl ProfileSource for MemSource {
    fn resolve(
        &self,
        reference: &str,
        _from: Option<&SourceFile>,
    ) -> Result<SourceFile, PolicyError> {
        match self.files.get(reference) {
            Some(bytes) => Ok(SourceFile::from_text(reference, bytes.clone())),
            None => SourceFile::shipped(reference),
        }
    }
}

pub fn request(profile: &str) -> LoadRequest {
    LoadRequest {
        profile: profile.to_owned(),
        overrides: Overrides::default(),
        workspace_layer: None,
    }
}

/// Loads one in-memory profile named `p.yaml`.
pub fn load_text(text: impl Into<Vec<u8>>) -> Result<Policy, PolicyError> {
    load(&MemSource::new().with("p.yaml", text), &request("p.yaml"))
}

/// Loads a shipped profile.
pub fn shipped(name: &str) -> Policy {
    match load(&bridle_policy::ShippedOnly, &request(name)) {
        Ok(policy) => policy,
        Err(err) => panic!("shipped profile {name} does not load: {err}"),
    }
}

/// Loads `profile` (shipped) with `ws.yaml` as the workspace layer.
pub fn load_with_workspace(profile: &str, ws: &str) -> Result<Policy, PolicyError> {
    load(
        &bridle_policy::ShippedOnly,
        &LoadRequest {
            workspace_layer: Some(SourceFile::from_text("ws.yaml", ws)),
            ..request(profile)
        },
    )
}

/// Plans with the fixed context.
pub fn plan_fixed(policy: &Policy) -> Plan {
    match plan(policy, &ctx()) {
        Ok(plan) => plan,
        Err(err) => panic!("planning {} failed: {err}", policy.profile),
    }
}

/// Plans a shipped profile with the fixed context.
pub fn shipped_plan(name: &str) -> Plan {
    plan_fixed(&shipped(name))
}

/// A shipped profile in `danger-full-access`: the same rules with no exec supervisor that
/// guarantees them, so what the command line hides from them asks.
#[allow(dead_code, reason = "not every test binary decides on text alone")]
pub fn text_only_plan(name: &str) -> Plan {
    let mut policy = shipped(name);
    policy.mode.value = bridle_policy::SandboxMode::DangerFullAccess;
    plan_fixed(&policy)
}

/// Runs `f`, asserting it returns within `limit`.
pub fn within<T>(limit: Duration, f: impl FnOnce() -> T) -> T {
    let start = Instant::now();
    let out = f();
    let took = start.elapsed();
    assert!(took < limit, "took {took:?}, limit {limit:?}");
    out
}

/// The 1-based line and column of the first occurrence of `needle` in `text`.
pub fn position(text: &str, needle: &str) -> (u64, u64) {
    let at = text
        .find(needle)
        .unwrap_or_else(|| panic!("`{needle}` not found"));
    let before = &text[..at];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (u64::try_from(line).unwrap(), u64::try_from(column).unwrap())
}

/// The origin of the first occurrence of `needle` in `text`, named `file`.
pub fn origin_of(file: &str, text: &str, needle: &str) -> bridle_policy::Origin {
    let (line, column) = position(text, needle);
    bridle_policy::Origin::file(file, line, column)
}

/// The text of a shipped profile.
pub fn shipped_text(name: &str) -> &'static str {
    bridle_policy::SHIPPED
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, t)| *t)
        .unwrap_or_else(|| panic!("no shipped profile {name}"))
}

/// Splits a command line into argv.
pub fn argv(cmd: &str) -> Vec<String> {
    match bridle_policy::rules::split_words(cmd) {
        Ok(words) => words,
        Err(err) => panic!("{err}"),
    }
}
