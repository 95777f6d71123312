//! Approvals and plan reviews, asked of the client as `session/request_permission`s; a
//! cancelled request or an error is a denial.

use std::sync::Arc;

use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::RequestPermissionOutcome;
use agent_client_protocol::{Client, Error};
use bridle_agent::front::acp::{self, Answer};
use bridle_agent::front::call_summary;
use bridle_agent::session::{Question, Questions};
use bridle_exec::approvals::{ApprovalOutcome, PlanReview};

use super::{Entry, lock};

/// Asks the client every approval and plan review of the session.
pub(super) fn spawn_questions(
    cx: &ConnectionTo<Client>,
    entry: &Arc<Entry>,
    mut questions: Questions,
) -> Result<(), Error> {
    let cx2 = cx.clone();
    let entry = Arc::clone(entry);
    cx.spawn(async move {
        while let Some(question) = questions.recv().await {
            let cx3 = cx2.clone();
            let entry = Arc::clone(&entry);
            cx2.spawn(async move {
                ask(&cx3, &entry, question).await;
                Ok(())
            })?;
        }
        Ok(())
    })
}

/// One question, asked through `session/request_permission`.
async fn ask(cx: &ConnectionTo<Client>, entry: &Entry, question: Question) {
    // A question that names no call is about the latest call of its tool (the plan review),
    // or else the latest call announced (the network proxy's, whose allow-list is the
    // session's: the connection came from a command still running).
    let call_of = |tool: &str| {
        let calls = lock(&entry.calls);
        calls
            .get(tool)
            .or_else(|| calls.get(""))
            .cloned()
            .unwrap_or_default()
    };
    match question {
        Question::Approval { request, reply } => {
            let arguments = request.arguments.to_string();
            let title = call_summary(&request.tool, &arguments, 80);
            let mut text = request.reason.clone();
            if let Some(mode) = request.escalation {
                text.push_str(&format!(" (asks for sandbox mode `{mode}`)"));
            }
            if let Some(why) = &request.justification {
                text.push_str(&format!("\nThe model says: {why}"));
            }
            let asked = acp::permission_request(
                &entry.id,
                acp::Question::Approval,
                &request
                    .call_id
                    .clone()
                    .unwrap_or_else(|| call_of(&request.tool)),
                &title,
                &text,
            );
            let sent = cx.send_request(asked);
            let withdraw = sent.cancellation_handle();
            let answered = sent.block_task();
            tokio::pin!(answered);
            // A question the session gives up (its command timed out) is withdrawn from the
            // client (`$/cancel_request`); whatever the client answers later changes nothing.
            let outcome = tokio::select! {
                outcome = &mut answered => outcome.map(|r| r.outcome),
                () = reply.wait_given_up() => {
                    let _ = withdraw.cancel();
                    return;
                }
            };
            let cancelled = matches!(outcome, Ok(RequestPermissionOutcome::Cancelled));
            let answer = match acp::answer_of(acp::Question::Approval, outcome) {
                _ if cancelled => ApprovalOutcome::Cancelled,
                Answer::Yes => ApprovalOutcome::AllowedOnce,
                Answer::No => ApprovalOutcome::Rejected,
            };
            reply.send(answer);
        }
        Question::PlanReview { plan, reply } => {
            let asked = acp::permission_request(
                &entry.id,
                acp::Question::PlanReview,
                &call_of("exit_plan_mode"),
                "Review the plan",
                &plan,
            );
            let outcome = cx.send_request(asked).block_task().await.map(|r| r.outcome);
            let cancelled = matches!(outcome, Ok(RequestPermissionOutcome::Cancelled));
            let answer = match acp::answer_of(acp::Question::PlanReview, outcome) {
                _ if cancelled => PlanReview::Dismissed,
                Answer::Yes => PlanReview::Approved,
                Answer::No => PlanReview::KeepPlanning { feedback: None },
            };
            reply.send(answer);
        }
    }
}
