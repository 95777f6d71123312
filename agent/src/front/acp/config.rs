//! The config options `bridle acp` offers (`sandbox`, `network`, `approval`), never wider
//! than the profile.

use agent_client_protocol::v1::schema::{SessionConfigOption, SessionConfigSelectOption};
use bridle_policy::{ApprovalPolicy, Network, SandboxMode};

/// The widest the profile allows: config options never offer more.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ceiling {
    pub mode: SandboxMode,
    pub network: Network,
    pub approval: ApprovalPolicy,
}

/// The values in force.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Current {
    pub mode: SandboxMode,
    pub network: Network,
    pub approval: ApprovalPolicy,
}

/// The config option ids.
pub const OPTION_SANDBOX: &str = "sandbox";
pub const OPTION_NETWORK: &str = "network";
pub const OPTION_APPROVAL: &str = "approval";

const MODES: [SandboxMode; 3] = [
    SandboxMode::ReadOnly,
    SandboxMode::WorkspaceWrite,
    SandboxMode::DangerFullAccess,
];
const NETWORKS: [Network; 3] = [Network::Off, Network::AllowList, Network::On];
const APPROVALS: [ApprovalPolicy; 2] = [ApprovalPolicy::Ask, ApprovalPolicy::Never];

/// The three config options, `sandbox`, `network` and `approval`, each offering only the
/// values no wider than the profile's (approval `ask` is wider than `never`: it lets a person
/// allow more).
pub fn config_options(ceiling: &Ceiling, current: Current) -> Vec<SessionConfigOption> {
    fn select<T: std::fmt::Display + Copy>(
        id: &str,
        name: &str,
        description: &str,
        current: T,
        values: impl Iterator<Item = T>,
    ) -> SessionConfigOption {
        let options: Vec<SessionConfigSelectOption> = values
            .map(|v| SessionConfigSelectOption::new(v.to_string(), v.to_string()))
            .collect();
        SessionConfigOption::select(id.to_owned(), name.to_owned(), current.to_string(), options)
            .description(description.to_owned())
    }
    vec![
        select(
            OPTION_SANDBOX,
            "Sandbox",
            "What commands and file tools may write (no wider than the profile)",
            current.mode,
            MODES.into_iter().filter(|m| *m <= ceiling.mode),
        ),
        select(
            OPTION_NETWORK,
            "Network",
            "Whether commands reach the network (no wider than the profile)",
            current.network,
            NETWORKS.into_iter().filter(|n| *n <= ceiling.network),
        ),
        select(
            OPTION_APPROVAL,
            "Approval",
            "Whether a person is asked before an escalation (`never` rejects them)",
            current.approval,
            APPROVALS.into_iter().filter(|a| *a <= ceiling.approval),
        ),
    ]
}

/// A change a client asked for through a config option.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigChoice {
    Mode(SandboxMode),
    Network(Network),
    Approval(ApprovalPolicy),
}

/// Checks a client's `option = value` against the profile: unknown options and values, and
/// anything wider than the profile, are refused with the reason.
pub fn config_choice(ceiling: &Ceiling, option: &str, value: &str) -> Result<ConfigChoice, String> {
    fn pick<T: std::fmt::Display + Copy + PartialOrd>(
        option: &str,
        value: &str,
        all: &[T],
        ceiling: T,
    ) -> Result<T, String> {
        let chosen = all
            .iter()
            .copied()
            .find(|v| v.to_string() == value)
            .ok_or_else(|| {
                let names: Vec<String> = all.iter().map(ToString::to_string).collect();
                format!(
                    "config option `{option}`: unknown value {value:?} (one of {})",
                    names.join(", ")
                )
            })?;
        if chosen > ceiling {
            return Err(format!(
                "config option `{option}`: `{value}` is wider than the profile allows \
                 (at most `{ceiling}`)"
            ));
        }
        Ok(chosen)
    }
    match option {
        OPTION_SANDBOX => pick(option, value, &MODES, ceiling.mode).map(ConfigChoice::Mode),
        OPTION_NETWORK => {
            pick(option, value, &NETWORKS, ceiling.network).map(ConfigChoice::Network)
        }
        OPTION_APPROVAL => {
            pick(option, value, &APPROVALS, ceiling.approval).map(ConfigChoice::Approval)
        }
        other => Err(format!(
            "unknown config option {other:?} (the options are `{OPTION_SANDBOX}`, \
             `{OPTION_NETWORK}` and `{OPTION_APPROVAL}`)"
        )),
    }
}

impl Ceiling {
    /// The ceiling of the profile's own policy (before any choice a client made).
    pub fn of(profile: &crate::log::PolicySummary) -> Self {
        Self {
            mode: profile.mode,
            network: profile.network,
            approval: profile.approval,
        }
    }
}
