//! UTC timestamps in RFC 3339 (`2026-12-02T13:05:01.123Z`), written and read without a
//! calendar crate: days from the civil date with Howard Hinnant's algorithm.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// `at` as RFC 3339 in UTC with milliseconds.
pub fn format(at: SystemTime) -> String {
    let since = at.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = since.as_secs() as i64;
    let (days, rest) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60,
        since.subsec_millis()
    )
}

/// The same stamp, compact, for file names: `20261202T130501Z`.
pub fn compact(at: SystemTime) -> String {
    let full = format(at);
    let mut out: String = full[..19]
        .chars()
        .filter(|c| *c != '-' && *c != ':')
        .collect();
    out.push('Z');
    out
}

/// Parses `YYYY-MM-DD`, `YYYY-MM-DDTHH:MM[:SS[.fff]]` with `Z` or `+HH:MM`/`-HH:MM`, or a
/// space instead of `T`. `None` when it is not such a time.
pub fn parse(text: &str) -> Option<SystemTime> {
    let text = text.trim();
    let date = text.get(..10)?;
    let mut parts = date.split('-');
    let y: i64 = parts.next()?.parse().ok()?;
    let m: u32 = parts.next()?.parse().ok()?;
    let d: u32 = parts.next()?.parse().ok()?;
    if date.as_bytes()[4] != b'-' || !(1..=12).contains(&m) || !(1..=31).contains(&d) {
        return None;
    }
    let mut secs = days_from_civil(y, m, d) * 86_400;
    let mut nanos = 0u32;
    let rest = &text[10..];
    if !rest.is_empty() {
        let rest = rest.strip_prefix(['T', ' '])?;
        let (clock, offset) = split_offset(rest)?;
        let mut fields = clock.split(':');
        let h: i64 = fields.next()?.parse().ok()?;
        let min: i64 = fields.next()?.parse().ok()?;
        let (s, frac) = match fields.next() {
            Some(s) => match s.split_once('.') {
                Some((s, f)) => (s.parse::<i64>().ok()?, f),
                None => (s.parse().ok()?, ""),
            },
            None => (0, ""),
        };
        if fields.next().is_some() || h > 23 || min > 59 || s > 60 {
            return None;
        }
        if !frac.is_empty() {
            let digits: String = frac.chars().take(9).collect();
            let scale = 10u32.pow(9 - digits.len() as u32);
            nanos = digits.parse::<u32>().ok()? * scale;
        }
        secs += h * 3600 + min * 60 + s - offset;
    }
    let secs = u64::try_from(secs).ok()?;
    Some(UNIX_EPOCH + Duration::new(secs, nanos))
}

/// The clock part and the offset east of UTC in seconds.
fn split_offset(rest: &str) -> Option<(&str, i64)> {
    if let Some(clock) = rest.strip_suffix(['Z', 'z']) {
        return Some((clock, 0));
    }
    match rest.rfind(['+', '-']) {
        Some(at) => {
            let (clock, zone) = rest.split_at(at);
            let sign = if zone.starts_with('-') { -1 } else { 1 };
            let (h, m) = zone[1..].split_once(':')?;
            let offset = h.parse::<i64>().ok()? * 3600 + m.parse::<i64>().ok()? * 60;
            Some((clock, sign * offset))
        }
        None => Some((rest, 0)),
    }
}

fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m as i64 + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d as i64 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_and_parses_known_instants() {
        // 2026-12-02T13:05:01.123Z is 1796216701.123 s after the epoch.
        let at = UNIX_EPOCH + Duration::from_millis(1_796_216_701_123);
        assert_eq!(format(at), "2026-12-02T13:05:01.123Z");
        assert_eq!(compact(at), "20261202T130501Z");
        assert_eq!(parse("2026-12-02T13:05:01.123Z"), Some(at));
        assert_eq!(parse("2026-12-02T14:05:01.123+01:00"), Some(at));
        assert_eq!(
            parse("2026-12-02"),
            Some(UNIX_EPOCH + Duration::from_secs(1_796_169_600))
        );
        assert_eq!(format(UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
        assert_eq!(
            format(parse("2024-02-29T23:59:59Z").unwrap()),
            "2024-02-29T23:59:59.000Z"
        );
        for bad in [
            "",
            "yesterday",
            "2026-13-01",
            "2026-12-02T25:00",
            "2026/12/02",
        ] {
            assert_eq!(parse(bad), None, "{bad}");
        }
    }
}
