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
Ctrl-C      cancel the running turn; at an empty prompt, press it twice to exit
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
    /// Say that another Ctrl-C exits.
    WarnExit,
    /// Exit `bridle chat` (status 0).
    Exit,
}

/// Ctrl-C: cancels a running turn; at an idle prompt the first press warns and a second one
/// (with nothing typed in between) exits. Ctrl-D always exits.
#[derive(Debug, Default)]
pub struct Keys {
    armed: bool,
}

impl Keys {
    pub fn ctrl_c(&mut self, running: bool) -> KeyAction {
        if running {
            self.armed = false;
            return KeyAction::CancelTurn;
        }
        if std::mem::replace(&mut self.armed, true) {
            KeyAction::Exit
        } else {
            KeyAction::WarnExit
        }
    }

    pub fn ctrl_d(&mut self) -> KeyAction {
        KeyAction::Exit
    }

    /// A line was entered: a later Ctrl-C warns again first.
    pub fn line(&mut self) {
        self.armed = false;
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
    fn ctrl_c_cancels_a_turn_and_twice_at_an_idle_prompt_exits() {
        let mut keys = Keys::default();
        assert_eq!(keys.ctrl_c(true), KeyAction::CancelTurn);
        assert_eq!(keys.ctrl_c(false), KeyAction::WarnExit);
        keys.line();
        assert_eq!(keys.ctrl_c(false), KeyAction::WarnExit);
        assert_eq!(keys.ctrl_c(false), KeyAction::Exit);
        assert_eq!(Keys::default().ctrl_d(), KeyAction::Exit);
    }
}
