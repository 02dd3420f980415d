//! Times and durations as an operator reads them: broker times (Unix milliseconds) in
//! RFC 3339, UTC, with milliseconds (`2023-11-14T22:13:20.000Z`), and durations in units
//! (`1h 2m 3.004s`, `250ms`). JSON output keeps the raw milliseconds beside them.

use solewriter::Millis;

/// `at` in RFC 3339, UTC, millisecond precision.
pub fn rfc3339(at: Millis) -> String {
    let ms = at.0;
    let days = ms / 86_400_000;
    let of_day = ms % 86_400_000;
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        of_day / 3_600_000,
        of_day / 60_000 % 60,
        of_day / 1000 % 60,
        of_day % 1000
    )
}

/// The proleptic Gregorian date `days` after 1970-01-01 (H. Hinnant's `civil_from_days`,
/// for non-negative days).
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z % 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

/// `ms` in units: `250ms`, `59.988s`, `2m 3.004s`, `1h 0m 0s`, `3d 4h 0m 0s`.
pub fn duration(ms: u64) -> String {
    if ms < 1000 {
        return format!("{ms}ms");
    }
    let seconds = match ms % 1000 {
        0 => format!("{}s", ms / 1000 % 60),
        frac => format!("{}.{frac:03}s", ms / 1000 % 60),
    };
    let (minutes, hours, days) = (ms / 60_000 % 60, ms / 3_600_000 % 24, ms / 86_400_000);
    match (days, hours, minutes) {
        (0, 0, 0) => seconds,
        (0, 0, m) => format!("{m}m {seconds}"),
        (0, h, m) => format!("{h}h {m}m {seconds}"),
        (d, h, m) => format!("{d}d {h}h {m}m {seconds}"),
    }
}

/// "in 1.5s (2023-…Z)" or "1.5s ago (2023-…Z)", relative to `now`.
pub fn relative(at: Millis, now: Millis) -> String {
    if at > now {
        format!("in {} ({})", duration(now.until(at)), rfc3339(at))
    } else {
        format!("{} ago ({})", duration(at.until(now)), rfc3339(at))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_of_known_instants() {
        assert_eq!(rfc3339(Millis(0)), "1970-01-01T00:00:00.000Z");
        assert_eq!(
            rfc3339(Millis(1_700_000_000_123)),
            "2023-11-14T22:13:20.123Z"
        );
        // A leap day, and the last millisecond of a leap year.
        assert_eq!(rfc3339(Millis(951_782_400_000)), "2000-02-29T00:00:00.000Z");
        assert_eq!(rfc3339(Millis(978_307_199_999)), "2000-12-31T23:59:59.999Z");
    }

    #[test]
    fn durations_in_units() {
        assert_eq!(duration(0), "0ms");
        assert_eq!(duration(999), "999ms");
        assert_eq!(duration(1000), "1s");
        assert_eq!(duration(59_988), "59.988s");
        assert_eq!(duration(123_004), "2m 3.004s");
        assert_eq!(duration(3_600_000), "1h 0m 0s");
        assert_eq!(duration(273_600_000 + 5), "3d 4h 0m 0.005s");
    }

    #[test]
    fn relative_says_which_side_of_now() {
        let now = Millis(1_700_000_000_000);
        assert_eq!(
            relative(Millis(1_700_000_001_500), now),
            "in 1.500s (2023-11-14T22:13:21.500Z)"
        );
        assert_eq!(
            relative(Millis(1_699_999_999_750), now),
            "250ms ago (2023-11-14T22:13:19.750Z)"
        );
    }
}
