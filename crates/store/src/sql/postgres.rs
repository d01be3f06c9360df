//! The PostgreSQL engine under [`super`]: one blocking client per store thread,
//! statements prepared once per connection, and SQLite's dynamic values converted to
//! and from the declared types at the edge.
//!
//! Why the blocking client: the store's jobs run on the store's own threads (never
//! the async runtime's), one connection each, exactly as with SQLite, so the jobs
//! stay plain closures over `&Connection` on either engine.
//!
//! Why convert here: PostgreSQL types every parameter and column strictly (a `bool`
//! is not an `int8`, `COUNT(*)` is an `int8`, a comparison is a `bool`), while the
//! kernel binds and reads values the way SQLite hands them out. A parameter is
//! converted to the type PostgreSQL inferred for its placeholder, and a column from
//! its type to the value SQLite would have given, so rusqlite's own conversions
//! (`FromSql`) serve both engines.

use super::{Error, Result, ValueRef};
use crate::postgres::client::Fail;
use postgres::types::{IsNull, Type};
use rusqlite::types::{ToSqlOutput, Value};
use std::cell::{Cell, RefCell};
use std::collections::HashMap;

/// Prepared statements kept per connection; past this the cache starts over.
const CACHE: usize = 256;

pub(super) struct Conn {
    client: RefCell<crate::postgres::client::Client>,
    prepared: RefCell<HashMap<String, postgres::Statement>>,
    /// Inside a transaction (the store begins and ends them through [`Conn::batch`]).
    in_tx: Cell<bool>,
    /// A statement that may write was sent since [`Conn::begin_job`].
    wrote: Cell<bool>,
    /// A statement failed on the server and no savepoint was rolled back to since:
    /// the transaction is aborted, and its commit would be a rollback.
    aborted: Cell<bool>,
}

impl Conn {
    pub(super) fn new(client: crate::postgres::client::Client) -> Self {
        Self {
            client: RefCell::new(client),
            prepared: RefCell::new(HashMap::new()),
            in_tx: Cell::new(false),
            wrote: Cell::new(false),
            aborted: Cell::new(false),
        }
    }

    /// A job starts: nothing written by it yet.
    pub(super) fn begin_job(&self) {
        self.wrote.set(false);
    }

    pub(super) fn job_wrote(&self) -> bool {
        self.wrote.get()
    }

    pub(super) fn note_write(&self) {
        self.wrote.set(true);
    }

    pub(super) fn tx_aborted(&self) -> bool {
        self.aborted.get()
    }

    /// Whether statements were sent whose answers were not read yet.
    pub(super) fn has_deferred(&self) -> bool {
        self.client.borrow().has_deferred()
    }

    /// Reads the answers of the statements sent and not yet read.
    pub(super) fn settle_deferred(&self) -> Result<()> {
        let out = self.client.borrow_mut().settle_deferred();
        self.track(out.map_err(|e| error(e, None)))
    }

    /// `out` of a statement sent to the server: a failure aborts the transaction.
    fn track<T>(&self, out: Result<T>) -> Result<T> {
        if out.is_err() {
            self.aborted.set(true);
        }
        out
    }

    pub(super) fn set_bound(&self, bound: std::time::Duration) {
        self.client.borrow_mut().set_bound(bound);
    }

    pub(super) fn is_closed(&self) -> bool {
        self.client.borrow().is_closed()
    }

    pub(super) fn batch(&self, sql: &str) -> Result<()> {
        let out = self
            .client
            .borrow_mut()
            .batch_execute(sql)
            .map_err(|e| error(e, Some(sql)));
        let head = sql.trim_start().to_ascii_uppercase();
        if head.starts_with("BEGIN") {
            self.in_tx.set(out.is_ok());
            self.aborted.set(out.is_err());
        } else if head.starts_with("COMMIT")
            || (head.starts_with("ROLLBACK") && !head.starts_with("ROLLBACK TO"))
        {
            self.in_tx.set(false);
            self.aborted.set(false);
        } else if head.starts_with("ROLLBACK TO") && out.is_ok() {
            // Back to a savepoint taken while the transaction was sound.
            self.aborted.set(false);
            return out;
        } else if !["SAVEPOINT", "RELEASE", "SET "]
            .iter()
            .any(|w| head.starts_with(w))
        {
            self.wrote.set(true);
        }
        self.track(out)
    }

    /// The statement for `sql` (with SQLite's `?N` placeholders), prepared once.
    pub(super) fn prepare(&self, sql: &str) -> Result<postgres::Statement> {
        if let Some(st) = self.prepared.borrow().get(sql) {
            return Ok(st.clone());
        }
        let pg_sql = placeholders(sql);
        // A parameter no clause constrains has no type PostgreSQL can infer: one a
        // statement skips (SQLite binds ?1..?4 to a statement that names ?1, ?2 and
        // ?4, and so does the kernel), or one only tested for NULL. Such a parameter
        // is declared text, one at a time as PostgreSQL names them.
        // Inside a transaction a failed parse aborts it, so each try is in a savepoint
        // of its own (once per statement and connection: the result is cached).
        let guarded = self.in_tx.get();
        let mut types: Vec<Type> = Vec::new();
        let st = loop {
            if guarded {
                self.batch("SAVEPOINT aw_prepare")?;
            }
            let prepared = self.client.borrow_mut().prepare_typed(&pg_sql, &types);
            if guarded {
                let end = match prepared {
                    Ok(_) => "RELEASE aw_prepare",
                    Err(_) => "ROLLBACK TO aw_prepare; RELEASE aw_prepare",
                };
                self.batch(end)?;
            }
            match prepared {
                Ok(st) => break st,
                Err(e) => match untyped_parameter(&e) {
                    Some(n) if n <= 1000 && types.get(n - 1) != Some(&Type::TEXT) => {
                        if types.len() < n {
                            types.resize(n, unspecified());
                        }
                        types[n - 1] = Type::TEXT;
                    }
                    _ => return Err(error(e, Some(sql))),
                },
            }
        };
        let mut cache = self.prepared.borrow_mut();
        if cache.len() >= CACHE {
            cache.clear();
        }
        cache.insert(sql.to_owned(), st.clone());
        Ok(st)
    }

    pub(super) fn execute(
        &self,
        st: &postgres::Statement,
        params: &[&dyn rusqlite::ToSql],
        sql: &str,
    ) -> Result<usize> {
        let values = bind(params)?;
        let refs: Vec<&(dyn postgres::types::ToSql + Sync)> =
            values.iter().map(|v| v as _).collect();
        self.wrote.set(true);
        let n = self.client.borrow_mut().execute(st, &refs);
        Ok(self.track(n.map_err(|e| error(e, Some(sql))))? as usize)
    }

    /// [`Conn::execute`] whose answer is read with the next statement's (see
    /// [`crate::postgres::client::Client::defer`]).
    pub(super) fn execute_later(
        &self,
        st: &postgres::Statement,
        params: &[&dyn rusqlite::ToSql],
        sql: &str,
    ) -> Result<()> {
        let values = bind(params)?;
        let text = sql.split_whitespace().collect::<Vec<_>>().join(" ");
        self.wrote.set(true);
        self.client.borrow_mut().defer(st.clone(), values, text);
        Ok(())
    }

    /// A query sent now whose rows are read later (see
    /// [`crate::postgres::client::Client::query_later`]).
    pub(super) fn query_later(
        &self,
        st: &postgres::Statement,
        params: &[&dyn rusqlite::ToSql],
        sql: &str,
    ) -> Result<crate::postgres::client::Slot> {
        let values = bind(params)?;
        let text = sql.split_whitespace().collect::<Vec<_>>().join(" ");
        self.note_if_writes(sql);
        Ok(self
            .client
            .borrow_mut()
            .query_later(st.clone(), values, text))
    }

    /// The rows of a query sent by [`Conn::query_later`].
    pub(super) fn rows_of(
        &self,
        slot: &crate::postgres::client::Slot,
        sql: &str,
    ) -> Result<Vec<postgres::Row>> {
        let rows = self.client.borrow_mut().rows_of(slot);
        self.track(rows.map_err(|e| error(e, Some(sql))))
    }

    /// A query that does not begin with SELECT (or VALUES) may write: an INSERT
    /// with RETURNING, a WITH that changes rows.
    fn note_if_writes(&self, sql: &str) {
        let head = sql.trim_start().get(..6).unwrap_or_default();
        if !head.eq_ignore_ascii_case("SELECT") && !head.eq_ignore_ascii_case("VALUES") {
            self.wrote.set(true);
        }
    }

    pub(super) fn discard_deferred(&self) {
        self.client.borrow_mut().discard_deferred();
    }

    /// A savepoint (or its release) sent with the next statement.
    pub(super) fn batch_later(&self, sql: &'static str) {
        // Counted as a write: what it sends is not read here.
        self.wrote.set(true);
        self.client.borrow_mut().defer_batch(sql);
    }

    pub(super) fn query(
        &self,
        st: &postgres::Statement,
        params: &[&dyn rusqlite::ToSql],
        sql: &str,
    ) -> Result<Vec<postgres::Row>> {
        let values = bind(params)?;
        let refs: Vec<&(dyn postgres::types::ToSql + Sync)> =
            values.iter().map(|v| v as _).collect();
        self.note_if_writes(sql);
        let rows = self.client.borrow_mut().query(st, &refs);
        self.track(rows.map_err(|e| error(e, Some(sql))))
    }
}

/// The parameter PostgreSQL could not type (SQLSTATE 42P18), by number.
fn untyped_parameter(e: &Fail) -> Option<usize> {
    let Fail::Pg(e) = e else { return None };
    let db = e.as_db_error()?;
    if db.code() != &postgres::error::SqlState::INDETERMINATE_DATATYPE {
        return None;
    }
    let n = db.message().rsplit_once('$')?.1;
    n.trim_end_matches(|c: char| !c.is_ascii_digit())
        .parse()
        .ok()
        .filter(|n| *n > 0)
}

/// A parameter type left for the server to infer (OID 0).
fn unspecified() -> Type {
    Type::new(
        "unspecified".into(),
        0,
        postgres::types::Kind::Pseudo,
        "pg_catalog".into(),
    )
}

/// PostgreSQL's error as the store's: its code and words, and the statement (on
/// one line) when there is one to name.
pub(super) fn error(e: Fail, sql: Option<&str>) -> Error {
    // A deferred statement's failure is about that statement, not the one that read it.
    if let Fail::Earlier(earlier, e) = e {
        return error(*e, Some(&earlier));
    }
    let (code, message) = match &e {
        Fail::Pg(e) => match e.as_db_error() {
            Some(db) => (Some(db.code().code().to_owned()), db.message().to_owned()),
            None => (None, e.to_string()),
        },
        Fail::Silent(_) | Fail::Io(_) | Fail::Earlier(..) => (None, e.to_string()),
    };
    Error::Postgres {
        code,
        message,
        sql: sql.map(|s| s.split_whitespace().collect::<Vec<_>>().join(" ")),
    }
}

/// SQLite's placeholders (`?N`, and `?` meaning the next number) as PostgreSQL's
/// (`$N`), leaving quoted text and identifiers and comments alone.
pub(super) fn placeholders(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len() + 8);
    let mut chars = sql.chars().peekable();
    let mut next = 1usize;
    let mut quote: Option<char> = None;
    while let Some(ch) = chars.next() {
        match (quote, ch) {
            (Some(q), c) => {
                out.push(c);
                if c == q {
                    quote = None;
                }
            }
            (None, '\'' | '"') => {
                quote = Some(ch);
                out.push(ch);
            }
            (None, '-') if chars.peek() == Some(&'-') => {
                out.push(ch);
                for c in chars.by_ref() {
                    out.push(c);
                    if c == '\n' {
                        break;
                    }
                }
            }
            (None, '/') if chars.peek() == Some(&'*') => {
                out.push(ch);
                let mut last = ' ';
                for c in chars.by_ref() {
                    out.push(c);
                    if last == '*' && c == '/' {
                        break;
                    }
                    last = c;
                }
            }
            (None, '?') => {
                let mut digits = String::new();
                while let Some(d) = chars.peek().filter(|d| d.is_ascii_digit()) {
                    digits.push(*d);
                    chars.next();
                }
                let n = if digits.is_empty() {
                    next
                } else {
                    digits.parse().unwrap_or(next)
                };
                next = next.max(n + 1);
                out.push('$');
                out.push_str(&n.to_string());
            }
            (None, c) => out.push(c),
        }
    }
    out
}

/// Each parameter as the value SQLite would bind.
fn bind(params: &[&dyn rusqlite::ToSql]) -> Result<Vec<Param>> {
    params
        .iter()
        .map(|p| {
            let value = match rusqlite::ToSql::to_sql(*p)? {
                ToSqlOutput::Borrowed(v) => owned(v),
                ToSqlOutput::Owned(v) => v,
                other => {
                    return Err(Error::Conversion(format!(
                        "a parameter of a kind PostgreSQL cannot take: {other:?}"
                    )));
                }
            };
            Ok(Param(value))
        })
        .collect()
}

fn owned(v: ValueRef<'_>) -> Value {
    match v {
        ValueRef::Null => Value::Null,
        ValueRef::Integer(i) => Value::Integer(i),
        ValueRef::Real(f) => Value::Real(f),
        ValueRef::Text(t) => Value::Text(String::from_utf8_lossy(t).into_owned()),
        ValueRef::Blob(b) => Value::Blob(b.to_vec()),
    }
}

/// A dynamic value bound as whatever type its placeholder has.
#[derive(Debug)]
struct Param(Value);

impl postgres::types::ToSql for Param {
    fn to_sql(
        &self,
        ty: &Type,
        out: &mut bytes::BytesMut,
    ) -> std::result::Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        let mismatch = || -> Box<dyn std::error::Error + Sync + Send> {
            format!("cannot bind {:?} to a parameter of type {ty}", self.0).into()
        };
        match &self.0 {
            Value::Null => Ok(IsNull::Yes),
            Value::Integer(i) => match *ty {
                Type::INT8 => i.to_sql(ty, out),
                Type::INT4 => i32::try_from(*i)
                    .map_err(|e| e.to_string())?
                    .to_sql(ty, out),
                Type::INT2 => i16::try_from(*i)
                    .map_err(|e| e.to_string())?
                    .to_sql(ty, out),
                Type::OID => u32::try_from(*i)
                    .map_err(|e| e.to_string())?
                    .to_sql(ty, out),
                Type::BOOL => (*i != 0).to_sql(ty, out),
                Type::FLOAT8 => (*i as f64).to_sql(ty, out),
                Type::FLOAT4 => (*i as f32).to_sql(ty, out),
                Type::TEXT | Type::VARCHAR | Type::BPCHAR | Type::NAME | Type::UNKNOWN => {
                    i.to_string().as_str().to_sql(ty, out)
                }
                _ => Err(mismatch()),
            },
            Value::Real(f) => match *ty {
                Type::FLOAT8 => f.to_sql(ty, out),
                Type::FLOAT4 => (*f as f32).to_sql(ty, out),
                Type::TEXT | Type::VARCHAR | Type::UNKNOWN => {
                    f.to_string().as_str().to_sql(ty, out)
                }
                _ => Err(mismatch()),
            },
            Value::Text(s) => match *ty {
                Type::TEXT | Type::VARCHAR | Type::BPCHAR | Type::NAME | Type::UNKNOWN => {
                    s.as_str().to_sql(ty, out)
                }
                _ => Err(mismatch()),
            },
            Value::Blob(b) => match *ty {
                Type::BYTEA => b.as_slice().to_sql(ty, out),
                _ => Err(mismatch()),
            },
        }
    }

    fn accepts(_: &Type) -> bool {
        true
    }

    postgres::types::to_sql_checked!();
}

/// Column `idx` of `row` as the value SQLite would hand out: integers and booleans
/// as integers, text borrowed from the row.
pub(super) fn column(row: &postgres::Row, idx: usize) -> Result<ValueRef<'_>> {
    let Some(col) = row.columns().get(idx) else {
        return Err(Error::Conversion(format!(
            "no column {idx}: the row has {}",
            row.columns().len()
        )));
    };
    let ty = col.type_();
    let value = match *ty {
        Type::INT8 => get::<i64>(row, idx)?.map(ValueRef::Integer),
        Type::INT4 => get::<i32>(row, idx)?.map(|v| ValueRef::Integer(v.into())),
        Type::INT2 => get::<i16>(row, idx)?.map(|v| ValueRef::Integer(v.into())),
        Type::OID => get::<u32>(row, idx)?.map(|v| ValueRef::Integer(v.into())),
        Type::BOOL => get::<bool>(row, idx)?.map(|v| ValueRef::Integer(v.into())),
        Type::FLOAT8 => get::<f64>(row, idx)?.map(ValueRef::Real),
        Type::FLOAT4 => get::<f32>(row, idx)?.map(|v| ValueRef::Real(v.into())),
        Type::TEXT | Type::VARCHAR | Type::BPCHAR | Type::NAME | Type::UNKNOWN => {
            get::<&str>(row, idx)?.map(|s| ValueRef::Text(s.as_bytes()))
        }
        Type::BYTEA => get::<&[u8]>(row, idx)?.map(ValueRef::Blob),
        _ => {
            return Err(Error::Conversion(format!(
                "column {} has type {ty}, which the store does not read; cast it in the query",
                col.name()
            )));
        }
    };
    Ok(value.unwrap_or(ValueRef::Null))
}

fn get<'r, T: postgres::types::FromSql<'r>>(
    row: &'r postgres::Row,
    idx: usize,
) -> Result<Option<T>> {
    row.try_get::<_, Option<T>>(idx)
        .map_err(|e| error(Fail::Pg(e), None))
}

#[cfg(test)]
mod tests {
    use super::placeholders;

    #[test]
    fn placeholders_are_numbered_as_sqlite_numbers_them() {
        assert_eq!(
            placeholders("SELECT a FROM t WHERE b = ?2 AND c = ?1"),
            "SELECT a FROM t WHERE b = $2 AND c = $1"
        );
        assert_eq!(placeholders("VALUES (?, ?, ?)"), "VALUES ($1, $2, $3)");
        // A bare ? is one past the largest number so far, as in SQLite.
        assert_eq!(placeholders("?3, ?"), "$3, $4");
        assert_eq!(placeholders("?3, ?1, ?"), "$3, $1, $4");
        assert_eq!(
            placeholders("SELECT '?1 is text', \"col?\" FROM t WHERE x = ?1"),
            "SELECT '?1 is text', \"col?\" FROM t WHERE x = $1"
        );
        assert_eq!(placeholders("?10 ?11"), "$10 $11");
        assert_eq!(
            placeholders("SET a = ?1 -- it's ?2\n, b = ?2 /* isn't ?3 */ WHERE c = ?3"),
            "SET a = $1 -- it's ?2\n, b = $2 /* isn't ?3 */ WHERE c = $3"
        );
    }
}
