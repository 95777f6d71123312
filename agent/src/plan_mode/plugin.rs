//! Plan mode as a plugin: what it registers with the host. The section `plan:policy` (PM13),
//! the appender listener asked ahead of every other listener (PM8-PM12), `exit_plan_mode`
//! (PM14, PM17-PM21), `/plan` (PM22-PM25) and the `plan/mode` event type with its validator.
//! Configuration (PM16): exactly one key, `section`, a non-empty string; a profile that does
//! not configure the plugin gets [`DEFAULT_SECTION`].

use std::sync::{Arc, Mutex};

use crate::log::Event;
use crate::plugin::{Config, Plugin, PluginError, Registrar, Section};
use crate::session::{PreStep, StepVerdict, StepView};

use super::{DEFAULT_SECTION, PLUGIN, PlanMode, SECTION_NAME, SECTION_ORDER, lock, notice};

/// The plan-mode plugin.
#[derive(Debug, Clone, Copy, Default)]
pub struct PlanModePlugin;

impl PlanModePlugin {
    /// Parses the plugin's configuration (PM16) and gives the plugin's state.
    pub fn configure(config: &Config<'_>) -> Result<PlanMode, PluginError> {
        let section = if config.is_given() {
            config.fields(&["section"])?.required_text("section")?
        } else {
            DEFAULT_SECTION
        };
        PlanMode::new(section).map_err(|message| PluginError::Register {
            plugin: PLUGIN.to_owned(),
            message,
        })
    }

    /// Registers `plan`'s section, listener, tool, command and event type.
    pub fn register_state(plan: &PlanMode, registrar: &mut Registrar) {
        registrar.section(Arc::new(PlanSection {
            plan: plan.clone(),
            fold: Mutex::default(),
        }));
        registrar.pre_step_first(Arc::new(PlanAppender {
            plan: plan.clone(),
            fold: Mutex::default(),
            handed: Mutex::default(),
        }));
        registrar.tool(plan.tool());
        registrar.command(plan.command());
        registrar.event_kind("plan/mode", Arc::new(validate_plan_mode));
    }
}

impl Plugin for PlanModePlugin {
    fn name(&self) -> &str {
        PLUGIN
    }

    fn register(&self, registrar: &mut Registrar, config: &Config<'_>) -> Result<(), PluginError> {
        let plan = Self::configure(config)?;
        Self::register_state(&plan, registrar);
        Ok(())
    }
}

/// Plan mode with a state the caller keeps a handle to (tests, and embedders that drive
/// `set`/`get` themselves): registers exactly what [`PlanModePlugin`] registers, for the
/// section this state was made with; it takes no configuration.
impl Plugin for PlanMode {
    fn name(&self) -> &str {
        PLUGIN
    }

    fn register(&self, registrar: &mut Registrar, config: &Config<'_>) -> Result<(), PluginError> {
        config.fields(&[])?;
        PlanModePlugin::register_state(self, registrar);
        Ok(())
    }
}

/// `plan/mode` data: exactly `{"active": bool}` (PM1).
fn validate_plan_mode(data: &serde_json::Value) -> Result<(), String> {
    match data.as_object() {
        Some(map) if map.len() == 1 && map.get("active").is_some_and(|v| v.is_boolean()) => Ok(()),
        _ => Err(format!("expected {{\"active\": true|false}}, got {data}")),
    }
}

/// What the plugin folded from the log so far (extended each step, never redone): the state
/// (PM2) and whether the last request header carried the section.
#[derive(Debug, Default)]
struct Fold {
    upto: usize,
    active: bool,
    /// `None` before the first request header.
    described: Option<bool>,
}

impl Fold {
    fn update(&mut self, events: &[(u64, Event)]) -> &Self {
        if events.len() < self.upto {
            // Another log than the one folded so far: start again.
            *self = Fold::default();
        }
        for (_, event) in events.get(self.upto..).unwrap_or(&[]) {
            match event {
                Event::PlanMode { active } => self.active = *active,
                Event::RequestHeader(h) => {
                    self.described = Some(h.sections.iter().any(|s| s.name == SECTION_NAME));
                }
                _ => {}
            }
        }
        self.upto = events.len();
        self
    }
}

/// The `plan:policy` section (PM13): the deployer's text while active, nothing otherwise.
struct PlanSection {
    plan: PlanMode,
    fold: Mutex<Fold>,
}

impl Section for PlanSection {
    fn name(&self) -> &str {
        SECTION_NAME
    }

    fn order(&self) -> u32 {
        SECTION_ORDER
    }

    fn render(&self, events: &[(u64, Event)]) -> Option<String> {
        let active = lock(&self.fold).update(events).active;
        self.plan.observe(active);
        self.plan.section_when(active).map(|s| s.text)
    }
}

/// The only append point while the agent runs (PM8): asked ahead of every other listener, it
/// appends a pending choice once every listener accepted the step (and it was not
/// cancelled), with the notice of PM12 when the last request header described the opposite
/// state.
struct PlanAppender {
    plan: PlanMode,
    fold: Mutex<Fold>,
    /// The choice last handed to the loop to append (value, whether the model is told).
    handed: Mutex<Option<(bool, bool)>>,
}

impl PreStep for PlanAppender {
    fn name(&self) -> &str {
        PLUGIN
    }

    fn before_step(&self, view: &mut StepView<'_>) -> StepVerdict {
        let active = lock(&self.fold).update(view.events).active;
        self.plan.observe(active);
        StepVerdict::Accept
    }

    fn accepted(&self, view: &mut StepView<'_>) {
        let (logged, described) = {
            let mut fold = lock(&self.fold);
            let fold = fold.update(view.events);
            (fold.active, fold.described)
        };
        let Some((active, tell)) = self.plan.take_pending() else {
            return;
        };
        if active == logged {
            return;
        }
        *lock(&self.handed) = Some((active, tell));
        view.append.push(Event::PlanMode { active });
        if tell && described == Some(!active) {
            view.append.push(Event::UserMessage {
                id: None,
                text: notice(active).to_owned(),
            });
        }
        self.plan.observe(active);
    }

    fn append_failed(&self, event: &Event, reason: &str) {
        if let Event::PlanMode { active } = event
            && let Some((handed, tell)) = lock(&self.handed).take()
            && handed == *active
        {
            // PM10: the choice stays pending; the next accepted pre-step tries again.
            tracing::warn!(
                "plan mode: the switch could not be logged ({reason}); it stays pending"
            );
            self.plan.restore_pending(handed, tell);
            self.plan.observe(!handed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::{PromptSection, RequestHeader};
    use crate::plan_mode::SetOutcome;

    fn header(plan: bool) -> Event {
        let mut sections = vec![PromptSection {
            name: "base".into(),
            order: 10,
            text: "b".into(),
        }];
        if plan {
            sections.push(PromptSection {
                name: SECTION_NAME.into(),
                order: SECTION_ORDER,
                text: "p".into(),
            });
        }
        Event::RequestHeader(RequestHeader {
            sections,
            tools: Vec::new(),
            model: "m".into(),
        })
    }

    fn appender(plan: &PlanMode) -> PlanAppender {
        PlanAppender {
            plan: plan.clone(),
            fold: Mutex::default(),
            handed: Mutex::default(),
        }
    }

    fn accepted(a: &PlanAppender, events: &[(u64, Event)]) -> Vec<Event> {
        let mut view = StepView {
            turn: 0,
            step: 0,
            events,
            add_messages: Vec::new(),
            append: Vec::new(),
        };
        assert_eq!(a.before_step(&mut view), StepVerdict::Accept);
        a.accepted(&mut view);
        view.append
    }

    /// PM10: an append that fails does not lose the choice: it stays pending and the next
    /// accepted pre-step hands it again, with its notice (PM12: the header said inactive).
    #[test]
    fn a_failed_append_keeps_the_choice_pending_for_the_next_step() {
        let plan = PlanMode::new("Plan first.").unwrap();
        let a = appender(&plan);
        let events = [(0, header(false))];
        assert_eq!(plan.set(true, false, true), SetOutcome::Queued);
        let handed = accepted(&a, &events);
        assert_eq!(handed[0], Event::PlanMode { active: true });
        assert_eq!(plan.pending(), None);
        a.append_failed(&handed[0], "disk full");
        assert_eq!(plan.get(), (false, Some(true)));
        let again = accepted(&a, &events);
        assert_eq!(
            again,
            [
                Event::PlanMode { active: true },
                Event::UserMessage {
                    id: None,
                    text: notice(true).to_owned()
                }
            ]
        );
    }

    /// PM12: no notice before the first request header, nor when the header already
    /// described the new state; PM1: the event's data is exactly `{"active": bool}`.
    #[test]
    fn the_notice_depends_on_the_last_header_and_the_event_is_validated() {
        let plan = PlanMode::new("Plan first.").unwrap();
        let a = appender(&plan);
        assert_eq!(plan.set(true, false, true), SetOutcome::Queued);
        assert_eq!(accepted(&a, &[]), [Event::PlanMode { active: true }]);
        let plan = PlanMode::new("Plan first.").unwrap();
        let a = appender(&plan);
        let events = [(0, header(true))];
        assert_eq!(plan.set(true, false, true), SetOutcome::Queued);
        assert_eq!(accepted(&a, &events), [Event::PlanMode { active: true }]);
        assert_eq!(
            validate_plan_mode(&serde_json::json!({"active": true})),
            Ok(())
        );
        assert!(validate_plan_mode(&serde_json::json!({"active": 1})).is_err());
        assert!(validate_plan_mode(&serde_json::json!({"active": true, "x": 1})).is_err());
    }
}
