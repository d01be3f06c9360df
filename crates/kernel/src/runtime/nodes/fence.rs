//! Fencing: a node that has not renewed its lease for half of it stops its
//! workers, since others may take its agents once the lease is out.
//!
//! The fence watches on its own, not as a step of the heartbeat loop: a beat, or
//! the takeover read that follows it, can hang on a database that stopped
//! answering, and the node must stop its workers in time all the same. A renewal
//! counts from the moment its beat began (its heartbeat was written after that),
//! so the node's half lease never ends later than the store's.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tokio::time::Instant;

pub(crate) struct Fence {
    /// When the last beat that got through began.
    renewed: Mutex<Instant>,
    /// The node stopped its workers, and no beat got through since.
    fenced: AtomicBool,
    /// Half the lease: how long the node runs workers without a renewal.
    half: Duration,
    /// How soon, once fenced, it stops what may have started since.
    again: Duration,
}

impl Fence {
    /// A fence for `lease`, renewed by a beat that began at `began`; fenced, it
    /// stops again every `again`.
    pub(crate) fn new(lease: Duration, again: Duration, began: Instant) -> Self {
        Self {
            renewed: Mutex::new(began),
            fenced: AtomicBool::new(false),
            half: lease / 2,
            again,
        }
    }

    /// A beat that began at `began` got through. True when the node had stopped
    /// its workers since the last one (what the stopped runs left is to be served).
    pub(crate) fn renewed(&self, began: Instant) -> bool {
        let mut r = self.renewed.lock().unwrap();
        *r = (*r).max(began);
        drop(r);
        self.fenced.swap(false, Ordering::SeqCst)
    }

    fn due(&self) -> Instant {
        *self.renewed.lock().unwrap() + self.half
    }

    /// What the watch does at `now`: sleep until the half lease is out, or stop the
    /// workers (`first` when the node was not fenced before).
    pub(crate) fn next(&self, now: Instant) -> Next {
        let due = self.due();
        if now < due {
            return Next::Sleep(due);
        }
        Next::Stop {
            first: !self.fenced.swap(true, Ordering::SeqCst),
        }
    }

    /// How long the watch waits after stopping the workers before it looks again.
    pub(crate) fn again(&self) -> Duration {
        self.again
    }
}

/// What the fence's watch does next.
#[derive(Debug, PartialEq)]
pub(crate) enum Next {
    Sleep(Instant),
    Stop { first: bool },
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fence for a 2 s lease, renewed at 0 ms, then these steps: `+N`, a beat
    /// that began at N ms got through (it says `renewed` when the node had
    /// stopped its workers); `@N`, the watch looks at N ms (`sleep N`, `stop
    /// first` or `stop again`).
    fn check(steps: &str, expect: &str) {
        let start = Instant::now();
        let fence = Fence::new(Duration::from_secs(2), Duration::from_millis(400), start);
        let mut seen = Vec::new();
        for step in steps.split_whitespace() {
            let (what, ms) = step.split_at(1);
            let at = start + Duration::from_millis(ms.parse().unwrap());
            if what == "+" {
                if fence.renewed(at) {
                    seen.push("renewed".to_owned());
                }
                continue;
            }
            seen.push(match fence.next(at) {
                Next::Sleep(until) => format!("sleep {}", (until - start).as_millis()),
                Next::Stop { first: true } => "stop first".into(),
                Next::Stop { first: false } => "stop again".into(),
            });
        }
        assert_eq!(seen.join(", "), expect, "{steps}");
    }

    #[test]
    fn a_node_stops_its_workers_half_a_lease_after_its_last_renewal() {
        // Never renewed: at 1 s, then at every look.
        check(
            "@0 @999 @1000 @1400",
            "sleep 1000, sleep 1000, stop first, stop again",
        );
        // Renewed at 0.4 s and 0.8 s: 1 s after the last.
        check(
            "+400 @500 +800 @1400 @1800",
            "sleep 1400, sleep 1800, stop first",
        );
        // Beats that keep coming: never.
        check(
            "+400 @900 +800 @1300 +1200 @1700",
            "sleep 1400, sleep 1800, sleep 2200",
        );
    }

    #[test]
    fn a_renewal_after_a_stop_says_so_and_the_next_stop_is_a_first_again() {
        check(
            "@1000 +1200 +1600 @2000 @2600 @3000",
            "stop first, renewed, sleep 2600, stop first, stop again",
        );
    }

    #[test]
    fn a_beat_that_began_earlier_does_not_move_the_fence_back() {
        // The beat that began at 0.9 s got through after the one that began at 1.2 s.
        check("+1200 +900 @1500", "sleep 2200");
    }
}
