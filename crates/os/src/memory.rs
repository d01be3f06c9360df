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

/// Drops the program's own code and read-only data (not the libraries') from this
/// process's resident set; returns the bytes dropped. For a server once its start
/// is done.
///
/// Why: the start runs code that nothing runs again (the loader's relocation
/// tables, migrations, recovery, every tool's schema) spread over the whole text,
/// and the kernel maps every page it touches together with its neighbours (fault
/// around), so the idle server kept 20 to 23 MiB of the binary's pages of which its
/// idle work (timers, the node's heartbeat, the store's give-backs) touches 13 to 17.
/// The pages stay in the page cache: what runs again comes back with a minor fault,
/// without reading the disk.
///
/// Only segments the program never writes are dropped (no `PF_W`): the relocated
/// data (`RELRO`, the GOT) is in writable segments and keeps its private copies.
pub fn release_start_code() -> usize {
    #[cfg(target_os = "linux")]
    {
        let mut segments = code::Segments::default();
        // SAFETY: the callback only reads the program headers the loader passes it
        // for the duration of the call, and writes into `segments`, which outlives it.
        unsafe { libc::dl_iterate_phdr(Some(code::read_only), (&raw mut segments).cast()) };
        segments.ranges[..segments.len]
            .iter()
            .filter(|&&(start, len)| {
                // SAFETY: the range lies inside a mapping of the program that is never
                // written, so dropping it loses nothing: its pages are read again
                // from the file when used.
                unsafe { libc::madvise(start as *mut libc::c_void, len, libc::MADV_DONTNEED) == 0 }
            })
            .map(|&(_, len)| len)
            .sum()
    }
    #[cfg(not(target_os = "linux"))]
    0
}

#[cfg(target_os = "linux")]
mod code {
    /// The program's read-only segments, page-aligned inwards (a page shared with a
    /// writable segment is never dropped). A fixed array: nothing is allocated while
    /// the loader's lock is held.
    #[derive(Default)]
    pub(super) struct Segments {
        pub(super) ranges: [(usize, usize); 8],
        pub(super) len: usize,
    }

    /// `dl_iterate_phdr`'s callback: the first object is the program itself.
    pub(super) unsafe extern "C" fn read_only(
        info: *mut libc::dl_phdr_info,
        _size: libc::size_t,
        data: *mut libc::c_void,
    ) -> libc::c_int {
        // SAFETY: the loader passes a valid `info` for the call; `data` is the
        // `Segments` that `release_start_code` passed.
        let (info, out) = unsafe { (&*info, &mut *data.cast::<Segments>()) };
        // SAFETY: `dlpi_phdr` points at `dlpi_phnum` program headers.
        let headers =
            unsafe { std::slice::from_raw_parts(info.dlpi_phdr, usize::from(info.dlpi_phnum)) };
        // SAFETY: sysconf only reads a constant of the system.
        let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096);
        let base = info.dlpi_addr as usize;
        for h in headers
            .iter()
            .filter(|h| h.p_type == libc::PT_LOAD && h.p_flags & libc::PF_W == 0)
        {
            let start = (base + h.p_vaddr as usize).next_multiple_of(page);
            let end = (base + h.p_vaddr as usize + h.p_memsz as usize) / page * page;
            if end > start && out.len < out.ranges.len() {
                out.ranges[out.len] = (start, end - start);
                out.len += 1;
            }
        }
        1
    }
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

    /// Resident KiB of the mappings of this test binary's own file.
    #[cfg(target_os = "linux")]
    fn own_file_resident_kib() -> u64 {
        let exe = std::env::current_exe().unwrap();
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        let (mut ours, mut kib) = (false, 0);
        for line in smaps.lines() {
            if let Some(rss) = line.strip_prefix("Rss:") {
                if ours {
                    kib += rss
                        .trim()
                        .trim_end_matches("kB")
                        .trim()
                        .parse::<u64>()
                        .unwrap();
                }
            } else if line
                .split_whitespace()
                .next()
                .is_some_and(|w| w.contains('-'))
            {
                ours = line.ends_with(exe.to_str().unwrap());
            }
        }
        kib
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn the_start_code_leaves_the_resident_set_and_the_program_runs_on() {
        let before = own_file_resident_kib();
        let dropped = super::release_start_code();
        let after = own_file_resident_kib();
        assert!(dropped > 0, "nothing of the program was dropped");
        assert!(
            after < before,
            "the program's pages stayed resident: {before} KiB before, {after} KiB after"
        );
        // The relocated data stayed (a call through a vtable, a panic unwound
        // through the dropped unwind tables), and the dropped code runs again.
        let shown: Box<dyn std::fmt::Display> = Box::new(42);
        assert_eq!(shown.to_string(), "42");
        assert!(std::panic::catch_unwind(|| panic!("unwinds")).is_err());
        assert_eq!(
            super::release_start_code(),
            dropped,
            "the same segments each time"
        );
    }

    #[test]
    fn nothing_done_nothing_to_give_back() {
        assert!(give_backs(&[], 60.0).is_empty());
        assert_eq!(GiveBack::new(Instant::now()).wait(Instant::now()), None);
    }
}
