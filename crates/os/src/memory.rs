//! Giving memory back to the OS once a burst of work is over.
//!
//! The kernel's binaries allocate with mimalloc (`main.rs`): fast under many threads,
//! but each thread keeps the pages it freed in its own heap until that thread asks
//! for a collection, and freed arena memory is only returned (purged) when some
//! thread collects after the purge delay. A tokio worker that goes quiet after a
//! burst never asks: a minute after the bench the process held 23 MiB more than at
//! its start, though a heap profile found only 3 MB more in use.
//!
//! So every thread that does the kernel's work collects when it runs out of work:
//! tokio's workers when they park ([`runtime`]), the store's threads when they go
//! idle ([`give_back_with_c_heap`]). SQLite allocates from mimalloc too
//! (the store's `sqlite_on_mimalloc`), so its freed page caches go back the same way. Where
//! the Rust allocator is not mimalloc (the test binaries) these calls find a nearly
//! empty mimalloc heap and return.

use std::cell::Cell;
use std::time::{Duration, Instant};

/// The least time between two collections on one tokio worker: a busy worker parks
/// thousands of times a second, and a collection walks the thread's heap pages
/// (collecting on every park cost a quarter of the bench's HTTP throughput, and gave
/// back no more).
const PARK_COLLECT_EVERY: Duration = Duration::from_millis(250);

thread_local! {
    static LAST_COLLECT: Cell<Option<Instant>> = const { Cell::new(None) };
}

/// Asks the OS not to back this process's memory with transparent huge pages
/// (inherited by the workers it starts).
///
/// Why: mimalloc commits its arena in large spans, and where the OS grants huge
/// pages to such spans a few touched bytes become 2 MiB: the idle kernel held 18 MiB
/// of huge pages it never used. (mimalloc is also built not to ask for huge pages,
/// so none are touched before `main` runs.) Best effort: where the setting does not
/// exist nothing changes.
pub fn no_huge_pages() {
    let _ = nix::sys::prctl::set_thp_disable(true);
}

/// Returns this thread's free allocator pages, then purges free arena memory (the
/// whole process's) back to the OS.
pub fn collect_thread() {
    // SAFETY: mi_collect only frees memory no allocation refers to; it is safe from
    // any thread at any time, and returns at once where mimalloc is unused.
    unsafe { libmimalloc_sys::mi_collect(true) };
    LAST_COLLECT.with(|c| c.set(Some(Instant::now())));
}

/// [`collect_thread`], and also the C library's free heap pages, for threads that
/// run C code (SQLite): where the store's `sqlite_on_mimalloc` did not run (the test binaries,
/// or a caller that opened a database first), SQLite allocates with glibc's malloc,
/// which keeps freed memory in per-thread arenas until `malloc_trim`.
pub fn give_back_with_c_heap() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free heap pages to the OS; it takes glibc's
    // own locks and touches no memory in use.
    unsafe {
        libc::malloc_trim(0);
    }
    collect_thread();
}

/// When a thread that works in bursts (the store's writer) gives its memory back:
/// once its work has stopped for [`GiveBack::QUIET`], at most every
/// [`GiveBack::EVERY`].
///
/// Why not "after some seconds without any work", as before: a periodic job (the
/// node's heartbeat writes every 3 s) then keeps the thread from ever being that
/// idle, and a burst's page cache and heap stayed resident for good: a minute after
/// the bench the process held 36-37 MiB instead of 32-33.
#[derive(Debug)]
pub struct GiveBack {
    worked: bool,
    last: Instant,
}

impl GiveBack {
    /// The quiet that ends a burst: a busy writer's queue is never empty this long.
    pub const QUIET: Duration = Duration::from_secs(1);
    /// The least time between two give-backs: each drops a page cache that the next
    /// job may have to read again.
    pub const EVERY: Duration = Duration::from_secs(10);

    pub fn new(now: Instant) -> Self {
        Self {
            worked: false,
            last: now,
        }
    }

    /// How long to wait for the next job before giving back; `None` when nothing
    /// was done since the last give-back (wait for work as long as it takes).
    pub fn wait(&self, now: Instant) -> Option<Duration> {
        self.worked.then(|| {
            Self::QUIET.max(Self::EVERY.saturating_sub(now.saturating_duration_since(self.last)))
        })
    }

    pub fn worked(&mut self) {
        self.worked = true;
    }

    pub fn given(&mut self, now: Instant) {
        self.worked = false;
        self.last = now;
    }
}

/// The multi-threaded runtime the server (and the bench) runs on: its workers
/// collect their free memory when they park, at most every
/// [`PARK_COLLECT_EVERY`].
///
/// A worker whose last park fell within that window keeps what it freed since until
/// its next park; the store's idle collection purges what the workers did return.
pub fn runtime() -> tokio::runtime::Builder {
    let mut b = tokio::runtime::Builder::new_multi_thread();
    b.enable_all().on_thread_park(|| {
        let due = LAST_COLLECT.with(|c| c.get().is_none_or(|t| t.elapsed() >= PARK_COLLECT_EVERY));
        if due {
            collect_thread();
        }
    });
    b
}

#[cfg(test)]
mod tests {
    use super::GiveBack;
    use std::time::{Duration, Instant};

    /// Runs jobs at the given offsets (seconds from the start) through the writer's
    /// loop for `until` seconds and returns when it gave memory back.
    fn give_backs(jobs: &[f64], until: f64) -> Vec<f64> {
        let t0 = Instant::now();
        let at = |s: f64| t0 + Duration::from_secs_f64(s);
        let mut g = GiveBack::new(t0);
        let (mut now, mut next, mut out) = (0.0, 0, Vec::new());
        while now < until {
            let job = jobs.get(next).copied().unwrap_or(f64::INFINITY);
            match g.wait(at(now)).map(|w| now + w.as_secs_f64()) {
                Some(due) if due < job && due < until => {
                    g.given(at(due));
                    out.push(due);
                    now = due;
                }
                _ if job < until => {
                    g.worked();
                    now = job;
                    next += 1;
                }
                _ => break,
            }
        }
        out
    }

    #[test]
    fn a_heartbeat_does_not_keep_a_burst_memory_for_good() {
        // A burst until 30 s (a job every 10 ms), then only a heartbeat every 3 s.
        let mut jobs: Vec<f64> = (0..3000).map(|i| f64::from(i) * 0.01).collect();
        jobs.extend((11..40).map(|i| f64::from(i) * 3.0));
        let given = give_backs(&jobs, 120.0);
        let first = given.iter().copied().find(|&t| t >= 30.0);
        assert!(
            first.is_some_and(|t| t <= 31.0 + 1e-9),
            "the burst's memory should go back within a second of its end: {given:?}"
        );
        assert!(
            given.iter().all(|&t| !(0.5..29.99).contains(&t)),
            "nothing goes back in the middle of the burst: {given:?}"
        );
        for pair in given.windows(2) {
            assert!(
                pair[1] - pair[0] >= 10.0 - 1e-9,
                "at most every 10 s: {given:?}"
            );
        }
        let after: Vec<_> = given.iter().filter(|&&t| t > 31.0).collect();
        assert!(
            (6..=9).contains(&after.len()),
            "the heartbeat's own pages go back now and then too: {given:?}"
        );
    }

    #[test]
    fn nothing_done_nothing_to_give_back() {
        assert!(give_backs(&[], 60.0).is_empty());
        assert_eq!(GiveBack::new(Instant::now()).wait(Instant::now()), None);
    }
}
