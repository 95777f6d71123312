//! The approvals seam: who answers when a rule says `ask` or a call asks for a wider sandbox.
//!
//! Outcomes are `allowed-once`, `rejected`, `cancelled` and `unavailable`; only `allowed-once`
//! lets the single call proceed. The approval policy is applied inside the seam: under `never`
//! every request is rejected before any answerer is consulted, so no answerer can bypass it.

use std::io::{BufRead, Write};

use bridle_policy::{ApprovalPolicy, Decision, SandboxMode};

use crate::printable::printable;

/// `text` made printable line by line (its own newlines kept).
fn printable_lines(text: &str) -> String {
    text.lines().map(printable).collect::<Vec<_>>().join("\n")
}
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
    /// The question was given up before anyone answered: what it was about ended first (the
    /// command timed out or was stopped).
    Withdrawn,
    /// Nobody could be asked.
    Unavailable,
}

impl ApprovalOutcome {
    /// How the outcome is logged: `approved`, `rejected`, `cancelled` or `unavailable`.
    pub fn name(self) -> &'static str {
        match self {
            ApprovalOutcome::AllowedOnce => "approved",
            ApprovalOutcome::Rejected => "rejected",
            ApprovalOutcome::Cancelled => "cancelled",
            ApprovalOutcome::Withdrawn => "withdrawn",
            ApprovalOutcome::Unavailable => "unavailable",
        }
    }

    /// The denial text the model reads for every outcome except `AllowedOnce`.
    pub fn denial(self, policy: ApprovalPolicy) -> Option<String> {
        match self {
            ApprovalOutcome::AllowedOnce => None,
            ApprovalOutcome::Rejected if policy == ApprovalPolicy::Never => {
                Some("rejected: the approval policy is `never`, so this needs a change of profile, not a retry".into())
            }
            ApprovalOutcome::Rejected => Some("rejected by the person asked; do not retry the same call".into()),
            ApprovalOutcome::Cancelled => Some("cancelled: the approval question was dismissed without an answer".into()),
            ApprovalOutcome::Withdrawn => Some("withdrawn: what the question was about ended (a timeout, a stop, or the process asked about was gone) before anyone answered".into()),
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
    /// The tool call the question is about (an exec inside a `bash` call names that call);
    /// filled in by the call's seam, `None` outside a call the agent made.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
}

/// What a person said about a plan (the second question of the user-interaction seam).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PlanReview {
    /// Approve, with no feedback: the only consent.
    Approved,
    /// Keep planning, with optional feedback for the model.
    KeepPlanning {
        /// What the person wants changed.
        feedback: Option<String>,
    },
    /// The review was dismissed or cancelled.
    Dismissed,
    /// Nobody can be asked.
    Unavailable,
}

/// The user-interaction seam: something that can answer the two questions, an approval (allow
/// once / reject, with the reason shown) and a plan review (approve / keep planning with
/// feedback). Answerers: headless ([`NoAnswerer`]: `unavailable`), the terminal
/// ([`TerminalAnswerer`]), and front ends of their own.
pub trait Answerer: Send + Sync {
    /// Answers one approval question.
    fn answer(&self, request: &ApprovalRequest) -> ApprovalOutcome;

    /// Answers one approval question whose answer may stop mattering while it is open (an exec
    /// held while its command runs against a timeout): once `withdrawn` returns true, an
    /// answerer that can stop asking gives up with `withdrawn`. By default the question is
    /// asked to the end (the command is stopped on time all the same).
    fn answer_unless(
        &self,
        request: &ApprovalRequest,
        withdrawn: &dyn Fn() -> bool,
    ) -> ApprovalOutcome {
        let _ = withdrawn;
        self.answer(request)
    }

    /// Reviews a plan (markdown); without a way to ask, `unavailable`.
    fn review_plan(&self, plan: &str) -> PlanReview {
        let _ = plan;
        PlanReview::Unavailable
    }

    /// Who answers, as the session log records it.
    fn who(&self) -> &'static str {
        "a configured answerer"
    }
}

/// The non-interactive default: nobody to ask.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoAnswerer;

impl Answerer for NoAnswerer {
    fn answer(&self, _request: &ApprovalRequest) -> ApprovalOutcome {
        ApprovalOutcome::Unavailable
    }

    fn who(&self) -> &'static str {
        "nobody (no terminal to ask on)"
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
    fn who(&self) -> &'static str {
        "the person at the terminal"
    }

    fn answer(&self, request: &ApprovalRequest) -> ApprovalOutcome {
        self.answer_unless(request, &|| false)
    }

    fn answer_unless(
        &self,
        request: &ApprovalRequest,
        withdrawn: &dyn Fn() -> bool,
    ) -> ApprovalOutcome {
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
        // Everything shown comes from the model or a profile: never let it drive the terminal.
        let args =
            printable_lines(&serde_json::to_string_pretty(&request.arguments).unwrap_or_default());
        let mut text = format!(
            "\nbridle: approval needed for tool `{}`\n  reason: {}\n",
            printable(&request.tool),
            printable(&request.reason)
        );
        if let Some(mode) = request.escalation {
            text.push_str(&format!("  asks to run with sandbox mode: {mode}\n"));
        }
        if let Some(j) = &request.justification {
            text.push_str(&format!("  justification: {}\n", printable(j)));
        }
        text.push_str(&format!("  arguments: {args}\nallow this one call? [y/N] "));
        // A key pressed before the question was shown is not an answer to it.
        let _ = bridle_sandbox::tty::discard_input(&tty);
        if out
            .write_all(text.as_bytes())
            .and_then(|()| out.flush())
            .is_err()
        {
            return ApprovalOutcome::Unavailable;
        }
        // Wait for the answer, but give up when bridle is asked to stop (Ctrl-C is held by
        // `bridle run` so that it can end the turn cleanly).
        loop {
            if bridle_sandbox::launcher::termination_requested() {
                return ApprovalOutcome::Cancelled;
            }
            if withdrawn() {
                let _ = out.write_all(
                    b"\nbridle: question withdrawn: what it was about ended before an answer\n",
                );
                return ApprovalOutcome::Withdrawn;
            }
            match bridle_sandbox::tty::wait_readable(&tty, std::time::Duration::from_millis(100)) {
                Ok(true) => break,
                Ok(false) => {}
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => return ApprovalOutcome::Cancelled,
            }
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

/// What the pipeline reports while it handles one call, so a session log can show what
/// decided it before it runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PipelineNote {
    /// A question went to the answerer.
    ApprovalAsked {
        /// The tool, why it needs approval, and the model's justification.
        question: String,
    },
    /// The seam answered.
    ApprovalDecided {
        /// `approved`, `rejected`, `cancelled` or `unavailable`.
        answer: String,
        /// Who answered (the approval policy, a person at the terminal, nobody).
        by: String,
    },
    /// The call was decided; an allowed call runs right after.
    Decided {
        /// Allow or deny.
        decision: Decision,
        /// The rule, approval, policy or guard that decided.
        by: String,
    },
    /// While the call's command ran, the exec supervisor denied an exec (or asked about one
    /// and had its answer).
    ExecDecided(crate::supervised::ExecDecision),
    /// The network proxy decided connections the call made (reported when the call's
    /// command has ended, with the bytes moved).
    Network(crate::net::NetDecision),
}

/// Receives a call's notes; an error means the note could not be kept (and the call must not
/// run).
pub type Observer<'a> = dyn Fn(PipelineNote) -> Result<(), String> + Sync + 'a;

/// The answerer of a seam: its own, or the one of the seam it was derived from.
enum AnswererRef<'o> {
    Owned(Box<dyn Answerer>),
    Shared(&'o dyn Answerer),
}

impl AnswererRef<'_> {
    fn get(&self) -> &dyn Answerer {
        match self {
            AnswererRef::Owned(a) => a.as_ref(),
            AnswererRef::Shared(a) => *a,
        }
    }
}

/// The seam: the approval policy, then an answerer; and, for a call the agent records, the
/// observer its decisions are reported to.
pub struct Approvals<'o> {
    policy: ApprovalPolicy,
    answerer: AnswererRef<'o>,
    observer: Option<&'o Observer<'o>>,
    call_id: Option<&'o str>,
}

impl std::fmt::Debug for Approvals<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Approvals")
            .field("policy", &self.policy)
            .field("observed", &self.observer.is_some())
            .field("call_id", &self.call_id)
            .finish_non_exhaustive()
    }
}

impl Approvals<'static> {
    /// A seam for `policy`, asking `answerer` when the policy allows asking.
    pub fn new(policy: ApprovalPolicy, answerer: Box<dyn Answerer>) -> Approvals<'static> {
        Approvals {
            policy,
            answerer: AnswererRef::Owned(answerer),
            observer: None,
            call_id: None,
        }
    }
}

impl<'o> Approvals<'o> {
    /// The same seam (policy and answerer) reporting to `observer`, for one call.
    pub fn observed<'p>(&'p self, observer: &'p Observer<'p>) -> Approvals<'p> {
        self.for_call(observer, None)
    }

    /// The same seam for the call `call_id` (when the caller named it), reporting to
    /// `observer`: every question asked through it names that call.
    pub fn for_call<'p>(
        &'p self,
        observer: &'p Observer<'p>,
        call_id: Option<&'p str>,
    ) -> Approvals<'p> {
        Approvals {
            policy: self.policy,
            answerer: AnswererRef::Shared(self.answerer.get()),
            observer: Some(observer),
            call_id,
        }
    }

    /// Who answers (for the plan review a plugin's tool asks for).
    pub fn answerer(&self) -> &dyn Answerer {
        self.answerer.get()
    }

    /// The policy in force.
    pub fn policy(&self) -> ApprovalPolicy {
        self.policy
    }

    /// Asks. Under `never` the answer is `rejected` and no answerer is consulted. With an
    /// observer, the question and the answer are reported; a question that cannot be reported
    /// is not asked, and an answer that cannot be reported does not approve (`unavailable`).
    pub fn ask(&self, request: &ApprovalRequest) -> ApprovalOutcome {
        self.ask_unless(request, &|| false)
    }

    /// Like [`Approvals::ask`], for a question whose answer may stop mattering while it is
    /// open (see [`Answerer::answer_unless`]). One withdrawn before it is asked is not asked
    /// (nor reported): `withdrawn`.
    pub fn ask_unless(
        &self,
        request: &ApprovalRequest,
        withdrawn: &dyn Fn() -> bool,
    ) -> ApprovalOutcome {
        if withdrawn() {
            return ApprovalOutcome::Withdrawn;
        }
        if self
            .note(PipelineNote::ApprovalAsked {
                question: question_text(request),
            })
            .is_err()
        {
            return ApprovalOutcome::Unavailable;
        }
        let named;
        let request = match (self.call_id, &request.call_id) {
            (Some(id), None) => {
                named = ApprovalRequest {
                    call_id: Some(id.to_owned()),
                    ..request.clone()
                };
                &named
            }
            _ => request,
        };
        let (outcome, by) = match self.policy {
            ApprovalPolicy::Never => (ApprovalOutcome::Rejected, "approval policy never"),
            ApprovalPolicy::Ask => (
                self.answerer.get().answer_unless(request, withdrawn),
                self.answerer.get().who(),
            ),
        };
        let noted = self.note(PipelineNote::ApprovalDecided {
            answer: outcome.name().to_owned(),
            by: by.to_owned(),
        });
        match noted {
            Ok(()) => outcome,
            Err(_) => ApprovalOutcome::Unavailable,
        }
    }

    /// Reports that the call was decided. An error means it could not be recorded: an allowed
    /// call must then not run.
    pub fn decided(&self, decision: Decision, by: &str) -> Result<(), String> {
        self.note(PipelineNote::Decided {
            decision,
            by: by.to_owned(),
        })
    }

    /// Reports what the exec supervisor decided while the call's command ran. An error means it
    /// could not be recorded.
    pub fn exec_decided(&self, record: &bridle_sandbox::ExecRecord) -> Result<(), String> {
        self.note(PipelineNote::ExecDecided(record.into()))
    }

    /// Reports what the exec supervisor decided while no call ran (a background process of the
    /// persistent terminal), at the first call after it.
    pub fn exec_decided_between_calls(
        &self,
        record: &bridle_sandbox::ExecRecord,
    ) -> Result<(), String> {
        self.note(PipelineNote::ExecDecided(
            crate::supervised::ExecDecision::between_calls(record),
        ))
    }

    /// Reports a network decision of the call's connections.
    pub fn network(&self, decision: &crate::net::NetDecision) -> Result<(), String> {
        self.note(PipelineNote::Network(decision.clone()))
    }

    fn note(&self, note: PipelineNote) -> Result<(), String> {
        match self.observer {
            Some(observer) => observer(note),
            None => Ok(()),
        }
    }
}

/// The text the model reads when a call's decision could not be recorded and it did not run.
pub fn not_recorded(reason: &str) -> String {
    format!("not run: the session log could not record the decision ({reason})")
}

/// The question as one line: the tool, why it needs approval, and the model's justification.
fn question_text(request: &ApprovalRequest) -> String {
    let mut text = format!("{}: {}", request.tool, request.reason);
    if let Some(j) = request
        .justification
        .as_deref()
        .filter(|j| !j.trim().is_empty())
    {
        text.push_str(&format!(" (justification: {j})"));
    }
    text
}

#[cfg(test)]
mod tests;
