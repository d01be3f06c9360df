//! Schedule triggers as users write them (pure: no store, no clock of its own).
//!
//! `every` is an interval counted from when the agent was last idle; `cron` is five
//! fields (minute hour day-of-month month day-of-week) in the kernel's local time,
//! parsed strictly by croner: no seconds field, no year field, steps must have a
//! range. A bare number is milliseconds, as in the original's `wakeup: 60000`.

use chrono::{Local, TimeZone};
use croner::Cron;
use croner::parser::{CronParser, Seconds, Year};
use std::time::Duration;

/// The shortest interval accepted: anything faster is a busy loop, not a schedule.
pub const MIN_EVERY: Duration = Duration::from_secs(1);
/// The longest: a year (for longer, cron says it better), and the fire times stay
/// far from any overflow.
pub const MAX_EVERY: Duration = Duration::from_secs(366 * 24 * 3600);

#[derive(Debug, Clone)]
pub enum Trigger {
    Every(Duration),
    Cron { pattern: String, cron: Box<Cron> },
}

impl Trigger {
    /// Reads an interval.
    pub fn every(s: &str) -> Result<Self, String> {
        let s = s.trim();
        let d = match s.parse::<u64>() {
            Ok(ms) => Duration::from_millis(ms),
            Err(_) => humantime::parse_duration(s).map_err(|e| {
                format!("cannot read the interval {s:?} ({e}): write one such as \"30s\", \"15m\" or \"2h\"")
            })?,
        };
        if d < MIN_EVERY {
            return Err(format!(
                "the interval {s:?} is shorter than 1s: use at least \"1s\""
            ));
        }
        if d > MAX_EVERY {
            return Err(format!(
                "the interval {s:?} is longer than a year: use a cron pattern for rare runs, e.g. \"0 9 1 1 *\""
            ));
        }
        Ok(Self::Every(d))
    }

    /// Reads a five-field cron pattern.
    pub fn cron(s: &str) -> Result<Self, String> {
        let pattern = s.split_whitespace().collect::<Vec<_>>().join(" ");
        let fields = pattern.split(' ').filter(|f| !f.is_empty()).count();
        if fields != 5 && !pattern.starts_with('@') {
            return Err(format!(
                "the cron pattern {s:?} has {fields} fields; write five: minute hour day-of-month month \
                 day-of-week, e.g. \"0 9 * * 1-5\" (09:00 on weekdays)"
            ));
        }
        let parser = CronParser::builder()
            .seconds(Seconds::Disallowed)
            .year(Year::Disallowed)
            .build();
        let cron = parser.parse(&pattern).map_err(|e| {
            format!(
                "cannot read the cron pattern {s:?}: {e}. Fields: minute (0-59) hour (0-23) day-of-month \
                 (1-31) month (1-12) day-of-week (0-6, 0 = Sunday), e.g. \"*/15 * * * *\""
            )
        })?;
        Ok(Self::Cron {
            pattern,
            cron: Box::new(cron),
        })
    }

    /// Reads a YAML `wakeup`: an interval if it reads as one, else a cron pattern.
    pub fn wakeup(s: &str) -> Result<Self, String> {
        let t = s.trim();
        let looks_like_interval = t.chars().next().is_some_and(|c| c.is_ascii_digit())
            && !t.contains(char::is_whitespace)
            || humantime::parse_duration(t).is_ok();
        if looks_like_interval && !t.contains('*') {
            Self::every(t)
        } else {
            Self::cron(t)
        }
    }

    /// The next fire strictly after `after_ms` (ms since the epoch).
    pub fn next_after(&self, after_ms: i64) -> Option<i64> {
        match self {
            Self::Every(d) => Some(after_ms + d.as_millis() as i64),
            Self::Cron { cron, .. } => {
                let from = Local.timestamp_millis_opt(after_ms).single()?;
                let next = cron.find_next_occurrence(&from, false).ok()?;
                Some(next.timestamp_millis())
            }
        }
    }

    /// "every" or "cron".
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Every(_) => "every",
            Self::Cron { .. } => "cron",
        }
    }

    /// The text that reads back as this trigger.
    pub fn spec(&self) -> String {
        match self {
            Self::Every(d) => humantime::format_duration(*d).to_string(),
            Self::Cron { pattern, .. } => pattern.clone(),
        }
    }

    /// Reads a stored (kind, spec) pair back.
    pub fn stored(kind: &str, spec: &str) -> Result<Self, String> {
        match kind {
            "every" => Self::every(spec),
            _ => Self::cron(spec),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::NaiveDate;

    fn local(y: i32, mo: u32, d: u32, h: u32, mi: u32) -> i64 {
        let naive = NaiveDate::from_ymd_opt(y, mo, d)
            .unwrap()
            .and_hms_opt(h, mi, 0)
            .unwrap();
        Local
            .from_local_datetime(&naive)
            .single()
            .unwrap()
            .timestamp_millis()
    }

    #[test]
    fn intervals() {
        assert!(
            matches!(Trigger::every("30s"), Ok(Trigger::Every(d)) if d == Duration::from_secs(30))
        );
        assert!(
            matches!(Trigger::every("60000"), Ok(Trigger::Every(d)) if d == Duration::from_secs(60))
        );
        assert!(
            matches!(Trigger::every("1h 30m"), Ok(Trigger::Every(d)) if d == Duration::from_secs(5400))
        );
        assert!(Trigger::every("500ms").unwrap_err().contains("at least"));
        assert!(Trigger::every("soon").unwrap_err().contains("30s"));
        assert_eq!(
            Trigger::every("2m").unwrap().next_after(1000),
            Some(121_000)
        );
    }

    #[test]
    fn cron_on_fixed_dates() {
        // Sunday 2026-11-22 08:15 local.
        let t0 = local(2026, 11, 22, 8, 15);
        let next = |p: &str, from: i64| Trigger::cron(p).unwrap().next_after(from).unwrap();
        assert_eq!(next("*/15 * * * *", t0), local(2026, 11, 22, 8, 30));
        assert_eq!(next("0 9 * * *", t0), local(2026, 11, 22, 9, 0));
        // Weekdays only: the next is Monday.
        assert_eq!(next("0 9 * * 1-5", t0), local(2026, 11, 23, 9, 0));
        // Strictly after: a time on the pattern moves to the next one.
        assert_eq!(
            next("30 8 * * *", local(2026, 11, 22, 8, 30)),
            local(2026, 11, 23, 8, 30)
        );
        // Lists and month ends.
        assert_eq!(next("0 0 1 1,7 *", t0), local(2027, 1, 1, 0, 0));
        assert_eq!(next("0 12 29 2 *", t0), local(2028, 2, 29, 12, 0));
        // Day-of-month OR day-of-week (POSIX): the 1st, or any Friday.
        assert_eq!(next("0 0 1 * 5", t0), local(2026, 11, 27, 0, 0));
        assert_eq!(Trigger::cron("0  9 * *   *").unwrap().spec(), "0 9 * * *");
    }

    #[test]
    fn strict_cron() {
        for bad in [
            "* * * *",
            "0 * * * * *",
            "61 * * * *",
            "* 24 * * *",
            "* * 32 * *",
            "* * * 13 *",
            "* * * * 8",
            "*/0 * * * *",
            "a b c d e",
        ] {
            assert!(Trigger::cron(bad).is_err(), "{bad} should be refused");
        }
        let e = Trigger::cron("* * * *").unwrap_err();
        assert!(e.contains("4 fields") && e.contains("five"), "{e}");
    }

    #[test]
    fn wakeup_reads_either() {
        assert_eq!(Trigger::wakeup("5m").unwrap().kind(), "every");
        assert_eq!(Trigger::wakeup("30000").unwrap().kind(), "every");
        assert_eq!(Trigger::wakeup("0 9 * * *").unwrap().kind(), "cron");
        assert_eq!(Trigger::wakeup("*/5 * * * *").unwrap().kind(), "cron");
        assert!(Trigger::wakeup("every day").is_err());
    }
}
