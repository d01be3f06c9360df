//! The kernel's time, injected: the clock every room reads and the delays the
//! scheduler keeps. Production uses the system clock and the delays below; a test
//! gives a manual clock it moves itself, and shorter delays.
//!
//! The clock decides when the kernel acts (schedules' next fire, retries,
//! automatic resumes, the gate's look at the inbox, deadlines of approvals and
//! proposals, a deferred delivery's time) and stamps what the store records (when
//! a message was sent, a contract put, a token minted), so a test on a manual
//! clock sees one time everywhere. This file is the one place in the kernel that
//! reads the system's time (`tests/tidy_clock.rs`): a function inside a store job
//! takes `now` from its caller, who read this clock.
//!
//! A test that launches the real binary sets the retry backoff through the
//! environment: `AGENT_WORKER_RETRY_DELAYS_MS` (`100,200,400`).

use domain::clock;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;
use tokio::sync::Notify;

/// How a kernel runs besides its store: the clock it reads, the delays it keeps
/// and the binary its workers run.
pub struct Setup {
    pub clock: Clock,
    pub timing: Timing,
    pub worker_exe: PathBuf,
    /// The labels this node offers (`--labels`): agents that ask for labels are
    /// placed only on nodes with all of them.
    pub labels: Vec<String>,
}

impl Setup {
    /// The system clock, production's delays (retries from the environment, see
    /// [`Timing::from_env`]) and this binary (or the one `AGENT_WORKER_EXE` names).
    pub fn production() -> Self {
        Self {
            clock: Clock::system(),
            timing: Timing::from_env(),
            worker_exe: crate::worker_exe(),
            labels: Vec::new(),
        }
    }

    /// This setup on a node offering `labels` (checked, see
    /// [`domain::placement::labels`]).
    pub fn with_labels(mut self, labels: Vec<String>) -> Self {
        self.labels = labels;
        self
    }
}

/// Where the kernel reads the time (ms since the Unix epoch). Cheap to clone;
/// clones read the same clock.
#[derive(Clone, Default)]
pub struct Clock(Arc<Source>);

#[derive(Default)]
enum Source {
    /// The system's ([`clock::now_ms`]).
    #[default]
    System,
    /// Moves only when told; `moved` wakes whoever sleeps on it.
    Manual { now: AtomicI64, moved: Notify },
}

impl Clock {
    /// The system clock.
    pub fn system() -> Self {
        Self::default()
    }

    /// A clock standing at `ms` until [`Clock::advance`] or [`Clock::set_ms`] moves it.
    pub fn manual(ms: i64) -> Self {
        Self(Arc::new(Source::Manual {
            now: AtomicI64::new(ms),
            moved: Notify::new(),
        }))
    }

    pub fn now_ms(&self) -> i64 {
        match &*self.0 {
            Source::System => clock::now_ms(),
            Source::Manual { now, .. } => now.load(Ordering::SeqCst),
        }
    }

    /// Moves a manual clock to `ms` (never back); the system clock ignores it.
    pub fn set_ms(&self, ms: i64) {
        if let Source::Manual { now, moved } = &*self.0 {
            now.fetch_max(ms, Ordering::SeqCst);
            // Every sleeper now (the scheduler's, the proposals'), and the next one.
            moved.notify_waiters();
            moved.notify_one();
        }
    }

    /// Moves a manual clock on by `d`; the system clock ignores it.
    pub fn advance(&self, d: Duration) {
        self.set_ms(self.now_ms().saturating_add(d.as_millis() as i64));
    }

    /// Resolves when a manual clock was moved (at once if it moved since the last
    /// call); never for the system clock, whose time a sleep follows. Every task
    /// waiting when it moves wakes.
    pub async fn moved(&self) {
        match &*self.0 {
            Source::System => std::future::pending().await,
            Source::Manual { moved, .. } => moved.notified().await,
        }
    }
}

impl std::fmt::Debug for Clock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &*self.0 {
            Source::System => f.write_str("Clock::System"),
            Source::Manual { now, .. } => {
                write!(f, "Clock::Manual({})", now.load(Ordering::SeqCst))
            }
        }
    }
}

/// The environment variable that sets the retry backoff: milliseconds, comma-separated.
pub const RETRY_DELAYS_ENV: &str = "AGENT_WORKER_RETRY_DELAYS_MS";

/// The delays the scheduler keeps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Timing {
    /// Retries after a failed run, and the wait before each (then the agent fails).
    pub retry_delays: Vec<Duration>,
    /// The first automatic resume after an auth or billing pause, and the cap (it
    /// doubles with each pause in a row).
    pub pause_first: Duration,
    pub pause_max: Duration,
    /// Quiet time before a workflow run is called done (then checked again).
    pub settle_debounce: Duration,
}

impl Default for Timing {
    /// Production's: retries after 1 s, 2 s and 4 s; pauses of 5 min doubling to 1 h;
    /// a second's quiet before a workflow run is settled.
    fn default() -> Self {
        Self {
            retry_delays: vec![
                Duration::from_secs(1),
                Duration::from_secs(2),
                Duration::from_secs(4),
            ],
            pause_first: Duration::from_secs(5 * 60),
            pause_max: Duration::from_secs(60 * 60),
            settle_debounce: Duration::from_millis(1000),
        }
    }
}

/// At most this many retries, each at most an hour away, from the environment.
const MAX_RETRIES: usize = 10;
const MAX_RETRY_DELAY: Duration = Duration::from_secs(3600);

impl Timing {
    /// The defaults, with the retry backoff from `AGENT_WORKER_RETRY_DELAYS_MS` when
    /// set; a value that does not read keeps the default, with a warning.
    pub fn from_env() -> Self {
        let mut t = Self::default();
        let Some(v) = std::env::var(RETRY_DELAYS_ENV)
            .ok()
            .filter(|v| !v.trim().is_empty())
        else {
            return t;
        };
        match parse_delays(&v) {
            Some(d) => t.retry_delays = d,
            None => tracing::warn!(
                "{RETRY_DELAYS_ENV}={v:?} is not a list of milliseconds such as \"1000,2000,4000\" \
                 (at most {MAX_RETRIES}, each at most an hour); using 1 s, 2 s, 4 s"
            ),
        }
        t
    }
}

/// `1000,2000,4000` as durations; None if any part does not read or is out of range.
fn parse_delays(s: &str) -> Option<Vec<Duration>> {
    let d = s
        .split(',')
        .map(|p| p.trim().parse::<u64>().ok().map(Duration::from_millis))
        .collect::<Option<Vec<_>>>()?;
    (d.len() <= MAX_RETRIES && d.iter().all(|d| *d <= MAX_RETRY_DELAY)).then_some(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manual_clock_moves_when_told_and_never_back() {
        let c = Clock::manual(1_000);
        let seen = c.clone();
        assert_eq!(c.now_ms(), 1_000);
        c.advance(Duration::from_millis(500));
        assert_eq!(seen.now_ms(), 1_500, "clones read the same clock");
        c.set_ms(1_200);
        assert_eq!(c.now_ms(), 1_500);
        let sys = Clock::system();
        sys.advance(Duration::from_secs(3600));
        assert!((sys.now_ms() - clock::now_ms()).abs() < 1_000);
    }

    #[tokio::test]
    async fn moving_a_manual_clock_wakes_its_sleeper() {
        let c = Clock::manual(0);
        c.advance(Duration::from_secs(1));
        // The move before the wait is not lost.
        tokio::time::timeout(Duration::from_secs(5), c.moved())
            .await
            .expect("woken");
    }

    #[test]
    fn retry_delays_read_from_a_list() {
        assert_eq!(
            parse_delays("100, 200,400"),
            Some(vec![
                Duration::from_millis(100),
                Duration::from_millis(200),
                Duration::from_millis(400)
            ])
        );
        assert_eq!(parse_delays("0"), Some(vec![Duration::ZERO]));
        for bad in [
            "",
            "1s",
            "100,,200",
            "-5",
            "3600001",
            "1,1,1,1,1,1,1,1,1,1,1",
        ] {
            assert_eq!(parse_delays(bad), None, "{bad:?}");
        }
        assert_eq!(Timing::default().retry_delays.len(), 3);
    }
}
