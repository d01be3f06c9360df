//! The one way the kernel speaks SQL: a connection, statements, rows and parameters
//! that do not name the database engine underneath.
//!
//! Why a seam of our own: every room of the kernel runs SQL inside the store's jobs,
//! and until now each named `rusqlite` in its signatures, so the engine was spelled
//! out in 30 files. Here the kernel sees one vocabulary, shaped after rusqlite's (the
//! closures, `query_row`, `query_map`, `optional`, the `params!` macro, the `?N`
//! placeholders), so a second engine is added in this file and the store, not in
//! every query.
//!
//! Values are dynamically typed, as in SQLite: a parameter is anything rusqlite can
//! bind ([`ToSql`]) and a column is read with rusqlite's [`FromSql`] conversions. A
//! stricter engine converts at this seam, from the dynamic value to the column's
//! declared type, so callers never care which engine stores their integers.

mod params;
mod postgres;

pub use params::Params;
pub use rusqlite::ToSql;
pub use rusqlite::params;
use rusqlite::types::Value;
pub use rusqlite::types::{FromSql, ValueRef};

/// A fault of the database or of reading a column as the type a caller asked for.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// `query_row` found no row (see [`OptionalExtension`]).
    #[error("the query returned no row")]
    NoRow,
    #[error(transparent)]
    Sqlite(rusqlite::Error),
    /// What PostgreSQL said (its SQLSTATE code and message), and the statement it
    /// said it about (never the parameters, which may be anyone's text).
    #[error("PostgreSQL: {message}{}", sql.as_deref().map(|s| format!(" (in: {s})")).unwrap_or_default())]
    Postgres {
        code: Option<String>,
        message: String,
        sql: Option<String>,
    },
    /// A value that cannot be given or read as the type asked for.
    #[error("{0}")]
    Conversion(String),
}

impl From<rusqlite::Error> for Error {
    fn from(e: rusqlite::Error) -> Self {
        match e {
            rusqlite::Error::QueryReturnedNoRows => Self::NoRow,
            e => Self::Sqlite(e),
        }
    }
}

impl From<rusqlite::types::FromSqlError> for Error {
    fn from(e: rusqlite::types::FromSqlError) -> Self {
        Self::Sqlite(e.into())
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// `query_row(...).optional()`: no row is `None`, not an error.
pub trait OptionalExtension<T> {
    fn optional(self) -> Result<Option<T>>;
}

impl<T> OptionalExtension<T> for Result<T> {
    fn optional(self) -> Result<Option<T>> {
        match self {
            Ok(v) => Ok(Some(v)),
            Err(Error::NoRow) => Ok(None),
            Err(e) => Err(e),
        }
    }
}

/// A connection owned by one store thread; jobs borrow it for their statements.
pub struct Connection {
    engine: Engine,
}

enum Engine {
    Sqlite(rusqlite::Connection),
    Postgres(Box<postgres::Conn>),
}

impl Connection {
    pub(crate) fn sqlite_engine(inner: rusqlite::Connection) -> Self {
        Self {
            engine: Engine::Sqlite(inner),
        }
    }

    pub(crate) fn postgres_engine(client: crate::postgres::client::Client) -> Self {
        Self {
            engine: Engine::Postgres(Box::new(postgres::Conn::new(client))),
        }
    }

    /// The SQLite connection underneath, for the store's own upkeep (pragmas,
    /// checkpoints, memory); never for the kernel's queries.
    pub(crate) fn sqlite(&self) -> Option<&rusqlite::Connection> {
        match &self.engine {
            Engine::Sqlite(c) => Some(c),
            Engine::Postgres(_) => None,
        }
    }

    /// How long each PostgreSQL statement may go unanswered from now on (a
    /// migration's may take longer than the kernel's own); nothing on SQLite.
    pub(crate) fn set_statement_bound(&self, bound: std::time::Duration) {
        if let Engine::Postgres(c) = &self.engine {
            c.set_bound(bound);
        }
    }

    /// The connection is gone (a PostgreSQL server restarted or dropped it) and must
    /// be opened again; a SQLite connection never is.
    pub fn is_closed(&self) -> bool {
        match &self.engine {
            Engine::Sqlite(_) => false,
            Engine::Postgres(c) => c.is_closed(),
        }
    }

    /// Whether the database runs the functions its migrations made (PostgreSQL's
    /// `channel_send`, migration 19): a caller may then do in one statement what it
    /// otherwise does in several. SQLite has none.
    pub fn server_functions(&self) -> bool {
        matches!(self.engine, Engine::Postgres(_))
    }

    /// The time now in milliseconds since the epoch, by the database's clock on
    /// PostgreSQL (one clock for every kernel on it, whatever their machines' clocks
    /// say), by this machine's on SQLite (one kernel).
    pub fn now_ms(&self) -> Result<i64> {
        match &self.engine {
            Engine::Sqlite(_) => Ok(domain::clock::now_ms()),
            Engine::Postgres(_) => self.query_row(
                "SELECT CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS BIGINT)",
                (),
                |r| r.get(0),
            ),
        }
    }

    /// Runs one statement; answers how many rows it changed.
    pub fn execute(&self, sql: &str, params: impl Params) -> Result<usize> {
        self.prepare(sql)?.execute(params)
    }

    /// Runs one statement whose answer nobody reads (see [`Statement::execute_later`]).
    pub fn execute_later(&self, sql: &str, params: impl Params) -> Result<()> {
        self.prepare_cached(sql)?.execute_later(params)
    }

    /// Opens or ends a savepoint without waiting for the answer on PostgreSQL (read
    /// with the next statement's, whose error it becomes); at once on SQLite.
    pub fn execute_batch_later(&self, sql: &'static str) -> Result<()> {
        match &self.engine {
            Engine::Sqlite(c) => Ok(c.execute_batch(sql)?),
            Engine::Postgres(c) => {
                c.batch_later(sql);
                Ok(())
            }
        }
    }

    /// Forgets the answers of deferred statements before their job rolls back.
    pub(crate) fn discard_deferred(&self) {
        if let Engine::Postgres(c) = &self.engine {
            c.discard_deferred();
        }
    }

    /// Says that the job wrote, where the store cannot tell: a SELECT that calls a
    /// function which changes rows. A job of [`crate::Isolation::ChecksFirst`] that
    /// fails after it then fails its whole transaction, as after any other write.
    pub fn note_write(&self) {
        if let Engine::Postgres(c) = &self.engine {
            c.note_write();
        }
    }

    /// A job starts on this connection (for [`Connection::job_wrote`]).
    pub(crate) fn begin_job(&self) {
        if let Engine::Postgres(c) = &self.engine {
            c.begin_job();
        }
    }

    /// Whether the job begun last sent a statement that may write: `execute`,
    /// `execute_later`, `execute_batch`, or a query not beginning with SELECT or
    /// VALUES (PostgreSQL; SQLite's jobs always have their savepoint).
    pub(crate) fn job_wrote(&self) -> bool {
        match &self.engine {
            Engine::Sqlite(_) => false,
            Engine::Postgres(c) => c.job_wrote(),
        }
    }

    /// Whether a statement failed since the transaction began or last rolled back
    /// to a savepoint: PostgreSQL then refuses everything but a rollback, and turns
    /// a COMMIT into one.
    pub(crate) fn tx_aborted(&self) -> bool {
        match &self.engine {
            Engine::Sqlite(_) => false,
            Engine::Postgres(c) => c.tx_aborted(),
        }
    }

    /// Whether statements were sent whose answers were not read yet (PostgreSQL's
    /// deferred writes; SQLite has none).
    pub(crate) fn has_deferred(&self) -> bool {
        match &self.engine {
            Engine::Sqlite(_) => false,
            Engine::Postgres(c) => c.has_deferred(),
        }
    }

    /// Reads the answers of the statements sent without waiting for them
    /// ([`Connection::execute_later`], [`Statement::query_later`]).
    pub(crate) fn settle_deferred(&self) -> Result<()> {
        match &self.engine {
            Engine::Sqlite(_) => Ok(()),
            Engine::Postgres(c) => c.settle_deferred(),
        }
    }

    /// Runs several statements without parameters (schema changes, savepoints).
    pub fn execute_batch(&self, sql: &str) -> Result<()> {
        match &self.engine {
            Engine::Sqlite(c) => Ok(c.execute_batch(sql)?),
            Engine::Postgres(c) => c.batch(sql),
        }
    }

    /// The first row's value, or [`Error::NoRow`].
    pub fn query_row<T>(
        &self,
        sql: &str,
        params: impl Params,
        f: impl FnOnce(&Row<'_>) -> Result<T>,
    ) -> Result<T> {
        self.prepare(sql)?.query_row(params, f)
    }

    /// A statement prepared for this call only (one that runs rarely, so it does not
    /// push a hot one out of the cache).
    pub fn prepare(&self, sql: &str) -> Result<Statement<'_>> {
        Ok(Statement {
            inner: match &self.engine {
                Engine::Sqlite(c) => Prepared::Once(c.prepare(sql)?),
                Engine::Postgres(c) => Prepared::Postgres(c, c.prepare(sql)?, sql.to_owned()),
            },
        })
    }

    /// A statement from the connection's cache: parsed once, reused by every job.
    pub fn prepare_cached(&self, sql: &str) -> Result<Statement<'_>> {
        Ok(Statement {
            inner: match &self.engine {
                Engine::Sqlite(c) => Prepared::Cached(c.prepare_cached(sql)?),
                Engine::Postgres(c) => Prepared::Postgres(c, c.prepare(sql)?, sql.to_owned()),
            },
        })
    }
}

enum Prepared<'c> {
    Once(rusqlite::Statement<'c>),
    Cached(rusqlite::CachedStatement<'c>),
    /// The statement's text is kept for errors.
    Postgres(&'c postgres::Conn, ::postgres::Statement, String),
}

/// A prepared statement.
pub struct Statement<'c> {
    inner: Prepared<'c>,
}

impl Statement<'_> {
    /// How many parameters it names (the highest `?N`).
    pub fn parameter_count(&self) -> usize {
        match &self.inner {
            Prepared::Once(s) => s.parameter_count(),
            Prepared::Cached(s) => s.parameter_count(),
            Prepared::Postgres(_, s, _) => s.params().len(),
        }
    }

    /// Runs it; answers how many rows it changed.
    pub fn execute(&mut self, params: impl Params) -> Result<usize> {
        match &mut self.inner {
            Prepared::Once(s) => Ok(params.with_slice(|p| s.execute(p))?),
            Prepared::Cached(s) => Ok(params.with_slice(|p| s.execute(p))?),
            Prepared::Postgres(c, s, sql) => params.with_slice(|p| c.execute(s, p, sql)),
        }
    }

    /// Runs it when nothing reads its answer (how many rows it changed): on SQLite
    /// at once; on PostgreSQL it is sent now and its answer read together with the
    /// next statement that needs one (the job's end at the latest), so the writes
    /// of a job share round trips. Its failure fails the job all the same, named
    /// by this statement, at that next statement.
    pub fn execute_later(&mut self, params: impl Params) -> Result<()> {
        match &mut self.inner {
            Prepared::Once(s) => params.with_slice(|p| s.execute(p)).map(|_| ())?,
            Prepared::Cached(s) => params.with_slice(|p| s.execute(p)).map(|_| ())?,
            Prepared::Postgres(c, s, sql) => params.with_slice(|p| c.execute_later(s, p, sql))?,
        }
        Ok(())
    }

    /// The first row's value, or [`Error::NoRow`].
    pub fn query_row<T>(
        &mut self,
        params: impl Params,
        f: impl FnOnce(&Row<'_>) -> Result<T>,
    ) -> Result<T> {
        let mut rows = self.query(params)?;
        match rows.next()? {
            Some(row) => f(&row),
            None => Err(Error::NoRow),
        }
    }

    /// Every row, each through `f`, as an iterator of results.
    pub fn query_map<T, F>(&mut self, params: impl Params, f: F) -> Result<MappedRows<'_, F>>
    where
        F: FnMut(&Row<'_>) -> Result<T>,
    {
        Ok(MappedRows {
            rows: self.query(params)?,
            f,
        })
    }

    /// The rows, one at a time.
    pub fn query(&mut self, params: impl Params) -> Result<Rows<'_>> {
        self.query_now(params)
    }

    /// Sends the query now and reads its rows when [`Later::rows`] asks: on
    /// PostgreSQL its answer shares the round trip of the next statement that waits
    /// for one, so reads that do not depend on each other cost one round trip. It
    /// sees the state as of now on either engine (SQLite runs it at once), so what
    /// the job writes before reading the rows is not in them.
    pub fn query_later(&mut self, params: impl Params) -> Result<Later> {
        if let Prepared::Postgres(c, s, sql) = &self.inner {
            let slot = params.with_slice(|p| c.query_later(s, p, sql))?;
            return Ok(Later {
                inner: LaterInner::Sent(slot, sql.clone()),
            });
        }
        let mut rows = self.query_now(params)?;
        let mut all = Vec::new();
        while let Some(r) = rows.next()? {
            all.push(r.values()?);
        }
        Ok(Later {
            inner: LaterInner::Ready(all),
        })
    }

    fn query_now(&mut self, params: impl Params) -> Result<Rows<'_>> {
        let inner = match &mut self.inner {
            Prepared::Once(s) => RowsInner::Sqlite(params.with_slice(|p| s.query(p))?),
            Prepared::Cached(s) => RowsInner::Sqlite(params.with_slice(|p| s.query(p))?),
            Prepared::Postgres(c, s, sql) => RowsInner::Postgres {
                rows: params.with_slice(|p| c.query(s, p, sql))?.into_iter(),
                current: None,
            },
        };
        Ok(Rows { inner })
    }
}

/// The rows of a query, read one at a time.
pub struct Rows<'s> {
    inner: RowsInner<'s>,
}

enum RowsInner<'s> {
    Sqlite(rusqlite::Rows<'s>),
    /// A query's rows read at once on SQLite ([`Statement::query_later`]).
    Values {
        rows: std::vec::IntoIter<Vec<Value>>,
        current: Option<Vec<Value>>,
    },
    Postgres {
        rows: std::vec::IntoIter<::postgres::Row>,
        current: Option<::postgres::Row>,
    },
}

impl Rows<'_> {
    /// The next row, or `None` after the last.
    #[allow(clippy::should_implement_trait)] // a lending iterator: each row borrows `self`
    pub fn next(&mut self) -> Result<Option<Row<'_>>> {
        Ok(match &mut self.inner {
            RowsInner::Sqlite(rows) => rows.next()?.map(|r| Row {
                inner: RowInner::Sqlite(r),
            }),
            RowsInner::Postgres { rows, current } => {
                *current = rows.next();
                current.as_ref().map(|r| Row {
                    inner: RowInner::Postgres(r),
                })
            }
            RowsInner::Values { rows, current } => {
                *current = rows.next();
                current.as_ref().map(|r| Row {
                    inner: RowInner::Values(r),
                })
            }
        })
    }
}

/// [`Statement::query_map`]'s rows.
pub struct MappedRows<'s, F> {
    rows: Rows<'s>,
    f: F,
}

impl<T, F> Iterator for MappedRows<'_, F>
where
    F: FnMut(&Row<'_>) -> Result<T>,
{
    type Item = Result<T>;

    fn next(&mut self) -> Option<Result<T>> {
        match self.rows.next() {
            Ok(Some(row)) => Some((self.f)(&row)),
            Ok(None) => None,
            Err(e) => Some(Err(e)),
        }
    }
}

/// One row of a result.
pub struct Row<'r> {
    inner: RowInner<'r>,
}

enum RowInner<'r> {
    Sqlite(&'r rusqlite::Row<'r>),
    Postgres(&'r ::postgres::Row),
    Values(&'r [Value]),
}

/// A query sent whose rows are read later ([`Statement::query_later`]).
#[must_use = "a query sent is read with `rows`"]
pub struct Later {
    inner: LaterInner,
}

enum LaterInner {
    Ready(Vec<Vec<Value>>),
    Sent(crate::postgres::client::Slot, String),
}

impl Later {
    /// The rows, reading the answer now if no statement since has (on PostgreSQL);
    /// `c` is the connection the query was sent on.
    pub fn rows(self, c: &Connection) -> Result<Rows<'_>> {
        let inner = match (self.inner, &c.engine) {
            (LaterInner::Ready(rows), _) => RowsInner::Values {
                rows: rows.into_iter(),
                current: None,
            },
            (LaterInner::Sent(slot, sql), Engine::Postgres(pc)) => RowsInner::Postgres {
                rows: pc.rows_of(&slot, &sql)?.into_iter(),
                current: None,
            },
            (LaterInner::Sent(..), Engine::Sqlite(_)) => {
                return Err(Error::Conversion(
                    "a query sent on PostgreSQL was read on another connection".into(),
                ));
            }
        };
        Ok(Rows { inner })
    }
}

impl Row<'_> {
    /// Column `idx` (from 0) as `T`, converted as SQLite would.
    pub fn get<T: FromSql>(&self, idx: usize) -> Result<T> {
        match self.inner {
            RowInner::Sqlite(r) => Ok(r.get(idx)?),
            RowInner::Postgres(_) | RowInner::Values(_) => {
                Ok(T::column_result(self.get_ref(idx)?)?)
            }
        }
    }

    /// Column `idx` borrowed as it is stored, without a copy.
    pub fn get_ref(&self, idx: usize) -> Result<ValueRef<'_>> {
        match self.inner {
            RowInner::Sqlite(r) => Ok(r.get_ref(idx)?),
            RowInner::Postgres(r) => postgres::column(r, idx),
            RowInner::Values(r) => r
                .get(idx)
                .map(ValueRef::from)
                .ok_or(Error::Sqlite(rusqlite::Error::InvalidColumnIndex(idx))),
        }
    }

    /// Every column, owned.
    fn values(&self) -> Result<Vec<Value>> {
        let n = match self.inner {
            RowInner::Sqlite(r) => r.as_ref().column_count(),
            RowInner::Postgres(r) => r.len(),
            RowInner::Values(r) => r.len(),
        };
        (0..n)
            .map(|i| {
                Ok(match self.get_ref(i)? {
                    ValueRef::Null => Value::Null,
                    ValueRef::Integer(v) => Value::Integer(v),
                    ValueRef::Real(v) => Value::Real(v),
                    ValueRef::Text(t) => Value::Text(String::from_utf8_lossy(t).into_owned()),
                    ValueRef::Blob(b) => Value::Blob(b.to_vec()),
                })
            })
            .collect()
    }

    /// Column `idx` as text borrowed from the row (an error if it is not text).
    pub fn get_str(&self, idx: usize) -> Result<&str> {
        Ok(self.get_ref(idx)?.as_str()?)
    }

    /// Column `idx` read from its text by `T`'s one mapping (a state kept as a
    /// word); a text `T` does not know is an error, not a default.
    pub fn parse<T>(&self, idx: usize) -> Result<T>
    where
        T: std::str::FromStr,
        T::Err: std::fmt::Display,
    {
        self.get_str(idx)?
            .parse()
            .map_err(|e: T::Err| Error::Conversion(e.to_string()))
    }
}

impl From<Error> for domain::error::Error {
    fn from(e: Error) -> Self {
        Self::Store(Box::new(e))
    }
}

#[cfg(test)]
mod later_tests;
