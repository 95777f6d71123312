//! The environment a command gets: each host variable's fate under the policy's allow-list,
//! scrub patterns and `set`, and the variables that keep tools offline.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;

use crate::glob::Glob;
use crate::origin::{Origin, Sourced};
use crate::policy::Policy;
use crate::raw::EnvInherit;
use crate::vocab::Network;

/// What planning does with one variable of bridle's own environment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EnvDecision {
    /// The variable's name.
    pub name: String,
    /// Whether the host's value reaches the sandbox (a profile's `environment.set` or `--env
    /// NAME=VALUE` may still set a value of its own).
    pub passed: bool,
    /// Why, naming the pattern and where it was written: "scrubbed by `*TOKEN*`
    /// (profiles/workstation.yaml:3:5)", "not in `environment.allow`".
    pub reason: String,
}

/// Decides every variable of `host_env` against the policy's environment allow-list and
/// scrub, in name order (what `-v` prints, and what [`plan`](super::plan) passes).
pub fn env_decisions(policy: &Policy, host_env: &BTreeMap<String, String>) -> Vec<EnvDecision> {
    let env = &policy.environment;
    let globs = |list: &[Sourced<String>]| -> Vec<(Glob, Origin, String)> {
        list.iter()
            .filter_map(|s| Some((Glob::new(&s.value).ok()?, s.origin.clone(), s.value.clone())))
            .collect()
    };
    let allow = globs(&env.allow);
    let scrub = globs(&env.scrub);
    host_env
        .keys()
        .map(|name| {
            let allowed_by = if env.inherit.value == EnvInherit::All {
                Some(format!(
                    "`environment.inherit: all` ({})",
                    env.inherit.origin
                ))
            } else {
                allow
                    .iter()
                    .find(|(g, _, _)| g.is_match(name))
                    .map(|(_, origin, text)| format!("allowed by `{text}` ({origin})"))
            };
            let scrubbed_by = scrub.iter().find(|(g, _, _)| g.is_match(name));
            let (passed, reason) = match (allowed_by, scrubbed_by) {
                (_, Some((_, origin, text))) => (false, format!("scrubbed by `{text}` ({origin})")),
                (Some(why), None) => (true, why),
                (None, None) => (
                    false,
                    format!("not in `environment.allow` (pass it with `--env {name}`)"),
                ),
            };
            EnvDecision {
                name: name.clone(),
                passed,
                reason,
            }
        })
        .collect()
}

/// Set when the network is off (a profile's `environment.set` may override each).
pub const OFFLINE_ENV: &[(&str, &str)] = &[
    ("npm_config_offline", "true"),
    ("CARGO_NET_OFFLINE", "true"),
    ("GOPROXY", "off"),
    ("PIP_RETRIES", "0"),
];

/// The environment the command starts with: the host's variables the policy passes, the offline
/// variables when the network is off, `environment.set`, and the temp dir.
pub(super) fn plan_env(
    policy: &Policy,
    host_env: &BTreeMap<String, String>,
    temp_dir: &Path,
    network: Network,
) -> BTreeMap<String, String> {
    let mut out: BTreeMap<String, String> = env_decisions(policy, host_env)
        .into_iter()
        .filter(|d| d.passed)
        .filter_map(|d| Some((d.name.clone(), host_env.get(&d.name)?.clone())))
        .collect();
    if network == Network::Off {
        // Package managers told the network is off use their caches and fail at once, instead
        // of retrying for a minute (npm) before they fail.
        for (name, value) in OFFLINE_ENV {
            out.insert((*name).to_owned(), (*value).to_owned());
        }
    }
    for (name, value) in &policy.environment.set {
        out.insert(name.clone(), value.value.clone());
    }
    let tmp = temp_dir.display().to_string();
    for name in ["TMPDIR", "TMP", "TEMP", "TEMPDIR"] {
        out.insert(name.to_owned(), tmp.clone());
    }
    out
}
