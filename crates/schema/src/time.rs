//! RFC 3339 timestamps as Go's `time.Parse(time.RFC3339, ...)` reads them and `metav1.Time`
//! writes them (UTC, whole seconds), without a date-time dependency.

use crate::formats::{days_in_month, parse_date};

/// Days since 1970-01-01 of a civil date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let m = i64::from(m);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = if z >= 0 { z } else { z - 146_096 } / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// Parses `2006-01-02T15:04:05[.frac](Z|±07:00)` into Unix seconds (fractions dropped).
pub(crate) fn parse_rfc3339(s: &str) -> Option<i64> {
    if s.len() < 20 || !s.is_char_boundary(10) {
        return None;
    }
    let (year, month, day) = parse_date(&s[..10])?;
    debug_assert!(day <= days_in_month(year, month));
    let rest = s[10..].strip_prefix('T')?;
    let b = rest.as_bytes();
    if b.len() < 9 || b[2] != b':' || b[5] != b':' {
        return None;
    }
    let two = |i: usize| -> Option<i64> {
        let x = &rest[i..i + 2];
        if x.bytes().all(|c| c.is_ascii_digit()) {
            x.parse().ok()
        } else {
            None
        }
    };
    let (hh, mm, ss) = (two(0)?, two(3)?, two(6)?);
    if hh > 23 || mm > 59 || ss > 59 {
        return None;
    }
    let mut tail = &rest[8..];
    if let Some(frac) = tail.strip_prefix('.') {
        let n = frac.bytes().take_while(u8::is_ascii_digit).count();
        if n == 0 {
            return None;
        }
        tail = &frac[n..];
    }
    let offset = if tail == "Z" {
        0
    } else {
        let tb = tail.as_bytes();
        if tb.len() != 6 || !(tb[0] == b'+' || tb[0] == b'-') || tb[3] != b':' {
            return None;
        }
        let oh: i64 = tail[1..3].parse().ok()?;
        let om: i64 = tail[4..6].parse().ok()?;
        if oh > 23 || om > 59 {
            return None;
        }
        let o = oh * 3600 + om * 60;
        if tb[0] == b'-' { -o } else { o }
    };
    Some(days_from_civil(year, month, day) * 86_400 + hh * 3600 + mm * 60 + ss - offset)
}

/// `metav1.Time`'s JSON form: UTC, whole seconds, `Z`.
pub(crate) fn format_rfc3339_utc(unix: i64) -> String {
    let days = unix.div_euclid(86_400);
    let secs = unix.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        secs / 3600,
        secs % 3600 / 60,
        secs % 60
    )
}

/// The current time in Unix seconds.
pub(crate) fn now_unix() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        assert_eq!(parse_rfc3339("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(parse_rfc3339("2024-01-02T03:04:05Z"), Some(1_704_164_645));
        assert_eq!(
            parse_rfc3339("2024-01-02T04:04:05.999+01:00"),
            Some(1_704_164_645)
        );
        assert_eq!(format_rfc3339_utc(1_704_164_645), "2024-01-02T03:04:05Z");
        assert_eq!(format_rfc3339_utc(-1), "1969-12-31T23:59:59Z");
        assert_eq!(parse_rfc3339("2024-01-02 03:04:05Z"), None);
        assert_eq!(parse_rfc3339("2024-02-30T03:04:05Z"), None);
        assert_eq!(parse_rfc3339("2024-01-02T03:04:05"), None);
    }
}
