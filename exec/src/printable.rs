//! Text from logs, files and models made safe to print on a terminal.

/// Whether `c` would move the cursor, break the line, erase or recolour the screen, or reorder
/// what is shown when printed raw.
fn hostile(c: char) -> bool {
    // Every C0 control (tab included: it would make a value's text differ from what is
    // there), every C1 control (NEL U+0085 among them) and DEL.
    c.is_control()
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
/// what is printed is exactly what is there. Newlines and tabs are escaped too (one value is
/// one line; a tab would pass for spaces). Output meant to span lines splits at its newlines
/// first and escapes each line.
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
        assert_eq!(printable("héllo 日本 x"), "héllo 日本 x");
        assert!(is_printable("héllo 日本 x"));
    }

    #[test]
    fn every_c0_control_del_and_c1_control_is_escaped_tab_included() {
        for c in ('\u{0}'..='\u{1f}')
            .chain(['\u{7f}'])
            .chain('\u{80}'..='\u{9f}')
        {
            let text = format!("a{c}b");
            assert_eq!(printable(&text), format!("a{}b", c.escape_unicode()));
            assert!(!is_printable(&text), "{c:?}");
        }
        assert_eq!(printable("ok: 1\thello"), "ok: 1\\u{9}hello");
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
