//! `session/request_permission`: the two questions of the user-interaction seam as a client
//! is asked them, and its answers (anything unclear is no).

use agent_client_protocol::v1::schema::{
    PermissionOption, PermissionOptionKind, RequestPermissionOutcome, RequestPermissionRequest,
    SessionId, ToolCallContent, ToolCallUpdate, ToolCallUpdateFields,
};

/// The option ids of `session/request_permission`.
pub const ALLOW_ONCE: &str = "allow-once";
pub const REJECT_ONCE: &str = "reject-once";
pub const APPROVE_PLAN: &str = "approve";
pub const KEEP_PLANNING: &str = "keep-planning";

/// The two questions of the user-interaction seam, as a client is asked them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Question {
    /// An approval: allow once or reject.
    Approval,
    /// A plan under review: approve, or keep planning.
    PlanReview,
}

/// How a person answered through the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// Allowed once / the plan approved.
    Yes,
    /// Rejected / keep planning; also a cancelled request, an unknown option or a JSON-RPC
    /// error (fail closed).
    No,
}

/// The `session/request_permission` for `question` about call `call_id`: the call titled
/// with what it does, the reason (the approval question, or the plan) as its content, and
/// the two options.
pub fn permission_request(
    session: &str,
    question: Question,
    call_id: &str,
    title: &str,
    text: &str,
) -> RequestPermissionRequest {
    let options = match question {
        Question::Approval => vec![
            PermissionOption::new(ALLOW_ONCE, "Allow once", PermissionOptionKind::AllowOnce),
            PermissionOption::new(REJECT_ONCE, "Reject", PermissionOptionKind::RejectOnce),
        ],
        Question::PlanReview => vec![
            PermissionOption::new(
                APPROVE_PLAN,
                "Approve the plan",
                PermissionOptionKind::AllowOnce,
            ),
            PermissionOption::new(
                KEEP_PLANNING,
                "Keep planning",
                PermissionOptionKind::RejectOnce,
            ),
        ],
    };
    let fields = ToolCallUpdateFields::new()
        .title(title.to_owned())
        .content(vec![ToolCallContent::from(text.to_owned())]);
    RequestPermissionRequest::new(
        SessionId::new(session.to_owned()),
        ToolCallUpdate::new(call_id.to_owned(), fields),
        options,
    )
}

/// What the client's answer to a [`permission_request`] for `question` means: only the
/// explicit yes option allows; a cancelled request, any other option or an error
/// (`Err`) is a no.
pub fn answer_of<E>(question: Question, outcome: Result<RequestPermissionOutcome, E>) -> Answer {
    let yes = match question {
        Question::Approval => ALLOW_ONCE,
        Question::PlanReview => APPROVE_PLAN,
    };
    match outcome {
        Ok(RequestPermissionOutcome::Selected(selected))
            if selected.option_id.0.as_ref() == yes =>
        {
            Answer::Yes
        }
        _ => Answer::No,
    }
}
