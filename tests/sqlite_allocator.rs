//! SQLite allocates from mimalloc once `memory::sqlite_on_mimalloc` ran, and only if
//! it ran before SQLite initialised. Its own test binary with one test: any other
//! test that opened a database first would make the call too late.

use libmimalloc_sys::mi_is_in_heap_region;
use rusqlite::ffi;

/// Whether a block SQLite allocates now lies in mimalloc's heap.
fn sqlite_allocates_from_mimalloc() -> bool {
    // SAFETY: a block from sqlite3_malloc, freed with sqlite3_free; mimalloc only
    // looks at the address.
    unsafe {
        let p = ffi::sqlite3_malloc(4096);
        assert!(!p.is_null(), "sqlite3_malloc failed");
        let ours = mi_is_in_heap_region(p);
        ffi::sqlite3_free(p);
        ours
    }
}

#[test]
fn sqlite_takes_mimalloc_before_it_initialises_and_keeps_it() {
    assert!(
        agent_worker::store::sqlite_on_mimalloc(),
        "SQLite refused the allocator before any database was opened"
    );
    assert!(sqlite_allocates_from_mimalloc());

    // A real database's work goes through it: tables, an index, a page cache.
    let dir = tempfile::tempdir().unwrap();
    let c = rusqlite::Connection::open(dir.path().join("t.db")).unwrap();
    c.execute_batch(
        "CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT);
         WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 5000)
         INSERT INTO t SELECT i, hex(randomblob(200)) FROM n;
         CREATE INDEX t_v ON t (v);",
    )
    .unwrap();
    let (rows, longest): (i64, i64) = c
        .query_row("SELECT count(*), max(length(v)) FROM t", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .unwrap();
    assert_eq!((rows, longest), (5000, 400));
    // SAFETY: reads SQLite's own counter.
    let used = unsafe { ffi::sqlite3_memory_used() };
    assert!(used > 100_000, "SQLite accounts {used} bytes in use");

    // Too late now: the call says so and SQLite keeps the allocator it has.
    assert!(!agent_worker::store::sqlite_on_mimalloc());
    assert!(sqlite_allocates_from_mimalloc());
}
