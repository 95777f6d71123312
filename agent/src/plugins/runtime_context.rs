//! `runtime-context`: the system-prompt section that tells the model where it works and what
//! confines it (workspace, sandbox mode, network, approval policy, the network allow-list),
//! and, when configured with `date: true`, today's date. Configuration: `{date: bool}`, every
//! other key refused.

use std::sync::Arc;

use bridle_policy::{ApprovalPolicy, Network, Plan, SandboxMode};

use crate::log::Event;
use crate::plugin::{Config, Plugin, PluginError, Registrar, Section};

/// The plugin's name.
pub const PLUGIN: &str = "runtime-context";
/// The section's name and order.
pub const SECTION_NAME: &str = "bridle:environment";
pub const SECTION_ORDER: u32 = 10;

/// What the section says about the session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuntimeFacts {
    pub workspace: String,
    pub mode: SandboxMode,
    pub network: Network,
    pub approval: ApprovalPolicy,
    /// The allow-list's hosts, when the network is an allow-list.
    pub allow_hosts: Option<Vec<String>>,
}

impl RuntimeFacts {
    /// The facts of the session's plan.
    pub fn from_plan(plan: &Plan) -> Self {
        let spec = &plan.spec;
        Self {
            workspace: spec.workspace.display().to_string(),
            mode: spec.mode,
            network: spec.network,
            approval: plan.approval,
            allow_hosts: spec
                .allow_list
                .as_ref()
                .map(|l| l.allow.iter().map(|e| e.entry.clone()).collect()),
        }
    }

    /// The section's text.
    pub fn text(&self) -> String {
        let mut text = format!(
            "You are a coding agent working in the workspace `{}`. Every command and file tool \
             runs in a sandbox the kernel enforces: sandbox mode `{}`, network `{}`, approval \
             policy `{}`. A denial is final: do not retry a denied call unchanged; explain what \
             you could not do instead. Relative paths are relative to the workspace.",
            self.workspace, self.mode, self.network, self.approval
        );
        if let Some(hosts) = &self.allow_hosts {
            let hosts: Vec<&str> = hosts.iter().take(30).map(String::as_str).collect();
            text.push_str(&format!(
                " The network is an allow-list: commands reach only these hosts, through a proxy the \
                 HTTPS_PROXY/HTTP_PROXY/ALL_PROXY variables name (there is no DNS inside; a client \
                 must use the proxy): {}.",
                if hosts.is_empty() {
                    "none".to_owned()
                } else {
                    hosts.join(", ")
                }
            ));
        }
        text
    }
}

/// The plugin, for a session with `facts`.
#[derive(Debug, Clone)]
pub struct RuntimeContext {
    facts: RuntimeFacts,
}

impl RuntimeContext {
    pub fn new(facts: RuntimeFacts) -> Self {
        Self { facts }
    }
}

impl Plugin for RuntimeContext {
    fn name(&self) -> &str {
        PLUGIN
    }

    fn register(&self, registrar: &mut Registrar, config: &Config<'_>) -> Result<(), PluginError> {
        let fields = config.fields(&["date"])?;
        let date = fields.bool("date")?.unwrap_or(false);
        registrar.section(Arc::new(EnvironmentSection {
            text: self.facts.text(),
            date,
        }));
        Ok(())
    }
}

struct EnvironmentSection {
    text: String,
    date: bool,
}

impl Section for EnvironmentSection {
    fn name(&self) -> &str {
        SECTION_NAME
    }

    fn order(&self) -> u32 {
        SECTION_ORDER
    }

    fn render(&self, _events: &[(u64, Event)]) -> Option<String> {
        if !self.date {
            return Some(self.text.clone());
        }
        let now = crate::log::now_rfc3339();
        let today = now.get(..10).unwrap_or(&now);
        Some(format!("{} Today is {today} (UTC).", self.text))
    }
}
