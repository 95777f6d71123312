//! One word node of the syntax tree to a [`Word`]: quote removal, escapes, and what hides a
//! word's value (expansions, substitutions, globs, brace expansion).

use tree_sitter::Node;

use super::{Hidden, Word, short};

/// Nesting of word nodes (a string in a concatenation in a translated string...) is shallow in
/// real scripts; deeper is treated as hidden rather than recursed into.
const MAX_WORD_DEPTH: usize = 16;

/// The source text of `node`.
pub(super) fn text<'s>(node: Node<'_>, src: &'s str) -> &'s str {
    src.get(node.byte_range()).unwrap_or("")
}

/// Builds a word value piece by piece; the first hidden piece decides what hides the word.
#[derive(Default)]
struct Builder {
    value: String,
    hidden: Option<Hidden>,
    /// The literal text after the last `/`, while no hidden piece came after it.
    after_slash: Option<String>,
    /// A piece may split into words anywhere (an unquoted expansion).
    anywhere: bool,
}

impl Builder {
    fn literal(&mut self, s: &str) {
        self.value.push_str(s);
        match s.rfind('/') {
            Some(i) => self.after_slash = Some(s[i + 1..].to_owned()),
            None => {
                if let Some(t) = &mut self.after_slash {
                    t.push_str(s);
                }
            }
        }
    }

    /// A hidden piece; `quoted`: inside double quotes, where nothing splits.
    fn hidden(&mut self, mut piece: Hidden, quoted: bool) {
        if quoted {
            piece.splits = false;
        }
        self.anywhere |= piece.splits && piece.basename.is_none();
        self.after_slash.clone_from(&piece.basename);
        match &mut self.hidden {
            Some(first) => first.splits |= piece.splits,
            None => {
                piece.prefix = format!("{}{}", self.value, piece.prefix);
                piece.template = None;
                self.hidden = Some(piece);
            }
        }
    }

    fn push(&mut self, word: Word, quoted: bool) {
        match word {
            Word::Literal(s) => self.literal(&s),
            Word::Hidden(h) => self.hidden(h, quoted),
        }
    }

    fn finish(self) -> Word {
        match self.hidden {
            None => Word::Literal(self.value),
            Some(mut h) => {
                h.basename = if self.anywhere {
                    None
                } else {
                    self.after_slash
                };
                Word::Hidden(h)
            }
        }
    }
}

/// The word `node` stands for.
pub(super) fn word(node: Node<'_>, src: &str) -> Word {
    word_at(node, src, 0)
}

fn word_at(node: Node<'_>, src: &str, depth: usize) -> Word {
    let Some(raw) = src.get(node.byte_range()) else {
        // Not on character boundaries: never read as something it is not.
        return Word::hidden("a word that splits a character", true);
    };
    if depth > MAX_WORD_DEPTH {
        return Word::hidden(format!("the word `{}`", short(raw)), true);
    }
    if !node.is_named() {
        // `$` alone, `==`, `=~`: literal tokens.
        return Word::literal(raw);
    }
    match node.kind() {
        "word" => unquoted(raw),
        "number" if node.named_child_count() == 0 => Word::literal(raw),
        "raw_string" => Word::literal(
            raw.strip_prefix('\'')
                .and_then(|s| s.strip_suffix('\''))
                .unwrap_or(raw),
        ),
        "ansi_c_string" => raw
            .strip_prefix("$'")
            .and_then(|s| s.strip_suffix('\''))
            .and_then(ansi_c)
            .map_or_else(
                || Word::hidden(format!("the string `{}`", short(raw)), false),
                Word::Literal,
            ),
        "string" => double_quoted(node, src, depth),
        "translated_string" => match node.named_child(0) {
            Some(inner) => word_at(inner, src, depth + 1),
            None => Word::literal(""),
        },
        "concatenation" => {
            let mut b = Builder::default();
            // The unquoted text with each quoted or expanded part as `x`: brace expansion
            // (`pu{sh,ll}`, `{"a","b"}`) spans several parts.
            let mut shape = String::new();
            let mut at = node.start_byte();
            let mut cursor = node.walk();
            for child in node.children(&mut cursor) {
                let gap = src.get(at..child.start_byte()).unwrap_or("");
                if !gap.is_empty() {
                    shape.push_str(gap);
                    b.push(unquoted(gap), false);
                }
                if child.kind() == "word" {
                    shape.push_str(text(child, src));
                } else {
                    shape.push('x');
                }
                b.push(word_at(child, src, depth + 1), false);
                at = child.end_byte();
            }
            if braces_expand(&shape) {
                // Where the expansion starts in the value is not tracked: nothing is known.
                return Word::hidden(format!("the brace expansion `{}`", short(raw)), true);
            }
            b.finish()
        }
        "simple_expansion" | "expansion" => {
            Word::hidden(format!("the variable `{}`", short(raw)), true)
        }
        "command_substitution" => Word::hidden(format!("the output of `{}`", short(raw)), true),
        "process_substitution" => Word::hidden(format!("the file name of `{}`", short(raw)), false),
        "arithmetic_expansion" => Word::hidden(format!("the value of `{}`", short(raw)), true),
        "brace_expression" => Word::hidden(format!("the brace expansion `{}`", short(raw)), true),
        "extglob_pattern" => Word::hidden(format!("the glob `{}`", short(raw)), true),
        "regex" => Word::literal(raw),
        _ => Word::hidden(format!("the word `{}`", short(raw)), true),
    }
}

/// `"..."`: literal unless it expands something; it never splits.
fn double_quoted(node: Node<'_>, src: &str, depth: usize) -> Word {
    let mut b = Builder::default();
    let start = node.start_byte().saturating_add(1);
    let end = node.end_byte().saturating_sub(1).max(start);
    let mut at = start;
    let mut cursor = node.walk();
    for child in node.children(&mut cursor) {
        if !child.is_named() && text(child, src) == "\"" {
            continue;
        }
        if child.start_byte() > at {
            b.literal(&dq_content(src.get(at..child.start_byte()).unwrap_or("")));
        }
        match child.kind() {
            "string_content" => b.literal(&dq_content(text(child, src))),
            _ if !child.is_named() => b.literal(text(child, src)),
            _ => b.push(word_at(child, src, depth + 1), true),
        }
        at = at.max(child.end_byte());
    }
    if end > at {
        b.literal(&dq_content(src.get(at..end).unwrap_or("")));
    }
    b.finish()
}

/// Backslash inside double quotes escapes only `$`, `` ` ``, `"`, `\` and a newline.
fn dq_content(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.peek() {
                Some('$' | '`' | '"' | '\\') => {
                    if let Some(n) = chars.next() {
                        out.push(n);
                    }
                }
                Some('\n') => {
                    chars.next();
                }
                _ => out.push(c),
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// An unquoted word: backslash escapes the next character; an unescaped glob (`*`, `?`, a
/// `[...]` class) or brace expansion (`{a,b}`, `{1..3}`) makes it hidden.
fn unquoted(raw: &str) -> Word {
    if !raw.contains(['\\', '*', '?', '[', '{']) {
        return Word::literal(raw);
    }
    let braces = braces_expand(raw);
    let mut out = String::with_capacity(raw.len());
    // Where in `out` the first and last pattern characters and the last `/` are.
    let mut first_special = None;
    let mut last_special = None;
    let mut last_slash = None;
    let chars: Vec<char> = raw.chars().collect();
    let mut i = 0;
    while let Some(&c) = chars.get(i) {
        if c == '\\' {
            match chars.get(i + 1) {
                Some('\n') => {}
                Some(&n) => out.push(n),
                None => out.push('\\'),
            }
            i += 2;
            continue;
        }
        let special = match c {
            '*' | '?' => true,
            '[' => chars[i + 1..].contains(&']'),
            '{' | '}' | ',' => braces,
            _ => false,
        };
        if special {
            first_special.get_or_insert(out.len());
            last_special = Some(out.len());
        } else if c == '/' {
            last_slash = Some(out.len());
        }
        out.push(c);
        i += 1;
    }
    let (Some(first), Some(last)) = (first_special, last_special) else {
        return Word::Literal(out);
    };
    let mut hidden = Hidden::new(format!("the pattern `{}`", short(raw)), true);
    hidden.prefix = out[..first].to_owned();
    // Every word a pattern in a directory part becomes ends in the same file name.
    hidden.basename = last_slash
        .filter(|s| *s > last)
        .map(|s| out[s + 1..].to_owned());
    Word::Hidden(hidden)
}

/// Whether unquoted text holds a brace expansion: an unescaped `{` with a `,` or `..` before
/// its `}`.
fn braces_expand(shape: &str) -> bool {
    let chars: Vec<char> = shape.chars().collect();
    let mut open = 0usize;
    let mut i = 0;
    while let Some(&c) = chars.get(i) {
        match c {
            '\\' => i += 1,
            '{' => open += 1,
            '}' => open = open.saturating_sub(1),
            ',' if open > 0 && chars[i..].contains(&'}') => return true,
            '.' if open > 0 && chars.get(i + 1) == Some(&'.') && chars[i..].contains(&'}') => {
                return true;
            }
            _ => {}
        }
        i += 1;
    }
    false
}

/// Decodes the body of `$'...'`; `None` for an escape this does not know.
fn ansi_c(body: &str) -> Option<String> {
    let mut out = String::with_capacity(body.len());
    let mut chars = body.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        let e = chars.next()?;
        let simple = match e {
            'a' => Some('\u{7}'),
            'b' => Some('\u{8}'),
            'e' | 'E' => Some('\u{1b}'),
            'f' => Some('\u{c}'),
            'n' => Some('\n'),
            'r' => Some('\r'),
            't' => Some('\t'),
            'v' => Some('\u{b}'),
            '\\' | '\'' | '"' | '?' => Some(e),
            _ => None,
        };
        if let Some(s) = simple {
            out.push(s);
            continue;
        }
        let (radix, max) = match e {
            '0'..='7' => (8, 3),
            'x' => (16, 2),
            'u' => (16, 4),
            'U' => (16, 8),
            'c' => {
                let x = chars.next()?;
                out.push(char::from_u32(u32::from(x) & 0x1f)?);
                continue;
            }
            _ => return None,
        };
        let mut digits = String::new();
        if radix == 8 {
            digits.push(e);
        }
        while digits.len() < max {
            match chars.peek() {
                Some(d) if d.is_digit(radix) => {
                    digits.push(*d);
                    chars.next();
                }
                _ => break,
            }
        }
        let value = u32::from_str_radix(&digits, radix).ok()?;
        out.push(char::from_u32(value)?);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ansi_c_escapes_decode() {
        assert_eq!(
            ansi_c(r"a\tb\x41\101\u00e9\cA\'").as_deref(),
            Some("a\tbAAé\u{1}'")
        );
        assert_eq!(ansi_c(r"\q"), None);
        assert_eq!(ansi_c("trailing\\"), None);
    }

    #[test]
    fn unquoted_words_lose_backslashes_and_globs_hide() {
        assert_eq!(unquoted(r"g\it"), Word::literal("git"));
        assert_eq!(unquoted(r"\;"), Word::literal(";"));
        assert_eq!(unquoted(r"\*"), Word::literal("*"));
        assert_eq!(unquoted("{}"), Word::literal("{}"));
        assert_eq!(unquoted("["), Word::literal("["));
        for hides in ["pu*", "p?sh", "[p]ush", "pu{sh,ll}", "{1..3}"] {
            assert!(matches!(unquoted(hides), Word::Hidden(_)), "{hides}");
        }
    }
}
