//! The store's writers: threads that each own a write connection and
//! group-commit the jobs of their queue.
//!
//! SQLite has one writer, which takes every job. PostgreSQL has [`WRITERS`]: the
//! first takes the [`WriteScope::Global`] jobs, the others the
//! [`WriteScope::Instance`] jobs, each instance always on the same one, so one
//! instance's jobs of one node are in one queue and commit in that order. A
//! transaction takes the database's global lock (exclusive when a job of it is
//! global, shared otherwise) and then its instances' locks by ascending key
//! (`postgres::begin_write`): writes of different instances, of this node or of
//! others, run at once; a global write runs alone.
//!
//! A job runs in a savepoint of its own ([`Isolation::Savepoint`]), or without
//! one on PostgreSQL when it checks before it writes ([`Isolation::ChecksFirst`]):
//! such a job that fails having written nothing leaves the transaction as it was;
//! one that fails after a write, or after a statement the server refused (which
//! aborts a PostgreSQL transaction), has the writer roll back the whole
//! transaction and tell every job of it that the write was not made.
//!
//! A piped job ([`crate::Store::write_piped`]) comes in two halves. On
//! PostgreSQL the writer runs the first halves of the piped jobs that follow one
//! another in a batch, whose statements go out without waiting, then reads all
//! their answers in one round trip and runs the second halves in order: where
//! each job alone waited a round trip for the one before it, a run of them waits
//! for one. A job that is not piped, and the commit, come after the answers
//! were read.

use crate::holds::{Holds, InstanceHolds};
use crate::queue::{Queue, Taken};
use crate::sql::Connection;
use crate::{Isolation, MAX_BATCH, Open, Rest, Then, WriteScope, begin_on, exec, postgres, sqlite};
use domain::error::{Error, Result};
use os::memory;
use std::sync::Arc;
use std::time::Instant;

/// Writer connections per node on PostgreSQL: one for global writes, the rest
/// shared by the instances.
pub(crate) const WRITERS: usize = 4;

/// Why a transaction wrote nothing.
#[derive(Clone, Debug)]
pub(crate) enum Failed {
    /// It could not begin.
    Begin(String),
    /// Its commit failed.
    Commit(String),
    /// A job of it failed after it wrote (or after a refused statement), so the
    /// whole transaction was rolled back.
    RolledBack,
}

impl Failed {
    fn error(&self) -> Error {
        match self {
            Self::Begin(e) => Error::unavailable(format!("the store could not begin a write: {e}")),
            Self::Commit(e) => Error::internal(format!("commit failed: {e}")),
            Self::RolledBack => Error::unavailable(
                "the write was not made: another write of the same database transaction failed \
                 after it had begun writing, and the whole transaction was rolled back; retry it",
            ),
        }
    }
}

type Finish = Box<dyn FnOnce(Result<(), Failed>) + Send>;
/// What a job left: how to answer its caller once the transaction ended, and
/// whether it spoiled the transaction (which must then be rolled back).
pub(crate) struct Ran {
    finish: Finish,
    spoiled: bool,
}
/// A job's work on the writer's connection, or `None` when the transaction failed
/// before the job ran.
type Run = Box<dyn FnOnce(Option<&Connection>) -> Begun + Send>;
/// A piped job's second half, as [`Run`].
type Reads = Box<dyn FnOnce(Option<&Connection>) -> Ran + Send>;

/// How far a job got when it was run.
enum Begun {
    /// All of it ran.
    Ran(Ran),
    /// A piped job sent its statements: this reads their answers.
    Sent(Reads),
}

pub(crate) struct Job {
    scope: WriteScope,
    /// Piped: its statements go out without waiting for answers (PostgreSQL).
    piped: bool,
    run: Run,
}

/// How a job whose work ended as `out` (`None`: never run) is answered once its
/// transaction ends.
fn answer<T: Send + 'static>(
    out: Option<Result<T>>,
    spoiled: bool,
    tx: tokio::sync::oneshot::Sender<Result<T>>,
) -> Ran {
    let finish: Finish = Box::new(move |ended: Result<(), Failed>| {
        let answer = match (ended, out) {
            (Ok(()), Some(out)) => out,
            // Its own failure: nothing of it was written either way.
            (Err(Failed::RolledBack), Some(Err(e))) => Err(e),
            (Err(why), _) => Err(why.error()),
            (Ok(()), None) => Err(Error::internal("a store job was committed unrun")),
        };
        let _ = tx.send(answer);
    });
    Ran { finish, spoiled }
}

/// How a job is answered whose work is `run` on `conn` (giving its outcome and
/// whether it spoiled the transaction), or that never ran (`conn` is None).
fn answered<T: Send + 'static>(
    conn: Option<&Connection>,
    tx: tokio::sync::oneshot::Sender<Result<T>>,
    run: impl FnOnce(&Connection) -> (Result<T>, bool),
) -> Ran {
    match conn {
        None => answer(None, false, tx),
        Some(c) => {
            let (out, spoiled) = run(c);
            answer(Some(out), spoiled, tx)
        }
    }
}

/// `f` as a job in `scope` with `isolation`, answering on `tx` after the commit.
pub(crate) fn job<T, F>(
    scope: WriteScope,
    isolation: Isolation,
    f: F,
    tx: tokio::sync::oneshot::Sender<Result<T>>,
) -> Job
where
    T: Send + 'static,
    F: FnOnce(&Connection) -> Result<T> + Send + 'static,
{
    let run: Run = Box::new(move |conn: Option<&Connection>| {
        Begun::Ran(answered(conn, tx, |c| run_job(c, isolation, f)))
    });
    Job {
        scope,
        piped: false,
        run,
    }
}

/// A piped job ([`crate::Store::write_piped`]): on PostgreSQL `first` runs and its
/// statements go out; the [`Rest`] it gives reads their answers once the piped
/// jobs after it sent theirs. On SQLite, whose statements are answered at once,
/// both halves (and the job again, if asked) run in one savepoint.
pub(crate) fn piped<T, F>(
    scope: WriteScope,
    first: F,
    tx: tokio::sync::oneshot::Sender<Result<T>>,
) -> Job
where
    T: Send + 'static,
    F: FnOnce(&Connection) -> Result<Rest<T>> + Send + 'static,
{
    let run: Run = Box::new(move |conn: Option<&Connection>| {
        let Some(c) = conn else {
            return Begun::Ran(answer(None, false, tx));
        };
        if c.sqlite().is_some() {
            let (out, spoiled) = run_job(c, Isolation::Savepoint, |c| whole(c, first));
            return Begun::Ran(answer(Some(out), spoiled, tx));
        }
        c.begin_job();
        match guarded(c, first) {
            Err(e) => {
                let spoiled = c.job_wrote() || c.tx_aborted();
                Begun::Ran(answer(Some(Err(e)), spoiled, tx))
            }
            Ok(rest) => {
                let wrote = c.job_wrote();
                Begun::Sent(Box::new(move |conn: Option<&Connection>| {
                    answered(conn, tx, |c| read_piped(c, rest, wrote))
                }))
            }
        }
    });
    Job {
        scope,
        piped: true,
        run,
    }
}

/// A piped job's both halves, one after the other.
fn whole<T>(c: &Connection, first: impl FnOnce(&Connection) -> Result<Rest<T>>) -> Result<T> {
    match first(c)?(c)? {
        Then::Done(t) => Ok(t),
        Then::Again(_, f) => f(c),
    }
}

/// A piped job's second half, after a first half that `wrote` (or not); true when
/// the transaction can no longer commit. A refusal after a write spoils it: the
/// jobs after it have run since, so no savepoint can undo that write alone.
fn read_piped<T>(c: &Connection, rest: Rest<T>, wrote: bool) -> (Result<T>, bool) {
    c.begin_job();
    match guarded(c, rest) {
        Ok(Then::Done(t)) => (Ok(t), c.tx_aborted()),
        Ok(Then::Again(isolation, f)) => run_job(c, isolation, f),
        Err(e) => (Err(e), wrote || c.job_wrote() || c.tx_aborted()),
    }
}

/// Runs `f` as `isolation` says; true when the transaction can no longer commit.
fn run_job<T>(
    conn: &Connection,
    isolation: Isolation,
    f: impl FnOnce(&Connection) -> Result<T>,
) -> (Result<T>, bool) {
    if isolation == Isolation::Savepoint || conn.sqlite().is_some() {
        let out = in_savepoint(conn, f);
        return (out, conn.tx_aborted());
    }
    conn.begin_job();
    let out = guarded(conn, f);
    if out.is_ok() {
        // Its deferred writes are read now, so that one of them failing fails this
        // job (and its transaction), not the next job that reads the connection.
        return match conn.settle_deferred() {
            Ok(()) => (out, conn.tx_aborted()),
            Err(e) => (Err(e.into()), true),
        };
    }
    // What it sent and did not read may have failed (and aborted the transaction).
    let _ = conn.settle_deferred();
    let spoiled = conn.job_wrote() || conn.tx_aborted();
    (out, spoiled)
}

fn guarded<T>(conn: &Connection, f: impl FnOnce(&Connection) -> Result<T>) -> Result<T> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(conn))).unwrap_or_else(|_| {
        Err(Error::internal(
            "a store job panicked; its changes were rolled back",
        ))
    })
}

/// Runs a job in a savepoint of its own. On PostgreSQL the savepoint goes out with
/// the job's first statement, and the release reads the answers of the job's
/// deferred writes ([`crate::sql::Statement::execute_later`]): a job whose writes
/// failed there rolls back like one that failed itself.
fn in_savepoint<T>(conn: &Connection, f: impl FnOnce(&Connection) -> Result<T>) -> Result<T> {
    if conn.sqlite().is_some() {
        exec(conn, "SAVEPOINT job")?;
    } else {
        conn.execute_batch_later("SAVEPOINT job")?;
    }
    let out = match guarded(conn, f) {
        Ok(v) => match release_job(conn) {
            Ok(()) => return Ok(v),
            Err(e) => Err(e.into()),
        },
        Err(e) => Err(e),
    };
    conn.discard_deferred();
    exec(conn, "ROLLBACK TO job")?;
    exec(conn, "RELEASE job")?;
    out
}

/// Releases a job's savepoint. On PostgreSQL, when every statement the job sent
/// was answered (its last one waited for its answer, which came after theirs) and
/// none failed (a job may go on past a refused statement), the release goes out
/// with the next statement instead of costing a round trip of its own: it cannot
/// fail then, the transaction being sound and the savepoint there. Otherwise it
/// reads the answers of the job's deferred writes, and fails if any did.
fn release_job(conn: &Connection) -> crate::sql::Result<()> {
    if conn.sqlite().is_none() && !conn.has_deferred() && !conn.tx_aborted() {
        return conn.execute_batch_later("RELEASE job");
    }
    exec(conn, "RELEASE job")
}

/// The queues of the writers, and where a job goes.
pub(crate) struct Writers {
    queues: Vec<Arc<Queue<Job>>>,
}

impl Writers {
    /// Queues `job` on its scope's writer; gives it back when the store is closed.
    pub(crate) fn push(&self, job: Job) -> Result<(), Job> {
        let n = self.queues.len();
        let i = match job.scope {
            WriteScope::Instance(id) if n > 1 => 1 + id.rem_euclid(n as i64 - 1) as usize,
            _ => 0,
        };
        self.queues[i].push(job)
    }

    pub(crate) fn close(&self) {
        for q in &self.queues {
            q.close();
        }
    }
}

/// What every writer of a store shares.
#[derive(Clone)]
pub(crate) struct Shared {
    pub(crate) postgres: bool,
    pub(crate) holds: Arc<Holds>,
    pub(crate) instances: Arc<InstanceHolds>,
}

/// Starts the writers. The first has `first` (SQLite's connection) or connects
/// with `open_first` and migrates the database (PostgreSQL), and this waits for
/// it; the others (PostgreSQL only) connect with `open` on their first job.
pub(crate) fn start(
    first: Option<Connection>,
    open_first: Open,
    open: Open,
    shared: &Shared,
) -> Result<Writers> {
    let count = if shared.postgres { WRITERS } else { 1 };
    let queues: Vec<Arc<Queue<Job>>> = (0..count).map(|_| Arc::new(Queue::new())).collect();
    let (ready_tx, ready_rx) = std::sync::mpsc::channel::<Result<()>>();
    let (rx, s, reopen) = (queues[0].clone(), shared.clone(), open_first.clone());
    spawn(0, move || {
        let conn = match first {
            Some(c) => c,
            None => match open_first().and_then(|c| postgres::migrate(&c).map(|()| c)) {
                Ok(c) => c,
                Err(e) => {
                    let _ = ready_tx.send(Err(e));
                    return;
                }
            },
        };
        let _ = ready_tx.send(Ok(()));
        writer_loop(Some(conn), &rx, &s, &*reopen);
    })?;
    ready_rx
        .recv()
        .map_err(|_| Error::internal("the store writer stopped while starting"))??;
    for (i, rx) in queues.iter().enumerate().skip(1) {
        let (rx, s, open) = (rx.clone(), shared.clone(), open.clone());
        spawn(i, move || writer_loop(None, &rx, &s, &*open))?;
    }
    Ok(Writers { queues })
}

fn spawn(i: usize, f: impl FnOnce() + Send + 'static) -> Result<()> {
    std::thread::Builder::new()
        .name(format!("store-writer-{i}"))
        .spawn(f)
        .map(|_| ())
        .map_err(|e| Error::internal(format!("cannot start a writer thread: {e}")))
}

/// The most instances whose locks one transaction takes: more would hold up each
/// of them behind the busiest, and fill PostgreSQL's shared lock table (64 locks
/// per connection by default) when several nodes write many instances at once.
const MAX_INSTANCES: usize = 16;

/// How many of the leading jobs of `scopes` touch at most `max` instances (at
/// least one job, whatever it touches).
pub(crate) fn within_instances(scopes: impl Iterator<Item = WriteScope>, max: usize) -> usize {
    let mut seen: Vec<i64> = Vec::new();
    let mut n = 0;
    for scope in scopes {
        if let WriteScope::Instance(id) = scope
            && !seen.contains(&id)
        {
            if seen.len() == max && n > 0 {
                break;
            }
            seen.push(id);
        }
        n += 1;
    }
    n
}

/// The locks a transaction takes: which jobs may join it once it has begun.
pub(crate) struct Locks {
    postgres: bool,
    exclusive: bool,
    /// The instances whose jobs it carries, by ascending lock key.
    instances: Vec<i64>,
}

impl Locks {
    /// The locks of a batch whose jobs have these scopes.
    pub(crate) fn of(scopes: impl IntoIterator<Item = WriteScope>, postgres: bool) -> Self {
        let (mut instances, mut exclusive) = (Vec::new(), false);
        for scope in scopes {
            match scope {
                WriteScope::Global => exclusive = true,
                // SQLite's one writer holds the whole database: no instance locks.
                WriteScope::Instance(id) if postgres => instances.push(id),
                WriteScope::Instance(_) => {}
            }
        }
        instances.sort_by_key(|id| (postgres::instance_key(*id), *id));
        instances.dedup();
        Self {
            postgres,
            exclusive,
            instances,
        }
    }

    /// Whether a job of `scope` is covered by the locks taken.
    pub(crate) fn covers(&self, scope: WriteScope) -> bool {
        match scope {
            _ if !self.postgres || self.exclusive => true,
            WriteScope::Global => false,
            WriteScope::Instance(id) => self.instances.contains(&id),
        }
    }

    pub(crate) fn begin(&self) -> String {
        if !self.postgres {
            return sqlite::BEGIN_WRITE.to_owned();
        }
        let mut keys: Vec<i32> = self
            .instances
            .iter()
            .map(|id| postgres::instance_key(*id))
            .collect();
        keys.dedup();
        postgres::begin_write(self.exclusive, &keys)
    }
}

fn writer_loop(
    mut conn: Option<Connection>,
    rx: &Queue<Job>,
    shared: &Shared,
    reopen: &dyn Fn() -> Result<Connection>,
) {
    // Memory goes back when a burst is over, not after some seconds without any
    // job: the node's heartbeat writes every few seconds (see `GiveBack`).
    let mut give_back = memory::GiveBack::new(Instant::now());
    loop {
        let mut batch = match rx.take(MAX_BATCH, give_back.wait(Instant::now())) {
            Taken::Closed => return,
            Taken::Idle => {
                if let Some(c) = &conn {
                    release(c);
                }
                give_back.given(Instant::now());
                continue;
            }
            Taken::Items(batch) => batch,
        };
        give_back.worked();
        // SQLite's one writer locks no instance: its batches stay whole.
        let carried = within_instances(batch.iter().map(|j| j.scope), MAX_INSTANCES);
        if shared.postgres && carried < batch.len() {
            rx.put_back(batch.split_off(carried));
        }
        let locks = Locks::of(batch.iter().map(|j| j.scope), shared.postgres);
        let begun = match conn.as_mut() {
            Some(c) => begin_on(c, &locks.begin(), reopen),
            None => reopen().and_then(|mut c| {
                let out = begin_on(&mut c, &locks.begin(), reopen);
                conn = Some(c);
                out
            }),
        };
        let Some(c) = conn.as_ref().filter(|_| begun.is_ok()) else {
            let e = begun.err().map_or_else(String::new, |e| e.to_string());
            tracing::error!("store transaction could not begin: {e}");
            end(batch, Vec::new(), &Err(Failed::Begin(e)));
            continue;
        };
        // Jobs queued while the write began (on PostgreSQL, while it waited for
        // locks other transactions hold) join this transaction when its locks cover
        // them: under contention batches grow instead of each paying a transaction.
        if batch.len() < MAX_BATCH {
            batch.extend(rx.take_ready(MAX_BATCH - batch.len(), |j| locks.covers(j.scope)));
        }
        let began = Instant::now();
        let (finishers, unrun, spoiled) = run_batch(c, batch);
        let ended = if spoiled {
            let _ = c.execute_batch("ROLLBACK");
            tracing::warn!("a store job failed after it wrote: its transaction was rolled back");
            Err(Failed::RolledBack)
        } else {
            exec(c, "COMMIT").map_err(|e| {
                let _ = c.execute_batch("ROLLBACK");
                tracing::error!("store commit failed: {e}");
                Failed::Commit(e.to_string())
            })
        };
        let held = began.elapsed();
        shared.holds.record(held);
        shared.instances.record(&locks.instances, held);
        end(unrun, finishers, &ended);
    }
}

/// Runs the jobs in order until one spoils the transaction; the rest are not run.
/// Consecutive piped jobs send their statements one after another, and their
/// answers are read together, before the next job that is not piped and before
/// the commit.
fn run_batch(conn: &Connection, batch: Vec<Job>) -> (Vec<Finish>, Vec<Job>, bool) {
    let mut finishers = Vec::with_capacity(batch.len());
    let mut sent: Vec<Reads> = Vec::new();
    let mut jobs = batch.into_iter().peekable();
    while let Some(job) = jobs.next() {
        let spoiled = match (job.run)(Some(conn)) {
            Begun::Ran(ran) => {
                finishers.push(ran.finish);
                ran.spoiled
            }
            Begun::Sent(reads) => {
                sent.push(reads);
                false
            }
        };
        if spoiled {
            finish_unread(sent, &mut finishers);
            return (finishers, jobs.collect(), true);
        }
        if jobs.peek().is_none_or(|j| !j.piped) && read_sent(conn, sent.drain(..), &mut finishers) {
            return (finishers, jobs.collect(), true);
        }
    }
    (finishers, Vec::new(), false)
}

/// Reads the answers of the piped jobs `sent`, in order; true when the transaction
/// can no longer commit. A statement of theirs that the server refused fails them
/// all (the job it was is not known by then: piped jobs guard their writes in
/// SQL, so only a cancel or a lack of resources makes one fail).
fn read_sent(
    conn: &Connection,
    sent: impl Iterator<Item = Reads>,
    finishers: &mut Vec<Finish>,
) -> bool {
    let mut sent = sent.peekable();
    if sent.peek().is_none() {
        return false;
    }
    if let Err(e) = conn.settle_deferred() {
        tracing::warn!("a statement of piped store jobs failed: {e}");
        finish_unread(sent.collect(), finishers);
        return true;
    }
    for reads in sent.by_ref() {
        let ran = reads(Some(conn));
        finishers.push(ran.finish);
        if ran.spoiled {
            finish_unread(sent.collect(), finishers);
            return true;
        }
    }
    false
}

/// Piped jobs whose answers will not be read: they are told how the transaction ended.
fn finish_unread(sent: Vec<Reads>, finishers: &mut Vec<Finish>) {
    finishers.extend(sent.into_iter().map(|reads| reads(None).finish));
}

/// Answers every job of a transaction that ended as `ended`.
fn end(unrun: Vec<Job>, finishers: Vec<Finish>, ended: &Result<(), Failed>) {
    let unrun = unrun.into_iter().map(|j| match (j.run)(None) {
        Begun::Ran(ran) => ran.finish,
        Begun::Sent(reads) => reads(None).finish,
    });
    for finish in finishers.into_iter().chain(unrun) {
        finish(ended.clone());
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
    if let Some(c) = conn.sqlite() {
        let _ = c.release_memory();
    }
    memory::give_back_with_c_heap();
}
