//! The text `bridle log show` prints: what the agent did and who allowed it, read from the
//! timeline alone.
//!
//! Decisions, approvals, denials, escalations, policies and why a turn ended are printed
//! whole: they are what a reviewer reads. Arguments, results, input, reasoning and answers
//! are cut to their first line and a few dozen characters, with a marker saying how much was
//! left out, unless `--full`; then text of several lines is printed as a block whose every
//! line starts with `| `, so nothing in it can pass for a line of the timeline.

use std::io::Write;

use bridle_agent::log::{
    Call, Entry, PolicySummary, Reply, Step, Switch, Timeline, Turn, turn_end_name,
};
use bridle_exec::printable::printable;

/// How text that may be long is printed.
#[derive(Debug, Clone, Copy)]
struct Cut {
    full: bool,
}

impl Cut {
    /// `label` and `text` on one line (cut to `max` characters unless full), or, when full
    /// and `text` has several lines, `label` alone and then `text` as a block at `indent`.
    fn write(
        self,
        out: &mut impl Write,
        indent: &str,
        label: &str,
        text: &str,
        max: usize,
    ) -> std::io::Result<()> {
        if !self.full {
            return writeln!(out, "{indent}{label} {}", brief(text, max));
        }
        if !text.contains('\n') {
            return writeln!(out, "{indent}{label} {}", printable(text));
        }
        writeln!(out, "{indent}{label}")?;
        for line in text.lines() {
            writeln!(out, "{indent}  | {}", printable(line))?;
        }
        Ok(())
    }

    /// `text` for the middle of a line: whole when full (newlines escaped), else cut.
    fn inline(self, text: &str, max: usize) -> String {
        if self.full {
            printable(text)
        } else {
            brief(text, max)
        }
    }
}

/// The first line of `text`, at most `max` characters, and when anything is left out a
/// marker saying how much (`… [+120 chars]`, `… [+3 lines, 120 chars]`).
pub(crate) fn brief(text: &str, max: usize) -> String {
    // A result that starts with blank lines shows its first line with something on it.
    let text = text.trim_start_matches(['\n', '\r', ' ', '\t']);
    let line = text.split('\n').next().unwrap_or("");
    let shown: String = line.chars().take(max).collect();
    let total = text.chars().count();
    let left = total - shown.chars().count();
    let mut out = printable(&shown);
    if left > 0 {
        let more_lines = text.lines().count().saturating_sub(1);
        if more_lines > 0 {
            let lines = if more_lines == 1 { "line" } else { "lines" };
            out.push_str(&format!("… [+{more_lines} {lines}, {left} chars]"));
        } else {
            out.push_str(&format!("… [+{left} chars]"));
        }
    }
    out
}

/// Writes the timeline `view`.
pub fn write_timeline(out: &mut impl Write, view: &Timeline, full: bool) -> std::io::Result<()> {
    // Every value read from the log goes through `printable` (or `brief`, which uses it): a
    // log can hold anything a model or a command produced.
    let p = |text: &str| printable(text);
    let cut = Cut { full };
    if let Some(h) = &view.session {
        writeln!(out, "session {}  created {}", p(&h.id), p(&h.created))?;
        writeln!(
            out,
            "  workspace {}  profile {}",
            p(&h.workspace),
            p(&h.profile)
        )?;
        writeln!(out, "  policy sha256:{}", p(&h.policy_digest))?;
    }
    if let Some((from, seq)) = &view.forked_from {
        writeln!(out, "  forked from {} at event {seq}", p(from))?;
    }
    for entry in &view.entries {
        match entry {
            Entry::Switch(s) => write_switch(out, "", s)?,
            Entry::Unattached { seq, kind, .. } => writeln!(
                out,
                "[{seq}] {kind} (belongs to no turn or call in the log)"
            )?,
            Entry::ExecBetweenCalls { seq, exec, .. } => {
                writeln!(out, "[{seq}] exec between calls: {}", p(&exec.message))?;
                write_ancestry(out, "  ", exec)?;
            }
            Entry::NetBetweenCalls { seq, decision, .. } => {
                writeln!(out, "[{seq}] between calls: {}", network_line(decision))?;
            }
            Entry::Turn(t) => write_turn(out, t, cut)?,
        }
    }
    Ok(())
}

/// The processes above an exec, when known.
fn write_ancestry(
    out: &mut impl Write,
    indent: &str,
    exec: &bridle_agent::log::ExecDecision,
) -> std::io::Result<()> {
    if exec.ancestry.is_empty() {
        return Ok(());
    }
    writeln!(
        out,
        "{indent}started by: {}",
        printable(&exec.ancestry.join(" <- "))
    )
}

fn write_switch(out: &mut impl Write, indent: &str, s: &Switch) -> std::io::Result<()> {
    writeln!(
        out,
        "{indent}[{}] {} -> {}",
        s.seq,
        s.what,
        printable(&s.to)
    )?;
    if let Some(policy) = &s.policy {
        write_policy(out, &format!("{indent}      "), policy)?;
    }
    if let Some(summary) = &s.summary {
        writeln!(out, "{indent}      summary: {}", brief(summary, 100))?;
    }
    Ok(())
}

fn write_policy(out: &mut impl Write, indent: &str, policy: &PolicySummary) -> std::io::Result<()> {
    let list = |items: &[String]| {
        if items.is_empty() {
            "none".to_owned()
        } else {
            items
                .iter()
                .map(|i| printable(i))
                .collect::<Vec<_>>()
                .join(", ")
        }
    };
    writeln!(
        out,
        "{indent}profile {}  mode {}  approval {}  network {}",
        printable(&policy.profile),
        policy.mode,
        policy.approval,
        policy.network
    )?;
    writeln!(out, "{indent}writable: {}", list(&policy.writable_roots))?;
    writeln!(out, "{indent}protected: {}", list(&policy.protected_paths))?;
    writeln!(out, "{indent}masked: {}", list(&policy.masked_paths))?;
    let rules: Vec<String> = policy
        .rules
        .iter()
        .map(|r| format!("{} ({} {})", r.id, r.applies_to, r.decision))
        .collect();
    writeln!(out, "{indent}rules: {}", list(&rules))
}

fn write_turn(out: &mut impl Write, t: &Turn, cut: Cut) -> std::io::Result<()> {
    let p = |text: &str| printable(text);
    let ended = t.ended.map_or("open", turn_end_name);
    writeln!(out, "[{}] turn {} ({ended})  {}", t.seq, t.turn, p(&t.time))?;
    for input in &t.input {
        cut.write(out, "    ", "user:", input, 100)?;
    }
    // Each switch where it happened: before the first step, or in the step it came in (the
    // model route is logged as a step's request is built).
    let mut switches = t.switches.iter().peekable();
    let first = t.steps.first().map(|s| s.seq);
    while let Some(s) = switches.next_if(|s| first.is_none_or(|f| s.seq < f)) {
        write_switch(out, "    ", s)?;
    }
    for (i, step) in t.steps.iter().enumerate() {
        let next = t.steps.get(i + 1).map(|s| s.seq);
        let during: Vec<&Switch> =
            std::iter::from_fn(|| switches.next_if(|s| next.is_none_or(|n| s.seq < n))).collect();
        write_step(out, step, &during, cut)?;
    }
    if t.detail.is_some() || t.cancelled_by.is_some() {
        let by = t
            .cancelled_by
            .as_deref()
            .map(|c| format!(" (cancelled by {})", p(c)))
            .unwrap_or_default();
        let detail = t
            .detail
            .as_deref()
            .map(|d| format!(": {}", p(d)))
            .unwrap_or_default();
        writeln!(out, "  ended {ended}{by}{detail}")?;
    }
    Ok(())
}

/// `  model gpt-4.1  finish stop  tokens 1200 in, 35 out`, or nothing.
fn reply_facts(reply: Option<&Reply>) -> String {
    let Some(reply) = reply else {
        return String::new();
    };
    let mut facts = String::new();
    if let Some(model) = &reply.model {
        facts.push_str(&format!("  model {}", printable(model)));
    }
    if let Some(finish) = &reply.finish {
        facts.push_str(&format!("  finish {}", printable(finish)));
    }
    if let Some(usage) = &reply.usage {
        facts.push_str(&format!(
            "  tokens {} in, {} out",
            usage.prompt_tokens, usage.completion_tokens
        ));
    }
    facts
}

fn write_step(
    out: &mut impl Write,
    step: &Step,
    switches: &[&Switch],
    cut: Cut,
) -> std::io::Result<()> {
    writeln!(
        out,
        "  [{}] step {}{}",
        step.seq,
        step.step,
        reply_facts(step.reply.as_ref())
    )?;
    for s in switches {
        write_switch(out, "    ", s)?;
    }
    if !step.reasoning.is_empty() {
        cut.write(out, "    ", "reasoning:", &step.reasoning, 100)?;
    }
    for call in &step.calls {
        write_call(out, call, cut)?;
    }
    if !step.answer.is_empty() {
        cut.write(out, "    ", "answer:", &step.answer, 100)?;
    }
    Ok(())
}

fn write_call(out: &mut impl Write, call: &Call, cut: Cut) -> std::io::Result<()> {
    let p = |text: &str| printable(text);
    let decision = match (&call.decision, &call.decided_by) {
        (Some(d), Some(by)) => format!(
            "{} by {}",
            crate::style::decision(*d, crate::style::colour_on_stdout()),
            p(by)
        ),
        _ if !call.dispatched => "not dispatched".to_owned(),
        _ => "undecided".to_owned(),
    };
    writeln!(
        out,
        "    [{}] {} {}  {decision}",
        call.seq,
        cut.inline(&call.name, 40),
        cut.inline(&call.arguments, 80)
    )?;
    const MORE: &str = "        ";
    if let Some(e) = &call.escalation {
        let allowed = call.decision == Some(bridle_policy::Decision::Allow);
        let mode = call
            .sandbox
            .as_ref()
            .and_then(|s| s.get("mode"))
            .and_then(serde_json::Value::as_str)
            .map(|m| format!(" (mode {})", p(m)))
            .unwrap_or_default();
        let ran = match (allowed, e.ran_escalated) {
            (false, _) => "refused: it did not run".to_owned(),
            (true, Some(true)) => format!("ran escalated{mode}"),
            (true, Some(false)) => format!("ran without it{mode}"),
            (true, None) => "allowed; the log does not say how it ran".to_owned(),
        };
        writeln!(out, "{MORE}escalation: asked {}, {ran}", p(&e.asked))?;
    }
    for a in &call.approvals {
        writeln!(
            out,
            "{MORE}asked: {}  answer: {} by {}",
            p(&a.question),
            p(a.answer.as_deref().unwrap_or("none")),
            p(a.answered_by.as_deref().unwrap_or("nobody"))
        )?;
    }
    if let Some(by) = &call.refused_by {
        writeln!(out, "{MORE}refused by: {}", p(by))?;
    }
    // A rule's denial at an exec is printed as that exec's decision below, not as the sandbox's.
    if let Some(what) = &call.denied_by_sandbox
        && !call.execs.iter().any(|exec| exec.message == *what)
    {
        writeln!(out, "{MORE}denied by the sandbox: {}", p(what))?;
    }
    // Decisions of the exec supervisor are printed whole, with the processes above.
    for exec in &call.execs {
        let when = if exec.between_calls {
            " (between calls, before this call)"
        } else {
            ""
        };
        writeln!(out, "{MORE}exec{when}: {}", p(&exec.message))?;
        write_ancestry(out, &format!("{MORE}  "), exec)?;
    }
    for n in &call.network {
        let when = if n.between_calls {
            "(between calls, before this call) "
        } else {
            ""
        };
        writeln!(out, "{MORE}{when}{}", network_line(n))?;
    }
    match (call.ok, &call.result) {
        (Some(ok), Some(text)) => {
            cut.write(out, MORE, if ok { "ok:" } else { "failed:" }, text, 100)?;
        }
        _ => writeln!(out, "{MORE}no result")?,
    }
    for q in &call.quarantined {
        let to = q.moved_to.as_deref().unwrap_or("(could not be moved)");
        writeln!(
            out,
            "{MORE}moved aside: {} -> {}  {}",
            p(&q.path),
            p(to),
            p(&q.reason)
        )?;
    }
    Ok(())
}

/// One `net/decision` of a call, as `log show` lists it.
fn network_line(n: &bridle_agent::log::NetDecision) -> String {
    let p = |text: &str| printable(text);
    let error = n
        .error
        .as_deref()
        .map(|e| format!(", failed: {}", p(e)))
        .unwrap_or_default();
    format!(
        "network: {} {}:{} by {}  ({} connections, {} bytes sent, {} received{error})",
        n.decision,
        p(&n.host),
        n.port,
        p(&n.by),
        n.connections,
        n.sent,
        n.received
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn brief_says_how_much_it_left_out() {
        assert_eq!(brief("short", 10), "short");
        assert_eq!(brief("0123456789abc", 10), "0123456789… [+3 chars]");
        assert_eq!(brief("one\ntwo\nthree", 10), "one… [+2 lines, 10 chars]");
        assert_eq!(brief("a\u{1b}b", 10), "a\\u{1b}b");
    }

    /// Steering a cancel dropped is printed where the log has it, saying it never reached
    /// the model and why.
    #[test]
    fn a_dropped_input_is_shown_with_its_turn_and_why() {
        use bridle_agent::log::{DropReason, Event, TurnEndReason, timeline};
        let events = [
            Event::TurnStart { turn: 0 },
            Event::InputReceived {
                input_id: "input-2".into(),
                kind: "steer".into(),
            },
            Event::TurnEnd {
                turn: 0,
                reason: TurnEndReason::Aborted,
                detail: None,
                cancelled_by: Some("signal SIGINT".into()),
            },
            Event::InputDropped {
                input_id: "input-2".into(),
                kind: "steer".into(),
                turn: Some(0),
                reason: DropReason::Cancelled,
            },
            Event::InputDropped {
                input_id: "input-3".into(),
                kind: "inject".into(),
                turn: None,
                reason: DropReason::SessionClosed,
            },
        ];
        let view = timeline(
            events
                .iter()
                .zip(1..)
                .map(|(e, seq)| (seq, "2026-12-06T00:00:00Z", e)),
        );
        let mut out = Vec::new();
        write_timeline(&mut out, &view, false).unwrap();
        let out = String::from_utf8(out).unwrap();
        for line in [
            "[4] input -> input-2 (steer) dropped, never sent to the model: turn 0 was cancelled",
            "[5] input -> input-3 (inject) dropped, never sent to the model: the session closed",
        ] {
            assert!(out.lines().any(|l| l == line), "{line:?} missing:\n{out}");
        }
    }
}
