//! The envelope every event is stored in: `{seq, time, type, data, ignorable?, hash}`.

use serde::{Deserialize, Serialize};

use std::borrow::Cow;

use super::canonical::{RawRecord, quoted, quoted_inner};
use super::chain::{self, Hash, LogKey};
use super::event::Event;

/// One stored event: its place in the log, when it was recorded, its type and data, and its
/// link in the integrity chain.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Record {
    /// Contiguous from 0.
    pub seq: u64,
    /// RFC 3339, UTC, milliseconds.
    pub time: String,
    /// The event type (`turn/start`, ...).
    #[serde(rename = "type")]
    pub kind: String,
    pub data: serde_json::Value,
    /// A reader that does not know `kind` may skip this event instead of refusing the log.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub ignorable: bool,
    /// Lower-case hex of the chain hash ([`chain`]).
    pub hash: String,
}

impl Record {
    /// Seals `event` as event `seq` following `prev`.
    pub fn seal(key: &LogKey, prev: &Hash, seq: u64, time: String, event: &Event) -> Self {
        let (kind, data) = split(event);
        let mut record = Self {
            seq,
            time,
            kind,
            data,
            ignorable: false,
            hash: String::new(),
        };
        record.hash = chain::to_hex(&key.link(prev, &record.canonical_body()));
        record
    }

    /// The record exactly as bridle stores it (one compact JSON object). A stored record that
    /// parses but is not byte for byte this was edited outside bridle.
    pub fn stored_form(&self) -> Vec<u8> {
        // A record is plain data with string keys; serialising it cannot fail.
        serde_json::to_vec(self).unwrap_or_default()
    }

    /// Whether `line` is byte for byte what bridle stores for this record.
    pub fn is_stored_form(&self, line: &[u8]) -> bool {
        self.stored_data(line).is_some()
    }

    /// When `line` is byte for byte what bridle stores for this record: the bytes of its data
    /// (which are also the data's canonical bytes, so the hash needs no second serialisation).
    pub fn stored_data(&self, line: &[u8]) -> Option<Vec<u8>> {
        // The stored form is the derived serialisation of the fields in declaration order:
        // `{"seq":..,"time":..,"type":..,"data":..[,"ignorable":true],"hash":..}`.
        let data = serde_json::to_vec(&self.data).ok()?;
        let mut prefix = format!("{{\"seq\":{},\"time\":", self.seq).into_bytes();
        serde_json::to_writer(&mut prefix, &self.time).ok()?;
        prefix.extend_from_slice(b",\"type\":");
        serde_json::to_writer(&mut prefix, &self.kind).ok()?;
        prefix.extend_from_slice(b",\"data\":");
        let mut suffix = Vec::with_capacity(96);
        if self.ignorable {
            suffix.extend_from_slice(b",\"ignorable\":true");
        }
        suffix.extend_from_slice(b",\"hash\":");
        serde_json::to_writer(&mut suffix, &self.hash).ok()?;
        suffix.push(b'}');
        let whole = line.len() == prefix.len() + data.len() + suffix.len()
            && line.starts_with(&prefix)
            && line[prefix.len()..].starts_with(&data)
            && line.ends_with(&suffix);
        whole.then_some(data)
    }

    /// The bytes the chain hashes: the record without its hash, as JSON with sorted keys.
    pub fn canonical_body(&self) -> Vec<u8> {
        // Serialising plain data cannot fail.
        let data = serde_json::to_vec(&self.data).unwrap_or_default();
        self.body(&data).parts().concat()
    }

    /// [`Record::canonical_body`] in pieces around `data` (the data's canonical bytes).
    fn body<'a>(&'a self, data: &'a [u8]) -> Body<'a> {
        Body::new(data, self.ignorable, self.seq, &self.time, &self.kind)
    }

    /// Whether this record is the one that follows `prev` under `key`; returns its hash.
    pub fn check_link(&self, key: &LogKey, prev: &Hash) -> Result<Hash, String> {
        let data = serde_json::to_vec(&self.data).unwrap_or_default();
        self.check_link_with(key, prev, &data)
    }

    /// [`Record::check_link`] given the canonical bytes of the record's data.
    pub(crate) fn check_link_with(
        &self,
        key: &LogKey,
        prev: &Hash,
        data: &[u8],
    ) -> Result<Hash, String> {
        check_link(key, prev, &self.hash, &self.body(data))
    }

    /// The typed event; `None` for an ignorable event of a type this version does not know.
    pub fn event(&self) -> Result<Option<Event>, String> {
        self.clone().into_event()
    }

    /// [`Record::event`], consuming the record (its data is moved into the event, not copied).
    pub fn into_event(self) -> Result<Option<Event>, String> {
        if !known_kind(&self.kind, self.ignorable)? {
            return Ok(None);
        }
        event_from_value(&self.kind, self.data).map(Some)
    }
}

/// The event of type `kind` with `data`; the error says why the data does not fit the type.
pub(super) fn event_from_value(kind: &str, data: serde_json::Value) -> Result<Event, String> {
    let mut tagged = serde_json::Map::new();
    tagged.insert(
        "type".to_owned(),
        serde_json::Value::String(kind.to_owned()),
    );
    tagged.insert("data".to_owned(), data);
    serde_json::from_value(serde_json::Value::Object(tagged))
        .map_err(|e| format!("{kind} data: {e}"))
}

/// A record as a store reads it back, before it is verified.
#[derive(Debug)]
pub enum Scanned<'a> {
    /// Stored byte for byte as bridle writes it, taken apart without building a JSON value
    /// (the common case, and the fast one).
    Exact(RawRecord<'a>),
    /// Parsed into a record; with its data's canonical bytes when it is stored byte for byte
    /// as bridle writes it, `None` when it is not.
    Parsed(Record, Option<Vec<u8>>),
}

impl Scanned<'_> {
    /// The record's number as stored.
    pub fn seq(&self) -> u64 {
        match self {
            Self::Exact(raw) => raw.seq,
            Self::Parsed(record, _) => record.seq,
        }
    }

    /// The record, and whether it is stored byte for byte as bridle writes it.
    pub fn into_record(self) -> (Record, bool) {
        match self {
            Self::Exact(raw) => (raw.to_record(), true),
            Self::Parsed(record, data) => (record, data.is_some()),
        }
    }

    /// The typed event (see [`Record::into_event`]).
    pub fn into_event(self) -> Result<Option<Event>, String> {
        match self {
            Self::Exact(raw) => raw.event(&mut Vec::new()),
            Self::Parsed(record, _) => record.into_event(),
        }
    }
}

impl RawRecord<'_> {
    /// Whether this record is the one that follows `prev` under `key`; returns its hash.
    /// The data's bytes are its canonical bytes, hashed as they are.
    pub fn check_link(&self, key: &LogKey, prev: &Hash) -> Result<Hash, String> {
        let body = Body::new(
            self.data.as_bytes(),
            self.ignorable,
            self.seq,
            self.time,
            self.kind,
        );
        check_link(key, prev, self.hash, &body)
    }

    /// The typed event, parsed straight from the data's bytes (`buf` is scratch space);
    /// `None` for an ignorable event of a type this version does not know.
    pub fn event(&self, buf: &mut Vec<u8>) -> Result<Option<Event>, String> {
        if !known_kind(self.kind, self.ignorable)? {
            return Ok(None);
        }
        // Tag first, so serde reads the data once, straight into the variant.
        buf.clear();
        buf.extend_from_slice(b"{\"type\":");
        buf.extend_from_slice(quoted(self.kind).as_bytes());
        buf.extend_from_slice(b",\"data\":");
        buf.extend_from_slice(self.data.as_bytes());
        buf.push(b'}');
        match serde_json::from_slice(buf) {
            Ok(event) => Ok(Some(event)),
            // Said as the record's own parse says it (without positions in the scratch).
            Err(_) => self.to_record().into_event(),
        }
    }

    /// The record as stored, with its data as a JSON value.
    pub fn to_record(&self) -> Record {
        Record {
            seq: self.seq,
            time: self.time.to_owned(),
            kind: self.kind.to_owned(),
            // Canonical data is JSON.
            data: serde_json::from_str(self.data).unwrap_or_default(),
            ignorable: self.ignorable,
            hash: self.hash.to_owned(),
        }
    }
}

/// Whether events of type `kind` are read: `false` for an ignorable type this version does
/// not know, an error for one that is not ignorable.
fn known_kind(kind: &str, ignorable: bool) -> Result<bool, String> {
    if Event::is_known_kind(kind) {
        Ok(true)
    } else if ignorable {
        Ok(false)
    } else {
        Err(format!(
            "unknown event type {kind:?} (not marked ignorable)"
        ))
    }
}

/// The canonical body in pieces around `data` (the data's canonical bytes): the envelope's
/// keys in sorted order, then the data's own keys as stored: sorted when the record was made
/// (`split`), whether or not a crate in the build turned on serde_json's `preserve_order`
/// (the ACP SDK does), and kept in the line's order when read, so a line whose keys were
/// reordered no longer matches its hash.
struct Body<'a> {
    data: &'a [u8],
    ignorable: bool,
    /// The decimal digits of the number, right-aligned, and where they start.
    seq: ([u8; 20], usize),
    /// The time and the type as JSON strings without their quotes.
    time: Cow<'a, [u8]>,
    kind: Cow<'a, [u8]>,
}

impl<'a> Body<'a> {
    // Built for every event verified: nothing is allocated unless a string needs escapes.
    fn new(data: &'a [u8], ignorable: bool, seq: u64, time: &'a str, kind: &'a str) -> Self {
        let mut digits = [0u8; 20];
        let mut at = digits.len();
        let mut rest = seq;
        loop {
            at -= 1;
            // A digit: below 10.
            digits[at] = b'0' + u8::try_from(rest % 10).unwrap_or(0);
            rest /= 10;
            if rest == 0 {
                break;
            }
        }
        Self {
            data,
            ignorable,
            seq: (digits, at),
            time: quoted_inner(time),
            kind: quoted_inner(kind),
        }
    }

    fn parts(&self) -> [&[u8]; 9] {
        [
            b"{\"data\":",
            self.data,
            if self.ignorable {
                b",\"ignorable\":true,\"seq\":"
            } else {
                b",\"ignorable\":false,\"seq\":"
            },
            &self.seq.0[self.seq.1..],
            b",\"time\":\"",
            &self.time,
            b"\",\"type\":\"",
            &self.kind,
            b"\"}",
        ]
    }
}

/// Whether the record stored with hash `hash` and canonical body `body` follows `prev`.
fn check_link(key: &LogKey, prev: &Hash, hash: &str, body: &Body<'_>) -> Result<Hash, String> {
    let stored = chain::from_hex(hash)
        .ok_or_else(|| format!("hash {hash:?} is not 64 lower-case hex digits"))?;
    let [a, b, c, d, e, f, g, h, i] = body.parts();
    if stored == key.mac(&[prev, a, b, c, d, e, f, g, h, i]) {
        Ok(stored)
    } else {
        Err(
            "hash does not match its content and the event before it (edited, removed, \
             reordered or forged)"
                .to_owned(),
        )
    }
}

/// An event's `type` and `data` (its keys sorted, as every build of bridle stores them: see
/// `canonical_body`).
fn split(event: &Event) -> (String, serde_json::Value) {
    (event.kind().to_owned(), event.data())
}

/// Now, as RFC 3339 UTC with milliseconds.
pub fn now_rfc3339() -> String {
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    rfc3339(since)
}

/// `since` the Unix epoch as RFC 3339 UTC with milliseconds.
pub fn rfc3339(since: std::time::Duration) -> String {
    let secs = since.as_secs();
    let days = secs / 86_400;
    let rest = secs % 86_400;
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rest / 3600,
        rest / 60 % 60,
        rest % 60,
        since.subsec_millis()
    )
}

/// Days since 1970-01-01 to a proleptic Gregorian (year, month, day) (Howard Hinnant's
/// `civil_from_days`, for days after the epoch).
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn times_are_rfc3339_utc() {
        assert_eq!(rfc3339(Duration::ZERO), "1970-01-01T00:00:00.000Z");
        assert_eq!(
            rfc3339(Duration::from_millis(951_782_400_123)),
            "2000-02-29T00:00:00.123Z"
        );
        assert_eq!(
            rfc3339(Duration::from_secs(1_796_083_199)),
            "2026-11-30T23:59:59.000Z"
        );
    }

    #[test]
    fn a_record_survives_a_json_round_trip_with_its_hash_intact() {
        let dir = tempfile::tempdir().unwrap();
        let key = LogKey::load_or_create(dir.path()).unwrap();
        let prev = key.genesis("s");
        let event = Event::ToolCall(super::super::event::ToolCall {
            call_id: "c1".into(),
            name: "bash".into(),
            arguments: "{\"command\": \"ls\"}".into(),
        });
        let record = Record::seal(&key, &prev, 3, now_rfc3339(), &event);
        let line = serde_json::to_string(&record).unwrap();
        let back: Record = serde_json::from_str(&line).unwrap();
        assert_eq!(back, record);
        back.check_link(&key, &prev).unwrap();
        assert_eq!(back.event().unwrap(), Some(event));
        assert!(back.check_link(&key, &key.genesis("other")).is_err());
    }

    /// The borrowed canonical body is byte for byte what the hash of every stored log was
    /// computed over (a JSON object with sorted keys built from the record), and an event
    /// taken out of a record by move equals one taken by copy.
    #[test]
    fn the_canonical_body_is_unchanged_and_events_move_out_intact() {
        let dir = tempfile::tempdir().unwrap();
        let key = LogKey::load_or_create(dir.path()).unwrap();
        let event = Event::ToolResult {
            call_id: "c\"1".into(),
            ok: true,
            content: "tab\t, quote \", é, \u{1b}, \u{2028}\n".into(),
            sandbox: Some(serde_json::json!({"z": 1, "a": [true, null], "m": {"y": 2, "b": 3}})),
        };
        for ignorable in [false, true] {
            let mut record = Record::seal(&key, &key.genesis("s"), 7, now_rfc3339(), &event);
            record.ignorable = ignorable;
            let mut old = serde_json::json!({
                "seq": record.seq,
                "time": record.time,
                "type": record.kind,
                "data": record.data,
                "ignorable": record.ignorable,
            });
            // Sorted, as it was without serde_json's `preserve_order` (the ACP SDK turns it on).
            old.sort_all_objects();
            let old = serde_json::to_vec(&old).unwrap();
            assert_eq!(record.canonical_body(), old);
            assert!(record.is_stored_form(&serde_json::to_vec(&record).unwrap()));
            assert_eq!(
                record.event().unwrap(),
                record.clone().into_event().unwrap()
            );
        }
        let mut bad = Record::seal(&key, &key.genesis("s"), 1, now_rfc3339(), &event);
        bad.data = serde_json::json!({"call_id": 3});
        assert!(
            bad.into_event()
                .unwrap_err()
                .starts_with("tool/result data: ")
        );
    }

    #[test]
    fn unknown_types_fail_unless_ignorable() {
        let mut record = Record {
            seq: 1,
            time: now_rfc3339(),
            kind: "future/thing".into(),
            data: serde_json::json!({}),
            ignorable: false,
            hash: String::new(),
        };
        assert!(record.event().unwrap_err().contains("future/thing"));
        record.ignorable = true;
        assert_eq!(record.event().unwrap(), None);
    }

    /// The chain hashes sorted keys and the log stores them, whatever order serde_json keeps
    /// maps in (the ACP SDK turns on `preserve_order` in the bridle build): a log written by a
    /// build without it verifies and is canonical in one with it, and the other way round.
    #[test]
    fn the_hashed_and_stored_bytes_do_not_depend_on_map_order() {
        let dir = tempfile::tempdir().unwrap();
        let key = LogKey::load_or_create(dir.path()).unwrap();
        let prev = key.genesis("s");
        // Struct order is call_id, name, arguments: not sorted.
        let event = Event::ToolCall(super::super::event::ToolCall {
            call_id: "c1".into(),
            name: "bash".into(),
            arguments: "{}".into(),
        });
        let record = Record::seal(&key, &prev, 3, "t".into(), &event);
        let stored = String::from_utf8(record.stored_form()).unwrap();
        assert!(
            stored.contains(r#""data":{"arguments":"{}","call_id":"c1","name":"bash"}"#),
            "{stored}"
        );
        let body = String::from_utf8(record.canonical_body()).unwrap();
        assert!(body.starts_with(r#"{"data":{"arguments""#), "{body}");
        assert!(
            body.ends_with(r#""seq":3,"time":"t","type":"tool/call"}"#),
            "{body}"
        );
    }
}
