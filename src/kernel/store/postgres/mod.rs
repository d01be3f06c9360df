//! PostgreSQL as the store: connecting, the schema's migrations, and what a
//! transaction begins with.
//!
//! The store's threads and jobs are the same as with SQLite (`super`); only these
//! differ. Several kernels may share one database, so every write transaction
//! first takes one advisory lock: writes stay serialised across all of them, as
//! SQLite's single writer serialises them in one process, and the kernel's rules
//! (an inbox read then marked, a proposal counted then closed) hold unchanged.
//! Group commit keeps the lock's cost to one round trip per batch.
//!
//! One kernel per database, for now: the writer's connection holds a session lock
//! ([`KERNEL_LOCK`]) for as long as it lives, so a second kernel on the same database
//! is refused at start, as a second kernel on a data dir is. (Several kernels sharing
//! a database need each agent leased to one of them, so that no agent runs twice.)

pub mod schema;

use super::sql::{self, Connection};
use crate::error::{Error, Result};
use std::time::Duration;

/// The advisory lock every write transaction takes ("agentwrk" in ASCII).
const WRITE_LOCK: i64 = 0x6167_656e_7477_726b;
/// Taken while migrating, so kernels starting together migrate once.
const MIGRATE_LOCK: i64 = WRITE_LOCK + 1;
/// Held by the one kernel on a database, by its writer's connection.
const KERNEL_LOCK: i64 = WRITE_LOCK + 2;

/// How a write transaction begins.
pub(super) const BEGIN_WRITE: &str = "BEGIN; SELECT pg_advisory_xact_lock(7018690069355000427)";
/// How a read begins: one snapshot for every query of the read, writing nothing.
pub(super) const BEGIN_READ: &str = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY";

/// A store URL: `postgres://` or `postgresql://`.
pub fn is_url(s: &str) -> bool {
    s.starts_with("postgres://") || s.starts_with("postgresql://")
}

/// The URL without its password, for logs and errors.
pub fn redacted(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return "(not a URL)".into();
    };
    let (auth, host) = match rest.rsplit_once('@') {
        Some((auth, host)) => (Some(auth), host),
        None => (None, rest),
    };
    match auth.map(|a| a.split_once(':')) {
        Some(Some((user, _))) => format!("{scheme}://{user}:***@{host}"),
        Some(None) => format!("{scheme}://{}@{host}", auth.unwrap_or_default()),
        None => format!("{scheme}://{host}"),
    }
}

/// Opens a connection. Runs on a store thread: the blocking client must never be
/// driven from the async runtime's threads.
pub(super) fn connect(url: &str) -> Result<Connection> {
    let mut config: postgres::Config = url.parse().map_err(|e| {
        Error::invalid(format!(
            "--store {}: not a PostgreSQL URL ({e}); write postgres://USER:PASSWORD@HOST:PORT/DATABASE",
            redacted(url)
        ))
    })?;
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(Duration::from_secs(10));
    }
    config.application_name("agent-worker");
    let client = config.connect(postgres::NoTls).map_err(|e| {
        Error::internal(format!(
            "cannot connect to PostgreSQL at {}: {e}",
            redacted(url)
        ))
    })?;
    Ok(Connection::postgres_engine(client))
}

/// The writer's connection: [`connect`], then the database's kernel lock, which
/// it keeps (taken again after a reconnect, unless another kernel took it).
pub(super) fn connect_writer(url: &str) -> Result<Connection> {
    let c = connect(url)?;
    let mine: bool = c.query_row("SELECT pg_try_advisory_lock(?1)", [KERNEL_LOCK], |r| {
        r.get(0)
    })?;
    if !mine {
        let by: Option<String> = sql::OptionalExtension::optional(c.query_row(
            "SELECT client_addr::text || ' pid ' || pid FROM pg_stat_activity
              WHERE pid = (SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted
                              AND objid = ?1 AND classid = ?2 LIMIT 1)",
            (KERNEL_LOCK & 0xffff_ffff, KERNEL_LOCK >> 32),
            |r| r.get(0),
        ))?
        .flatten();
        return Err(Error::conflict(format!(
            "the PostgreSQL database at {} is in use by another agent-worker kernel ({}): \
             connect to that kernel, stop it, or give this one another database",
            redacted(url),
            by.as_deref().unwrap_or("connection unknown")
        )));
    }
    Ok(c)
}

/// Applies the migrations the database has not seen, under a lock so that kernels
/// starting together do it once.
pub(super) fn migrate(c: &Connection) -> Result<()> {
    c.execute_batch("CREATE TABLE IF NOT EXISTS agent_worker_schema (version BIGINT NOT NULL)")?;
    c.execute_batch("BEGIN")?;
    let applied = (|| -> Result<()> {
        c.query_row("SELECT pg_advisory_xact_lock(?1)", [MIGRATE_LOCK], |_| {
            Ok(())
        })?;
        let version: Option<i64> = sql::OptionalExtension::optional(c.query_row(
            "SELECT version FROM agent_worker_schema",
            (),
            |r| r.get(0),
        ))?;
        if version.is_none() {
            c.execute("INSERT INTO agent_worker_schema (version) VALUES (0)", ())?;
        }
        let version = version.unwrap_or(0);
        let target = schema::MIGRATIONS.len() as i64;
        if version > target {
            return Err(Error::internal(format!(
                "the database schema is version {version} but this agent-worker knows only up to {target}: \
                 use a newer agent-worker or another database"
            )));
        }
        for (i, step) in schema::MIGRATIONS.iter().enumerate().skip(version as usize) {
            c.execute_batch(step).map_err(|e| {
                Error::internal(format!("PostgreSQL migration {} failed: {e}", i + 1))
            })?;
            c.execute(
                "UPDATE agent_worker_schema SET version = ?1",
                [i as i64 + 1],
            )?;
        }
        Ok(())
    })();
    match applied {
        Ok(()) => Ok(c.execute_batch("COMMIT")?),
        Err(e) => {
            let _ = c.execute_batch("ROLLBACK");
            Err(e)
        }
    }
}

#[cfg(test)]
mod tests;
