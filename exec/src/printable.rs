//! Text from logs, files and models made safe to print on a terminal.

/// Whether `c` would move the cursor, break the line, erase or recolour the screen, or reorder
/// what is shown when printed raw.
fn hostile(c: char) -> bool {
    // C0 and C1 controls (NEL U+0085 among them) and DEL; tabs are harmless.
    (c.is_control() && c != '\t')
        || matches!(
            c,
            // The Unicode line and paragraph separators (the only members of Zl and Zp).
            '\u{2028}' | '\u{2029}'
            // Bidirectional marks, embeddings, overrides and isolates.
            | '\u{061c}'
            | '\u{200e}'
            | '\u{200f}'
            | '\u{202a}'..='\u{202e}'
            | '\u{2066}'..='\u{2069}'
        )
}

/// `text` with every character that could move the cursor, break the line, erase or recolour
/// the screen, or reorder what is shown (C0 and C1 controls, DEL, the Unicode line and
/// paragraph separators, bidirectional controls) written as an escape such as `\u{1b}`, so
/// what is printed is exactly what is there. Newlines are escaped too (one value is one line);
/// tabs are kept.
pub fn printable(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if hostile(c) {
            out.extend(c.escape_unicode());
        } else {
            out.push(c);
        }
    }
    out
}

/// Whether [`printable`] would change `text`.
pub fn is_printable(text: &str) -> bool {
    !text.chars().any(hostile)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_and_bidi_overrides_are_escaped_and_the_rest_kept() {
        assert_eq!(printable("ok: fine"), "ok: fine");
        assert_eq!(printable("a\nb\rc\u{1b}[2K"), "a\\u{a}b\\u{d}c\\u{1b}[2K");
        assert_eq!(
            printable("\u{9b}31m \u{202e}evil"),
            "\\u{9b}31m \\u{202e}evil"
        );
        assert_eq!(printable("héllo 日本\tx"), "héllo 日本\tx");
        assert!(is_printable("héllo 日本\tx"));
    }

    #[test]
    fn unicode_line_separators_and_every_bidi_control_are_escaped() {
        assert_eq!(
            printable("a\u{2028}b\u{2029}c\u{85}d\u{b}e\u{c}f"),
            "a\\u{2028}b\\u{2029}c\\u{85}d\\u{b}e\\u{c}f"
        );
        for c in [
            '\u{061c}', '\u{200e}', '\u{200f}', '\u{202a}', '\u{202b}', '\u{202c}', '\u{202d}',
            '\u{202e}', '\u{2066}', '\u{2067}', '\u{2068}', '\u{2069}',
        ] {
            let text = format!("x{c}y");
            assert_eq!(printable(&text), format!("x{}y", c.escape_unicode()));
            assert!(!is_printable(&text));
        }
    }
}
