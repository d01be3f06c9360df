//! For tests, of other crates too: stores on a real
//! PostgreSQL cluster, the one `AGENT_WORKER_TEST_PG` names (`scripts/pg-cluster
//! start`), one fresh database each. Without a cluster a test says so and passes,
//! unless the heavy tests are asked for (`AGENT_WORKER_HEAVY=1`, as in CI), where
//! it fails.

use super::{Location, Store};

/// A new, empty database on the test cluster, or `None` when there is no cluster.
pub fn fresh_database() -> Option<String> {
    let admin = match std::env::var("AGENT_WORKER_TEST_PG") {
        Ok(url) if !url.is_empty() => url,
        _ if std::env::var("AGENT_WORKER_HEAVY").is_ok_and(|v| v == "1") => {
            panic!("AGENT_WORKER_HEAVY=1 but AGENT_WORKER_TEST_PG is not set: run scripts/test")
        }
        _ => {
            eprintln!("skipped: no PostgreSQL (eval \"$(scripts/pg-cluster start)\")");
            return None;
        }
    };
    let name = format!("aw_unit_{}", uuid::Uuid::now_v7().simple());
    let (url, db) = (admin.clone(), name.clone());
    std::thread::spawn(move || {
        let mut c =
            postgres::Client::connect(&url, postgres::NoTls).expect("connect to the test cluster");
        c.batch_execute(&format!("CREATE DATABASE {db}"))
            .expect("create a test database");
    })
    .join()
    .unwrap();
    let (base, _) = admin.rsplit_once('/').expect("the URL names a database");
    Some(format!("{base}/{name}"))
}

/// A store, migrated to the end, on a fresh database of the test cluster; `None`
/// (the test skips) when there is no cluster.
pub fn fresh_postgres_store() -> Option<Store> {
    let url = fresh_database()?;
    Some(Store::open_at(&Location::Postgres(url)).expect("open the store on the test cluster"))
}
