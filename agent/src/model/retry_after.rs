//! `Retry-After` (RFC 9110, section 10.2.3): a number of seconds, or an HTTP date. Dates are
//! read in the preferred IMF-fixdate form and in the two obsolete forms (RFC 850 and asctime)
//! that recipients must still accept.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// How long `value` asks a client to wait, as of `now`; `None` when it is neither form. A date
/// in the past asks for no wait.
pub fn retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) {
        return value.parse::<u64>().ok().map(Duration::from_secs);
    }
    let at = UNIX_EPOCH + Duration::from_secs(http_date(value, now)?);
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

const DAYS: [&str; 7] = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"];
const LONG_DAYS: [&str; 7] = [
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
    "Sunday",
];
const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

/// Seconds since the Unix epoch of an HTTP date (`now` places a two-digit RFC 850 year).
fn http_date(text: &str, now: SystemTime) -> Option<u64> {
    let words: Vec<&str> = text.split_ascii_whitespace().collect();
    match words.as_slice() {
        // IMF-fixdate: `Sun, 06 Nov 1994 08:49:37 GMT`
        [day, mday, month, year, time, "GMT"] if short_day(day.strip_suffix(',')?) => {
            let year = number(year, 4)?;
            seconds(year, month_number(month)?, number(mday, 2)?, time)
        }
        // RFC 850: `Sunday, 06-Nov-94 08:49:37 GMT`
        [day, date, time, "GMT"] if LONG_DAYS.contains(&day.strip_suffix(',')?) => {
            let mut parts = date.split('-');
            let (mday, month, year) = (parts.next()?, parts.next()?, parts.next()?);
            if parts.next().is_some() {
                return None;
            }
            let year = full_year(number(year, 2)?, now);
            seconds(year, month_number(month)?, number(mday, 2)?, time)
        }
        // asctime: `Sun Nov  6 08:49:37 1994`
        [day, month, mday, time, year] if short_day(day) => {
            let mday = if mday.len() == 1 {
                number(mday, 1)?
            } else {
                number(mday, 2)?
            };
            seconds(number(year, 4)?, month_number(month)?, mday, time)
        }
        _ => None,
    }
}

fn short_day(day: &str) -> bool {
    DAYS.contains(&day)
}

fn month_number(name: &str) -> Option<u64> {
    let index = MONTHS.iter().position(|m| *m == name)?;
    u64::try_from(index).ok().map(|i| i + 1)
}

/// Exactly `digits` ASCII digits.
fn number(text: &str, digits: usize) -> Option<u64> {
    (text.len() == digits && text.bytes().all(|b| b.is_ascii_digit()))
        .then(|| text.parse().ok())
        .flatten()
}

/// A two-digit year read as RFC 9110 asks: the year with those last digits that is not more
/// than 50 years in the future.
fn full_year(two: u64, now: SystemTime) -> u64 {
    let this_year = now
        .duration_since(UNIX_EPOCH)
        .map_or(1970, |d| year_of_day(d.as_secs() / 86_400));
    let mut year = this_year - this_year % 100 + two;
    if year > this_year + 50 {
        year -= 100;
    }
    year
}

/// `HH:MM:SS` on the given day, as seconds since the epoch.
fn seconds(year: u64, month: u64, mday: u64, time: &str) -> Option<u64> {
    let mut parts = time.split(':');
    let (h, m, s) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() {
        return None;
    }
    let (h, m, s) = (number(h, 2)?, number(m, 2)?, number(s, 2)?);
    if year < 1970 || h > 23 || m > 59 || s > 60 || mday == 0 || mday > month_days(year, month) {
        return None;
    }
    Some(days_from_civil(year, month, mday) * 86_400 + h * 3600 + m * 60 + s)
}

fn month_days(year: u64, month: u64) -> u64 {
    match month {
        2 if year.is_multiple_of(4) && (!year.is_multiple_of(100) || year.is_multiple_of(400)) => {
            29
        }
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days from 1970-01-01 to a proleptic Gregorian date on or after it (Howard Hinnant's
/// `days_from_civil`).
fn days_from_civil(year: u64, month: u64, day: u64) -> u64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y / 400;
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The year of a day counted from 1970-01-01.
fn year_of_day(days: u64) -> u64 {
    let mut year = 1970;
    while days_from_civil(year + 1, 1, 1) <= days {
        year += 1;
    }
    year
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 1994-11-06T08:49:37Z, the example date of RFC 9110.
    const EXAMPLE: u64 = 784_111_777;

    fn at(secs: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(secs)
    }

    #[test]
    fn seconds_and_all_three_date_forms_are_read() {
        let now = at(EXAMPLE - 30);
        for value in [
            "Sun, 06 Nov 1994 08:49:37 GMT",
            "Sunday, 06-Nov-94 08:49:37 GMT",
            "Sun Nov  6 08:49:37 1994",
            "30",
            " 30 ",
        ] {
            assert_eq!(
                retry_after(value, now),
                Some(Duration::from_secs(30)),
                "{value:?}"
            );
        }
    }

    #[test]
    fn a_date_in_the_past_asks_for_no_wait() {
        let now = at(EXAMPLE + 100);
        assert_eq!(
            retry_after("Sun, 06 Nov 1994 08:49:37 GMT", now),
            Some(Duration::ZERO)
        );
    }

    #[test]
    fn anything_else_is_not_a_retry_after() {
        let now = at(EXAMPLE);
        for value in [
            "",
            "-5",
            "1.5",
            "soon",
            "Sun, 06 Nov 1994 08:49:37 UTC",
            "Sun, 31 Feb 1994 08:49:37 GMT",
            "Sun, 06 Nov 1994 24:00:00 GMT",
            "Sun, 6 Nov 1994 08:49:37 GMT",
            "Sunday, 06-Nov-1994 08:49:37 GMT",
            "Sun, 06 Foo 1994 08:49:37 GMT",
            "Sun Nov 6 08:49 1994",
        ] {
            assert_eq!(retry_after(value, now), None, "{value:?}");
        }
    }

    #[test]
    fn dates_are_counted_from_the_epoch_correctly() {
        assert_eq!(http_date("Thu, 01 Jan 1970 00:00:00 GMT", at(0)), Some(0));
        assert_eq!(
            http_date("Tue, 29 Feb 2000 00:00:00 GMT", at(0)),
            Some(951_782_400)
        );
        assert_eq!(
            http_date("Sun, 06 Nov 1994 08:49:37 GMT", at(0)),
            Some(EXAMPLE)
        );
    }

    #[test]
    fn a_two_digit_year_is_never_more_than_50_years_ahead() {
        // In 2026, `94` is 1994 and `30` is 2030.
        let now = at(1_796_083_199);
        assert_eq!(full_year(94, now), 1994);
        assert_eq!(full_year(30, now), 2030);
        assert_eq!(full_year(76, now), 2076);
        assert_eq!(full_year(77, now), 1977);
    }
}
