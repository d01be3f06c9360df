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
//! idle ([`give_back_with_c_heap`], with SQLite's C heap). Where the allocator is
//! not mimalloc (the test binaries) these calls find an empty mimalloc heap and
//! return.

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
/// run C code which allocates with glibc's malloc (SQLite): glibc keeps freed memory
/// in per-thread arenas, which `malloc_trim` returns.
pub fn give_back_with_c_heap() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free heap pages to the OS; it takes glibc's
    // own locks and touches no memory in use.
    unsafe {
        libc::malloc_trim(0);
    }
    collect_thread();
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
