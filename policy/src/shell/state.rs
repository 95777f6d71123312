//! Shell state a script can set that makes bash run commands its text does not show: the alias
//! and command tables written as variables (`BASH_ALIASES[u]=ulimit`, which `alias` would have
//! shown), and the variables whose value bash runs or sources (`PROMPT_COMMAND`, the prompts,
//! `BASH_ENV`). Found in the text itself, so any spelling that reaches bash is seen.

use super::Hidden;
use super::walk::CODE_VARIABLES;

/// Variables written through their names: the tables behind `alias` and `hash`.
const TABLES: &[&str] = &["BASH_ALIASES", "BASH_CMDS"];

/// What `text` sets that makes bash run commands the text does not show, if anything.
pub(super) fn hidden_state(text: &str) -> Option<Hidden> {
    // A backslash-newline is removed before bash reads words: `BASH_ALI\<newline>ASES`.
    let joined = text.replace("\\\n", "");
    if let Some(table) = TABLES.iter().find(|t| joined.contains(*t)) {
        return Some(Hidden::new(
            format!("what a command name runs once `{table}` is set"),
            true,
        ));
    }
    CODE_VARIABLES
        .iter()
        .find(|name| may_set(&joined, name))
        .map(|name| Hidden::new(format!("what bash runs from the value of `{name}`"), true))
}

/// Whether `name` stands in `text` as a whole word that is not only read: `PS1=...`,
/// `printf -v PS1`, `read PS1`, `${PS1:=...}` are; `$PS1` and `${PS1}` are not. Over-broad
/// on purpose (`grep PS1 file` counts): a supervised sandbox decides such text at each exec.
fn may_set(text: &str, name: &str) -> bool {
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    text.match_indices(name).any(|(at, _)| {
        let before = &text[..at];
        let after = &text[at + name.len()..];
        let whole = !before.chars().next_back().is_some_and(ident)
            && !after.chars().next().is_some_and(ident);
        let read = before.ends_with('$') || (before.ends_with("${") && after.starts_with('}'));
        whole && !read
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_and_run_values_are_found_in_any_spelling() {
        for text in [
            "BASH_ALIASES[u]=ulimit",
            "printf -v 'BASH_ALIASES[u]' ulimit",
            "declare -n r=BASH_ALI\\\nASES",
            ": ${BASH_CMDS[p]:=/usr/bin/git}",
            "PROMPT_COMMAND='ulimit -n 5'",
            "export PS1='$(x)'",
            "BASH_ENV=./e.sh bash -c true",
            "PS4+='$(x)'",
            "printf -v PROMPT_COMMAND %s ulimit",
            "read PS1 <<< x",
            ": ${PS1:='$(x)'}",
        ] {
            assert!(hidden_state(text).is_some(), "{text}");
        }
        for text in ["echo $PS1 ${PS1}", "MY_ENV=1 make", "ENVIRONMENT=prod make"] {
            assert!(hidden_state(text).is_none(), "{text}");
        }
    }
}
