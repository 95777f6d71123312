//! Plan mode (`shared/spec/plan-mode.md`): soft guidance only. While active, every request
//! carries the deployer's text as the system-prompt section `plan:policy` (order 50); nothing
//! else changes: no tool is added, removed or blocked, the sandbox and the approval policy are
//! never read or written. The state is a fold of the session log (PM1, PM2).
//!
//! Built here: the fold, the section, the pending choice (`set`/`get`, PM4-PM7) appended by
//! the next accepted pre-step with the notice of PM12, `exit_plan_mode` (a tool value the plugin
//! registers, PM14, PM17-PM21: the plan goes to the user-interaction seam, an approval is a
//! silent pending exit), and `/plan` (PM22-PM25). Headless runs have no interaction channel:
//! there `exit_plan_mode` fails and plan mode is left with `bridle run --plan-off`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use bridle_exec::approvals::PlanReview;
use bridle_exec::tool::{CallEnv, Declaration, Effect, Tool, ToolResult, TypedTool};

use crate::log::{Event, PromptSection};
use crate::session::{Command, CommandCtx};

mod plugin;

pub use plugin::PlanModePlugin;

/// The section's name and render order (PM13).
pub const SECTION_NAME: &str = "plan:policy";
/// Where the section goes among the system prompt sections.
pub const SECTION_ORDER: u32 = 50;
/// The plugin's name (what it registers is owned by this name).
pub const PLUGIN: &str = "plan-mode";
/// The tool that asks a person to approve the plan and leave plan mode.
pub const EXIT_TOOL: &str = "exit_plan_mode";

/// The section text when the deployer configured none.
pub const DEFAULT_SECTION: &str = "Plan mode is on. First explore and plan: read files, search \
and run commands that only inspect. When the plan is complete, present it with exit_plan_mode \
as markdown starting with a `# ` title; a person approves it before you change anything.";

/// What the plugin keeps between the loop and its tool: the fold of the log as of the last
/// pre-step (a derived view, refreshed from the log before every step, never set on its own)
/// and a pending choice not yet appended.
#[derive(Debug, Default)]
struct PlanState {
    active: AtomicBool,
    /// The pending value, and whether appending it tells the model (a user's choice, PM12; an
    /// approved exit does not).
    pending: Mutex<Option<(bool, bool)>>,
}

/// The plugin's configuration (PM16: exactly one key, a non-empty `section`) and its state.
#[derive(Debug, Clone)]
pub struct PlanMode {
    section: String,
    state: Arc<PlanState>,
}

impl PlanMode {
    /// Plan mode rendering `section` while active; a blank section is a configuration error.
    pub fn new(section: &str) -> Result<Self, String> {
        if section.trim().is_empty() {
            return Err("plan mode: `section` must be a non-empty string".to_owned());
        }
        Ok(Self {
            section: section.to_owned(),
            state: Arc::default(),
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

    /// The section a request carries while the state is `active` (nothing while inactive).
    pub fn section_when(&self, active: bool) -> Option<PromptSection> {
        active.then(|| PromptSection {
            name: SECTION_NAME.to_owned(),
            order: SECTION_ORDER,
            text: self.section.clone(),
        })
    }

    /// The plugin's tool, `exit_plan_mode`, registered whether or not plan mode is active
    /// (PM14).
    pub fn tool(&self) -> Arc<dyn Tool> {
        Arc::new(ExitPlanMode {
            state: Arc::clone(&self.state),
        })
    }

    /// Refreshes the plugin's view of the logged state (`active`, the fold of the log).
    pub fn observe(&self, active: bool) {
        self.state.active.store(active, Ordering::SeqCst);
    }

    /// The pending choice, if any (left in place).
    pub fn pending(&self) -> Option<bool> {
        lock(&self.state.pending).map(|(active, _)| active)
    }

    /// Takes the pending choice, to append it: the value, and whether the model is told.
    pub fn take_pending(&self) -> Option<(bool, bool)> {
        lock(&self.state.pending).take()
    }

    /// Puts back a choice whose append failed (PM10), unless a newer choice was made since.
    pub fn restore_pending(&self, active: bool, tell: bool) {
        lock(&self.state.pending).get_or_insert((active, tell));
    }

    /// `set(session, active)` (PM4-PM6): `folded` is the logged state, `turn_open` whether a
    /// turn runs. [`SetOutcome::Committed`] asks the caller to append the event now.
    pub fn set(&self, active: bool, folded: bool, turn_open: bool) -> SetOutcome {
        let mut pending = lock(&self.state.pending);
        let target = pending.map_or(folded, |(p, _)| p);
        if active == target {
            return SetOutcome::Noop;
        }
        if pending.is_some() && active == folded {
            *pending = None;
            return SetOutcome::Cancelled;
        }
        if turn_open {
            *pending = Some((active, true));
            SetOutcome::Queued
        } else {
            *pending = None;
            SetOutcome::Committed
        }
    }

    /// `get(session)` (PM7): the logged state as last observed, and the pending value.
    pub fn get(&self) -> (bool, Option<bool>) {
        (self.state.active.load(Ordering::SeqCst), self.pending())
    }

    /// The `/plan` command of this plugin (PM22-PM25).
    pub fn command(&self) -> Arc<dyn Command> {
        Arc::new(PlanCommand { plan: self.clone() })
    }
}

/// What `set` did (PM4-PM6, PM25).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SetOutcome {
    /// Already the target state: nothing to do.
    Noop,
    /// Kept pending: applies from the next step.
    Queued,
    /// Reverted a pending choice: nothing will be appended.
    Cancelled,
    /// No turn open: the caller appends it now.
    Committed,
}

/// How `/plan` is used.
pub const PLAN_USAGE: &str = "usage: `/plan` enters plan mode; `/plan MESSAGE` enters it and sends MESSAGE; `/plan off` leaves it";

/// What `/plan ARGS` asks for (PM22-PM25).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlanArgs<'a> {
    /// `/plan`: plan mode on.
    On,
    /// `/plan off`.
    Off,
    /// `/plan MESSAGE`: on, then MESSAGE through the steering path.
    OnWith(&'a str),
}

/// Reads the arguments of `/plan` (the text after the name, trimmed), without a session, so
/// a front end can refuse a bad one before anything exists. `Err`: the command as given and
/// how to use it.
pub fn parse_plan_args(args: &str) -> Result<PlanArgs<'_>, String> {
    match args {
        "" => Ok(PlanArgs::On),
        "off" => Ok(PlanArgs::Off),
        _ if args.starts_with('-') || args.starts_with("off ") || args == "on" => {
            Err(format!("`/plan {args}`: {PLAN_USAGE}"))
        }
        message => Ok(PlanArgs::OnWith(message)),
    }
}

/// `/plan`, `/plan MESSAGE`, `/plan off`.
struct PlanCommand {
    plan: PlanMode,
}

impl PlanCommand {
    fn switch(&self, active: bool, ctx: &mut CommandCtx<'_, '_>) -> Result<String, String> {
        let folded = match ctx.agent.as_deref() {
            Some(agent) => fold_plan_mode(agent.log().events().iter().map(|(_, e)| e)),
            None => self.plan.state.active.load(Ordering::SeqCst),
        };
        let state = if active { "on" } else { "off" };
        match self.plan.set(active, folded, ctx.agent.is_none()) {
            SetOutcome::Noop => Ok(format!(
                "plan mode is already {}",
                if active { "active" } else { "inactive" }
            )),
            SetOutcome::Queued => Ok(format!(
                "queued: plan mode turns {state} from the next step"
            )),
            SetOutcome::Cancelled => {
                Ok("cancelled: the pending switch will not be applied".to_owned())
            }
            SetOutcome::Committed => {
                let agent = ctx
                    .agent
                    .as_deref_mut()
                    .ok_or("no idle agent to commit to")?;
                agent
                    .commit(Event::PlanMode { active })
                    .map_err(|e| format!("plan mode could not be switched: {e}"))?;
                self.plan.observe(active);
                Ok(format!("committed: plan mode is {state}"))
            }
        }
    }
}

impl Command for PlanCommand {
    fn name(&self) -> &str {
        "plan"
    }

    fn run(&self, args: &str, ctx: &mut CommandCtx<'_, '_>) -> Result<String, String> {
        match parse_plan_args(args)? {
            PlanArgs::On => self.switch(true, ctx),
            PlanArgs::Off => self.switch(false, ctx),
            PlanArgs::OnWith(message) => {
                let reply = self.switch(true, ctx)?;
                // PM23: an ordinary, logged user message for the next step.
                let id = (ctx.steer)(message).map_err(|e| e.to_string())?;
                Ok(format!("{reply}; message sent as {id}"))
            }
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The arguments of `exit_plan_mode`.
#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExitArgs {
    /// The complete plan as markdown, starting with a `# ` title.
    plan: String,
}

/// `exit_plan_mode` (PM17-PM21): checks the call against the logged state and the plan, then
/// asks a person to review the plan through the user-interaction seam. Approve: the exit is a
/// silent pending choice the next pre-step appends (PM19). Keep planning: the call fails with
/// the person's feedback (PM20). No channel, or a dismissed review: the call fails and plan
/// mode stays active (PM21).
#[derive(Debug)]
struct ExitPlanMode {
    state: Arc<PlanState>,
}

/// Checks an `exit_plan_mode` call (PM17) and returns the plan.
pub fn check_exit(active: bool, plan: &str) -> Result<&str, String> {
    if !active {
        return Err("plan mode is not active".to_owned());
    }
    let plan = plan.trim();
    if plan.is_empty() || !plan.starts_with("# ") {
        return Err("the plan must be markdown that starts with a level-1 `# ` title".to_owned());
    }
    Ok(plan)
}

/// The result text of an approved plan (PM19).
pub const APPROVED: &str = "{\"approved\": true} The person approved the plan: plan mode is \
exited, and from the next step on you carry the plan out.";

impl TypedTool for ExitPlanMode {
    type Args = ExitArgs;

    fn name(&self) -> &str {
        EXIT_TOOL
    }

    fn description(&self) -> &str {
        "Present the complete plan to a person for approval and leave plan mode once they approve it."
    }

    fn declare(
        &self,
        _args: &ExitArgs,
        _plan: &bridle_policy::Plan,
    ) -> Result<Declaration, String> {
        Ok(Declaration {
            effects: vec![Effect::Session(
                "the plan-mode plugin's own tool (no effect outside the session)".to_owned(),
            )],
            escalation: None,
            uses_files: false,
        })
    }

    fn execute(&self, args: ExitArgs, env: &CallEnv<'_>) -> ToolResult {
        let active = self.state.active.load(Ordering::SeqCst)
            && lock(&self.state.pending).is_none_or(|(p, _)| p);
        let plan = match check_exit(active, &args.plan) {
            Ok(plan) => plan,
            Err(e) => return env.result(false, e, None),
        };
        match env.answerer.review_plan(plan) {
            PlanReview::Approved => {
                *lock(&self.state.pending) = Some((false, false));
                env.result(true, APPROVED.to_owned(), None)
            }
            PlanReview::KeepPlanning { feedback } => {
                let text = match feedback.as_deref().map(str::trim).filter(|f| !f.is_empty()) {
                    Some(f) => format!("the person wants you to keep planning: {f}"),
                    None => "the person wants you to keep planning: revise the plan and present it again".to_owned(),
                };
                env.result(false, text, None)
            }
            PlanReview::Dismissed => env.result(
                false,
                "the plan review was dismissed without an answer; plan mode stays active"
                    .to_owned(),
                None,
            ),
            PlanReview::Unavailable => env.result(
                false,
                "no user-interaction channel in this session: nobody can approve the plan here; \
                 ask the user to switch the session mode instead"
                    .to_owned(),
                None,
            ),
        }
    }
}

/// The notice of PM12, in our own words.
pub fn notice(active: bool) -> &'static str {
    if active {
        "[bridle] The user switched this session into plan mode: from now on, explore and plan; \
         present the plan with exit_plan_mode before changing anything."
    } else {
        "[bridle] The user switched this session back to the default mode: plan mode is off, \
         and you may carry out changes."
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

    /// PM2: the last logged switch, `false` when there is none.
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

    /// PM13: `plan:policy` at order 50 while active, nothing while inactive.
    #[test]
    fn the_section_is_present_only_while_active() {
        let pm = PlanMode::new("Plan first.").unwrap();
        assert_eq!(pm.section(&[]), None);
        let section = pm.section(&[Event::PlanMode { active: true }]).unwrap();
        assert_eq!((section.name.as_str(), section.order), ("plan:policy", 50));
        assert_eq!(section.text, "Plan first.");
        assert!(PlanMode::new("  ").is_err());
    }

    /// PM17: not active, no plan, no `# ` title: each an ordinary failed result.
    #[test]
    fn exit_checks_state_then_plan() {
        let good = "# Fix the build\n1. read\n2. edit";
        assert!(check_exit(false, good).unwrap_err().contains("not active"));
        assert!(check_exit(true, "no title").unwrap_err().contains("# "));
        assert!(check_exit(true, "  ").unwrap_err().contains("# "));
        assert_eq!(check_exit(true, good).unwrap(), good);
    }

    /// PM4-PM7: `set` is a noop on the target state, keeps a choice pending while a turn is
    /// open (reverting it cancels), commits with no turn open (a leftover pending choice
    /// reverted is cancelled, not appended); `get` is the logged state and the pending value.
    #[test]
    fn set_and_get_follow_the_pending_rules() {
        let pm = PlanMode::new("Plan first.").unwrap();
        assert_eq!(pm.set(false, false, true), SetOutcome::Noop, "PM4");
        assert_eq!(pm.set(true, false, true), SetOutcome::Queued, "PM5");
        assert_eq!(pm.get(), (false, Some(true)), "PM7");
        assert_eq!(
            pm.set(true, false, true),
            SetOutcome::Noop,
            "PM4: the pending value"
        );
        assert_eq!(pm.set(false, false, true), SetOutcome::Cancelled, "PM5");
        assert_eq!(pm.get(), (false, None));
        assert_eq!(pm.set(true, false, false), SetOutcome::Committed, "PM6");
        assert_eq!(pm.pending(), None);
        assert_eq!(pm.set(true, false, true), SetOutcome::Queued);
        assert_eq!(
            pm.set(false, false, false),
            SetOutcome::Cancelled,
            "PM6: leftover"
        );
        assert_eq!(pm.take_pending(), None);
    }
}
