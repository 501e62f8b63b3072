//! RFC 3339 timestamps (`2024-05-01T12:00:00Z`), as `metav1.Time` serializes them.

use std::time::{SystemTime, UNIX_EPOCH};

/// The current time, to the second, in UTC.
pub fn now_rfc3339() -> String {
    let secs = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    format_unix(secs)
}

/// `secs` since the Unix epoch as `YYYY-MM-DDTHH:MM:SSZ`.
pub(crate) fn format_unix(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let (y, m, d) = civil_from_days(days);
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z", rem / 3600, rem / 60 % 60, rem % 60)
}

/// Seconds since the Unix epoch of an RFC 3339 timestamp as `metav1.Time` (and `MicroTime`)
/// serialize them: `YYYY-MM-DDTHH:MM:SS`, optional fractional seconds (dropped: the protobuf
/// `Time` simcluster serves carries seconds), then `Z` or a `±HH:MM` offset. `None` if `s` is
/// not one (as Go's `time.Parse(time.RFC3339, …)` refuses it).
pub(crate) fn parse_rfc3339(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    let shape = b.len() >= 20
        && b[4] == b'-'
        && b[7] == b'-'
        && matches!(b[10], b'T' | b't')
        && b[13] == b':'
        && b[16] == b':';
    if !shape {
        return None;
    }
    let (y, mo, d) = (digits(&b[0..4])?, digits(&b[5..7])?, digits(&b[8..10])?);
    let (h, mi, sec) = (digits(&b[11..13])?, digits(&b[14..16])?, digits(&b[17..19])?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || sec > 59 {
        return None;
    }
    let days = days_from_civil(y, mo as u32, d as u32);
    // Refuses days past the month's end (2024-02-30): they would not round-trip.
    if civil_from_days(days) != (y, mo as u32, d as u32) {
        return None;
    }
    let mut rest = &b[19..];
    if let Some(frac) = rest.strip_prefix(b".") {
        let n = frac.iter().take_while(|c| c.is_ascii_digit()).count();
        if n == 0 {
            return None;
        }
        rest = &frac[n..];
    }
    let offset = match rest {
        [b'Z' | b'z'] => 0,
        [sign @ (b'+' | b'-'), hh @ .., b':', m1, m2] if hh.len() == 2 => {
            let (oh, om) = (digits(hh)?, digits(&[*m1, *m2])?);
            if oh > 23 || om > 59 {
                return None;
            }
            let o = oh * 3600 + om * 60;
            if *sign == b'-' { -o } else { o }
        }
        _ => return None,
    };
    Some(days * 86_400 + h * 3600 + mi * 60 + sec - offset)
}

/// The decimal number `b` spells (ASCII digits only).
fn digits(b: &[u8]) -> Option<i64> {
    b.iter().try_fold(0i64, |n, &c| c.is_ascii_digit().then(|| n * 10 + i64::from(c - b'0')))
}

/// Howard Hinnant's `days_from_civil`: (year, month, day) → days since 1970-01-01.
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = i64::from(if m > 2 { m - 3 } else { m + 9 });
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Howard Hinnant's `civil_from_days`: days since 1970-01-01 → (year, month, day).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format_unix_should_match_known_dates() {
        assert_eq!(format_unix(0), "1970-01-01T00:00:00Z");
        assert_eq!(format_unix(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(format_unix(1_714_564_800 + 3_661), "2024-05-01T13:01:01Z");
    }

    #[test]
    fn parse_rfc3339_should_invert_format_unix_and_honour_offsets() {
        for secs in [0, 951_782_400, 1_714_564_800 + 3_661, 4_102_444_799] {
            assert_eq!(parse_rfc3339(&format_unix(secs)), Some(secs as i64), "{secs}");
        }
        let t = 1_714_564_800 + 3_661;
        assert_eq!(parse_rfc3339("2024-05-01T13:01:01.123456Z"), Some(t));
        assert_eq!(parse_rfc3339("2024-05-01T14:31:01+01:30"), Some(t));
        assert_eq!(parse_rfc3339("2024-05-01T08:01:01-05:00"), Some(t));
        assert_eq!(parse_rfc3339("1969-12-31T23:59:59Z"), Some(-1));
        for bad in [
            "",
            "2024-05-01",
            "2024-05-01 13:01:01Z",
            "2024-05-01T13:01:01",
            "2024-02-30T00:00:00Z",
            "2024-13-01T00:00:00Z",
            "2024-05-01T24:00:00Z",
            "2024-05-01T13:01:01.Z",
            "2024-05-01T13:01:01+0100",
            "2024-05-01T13:01:01Zjunk",
            "2024-05-0xT13:01:01Z",
        ] {
            assert_eq!(parse_rfc3339(bad), None, "{bad:?}");
        }
    }
}
