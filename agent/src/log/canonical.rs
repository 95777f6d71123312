//! Reading a stored record straight from its bytes, in one pass and without building a JSON
//! value: [`parse_record`] takes a JSONL record apart when it is exactly what bridle writes (the
//! envelope's fields in their order, the data compact with sorted keys, serde_json's escapes
//! and integers), handing back the fields and the data's own bytes, which are then also its
//! canonical bytes, so the hash is taken over them as they are.
//!
//! This is only a fast path: it answers yes for a line only when parsing and re-serialising it
//! would give the line back byte for byte, and declines (`None`) for anything it is not sure
//! of (a float, an escape in a key, unsorted keys, deep nesting); the caller then takes the
//! slow path (parse, re-serialise, compare), whose verdict is the reference. So a line is
//! never accepted here that the slow path would refuse, and the bytes hashed are the same.

/// A record whose bytes are exactly what bridle writes for it, borrowed from them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawRecord<'a> {
    pub seq: u64,
    pub time: &'a str,
    /// The event type.
    pub kind: &'a str,
    /// The data's bytes: compact JSON with sorted keys, as serde_json writes it.
    pub data: &'a str,
    pub ignorable: bool,
    pub hash: &'a str,
}

/// Nesting beyond this is declined (serde_json refuses 128 levels; the slow path says so).
const MAX_DEPTH: u32 = 64;

/// Bytes a string scan must look at: the quote, the backslash and the control characters
/// (which serde_json always escapes, so a raw one is never canonical).
const SPECIAL: [bool; 256] = {
    let mut table = [false; 256];
    let mut i = 0;
    while i < 0x20 {
        table[i] = true;
        i += 1;
    }
    table[b'"' as usize] = true;
    table[b'\\' as usize] = true;
    table
};

/// The fields of `line` (without its newline) when it is byte for byte what bridle stores:
/// `{"seq":N,"time":"..","type":"..","data":<canonical>[,"ignorable":true],"hash":".."}`
/// with no escape in the time, type or hash. `None`: not sure; take the slow path.
#[cfg(test)]
pub fn parse_line(line: &[u8]) -> Option<RawRecord<'_>> {
    parse_record(line).and_then(|(raw, end)| (end == line.len()).then_some(raw))
}

/// The fields of the record `bytes` start with when it is byte for byte what bridle stores:
/// `{"seq":N,"time":"..","type":"..","data":<canonical>[,"ignorable":true],"hash":".."}`
/// with no escape in the time, type or hash, and where it ends; what follows it is not looked
/// at (`None`: not sure; take the slow path). A record taken apart holds no newline (every control character in a string is
/// escaped), so when a newline follows it, it is the whole line.
pub fn parse_record(bytes: &[u8]) -> Option<(RawRecord<'_>, usize)> {
    let mut c = Cursor { b: bytes, i: 0 };
    c.eat(b"{\"seq\":")?;
    let seq = c.integer_u64()?;
    c.eat(b",\"time\":")?;
    let time = c.plain_string()?;
    c.eat(b",\"type\":")?;
    let kind = c.plain_string()?;
    c.eat(b",\"data\":")?;
    let start = c.i;
    c.value(0)?;
    let data = (start, c.i);
    let ignorable = c.eat(b",\"ignorable\":true").is_some();
    c.eat(b",\"hash\":")?;
    let hash = c.plain_string()?;
    c.eat(b"}")?;
    let text = std::str::from_utf8(bytes.get(..c.i)?).ok()?;
    let raw = RawRecord {
        seq,
        time: text.get(time.0..time.1)?,
        kind: text.get(kind.0..kind.1)?,
        data: text.get(data.0..data.1)?,
        ignorable,
        hash: text.get(hash.0..hash.1)?,
    };
    Some((raw, c.i))
}

/// Whether `data` is one JSON value exactly as serde_json writes it with sorted keys
/// (`false`: not sure).
pub fn is_canonical_value(data: &str) -> bool {
    let mut c = Cursor {
        b: data.as_bytes(),
        i: 0,
    };
    c.value(0).is_some() && c.i == data.len()
}

/// `text` as a JSON string, as serde_json writes it.
pub fn quoted(text: &str) -> String {
    if text.bytes().any(|b| SPECIAL[usize::from(b)]) {
        // Serialising a string cannot fail.
        serde_json::to_string(text).unwrap_or_default()
    } else {
        let mut out = String::with_capacity(text.len() + 2);
        out.push('"');
        out.push_str(text);
        out.push('"');
        out
    }
}

/// `text` as a JSON string without its quotes, as serde_json writes it; borrowed when it
/// needs no escape.
pub fn quoted_inner(text: &str) -> std::borrow::Cow<'_, [u8]> {
    if text.bytes().any(|b| SPECIAL[usize::from(b)]) {
        let mut quoted = quoted(text).into_bytes();
        quoted.pop();
        quoted.remove(0);
        std::borrow::Cow::Owned(quoted)
    } else {
        std::borrow::Cow::Borrowed(text.as_bytes())
    }
}

struct Cursor<'a> {
    b: &'a [u8],
    i: usize,
}

impl Cursor<'_> {
    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    fn eat(&mut self, literal: &[u8]) -> Option<()> {
        let rest = self.b.get(self.i..)?;
        rest.starts_with(literal).then(|| self.i += literal.len())
    }

    /// An integer as serde_json writes a `u64`: `0`, or digits without a leading zero, that
    /// fits.
    fn integer_u64(&mut self) -> Option<u64> {
        let start = self.i;
        let mut value: u64 = 0;
        while let Some(d @ b'0'..=b'9') = self.peek() {
            value = value.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
            self.i += 1;
        }
        let digits = self.i - start;
        let leading_zero = digits > 1 && self.b.get(start) == Some(&b'0');
        (digits > 0 && !leading_zero).then_some(value)
    }

    /// A string without escapes; its contents' range.
    fn plain_string(&mut self) -> Option<(usize, usize)> {
        self.eat(b"\"")?;
        let start = self.i;
        loop {
            let b = self.peek()?;
            if SPECIAL[usize::from(b)] {
                return (b == b'"').then(|| {
                    self.i += 1;
                    (start, self.i - 1)
                });
            }
            self.i += 1;
        }
    }

    /// A string as serde_json writes it: only `"`, `\` and control characters escaped, each
    /// in serde_json's spelling. Returns whether it held an escape.
    fn string(&mut self) -> Option<bool> {
        self.eat(b"\"")?;
        let mut escaped = false;
        loop {
            self.skip_plain();
            // At the byte to look at, or near the end.
            let b = loop {
                let b = self.peek()?;
                if SPECIAL[usize::from(b)] {
                    break b;
                }
                self.i += 1;
            };
            match b {
                b'"' => {
                    self.i += 1;
                    return Some(escaped);
                }
                b'\\' => {
                    escaped = true;
                    self.escape()?;
                }
                // A raw control character: serde_json escapes every one.
                _ => return None,
            }
        }
    }

    /// Moves past a run of bytes that need no look (no quote, backslash or control
    /// character), eight at a time: most of a log is the text inside strings.
    fn skip_plain(&mut self) {
        const ONES: u64 = u64::from_le_bytes([0x01; 8]);
        const HIGHS: u64 = u64::from_le_bytes([0x80; 8]);
        // The high bit of each zero byte of `w`: the lowest one set is the first zero byte
        // (those above it may be wrong, from the borrow).
        let zeros = |w: u64| w.wrapping_sub(ONES) & !w & HIGHS;
        while let Some(chunk) = self.b.get(self.i..self.i + 8) {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            let w = u64::from_le_bytes(word);
            // A byte below 0x20 is one whose top three bits are clear.
            let found = zeros(w & u64::from_le_bytes([0xe0; 8]))
                | zeros(w ^ u64::from_le_bytes([b'"'; 8]))
                | zeros(w ^ u64::from_le_bytes([b'\\'; 8]));
            if found != 0 {
                // Little-endian: the first byte in memory is the lowest.
                self.i += usize::try_from(found.trailing_zeros() / 8).unwrap_or(0);
                return;
            }
            self.i += 8;
        }
    }

    fn escape(&mut self) -> Option<()> {
        let next = *self.b.get(self.i + 1)?;
        match next {
            b'"' | b'\\' | b'b' | b'f' | b'n' | b'r' | b't' => {
                self.i += 2;
                Some(())
            }
            b'u' => {
                // `\u00XX` with lower-case hex, only for the controls without a short form.
                let hex = self.b.get(self.i + 2..self.i + 6)?;
                let digit = |d: u8| match d {
                    b'0'..=b'9' => Some(d - b'0'),
                    b'a'..=b'f' => Some(d - b'a' + 10),
                    _ => None,
                };
                if hex[0] != b'0' || hex[1] != b'0' {
                    return None;
                }
                let value = (digit(hex[2])? << 4) | digit(hex[3])?;
                let short = matches!(value, 0x08 | 0x09 | 0x0a | 0x0c | 0x0d);
                (value < 0x20 && !short).then(|| self.i += 6)
            }
            _ => None,
        }
    }

    /// An integer as serde_json writes one it parsed: a `u64`, or a negative `i64` other
    /// than `-0`. Anything with a fraction or an exponent is declined (floats round-trip
    /// through their shortest form, which the slow path checks).
    fn number(&mut self) -> Option<()> {
        let negative = self.eat(b"-").is_some();
        let value = self.integer_u64()?;
        if matches!(self.peek(), Some(b'.' | b'e' | b'E')) {
            return None;
        }
        let fits = !negative || (value != 0 && value <= i64::MAX.unsigned_abs());
        fits.then_some(())
    }

    fn value(&mut self, depth: u32) -> Option<()> {
        match self.peek()? {
            b'{' => self.object(depth + 1),
            b'[' => self.array(depth + 1),
            b'"' => self.string().map(|_| ()),
            b't' => self.eat(b"true"),
            b'f' => self.eat(b"false"),
            b'n' => self.eat(b"null"),
            b'-' | b'0'..=b'9' => self.number(),
            _ => None,
        }
    }

    fn array(&mut self, depth: u32) -> Option<()> {
        if depth > MAX_DEPTH {
            return None;
        }
        self.eat(b"[")?;
        if self.eat(b"]").is_some() {
            return Some(());
        }
        loop {
            self.value(depth)?;
            match self.peek()? {
                b',' => self.i += 1,
                b']' => {
                    self.i += 1;
                    return Some(());
                }
                _ => return None,
            }
        }
    }

    /// An object whose keys are in strictly increasing order (sorted, none twice). Keys
    /// with escapes are declined: their order is that of the decoded text.
    fn object(&mut self, depth: u32) -> Option<()> {
        if depth > MAX_DEPTH {
            return None;
        }
        self.eat(b"{")?;
        if self.eat(b"}").is_some() {
            return Some(());
        }
        let bytes = self.b;
        let mut previous: Option<&[u8]> = None;
        loop {
            let start = self.i + 1;
            if self.string()? {
                return None;
            }
            let key = bytes.get(start..self.i - 1)?;
            if previous.is_some_and(|p| p >= key) {
                return None;
            }
            previous = Some(key);
            self.eat(b":")?;
            self.value(depth)?;
            match self.peek()? {
                b',' => self.i += 1,
                b'}' => {
                    self.i += 1;
                    return Some(());
                }
                _ => return None,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the slow path concludes: the value parsed and written back again is the same
    /// bytes, with its keys sorted (what the chain hashes).
    fn slow_path_canonical(data: &str) -> bool {
        let Ok(mut value) = serde_json::from_str::<serde_json::Value>(data) else {
            return false;
        };
        let as_read = serde_json::to_string(&value).unwrap();
        value.sort_all_objects();
        as_read == data && serde_json::to_string(&value).unwrap() == data
    }

    #[test]
    fn canonical_data_is_recognised() {
        for data in [
            r#"{}"#,
            r#"[]"#,
            r#"{"a":1,"b":[true,false,null],"c":{"x":"y"}}"#,
            r#"{"content":"tab\t, quote \", slash \\, é, \u001b, raw: \u{2028}\n"}"#,
            r#"{"n":-9223372036854775807,"u":18446744073709551615,"z":0}"#,
            r#""a string""#,
            r#"{"":1,"a":2,"ab":3,"b":4}"#,
            "{\"k\":\"\u{7f} and \u{2028}\"}",
        ] {
            let data = data.replace("\\u{2028}", "\u{2028}");
            assert!(
                slow_path_canonical(&data),
                "the reference disagrees: {data}"
            );
            assert!(is_canonical_value(&data), "{data}");
        }
    }

    /// Everything declined here is either not canonical or not sure; nothing the slow path
    /// refuses is accepted.
    #[test]
    fn anything_not_exactly_as_serde_json_writes_it_is_declined() {
        for data in [
            r#"{"b":1,"a":2}"#,
            r#"{"a":1,"a":2}"#,
            r#"{"a": 1}"#,
            r#" {}"#,
            r#"{"a":1} "#,
            r#"{"a":"\/"}"#,
            r#"{"a":"\u0041"}"#,
            r#"{"a":"\u000a"}"#,
            r#"{"a":"\u001B"}"#,
            r#"{"a":"\u007f"}"#,
            "{\"a\":\"raw\ttab\"}",
            r#"{"a":01}"#,
            r#"{"a":-0}"#,
            r#"{"a":1.0}"#,
            r#"{"a":1e3}"#,
            r#"{"a":18446744073709551616}"#,
            r#"{"a":-9223372036854775809}"#,
            r#"{"a":tru}"#,
            r#"{"a":1,}"#,
            r#"[1,]"#,
            r#"{"a\"":1}"#,
            r#"{"a":1"#,
            r#""#,
        ] {
            assert!(!is_canonical_value(data), "{data}");
        }
        let deep = "[".repeat(200) + &"]".repeat(200);
        assert!(!is_canonical_value(&deep), "nesting serde_json refuses");
    }

    /// Strings are scanned a word at a time: a byte that needs a look is seen wherever it
    /// falls in a word, and a raw one is refused as the slow path refuses it.
    #[test]
    fn a_special_byte_is_seen_at_any_offset_in_a_long_string() {
        for at in 0..20 {
            for (special, canonical) in [
                ("\\n", true),
                ("\\\"", true),
                ("\\u001f", true),
                ("\u{7f}é", true),
                ("\n", false),
                ("\u{1f}", false),
                ("\\/", false),
                ("\"", false),
            ] {
                let data = format!(
                    "{{\"k\":\"{}{special}{}\"}}",
                    "a".repeat(at),
                    "b".repeat(20)
                );
                assert_eq!(slow_path_canonical(&data), canonical, "{data:?}");
                assert_eq!(is_canonical_value(&data), canonical, "{data:?}");
            }
            let cut = format!("{{\"k\":\"{}", "a".repeat(at));
            assert!(!is_canonical_value(&cut), "{cut:?}");
        }
    }

    #[test]
    fn a_line_is_taken_apart_only_when_it_is_the_stored_form() {
        let hash = "ab".repeat(32);
        let line = format!(
            r#"{{"seq":12,"time":"2026-12-01T00:00:00.000Z","type":"tool/call","data":{{"a":"b"}},"hash":"{hash}"}}"#
        );
        let raw = parse_line(line.as_bytes()).unwrap();
        assert_eq!(
            raw,
            RawRecord {
                seq: 12,
                time: "2026-12-01T00:00:00.000Z",
                kind: "tool/call",
                data: r#"{"a":"b"}"#,
                ignorable: false,
                hash: &hash,
            }
        );
        let ignorable = line.replace(r#"},"hash""#, r#"},"ignorable":true,"hash""#);
        assert!(parse_line(ignorable.as_bytes()).unwrap().ignorable);
        for bad in [
            line.replace("\"seq\":12", "\"seq\":012"),
            line.replace("\"seq\":12,", "\"seq\":12, "),
            line.replace(r#"},"hash""#, r#"},"ignorable":false,"hash""#),
            line.replace("tool/call", "tool\\/call"),
            line.clone() + " ",
            line.replace("{\"seq\"", "{\"time\":\"t\",\"seq\""),
            line.replace(r#"{"a":"b"}"#, r#"{"b":"a","a":"b"}"#),
        ] {
            assert_eq!(parse_line(bad.as_bytes()), None, "{bad}");
        }
        assert_eq!(parse_line(b"{\"seq\":1,\"time\":\"\xff\"}"), None);
    }

    #[test]
    fn quoting_is_serde_jsons() {
        for text in ["plain", "quote \" back \\ tab \t nul \0 é"] {
            assert_eq!(quoted(text), serde_json::to_string(text).unwrap());
            let whole = serde_json::to_vec(text).unwrap();
            assert_eq!(*quoted_inner(text), whole[1..whole.len() - 1]);
        }
    }

    mod against_the_slow_path {
        use proptest::prelude::*;

        use super::super::parse_line;
        use crate::log::chain::LogKey;
        use crate::log::{Event, Record};

        fn json() -> impl Strategy<Value = serde_json::Value> {
            let leaf = prop_oneof![
                Just(serde_json::Value::Null),
                any::<bool>().prop_map(serde_json::Value::from),
                any::<i64>().prop_map(serde_json::Value::from),
                any::<u64>().prop_map(serde_json::Value::from),
                any::<f64>().prop_map(serde_json::Value::from),
                any::<String>().prop_map(serde_json::Value::from),
            ];
            leaf.prop_recursive(3, 24, 4, |inner| {
                prop_oneof![
                    proptest::collection::vec(inner.clone(), 0..4)
                        .prop_map(serde_json::Value::from),
                    proptest::collection::vec((any::<String>(), inner), 0..4)
                        .prop_map(|kv| serde_json::Value::Object(kv.into_iter().collect())),
                ]
            })
        }

        fn line(content: String, sandbox: serde_json::Value) -> (LogKey, Record, Vec<u8>) {
            let dir = tempfile::tempdir().unwrap();
            let key = LogKey::load_or_create(dir.path()).unwrap();
            let event = Event::ToolResult {
                call_id: "c1".into(),
                ok: true,
                content,
                sandbox: Some(sandbox),
            };
            let record = Record::seal(&key, &key.genesis("s"), 5, "t".into(), &event);
            let line = record.stored_form();
            (key, record, line)
        }

        proptest! {
            #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

            /// Whatever bridle writes is either taken apart here, with the data bytes, hash
            /// and event the slow path gets, or declined (a float); the slow path accepts it
            /// either way.
            #[test]
            fn what_bridle_writes_reads_the_same_on_both_paths(
                content in any::<String>(),
                sandbox in json(),
            ) {
                let (key, record, line) = line(content, sandbox);
                let data = record.stored_data(&line);
                prop_assert!(data.is_some());
                if let Some(raw) = parse_line(&line) {
                    prop_assert_eq!(Some(raw.data.as_bytes().to_vec()), data);
                    prop_assert_eq!(
                        raw.check_link(&key, &key.genesis("s")),
                        record.check_link(&key, &key.genesis("s"))
                    );
                    prop_assert_eq!(raw.event(&mut Vec::new()), record.event());
                    prop_assert_eq!(raw.to_record(), record);
                }
            }

            /// A line changed anywhere is taken apart here only when the slow path also takes
            /// it as stored exactly as bridle writes it, with the same data bytes.
            #[test]
            fn a_changed_line_is_never_accepted_that_the_slow_path_refuses(
                content in any::<String>(),
                sandbox in json(),
                position in any::<prop::sample::Index>(),
                replacement in prop_oneof![
                    any::<u8>(),
                    prop::sample::select(b"{}[],:\"\\ 0123456789-.eEtfnu/abz".to_vec()),
                ],
                insert in any::<bool>(),
            ) {
                let (_, _, mut line) = line(content, sandbox);
                let i = position.index(line.len());
                if insert {
                    line.insert(i, replacement);
                } else {
                    line[i] = replacement;
                }
                if let Some(raw) = parse_line(&line) {
                    let slow: Record = serde_json::from_slice(&line).unwrap();
                    prop_assert_eq!(
                        slow.stored_data(&line),
                        Some(raw.data.as_bytes().to_vec())
                    );
                    prop_assert_eq!(raw.to_record(), slow);
                }
            }
        }
    }
}
