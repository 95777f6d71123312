//! Shell syntax: what a bash script can run, seen before it runs.
//!
//! [`parse`] turns a script into the simple commands it can run, found anywhere in it:
//! pipelines, lists, subshells, `{ ...; }` groups, `$(...)` and backtick bodies, process
//! substitutions, function bodies, loops, conditionals, `case` arms, `[[ ... ]]` tests,
//! assignment values and here-document bodies that expand. Each command is a list of
//! [`Word`]s after quote removal: a literal string, or [`Word::Hidden`] when only running the
//! script tells its value (a variable, a command substitution, a glob, ...).
//!
//! The parser is tree-sitter with its bash grammar (pure computation, no I/O). What it cannot
//! read is reported in [`Script::hidden`] instead of guessed at: a parse error (tree-sitter
//! `ERROR`/`MISSING` nodes), input over [`MAX_SCRIPT_BYTES`], a parse that needs more than
//! [`MAX_PARSE_STEPS`] progress steps, and assignments to variables bash later runs as code
//! (`PROMPT_COMMAND`, `BASH_ENV`, `ENV`, prompts). What programs do with their arguments
//! (`sh -c`, `eval`, `source`, wrappers) is the business of [`crate::rules`], which calls back
//! here for nested scripts.

mod state;
mod walk;
mod words;

use std::cell::RefCell;
use std::collections::VecDeque;
use std::ops::ControlFlow;

/// What the rules cannot see when `what` sets a variable whose name is not in the text.
pub(crate) fn hidden_variable_name(what: &str) -> String {
    format!("the name of a variable `{what}` sets (it may be one bash runs, or an alias)")
}

/// Scripts longer than this are not parsed: the whole text counts as hidden.
pub const MAX_SCRIPT_BYTES: usize = 256 * 1024;

/// The most tree-sitter progress callbacks one parse may take (each is a slice of parser
/// work); a parse needing more is abandoned and the text counts as hidden. This bounds time
/// deterministically, without reading a clock.
pub const MAX_PARSE_STEPS: usize = 200_000;

/// The most simple commands kept from one script; more count as hidden.
pub const MAX_COMMANDS: usize = 10_000;

/// One word of a simple command, after quote removal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Word {
    /// Its value is known before the script runs.
    Literal(String),
    /// Its value is only known when the script runs.
    Hidden(Hidden),
}

/// Something whose value the rules cannot see before it runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hidden {
    /// What hides it, as a noun phrase: "the variable `$x`", "the output of `$(date)`".
    pub what: String,
    /// Whether it may become zero or several words (an unquoted expansion or a glob), rather
    /// than exactly one.
    pub splits: bool,
    /// The literal text the word starts with (empty when it starts hidden): `commit-$x` is
    /// never `push`.
    pub prefix: String,
    /// The word's last path component when it is literal whatever the hidden part is
    /// (`"$HOME"/bin/cargo`), so a command name is still known.
    pub basename: Option<String>,
    /// The word as shell text with the hidden part as a variable, when a program substitutes
    /// text into a script (`xargs -I{} sh -c 'echo {}'`): the script can still be parsed.
    pub template: Option<String>,
}

impl Hidden {
    /// Hidden by `what`, with nothing about its text known.
    pub fn new(what: impl Into<String>, splits: bool) -> Hidden {
        Hidden {
            what: what.into(),
            splits,
            prefix: String::new(),
            basename: None,
            template: None,
        }
    }
}

impl Word {
    /// A literal word.
    pub fn literal(text: impl Into<String>) -> Word {
        Word::Literal(text.into())
    }

    /// A hidden word.
    pub fn hidden(what: impl Into<String>, splits: bool) -> Word {
        Word::Hidden(Hidden::new(what, splits))
    }

    /// The literal value, if known.
    pub fn as_literal(&self) -> Option<&str> {
        match self {
            Word::Literal(s) => Some(s),
            Word::Hidden(_) => None,
        }
    }
}

/// One simple command the script can run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimpleCommand {
    /// The command name and its arguments (assignments and redirections removed).
    pub words: Vec<Word>,
    /// Its source text, for reasons shown to people.
    pub text: String,
    /// Its standard input, when the script gives it one.
    pub stdin: Option<Stdin>,
}

/// Standard input the script gives a command. An interpreter reading its program from it runs
/// code the rules cannot see, unless the text is known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stdin {
    /// "a pipe", "a here document", "a here string", "a redirection".
    pub from: &'static str,
    /// The text, when it is literal: a quoted here document (`<<'EOF'`), one that expands
    /// nothing, or a literal here string.
    pub text: Option<String>,
}

/// What a script can run.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Script {
    /// The text has no statement at all: only blanks and comments.
    pub empty: bool,
    /// Every simple command found, in no particular order.
    pub commands: Vec<SimpleCommand>,
    /// What could run but cannot be seen: parse errors, oversized input, code stored in
    /// variables bash runs later.
    pub hidden: Vec<Hidden>,
}

thread_local! {
    static PARSER: RefCell<Option<tree_sitter::Parser>> = const { RefCell::new(None) };
}

fn new_parser() -> Option<tree_sitter::Parser> {
    let mut parser = tree_sitter::Parser::new();
    parser
        .set_language(&tree_sitter_bash::LANGUAGE.into())
        .ok()?;
    Some(parser)
}

fn parse_tree(parser: &mut tree_sitter::Parser, text: &str) -> Option<tree_sitter::Tree> {
    // The grammar's scanner passes the lookahead character to `isdigit`, which is undefined
    // (and crashes) for code points past 255. Every byte of a multi-byte character becomes
    // `x`: bash treats such characters as word characters like `x`, equal text stays equal (so
    // a here document ends where bash ends it), and byte offsets are kept, so words are read
    // from the original text.
    let ascii: Vec<u8> = text
        .bytes()
        .map(|b| if b.is_ascii() { b } else { b'x' })
        .collect();
    let bytes = ascii.as_slice();
    let mut steps = 0usize;
    let mut progress = |_: &tree_sitter::ParseState| {
        steps += 1;
        if steps > MAX_PARSE_STEPS {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    };
    let options = tree_sitter::ParseOptions::new().progress_callback(&mut progress);
    let tree = parser.parse_with_options(
        &mut |i, _| bytes.get(i..).unwrap_or_default(),
        None,
        Some(options),
    );
    // An abandoned parse leaves state behind for resuming; start the next one afresh.
    parser.reset();
    tree
}

/// Scripts this short are remembered once parsed (see [`parse`]).
const REMEMBERED_BYTES: usize = 4096;
/// How many parsed scripts a thread remembers.
const REMEMBERED: usize = 32;

thread_local! {
    /// The scripts parsed last on this thread, oldest first.
    static RECENT: RefCell<VecDeque<(String, Script)>> = const { RefCell::new(VecDeque::new()) };
}

/// Parses `text` as a bash script. Total: any input gives a [`Script`], never a panic; what
/// cannot be read is in [`Script::hidden`].
///
/// A parse depends on nothing but the text, so the last few short scripts parsed on this
/// thread are remembered and a repeat is answered without parsing: an agent runs the same
/// commands again and again, and retries one that was refused.
pub fn parse(text: &str) -> Script {
    if text.len() > REMEMBERED_BYTES {
        return parse_afresh(text);
    }
    let known = RECENT.with(|recent| {
        let recent = recent.try_borrow().ok()?;
        recent
            .iter()
            .find(|(seen, _)| seen == text)
            .map(|(_, script)| script.clone())
    });
    if let Some(script) = known {
        return script;
    }
    let script = parse_afresh(text);
    RECENT.with(|recent| {
        if let Ok(mut recent) = recent.try_borrow_mut() {
            if recent.len() >= REMEMBERED {
                recent.pop_front();
            }
            recent.push_back((text.to_owned(), script.clone()));
        }
    });
    script
}

/// [`parse`] without looking among the scripts remembered.
fn parse_afresh(text: &str) -> Script {
    let mut script = Script::default();
    if text.contains('\0') {
        // bash cannot be given it; tree-sitter would stop reading there.
        script.hidden.push(Hidden::new(
            "the whole text: it contains a NUL character",
            true,
        ));
        return script;
    }
    if text.len() > MAX_SCRIPT_BYTES {
        script.hidden.push(Hidden::new(
            format!(
                "the whole text: it is longer than {} KiB",
                MAX_SCRIPT_BYTES / 1024
            ),
            true,
        ));
        return script;
    }
    let tree = PARSER.with(|cell| match cell.try_borrow_mut() {
        Ok(mut slot) => {
            if slot.is_none() {
                *slot = new_parser();
            }
            slot.as_mut().and_then(|p| parse_tree(p, text))
        }
        // Not reentrant today; a fresh parser keeps it correct if that changes.
        Err(_) => new_parser().and_then(|mut p| parse_tree(&mut p, text)),
    });
    match tree {
        Some(tree) => walk::walk(&tree, text, &mut script),
        None => script.hidden.push(Hidden::new(
            "the whole text: it is too complex to parse",
            true,
        )),
    }
    script.hidden.extend(state::hidden_state(text));
    script
}

/// At most 60 characters of `s` on one line, for messages.
pub(crate) fn short(s: &str) -> String {
    let one_line = s.replace('\n', "\\n");
    if one_line.chars().count() <= 60 {
        one_line
    } else {
        let mut cut: String = one_line.chars().take(57).collect();
        cut.push_str("...");
        cut
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A remembered parse is the parse of that text, however many others came between.
    #[test]
    fn a_repeated_script_parses_as_it_did_the_first_time() {
        let texts: Vec<String> = (0..REMEMBERED * 2 + 3)
            .map(|i| format!("git push origin b{i} | tee \"$x{i}\""))
            .chain([
                "ls\n".to_owned(),
                "ls".to_owned(),
                "(".to_owned(),
                String::new(),
            ])
            .collect();
        for round in 0..3 {
            for (i, text) in texts.iter().enumerate() {
                assert_eq!(parse(text), parse_afresh(text), "round {round}, {text:?}");
                if i % 3 == 0 {
                    let again = &texts[i / 2];
                    assert_eq!(parse(again), parse_afresh(again), "{again:?}");
                }
            }
        }
        let long = "echo ok; ".repeat(REMEMBERED_BYTES / 9 + 1);
        assert_eq!(parse(&long), parse_afresh(&long));
        assert!(RECENT.with(|r| r.borrow().len()) <= REMEMBERED);
        assert!(RECENT.with(|r| r.borrow().iter().all(|(t, _)| t.len() <= REMEMBERED_BYTES)));
    }
}
