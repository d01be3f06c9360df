//! PostgreSQL as the store: connecting, the schema's migrations, and what a
//! transaction begins with.
//!
//! The store's threads and jobs are the same as with SQLite (`super`); only these
//! differ. Several kernels may share one database, so every write transaction
//! first takes advisory locks ([`begin_write`]): the global one, then the lock of
//! each workflow instance it writes, by ascending key. A write of one instance
//! takes the global lock shared, so the writes of one instance are serialised
//! across every kernel (as SQLite's single writer serialises them in one process)
//! while different instances' run at once; any other write takes it exclusive and
//! runs alone. The kernel's rules (an inbox read then marked, a proposal counted
//! then closed) hold unchanged. Group commit keeps the locks' cost to one round
//! trip per batch, and each node has several writer connections (`super::writer`).
//!
//! One kernel per node name: the first writer's connection holds a session lock on its
//! node's name ([`NODE_LOCK`]) for as long as it lives, so a second kernel of the
//! same name on the database is refused at start, as a second kernel on a data dir
//! is. Kernels of different names share the database (`runtime::nodes`); the bus
//! (`bus.rs`) carries their events to each other.

pub mod bus;
pub mod client;
mod functions;
pub mod schema;
pub mod tls;

use super::sql::{self, Connection};
use domain::error::{Error, Result};
use std::sync::OnceLock;
use std::time::Duration;

/// The environment variable that bounds connecting to PostgreSQL (and the
/// startup's first answer): seconds, or a duration such as `2s` or `500ms`.
pub const TIMEOUT_ENV: &str = "AGENT_WORKER_STORE_TIMEOUT";
/// Its default.
const TIMEOUT: Duration = Duration::from_secs(10);

/// How long a connection to PostgreSQL may take, from TCP connect to the server's
/// first "ready": [`TIMEOUT_ENV`], else 10 s (100 ms to a day). Every connection
/// the kernel opens (the store's writer and readers, the bus) is bound by it.
pub fn timeout() -> Duration {
    static T: OnceLock<Duration> = OnceLock::new();
    *T.get_or_init(|| {
        let range = Duration::from_millis(100)..=Duration::from_secs(24 * 3600);
        domain::clock::env_duration(TIMEOUT_ENV, TIMEOUT, range)
    })
}

/// The database's global write lock ("agentwrk" in ASCII): every write transaction
/// takes it first, exclusive when it may touch any row ([`crate::WriteScope::Global`]),
/// shared when it touches only its instances' rows.
const WRITE_LOCK: i64 = 0x6167_656e_7477_726b;
/// Taken while migrating, so kernels starting together migrate once.
const MIGRATE_LOCK: i64 = WRITE_LOCK + 1;
/// The class of the lock each node's writer connection holds, keyed by the node
/// name's hash ("agwk" in ASCII).
/// The lock every instance writer of a node holds, shared, for as long as its
/// connection lives ("awwr"): a kernel that takes the node's lock waits for the
/// instance writers of any other kernel of that name to be gone.
const NODE_WRITERS_LOCK: i32 = 0x6177_7772;
const NODE_LOCK: i32 = 0x6167_776b;
/// The class of each workflow instance's write lock, keyed by [`instance_key`]
/// ("agwi" in ASCII): taken after the global lock, in ascending key order.
const INSTANCE_LOCK: i32 = 0x6167_7769;

/// The second key of an instance's lock: its id folded into 32 bits. Two ids
/// that fold alike share a lock, which serialises them more than needed and
/// never less.
pub(super) fn instance_key(id: i64) -> i32 {
    (id ^ (id >> 32)) as i32
}

/// How a write transaction begins: the global lock (exclusive or shared), then
/// each instance's lock by ascending key. Every transaction takes its locks in
/// this one order and holds nothing before the global one, so no two wait for
/// each other in a circle. `keys` are sorted and distinct.
pub(super) fn begin_write(exclusive: bool, keys: &[i32]) -> String {
    use std::fmt::Write;
    let shared = if exclusive { "" } else { "_shared" };
    let mut sql = format!("BEGIN; SELECT pg_advisory_xact_lock{shared}({WRITE_LOCK})");
    for key in keys {
        let _ = write!(
            sql,
            "; SELECT pg_advisory_xact_lock({INSTANCE_LOCK}, {key})"
        );
    }
    sql
}

/// How a read begins: one snapshot for every query of the read, writing nothing.
pub(super) const BEGIN_READ: &str = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY";

/// A store URL: `postgres://` or `postgresql://`.
pub fn is_url(s: &str) -> bool {
    s.starts_with("postgres://") || s.starts_with("postgresql://")
}

/// The URL without its password, for logs and errors: rebuilt from what it names
/// (user, hosts, ports, database), so a password anywhere in it (before the `@`, or
/// as `?password=`) never appears.
pub fn redacted(url: &str) -> String {
    let plain = tls::split(url).map_or_else(|_| url.to_owned(), |(rest, _)| rest);
    let Ok(c) = plain.parse::<postgres::Config>() else {
        return "(an unreadable PostgreSQL URL)".into();
    };
    let hosts: Vec<String> = c
        .get_hosts()
        .iter()
        .enumerate()
        .map(|(i, h)| {
            let host = match h {
                postgres::config::Host::Tcp(h) => h.clone(),
                postgres::config::Host::Unix(p) => p.display().to_string(),
            };
            match c.get_ports().get(i).or(c.get_ports().first()) {
                Some(p) => format!("{host}:{p}"),
                None => host,
            }
        })
        .collect();
    let user = c.get_user().map(|u| {
        let pw = if c.get_password().is_some() {
            ":***"
        } else {
            ""
        };
        format!("{u}{pw}@")
    });
    format!(
        "postgres://{}{}/{}",
        user.unwrap_or_default(),
        hosts.join(","),
        c.get_dbname().unwrap_or_default()
    )
}

/// Opens a connection. Runs on a store thread: the blocking client must never be
/// driven from the async runtime's threads.
pub(super) fn connect(url: &str, application: &str) -> Result<Connection> {
    Ok(Connection::postgres_engine(client(url, application)?))
}

/// A bounded client of its own (also for the bus, which needs what the store's
/// vocabulary does not say: LISTEN and notifications). Fails within [`timeout`]
/// (TCP connect, startup and authentication), saying why.
pub(super) fn client(url: &str, application: &str) -> Result<client::Client> {
    let invalid = |why: String| Error::invalid(format!("--store {}: {why}", redacted(url)));
    let (rest, asked) = tls::split(url).map_err(invalid)?;
    // A root that cannot be read is the URL's mistake, said before connecting.
    tls::connector(&asked).map_err(invalid)?;
    let mut config: tokio_postgres::Config = rest.parse().map_err(|e| {
        Error::invalid(format!(
            "--store {}: not a PostgreSQL URL ({e}); write postgres://USER:PASSWORD@HOST:PORT/DATABASE",
            redacted(url)
        ))
    })?;
    // The URL's own connect_timeout is kept for the TCP connect; the whole connect
    // (the server's answers to the startup included) is bounded by `timeout()`.
    let bound = timeout();
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(bound);
    }
    // A server that went away without closing the connection (a cable, a failover)
    // is noticed in seconds, not after the system's two hours: every store call
    // blocks until then.
    config
        .keepalives(true)
        .keepalives_idle(Duration::from_secs(10))
        .keepalives_interval(Duration::from_secs(5))
        .keepalives_retries(3)
        .tcp_user_timeout(Duration::from_secs(30))
        .application_name(application)
        // The server's side of the same: a kernel cut off in the middle of a write
        // transaction holds the database's write lock, which every kernel waits
        // for. The server ends such a session after 5 s idle in its transaction (a
        // job's statements follow each other within milliseconds), and notices a
        // silent peer by its own keepalives.
        // No JIT: the kernel's statements are lookups and writes of a few rows, and
        // the planner may overestimate one past the JIT's threshold (the sends'
        // function scans per send of a JSON list it guesses at 100): compiling took
        // 300 ms for a statement that runs in one, a stall of every send behind it.
        .options(
            "-c idle_in_transaction_session_timeout=5000 -c tcp_keepalives_idle=10 \
             -c tcp_keepalives_interval=5 -c tcp_keepalives_count=3 -c jit=off",
        );
    let statements = client::statement_bound(bound);
    let client = client::Client::connect(&config, &asked, bound, statements).map_err(|e| match e {
        client::Fail::Silent(d) => Error::unavailable(format!(
            "cannot connect to PostgreSQL at {}: the server accepted the connection but did not \
             answer within {} s: check that the URL names a PostgreSQL server and that it is not \
             stopped or overloaded ({TIMEOUT_ENV} sets this limit)",
            redacted(url),
            domain::clock::secs(d),
        )),
        client::Fail::Io(e) => Error::unavailable(format!(
            "cannot connect to PostgreSQL at {}: {e}",
            redacted(url)
        )),
        e @ client::Fail::Earlier(..) => Error::unavailable(format!(
            "cannot connect to PostgreSQL at {}: {e}",
            redacted(url)
        )),
        client::Fail::Pg(e) => {
            // The client's own words are "error connecting to server"; the why is below.
            let mut why = e.to_string();
            let mut cause = std::error::Error::source(&e);
            while let Some(c) = cause {
                why = format!("{why}: {c}");
                cause = c.source();
            }
            Error::unavailable(format!(
                "cannot connect to PostgreSQL at {}: {why}",
                redacted(url)
            ))
        }
    })?;
    Ok(client)
}

/// The writer's connection: [`connect`], then the node's lock, which it keeps
/// (taken again after a reconnect, unless another kernel of that name took it).
pub(super) fn connect_writer(url: &str, application: &str, node: &str) -> Result<Connection> {
    let c = connect(url, application)?;
    for _ in 0..2 {
        let mine: bool = c.query_row(
            "SELECT pg_try_advisory_lock(CAST(?1 AS INTEGER), hashtext(?2))",
            (NODE_LOCK, node),
            |r| r.get(0),
        )?;
        if mine {
            return no_other_writers(&c, url, application, node).map(|()| c);
        }
        let holder: Option<(i64, String, Option<String>)> =
            sql::OptionalExtension::optional(c.query_row(
                "SELECT a.pid, a.application_name, a.client_addr::text FROM pg_stat_activity a
                  WHERE a.pid = (SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted
                                  AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
                                  AND classid = CAST(CAST(?1 AS INTEGER) AS OID)
                                  AND objid = CAST(hashtext(?2) AS OID) AND objsubid = 2 LIMIT 1)",
                (NODE_LOCK, node),
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            ))?;
        match holder {
            // This kernel's own earlier session, which the server has not noticed is
            // gone (the reason this connection is new): end it and take the lock.
            Some((pid, app, _)) if app == application => {
                tracing::warn!(pid, "ending this kernel's stale database session");
                c.query_row("SELECT pg_terminate_backend(?1)", [pid], |_| Ok(()))?;
                std::thread::sleep(Duration::from_millis(100));
            }
            // A kernel of this name killed a moment ago holds it until the server
            // notices its connection closed: wait for that, a little.
            _ if wait_for_node_lock(&c, node) => {
                return no_other_writers(&c, url, application, node).map(|()| c);
            }
            // Another kernel of this name holds it: this one must not write.
            other => {
                let by = other.map_or_else(
                    || "connection unknown".to_owned(),
                    |(pid, _, addr)| format!("{} pid {pid}", addr.as_deref().unwrap_or("local")),
                );
                return Err(Error::conflict(format!(
                    "node {node} is already running on the PostgreSQL database at {} ({by}): \
                     connect to that kernel, stop it, or give this one another name with --node",
                    redacted(url),
                )));
            }
        }
    }
    Err(Error::conflict(format!(
        "could not take node {node} on the PostgreSQL database at {} from this kernel's own stale session",
        redacted(url)
    )))
}

/// An instance writer's connection: [`connect`], once this kernel's first writer
/// holds the node's lock. The instance writers hold no lock of their own; were
/// one to reconnect after another kernel of this name took the node over (this
/// one cut off, say), it would write beside that kernel. So it writes only while
/// a session of this kernel (its application name) holds the node's lock.
pub(super) fn connect_instance_writer(
    url: &str,
    application: &str,
    node: &str,
) -> Result<Connection> {
    let c = connect(url, application)?;
    let holder: Option<String> = sql::OptionalExtension::optional(c.query_row(
        "SELECT a.application_name FROM pg_stat_activity a
          WHERE a.pid = (SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted
                          AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
                          AND classid = CAST(CAST(?1 AS INTEGER) AS OID)
                          AND objid = CAST(hashtext(?2) AS OID) AND objsubid = 2 LIMIT 1)",
        (NODE_LOCK, node),
        |r| r.get(0),
    ))?;
    if holder.as_deref() == Some(application) {
        let shared: bool = c.query_row(
            "SELECT pg_try_advisory_lock_shared(CAST(?1 AS INTEGER), hashtext(?2))",
            (NODE_WRITERS_LOCK, node),
            |r| r.get(0),
        )?;
        if shared {
            return Ok(c);
        }
    }
    Err(Error::unavailable(format!(
        "node {node}'s lock on the PostgreSQL database at {} is not held by this kernel{}: its \
         writes wait until this kernel's first writer takes it again",
        redacted(url),
        if holder.is_some() {
            " but by another"
        } else {
            ""
        },
    )))
}

/// Called with the node's lock just taken: waits (up to [`NODE_LOCK_WAIT`]) for the
/// instance writers of any other kernel of this name to be gone, and refuses the
/// node (letting its lock go) while they write. They check the node's lock only
/// when they connect, so a kernel whose first writer lost its session alone would
/// otherwise write beside the kernel that took the node.
fn no_other_writers(c: &Connection, url: &str, application: &str, node: &str) -> Result<()> {
    let others = || -> Result<i64> {
        Ok(c.query_row(
            "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
              WHERE l.locktype = 'advisory' AND l.granted
                AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
                AND l.classid = CAST(CAST(?1 AS INTEGER) AS OID)
                AND l.objid = CAST(hashtext(?2) AS OID) AND l.objsubid = 2
                AND a.application_name <> ?3",
            (NODE_WRITERS_LOCK, node, application),
            |r| r.get(0),
        )?)
    };
    let until = std::time::Instant::now() + Duration::from_secs(3);
    loop {
        let n = others()?;
        if n == 0 {
            return Ok(());
        }
        if std::time::Instant::now() >= until {
            c.query_row(
                "SELECT pg_advisory_unlock(CAST(?1 AS INTEGER), hashtext(?2))",
                (NODE_LOCK, node),
                |_| Ok(()),
            )?;
            return Err(Error::conflict(format!(
                "node {node} is already running on the PostgreSQL database at {}: {n} of its \
                 writer connections are alive: connect to that kernel, stop it, or give this one \
                 another name with --node",
                redacted(url),
            )));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// How long a starting kernel waits for its node's lock held by another session.
const NODE_LOCK_WAIT: &str = "3s";

/// Waits for the node's lock at most [`NODE_LOCK_WAIT`] (the server wakes the
/// waiter when the holder's session ends); true when this connection took it.
fn wait_for_node_lock(c: &Connection, node: &str) -> bool {
    let wait = format!("SET lock_timeout = '{NODE_LOCK_WAIT}'");
    let took = c.execute_batch(&wait).is_ok()
        && c.query_row(
            "SELECT pg_advisory_lock(CAST(?1 AS INTEGER), hashtext(?2))",
            (NODE_LOCK, node),
            |_| Ok(()),
        )
        .is_ok();
    took && c.execute_batch("SET lock_timeout = 0").is_ok()
}

/// Applies the migrations the database has not seen, under a lock so that kernels
/// starting together do it once; first refuses a database whose text is not UTF-8.
pub(super) fn migrate(c: &Connection) -> Result<()> {
    utf8_only(c)?;
    // A migration of a large database may take a while; it still may not hang.
    c.set_statement_bound(MIGRATION_BOUND);
    let out = migrate_now(c);
    c.set_statement_bound(client::statement_bound(timeout()));
    out
}

/// The kernel's text is UTF-8 and counted in characters (previews, limits): in a
/// database of another encoding (`SQL_ASCII`, the default of a cluster made under
/// the C locale) PostgreSQL counts bytes, and a cut text is no longer UTF-8.
fn utf8_only(c: &Connection) -> Result<()> {
    let encoding: String = c.query_row("SELECT current_setting('server_encoding')", (), |r| {
        r.get(0)
    })?;
    if encoding == "UTF8" {
        return Ok(());
    }
    Err(Error::invalid(format!(
        "the database's encoding is {encoding}, and agent-worker keeps its text in UTF8: create \
         the database with `createdb -E UTF8 -T template0 NAME` (or CREATE DATABASE NAME ENCODING \
         'UTF8' TEMPLATE template0) and name it in --store"
    )))
}

/// How long a migration's statement may take.
const MIGRATION_BOUND: Duration = Duration::from_secs(30 * 60);

fn migrate_now(c: &Connection) -> Result<()> {
    c.execute_batch("BEGIN")?;
    let applied = (|| -> Result<()> {
        c.query_row("SELECT pg_advisory_xact_lock(?1)", [MIGRATE_LOCK], |_| {
            Ok(())
        })?;
        c.execute_batch(
            "CREATE TABLE IF NOT EXISTS agent_worker_schema (version BIGINT NOT NULL)",
        )?;
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
            return Err(Error::unavailable(format!(
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
mod fence_tests;
#[cfg(test)]
mod same_schema;
#[cfg(test)]
mod tests;
