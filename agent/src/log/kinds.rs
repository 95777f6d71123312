//! Event types beyond the built-in ones: a loaded plugin declares a type with a validator of
//! its data ([`EventKinds`]), and the log then writes and reads events of it as
//! [`Event::Plugin`](super::Event::Plugin). An event of a type nobody declares fails a read
//! unless it is marked ignorable; `log verify` still checks the chain over it and names it.

/// Which event types beyond the built-in ones are declared, and the check of their data.
/// A declared built-in type (plan mode declares `plan/mode`) is read as itself and checked
/// by the declaring validator too.
pub trait EventKinds: std::fmt::Debug + Send + Sync {
    /// Whether `kind` is declared.
    fn declares(&self, kind: &str) -> bool;

    /// Checks `data` of an event of type `kind` (`Err`: what is wrong, naming the type); a
    /// type nobody declares is refused.
    fn validate(&self, kind: &str, data: &serde_json::Value) -> Result<(), String>;
}

/// An event of a type a plugin declares: its `type` and `data` as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct PluginEvent {
    /// The type, as written in the log (`probe/seen`); never a built-in one.
    pub kind: String,
    pub data: serde_json::Value,
}

/// Whether `event` may be appended under `kinds`: its type is not a built-in one, a loaded
/// plugin declares it, and its validator accepts its data.
pub(crate) fn check_append(
    kinds: Option<&dyn EventKinds>,
    event: &PluginEvent,
) -> Result<(), String> {
    let kind = &event.kind;
    if super::Event::is_known_kind(kind) {
        return Err(format!(
            "{kind:?} is a built-in event type; a plugin event cannot take its name"
        ));
    }
    match kinds {
        Some(kinds) if kinds.declares(kind) => kinds.validate(kind, &event.data),
        _ => Err(format!("no loaded plugin declares the event type {kind:?}")),
    }
}
