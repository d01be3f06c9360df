//! Time as the kernel stores it (milliseconds since the Unix epoch) and shows it
//! (RFC 3339, UTC), plus the duration and time syntax users type.

use crate::error::{Error, Result};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The system's time now.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

pub fn fmt_ms(ms: i64) -> String {
    let t = UNIX_EPOCH + Duration::from_millis(ms.max(0) as u64);
    humantime::format_rfc3339_millis(t).to_string()
}

/// Reads `10m`, `1h 30m`, `250ms` (relative to `now`, ms since the epoch) or an
/// RFC 3339 time such as `2026-11-22T10:00:00Z`, and returns milliseconds since
/// the epoch.
pub fn parse_when(s: &str, what: &str, now: i64) -> Result<i64> {
    let s = s.trim();
    if let Ok(d) = humantime::parse_duration(s) {
        return Ok(now + d.as_millis() as i64);
    }
    if let Ok(t) = humantime::parse_rfc3339_weak(s) {
        return Ok(t
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or(0));
    }
    Err(Error::invalid(format!(
        "cannot read {what} {s:?}: give a duration such as \"10m\" or \"1h 30m\", or a time such as \
         \"2026-11-22T10:00:00Z\""
    )))
}

/// Longer than any limit a duration may be given for: refused when read, so no
/// caller's arithmetic on milliseconds can overflow.
pub const MAX_DURATION: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

/// Reads a duration such as `30m` or `2h`.
pub fn parse_duration(s: &str, what: &str) -> Result<Duration> {
    let d = humantime::parse_duration(s.trim()).map_err(|e| {
        Error::invalid(format!(
            "cannot read {what} {s:?} ({e}): give a duration such as \"30m\", \"2h\" or \"7d\""
        ))
    })?;
    if d > MAX_DURATION {
        return Err(Error::invalid(format!(
            "{what} {s:?} is longer than a hundred years: give a duration such as \"30m\", \"2h\" or \"7d\""
        )));
    }
    Ok(d)
}

/// A limit an operator sets in the environment variable `name`: seconds (`10`) or
/// a duration (`2s`, `500ms`), kept within `range`; unset gives `default`, and a
/// value that does not read gives `default` with a warning naming the variable.
pub fn env_duration(
    name: &str,
    default: Duration,
    range: std::ops::RangeInclusive<Duration>,
) -> Duration {
    let Some(v) = std::env::var(name).ok().filter(|v| !v.trim().is_empty()) else {
        return default;
    };
    let t = v.trim();
    let read = humantime::parse_duration(t)
        .ok()
        .or_else(|| t.parse::<u64>().ok().map(Duration::from_secs));
    match read {
        Some(d) => d.clamp(*range.start(), *range.end()),
        None => {
            tracing::warn!(
                "{name}={v:?} is not a duration (say 10 or 10s); using {} s",
                secs(default)
            );
            default
        }
    }
}

/// A duration in seconds as said to a person: `2`, `0.5`.
pub fn secs(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s.fract() == 0.0 {
        format!("{}", s as u64)
    } else {
        format!("{s:.1}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_from_the_environment() {
        let (d, r) = (
            Duration::from_secs(10),
            Duration::from_millis(300)..=Duration::from_secs(60),
        );
        let with = |v: &str| {
            // SAFETY (test): this variable is read by this test alone.
            unsafe { std::env::set_var("AW_TEST_CLOCK_LIMIT", v) };
            env_duration("AW_TEST_CLOCK_LIMIT", d, r.clone())
        };
        assert_eq!(with("2"), Duration::from_secs(2));
        assert_eq!(with("500ms"), Duration::from_millis(500));
        assert_eq!(
            with("1ms"),
            Duration::from_millis(300),
            "kept within the range"
        );
        assert_eq!(with("2h"), Duration::from_secs(60));
        assert_eq!(with("soon"), d);
        assert_eq!(with(" "), d);
        assert_eq!(secs(Duration::from_millis(2500)), "2.5");
        assert_eq!(secs(Duration::from_secs(10)), "10");
    }

    #[test]
    fn when() {
        let now = 1_000_000;
        assert_eq!(parse_when("10m", "until", now).unwrap(), now + 600_000);
        assert_eq!(parse_when(" 250ms ", "until", now).unwrap(), now + 250);
        assert_eq!(
            parse_when("1970-01-01T00:00:01Z", "until", now).unwrap(),
            1000,
            "a time is not relative to now"
        );
        assert!(parse_when("soon", "until", now).is_err());
        assert_eq!(fmt_ms(1000), "1970-01-01T00:00:01.000Z");
    }
}
