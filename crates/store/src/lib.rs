//! The store: writer threads that each own a write connection and group-commit
//! whatever is queued to them (one on SQLite, `writer.rs`), plus a fixed set of
//! reader threads, each with its own read connection. The engine underneath is SQLite (`sqlite.rs`, the default: a file in
//! the data dir) or PostgreSQL (`postgres/`, shared by several kernels); jobs see
//! neither, only `sql::Connection`.
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
//!
//! On PostgreSQL the same loop serves on several writer connections (`writer.rs`),
//! and advisory locks keep the writes of every kernel on the database in order: a
//! write of one workflow instance ([`WriteScope::Instance`]) takes the global lock
//! shared and that instance's lock, so one instance's writes are in one order and
//! different instances' run at once; any other write ([`WriteScope::Global`], the
//! default of [`Store::write`]) takes the global lock exclusive and runs alone.
//!
//! Instance-local tables, whose rows (those of its `workflow_id`) a write of one
//! instance may change under its own lock: `messages`, `broadcasts`, `deliveries`,
//! `deliveries_done`, `read_cursors`, `member_status`, `results`, the hop count of
//! the instance's own `workflows` row and the broadcast marks of its `agents`. Every other table and column (registry names, organisations,
//! nodes, leases, contracts and their hit counts, tokens, content-addressed
//! resources) is changed only by global writes, which exclude every other write. Ids taken from a sequence in an
//! instance write grow in commit order within that instance (its lock is held from
//! before the id is taken to the commit), which is what an inbox's cursor relies
//! on; across instances they do not, so no cursor may span instances.

mod allocator;
mod checkpoint;
mod holds;
pub mod postgres;
mod pragmas;
/// The bus between the kernels that share a database (PostgreSQL's LISTEN/NOTIFY;
/// a SQLite file has one kernel and no bus).
pub use postgres::bus;
mod queue;
pub mod schema;
pub mod sql;
mod sqlite;
mod writer;
#[cfg(test)]
mod writer_tests;
// Compiled always, not behind a feature: a feature a dev-dependency turns on
// changes the store's build, and `cargo build` after building an example or a test
// would compile the store and everything above it again. The binary never calls it,
// so the linker leaves it out.
#[doc(hidden)]
pub mod testing;

use domain::error::{Error, Result};
pub use holds::HoldStats;

/// Which of the database's write locks a write takes. On PostgreSQL an instance's
/// writes are serialised by that instance's lock, so writes of different instances
/// (from one node's writer connections or from several nodes) run at once; a write
/// that may touch more than one instance (names, organisations, nodes, leases) is
/// `Global` and runs alone. SQLite has one writer and ignores it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WriteScope {
    /// May touch any row: excludes every other write on the database.
    Global,
    /// Touches only rows of this workflow instance.
    Instance(i64),
}

/// How a job is kept apart from the other jobs of its transaction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Isolation {
    /// In a savepoint of its own: a job that fails rolls back alone, whenever it fails.
    Savepoint,
    /// The job reads and checks before its first write and fails only there, so it
    /// needs no savepoint. A job that fails after it wrote (a write the database
    /// refused) fails its whole transaction, every job of which is then told the
    /// write was not made.
    ChecksFirst,
}

/// What the second half of a piped job ([`Store::write_piped`]) found.
pub enum Then<T> {
    /// The job's work, done by what its first half sent.
    Done(T),
    /// Its first half wrote nothing and cannot finish from what it read (a
    /// broadcast to write first, agents that changed): run this, with that
    /// isolation, as a job of its own now. It runs after the statements of the
    /// piped jobs that followed, and sees their writes.
    Again(Isolation, Whole<T>),
}

/// A job run whole, at once ([`Then::Again`]).
pub type Whole<T> = Box<dyn FnOnce(&Connection) -> Result<T> + Send>;

/// A piped job's second half: reads the answers of what its first half sent.
pub type Rest<T> = Box<dyn FnOnce(&Connection) -> Result<Then<T>> + Send>;

/// The environment variable that names the store when `--store` does not. The
/// better place for a URL with a password: a command line is visible to every user
/// of the machine.
pub const STORE_ENV: &str = "AGENT_WORKER_STORE";

/// The SQLite file in the data dir.
pub const DB_FILE: &str = "agent-worker.db";

/// The node name when neither `--node` nor the host name gives one.
pub const FALLBACK_NODE: &str = "local";
pub use allocator::sqlite_on_mimalloc;
use checkpoint::Checkpointer;
use os::memory;
use queue::{Queue, Taken};
use sql::Connection;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// The most jobs one transaction may carry; bounds the latency a burst adds.
pub(crate) const MAX_BATCH: usize = 512;
/// Reader threads, each with one read connection (opened on its first read).
const READERS: usize = 8;
/// A reader idle this long closes its connection.
const IDLE: Duration = Duration::from_secs(10);

type ReadJob = Box<dyn FnOnce(Result<&Connection, &Error>) + Send>;
pub(crate) type Open = Arc<dyn Fn() -> Result<Connection> + Send + Sync>;

/// Where the kernel's state lives. Its `Debug` and `Display` never show a password.
#[derive(Clone, PartialEq, Eq)]
pub enum Location {
    /// A SQLite file (the data dir's, unless a test says otherwise).
    Sqlite(PathBuf),
    /// A PostgreSQL database, by URL (`postgres://USER:PASSWORD@HOST:PORT/DB`).
    Postgres(String),
}

impl Location {
    /// The default: the SQLite file in the data dir.
    pub fn in_data_dir(data_dir: &Path) -> Location {
        Location::Sqlite(data_dir.join(DB_FILE))
    }

    /// What `--store` (or `AGENT_WORKER_STORE`) names: `sqlite` (the data dir's
    /// file) or a PostgreSQL URL, checked here; an error says how to write one and
    /// never echoes what was given (it may hold a password).
    pub fn parse(s: &str, data_dir: &Path) -> Result<Location, String> {
        let s = s.trim();
        if s.eq_ignore_ascii_case("sqlite") {
            return Ok(Location::in_data_dir(data_dir));
        }
        if postgres::is_url(s) {
            let bad = |why: String| {
                format!(
                    "--store (or AGENT_WORKER_STORE) {}: {why}",
                    postgres::redacted(s)
                )
            };
            let (plain, _) = postgres::tls::split(s).map_err(bad)?;
            plain.parse::<::postgres::Config>().map_err(|e| {
                format!(
                    "--store (or AGENT_WORKER_STORE) {}: not a PostgreSQL URL ({e}); write \
                     postgres://USER:PASSWORD@HOST:PORT/DATABASE",
                    postgres::redacted(s)
                )
            })?;
            return Ok(Location::Postgres(s.to_owned()));
        }
        // Not echoed: it may be a connection string with a password in it.
        Err(
            "--store (or AGENT_WORKER_STORE): use sqlite (the default) or a URL \
             postgres://USER:PASSWORD@HOST:PORT/DATABASE"
                .into(),
        )
    }
}

impl std::fmt::Debug for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Location({self})")
    }
}

impl std::fmt::Display for Location {
    /// For logs: a path, or the URL without its password.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Sqlite(p) => write!(f, "SQLite at {}", p.display()),
            Self::Postgres(url) => write!(f, "PostgreSQL at {}", postgres::redacted(url)),
        }
    }
}

#[derive(Clone)]
pub struct Store {
    inner: Arc<Inner>,
}

struct Inner {
    location: Location,
    /// What this store's PostgreSQL connections call themselves (see `open_as`).
    application: String,
    writers: writer::Writers,
    readers: Arc<Queue<ReadJob>>,
    checkpointer: Option<Arc<Checkpointer>>,
    /// How long the writers' transactions held the write (see `holds.rs`).
    holds: Arc<holds::Holds>,
    /// The same per instance (PostgreSQL).
    instance_holds: Arc<holds::InstanceHolds>,
}

impl Drop for Inner {
    /// The last handle is gone: the threads finish what is queued and stop.
    fn drop(&mut self) {
        self.writers.close();
        self.readers.close();
        if let Some(c) = &self.checkpointer {
            c.close();
        }
    }
}

impl Store {
    /// Opens (creating if needed) a SQLite database file.
    pub fn open(path: &Path) -> Result<Self> {
        Self::open_at(&Location::Sqlite(path.to_owned()))
    }

    /// [`Store::open_as`] for a node of the default name.
    pub fn open_at(location: &Location) -> Result<Self> {
        Self::open_as(location, FALLBACK_NODE)
    }

    /// Opens the store at `location` for node `node`, applies migrations, and starts
    /// the writer and reader threads. On PostgreSQL the writer connects (and
    /// migrates) on its own thread, and this waits for it; its connection holds the
    /// node's lock, so a second kernel of the same name on the database is refused.
    pub fn open_as(location: &Location, node: &str) -> Result<Self> {
        // Every connection of this store says which kernel it serves, so the writer
        // can tell its own stale session from another kernel's.
        let application = format!("agent-worker/{}", uuid::Uuid::now_v7().simple());
        let (writer_conn, checkpointer, reopen, reconnect, instance_writer, read): (
            _,
            _,
            Open,
            Open,
            Open,
            _,
        ) = match location {
            Location::Sqlite(path) => {
                let (conn, checkpointer) = sqlite::open_writer(path)?;
                let path = path.clone();
                let open: Open = Arc::new(move || Ok(sqlite::open_reader(&path)?));
                // A SQLite connection never breaks, so the writer never reopens it.
                let never: Open =
                    Arc::new(|| Err(Error::internal("the SQLite writer is never reopened")));
                let read = sqlite::BEGIN_READ;
                (
                    Some(conn),
                    Some(checkpointer),
                    open,
                    never.clone(),
                    never,
                    read,
                )
            }
            Location::Postgres(url) => {
                let (u, w, a, b) = (
                    url.clone(),
                    url.clone(),
                    application.clone(),
                    application.clone(),
                );
                let n = node.to_owned();
                let open: Open = Arc::new(move || postgres::connect(&u, &a));
                let writer: Open = Arc::new(move || postgres::connect_writer(&w, &b, &n));
                let (u, a, n) = (url.clone(), application.clone(), node.to_owned());
                let instances: Open =
                    Arc::new(move || postgres::connect_instance_writer(&u, &a, &n));
                (None, None, open, writer, instances, postgres::BEGIN_READ)
            }
        };
        let shared = writer::Shared {
            postgres: matches!(location, Location::Postgres(_)),
            holds: Arc::default(),
            instances: Arc::default(),
        };
        // The first writer's connection holds the node's lock; the others write
        // while it does.
        let writers = writer::start(writer_conn, reconnect, instance_writer, &shared)?;
        let readers = Arc::new(Queue::new());
        for i in 0..READERS {
            let (rx, open) = (readers.clone(), reopen.clone());
            std::thread::Builder::new()
                .name(format!("store-reader-{i}"))
                .spawn(move || reader_loop(&*open, &rx, read))
                .map_err(|e| Error::internal(format!("cannot start a reader thread: {e}")))?;
        }
        Ok(Self {
            inner: Arc::new(Inner {
                location: location.clone(),
                application,
                writers,
                readers,
                checkpointer,
                holds: shared.holds,
                instance_holds: shared.instances,
            }),
        })
    }

    /// How long the writers' transactions lasted since the last call (or the
    /// open), from the write's start (the database's locks taken, on PostgreSQL) to
    /// its commit: what other writers wait behind. For the benchmarks.
    pub fn take_write_holds(&self) -> HoldStats {
        self.inner.holds.take()
    }

    /// Where the state lives.
    pub fn location(&self) -> &Location {
        &self.inner.location
    }

    /// Whether one kernel has the store to itself (SQLite: a file one process
    /// opens), so that no other node can be alive.
    pub fn is_exclusive(&self) -> bool {
        matches!(self.inner.location, Location::Sqlite(_))
    }

    /// Whether the database runs the functions its migrations made (what
    /// [`sql::Connection::server_functions`] says of each of its connections).
    pub fn server_functions(&self) -> bool {
        matches!(self.inner.location, Location::Postgres(_))
    }

    /// Starts this store's end of the bus between the kernels that share it: on
    /// PostgreSQL, LISTEN/NOTIFY on connections of its own; on SQLite, which one
    /// kernel has to itself, nothing (None).
    pub fn bus(&self, handlers: postgres::bus::Handlers) -> Result<Option<postgres::bus::Bus>> {
        match &self.inner.location {
            Location::Sqlite(_) => Ok(None),
            Location::Postgres(url) => {
                postgres::bus::Bus::start(url, &self.inner.application, handlers).map(Some)
            }
        }
    }

    /// Runs `f` in its own savepoint inside a writer's next transaction under the
    /// global lock, and answers after that transaction committed.
    pub async fn write<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T> + Send + 'static,
    {
        self.write_as(WriteScope::Global, Isolation::Savepoint, f)
            .await
    }

    /// [`Store::write`] under `scope`'s lock with `isolation` (see `writer.rs`).
    /// A job of [`WriteScope::Instance`] must touch only that instance's rows
    /// (the tables the crate's documentation lists as instance-local); its ids
    /// are allocated under the instance's lock, so they grow in commit order
    /// within the instance.
    pub async fn write_as<T, F>(&self, scope: WriteScope, isolation: Isolation, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T> + Send + 'static,
    {
        self.queue_job(|tx| writer::job(scope, isolation, f, tx))
            .await
    }

    /// A job in two halves, piped with the jobs around it on PostgreSQL: `first`
    /// sends its statements (it may also read, which waits for their answers) and
    /// gives the [`Rest`], which reads their answers after the next piped jobs of
    /// the transaction sent theirs: one round trip for them all, where a job
    /// alone waits for each. So the rest sends nothing: what needs another
    /// statement asks for [`Then::Again`].
    ///
    /// The contract: what `first` writes takes effect only where the rest gives
    /// [`Then::Done`]; where it gives `Again`, those writes did nothing (they
    /// carry their checks in SQL). There is no savepoint to undo them: the jobs
    /// after it have run since. So an error from the rest after `first` wrote,
    /// or a statement the server refuses, fails the whole transaction (every job
    /// of it is told the write was not made); a job that may refuse reads before
    /// it writes, or asks for `Again`. On SQLite both halves run at once, in a
    /// savepoint, as one job.
    pub async fn write_piped<T, F>(&self, scope: WriteScope, first: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<Rest<T>> + Send + 'static,
    {
        self.queue_job(|tx| writer::piped(scope, first, tx)).await
    }

    /// Queues the job `make` gives on its writer and waits for its answer.
    async fn queue_job<T>(
        &self,
        make: impl FnOnce(tokio::sync::oneshot::Sender<Result<T>>) -> writer::Job,
    ) -> Result<T> {
        let (tx, rx) = tokio::sync::oneshot::channel::<Result<T>>();
        if self.inner.writers.push(make(tx)).is_err() {
            return Err(Error::internal("the store writer has stopped"));
        }
        rx.await
            .map_err(|_| Error::internal("the store writer dropped a job"))?
    }

    /// How long each instance's lock was held since the last call, per instance
    /// (PostgreSQL; empty on SQLite). A transaction counts for each instance it
    /// locked. For the benchmarks.
    pub fn take_instance_holds(&self) -> Vec<(i64, HoldStats)> {
        self.inner.instance_holds.take()
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
                    "the store could not begin a read: {e}"
                ))),
                // Inside one read transaction (begun by the reader), so a reader that
                // runs several queries sees one snapshot and never half of a commit
                // that landed between them.
                Ok(conn) => std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(conn)))
                    .unwrap_or_else(|_| Err(Error::internal("a store read panicked"))),
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

/// Begins a transaction on `conn`. A connection found broken on the way (PostgreSQL
/// restarted, or dropped it) is opened again and the begin tried once more: no job
/// has run yet, so nothing is lost or done twice. A begin that failed half way (its
/// lock timed out) is rolled back, so the next one starts clean.
pub(crate) fn begin_on(
    conn: &mut Connection,
    sql: &str,
    reopen: &dyn Fn() -> Result<Connection>,
) -> Result<()> {
    for attempt in 0..2 {
        if conn.is_closed() {
            *conn = reopen()?;
        }
        match exec(conn, sql) {
            Ok(()) => return Ok(()),
            Err(e) => {
                let _ = conn.execute_batch("ROLLBACK");
                if attempt == 1 || !conn.is_closed() {
                    return Err(e.into());
                }
            }
        }
    }
    unreachable!("the loop returns")
}

/// A reader thread: opens its connection on the first job and closes it when idle
/// (or when it broke: a PostgreSQL server restarted).
///
/// Why close: an open connection holds its parsed schema and cached statements
/// (about 200 KiB each, eight readers) for as long as the kernel is idle; opening
/// one again costs well under a millisecond, once per reader per busy spell.
fn reader_loop(open: &dyn Fn() -> Result<Connection>, rx: &Queue<ReadJob>, read: &str) {
    let mut conn: Option<Connection> = None;
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
        let begun = match conn.as_mut() {
            Some(c) => begin_on(c, read, open),
            None => open().and_then(|mut c| {
                let out = begin_on(&mut c, read, open);
                conn = Some(c);
                out
            }),
        };
        match (begun, conn.as_ref()) {
            (Ok(()), Some(c)) => {
                job(Ok(c));
                let _ = c.execute_batch("COMMIT");
            }
            (Err(e), _) => {
                job(Err(&e));
                if conn.as_ref().is_some_and(Connection::is_closed) {
                    conn = None;
                }
            }
            (Ok(()), None) => unreachable!("a begun read has its connection"),
        }
    }
}

/// Runs one of the writer's own statements: from SQLite's statement cache (no parse
/// per job), or as one simple query on PostgreSQL (transaction control).
pub(crate) fn exec(conn: &Connection, sql: &str) -> sql::Result<()> {
    if conn.sqlite().is_some() {
        conn.prepare_cached(sql)?.execute(()).map(|_| ())
    } else {
        conn.execute_batch(sql)
    }
}

#[cfg(test)]
mod tests {
    /// `--store`'s words: `sqlite` is the data dir's file, a PostgreSQL URL is kept
    /// as given (shown without its password), anything else is refused.
    #[test]
    fn a_location_from_its_words() {
        let dir = Path::new("/tmp/d");
        assert_eq!(
            Location::parse(" SQLite ", dir).unwrap(),
            Location::Sqlite(dir.join(DB_FILE))
        );
        let url = "postgres://aw:s3cret@127.0.0.1:5432/team";
        assert_eq!(
            Location::parse(url, dir).unwrap(),
            Location::Postgres(url.into())
        );
        assert!(Location::parse("mysql://h/db", dir).is_err());
    }

    use super::*;

    /// Migration 12 moves acked deliveries out of `deliveries` and keeps the rest.
    #[tokio::test]
    async fn acked_deliveries_move_to_their_own_table() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.db");
        {
            let c = rusqlite::Connection::open(&path).unwrap();
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
                    .query_map((), |r| r.get(0))?
                    .collect::<sql::Result<_>>()?;
                let done: Vec<String> = c
                    .prepare("SELECT recipient || ':' || message_id || ':' || read_by || ':' || updated_at FROM deliveries_done")?
                    .query_map((), |r| r.get(0))?
                    .collect::<sql::Result<_>>()?;
                Ok((open, done))
            })
            .await
            .unwrap();
        assert_eq!(open, vec!["a:m2:pending", "b:m1:deferred"]);
        assert_eq!(done, vec!["a:m1:run-1:5"]);
    }
}
