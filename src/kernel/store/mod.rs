//! The SQLite store: one writer thread that owns the write connection and
//! group-commits whatever is queued, plus a fixed set of reader threads, each with
//! its own read connection.
//!
//! Why fixed reader threads rather than the async runtime's blocking pool: a burst
//! of reads (a fan-out to hundreds of agents reads once per recipient) took a
//! blocking thread and a new connection per read, 400 threads whose memory was
//! never given back. Here a burst queues; threads and connections stay bounded.
//!
//! Why a writer thread: SQLite allows one writer at a time; funnelling every write
//! through one thread removes lock contention, and committing a queue of jobs in one
//! transaction turns N fsyncs into one (group commit). Each job runs inside its own
//! SAVEPOINT, so a failing job rolls back alone and never half-writes. A job's caller
//! is answered only after the commit, so an acknowledged write is durable.

mod checkpoint;
mod queue;
pub mod schema;

use crate::error::{Error, Result};
use crate::memory;
use checkpoint::Checkpointer;
use queue::{Queue, Taken};
use rusqlite::{Connection, OpenFlags};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// The most jobs one transaction may carry; bounds the latency a burst adds.
const MAX_BATCH: usize = 512;
/// Reader threads, each with one read connection (opened on its first read).
const READERS: usize = 8;
/// A store thread idle this long gives its connection's page cache back.
const IDLE: Duration = Duration::from_secs(10);

type Finish = Box<dyn FnOnce(Result<(), String>) + Send>;
type Job = Box<dyn FnOnce(&Connection) -> Finish + Send>;
type ReadJob = Box<dyn FnOnce(Result<&Connection, &rusqlite::Error>) + Send>;

#[derive(Clone)]
pub struct Store {
    inner: Arc<Inner>,
}

struct Inner {
    path: PathBuf,
    writer: Arc<Queue<Job>>,
    readers: Arc<Queue<ReadJob>>,
    checkpointer: Arc<Checkpointer>,
}

impl Drop for Inner {
    /// The last handle is gone: the threads finish what is queued and stop.
    fn drop(&mut self) {
        self.writer.close();
        self.readers.close();
        self.checkpointer.close();
    }
}

fn configure(c: &Connection) -> rusqlite::Result<()> {
    c.busy_timeout(Duration::from_secs(10))?;
    c.pragma_update(None, "synchronous", "NORMAL")?;
    c.pragma_update(None, "foreign_keys", "ON")?;
    c.set_prepared_statement_cache_capacity(64);
    // Query-planner stability: without it SQLite peeks at bound values (e.g. `LIMIT ?`)
    // and then re-prepares the statement on every new binding, which cost ~15% of the
    // writer's CPU in the benchmark. Our plans never depend on parameter values.
    c.set_db_config(
        rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG,
        true,
    )?;
    Ok(())
}

impl Store {
    /// Opens (creating if needed) the database, applies migrations, and starts the
    /// writer thread.
    pub fn open(path: &Path) -> Result<Self> {
        let conn = Connection::open(path)?;
        let mode: String = conn.query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(Error::internal(format!(
                "could not switch {} to WAL (got {mode})",
                path.display()
            )));
        }
        let mut conn = conn;
        configure(&conn)?;
        migrate(&conn)?;
        let checkpointer = Checkpointer::start(path, &mut conn)
            .map_err(|e| Error::internal(format!("cannot start the checkpoint thread: {e}")))?;
        let writer = Arc::new(Queue::new());
        let rx = writer.clone();
        std::thread::Builder::new()
            .name("store-writer".into())
            .spawn(move || writer_loop(conn, &rx))
            .map_err(|e| Error::internal(format!("cannot start the writer thread: {e}")))?;
        let readers = Arc::new(Queue::new());
        for i in 0..READERS {
            let (rx, path) = (readers.clone(), path.to_owned());
            std::thread::Builder::new()
                .name(format!("store-reader-{i}"))
                .spawn(move || reader_loop(&path, &rx))
                .map_err(|e| Error::internal(format!("cannot start a reader thread: {e}")))?;
        }
        Ok(Self {
            inner: Arc::new(Inner {
                path: path.to_owned(),
                writer,
                readers,
                checkpointer,
            }),
        })
    }

    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// Runs `f` in its own savepoint inside the writer's next transaction and answers
    /// after that transaction committed.
    pub async fn write<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T> + Send + 'static,
    {
        let (tx, rx) = tokio::sync::oneshot::channel::<Result<T>>();
        let job: Job = Box::new(move |conn: &Connection| {
            let out = in_savepoint(conn, f);
            Box::new(move |committed: Result<(), String>| {
                let out = match committed {
                    Ok(()) => out,
                    Err(e) => Err(Error::internal(format!("commit failed: {e}"))),
                };
                let _ = tx.send(out);
            })
        });
        if self.inner.writer.push(job).is_err() {
            return Err(Error::internal("the store writer has stopped"));
        }
        rx.await
            .map_err(|_| Error::internal("the store writer dropped a job"))?
    }

    /// Runs `f` on a reader thread's connection. Reads see the last commit; a burst
    /// waits in the readers' queue.
    pub async fn read<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T> + Send + 'static,
    {
        let (tx, rx) = tokio::sync::oneshot::channel::<Result<T>>();
        let job: ReadJob = Box::new(move |conn| {
            let out = match conn {
                Err(e) => Err(Error::internal(format!(
                    "cannot open a read connection: {e}"
                ))),
                // One read transaction, so a reader that runs several queries sees one
                // snapshot and never half of a commit that landed between them.
                Ok(conn) => {
                    let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        conn.execute_batch("BEGIN DEFERRED")
                            .map_err(Error::from)
                            .and_then(|()| f(conn))
                    }))
                    .unwrap_or_else(|_| Err(Error::internal("a store read panicked")));
                    let _ = conn.execute_batch("COMMIT");
                    out
                }
            };
            let _ = tx.send(out);
        });
        if self.inner.readers.push(job).is_err() {
            return Err(Error::internal("the store readers have stopped"));
        }
        rx.await
            .map_err(|_| Error::internal("a store reader dropped a read"))?
    }
}

/// Gives an idle connection's page cache back, to SQLite's allocator and from there
/// to the OS.
///
/// Why both: SQLite allocates with the C library's malloc, not the Rust allocator,
/// and glibc keeps freed memory in per-thread arenas; after a busy minute the ten
/// connections' caches (2 MiB each at most) stayed resident, 20 MiB over idle. The
/// thread's own Rust allocations are collected too.
fn release(conn: &Connection) {
    let _ = conn.release_memory();
    memory::give_back_with_c_heap();
}

/// A reader thread: opens its connection on the first job and closes it when idle.
///
/// Why close: an open connection holds its parsed schema and cached statements
/// (about 200 KiB each, eight readers) for as long as the kernel is idle; opening
/// one again costs well under a millisecond, once per reader per busy spell.
fn reader_loop(path: &Path, rx: &Queue<ReadJob>) {
    let mut conn: Option<rusqlite::Result<Connection>> = None;
    loop {
        let job = match rx.take(1, Some(IDLE)) {
            Taken::Closed => return,
            Taken::Idle => {
                if conn.take().is_some() {
                    memory::give_back_with_c_heap();
                }
                continue;
            }
            Taken::Items(mut jobs) => jobs.pop().expect("take gives at least one"),
        };
        if !matches!(conn, Some(Ok(_))) {
            conn = Some(
                Connection::open_with_flags(
                    path,
                    OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
                )
                .and_then(|c| configure(&c).map(|()| c)),
            );
        }
        match conn.as_ref().expect("opened above") {
            Ok(c) => job(Ok(c)),
            Err(e) => job(Err(e)),
        }
    }
}

/// Runs one of the writer's cached statements (no parse per job).
fn exec(conn: &Connection, sql: &str) -> rusqlite::Result<()> {
    conn.prepare_cached(sql)?.execute([]).map(|_| ())
}

fn in_savepoint<T>(conn: &Connection, f: impl FnOnce(&Connection) -> Result<T>) -> Result<T> {
    exec(conn, "SAVEPOINT job")?;
    let out =
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(conn))).unwrap_or_else(|_| {
            Err(Error::internal(
                "a store job panicked; its changes were rolled back",
            ))
        });
    match &out {
        Ok(_) => exec(conn, "RELEASE job")?,
        Err(_) => {
            exec(conn, "ROLLBACK TO job")?;
            exec(conn, "RELEASE job")?;
        }
    }
    out
}

fn writer_loop(conn: Connection, rx: &Queue<Job>) {
    let mut worked = false;
    loop {
        let batch = match rx.take(MAX_BATCH, Some(IDLE)) {
            Taken::Closed => return,
            Taken::Idle => {
                if std::mem::take(&mut worked) {
                    release(&conn);
                }
                continue;
            }
            Taken::Items(batch) => batch,
        };
        worked = true;
        if let Err(e) = exec(&conn, "BEGIN IMMEDIATE") {
            // Run nothing; dropping the jobs answers each caller with an error.
            tracing::error!("store transaction could not begin: {e}");
            drop(batch);
            continue;
        }
        let finishers: Vec<Finish> = batch.into_iter().map(|job| job(&conn)).collect();
        let committed = exec(&conn, "COMMIT").map_err(|e| {
            let _ = conn.execute_batch("ROLLBACK");
            e.to_string()
        });
        if let Err(e) = &committed {
            tracing::error!("store commit failed: {e}");
        }
        for finish in finishers {
            finish(committed.clone());
        }
    }
}

fn migrate(conn: &Connection) -> Result<()> {
    let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    let target = schema::MIGRATIONS.len() as i64;
    if version > target {
        return Err(Error::internal(format!(
            "the database schema is version {version} but this agent-worker knows only up to {target}: \
             use a newer agent-worker or another --data-dir"
        )));
    }
    for (i, sql) in schema::MIGRATIONS.iter().enumerate().skip(version as usize) {
        conn.execute_batch("BEGIN IMMEDIATE")?;
        let applied = conn
            .execute_batch(sql)
            .and_then(|_| conn.pragma_update(None, "user_version", i as i64 + 1));
        match applied {
            Ok(()) => conn.execute_batch("COMMIT")?,
            Err(e) => {
                let _ = conn.execute_batch("ROLLBACK");
                return Err(Error::internal(format!("migration {} failed: {e}", i + 1)));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Migration 12 moves acked deliveries out of `deliveries` and keeps the rest.
    #[tokio::test]
    async fn acked_deliveries_move_to_their_own_table() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.db");
        {
            let c = Connection::open(&path).unwrap();
            for (i, sql) in schema::MIGRATIONS[..11].iter().enumerate() {
                c.execute_batch(sql).unwrap();
                c.pragma_update(None, "user_version", i as i64 + 1).unwrap();
            }
            c.execute_batch(
                "INSERT INTO deliveries (workflow_id, recipient, message_id, state, updated_at, read_by)
                 VALUES (1, 'a', 'm1', 'acked', 5, 'run-1'), (1, 'a', 'm2', 'pending', 6, NULL),
                        (1, 'b', 'm1', 'deferred', 7, NULL)",
            )
            .unwrap();
        }
        let store = Store::open(&path).unwrap();
        let (open, done) = store
            .read(|c| {
                let open: Vec<String> = c
                    .prepare("SELECT recipient || ':' || message_id || ':' || state FROM deliveries ORDER BY 1")?
                    .query_map([], |r| r.get(0))?
                    .collect::<rusqlite::Result<_>>()?;
                let done: Vec<String> = c
                    .prepare("SELECT recipient || ':' || message_id || ':' || read_by || ':' || updated_at FROM deliveries_done")?
                    .query_map([], |r| r.get(0))?
                    .collect::<rusqlite::Result<_>>()?;
                Ok((open, done))
            })
            .await
            .unwrap();
        assert_eq!(open, vec!["a:m2:pending", "b:m1:deferred"]);
        assert_eq!(done, vec!["a:m1:run-1:5"]);
    }
}
