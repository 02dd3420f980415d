//! The one ISO-8601 form solewriter reads and writes: what JavaScript's
//! `Date.prototype.toISOString()` prints for a time from 1970 to 9999,
//! `YYYY-MM-DDTHH:MM:SS.sssZ`. The Memory Core's JavaScript writer stores its times in it, its
//! producers stamp their watermarks with it, and its document format carries it. Anything else
//! is refused, never guessed: another offset, a missing fraction, a date before 1970, an
//! impossible day. [`format`] is [`parse`]'s inverse.

use crate::time::Millis;

/// `YYYY-MM-DDTHH:MM:SS.sssZ` as milliseconds since the Unix epoch; `None` for anything else.
pub fn parse(text: &str) -> Option<Millis> {
    let b = text.as_bytes();
    let punctuation = [
        (4, b'-'),
        (7, b'-'),
        (10, b'T'),
        (13, b':'),
        (16, b':'),
        (19, b'.'),
        (23, b'Z'),
    ];
    if b.len() != 24 || punctuation.iter().any(|&(at, c)| b[at] != c) {
        return None;
    }
    let num = |from: usize, to: usize| -> Option<u64> {
        let digits = &b[from..to];
        digits.iter().all(u8::is_ascii_digit).then(|| {
            digits
                .iter()
                .fold(0u64, |acc, d| acc * 10 + u64::from(d - b'0'))
        })
    };
    let (year, month, day) = (num(0, 4)?, num(5, 7)?, num(8, 10)?);
    let (hour, minute, second, milli) = (num(11, 13)?, num(14, 16)?, num(17, 19)?, num(20, 23)?);
    if year < 1970 || !(1..=12).contains(&month) || day < 1 || day > days_in_month(year, month) {
        return None;
    }
    if hour > 23 || minute > 59 || second > 59 {
        return None;
    }
    let days = days_since_epoch(year, month, day);
    Some(Millis(
        ((days * 24 + hour) * 60 + minute) * 60_000 + second * 1000 + milli,
    ))
}

/// The latest instant [`format`] prints: 9999-12-31T23:59:59.999Z.
pub const LATEST: Millis = Millis(253_402_300_799_999);

/// `at` as `YYYY-MM-DDTHH:MM:SS.sssZ` (what JavaScript's `toISOString()` prints); `None` past
/// [`LATEST`], where JavaScript switches to a six-digit signed year.
pub fn format(at: Millis) -> Option<String> {
    if at > LATEST {
        return None;
    }
    let (mut days, in_day) = (at.0 / 86_400_000, at.0 % 86_400_000);
    let mut year = 1970;
    while days >= year_days(year) {
        days -= year_days(year);
        year += 1;
    }
    let mut month = 1;
    while days >= days_in_month(year, month) {
        days -= days_in_month(year, month);
        month += 1;
    }
    let (hour, minute) = (in_day / 3_600_000, in_day / 60_000 % 60);
    let (second, milli) = (in_day / 1000 % 60, in_day % 1000);
    Some(format!(
        "{year:04}-{month:02}-{:02}T{hour:02}:{minute:02}:{second:02}.{milli:03}Z",
        days + 1
    ))
}

fn year_days(year: u64) -> u64 {
    if is_leap(year) {
        366
    } else {
        365
    }
}

fn is_leap(year: u64) -> bool {
    (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
}

fn days_in_month(year: u64, month: u64) -> u64 {
    match month {
        2 if is_leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days from 1970-01-01 to the given date (year ≥ 1970).
fn days_since_epoch(year: u64, month: u64, day: u64) -> u64 {
    let whole_years: u64 = (1970..year).map(year_days).sum();
    let whole_months: u64 = (1..month).map(|m| days_in_month(year, m)).sum();
    whole_years + whole_months + day - 1
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Known answers printed by Node (`Date.UTC(...)`, `Date.parse(...)`).
    #[test]
    fn matches_javascript() {
        for (text, ms) in [
            ("1970-01-01T00:00:00.000Z", 0),
            ("2026-07-16T12:05:00.000Z", 1_784_203_500_000),
            ("2024-02-29T23:59:59.999Z", 1_709_251_199_999),
            ("2000-03-01T00:00:00.001Z", 951_868_800_001),
        ] {
            assert_eq!(parse(text), Some(Millis(ms)), "{text}");
            assert_eq!(format(Millis(ms)).as_deref(), Some(text), "{ms}");
        }
        assert_eq!(format(LATEST).as_deref(), Some("9999-12-31T23:59:59.999Z"));
        assert_eq!(format(Millis(LATEST.0 + 1)), None);
    }

    /// `format` and `parse` are inverses at every day boundary of four centuries (leap days of
    /// 2000 and 2100 included) and at an instant inside each day.
    #[test]
    fn format_inverts_parse() {
        for day in (0..400 * 366).step_by(7) {
            for offset in [0, 1, 86_399_999, 45_296_789] {
                let at = Millis(day * 86_400_000 + offset);
                let text = format(at).unwrap();
                assert_eq!(parse(&text), Some(at), "{text}");
            }
        }
    }

    #[test]
    fn anything_else_is_refused() {
        for text in [
            "",
            "c",
            "2026-07-16T12:05:00Z",
            "2026-07-16T12:05:00.000+00:00",
            "2026-07-16 12:05:00.000Z",
            "2026-07-16T12:05:00.000z",
            "1969-12-31T23:59:59.999Z",
            "2026-02-29T00:00:00.000Z",
            "2100-02-29T00:00:00.000Z",
            "2026-13-01T00:00:00.000Z",
            "2026-00-01T00:00:00.000Z",
            "2026-04-31T00:00:00.000Z",
            "2026-04-00T00:00:00.000Z",
            "2026-04-01T24:00:00.000Z",
            "2026-04-01T00:60:00.000Z",
            "2026-04-01T00:00:60.000Z",
            "2026-04-01T00:00:0a.000Z",
            "+02026-04-01T00:00:00.000Z",
        ] {
            assert_eq!(parse(text), None, "{text}");
        }
        assert_eq!(
            parse("2000-02-29T00:00:00.000Z"),
            Some(Millis(951_782_400_000))
        );
    }
}
