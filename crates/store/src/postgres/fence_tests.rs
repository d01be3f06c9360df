//! A node's writers and its lock, on a real PostgreSQL (as `tests.rs`): only the
//! first writer holds the node's lock, and the instance writers write only while
//! their kernel holds it.

use super::super::{Location, Store};
use crate::sql;
use crate::testing::fresh_database;
use domain::error::Error;

/// A store on a fresh database with one table, and the database's URL.
async fn store_with_table() -> Option<(String, Store)> {
    let url = fresh_database()?;
    let store = Store::open_at(&Location::Postgres(url.clone())).expect("open the store");
    store
        .write(|c| Ok(c.execute_batch("CREATE TABLE r (v BIGINT)")?))
        .await
        .expect("create the test's table");
    Some((url, store))
}

/// Writes `v` into the test's table under `instance`'s lock.
async fn insert_in(store: &Store, instance: i64, v: i64) -> domain::error::Result<usize> {
    let write = move |c: &sql::Connection| Ok(c.execute("INSERT INTO r VALUES (?1)", [v])?);
    let scope = crate::WriteScope::Instance(instance);
    store
        .write_as(scope, crate::Isolation::Savepoint, write)
        .await
}

/// An instance writer that reconnects writes only while this kernel holds its
/// node's lock: cut off and taken over by another kernel of its name, it must not
/// write beside that kernel.
#[tokio::test]
async fn an_instance_writer_writes_only_while_its_kernel_holds_the_node() {
    let Some((url, store)) = store_with_table().await else {
        return;
    };
    let insert = |v: i64| insert_in(&store, 7, v);
    insert(1).await.expect("an instance write");
    let db = url.rsplit_once('/').unwrap().1.to_owned();
    let admin = std::env::var("AGENT_WORKER_TEST_PG").unwrap();
    let other = admin.rsplit_once('/').unwrap().0.to_owned() + "/" + &db;
    // Every session of the store ends; another holds the node's lock meanwhile.
    let (took, holder) = std::sync::mpsc::channel();
    let (release, released) = std::sync::mpsc::channel::<()>();
    let thief = std::thread::spawn(move || {
        let mut c = postgres::Client::connect(&other, postgres::NoTls).unwrap();
        c.query(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()",
            &[&db],
        )
        .unwrap();
        // Waits for the terminated first writer to let the lock go.
        c.query(
            "SELECT pg_advisory_lock(CAST($1 AS INTEGER), hashtext('local'))",
            &[&super::NODE_LOCK],
        )
        .unwrap();
        took.send(()).unwrap();
        released.recv().ok();
    });
    holder.recv().unwrap();
    let refused = insert(2)
        .await
        .expect_err("an instance write beside another kernel");
    assert!(
        refused.to_string().contains("is not held by this kernel"),
        "{refused}"
    );
    release.send(()).unwrap();
    thief.join().unwrap();
    // The first writer takes the node's lock again, and the instance writes follow.
    store
        .write(|c| Ok(c.execute("INSERT INTO r VALUES (3)", ())?))
        .await
        .expect("the first writer took its node back");
    insert(4)
        .await
        .expect("an instance write once the node is back");
    let seen: Vec<i64> = store
        .read(|c| {
            let mut st = c.prepare("SELECT v FROM r ORDER BY v")?;
            let rows = st.query_map((), |r| r.get(0))?;
            Ok(rows.collect::<sql::Result<Vec<i64>>>()?)
        })
        .await
        .unwrap();
    assert_eq!(seen, vec![1, 3, 4]);
}

/// A kernel whose first writer alone lost its session keeps its instance writers:
/// another kernel of its name is refused while they live, and the first kernel
/// takes its node back.
#[tokio::test]
async fn a_node_whose_instance_writers_live_is_not_taken() {
    let Some((url, first)) = store_with_table().await else {
        return;
    };
    let insert = |v: i64| insert_in(&first, 3, v);
    insert(1).await.expect("an instance write");
    let db = url.rsplit_once('/').unwrap().1.to_owned();
    let admin = std::env::var("AGENT_WORKER_TEST_PG").unwrap();
    let ended = std::thread::spawn(move || {
        let mut c = postgres::Client::connect(&admin, postgres::NoTls).unwrap();
        c.query(
            "SELECT pg_terminate_backend(pid) FROM pg_locks
              WHERE locktype = 'advisory' AND granted AND classid = CAST($1 AS OID)
                AND database = (SELECT oid FROM pg_database WHERE datname = $2)",
            &[&(super::NODE_LOCK as u32), &db],
        )
        .unwrap()
        .len()
    })
    .join()
    .unwrap();
    assert_eq!(ended, 1, "the first writer's session alone");
    // Whether or not the ended session has let the node's lock go yet, the second
    // kernel waits for it and then finds the first one's instance writers.
    let Err(refused) = Store::open_at(&Location::Postgres(url.clone())) else {
        panic!("a second kernel took the node while the first one's instance writers live")
    };
    assert!(matches!(refused, Error::Conflict(_)), "{refused}");
    assert!(
        refused.to_string().contains("writer connections are alive"),
        "{refused}"
    );
    first
        .write(|c| Ok(c.execute("INSERT INTO r VALUES (2)", ())?))
        .await
        .expect("the first kernel took its node back");
    insert(3).await.expect("and its instance writers write on");
}
