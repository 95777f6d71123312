//! Colour for decisions on a terminal: green allow, yellow ask, red deny. Only when stdout is a
//! terminal, `NO_COLOR` is not set (no-color.org) and the terminal is not `dumb`; a pipe, a file
//! or a log reader always get plain text.

use std::io::IsTerminal;

use bridle_policy::Decision;

/// Whether decisions printed on stdout get colour.
pub fn colour_on_stdout() -> bool {
    std::io::stdout().is_terminal()
        && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
        && std::env::var_os("TERM").is_none_or(|t| t != "dumb")
}

/// `decision` as text, coloured when `colour`.
pub fn decision(decision: Decision, colour: bool) -> String {
    if !colour {
        return decision.to_string();
    }
    let code = match decision {
        Decision::Allow => "32",
        Decision::Ask => "33",
        Decision::Deny => "31",
    };
    format!("\u{1b}[{code}m{decision}\u{1b}[0m")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decisions_are_plain_without_colour_and_wrapped_with_it() {
        assert_eq!(decision(Decision::Deny, false), "deny");
        assert_eq!(decision(Decision::Deny, true), "\u{1b}[31mdeny\u{1b}[0m");
        assert_eq!(decision(Decision::Allow, true), "\u{1b}[32mallow\u{1b}[0m");
    }
}
