//! Which store the suite's kernels use: SQLite in their data dir, or, with
//! `AGENT_WORKER_TEST_STORE=postgres`, a database of their own on the PostgreSQL
//! cluster `AGENT_WORKER_TEST_PG` names (scripts/test starts one). The database is
//! named after the data dir, so a kernel restarted on the same data dir finds its
//! state again, as it would in its SQLite file.

use std::path::Path;

/// `AGENT_WORKER_STORE` for a kernel on `data_dir`, or `None` on SQLite.
pub fn env_for(data_dir: &Path) -> Option<(&'static str, String)> {
    let mode = std::env::var("AGENT_WORKER_TEST_STORE").unwrap_or_default();
    match mode.as_str() {
        "" | "sqlite" => None,
        "postgres" => Some(("AGENT_WORKER_STORE", database_for(data_dir))),
        other => panic!("AGENT_WORKER_TEST_STORE={other:?}: use sqlite or postgres"),
    }
}

/// The cluster's admin URL; a missing one fails the test when the heavy tests are
/// asked for (`AGENT_WORKER_HEAVY=1`, as in CI) and otherwise says how to get one.
pub fn cluster() -> Option<String> {
    match std::env::var("AGENT_WORKER_TEST_PG") {
        Ok(url) if !url.is_empty() => Some(url),
        _ if super::heavy::on() => {
            panic!(
                "AGENT_WORKER_HEAVY=1 but AGENT_WORKER_TEST_PG is not set: run the suite through scripts/test"
            )
        }
        _ => {
            eprintln!(
                "skipped: no PostgreSQL (eval \"$(scripts/pg-cluster start)\" sets AGENT_WORKER_TEST_PG)"
            );
            None
        }
    }
}

/// A fresh (or, for the same `key`, the same) database on the cluster; its URL.
pub fn database(key: &str) -> String {
    let admin = cluster().expect("AGENT_WORKER_TEST_STORE=postgres needs AGENT_WORKER_TEST_PG");
    let name = format!("aw_{:016x}", fnv(key));
    let url = admin.clone();
    let db = name.clone();
    // The blocking client runs its own runtime: never on a test's runtime thread.
    std::thread::spawn(move || {
        let mut c =
            postgres::Client::connect(&url, postgres::NoTls).expect("connect to the test cluster");
        let exists = c
            .query_opt("SELECT 1 FROM pg_database WHERE datname = $1", &[&db])
            .expect("look up the test database")
            .is_some();
        if !exists {
            c.batch_execute(&format!("CREATE DATABASE {db}"))
                .expect("create the test database");
        }
    })
    .join()
    .expect("create the test database");
    match admin.rsplit_once('/') {
        Some((base, _)) => format!("{base}/{name}"),
        None => panic!("AGENT_WORKER_TEST_PG has no database part: {admin}"),
    }
}

fn database_for(data_dir: &Path) -> String {
    database(&data_dir.to_string_lossy())
}

/// FNV-1a: a stable name for a path, the same in every test process.
fn fnv(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Runs one statement with one text parameter (`?1`) on the store of the kernel on
/// `data_dir`, with the kernel stopped: how a test changes what a kernel will find.
pub fn execute(data_dir: &Path, sql: &str, param: &str) -> u64 {
    match env_for(data_dir) {
        None => {
            let db = rusqlite::Connection::open(data_dir.join(agent_worker::kernel::DB_FILE))
                .expect("open the kernel's SQLite file");
            db.execute(sql, [param]).expect("run the statement") as u64
        }
        Some((_, url)) => {
            let (sql, param) = (sql.replace("?1", "$1"), param.to_owned());
            std::thread::spawn(move || {
                let mut c = postgres::Client::connect(&url, postgres::NoTls)
                    .expect("connect to the kernel's database");
                c.execute(sql.as_str(), &[&param])
                    .expect("run the statement")
            })
            .join()
            .expect("run the statement")
        }
    }
}
