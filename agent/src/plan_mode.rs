//! Plan mode (`shared/spec/plan-mode.md`): soft guidance only. While active, every request
//! carries the deployer's text as the system-prompt section `plan:policy` (order 50); nothing
//! else changes: no tool is added, removed or blocked, the sandbox and the approval policy are
//! never read or written. The state is a fold of the session log (PM1, PM2).
//!
//! Built here: the fold, the section, entering at the start of a session (`bridle run --plan`,
//! committed at once because no turn is open, PM6), and `exit_plan_mode`, which is always
//! registered (PM14) and needs a person to approve the plan through the user-interaction seam
//! (PM17, PM18). Headless runs have no such seam, so the call fails and plan mode stays active
//! (PM21). Pending choices made while a turn runs, the notice of PM12 and the `/plan` command
//! come with an interactive front end.

use crate::log::{Event, PromptSection};

/// The section's name and render order (PM13).
pub const SECTION_NAME: &str = "plan:policy";
/// Where the section goes among the system prompt sections.
pub const SECTION_ORDER: u32 = 50;
/// The tool that asks a person to approve the plan and leave plan mode.
pub const EXIT_TOOL: &str = "exit_plan_mode";

/// The section text when the deployer configured none.
pub const DEFAULT_SECTION: &str = "Plan mode is on. First explore and plan: read files, search \
and run commands that only inspect. When the plan is complete, present it with exit_plan_mode \
as markdown starting with a `# ` title; a person approves it before you change anything.";

/// The plugin's configuration (PM16: exactly one key, a non-empty `section`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanMode {
    section: String,
}

impl PlanMode {
    /// Plan mode rendering `section` while active; a blank section is a configuration error.
    pub fn new(section: &str) -> Result<Self, String> {
        if section.trim().is_empty() {
            return Err("plan mode: `section` must be a non-empty string".to_owned());
        }
        Ok(Self {
            section: section.to_owned(),
        })
    }

    /// The section a request carries after `events` (nothing while inactive).
    pub fn section<'a>(
        &self,
        events: impl IntoIterator<Item = &'a Event>,
    ) -> Option<PromptSection> {
        fold_plan_mode(events).then(|| PromptSection {
            name: SECTION_NAME.to_owned(),
            order: SECTION_ORDER,
            text: self.section.clone(),
        })
    }

    /// The schema of `exit_plan_mode`, registered whether or not plan mode is active.
    pub fn exit_tool_schema() -> serde_json::Value {
        serde_json::json!({
            "name": EXIT_TOOL,
            "description": "Present the complete plan to a person for approval and leave plan mode once they approve it.",
            "parameters": {
                "type": "object",
                "properties": {"plan": {"type": "string", "description": "the complete plan as markdown, starting with a `# ` title"}},
                "required": ["plan"],
                "additionalProperties": false,
            },
        })
    }

    /// `exit_plan_mode` (PM17): checks the call against the logged state and the plan, then
    /// needs a person to approve through the user-interaction seam. Sessions run by this build
    /// have none, so a valid call still fails and plan mode stays active (PM21).
    pub fn exit<'a>(
        &self,
        events: impl IntoIterator<Item = &'a Event>,
        arguments: &str,
    ) -> Result<String, String> {
        if !fold_plan_mode(events) {
            return Err("plan mode is not active".to_owned());
        }
        #[derive(serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Args {
            plan: String,
        }
        let args: Args = serde_json::from_str(arguments)
            .map_err(|e| format!("invalid arguments for `{EXIT_TOOL}`: {e}"))?;
        let plan = args.plan.trim();
        if plan.is_empty() || !plan.starts_with("# ") {
            return Err(
                "the plan must be markdown that starts with a level-1 `# ` title".to_owned(),
            );
        }
        Err(
            "no user-interaction channel in this session: nobody can approve the plan here; \
             ask the user to switch the session mode instead"
                .to_owned(),
        )
    }
}

/// PM2: the value of the last `plan/mode` event in `events`; `false` when there is none.
pub fn fold_plan_mode<'a>(events: impl IntoIterator<Item = &'a Event>) -> bool {
    events.into_iter().fold(false, |active, event| match event {
        Event::PlanMode { active } => *active,
        _ => active,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_state_is_the_last_logged_switch_and_starts_inactive() {
        assert!(!fold_plan_mode(&[]));
        let events = [
            Event::PlanMode { active: true },
            Event::TurnStart { turn: 0 },
            Event::PlanMode { active: false },
            Event::PlanMode { active: true },
        ];
        assert!(fold_plan_mode(&events));
        assert!(!fold_plan_mode(&events[..3]));
    }

    #[test]
    fn the_section_is_present_only_while_active() {
        let pm = PlanMode::new("Plan first.").unwrap();
        assert_eq!(pm.section(&[]), None);
        let section = pm.section(&[Event::PlanMode { active: true }]).unwrap();
        assert_eq!((section.name.as_str(), section.order), ("plan:policy", 50));
        assert_eq!(section.text, "Plan first.");
        assert!(PlanMode::new("  ").is_err());
    }

    #[test]
    fn exit_checks_state_then_plan_then_the_channel() {
        let pm = PlanMode::new(DEFAULT_SECTION).unwrap();
        let on = [Event::PlanMode { active: true }];
        let good = r##"{"plan": "# Fix the build\n1. read\n2. edit"}"##;
        assert!(pm.exit(&[], good).unwrap_err().contains("not active"));
        assert!(
            pm.exit(&on, r#"{"plan": "no title"}"#)
                .unwrap_err()
                .contains("# ")
        );
        assert!(
            pm.exit(&on, r#"{"plan": 3}"#)
                .unwrap_err()
                .contains("invalid arguments")
        );
        assert!(
            pm.exit(&on, good)
                .unwrap_err()
                .contains("no user-interaction channel")
        );
    }
}
