//! Time as the kernel stores it (milliseconds since the Unix epoch) and shows it
//! (RFC 3339, UTC), plus the duration and time syntax users type.

use crate::error::{Error, Result};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

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

/// Reads `10m`, `1h 30m`, `250ms` (relative to now) or an RFC 3339 time such as
/// `2026-11-22T10:00:00Z`, and returns milliseconds since the epoch.
pub fn parse_when(s: &str, what: &str) -> Result<i64> {
    let s = s.trim();
    if let Ok(d) = humantime::parse_duration(s) {
        return Ok(now_ms() + d.as_millis() as i64);
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

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn when() {
        let now = now_ms();
        let t = parse_when("10m", "until").unwrap();
        assert!((t - now - 600_000).abs() < 1000);
        assert_eq!(parse_when("1970-01-01T00:00:01Z", "until").unwrap(), 1000);
        assert!(parse_when("soon", "until").is_err());
        assert_eq!(fmt_ms(1000), "1970-01-01T00:00:01.000Z");
    }
}
