//! Strict parsing of a plugin's configuration: a mapping with known keys only, each value of
//! the expected type, every error naming the file:line:col where the value was written.

use bridle_policy::{ConfigNode, ConfigValue, Origin};

use super::PluginError;

/// The configuration a plugin is loaded with.
#[derive(Debug, Clone, Copy)]
pub struct Config<'a> {
    plugin: &'a str,
    /// `None`: the profile does not configure the plugin (it is loaded by the preset with its
    /// shipped defaults).
    node: Option<&'a ConfigNode>,
}

impl<'a> Config<'a> {
    /// The configuration `node` of `plugin` (`None`: not configured).
    pub fn new(plugin: &'a str, node: Option<&'a ConfigNode>) -> Self {
        Self { plugin, node }
    }

    /// Whether the profile configured the plugin.
    pub fn is_given(&self) -> bool {
        self.node.is_some()
    }

    /// An error at `at` for this plugin.
    pub fn error(&self, at: &Origin, message: impl Into<String>) -> PluginError {
        PluginError::Config {
            at: at.clone(),
            plugin: self.plugin.to_owned(),
            message: message.into(),
        }
    }

    /// The configuration as a mapping whose keys are all in `known` (none given: an empty
    /// mapping). Anything else fails naming the key or value.
    pub fn fields(&self, known: &[&str]) -> Result<Fields<'a>, PluginError> {
        let Some(node) = self.node else {
            return Ok(Fields {
                config: *self,
                origin: Origin::Builtin,
                entries: Vec::new(),
            });
        };
        let ConfigValue::Map(entries) = &node.value else {
            return Err(self.error(
                &node.origin,
                format!(
                    "the configuration must be a mapping (keys: {}), not {}",
                    list(known),
                    node.value.kind()
                ),
            ));
        };
        let mut out: Vec<(&'a str, &'a ConfigNode)> = Vec::new();
        for (key, value) in entries {
            if !known.contains(&key.value.as_str()) {
                return Err(self.error(
                    &key.origin,
                    format!("unknown key `{}` (expected: {})", key.value, list(known)),
                ));
            }
            if out.iter().any(|(k, _)| *k == key.value) {
                return Err(self.error(&key.origin, format!("key `{}` given twice", key.value)));
            }
            out.push((key.value.as_str(), value));
        }
        Ok(Fields {
            config: *self,
            origin: node.origin.clone(),
            entries: out,
        })
    }
}

fn list(known: &[&str]) -> String {
    if known.is_empty() {
        return "none".to_owned();
    }
    known
        .iter()
        .map(|k| format!("`{k}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A plugin configuration's keys, checked against the plugin's known keys.
#[derive(Debug)]
pub struct Fields<'a> {
    config: Config<'a>,
    /// Where the mapping was written.
    origin: Origin,
    entries: Vec<(&'a str, &'a ConfigNode)>,
}

impl<'a> Fields<'a> {
    fn get(&self, key: &str) -> Option<&'a ConfigNode> {
        self.entries
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| *v)
    }

    /// A string value, if given; a value of another type is an error.
    pub fn string(&self, key: &str) -> Result<Option<&'a str>, PluginError> {
        match self.get(key) {
            None => Ok(None),
            Some(ConfigNode {
                value: ConfigValue::String(s),
                ..
            }) => Ok(Some(s.as_str())),
            Some(node) => Err(self.config.error(
                &node.origin,
                format!("`{key}` must be a string, not {}", node.value.kind()),
            )),
        }
    }

    /// A string value that must be given and not blank.
    pub fn required_text(&self, key: &str) -> Result<&'a str, PluginError> {
        match self.string(key)? {
            None => Err(self.config.error(
                &self.origin,
                format!("`{key}` is required (a non-empty string)"),
            )),
            Some(text) if text.trim().is_empty() => {
                let at = self.get(key).map_or(&self.origin, |n| &n.origin);
                Err(self
                    .config
                    .error(at, format!("`{key}` must be a non-empty string")))
            }
            Some(text) => Ok(text),
        }
    }

    /// A boolean value, if given.
    pub fn bool(&self, key: &str) -> Result<Option<bool>, PluginError> {
        match self.get(key) {
            None => Ok(None),
            Some(ConfigNode {
                value: ConfigValue::Bool(b),
                ..
            }) => Ok(Some(*b)),
            Some(node) => Err(self.config.error(
                &node.origin,
                format!(
                    "`{key}` must be `true` or `false`, not {}",
                    node.value.kind()
                ),
            )),
        }
    }
}
