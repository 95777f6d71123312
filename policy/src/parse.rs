//! Turning one layer's bytes into a [`RawProfile`]: size cap, UTF-8 check, bounded YAML parsing
//! and error messages with `file:line:column` and a hint. Never panics on any input.

use serde_saphyr::budget::Budget;

use crate::error::PolicyError;
use crate::origin::Origin;
use crate::raw::RawProfile;
use crate::source::{MAX_PROFILE_BYTES, SourceFile};

/// The YAML budget for profiles: generous for real profiles, small enough that alias bombs and
/// deep nesting fail fast with bounded memory.
fn budget() -> Budget {
    let mut b = Budget::default();
    b.max_events = 200_000;
    b.max_aliases = 1_000;
    b.max_anchors = 1_000;
    b.max_recorded_anchor_events = 20_000;
    b.max_recorded_anchor_bytes = 1 << 20;
    b.max_depth = 32;
    b.max_documents = 1;
    b.max_nodes = 100_000;
    b.max_total_scalar_bytes = MAX_PROFILE_BYTES;
    b.max_merge_keys = 100;
    b
}

pub(crate) fn parse_layer(src: &SourceFile) -> Result<RawProfile, PolicyError> {
    let text = checked_text(src)?;
    if text.trim().is_empty() {
        return Err(PolicyError::ParseProfile {
            at: Origin::file(&src.display, 1, 1),
            message: "profile is empty".to_owned(),
            hint: Some("a profile needs at least `mode:` or `extends:`".to_owned()),
        });
    }
    parse_text(src, text)
}

/// Parses one YAML document of bridle's (a profile layer, a scripted model) into `T`, with the
/// same limits and error quality as profiles: size cap, UTF-8 check, bounded parsing, strict
/// booleans, and `file:line:column` in every error. The YAML parser stays inside this crate.
pub fn parse_document<T: serde::de::DeserializeOwned>(src: &SourceFile) -> Result<T, PolicyError> {
    let text = checked_text(src)?;
    parse_text(src, text)
}

fn checked_text(src: &SourceFile) -> Result<&str, PolicyError> {
    if src.bytes.len() > MAX_PROFILE_BYTES {
        return Err(PolicyError::ProfileTooLarge {
            file: src.display.clone(),
            limit: MAX_PROFILE_BYTES,
        });
    }
    std::str::from_utf8(&src.bytes).map_err(|e| {
        let valid = String::from_utf8_lossy(&src.bytes[..e.valid_up_to()]).into_owned();
        let (line, column) = line_column_at_end(&valid);
        PolicyError::ProfileNotUtf8 {
            file: src.display.clone(),
            line,
            column,
        }
    })
}

fn parse_text<T: serde::de::DeserializeOwned>(
    src: &SourceFile,
    text: &str,
) -> Result<T, PolicyError> {
    let mut options = serde_saphyr::Options::default();
    options.budget = Some(budget());
    options.strict_booleans = true;
    serde_saphyr::from_str_with_options::<T>(text, options).map_err(|e| {
        let (line, column) = e
            .location()
            .map(|l| (l.line(), l.column()))
            .unwrap_or((0, 0));
        let (line, column) = if line == 0 { (1, 1) } else { (line, column) };
        let message = clean_message(&e.without_snippet().to_string());
        let hint = hint_for(&message);
        let message = match key_before(text, line, column) {
            Some(key) => format!("{key}: {message}"),
            None => message,
        };
        PolicyError::ParseProfile {
            at: Origin::file(&src.display, line, column),
            message,
            hint,
        }
    })
}

/// The key whose value starts at `line:column` (1-based), when it is written on that line as
/// `key: value` (also in a list item or a flow mapping): errors about a value then name it.
fn key_before(text: &str, line: u64, column: u64) -> Option<&str> {
    let text_line = text
        .lines()
        .nth(usize::try_from(line.checked_sub(1)?).ok()?)?;
    let upto = usize::try_from(column.checked_sub(1)?).ok()?;
    let end = text_line
        .char_indices()
        .nth(upto)
        .map_or(text_line.len(), |(i, _)| i);
    let before = text_line[..end].trim_end().strip_suffix(':')?;
    let start = before
        .char_indices()
        .rfind(|&(_, c)| !(c.is_ascii_alphanumeric() || c == '_' || c == '-'))
        .map_or(0, |(i, c)| i + c.len_utf8());
    let key = &before[start..];
    (!key.is_empty() && !key.starts_with('-')).then_some(key)
}

fn line_column_at_end(prefix: &str) -> (u64, u64) {
    let line = prefix.matches('\n').count() + 1;
    let column = prefix.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (
        u64::try_from(line).unwrap_or(u64::MAX),
        u64::try_from(column).unwrap_or(u64::MAX),
    )
}

/// Drops the parser's own location suffix (we print ours in front) and developer-facing advice.
fn clean_message(raw: &str) -> String {
    let mut msg = raw.trim().to_owned();
    // Alias errors end in `(defined at line A, column B) (used at line C, column D)`: the use
    // is where our prefix points, the definition is worth keeping.
    remove_location(&mut msg, " (used at ", ")", &[]);
    remove_location(&mut msg, " at ", "", &["(defined", "(used"]);
    if let Some(idx) = msg.find(", set DuplicateKeyPolicy") {
        msg.truncate(idx);
    }
    msg
}

/// Removes every `marker` + `line N, column M` + `tail` whose text before does not end in one of
/// `unless_after`.
fn remove_location(msg: &mut String, marker: &str, tail: &str, unless_after: &[&str]) {
    let mut from = 0;
    while let Some(found) = msg[from..].find(marker) {
        let start = from + found;
        let after = start + marker.len();
        let keep = unless_after.iter().any(|w| msg[..start].ends_with(w));
        match location_len(&msg[after..]) {
            Some(len) if !keep && msg[after + len..].starts_with(tail) => {
                msg.replace_range(start..after + len + tail.len(), "");
                from = start;
            }
            _ => from = after,
        }
    }
}

/// The length of a leading `line N, column M` in `text`, if it starts with one.
fn location_len(text: &str) -> Option<usize> {
    let digits = |s: &str| s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let line = text.strip_prefix("line ")?;
    let n = digits(line);
    let column = line[n..].strip_prefix(", column ")?;
    let m = digits(column);
    (n > 0 && m > 0).then_some("line , column ".len() + n + m)
}

fn hint_for(message: &str) -> Option<String> {
    if let Some(rest) = message.strip_prefix("unknown field `") {
        let (field, tail) = rest.split_once('`')?;
        let expected: Vec<&str> = tail
            .split_once("expected one of ")
            .or_else(|| tail.split_once("expected "))
            .map(|(_, list)| {
                list.split(',')
                    .map(|s| s.trim().trim_matches('`'))
                    .collect()
            })
            .unwrap_or_default();
        let best = expected
            .iter()
            .map(|cand| (edit_distance(field, cand), *cand))
            .filter(|(d, cand)| *d <= 2.max(cand.len() / 3))
            .min();
        return Some(match best {
            Some((_, cand)) => format!("did you mean `{cand}`?"),
            None => "remove it; the profile keys are listed in README.md".to_owned(),
        });
    }
    if message.starts_with("duplicate mapping key") {
        return Some("each key may appear once per mapping; merge the two entries".to_owned());
    }
    if message.contains("Documents {") {
        return Some("a profile is one YAML document; remove the `---` separators".to_owned());
    }
    if message.contains("budget") || message.contains("alias") || message.contains("anchor") {
        return Some(
            "the profile is too large or too deeply aliased; write the values out plainly"
                .to_owned(),
        );
    }
    if message.contains("null into string") {
        return Some(
            "a bare `~` or an empty value is YAML null; quote it, e.g. `\"~\"` for the home directory"
                .to_owned(),
        );
    }
    if message.contains("unknown variant") || message.contains("(expected one of: ") {
        return Some("check the spelling against the allowed values listed".to_owned());
    }
    None
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != *cb);
            cur[j + 1] = (prev[j] + cost).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_key_hint_suggests_the_closest_key() {
        let hint = hint_for("unknown field `mdoe`, expected one of mode, network").unwrap();
        assert_eq!(hint, "did you mean `mode`?");
    }

    #[test]
    fn location_suffix_is_removed() {
        assert_eq!(
            clean_message("invalid u64 at line 2, column 14"),
            "invalid u64"
        );
    }

    #[test]
    fn alias_locations_keep_the_definition_and_drop_the_use() {
        assert_eq!(
            clean_message(
                "budget breached: X at line 6, column 37 (defined at line 6, column 189) (used at line 6, column 246)"
            ),
            "budget breached: X (defined at line 6, column 189)"
        );
        assert_eq!(clean_message("look at line noise"), "look at line noise");
    }

    #[test]
    fn the_key_of_a_value_is_found_on_its_line() {
        let text =
            "mode: [\nrules:\n  - id: x\n    decision: [deny]\nnetwork: {mode: 5}\n  - [x]\n";
        assert_eq!(key_before(text, 1, 7), Some("mode"));
        assert_eq!(key_before(text, 4, 15), Some("decision"));
        assert_eq!(key_before(text, 5, 17), Some("mode"));
        assert_eq!(key_before(text, 3, 5), None);
        assert_eq!(key_before(text, 6, 5), None);
        assert_eq!(key_before(text, 9, 1), None);
        assert_eq!(key_before(text, 0, 0), None);
    }

    #[test]
    fn utf8_position_is_line_and_column() {
        assert_eq!(line_column_at_end("ab\ncd"), (2, 3));
        assert_eq!(line_column_at_end(""), (1, 1));
    }
}
