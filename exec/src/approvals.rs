//! The approvals seam: who answers when a rule says `ask` or a call asks for a wider sandbox.
//!
//! Outcomes are `allowed-once`, `rejected`, `cancelled` and `unavailable`; only `allowed-once`
//! lets the single call proceed. The approval policy is applied inside the seam: under `never`
//! every request is rejected before any answerer is consulted, so no answerer can bypass it.

use std::io::{BufRead, Write};

use bridle_policy::{ApprovalPolicy, SandboxMode};
use serde::Serialize;

/// What a person (or a configured answerer) said.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ApprovalOutcome {
    /// This one call may proceed.
    AllowedOnce,
    /// Someone said no.
    Rejected,
    /// The question was dismissed (end of input, interrupt).
    Cancelled,
    /// Nobody could be asked.
    Unavailable,
}

impl ApprovalOutcome {
    /// The denial text the model reads for every outcome except `AllowedOnce`.
    pub fn denial(self, policy: ApprovalPolicy) -> Option<String> {
        match self {
            ApprovalOutcome::AllowedOnce => None,
            ApprovalOutcome::Rejected if policy == ApprovalPolicy::Never => {
                Some("rejected: the approval policy is `never`, so this needs a change of profile, not a retry".into())
            }
            ApprovalOutcome::Rejected => Some("rejected by the person asked; do not retry the same call".into()),
            ApprovalOutcome::Cancelled => Some("cancelled: the approval question was dismissed without an answer".into()),
            ApprovalOutcome::Unavailable => {
                Some("unavailable: approval is needed but nobody can be asked in this session (no terminal)".into())
            }
        }
    }
}

/// One question to the seam.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ApprovalRequest {
    /// The tool, e.g. `bash`.
    pub tool: String,
    /// Its arguments as the model sent them.
    pub arguments: serde_json::Value,
    /// Why approval is needed (the rule or the escalation).
    pub reason: String,
    /// The model's justification, when it gave one.
    pub justification: Option<String>,
    /// The wider sandbox mode asked for, when this is an escalation.
    pub escalation: Option<SandboxMode>,
}

/// Something that can answer approval questions.
pub trait Answerer: Send + Sync {
    /// Answers one question.
    fn answer(&self, request: &ApprovalRequest) -> ApprovalOutcome;
}

/// The non-interactive default: nobody to ask.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoAnswerer;

impl Answerer for NoAnswerer {
    fn answer(&self, _request: &ApprovalRequest) -> ApprovalOutcome {
        ApprovalOutcome::Unavailable
    }
}

/// Asks on the controlling terminal (`/dev/tty`): shows the tool, its arguments, the reason and
/// the justification; `y`/`yes` allows once, `n`/`no` rejects, end of input cancels.
#[derive(Debug, Clone, Copy, Default)]
pub struct TerminalAnswerer;

impl TerminalAnswerer {
    /// Whether a terminal is there to ask on.
    pub fn available() -> bool {
        std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/tty")
            .is_ok()
    }
}

impl Answerer for TerminalAnswerer {
    fn answer(&self, request: &ApprovalRequest) -> ApprovalOutcome {
        let Ok(tty) = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/tty")
        else {
            return ApprovalOutcome::Unavailable;
        };
        let Ok(mut out) = tty.try_clone() else {
            return ApprovalOutcome::Unavailable;
        };
        let args = serde_json::to_string_pretty(&request.arguments).unwrap_or_default();
        let mut text = format!(
            "\nbridle: approval needed for tool `{}`\n  reason: {}\n",
            request.tool, request.reason
        );
        if let Some(mode) = request.escalation {
            text.push_str(&format!("  asks to run with sandbox mode: {mode}\n"));
        }
        if let Some(j) = &request.justification {
            text.push_str(&format!("  justification: {j}\n"));
        }
        text.push_str(&format!("  arguments: {args}\nallow this one call? [y/N] "));
        if out
            .write_all(text.as_bytes())
            .and_then(|()| out.flush())
            .is_err()
        {
            return ApprovalOutcome::Unavailable;
        }
        let mut line = String::new();
        match std::io::BufReader::new(tty).read_line(&mut line) {
            Ok(0) | Err(_) => ApprovalOutcome::Cancelled,
            Ok(_) => match line.trim().to_ascii_lowercase().as_str() {
                "y" | "yes" => ApprovalOutcome::AllowedOnce,
                _ => ApprovalOutcome::Rejected,
            },
        }
    }
}

/// The seam: the approval policy, then an answerer.
pub struct Approvals {
    policy: ApprovalPolicy,
    answerer: Box<dyn Answerer>,
}

impl std::fmt::Debug for Approvals {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Approvals")
            .field("policy", &self.policy)
            .finish_non_exhaustive()
    }
}

impl Approvals {
    /// A seam for `policy`, asking `answerer` when the policy allows asking.
    pub fn new(policy: ApprovalPolicy, answerer: Box<dyn Answerer>) -> Approvals {
        Approvals { policy, answerer }
    }

    /// The policy in force.
    pub fn policy(&self) -> ApprovalPolicy {
        self.policy
    }

    /// Asks. Under `never` the answer is `rejected` and no answerer is consulted.
    pub fn ask(&self, request: &ApprovalRequest) -> ApprovalOutcome {
        match self.policy {
            ApprovalPolicy::Never => ApprovalOutcome::Rejected,
            ApprovalPolicy::Ask => self.answerer.answer(request),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};

    use super::*;

    struct Yes<'a>(&'a AtomicBool);

    impl Answerer for Yes<'static> {
        fn answer(&self, _request: &ApprovalRequest) -> ApprovalOutcome {
            self.0.store(true, Ordering::SeqCst);
            ApprovalOutcome::AllowedOnce
        }
    }

    fn request() -> ApprovalRequest {
        ApprovalRequest {
            tool: "bash".into(),
            arguments: serde_json::json!({"command": "git push"}),
            reason: "rule".into(),
            justification: None,
            escalation: None,
        }
    }

    #[test]
    fn policy_never_rejects_without_asking_any_answerer() {
        static ASKED: AtomicBool = AtomicBool::new(false);
        let seam = Approvals::new(ApprovalPolicy::Never, Box::new(Yes(&ASKED)));
        assert_eq!(seam.ask(&request()), ApprovalOutcome::Rejected);
        assert!(
            !ASKED.load(Ordering::SeqCst),
            "an answerer was consulted under `never`"
        );
    }

    #[test]
    fn policy_ask_consults_the_answerer() {
        static ASKED: AtomicBool = AtomicBool::new(false);
        let seam = Approvals::new(ApprovalPolicy::Ask, Box::new(Yes(&ASKED)));
        assert_eq!(seam.ask(&request()), ApprovalOutcome::AllowedOnce);
        assert!(ASKED.load(Ordering::SeqCst));
    }

    #[test]
    fn no_answerer_is_unavailable_and_every_denial_is_distinct() {
        let seam = Approvals::new(ApprovalPolicy::Ask, Box::new(NoAnswerer));
        assert_eq!(seam.ask(&request()), ApprovalOutcome::Unavailable);
        let texts: Vec<String> = [
            (ApprovalOutcome::Rejected, ApprovalPolicy::Ask),
            (ApprovalOutcome::Rejected, ApprovalPolicy::Never),
            (ApprovalOutcome::Cancelled, ApprovalPolicy::Ask),
            (ApprovalOutcome::Unavailable, ApprovalPolicy::Ask),
        ]
        .iter()
        .map(|(o, p)| o.denial(*p).unwrap())
        .collect();
        for (i, a) in texts.iter().enumerate() {
            for b in &texts[i + 1..] {
                assert_ne!(a, b);
            }
        }
        assert_eq!(
            ApprovalOutcome::AllowedOnce.denial(ApprovalPolicy::Ask),
            None
        );
    }
}
