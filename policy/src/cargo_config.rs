//! cargo's config as the command rules need it: the aliases a config file, a `--config`
//! argument or a `CARGO_ALIAS_*` variable defines, and the files a config file includes.
//! cargo expands an alias in its own process (`cargo p` with `alias.p = "publish"` publishes,
//! no exec in between), so the rules decide every alias a subcommand may stand for. Reading
//! the files is the exec supervisor's; this module only reads their text.

use toml::{Table, Value};

/// An alias: its name and the words it stands for.
pub type Alias = (String, Vec<String>);

/// What one config file says that the rules need.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct CargoConfig {
    /// `[alias]`: each name with the words it expands to.
    pub aliases: Vec<Alias>,
    /// `include`: the paths of further config files, as written (relative to the file's
    /// directory).
    pub includes: Vec<String>,
}

/// The aliases and includes of a config file's text, or `None` when it is not TOML (cargo then
/// refuses to run at all, so it expands no alias from it).
pub fn parse(text: &str) -> Option<CargoConfig> {
    let table: Table = text.parse().ok()?;
    Some(of_table(&table))
}

/// The aliases a `--config` argument defines when it is `KEY=VALUE` (`alias.p="publish"`);
/// `None` when it is not TOML (cargo then reads it as the path of a config file).
pub fn inline(arg: &str) -> Option<Vec<Alias>> {
    let table: Table = arg.parse().ok()?;
    Some(of_table(&table).aliases)
}

/// The alias a variable of the environment defines: `CARGO_ALIAS_P=publish` defines the alias
/// `P` (named as [`env_name`] spells a subcommand), whose value is split at whitespace.
pub fn env_alias(variable: &str, value: &str) -> Option<Alias> {
    let name = variable
        .strip_prefix("CARGO_ALIAS_")
        .filter(|n| !n.is_empty())?;
    Some((name.to_owned(), words(value)))
}

/// How cargo spells an alias's name in the environment: each `.`-separated part with `-` as
/// `_` and in upper case (Unicode's: `ß` is `SS`), joined by `_`.
pub fn env_name(subcommand: &str) -> String {
    subcommand
        .split('.')
        .map(|part| part.replace('-', "_").to_uppercase())
        .collect::<Vec<_>>()
        .join("_")
}

fn of_table(table: &Table) -> CargoConfig {
    let mut out = CargoConfig::default();
    if let Some(Value::Table(aliases)) = table.get("alias") {
        aliases_in(aliases, "", &mut out.aliases);
    }
    let include = |v: &Value| match v {
        Value::String(path) => Some(path.clone()),
        Value::Table(t) => t.get("path").and_then(Value::as_str).map(str::to_owned),
        _ => None,
    };
    match table.get("include") {
        Some(Value::Array(items)) => out.includes.extend(items.iter().filter_map(include)),
        Some(v) => out.includes.extend(include(v)),
        None => {}
    }
    out
}

/// The aliases of an `[alias]` table, a nested table's as dotted names: `[alias.foo]` with
/// `bar = "publish"` defines `foo.bar`, which cargo looks up for `cargo foo.bar`.
fn aliases_in(table: &Table, prefix: &str, out: &mut Vec<Alias>) {
    for (name, value) in table {
        let name = format!("{prefix}{name}");
        match value {
            Value::String(s) => out.push((name, words(s))),
            Value::Array(items) => out.push((
                name,
                items
                    .iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect(),
            )),
            Value::Table(nested) => aliases_in(nested, &format!("{name}."), out),
            _ => {}
        }
    }
}

/// A string alias's words, as cargo splits it (at whitespace, no quoting).
fn words(s: &str) -> Vec<String> {
    s.split_whitespace().map(str::to_owned).collect()
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    fn alias(name: &str, words: &[&str]) -> Alias {
        (name.into(), words.iter().map(|w| w.to_string()).collect())
    }

    #[test]
    fn a_config_file_gives_its_aliases_as_strings_or_lists_and_its_includes() {
        let config = parse(
            "include = [\"a.toml\", { path = \"b.toml\", optional = true }]\n\
             [alias]\np = \"publish --no-verify\"\nq = [\"publish\", \"--dry-run\"]\n\
             n = 3\n[build]\njobs = 2\n",
        )
        .unwrap();
        assert_eq!(
            config.aliases,
            [
                alias("p", &["publish", "--no-verify"]),
                alias("q", &["publish", "--dry-run"]),
            ]
        );
        assert_eq!(config.includes, ["a.toml", "b.toml"]);
        let nested = parse("[alias.foo]\nbar = \"publish\"\n").unwrap();
        assert_eq!(nested.aliases, [alias("foo.bar", &["publish"])]);
        let dotted = parse("alias.x = 'publish'\ninclude = \"c.toml\"\n").unwrap();
        assert_eq!(dotted.aliases, [alias("x", &["publish"])]);
        assert_eq!(dotted.includes, ["c.toml"]);
    }

    #[test]
    fn text_that_is_not_toml_defines_nothing() {
        assert_eq!(parse("[alias\np = publish"), None);
        assert_eq!(inline("../other.toml"), None);
    }

    #[test]
    fn a_config_argument_and_a_variable_define_aliases() {
        assert_eq!(
            inline("alias.p=\"publish\"").unwrap(),
            [alias("p", &["publish"])]
        );
        assert_eq!(
            inline("alias.p = [\"publish\", \"-v\"]").unwrap(),
            [alias("p", &["publish", "-v"])]
        );
        assert_eq!(inline("build.jobs=2").unwrap(), []);
        assert_eq!(
            env_alias("CARGO_ALIAS_MY_P", " publish  --dry-run"),
            Some(alias("MY_P", &["publish", "--dry-run"]))
        );
        assert_eq!(env_alias("CARGO_ALIAS_", "publish"), None);
        assert_eq!(env_alias("CARGO_HOME", "/x"), None);
        assert_eq!(env_name("my-p.x"), "MY_P_X");
        assert_eq!(env_name("ß"), "SS");
    }
}
