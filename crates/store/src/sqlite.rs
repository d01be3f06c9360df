//! SQLite as the store (the default): a file in the data dir, in WAL mode, with the
//! writer's checkpoints on their own thread (`checkpoint.rs`) and migrations
//! recorded in `PRAGMA user_version`.

use super::checkpoint::Checkpointer;
use super::pragmas::configure;
use super::schema;
use super::sql::{self, Connection};
use domain::error::{Error, Result};
use rusqlite::OpenFlags;
use std::path::Path;
use std::sync::Arc;

/// How a write transaction begins: the write lock at once, so no job waits on it.
pub(super) const BEGIN_WRITE: &str = "BEGIN IMMEDIATE";
/// How a read begins: one snapshot for every query of the read.
pub(super) const BEGIN_READ: &str = "BEGIN DEFERRED";

/// Opens (creating if needed) the database file, applies migrations, and hooks the
/// checkpoint thread to the connection that becomes the writer's.
pub(super) fn open_writer(path: &Path) -> Result<(Connection, Arc<Checkpointer>)> {
    let conn = rusqlite::Connection::open(path).map_err(db)?;
    let mode: String = conn
        .query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))
        .map_err(db)?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(Error::internal(format!(
            "could not switch {} to WAL (got {mode})",
            path.display()
        )));
    }
    let mut conn = conn;
    configure(&conn).map_err(db)?;
    migrate(&conn)?;
    let checkpointer = Checkpointer::start(path, &mut conn)
        .map_err(|e| Error::internal(format!("cannot start the checkpoint thread: {e}")))?;
    Ok((Connection::sqlite_engine(conn), checkpointer))
}

/// A reader's connection: read-only, opened on a reader thread.
pub(super) fn open_reader(path: &Path) -> sql::Result<Connection> {
    let c = rusqlite::Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    configure(&c)?;
    Ok(Connection::sqlite_engine(c))
}

fn migrate(conn: &rusqlite::Connection) -> Result<()> {
    let version: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .map_err(db)?;
    let target = schema::MIGRATIONS.len() as i64;
    if version > target {
        return Err(Error::internal(format!(
            "the database schema is version {version} but this agent-worker knows only up to {target}: \
             use a newer agent-worker or another --data-dir"
        )));
    }
    for (i, sql) in schema::MIGRATIONS.iter().enumerate().skip(version as usize) {
        conn.execute_batch("BEGIN IMMEDIATE").map_err(db)?;
        let applied = conn
            .execute_batch(sql)
            .and_then(|_| conn.pragma_update(None, "user_version", i as i64 + 1));
        match applied {
            Ok(()) => conn.execute_batch("COMMIT").map_err(db)?,
            Err(e) => {
                let _ = conn.execute_batch("ROLLBACK");
                return Err(Error::internal(format!("migration {} failed: {e}", i + 1)));
            }
        }
    }
    Ok(())
}

/// A fault of SQLite itself while opening or migrating, as the kernel's error.
fn db(e: rusqlite::Error) -> Error {
    sql::Error::from(e).into()
}
