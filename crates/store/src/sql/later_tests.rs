//! Queries sent ahead ([`super::Statement::query_later`]) on both engines: each sees
//! the state as it was sent, in any order of reading; one that fails fails its job
//! alone, named by its own statement; one never read leaves the job whole.

use crate::testing::fresh_database;
use crate::{Location, Store};

async fn store_on(location: Location) -> Store {
    let store = Store::open_at(&location).expect("open the store");
    store
        .write(|c| Ok(c.execute_batch("CREATE TABLE d (k TEXT PRIMARY KEY, n BIGINT)")?))
        .await
        .expect("create the test's table");
    store
}

fn n_of(c: &super::Connection, later: super::Later) -> domain::error::Result<Vec<i64>> {
    let mut rows = later.rows(c)?;
    let mut out = Vec::new();
    while let Some(r) = rows.next()? {
        out.push(r.get(0)?);
    }
    Ok(out)
}

/// Runs the jobs; the failing read's error, for each engine's words.
async fn reads_sent_ahead(store: Store) -> String {
    store
        .write(|c| {
            let select = "SELECT n FROM d WHERE k = ?1";
            c.execute_later("INSERT INTO d (k, n) VALUES (?1, 1)", ["a"])?;
            let first = c.prepare_cached(select)?.query_later(["a"])?;
            c.execute_later("UPDATE d SET n = 5 WHERE k = ?1", ["a"])?;
            let second = c.prepare_cached(select)?.query_later(["a"])?;
            let never_read = c.prepare_cached(select)?.query_later(["a"])?;
            drop(never_read);
            c.execute_later("UPDATE d SET n = 7 WHERE k = ?1", ["a"])?;
            assert_eq!(n_of(c, second)?, [5], "read first, as it was sent");
            assert_eq!(n_of(c, first)?, [1]);
            let now: i64 = c.query_row(select, ["a"], |r| r.get(0))?;
            assert_eq!(now, 7);
            Ok(())
        })
        .await
        .expect("the job with reads sent ahead");

    // A read that fails at run time (a bigint out of range, on either engine) fails
    // its own job, named by its statement; the job beside it keeps its write.
    let failing = store.write(|c| {
        c.execute_later("INSERT INTO d (k, n) VALUES (?1, 1)", ["b"])?;
        let bad = c
            .prepare_cached("SELECT abs(CAST(?1 AS BIGINT))")?
            .query_later([i64::MIN])?;
        n_of(c, bad).map(|_| ())
    });
    let fine = store.write(|c| Ok(c.execute("INSERT INTO d (k, n) VALUES ('c', 1)", ())?));
    let (failing, fine) = tokio::join!(failing, fine);
    let e = failing.expect_err("abs of the smallest bigint").to_string();
    fine.expect("the other job");
    let keys: Vec<String> = store
        .read(|c| {
            let mut st = c.prepare("SELECT k FROM d ORDER BY k")?;
            let keys = st.query_map((), |r| r.get(0))?;
            Ok(keys.collect::<super::Result<_>>()?)
        })
        .await
        .unwrap();
    assert_eq!(keys, ["a", "c"]);
    e
}

#[tokio::test]
async fn reads_sent_ahead_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_on(Location::Sqlite(dir.path().join("t.db"))).await;
    let e = reads_sent_ahead(store).await;
    assert!(e.contains("integer overflow"), "{e}");
}

#[tokio::test]
async fn reads_sent_ahead_on_postgres() {
    let Some(url) = fresh_database() else { return };
    let e = reads_sent_ahead(store_on(Location::Postgres(url)).await).await;
    assert!(
        e.contains("out of range") && e.contains("SELECT abs(CAST"),
        "{e}"
    );
}
