//! SQLite on the process's allocator.

/// Has SQLite allocate from mimalloc instead of the C library's malloc. Call it
/// first thing in `main`, before any database is opened: SQLite accepts a new
/// allocator only before it initialises. Returns false (and changes nothing) when
/// it is too late.
///
/// Why: glibc gives each thread that allocates its own arena, and SQLite allocates on
/// ten threads (the writer, the checkpointer, eight readers); what they freed stays
/// in those arenas until a `malloc_trim`, which returns only whole free pages.
/// Through mimalloc SQLite's memory is purged with the rest when the store's threads
/// collect (see [`os::memory::give_back_with_c_heap`]).
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
