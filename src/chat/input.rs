//! What a line typed into `bridle chat` asks for, and what Ctrl-C and Ctrl-D do: pure
//! decisions, so the terminal loop only reads keys and carries them out.
//!
//! Enter while a turn runs steers it (the text joins the next step); `/queue TEXT` makes the
//! text the next turn instead; at an idle prompt a line opens a turn. `/plan`, `/plan MSG`,
//! `/plan off`, `/resume [ID]`, `/help` are commands; any other `/word` is refused with the
//! list, never sent to the model.

/// What a typed line asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Input {
    /// Nothing (a blank line).
    Nothing,
    /// Open a turn with the text (idle).
    Prompt(String),
    /// Join the running turn's next step.
    Steer(String),
    /// The next turn, after the running one.
    Queue(String),
    /// A session command, as the session takes it (`/plan`, `/plan off`, `/plan MSG`).
    Command(String),
    /// Switch to another session (the newest of this workspace when no id).
    Resume(Option<String>),
    /// Print the help.
    Help,
    /// A line that is not understood, and why.
    Refused(String),
}

/// The help `/help` prints.
pub const HELP: &str = "\
Enter       send (while the agent works: steer it; the text joins its next step)
/queue TEXT run TEXT as the next turn, after the running one
/plan       enter plan mode (the agent plans and presents the plan for review)
/plan MSG   enter plan mode and send MSG
/plan off   leave plan mode
/resume ID  continue session ID (the newest of this workspace without ID)
/help       this help
Ctrl-C      cancel the running turn; at an empty prompt, exit; else drop the line
Ctrl-D      exit";

/// What `line` asks for, `running` saying whether a turn is running.
pub fn parse(line: &str, running: bool) -> Input {
    let text = line.trim();
    if text.is_empty() {
        return Input::Nothing;
    }
    let Some(command) = text.strip_prefix('/') else {
        return if running {
            Input::Steer(text.to_owned())
        } else {
            Input::Prompt(text.to_owned())
        };
    };
    let (word, rest) = command
        .split_once(char::is_whitespace)
        .map_or((command, ""), |(w, r)| (w, r.trim()));
    match word {
        "queue" if rest.is_empty() => Input::Refused("/queue needs the text to queue".to_owned()),
        "queue" => Input::Queue(rest.to_owned()),
        "plan" => Input::Command(if rest.is_empty() {
            "/plan".to_owned()
        } else {
            format!("/plan {rest}")
        }),
        "resume" if rest.contains(char::is_whitespace) => {
            Input::Refused("/resume takes one session id".to_owned())
        }
        "resume" => Input::Resume((!rest.is_empty()).then(|| rest.to_owned())),
        "help" | "?" => Input::Help,
        other => Input::Refused(format!(
            "unknown command `/{other}` (the commands are /queue, /plan, /resume and /help)"
        )),
    }
}

/// What a key that ends editing does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyAction {
    /// Cancel the running turn.
    CancelTurn,
    /// Nothing more: the editor dropped the line typed so far.
    Cleared,
    /// Exit `bridle chat` (status 0).
    Exit,
}

/// What a Ctrl-C does (cli.md): it cancels a running turn; at an idle prompt it exits when
/// nothing is typed (`line_was_empty`) and drops the typed line otherwise. (Ctrl-D always exits.)
pub fn ctrl_c(running: bool, line_was_empty: bool) -> KeyAction {
    if running {
        KeyAction::CancelTurn
    } else if line_was_empty {
        KeyAction::Exit
    } else {
        KeyAction::Cleared
    }
}

/// Bound to Ctrl-C in the editor: notes whether the line was empty, then lets the editor do
/// its default (interrupt the read), so the REPL can tell "exit" from "drop what I typed".
#[derive(Debug, Default)]
pub struct CtrlC {
    pub line_was_empty: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl rustyline::ConditionalEventHandler for CtrlC {
    fn handle(
        &self,
        _evt: &rustyline::Event,
        _n: rustyline::RepeatCount,
        _positive: bool,
        ctx: &rustyline::EventContext,
    ) -> Option<rustyline::Cmd> {
        self.line_was_empty
            .store(ctx.line().is_empty(), std::sync::atomic::Ordering::SeqCst);
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_prompts_when_idle_and_steers_while_a_turn_runs() {
        assert_eq!(parse("  fix it ", false), Input::Prompt("fix it".into()));
        assert_eq!(parse("fix it", true), Input::Steer("fix it".into()));
        assert_eq!(parse("   ", true), Input::Nothing);
    }

    #[test]
    fn commands_are_parsed_and_unknown_ones_refused() {
        assert_eq!(
            parse("/queue then test", true),
            Input::Queue("then test".into())
        );
        assert!(matches!(parse("/queue", true), Input::Refused(_)));
        assert_eq!(parse("/plan", false), Input::Command("/plan".into()));
        assert_eq!(parse("/plan off", true), Input::Command("/plan off".into()));
        assert_eq!(
            parse("/plan  refactor the parser", false),
            Input::Command("/plan refactor the parser".into())
        );
        assert_eq!(parse("/resume", false), Input::Resume(None));
        assert_eq!(
            parse("/resume abc-1", false),
            Input::Resume(Some("abc-1".into()))
        );
        assert!(matches!(parse("/resume a b", false), Input::Refused(_)));
        assert_eq!(parse("/help", true), Input::Help);
        let Input::Refused(why) = parse("/yolo", false) else {
            panic!()
        };
        assert!(why.contains("/yolo") && why.contains("/help"), "{why}");
    }

    #[test]
    fn ctrl_c_cancels_a_turn_exits_an_empty_prompt_and_clears_a_typed_line() {
        assert_eq!(ctrl_c(true, true), KeyAction::CancelTurn);
        assert_eq!(ctrl_c(true, false), KeyAction::CancelTurn);
        assert_eq!(ctrl_c(false, false), KeyAction::Cleared);
        assert_eq!(ctrl_c(false, true), KeyAction::Exit);
    }
}
