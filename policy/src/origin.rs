//! Provenance: where each effective value came from.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Where a value was set.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Origin {
    /// A profile file (or a shipped profile, whose `file` is `profiles/NAME.yaml`).
    File {
        /// The file as the user would name it.
        file: String,
        /// 1-based line.
        line: u64,
        /// 1-based column.
        column: u64,
    },
    /// A command-line flag such as `--mode`.
    Flag {
        /// The flag, e.g. `--network`.
        flag: String,
    },
    /// bridle's built-in default: no layer set the value.
    Builtin,
    /// Found on disk when the session was planned (for example the git directory of a
    /// submodule, protected like the repository's own).
    Found {
        /// What was found, e.g. "submodule git dir `/w/.git/modules/lib`".
        what: String,
    },
    /// A profile entry under a default XDG base directory (`~/.config/gh`), applied where the
    /// environment moved that directory (`$XDG_CONFIG_HOME/gh`). Boxed: every error that names
    /// an origin carries this variant's size.
    Xdg(Box<XdgMoved>),
    /// A profile entry under the home directory (`~/.aws`), applied under the account's home
    /// from the password database too, when `$HOME` points elsewhere: the files there are the
    /// same person's. Boxed like [`Origin::Xdg`].
    AccountHome(Box<AccountHome>),
}

/// See [`Origin::AccountHome`].
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct AccountHome {
    /// The account's home directory, e.g. `/root`.
    pub home: std::path::PathBuf,
    /// The entry as written, e.g. `~/.aws`.
    pub entry: String,
    /// Where the entry was written.
    pub at: Origin,
}

/// See [`Origin::Xdg`].
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct XdgMoved {
    /// The variable that moved it, e.g. `XDG_CONFIG_HOME`.
    pub var: String,
    /// The entry as written, e.g. `~/.config/gh`.
    pub entry: String,
    /// Where the entry was written.
    pub at: Origin,
}

impl Origin {
    /// An origin in a file.
    pub fn file(file: impl Into<String>, line: u64, column: u64) -> Self {
        Origin::File {
            file: file.into(),
            line,
            column,
        }
    }

    /// An origin on the command line.
    pub fn flag(flag: impl Into<String>) -> Self {
        Origin::Flag { flag: flag.into() }
    }
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::File { file, line, column } => write!(f, "{file}:{line}:{column}"),
            Origin::Flag { flag } => write!(f, "command line {flag}"),
            Origin::Builtin => f.write_str("built-in default"),
            Origin::Found { what } => write!(f, "found on disk: {what}"),
            Origin::Xdg(moved) => {
                let XdgMoved { var, entry, at } = moved.as_ref();
                write!(f, "{at}: `{entry}` under ${var}")
            }
            Origin::AccountHome(account) => {
                let AccountHome { home, entry, at } = account.as_ref();
                write!(
                    f,
                    "{at}: `{entry}` under the account's home `{}`",
                    home.display()
                )
            }
        }
    }
}

/// A value together with the place that set it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct Sourced<T> {
    /// The value.
    pub value: T,
    /// Where it was set.
    pub origin: Origin,
}

impl<T> Sourced<T> {
    /// Pairs a value with its origin.
    pub fn new(value: T, origin: Origin) -> Self {
        Sourced { value, origin }
    }

    /// A built-in default.
    pub fn builtin(value: T) -> Self {
        Sourced {
            value,
            origin: Origin::Builtin,
        }
    }
}
