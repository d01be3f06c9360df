//! How long the writers' transactions last, from the moment the write began (on
//! PostgreSQL: the database's write locks taken) to its commit answered: what
//! the other writers of the same locks wait behind, in all and per instance. A histogram of four buckets
//! per doubling, so a percentile is known to within a fifth; kept for the
//! benchmarks, at the cost of a few atomic adds per transaction.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

/// Buckets: bucket `i` holds durations up to 2^(i/4) microseconds (the last one
/// everything longer, past 2^25 µs, about 33 s).
const BUCKETS: usize = 101;

pub(crate) struct Holds {
    buckets: [AtomicU64; BUCKETS],
    total_us: AtomicU64,
    max_us: AtomicU64,
}

/// The write transactions since the figures were last taken, as
/// [`crate::Store::take_write_holds`] tells them.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct HoldStats {
    /// Transactions committed (or failed).
    pub transactions: u64,
    pub mean_us: f64,
    /// Upper bounds of the buckets holding the median and the 99th percentile.
    pub p50_us: u64,
    pub p99_us: u64,
    pub max_us: u64,
}

impl Default for Holds {
    fn default() -> Self {
        Self {
            buckets: std::array::from_fn(|_| AtomicU64::new(0)),
            total_us: AtomicU64::new(0),
            max_us: AtomicU64::new(0),
        }
    }
}

fn bucket(us: u64) -> usize {
    // 4·log2(us), rounded up: the first bucket whose bound is at least `us`.
    let b = (4.0 * (us.max(1) as f64).log2()).ceil() as usize;
    b.min(BUCKETS - 1)
}

fn bound(i: usize) -> u64 {
    2f64.powf(i as f64 / 4.0).round() as u64
}

impl Holds {
    pub(crate) fn record(&self, held: Duration) {
        let us = held.as_micros().min(u128::from(u64::MAX)) as u64;
        self.buckets[bucket(us)].fetch_add(1, Relaxed);
        self.total_us.fetch_add(us, Relaxed);
        self.max_us.fetch_max(us, Relaxed);
    }

    /// The figures since the last call, starting over.
    pub(crate) fn take(&self) -> HoldStats {
        let counts: Vec<u64> = self.buckets.iter().map(|b| b.swap(0, Relaxed)).collect();
        let (total, max) = (self.total_us.swap(0, Relaxed), self.max_us.swap(0, Relaxed));
        stats_of(&counts, total, max)
    }
}

/// The most instances whose holds are kept between two takes.
const MAX_INSTANCES: usize = 1024;

/// The same figures per workflow instance: a transaction counts for each
/// instance whose lock it took (PostgreSQL).
#[derive(Default)]
pub(crate) struct InstanceHolds {
    by_instance: std::sync::Mutex<std::collections::HashMap<i64, Box<Holds>>>,
}

impl InstanceHolds {
    pub(crate) fn record(&self, instances: &[i64], held: Duration) {
        if instances.is_empty() {
            return;
        }
        let mut map = self.by_instance.lock().unwrap_or_else(|p| p.into_inner());
        for id in instances {
            // Bounded: past this many instances since the last take, new ones
            // go uncounted (only the benchmarks take them).
            if map.len() >= MAX_INSTANCES && !map.contains_key(id) {
                continue;
            }
            map.entry(*id).or_default().record(held);
        }
    }

    /// Each instance's figures since the last call, by id, starting over.
    pub(crate) fn take(&self) -> Vec<(i64, HoldStats)> {
        let map = std::mem::take(&mut *self.by_instance.lock().unwrap_or_else(|p| p.into_inner()));
        let mut out: Vec<(i64, HoldStats)> =
            map.into_iter().map(|(id, h)| (id, h.take())).collect();
        out.sort_by_key(|(id, _)| *id);
        out
    }
}

fn stats_of(counts: &[u64], total_us: u64, max_us: u64) -> HoldStats {
    let n: u64 = counts.iter().sum();
    if n == 0 {
        return HoldStats::default();
    }
    let at = |q: f64| {
        let want = ((n as f64) * q).ceil() as u64;
        let mut seen = 0;
        for (i, c) in counts.iter().enumerate() {
            seen += c;
            if seen >= want {
                return bound(i);
            }
        }
        bound(BUCKETS - 1)
    };
    HoldStats {
        transactions: n,
        mean_us: total_us as f64 / n as f64,
        p50_us: at(0.5),
        p99_us: at(0.99),
        max_us,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_within_a_bucket_of_the_truth() {
        let h = Holds::default();
        for us in 1..=1000u64 {
            h.record(Duration::from_micros(us));
        }
        let s = h.take();
        assert_eq!(s.transactions, 1000);
        assert!((s.mean_us - 500.5).abs() < 1e-9);
        assert_eq!(s.max_us, 1000);
        // The true median is 500, the 99th percentile 990: each bound is at most a
        // fifth above it, never below.
        assert!((500..=600).contains(&s.p50_us), "{s:?}");
        assert!((990..=1190).contains(&s.p99_us), "{s:?}");
        assert_eq!(h.take(), HoldStats::default(), "taken: it starts over");
    }

    #[test]
    fn a_transaction_counts_for_each_instance_it_locked() {
        let h = InstanceHolds::default();
        h.record(&[3, 1], Duration::from_micros(100));
        h.record(&[3], Duration::from_micros(300));
        h.record(&[], Duration::from_micros(999));
        let got: Vec<(i64, u64, u64)> = h
            .take()
            .into_iter()
            .map(|(id, s)| (id, s.transactions, s.max_us))
            .collect();
        assert_eq!(got, vec![(1, 1, 100), (3, 2, 300)]);
        assert!(h.take().is_empty(), "taken: it starts over");
    }
}
