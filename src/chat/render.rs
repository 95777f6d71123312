//! What `bridle chat` prints of a session: committed log events as terminal lines, printed
//! above the prompt while the person types. Streamed text and reasoning line by line as they
//! arrive; each tool call once decided, with the decision and what decided it, and a short
//! result; approvals and plan-mode switches; why a turn did not complete.
//!
//! Everything the model or a tool wrote is escaped as `bridle log show` escapes it (no
//! control character reaches the terminal), and colour is used only when asked for (the
//! caller decides: a terminal, `NO_COLOR` unset, `TERM` not `dumb`).

use std::collections::HashMap;

use bridle_agent::front::call_summary;
use bridle_agent::log::{Event, TurnEndReason, turn_end_name};
use bridle_exec::printable::printable;

use crate::log_cmd::brief;

/// Folds a session's events into lines for the terminal.
#[derive(Debug)]
pub struct Renderer {
    colour: bool,
    /// The streamed line not yet ended, and whether it is reasoning.
    partial: String,
    partial_reasoning: bool,
    /// Whether anything was streamed since the step began (a model that does not stream has
    /// its message printed whole).
    streamed: bool,
    /// Call id → its summary, until its decision is shown.
    calls: HashMap<String, String>,
}

impl Renderer {
    pub fn new(colour: bool) -> Self {
        Self {
            colour,
            partial: String::new(),
            partial_reasoning: false,
            streamed: false,
            calls: HashMap::new(),
        }
    }

    /// The lines `event` completes, in order (a streamed line is printed once it ends).
    pub fn event(&mut self, event: &Event) -> Vec<String> {
        let mut out = Vec::new();
        match event {
            Event::StepStart { .. } => self.streamed = false,
            Event::AssistantChunk { text, reasoning } => {
                self.streamed = true;
                if *reasoning != self.partial_reasoning {
                    out.extend(self.flush());
                    self.partial_reasoning = *reasoning;
                }
                self.partial.push_str(text);
                while let Some(end) = self.partial.find('\n') {
                    let line: String = self.partial.drain(..=end).collect();
                    out.push(self.text_line(line.trim_end_matches(['\n', '\r'])));
                }
            }
            Event::AssistantMessage {
                text, reasoning, ..
            } => {
                out.extend(self.flush());
                if !self.streamed {
                    self.partial_reasoning = true;
                    for line in reasoning.lines() {
                        out.push(self.text_line(line));
                    }
                    self.partial_reasoning = false;
                    for line in text.lines() {
                        out.push(self.text_line(line));
                    }
                }
            }
            Event::ToolCall(call) => {
                self.calls.insert(
                    call.call_id.clone(),
                    call_summary(&call.name, &call.arguments, 72),
                );
            }
            Event::ApprovalAsked { call_id, question } => {
                let call = self.call(call_id);
                out.push(format!(
                    "{} {}: {}",
                    self.paint("33", "?"),
                    printable(&call),
                    brief(question, 160)
                ));
            }
            Event::ApprovalDecided { answer, by, .. } => {
                out.push(format!(
                    "  approval {} by {}",
                    printable(answer),
                    printable(by)
                ));
            }
            Event::ToolDecision {
                call_id,
                decision,
                by,
            } => {
                let call = self
                    .calls
                    .remove(call_id)
                    .unwrap_or_else(|| self.call(call_id));
                out.push(format!(
                    "{} {} → {} ({})",
                    self.paint("36", "●"),
                    printable(&call),
                    crate::style::decision(*decision, self.colour),
                    brief(by, 120)
                ));
            }
            Event::ToolResult {
                call_id,
                ok,
                content,
                ..
            } => {
                // A call that never reached a decision is named with its result.
                if let Some(call) = self.calls.remove(call_id) {
                    out.push(format!("{} {}", self.paint("36", "●"), printable(&call)));
                }
                let (mark, code) = if *ok { ("ok", "32") } else { ("failed", "31") };
                out.push(format!(
                    "  ⎿ {} {}",
                    self.paint(code, mark),
                    brief(content, 100)
                ));
            }
            Event::SandboxQuarantine { path, reason, .. } => out.push(format!(
                "  {} moved aside {}: {}",
                self.paint("31", "!"),
                printable(path),
                brief(reason, 100)
            )),
            Event::NetDecision(d) => out.push(format!(
                "  net {}:{} → {} ({})",
                printable(&d.host),
                d.port,
                crate::style::decision(d.decision, self.colour),
                brief(&d.by, 80)
            )),
            // What a call's programs tried to run and a command rule refused, asked about or
            // killed: the call's result may be a plain failure, the line says who decided.
            Event::ExecDecision { exec, .. } => {
                let code = if exec.outcome == "approved" {
                    "33"
                } else {
                    "31"
                };
                let when = if exec.between_calls {
                    "between calls: "
                } else {
                    ""
                };
                out.push(format!(
                    "  {} {when}{}",
                    self.paint(code, "!"),
                    brief(&exec.message, 160)
                ));
            }
            Event::InputIncluded {
                turn,
                step,
                carried,
                ..
            } => out.push(self.paint(
                "2",
                &if *carried {
                    format!("  ↳ your message was carried to turn {turn}, step {step}")
                } else {
                    format!("  ↳ your message joined turn {turn}, step {step}")
                },
            )),
            Event::PlanMode { active } => out.push(self.paint(
                "35",
                if *active {
                    "[plan mode: on — the agent plans and presents the plan for review]"
                } else {
                    "[plan mode: off]"
                },
            )),
            Event::TurnEnd { reason, detail, .. } => {
                out.extend(self.flush());
                if *reason != TurnEndReason::Completed {
                    let why = detail.as_deref().map(|d| format!(": {}", brief(d, 160)));
                    out.push(self.paint(
                        "31",
                        &format!(
                            "[the turn ended {}{}]",
                            turn_end_name(*reason),
                            why.unwrap_or_default()
                        ),
                    ));
                }
            }
            _ => {}
        }
        out
    }

    /// The streamed line not yet ended, if any.
    pub fn flush(&mut self) -> Vec<String> {
        if self.partial.is_empty() {
            return Vec::new();
        }
        let line = std::mem::take(&mut self.partial);
        vec![self.text_line(&line)]
    }

    /// One line of answer text (plain) or reasoning (marked, dim).
    fn text_line(&self, line: &str) -> String {
        let line = printable(line);
        if self.partial_reasoning {
            self.paint("2", &format!("┊ {line}"))
        } else {
            line
        }
    }

    fn call(&self, call_id: &str) -> String {
        self.calls
            .get(call_id)
            .cloned()
            .unwrap_or_else(|| format!("call {call_id}"))
    }

    /// `text` in SGR `code` when colour is on.
    fn paint(&self, code: &str, text: &str) -> String {
        if self.colour {
            format!("\u{1b}[{code}m{text}\u{1b}[0m")
        } else {
            text.to_owned()
        }
    }
}

/// A plan under review, as the person reads it before answering: every line escaped and
/// marked, so nothing in the plan can pass for a line of bridle's own, then the choices.
pub fn plan_review(plan: &str) -> Vec<String> {
    let mut out = vec!["The agent presents a plan for review:".to_owned()];
    out.extend(plan.lines().map(|l| format!("  │ {}", printable(l))));
    out.push("Approve it (y), or keep planning (n, or type feedback for the agent)?".to_owned());
    out
}

/// Whether chat output gets colour: stdout a terminal, `NO_COLOR` unset or empty
/// (no-color.org), `TERM` not `dumb`.
pub fn colour() -> bool {
    crate::style::colour_on_stdout()
}

#[cfg(test)]
mod tests {
    use super::*;
    use bridle_agent::log::{Backend, NewSession, SessionDir, ToolCall};
    use bridle_policy::Decision;

    /// A turn as the loop logs it: streamed reasoning and text, a call asked and approved,
    /// one denied, a result with hostile bytes, plan mode switched on, a cancelled end.
    fn logged() -> (tempfile::TempDir, Vec<Event>) {
        let dir = tempfile::tempdir().unwrap();
        let sessions = SessionDir::open(dir.path()).unwrap();
        let mut log = sessions
            .create(
                Backend::Jsonl,
                &NewSession {
                    workspace: "/w".into(),
                    profile: "workspace-write".into(),
                    policy_digest: "d".into(),
                },
            )
            .unwrap();
        let bash = ToolCall {
            call_id: "b".into(),
            name: "bash".into(),
            arguments: r#"{"command":"curl example.com"}"#.into(),
        };
        let write = ToolCall {
            call_id: "w".into(),
            name: "write_file".into(),
            arguments: r#"{"path":"/etc/passwd","content":"x"}"#.into(),
        };
        for event in [
            Event::TurnStart { turn: 0 },
            Event::StepStart { turn: 0, step: 0 },
            Event::AssistantChunk {
                text: "need net".into(),
                reasoning: true,
            },
            Event::AssistantChunk {
                text: "Fetching the ".into(),
                reasoning: false,
            },
            Event::AssistantChunk {
                text: "page.\nThen \u{1b}]52;c;aGk=\u{7}".into(),
                reasoning: false,
            },
            Event::AssistantMessage {
                text: "Fetching the page.\nThen".into(),
                tool_calls: vec![bash.clone(), write.clone()],
                reasoning: "need net".into(),
                reply: None,
            },
            Event::ToolCall(bash),
            Event::ApprovalAsked {
                call_id: "b".into(),
                question: "run `curl example.com` with the network on?".into(),
            },
            Event::ApprovalDecided {
                call_id: "b".into(),
                answer: "approved".into(),
                by: "a person at the terminal".into(),
            },
            Event::ToolDecision {
                call_id: "b".into(),
                decision: Decision::Allow,
                by: "approved once".into(),
            },
            Event::ToolResult {
                call_id: "b".into(),
                ok: true,
                content: "<html>\u{1b}[2J\nmore\nlines".into(),
                sandbox: None,
            },
            Event::ToolCall(write),
            Event::ToolDecision {
                call_id: "w".into(),
                decision: Decision::Deny,
                by: "outside every writable root".into(),
            },
            Event::ToolResult {
                call_id: "w".into(),
                ok: false,
                content: "denied".into(),
                sandbox: None,
            },
            Event::PlanMode { active: true },
            Event::TurnEnd {
                turn: 0,
                reason: TurnEndReason::Aborted,
                detail: Some("the turn was cancelled (Ctrl-C)".into()),
                cancelled_by: Some("Ctrl-C".into()),
            },
        ] {
            log.append(event).unwrap();
        }
        let events = log.events().iter().map(|(_, e)| e.clone()).collect();
        (dir, events)
    }

    fn render(colour: bool) -> Vec<String> {
        let (_dir, events) = logged();
        let mut r = Renderer::new(colour);
        events.iter().flat_map(|e| r.event(e)).collect()
    }

    #[test]
    fn a_turn_renders_as_streamed_lines_calls_with_decisions_and_short_results() {
        assert_eq!(
            render(false),
            [
                "┊ need net",
                "Fetching the page.",
                "Then \\u{1b}]52;c;aGk=\\u{7}",
                "? bash: curl example.com: run `curl example.com` with the network on?",
                "  approval approved by a person at the terminal",
                "● bash: curl example.com → allow (approved once)",
                "  ⎿ ok <html>\\u{1b}[2J… [+2 lines, 11 chars]",
                "● write_file: /etc/passwd → deny (outside every writable root)",
                "  ⎿ failed denied",
                "[plan mode: on — the agent plans and presents the plan for review]",
                "[the turn ended aborted: the turn was cancelled (Ctrl-C)]",
            ]
        );
    }

    #[test]
    fn no_control_character_from_the_model_or_a_tool_reaches_the_terminal_without_colour() {
        for line in render(false) {
            assert!(!line.chars().any(char::is_control), "{line:?}");
        }
    }

    #[test]
    fn colour_wraps_decisions_and_marks_and_nothing_else_is_an_escape() {
        let lines = render(true);
        assert!(
            lines[5].contains("\u{1b}[32mallow\u{1b}[0m"),
            "{:?}",
            lines[5]
        );
        assert!(
            lines[7].contains("\u{1b}[31mdeny\u{1b}[0m"),
            "{:?}",
            lines[7]
        );
        // Stripped of bridle's own SGR sequences, no escape is left: the model's was escaped.
        for line in lines {
            let mut rest = line.as_str().to_owned();
            for sgr in [
                "\u{1b}[0m",
                "\u{1b}[2m",
                "\u{1b}[31m",
                "\u{1b}[32m",
                "\u{1b}[33m",
                "\u{1b}[35m",
                "\u{1b}[36m",
            ] {
                rest = rest.replace(sgr, "");
            }
            assert!(!rest.contains('\u{1b}'), "{line:?}");
        }
    }

    fn exec(message: &str, outcome: &str, between_calls: bool) -> Event {
        Event::ExecDecision {
            call_id: "b".into(),
            exec: bridle_exec::supervised::ExecDecision {
                pid: 7,
                program: "/usr/bin/git".into(),
                argv: vec!["git".into(), "push".into()],
                decision: if outcome == "approved" {
                    Decision::Ask
                } else {
                    Decision::Deny
                },
                rule: Some("deny-git-push".into()),
                reason: "CI agents do not publish".into(),
                outcome: outcome.into(),
                same_as: vec![],
                ancestry: vec!["2 bash -c x".into()],
                answer: None,
                message: message.into(),
                between_calls,
            },
        }
    }

    #[test]
    fn an_exec_a_rule_refused_inside_a_call_has_its_own_line() {
        let mut r = Renderer::new(false);
        let lines = r.event(&exec(
            "rule deny-git-push denied exec of /usr/bin/git push \u{1b}[2J (pid 7)",
            "refused",
            false,
        ));
        assert_eq!(
            lines,
            ["  ! rule deny-git-push denied exec of /usr/bin/git push \\u{1b}[2J (pid 7)"]
        );
        let lines = r.event(&exec(
            "rule deny-git-push denied exec of git",
            "killed",
            true,
        ));
        assert_eq!(
            lines,
            ["  ! between calls: rule deny-git-push denied exec of git"]
        );
        let coloured =
            Renderer::new(true).event(&exec("exec of git push approved", "approved", false));
        assert_eq!(
            coloured,
            ["  \u{1b}[33m!\u{1b}[0m exec of git push approved"]
        );
    }

    #[test]
    fn a_steer_receipt_says_which_step_took_the_message() {
        let mut r = Renderer::new(false);
        let lines = r.event(&Event::InputIncluded {
            input_id: "in-1".into(),
            turn: 0,
            step: 2,
            carried: false,
        });
        assert_eq!(lines, ["  ↳ your message joined turn 0, step 2"]);
    }

    #[test]
    fn a_model_that_does_not_stream_has_its_message_printed_whole() {
        let mut r = Renderer::new(false);
        let lines = r.event(&Event::AssistantMessage {
            text: "one\ntwo".into(),
            tool_calls: vec![],
            reasoning: String::new(),
            reply: None,
        });
        assert_eq!(lines, ["one", "two"]);
    }

    #[test]
    fn a_plan_under_review_is_marked_and_escaped_line_by_line() {
        let lines = plan_review("# Plan\n- step \u{1b}[31mone");
        assert_eq!(lines[1], "  │ # Plan");
        assert_eq!(lines[2], "  │ - step \\u{1b}[31mone");
        assert!(lines.last().unwrap().contains("keep planning"));
    }
}
