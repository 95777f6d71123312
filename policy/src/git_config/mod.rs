//! Reading git config files.
//!
//! Two readers, for two questions:
//! - [`entries`] and the helpers on it find what a config points at (`include.path`,
//!   `includeIf.*.path`, `core.hooksPath`, `core.worktree`, `.gitmodules` paths) when a run is
//!   planned. Section and key names compare without case; `[section "subsection"]` and the legacy
//!   `[section.subsection]` both carry a subsection; `;` and `#` start comments outside double
//!   quotes; a backslash escapes the next character. Continuation lines and the rarer escapes are
//!   not interpreted: a value this reader gets wrong names a path that does not exist, which
//!   protects nothing extra but takes nothing away either.
//! - [`parse_strict`] reads a config the way git does, or fails, and [`runs_code`] says which
//!   of its entries make git run or load something: for a repository a command created, when
//!   the run ends ([`safe_config`] keeps the rest).

mod danger;
mod strict;

pub use danger::{runs_code, safe_config};
pub use strict::{ConfigSyntax, StrictEntry, parse_strict};

use std::path::{Component, PathBuf};

/// One `key = value` line of a config text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Section name, lower case.
    pub section: String,
    /// Subsection, as written.
    pub subsection: Option<String>,
    /// Key name, lower case.
    pub key: String,
    /// The value, unquoted.
    pub value: String,
}

/// The `key = value` entries of a config text, in order.
pub fn entries(text: &str) -> Vec<Entry> {
    let mut section = String::new();
    let mut subsection = None;
    let mut out = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        let mut line = line;
        if let Some(rest) = line.strip_prefix('[') {
            let (header, after) = rest.split_once(']').unwrap_or((rest, ""));
            let header = header.trim();
            (section, subsection) = match header.split_once(['"', ' ']) {
                Some((name, sub)) => (
                    name.trim().to_ascii_lowercase(),
                    Some(sub.trim().trim_matches('"').to_string()),
                ),
                None => match header.split_once('.') {
                    Some((name, sub)) => (name.to_ascii_lowercase(), Some(sub.to_string())),
                    None => (header.to_ascii_lowercase(), None),
                },
            };
            // `[include] path = x` on one line.
            line = after.trim();
            if line.is_empty() {
                continue;
            }
        }
        if line.starts_with(['#', ';']) {
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        out.push(Entry {
            section: section.clone(),
            subsection: subsection.clone(),
            key: key.trim().to_ascii_lowercase(),
            value: unquote(value),
        });
    }
    out
}

/// The last value of `section.key` (no subsection) in a config text.
pub fn value(text: &str, section: &str, key: &str) -> Option<String> {
    entries(text)
        .into_iter()
        .filter(|e| e.section == section && e.subsection.is_none() && e.key == key)
        .map(|e| e.value)
        .next_back()
}

/// Every file a config text includes: `include.path` and `includeIf.<condition>.path`, whatever
/// the condition (it is not evaluated: any of them may apply).
pub fn include_paths(text: &str) -> Vec<String> {
    entries(text)
        .into_iter()
        .filter(|e| {
            e.key == "path"
                && ((e.section == "include" && e.subsection.is_none())
                    || (e.section == "includeif" && e.subsection.is_some()))
        })
        .map(|e| e.value)
        .collect()
}

/// A config value without surrounding whitespace, comments and double quotes.
pub fn unquote(raw: &str) -> String {
    let mut out = String::new();
    let mut quoted = false;
    let mut chars = raw.trim().chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => quoted = !quoted,
            '\\' => {
                if let Some(next) = chars.next() {
                    out.push(next);
                }
            }
            ';' | '#' if !quoted => break,
            c => out.push(c),
        }
    }
    out.trim_end().to_string()
}

/// The `path = ...` values of a `.gitmodules` text that stay inside the repository.
pub fn gitmodules_paths(text: &str) -> Vec<PathBuf> {
    entries(text)
        .into_iter()
        .filter(|e| e.section == "submodule" && e.key == "path")
        .map(|e| PathBuf::from(e.value))
        .filter(|p| {
            !p.as_os_str().is_empty() && p.components().all(|c| matches!(c, Component::Normal(_)))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn values_follow_git_syntax() {
        let text = "[Core]\n\tworktree = a\n[core \"sub\"]\n\tworktree = b\n[remote]\n\tworktree = c\n[core]\n\tWorktree = \"d e\" # trailing\n";
        assert_eq!(value(text, "core", "worktree"), Some("d e".into()));
        assert_eq!(value("[core]\n", "core", "worktree"), None);
    }

    #[test]
    fn includes_of_every_kind_are_listed() {
        let text = "[include] path = one-line.inc\n[include]\n\tpath = a.inc\n[includeIf \"gitdir:~/work/\"]\n\tpath = ../b.inc\n[IncludeIf \"onbranch:main\"]\n\tPath = \"c d.inc\" ; note\n[include.x]\n\tpath = not-an-include\n[core]\n\tpath = no\n";
        assert_eq!(
            include_paths(text),
            vec!["one-line.inc", "a.inc", "../b.inc", "c d.inc"]
        );
    }

    #[test]
    fn gitmodules_paths_stay_inside_the_repository() {
        let text = "[submodule \"a\"]\n\tpath = lib/a\n\turl = x\n[submodule \"b\"]\n\tpath = ../escape\n[submodule \"c\"]\n\tpath = /abs\n[submodule \"d\"]\n\tPATH = \"quoted\" ; note\n";
        assert_eq!(
            gitmodules_paths(text),
            vec![PathBuf::from("lib/a"), PathBuf::from("quoted")]
        );
    }
}
