//! Text from logs, files and models made safe to print on a terminal.

/// `text` with every character that could move the cursor, erase or recolour the screen, or
/// reorder what is shown (C0 and C1 controls, DEL, bidirectional overrides) written as an
/// escape such as `\u{1b}`, so what is printed is exactly what is there. Newlines are escaped
/// too (one value is one line); tabs are kept.
pub fn printable(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        let hostile = (c.is_control() && c != '\t')
            || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{200e}' | '\u{200f}');
        if hostile {
            out.extend(c.escape_unicode());
        } else {
            out.push(c);
        }
    }
    out
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
        assert_eq!(printable("héllo 日本"), "héllo 日本");
    }
}
