//! The writers on both engines: jobs without a savepoint ([`Isolation::ChecksFirst`])
//! and the instance locks (PostgreSQL, on the cluster `AGENT_WORKER_TEST_PG` names;
//! without one those parts say so and pass).

use super::{Isolation, Location, Rest, Store, Then, WriteScope};
use crate::sql::Connection;
use crate::testing::fresh_database;
use domain::error::{Error, Result};
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

/// What a job of a case does, on a table `t (k TEXT PRIMARY KEY)` that holds `old`.
#[derive(Clone, Copy, Debug)]
enum Does {
    /// Inserts its key.
    Write,
    /// Reads, then refuses before writing anything.
    Refuse,
    /// Inserts its key, then refuses.
    WriteThenRefuse,
    /// Inserts `old` again: the database refuses the statement.
    Duplicate,
    /// Sends an insert of `old` without waiting for its answer, and succeeds.
    DuplicateLater,
    /// Inserts `old`, ignores the refusal, and succeeds.
    Swallow,
    /// Piped ([`Store::write_piped`]; its isolation unused): sends its insert.
    PipedWrite,
    /// Piped: sends a read, and refuses from its answer (having written nothing).
    PipedRefuse,
    /// Piped: sends its insert, then refuses.
    PipedWriteThenRefuse,
    /// Piped: sends a read, then asks to run again, where it inserts its key with
    /// how many rows it sees then.
    PipedAgain,
    /// Piped: sends an insert of `old`, which the server refuses.
    PipedDuplicate,
}

use Does::*;
use Isolation::{ChecksFirst as CF, Savepoint as SP};

fn job(does: Does, key: String) -> impl FnOnce(&Connection) -> Result<()> + Send + 'static {
    move |c: &Connection| {
        let refused = || Err(Error::invalid(format!("{key} refused")));
        match does {
            Write => c.execute("INSERT INTO t VALUES (?1)", [&key]).map(drop)?,
            Refuse => {
                let _: i64 = c.query_row("SELECT count(*) FROM t", (), |r| r.get(0))?;
                return refused();
            }
            WriteThenRefuse => {
                c.execute("INSERT INTO t VALUES (?1)", [&key])?;
                return refused();
            }
            Duplicate => c.execute("INSERT INTO t VALUES ('old')", ()).map(drop)?,
            DuplicateLater => c.execute_later("INSERT INTO t VALUES ('old')", ())?,
            Swallow => {
                let _ = c.execute("INSERT INTO t VALUES ('old')", ());
                c.execute("INSERT INTO t VALUES (?1)", [&key])
                    .map(drop)
                    .ok();
            }
            PipedWrite | PipedRefuse | PipedWriteThenRefuse | PipedAgain | PipedDuplicate => {
                unreachable!("{does:?} is piped")
            }
        }
        Ok(())
    }
}

/// The first half of a piped job that `does` (one of the `Piped` kinds).
fn piped(does: Does, key: String) -> impl FnOnce(&Connection) -> Result<Rest<()>> + Send {
    move |c: &Connection| {
        let count = |c: &Connection, sql: &str| c.prepare(sql)?.query_later(());
        let rest: Rest<()> = match does {
            PipedWrite => {
                c.execute_later("INSERT INTO t VALUES (?1)", [&key])?;
                Box::new(|_| Ok(Then::Done(())))
            }
            PipedRefuse => {
                let old = count(c, "SELECT count(*) FROM t WHERE k = 'old'")?;
                Box::new(
                    move |c| match old.rows(c)?.next()?.map(|r| r.get::<i64>(0)) {
                        Some(Ok(0)) => Ok(Then::Done(())),
                        _ => Err(Error::invalid(format!("{key} refused"))),
                    },
                )
            }
            PipedWriteThenRefuse => {
                c.execute_later("INSERT INTO t VALUES (?1)", [&key])?;
                Box::new(move |_| Err(Error::invalid(format!("{key} refused"))))
            }
            PipedAgain => {
                let sent = count(c, "SELECT count(*) FROM t")?;
                Box::new(move |c| {
                    sent.rows(c)?;
                    Ok(Then::Again(
                        CF,
                        Box::new(move |c| {
                            let n: i64 = c.query_row("SELECT count(*) FROM t", (), |r| r.get(0))?;
                            c.execute("INSERT INTO t VALUES (?1)", [format!("{key}@{n}")])?;
                            Ok(())
                        }),
                    ))
                })
            }
            PipedDuplicate => {
                c.execute_later("INSERT INTO t VALUES ('old')", ())?;
                Box::new(|_| Ok(Then::Done(())))
            }
            _ => unreachable!("{does:?} is not piped"),
        };
        Ok(rest)
    }
}

/// How a job was answered.
fn answer(r: &Result<()>) -> &'static str {
    match r {
        Ok(()) => "ok",
        Err(e) if e.to_string().contains("the write was not made") => "not made",
        Err(e) if e.to_string().contains("commit failed") => "commit failed",
        Err(_) => "own error",
    }
}

type Case = (
    &'static [(Isolation, Does)],
    // SQLite (every job in a savepoint): the answers and the keys written.
    (&'static [&'static str], &'static str),
    // PostgreSQL.
    (&'static [&'static str], &'static str),
);

/// Jobs of one transaction and how each engine answers them. A ChecksFirst job
/// that refuses before it writes leaves the others' writes; one that fails after a
/// write, or after a statement the database refused, costs the whole transaction
/// on PostgreSQL, and every job is told the write was not made. SQLite keeps a
/// savepoint per job, so there each job fails alone.
const CASES: &[Case] = &[
    (
        &[(CF, Write), (CF, Refuse), (CF, Write)],
        (&["ok", "own error", "ok"], "j0 j2"),
        (&["ok", "own error", "ok"], "j0 j2"),
    ),
    (
        &[(CF, Write), (CF, WriteThenRefuse), (CF, Write)],
        (&["ok", "own error", "ok"], "j0 j2"),
        (&["not made", "own error", "not made"], ""),
    ),
    (
        &[(SP, Write), (CF, Duplicate), (SP, Write)],
        (&["ok", "own error", "ok"], "j0 j2"),
        (&["not made", "own error", "not made"], ""),
    ),
    (
        &[(CF, Write), (CF, Swallow), (CF, Write)],
        (&["ok", "ok", "ok"], "j0 j1 j2"),
        (&["not made", "not made", "not made"], ""),
    ),
    (
        // A deferred write's failure is read as its job ends: that job's own,
        // whatever runs next.
        &[(CF, Write), (CF, DuplicateLater), (CF, Write)],
        (&["ok", "own error", "ok"], "j0 j2"),
        (&["not made", "own error", "not made"], ""),
    ),
    (
        // ... and the last job's too, before the commit.
        &[(CF, Write), (CF, DuplicateLater)],
        (&["ok", "own error"], "j0"),
        (&["not made", "own error"], ""),
    ),
    (
        &[
            (SP, Write),
            (SP, WriteThenRefuse),
            (SP, Duplicate),
            (SP, Swallow),
            (CF, Write),
        ],
        (&["ok", "own error", "own error", "ok", "ok"], "j0 j3 j4"),
        (
            &["ok", "own error", "own error", "own error", "ok"],
            "j0 j4",
        ),
    ),
    (
        // Piped jobs: a refusal writes nothing and leaves the others. A job run
        // again runs after the piped jobs that followed it (on PostgreSQL: it
        // sees three rows, old, j0 and j3); on SQLite each job is whole.
        &[
            (CF, PipedWrite),
            (CF, PipedAgain),
            (CF, PipedRefuse),
            (CF, PipedWrite),
            (SP, Write),
            (CF, PipedWrite),
        ],
        (
            &["ok", "ok", "own error", "ok", "ok", "ok"],
            "j0 j1@2 j3 j4 j5",
        ),
        (
            &["ok", "ok", "own error", "ok", "ok", "ok"],
            "j0 j1@3 j3 j4 j5",
        ),
    ),
    (
        // A refused statement of a piped job fails the whole transaction (on
        // PostgreSQL, whichever job it was: they are read together).
        &[
            (CF, PipedWrite),
            (CF, PipedDuplicate),
            (CF, PipedWrite),
            (SP, Write),
        ],
        (&["ok", "own error", "ok", "ok"], "j0 j2 j3"),
        (&["not made", "not made", "not made", "not made"], ""),
    ),
    (
        // A piped job that refuses after it wrote fails the whole transaction.
        &[
            (CF, PipedWrite),
            (CF, PipedWriteThenRefuse),
            (CF, PipedWrite),
        ],
        (&["ok", "own error", "ok"], "j0 j2"),
        (&["not made", "own error", "not made"], ""),
    ),
    (
        // A job that is not piped reads the piped ones' answers first: its
        // savepoint's rollback undoes its own writes only.
        &[(CF, PipedWrite), (SP, WriteThenRefuse), (CF, PipedWrite)],
        (&["ok", "own error", "ok"], "j0 j2"),
        (&["ok", "own error", "ok"], "j0 j2"),
    ),
];

/// Runs `jobs` in one transaction of instance 1's writer: a first job holds the
/// writer until every one of them is queued behind it.
async fn in_one_transaction(store: &Store, jobs: &[(Isolation, Does)]) -> Vec<Result<()>> {
    let (started_tx, started_rx) = std::sync::mpsc::channel::<()>();
    let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
    let mut blocker = Box::pin(store.write_as(WriteScope::Instance(1), SP, move |_| {
        let _ = started_tx.send(());
        let _ = go_rx.recv_timeout(Duration::from_secs(30));
        Ok(())
    }));
    assert!(futures::poll!(blocker.as_mut()).is_pending());
    started_rx
        .recv_timeout(Duration::from_secs(30))
        .expect("the first job runs");
    let mut queued: Vec<Pin<Box<dyn Future<Output = Result<()>> + Send>>> = Vec::new();
    for (i, (isolation, does)) in jobs.iter().enumerate() {
        let (scope, key) = (WriteScope::Instance(1), format!("j{i}"));
        let mut f: Pin<Box<dyn Future<Output = Result<()>> + Send>> = match does {
            PipedWrite | PipedRefuse | PipedWriteThenRefuse | PipedAgain | PipedDuplicate => {
                Box::pin(store.write_piped(scope, piped(*does, key)))
            }
            _ => Box::pin(store.write_as(scope, *isolation, job(*does, key))),
        };
        assert!(futures::poll!(f.as_mut()).is_pending(), "queued");
        queued.push(f);
    }
    go_tx.send(()).unwrap();
    blocker.await.unwrap();
    futures::future::join_all(queued).await
}

async fn keys(store: &Store) -> String {
    store
        .read(|c| {
            let keys: Vec<String> = c
                .prepare("SELECT k FROM t WHERE k <> 'old' ORDER BY k")?
                .query_map((), |r| r.get(0))?
                .collect::<crate::sql::Result<_>>()?;
            Ok(keys.join(" "))
        })
        .await
        .unwrap()
}

async fn check_cases(store: &Store, postgres: bool) {
    for (jobs, on_sqlite, on_postgres) in CASES {
        let (want, written) = if postgres { on_postgres } else { on_sqlite };
        store
            .write(|c| {
                c.execute_batch("DELETE FROM t")?;
                Ok(c.execute("INSERT INTO t VALUES ('old')", ()).map(drop)?)
            })
            .await
            .unwrap();
        let got: Vec<&str> = in_one_transaction(store, jobs)
            .await
            .iter()
            .map(answer)
            .collect();
        let engine = if postgres { "PostgreSQL" } else { "SQLite" };
        assert_eq!(&got, want, "{engine}, answers to {jobs:?}");
        assert_eq!(keys(store).await, *written, "{engine}, written by {jobs:?}");
        // The writer goes on: the next transaction commits.
        store
            .write_as(WriteScope::Instance(1), CF, job(Write, "after".into()))
            .await
            .unwrap_or_else(|e| panic!("{engine}, after {jobs:?}: {e}"));
        store
            .write(|c| Ok(c.execute("DELETE FROM t WHERE k = 'after'", ()).map(drop)?))
            .await
            .unwrap();
    }
}

const TABLE: &str = "CREATE TABLE t (k TEXT PRIMARY KEY)";

#[tokio::test]
async fn jobs_without_a_savepoint_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("w.db")).unwrap();
    store.write(|c| Ok(c.execute_batch(TABLE)?)).await.unwrap();
    check_cases(&store, false).await;
    assert!(
        store.take_instance_holds().is_empty(),
        "no instance locks on SQLite"
    );
}

#[tokio::test]
async fn jobs_without_a_savepoint_on_postgres() {
    let Some(url) = fresh_database() else { return };
    let store = Store::open_at(&Location::Postgres(url)).unwrap();
    store.write(|c| Ok(c.execute_batch(TABLE)?)).await.unwrap();
    check_cases(&store, true).await;
}

/// How many advisory locks the database's sessions wait for.
async fn waiting(store: &Store) -> i64 {
    store
        .read(|c| {
            Ok(c.query_row(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted
                   AND database = (SELECT oid FROM pg_database WHERE datname = current_database())",
                (),
                |r| r.get(0),
            )?)
        })
        .await
        .unwrap()
}

/// While a transaction of instance 1 is open, one of instance 2 commits (from
/// another node too), and a global write waits for it to end.
#[tokio::test]
async fn instances_write_at_once_and_a_global_write_alone() {
    let Some(url) = fresh_database() else { return };
    let location = Location::Postgres(url);
    let (one, two) = (
        Store::open_as(&location, "one").unwrap(),
        Store::open_as(&location, "two").unwrap(),
    );
    one.take_instance_holds();
    let (started_tx, started_rx) = std::sync::mpsc::channel::<()>();
    let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
    let mut held = Box::pin(one.write_as(WriteScope::Instance(1), SP, move |_| {
        let _ = started_tx.send(());
        let _ = go_rx.recv_timeout(Duration::from_secs(30));
        Ok(())
    }));
    assert!(futures::poll!(held.as_mut()).is_pending());
    started_rx.recv_timeout(Duration::from_secs(30)).unwrap();
    for store in [&one, &two] {
        let other = store.write_as(WriteScope::Instance(2), SP, |_| Ok(()));
        tokio::time::timeout(Duration::from_secs(20), other)
            .await
            .expect("instance 2 writes while instance 1's transaction is open")
            .unwrap();
    }
    let mut global = Box::pin(two.write(|_| Ok(())));
    assert!(futures::poll!(global.as_mut()).is_pending());
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while waiting(&one).await == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the global write waits"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(
        futures::poll!(global.as_mut()).is_pending(),
        "still waiting"
    );
    go_tx.send(()).unwrap();
    held.await.unwrap();
    global.await.unwrap();
    let holds = one.take_instance_holds();
    let ids: Vec<i64> = holds.iter().map(|(id, _)| *id).collect();
    assert_eq!(ids, vec![1, 2], "{holds:?}");
    assert!(holds[0].1.max_us >= holds[1].1.max_us, "{holds:?}");
}

/// Two nodes each read and write instances' counters (read, then write what was
/// read plus one) and a global total: with the instance locks and the global one
/// taken as they are, no update is lost and no transaction waits in a circle.
#[tokio::test]
async fn two_nodes_lose_no_update_across_instances() {
    let Some(url) = fresh_database() else { return };
    let location = Location::Postgres(url);
    let nodes = [
        Store::open_as(&location, "one").unwrap(),
        Store::open_as(&location, "two").unwrap(),
    ];
    nodes[0]
        .write(|c| {
            c.execute_batch("CREATE TABLE n (inst BIGINT PRIMARY KEY, v BIGINT NOT NULL)")?;
            Ok(c.execute_batch("INSERT INTO n VALUES (0, 0), (1, 0), (2, 0), (3, 0), (4, 0)")?)
        })
        .await
        .unwrap();
    let bump = |inst: i64| {
        move |c: &Connection| {
            let v: i64 = c.query_row("SELECT v FROM n WHERE inst = ?1", [inst], |r| r.get(0))?;
            Ok(
                c.execute("UPDATE n SET v = ?1 WHERE inst = ?2", [v + 1, inst])
                    .map(drop)?,
            )
        }
    };
    let mut writes = Vec::new();
    for round in 0..60i64 {
        for (i, node) in nodes.iter().enumerate() {
            let inst = 1 + (round + i as i64) % 4;
            let iso = if round % 2 == 0 { SP } else { CF };
            writes.push(
                Box::pin(node.write_as(WriteScope::Instance(inst), iso, bump(inst)))
                    as Pin<Box<dyn Future<Output = Result<()>> + Send>>,
            );
            if round % 10 == 0 {
                writes.push(Box::pin(node.write(bump(0))));
            }
        }
    }
    let results = tokio::time::timeout(Duration::from_secs(60), futures::future::join_all(writes))
        .await
        .expect("no transaction waits in a circle");
    assert!(results.iter().all(Result::is_ok), "{results:?}");
    let counts: Vec<i64> = nodes[1]
        .read(|c| {
            Ok(c.prepare("SELECT v FROM n ORDER BY inst")?
                .query_map((), |r| r.get(0))?
                .collect::<crate::sql::Result<_>>()?)
        })
        .await
        .unwrap();
    assert_eq!(counts, vec![12, 30, 30, 30, 30]);
}

/// How many leading jobs one transaction carries when it may lock at most two
/// instances: global jobs lock none, a repeated instance no more.
#[test]
fn a_transaction_carries_jobs_of_at_most_so_many_instances() {
    use WriteScope::{Global as G, Instance as I};
    let check = |scopes: &[WriteScope], expect: usize| {
        let got = crate::writer::within_instances(scopes.iter().copied(), 2);
        assert_eq!(got, expect, "{scopes:?}");
    };
    check(&[], 0);
    check(&[G, G], 2);
    check(&[I(1), I(2), I(1), G], 4);
    check(&[I(1), I(2), I(3), I(1)], 2);
    check(&[G, I(5), I(5), I(6), I(7)], 4);
    // One job always goes, whatever it touches.
    let one = crate::writer::within_instances([I(9)].into_iter(), 0);
    assert_eq!(one, 1);
}

/// Which jobs may join a transaction once its locks are taken: on PostgreSQL those
/// of the instances it locked, every one when it holds the whole database (a
/// global job), a global one never otherwise; on SQLite every one. Its BEGIN
/// takes the database's lock shared (exclusive with a global job), then each
/// instance's once, by ascending key.
#[test]
fn a_transaction_takes_jobs_its_locks_cover() {
    use WriteScope::{Global as G, Instance as I};
    let check = |postgres: bool, batch: &[WriteScope], joins: &[(WriteScope, bool)]| {
        let locks = crate::writer::Locks::of(batch.iter().copied(), postgres);
        for (scope, expect) in joins {
            assert_eq!(locks.covers(*scope), *expect, "{batch:?} then {scope:?}");
        }
    };
    check(false, &[I(1)], &[(I(2), true), (G, true)]);
    check(true, &[I(1)], &[(I(1), true), (I(2), false), (G, false)]);
    check(true, &[I(1), I(2), I(1)], &[(I(2), true), (I(3), false)]);
    check(true, &[I(4), G], &[(I(9), true), (G, true)]);
    check(true, &[], &[(I(1), false), (G, false)]);

    let (a, b) = (
        crate::postgres::instance_key(1),
        crate::postgres::instance_key(2),
    );
    let begin = crate::writer::Locks::of([I(2), I(1), I(2)], true).begin();
    let locked: Vec<&str> = begin.split("; ").collect();
    assert!(
        locked[1].contains("pg_advisory_xact_lock_shared("),
        "{begin}"
    );
    let keys: Vec<String> = [a.min(b), a.max(b)]
        .iter()
        .map(|k| format!(", {k})"))
        .collect();
    assert!(
        locked.len() == 4 && locked[2].ends_with(&keys[0]) && locked[3].ends_with(&keys[1]),
        "{begin}"
    );
    let global = crate::writer::Locks::of([G, I(1)], true).begin();
    assert!(
        !global.contains("_shared") && global.contains("pg_advisory_xact_lock("),
        "{global}"
    );
}
