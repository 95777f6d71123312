//! Human-friendly quantities in profiles: byte sizes (`512MiB`), durations (`90s`, `5m`) and
//! `unlimited`.

use std::fmt;

use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize};

/// A limit that may be lifted: `None` means unlimited.
pub type Limit = Option<u64>;

/// A byte count read from `4096`, `"512KiB"`, `"64MiB"`, `"2GiB"` or `"unlimited"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ByteSize(pub Limit);

/// A duration in whole seconds read from `30`, `"30s"`, `"5m"`, `"1h"` or `"unlimited"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Seconds(pub Limit);

/// A plain count read from `512` or `"unlimited"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Count(pub Limit);

fn parse_with_suffix(text: &str, suffixes: &[(&str, u64)], what: &str) -> Result<Limit, String> {
    let trimmed = text.trim();
    if trimmed == "unlimited" {
        return Ok(None);
    }
    let split = trimmed
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(trimmed.len());
    let (digits, suffix) = trimmed.split_at(split);
    let suffix = suffix.trim();
    if digits.is_empty() {
        return Err(format!("`{text}` is not a {what}"));
    }
    let number: u64 = digits
        .parse()
        .map_err(|_| format!("`{text}` is too large for a {what}"))?;
    let multiplier = suffixes
        .iter()
        .find(|(name, _)| *name == suffix)
        .map(|(_, m)| *m)
        .ok_or_else(|| {
            let names: Vec<&str> = suffixes
                .iter()
                .map(|(n, _)| *n)
                .filter(|n| !n.is_empty())
                .collect();
            format!(
                "`{text}`: unknown unit `{suffix}` for a {what} (use one of: {})",
                names.join(", ")
            )
        })?;
    number
        .checked_mul(multiplier)
        .map(Some)
        .ok_or_else(|| format!("`{text}` is too large for a {what}"))
}

const BYTE_UNITS: &[(&str, u64)] = &[
    ("", 1),
    ("B", 1),
    ("KiB", 1 << 10),
    ("MiB", 1 << 20),
    ("GiB", 1 << 30),
    ("TiB", 1 << 40),
];
const TIME_UNITS: &[(&str, u64)] = &[("", 1), ("s", 1), ("m", 60), ("h", 3600)];
const COUNT_UNITS: &[(&str, u64)] = &[("", 1)];

/// Parses a byte size such as `64MiB`.
pub fn parse_bytes(text: &str) -> Result<Limit, String> {
    parse_with_suffix(text, BYTE_UNITS, "byte size")
}

/// Parses a duration such as `90s` or `5m`.
pub fn parse_seconds(text: &str) -> Result<Limit, String> {
    parse_with_suffix(text, TIME_UNITS, "duration")
}

/// Formats a byte limit the way profiles spell it.
pub fn format_bytes(limit: Limit) -> String {
    match limit {
        None => "unlimited".to_owned(),
        Some(n) => {
            for (name, m) in BYTE_UNITS.iter().rev() {
                if *m > 1 && n >= *m && n % *m == 0 {
                    return format!("{}{name}", n / m);
                }
            }
            n.to_string()
        }
    }
}

/// Formats a duration limit the way profiles spell it.
pub fn format_seconds(limit: Limit) -> String {
    match limit {
        None => "unlimited".to_owned(),
        Some(n) => format!("{n}s"),
    }
}

/// Formats a count limit.
pub fn format_count(limit: Limit) -> String {
    match limit {
        None => "unlimited".to_owned(),
        Some(n) => n.to_string(),
    }
}

struct LimitVisitor {
    units: &'static [(&'static str, u64)],
    what: &'static str,
}

impl Visitor<'_> for LimitVisitor {
    type Value = Limit;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "a {} (a whole number, a number with a unit, or `unlimited`)",
            self.what
        )
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Limit, E> {
        Ok(Some(v))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Limit, E> {
        u64::try_from(v)
            .map(Some)
            .map_err(|_| E::custom(format!("a {} cannot be negative (got {v})", self.what)))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Limit, E> {
        parse_with_suffix(v, self.units, self.what).map_err(E::custom)
    }
}

macro_rules! limit_type {
    ($ty:ident, $units:expr, $what:literal) => {
        impl<'de> Deserialize<'de> for $ty {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                d.deserialize_any(LimitVisitor {
                    units: $units,
                    what: $what,
                })
                .map($ty)
            }
        }
    };
}

limit_type!(ByteSize, BYTE_UNITS, "byte size");
limit_type!(Seconds, TIME_UNITS, "duration");
limit_type!(Count, COUNT_UNITS, "count");

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_sizes_accept_binary_units() {
        assert_eq!(parse_bytes("4096"), Ok(Some(4096)));
        assert_eq!(parse_bytes("64MiB"), Ok(Some(64 << 20)));
        assert_eq!(parse_bytes("2 GiB"), Ok(Some(2 << 30)));
        assert_eq!(parse_bytes("unlimited"), Ok(None));
    }

    #[test]
    fn byte_sizes_reject_unknown_units_naming_the_input() {
        let err = parse_bytes("5MB").unwrap_err();
        assert!(err.contains("`5MB`") && err.contains("MiB"), "{err}");
        assert!(parse_bytes("lots").is_err());
        assert!(parse_bytes("99999999999999999999").is_err());
        assert!(parse_bytes("18446744073709551615TiB").is_err());
    }

    #[test]
    fn durations_accept_seconds_minutes_hours() {
        assert_eq!(parse_seconds("90"), Ok(Some(90)));
        assert_eq!(parse_seconds("5m"), Ok(Some(300)));
        assert_eq!(parse_seconds("1h"), Ok(Some(3600)));
    }

    #[test]
    fn formatting_round_trips() {
        for text in ["512MiB", "3GiB", "1000", "unlimited"] {
            assert_eq!(format_bytes(parse_bytes(text).unwrap()), text);
        }
    }
}
