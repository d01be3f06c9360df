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
//! ([`sqlite_on_mimalloc`]), so its freed page caches go back the same way. Where
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

/// Has SQLite allocate from mimalloc instead of the C library's malloc. Call it
/// first thing in `main`, before any database is opened: SQLite accepts a new
/// allocator only before it initialises. Returns false (and changes nothing) when
/// it is too late.
///
/// Why: glibc gives each thread that allocates its own arena, and SQLite allocates on
/// ten threads (the writer, the checkpointer, eight readers); what they freed stays
/// in those arenas until a `malloc_trim`, which returns only whole free pages.
/// Through mimalloc SQLite's memory is purged with the rest when the store's threads
/// collect (see [`give_back_with_c_heap`]).
pub fn sqlite_on_mimalloc() -> bool {
    use rusqlite::ffi;
    use std::ffi::{c_int, c_void};

    unsafe extern "C" fn malloc(n: c_int) -> *mut c_void {
        // SAFETY: SQLite asks for n > 0 bytes and frees them with `free` below.
        unsafe { libmimalloc_sys::mi_malloc(n.max(0) as usize) }
    }
    unsafe extern "C" fn free(p: *mut c_void) {
        // SAFETY: p came from `malloc` or `realloc` below (or is null).
        unsafe { libmimalloc_sys::mi_free(p) }
    }
    unsafe extern "C" fn realloc(p: *mut c_void, n: c_int) -> *mut c_void {
        // SAFETY: as for `free`; SQLite never asks for a size below 1.
        unsafe { libmimalloc_sys::mi_realloc(p, n.max(0) as usize) }
    }
    unsafe extern "C" fn size(p: *mut c_void) -> c_int {
        // SAFETY: p came from `malloc` or `realloc` above.
        let n = unsafe { libmimalloc_sys::mi_usable_size(p) };
        c_int::try_from(n).unwrap_or(c_int::MAX)
    }
    unsafe extern "C" fn roundup(n: c_int) -> c_int {
        // SAFETY: a pure function of its argument.
        let good = unsafe { libmimalloc_sys::mi_good_size(n.max(0) as usize) };
        c_int::try_from(good).unwrap_or(n)
    }
    unsafe extern "C" fn init(_: *mut c_void) -> c_int {
        ffi::SQLITE_OK
    }
    unsafe extern "C" fn shutdown(_: *mut c_void) {}

    let methods = ffi::sqlite3_mem_methods {
        xMalloc: Some(malloc),
        xFree: Some(free),
        xRealloc: Some(realloc),
        xSize: Some(size),
        xRoundup: Some(roundup),
        xInit: Some(init),
        xShutdown: Some(shutdown),
        pAppData: std::ptr::null_mut(),
    };
    // SAFETY: SQLITE_CONFIG_MALLOC takes a pointer to the methods and copies them; it
    // fails with SQLITE_MISUSE (and changes nothing) once SQLite has initialised.
    let rc = unsafe {
        ffi::sqlite3_config(
            ffi::SQLITE_CONFIG_MALLOC,
            &methods as *const ffi::sqlite3_mem_methods,
        )
    };
    rc == ffi::SQLITE_OK
}

/// [`collect_thread`], and also the C library's free heap pages, for threads that
/// run C code (SQLite): where [`sqlite_on_mimalloc`] did not run (the test binaries,
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
