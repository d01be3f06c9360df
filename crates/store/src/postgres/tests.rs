//! The store on a real PostgreSQL: the cluster `AGENT_WORKER_TEST_PG` names
//! (`scripts/pg-cluster start`), one fresh database per test. Without it these
//! tests say so and pass, unless `AGENT_WORKER_HEAVY=1` (as in CI), where they fail.

use super::super::{Location, Store};
use super::{INSTANCE_LOCK, WRITE_LOCK, begin_write, instance_key, redacted};
use crate::sql::{self, OptionalExtension};
use crate::testing::fresh_database;
use domain::error::Error;

fn open(url: &str) -> Store {
    Store::open_at(&Location::Postgres(url.to_owned())).expect("open the store on PostgreSQL")
}

/// A store on a fresh database with one table made by `ddl`, and the database's URL.
async fn store_with(ddl: &'static str) -> Option<(String, Store)> {
    let url = fresh_database()?;
    let store = open(&url);
    store
        .write(move |c| Ok(c.execute_batch(ddl)?))
        .await
        .expect("create the test's table");
    Some((url, store))
}

/// Values go in and come out as SQLite would give them, whatever PostgreSQL's
/// types: integers as BIGINT, INTEGER and boolean, text, bytes, NULL.
#[tokio::test]
async fn dynamic_values_meet_strict_types() {
    let Some(url) = fresh_database() else { return };
    let store = open(&url);
    let out = store
        .write(|c| {
            c.execute_batch(
                "CREATE TABLE t (i BIGINT, s INTEGER, b BOOLEAN, f DOUBLE PRECISION, x TEXT, y BYTEA)",
            )?;
            // A Rust bool into BIGINT, an i64 into INTEGER and BOOLEAN, an i64 into a REAL.
            c.execute(
                "INSERT INTO t VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                sql::params![true, 7i64, 1i64, 2i64, "héllo", vec![0u8, 255]],
            )?;
            c.execute(
                "INSERT INTO t VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                sql::params![None::<i64>, None::<i64>, false, 0.5, None::<String>, None::<Vec<u8>>],
            )?;
            let first: (i64, i64, bool, f64, String, Vec<u8>) = c.query_row(
                "SELECT i, s, b, f, x, y FROM t WHERE x IS NOT NULL",
                (),
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?)),
            )?;
            let second: (Option<i64>, Option<String>, i64) =
                c.query_row("SELECT i, x, b FROM t WHERE x IS NULL", (), |r| {
                    Ok((r.get(0)?, r.get(1)?, r.get(2)?))
                })?;
            // count(*) is BIGINT, a literal INTEGER, a comparison BOOLEAN: all integers here.
            let shapes: (i64, i64, bool, i64) =
                c.query_row("SELECT count(*), 1, 2 > 1, length(x) FROM t WHERE s = ?1 GROUP BY x", [7], |r| {
                    Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
                })?;
            let text: String = c.query_row("SELECT x || ?1 FROM t WHERE x IS NOT NULL", [5], |r| {
                Ok(r.get_str(0)?.to_owned())
            })?;
            Ok((first, second, shapes, text))
        })
        .await
        .unwrap();
    assert_eq!(out.0, (1, 7, true, 2.0, "héllo".into(), vec![0, 255]));
    assert_eq!(out.1, (None, None, 0));
    assert_eq!(out.2, (1, 1, true, 5));
    assert_eq!(out.3, "héllo5");
}

/// A statement that skips a parameter (SQLite binds `?1..?3` to one that names
/// `?1` and `?3`) or only tests one for NULL still prepares, inside a job, without
/// costing the job what it wrote before it.
#[tokio::test]
async fn parameters_no_clause_types_are_text() {
    let Some(url) = fresh_database() else { return };
    let store = open(&url);
    let (n, kept) = store
        .write(|c| {
            c.execute_batch("CREATE TABLE p (v BIGINT)")?;
            c.execute("INSERT INTO p VALUES (?1)", [5])?;
            let n: i64 = c.query_row(
                "SELECT count(*) FROM p WHERE v = ?1 AND ?3 IS NULL",
                (5, "unused", None::<String>),
                |r| r.get(0),
            )?;
            let kept: i64 = c.query_row("SELECT count(*) FROM p", (), |r| r.get(0))?;
            Ok((n, kept))
        })
        .await
        .unwrap();
    assert_eq!((n, kept), (1, 1));
}

/// Every session of the store, writer or reader, runs without JIT and ends a
/// transaction left idle for 5 s (the settings its connections ask for).
#[tokio::test]
async fn sessions_run_without_jit_and_end_idle_transactions() {
    let Some(url) = fresh_database() else { return };
    let store = open(&url);
    let settings = "SELECT current_setting('jit') || ' ' || current_setting('idle_in_transaction_session_timeout')";
    let wrote: String = store
        .write(move |c| Ok(c.query_row(settings, (), |r| r.get(0))?))
        .await
        .unwrap();
    let read: String = store
        .read(move |c| Ok(c.query_row(settings, (), |r| r.get(0))?))
        .await
        .unwrap();
    assert_eq!((wrote.as_str(), read.as_str()), ("off 5s", "off 5s"));
}

/// No row is `NoRow`, which `optional` turns into `None`; an integer too large for
/// an INTEGER column is refused by name, not wrapped.
#[tokio::test]
async fn missing_rows_and_values_that_do_not_fit() {
    let Some(url) = fresh_database() else { return };
    let store = open(&url);
    let none = store
        .write(|c| {
            c.execute_batch("CREATE TABLE n (v INTEGER)")?;
            Ok(c.query_row("SELECT v FROM n", (), |r| r.get::<i64>(0))
                .optional()?)
        })
        .await
        .unwrap();
    assert_eq!(none, None);
    let err = store
        .write(|c| Ok(c.execute("INSERT INTO n VALUES (?1)", [i64::MAX])?))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Store(_)), "{err}");
}

/// A failing job rolls back alone: the jobs around it in the same group commit keep
/// their writes, and the writer's transaction goes on (PostgreSQL aborts a whole
/// transaction on an error unless the savepoint is rolled back).
#[tokio::test]
async fn a_failing_job_rolls_back_alone() {
    let Some((_, store)) = store_with("CREATE TABLE j (k TEXT PRIMARY KEY)").await else {
        return;
    };
    let jobs = (0..20).map(|i| {
        let store = store.clone();
        async move {
            store
                .write(move |c| {
                    c.execute("INSERT INTO j VALUES (?1)", [format!("k{i}")])?;
                    if i % 3 == 0 {
                        // A duplicate key: this job fails after its first insert.
                        c.execute("INSERT INTO j VALUES (?1)", [format!("k{i}")])?;
                    }
                    Ok(())
                })
                .await
        }
    });
    let results = futures::future::join_all(jobs).await;
    let failed = results.iter().filter(|r| r.is_err()).count();
    assert_eq!(failed, 7, "{results:?}");
    let keys: i64 = store
        .read(|c| Ok(c.query_row("SELECT count(*) FROM j", (), |r| r.get(0))?))
        .await
        .unwrap();
    assert_eq!(keys, 13);
}

/// Writes whose answers are read later share round trips, and still fail their
/// job alone: a deferred duplicate key fails its job (named by its own statement),
/// whether the job ended without another statement or read something after it,
/// and the other jobs of the group commit keep their writes, in order.
#[tokio::test]
async fn a_deferred_write_that_fails_rolls_back_its_job_alone() {
    let Some((_, store)) = store_with("CREATE TABLE d (k TEXT PRIMARY KEY, n BIGINT)").await else {
        return;
    };
    let jobs = (0..30).map(|i| {
        let store = store.clone();
        async move {
            store
                .write(move |c| {
                    let k = format!("k{i}");
                    c.execute_later("INSERT INTO d (k, n) VALUES (?1, 1)", [&k])?;
                    c.execute_later("UPDATE d SET n = n + 1 WHERE k = ?1", [&k])?;
                    if i % 3 == 0 {
                        c.execute_later("INSERT INTO d (k, n) VALUES (?1, 9)", [&k])?;
                    }
                    if i % 2 == 0 {
                        // A read after the writes: the failure surfaces here.
                        let n: i64 =
                            c.query_row("SELECT n FROM d WHERE k = ?1", [&k], |r| r.get(0))?;
                        assert_eq!(n, 2, "a read sees the deferred writes before it");
                    }
                    Ok(())
                })
                .await
        }
    });
    let results = futures::future::join_all(jobs).await;
    for (i, r) in results.iter().enumerate() {
        match r {
            Err(e) if i % 3 == 0 => assert!(
                e.to_string()
                    .contains("INSERT INTO d (k, n) VALUES (?1, 9)"),
                "{i}: {e}"
            ),
            Ok(()) if i % 3 != 0 => {}
            other => panic!("job {i}: {other:?}"),
        }
    }
    let (rows, sum): (i64, i64) = store
        .read(|c| {
            Ok(
                c.query_row("SELECT count(*), CAST(sum(n) AS BIGINT) FROM d", (), |r| {
                    Ok((r.get(0)?, r.get(1)?))
                })?,
            )
        })
        .await
        .unwrap();
    assert_eq!((rows, sum), (20, 40));
}

/// One kernel per node name: a second store of the same node on the database is
/// refused and says why, one of another name opens beside it, and once the first is
/// gone its name opens again, the migrations already applied.
#[tokio::test]
async fn one_kernel_per_node_name() {
    let Some(url) = fresh_database() else { return };
    let first = open(&url);
    let Err(refused) = Store::open_at(&Location::Postgres(url.clone())) else {
        panic!("a second kernel of the same node opened the database")
    };
    let msg = refused.to_string();
    assert!(matches!(refused, Error::Conflict(_)), "{msg}");
    assert!(msg.contains("is already running"), "{msg}");
    assert!(msg.contains("--node"), "{msg}");
    assert!(!msg.contains(&url), "the password reached an error: {msg}");
    let other = Store::open_as(&Location::Postgres(url.clone()), "other-node")
        .expect("a node of another name shares the database");
    let seen: i64 = other
        .read(|c| Ok(c.query_row("SELECT count(*) FROM workflows", (), |r| r.get(0))?))
        .await
        .unwrap();
    assert_eq!(seen, 1, "both see one store");
    drop(first);
    // The first store's writer lets go of its connection as it stops.
    let mut again = None;
    for _ in 0..100 {
        match Store::open_at(&Location::Postgres(url.clone())) {
            Ok(s) => {
                again = Some(s);
                break;
            }
            Err(_) => tokio::time::sleep(std::time::Duration::from_millis(50)).await,
        }
    }
    let again = again.expect("the database opened again after its kernel stopped");
    let (version, rows, global): (i64, i64, String) = again
        .read(|c| {
            let v = c.query_row(
                "SELECT max(version), count(*) FROM agent_worker_schema",
                (),
                |r| Ok((r.get(0)?, r.get(1)?)),
            )?;
            let g = c.query_row(
                "SELECT name || ':' || tag FROM workflows WHERE id = 1",
                (),
                |r| r.get(0),
            )?;
            Ok((v.0, v.1, g))
        })
        .await
        .unwrap();
    assert_eq!((version, rows), (super::schema::MIGRATIONS.len() as i64, 1));
    assert_eq!(global, "global:main");
}

/// A server that drops the store's connections (a restart, a failover) between jobs
/// costs nothing: the next write and each reader's next read connect again.
#[tokio::test]
async fn dropped_connections_are_opened_again() {
    let Some((url, store)) = store_with("CREATE TABLE r (v BIGINT)").await else {
        return;
    };
    store
        .read(|c| Ok(c.query_row("SELECT count(*) FROM r", (), |r| r.get::<i64>(0))?))
        .await
        .unwrap();
    let db = url.rsplit_once('/').unwrap().1.to_owned();
    let admin = std::env::var("AGENT_WORKER_TEST_PG").unwrap();
    let killed = std::thread::spawn(move || {
        let mut c = postgres::Client::connect(&admin, postgres::NoTls).unwrap();
        c.query(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()",
            &[&db],
        )
        .unwrap()
        .len()
    })
    .join()
    .unwrap();
    assert!(
        killed >= 2,
        "the writer's and a reader's connections: {killed}"
    );
    // No job had run on the dead connections, so none is lost: the first write
    // and every reader's first read after succeed on connections opened again.
    store
        .write(|c| Ok(c.execute("INSERT INTO r VALUES (2)", ())?))
        .await
        .expect("the writer connected again");
    let reads = (0..2 * crate::READERS).map(|_| {
        store.read(|c| {
            Ok(c.query_row("SELECT count(*) FROM r WHERE v = 2", (), |r| {
                r.get::<i64>(0)
            })?)
        })
    });
    for seen in futures::future::join_all(reads).await {
        assert_eq!(seen.expect("a reader connected again"), 1);
    }
}

/// A write begins with the global lock (exclusive or shared), then its instances'
/// locks in the order given (ascending, by the writer).
#[test]
fn a_write_begins_with_the_global_lock_then_its_instances() {
    let cases: &[(bool, &[i32], &str)] = &[
        (true, &[], "pg_advisory_xact_lock($G)"),
        (
            false,
            &[2],
            "pg_advisory_xact_lock_shared($G); SELECT pg_advisory_xact_lock($I, 2)",
        ),
        (
            true,
            &[1, 7],
            "pg_advisory_xact_lock($G); SELECT pg_advisory_xact_lock($I, 1); SELECT pg_advisory_xact_lock($I, 7)",
        ),
    ];
    for (exclusive, keys, want) in cases {
        let want = format!("BEGIN; SELECT {want}")
            .replace("$G", &WRITE_LOCK.to_string())
            .replace("$I", &INSTANCE_LOCK.to_string());
        assert_eq!(begin_write(*exclusive, keys), want);
    }
    assert_eq!(instance_key(5), 5);
    assert_ne!(
        instance_key(1 << 32),
        instance_key(1 << 33),
        "high bits count"
    );
}

#[test]
fn urls_lose_their_password_in_logs() {
    assert_eq!(
        redacted("postgres://aw:s3cret@127.0.0.1:5432/db"),
        "postgres://aw:***@127.0.0.1:5432/db"
    );
    assert_eq!(
        redacted("postgresql://aw@db.internal/x"),
        "postgres://aw@db.internal:5432/x"
    );
    assert_eq!(
        redacted("postgres://localhost/x"),
        "postgres://localhost:5432/x"
    );
    for secret in [
        "postgres://u:p%40ss@h/db",
        "postgres://u@h/db?password=p%40ss",
        "postgres://u:p@ss@h/db",
    ] {
        let shown = redacted(secret);
        assert!(
            !shown.contains("p@ss") && !shown.contains("p%40ss"),
            "{secret} -> {shown}"
        );
    }
}

/// A loopback proxy to the cluster that can go silent: while `frozen`, it accepts
/// connections and holds what it reads, forwarding nothing either way (a frozen
/// server, a proxy whose backend is gone).
struct Silencer {
    port: u16,
    frozen: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl Silencer {
    fn start(target: std::net::SocketAddr) -> Self {
        use std::sync::atomic::Ordering;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let frozen = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let f = frozen.clone();
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                let Ok(server) = std::net::TcpStream::connect(target) else {
                    continue;
                };
                for (mut from, mut to) in [
                    (client.try_clone().unwrap(), server.try_clone().unwrap()),
                    (server, client),
                ] {
                    let f = f.clone();
                    std::thread::spawn(move || {
                        use std::io::{Read, Write};
                        let mut buf = [0u8; 16 << 10];
                        loop {
                            let n = match from.read(&mut buf) {
                                Ok(0) | Err(_) => return,
                                Ok(n) => n,
                            };
                            while f.load(Ordering::Relaxed) {
                                std::thread::sleep(std::time::Duration::from_millis(20));
                            }
                            if to.write_all(&buf[..n]).is_err() {
                                return;
                            }
                        }
                    });
                }
            }
        });
        Self { port, frozen }
    }

    fn freeze(&self, on: bool) {
        self.frozen.store(on, std::sync::atomic::Ordering::Relaxed);
    }
}

/// A database that goes silent after connecting fails each call within its bound
/// and leaves the connection closed (so the store opens a new one); a connect
/// whose startup is never answered fails within the connect bound; once the
/// database answers again, connecting works.
/// No TLS.
fn plain() -> &'static super::tls::Tls {
    &super::tls::Tls {
        mode: super::tls::Mode::Off,
        root: None,
    }
}

#[test]
fn a_silent_database_fails_calls_within_their_bound() {
    use super::client::{Client, Fail};
    use std::time::{Duration, Instant};
    let Some(url) = fresh_database() else { return };
    let direct: tokio_postgres::Config = url.parse().unwrap();
    let target = match (&direct.get_hosts()[0], direct.get_ports()[0]) {
        (tokio_postgres::config::Host::Tcp(h), port) => format!("{h}:{port}")
            .parse::<std::net::SocketAddr>()
            .unwrap(),
        _ => panic!("the test cluster listens on TCP"),
    };
    let proxy = Silencer::start(target);
    let mut config = tokio_postgres::Config::new();
    config
        .user(direct.get_user().unwrap())
        .password(direct.get_password().unwrap())
        .dbname(direct.get_dbname().unwrap())
        .host("127.0.0.1")
        .port(proxy.port);
    let (connect, bound) = (Duration::from_millis(1500), Duration::from_millis(500));

    let mut c =
        Client::connect(&config, plain(), connect, bound).expect("connect through the proxy");
    c.batch_execute("SELECT 1")
        .expect("an answer while it answers");
    proxy.freeze(true);
    let t = Instant::now();
    let e = c.batch_execute("SELECT 1").expect_err("no answer");
    assert!(matches!(e, Fail::Silent(d) if d == bound), "{e}");
    assert!(
        t.elapsed() < bound + Duration::from_millis(500),
        "{:?}",
        t.elapsed()
    );
    assert!(c.is_closed(), "a silent connection is given up");
    assert!(c.batch_execute("SELECT 1").is_err(), "and stays closed");

    let t = Instant::now();
    let e = Client::connect(&config, plain(), connect, bound)
        .err()
        .expect("a startup nobody answers fails");
    assert!(matches!(e, Fail::Silent(d) if d == connect), "{e}");
    assert!(
        t.elapsed() < connect + Duration::from_millis(500),
        "{:?}",
        t.elapsed()
    );

    proxy.freeze(false);
    let mut c = Client::connect(&config, plain(), connect, bound).expect("connect again");
    c.batch_execute("SELECT 1").expect("answers again");
}

/// TLS as the URL asks: the test cluster's certificate names `localhost` only and
/// is signed by its own CA (AGENT_WORKER_TEST_PG_CA). `verify-full` by that name
/// connects over TLS; by the address it is refused (the name does not match) while
/// `verify-ca` accepts it; another root is refused; without `sslmode`, no TLS.
#[test]
fn tls_is_verified_as_the_url_asks() {
    let Some(url) = fresh_database() else { return };
    let ca = std::env::var("AGENT_WORKER_TEST_PG_CA").expect("scripts/pg-cluster exports the CA");
    let ssl = |url: &str| -> Result<bool, String> {
        let c = super::client(url, "tls-test").map_err(|e| e.to_string())?;
        let conn = sql::Connection::postgres_engine(c);
        conn.query_row(
            "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
            (),
            |r| r.get::<bool>(0),
        )
        .map_err(|e| e.to_string())
    };
    let by_name = url.replace("@127.0.0.1:", "@localhost:");
    assert_eq!(
        ssl(&format!("{by_name}?sslmode=verify-full&sslrootcert={ca}")),
        Ok(true)
    );
    assert_eq!(
        ssl(&format!("{by_name}?sslmode=require&sslrootcert={ca}")),
        Ok(true)
    );
    let e = ssl(&format!("{url}?sslmode=verify-full&sslrootcert={ca}")).unwrap_err();
    assert!(
        e.contains("cannot connect") && e.contains("certificate"),
        "{e}"
    );
    assert_eq!(
        ssl(&format!("{url}?sslmode=verify-ca&sslrootcert={ca}")),
        Ok(true)
    );
    // The server's own certificate is no root for it.
    let other = std::path::Path::new(&ca).with_file_name("server.crt");
    let e = ssl(&format!(
        "{by_name}?sslmode=verify-full&sslrootcert={}",
        other.display()
    ))
    .unwrap_err();
    assert!(e.contains("certificate"), "{e}");
    let e = ssl(&format!(
        "{by_name}?sslmode=verify-full&sslrootcert=/nowhere.pem"
    ))
    .unwrap_err();
    assert!(e.contains("sslrootcert /nowhere.pem"), "{e}");
    assert_eq!(ssl(&url), Ok(false));
    // The password is never in an error.
    let pw = url
        .split(':')
        .nth(2)
        .unwrap()
        .split('@')
        .next()
        .unwrap()
        .to_owned();
    assert!(!e.contains(&pw));
}

/// A database whose encoding is not UTF8 is refused at open, saying how to make
/// one that is: there PostgreSQL counts text in bytes, and a preview cut from it
/// would not be UTF-8.
#[tokio::test]
async fn a_database_not_in_utf8_is_refused() {
    let Some(url) = fresh_database() else { return };
    let (base, _) = url.rsplit_once('/').unwrap();
    let name = format!("aw_ascii_{}", uuid::Uuid::now_v7().simple());
    let (admin, db) = (url.clone(), name.clone());
    std::thread::spawn(move || {
        let mut c = postgres::Client::connect(&admin, postgres::NoTls).unwrap();
        c.batch_execute(&format!(
            "CREATE DATABASE {db} ENCODING 'SQL_ASCII' TEMPLATE template0 LC_COLLATE 'C' LC_CTYPE 'C'"
        ))
        .unwrap();
    })
    .join()
    .unwrap();
    let e = Store::open_at(&Location::Postgres(format!("{base}/{name}")))
        .err()
        .expect("a SQL_ASCII database is refused")
        .to_string();
    assert!(
        e.contains("SQL_ASCII") && e.contains("createdb -E UTF8 -T template0"),
        "{e}"
    );
}
