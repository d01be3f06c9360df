//! A node cut off from the database while its process lives (a proxy the test
//! controls stops every byte between node a and PostgreSQL): a stops its own
//! workers within half its lease, node b takes a's agents over once the lease is
//! out, the run a had in progress is closed lost and runs again on b, and nothing
//! runs twice, not even after the link comes back: a finds itself taken over and
//! registers again with no agents.

use crate::common;
use common::proxy::Proxy;
use common::*;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

/// Polls `what` every 100 ms until it gives Some, for at most `within`.
async fn until<T, F: std::future::Future<Output = Option<T>>>(
    within: Duration,
    what: &str,
    mut f: impl FnMut() -> F,
) -> T {
    let deadline = Instant::now() + within;
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(Instant::now() < deadline, "{what} within {within:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The processes whose working directory is under `dir` (a worker's is its
/// agent's folder in its kernel's data dir).
fn working_in(dir: &std::path::Path) -> Vec<String> {
    let mut found = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let pid = e.file_name().to_string_lossy().into_owned();
        if !pid.chars().all(|c| c.is_ascii_digit()) {
            continue;
        }
        if let Ok(cwd) = std::fs::read_link(e.path().join("cwd"))
            && cwd.starts_with(dir)
        {
            let cmd = std::fs::read_to_string(e.path().join("cmdline")).unwrap_or_default();
            found.push(format!("{pid} {}", cmd.replace('\0', " ")));
        }
    }
    found
}

/// The mock: a run sleeps 6 s, then says it is done. Cut as a's run starts, a
/// worker that lived on would say so 6 s in, after the link is back and before
/// b's run (started after the lease, 6 s long) says it.
const SLOW: &str = r#"[{"when": "work", "sleep": "6s", "send": "@user done: {message}"}]"#;

#[tokio::test]
async fn a_node_cut_off_from_the_database_stops_and_is_taken_over() {
    let Some(cluster) = store::cluster() else {
        return;
    };
    let dirs = [(); 2].map(|_| tempfile::tempdir().unwrap());
    let url = store::database(&format!("partition {}", dirs[0].path().display()));
    let upstream = cluster
        .rsplit_once('@')
        .unwrap()
        .1
        .split('/')
        .next()
        .unwrap();
    let proxy = Proxy::start(upstream.parse().unwrap()).await;
    let lease = [("AGENT_WORKER_NODE_LEASE", "2s")];
    let via = proxy.url(&url);
    let a = HttpServer::start_with(dirs[0].path(), &["--node", "a", "--store", &via], &lease).await;
    let b = HttpServer::start_with(dirs[1].path(), &["--node", "b", "--store", &url], &lease).await;
    let lb = b.lead(Proto::Modern).await;
    let slow: Value = serde_json::from_str(SLOW).unwrap();
    let made = json!({"name": "slow", "backend": "mock", "node": "a", "mock": slow});
    call(&lb, "agent_new", made).await.ok();
    call(&lb, "channel_send", json!({"message": "@slow work one"}))
        .await
        .ok();
    wait_info(&lb, "slow", 20, |i| i["runs"][0]["status"] == "running").await;
    let cut = Instant::now();
    proxy.cut();

    // b takes slow over once a's lease (2 s) is out; a's run is closed lost.
    wait_info(&lb, "slow", 15, |i| i["agent"]["node"] == "b").await;
    let took = cut.elapsed();
    // Not before the lease is out: 2 s after a's last heartbeat (at most a beat,
    // 0.4 s, before the cut).
    assert!(
        took >= Duration::from_millis(1500),
        "before the lease: {took:?}"
    );
    assert!(took < Duration::from_secs(8), "took {took:?}");
    // By then a had stopped its worker itself: no process works in a's data dir.
    let dir_a = std::fs::canonicalize(dirs[0].path()).unwrap();
    let left = working_in(&dir_a);
    assert!(left.is_empty(), "a's workers still run: {left:?}");
    proxy.heal();

    // It runs again on b and says so once, and a's worker (stopped when a could
    // not renew its lease) never does, although a reaches the database again.
    let runs =
        wait_info(&lb, "slow", 30, |i| i["runs"][0]["status"] == "succeeded").await["runs"].clone();
    let statuses: Vec<&str> = runs
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses, ["succeeded", "lost"], "{runs}");
    until(Duration::from_secs(15), "a back with no agents", || async {
        let n = nodes(&lb).await;
        let a = n["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|n| n["name"] == "a")
            .cloned();
        a.filter(|a| a["alive"] == true && a["agents"] == 0)
    })
    .await;
    // b's run ended 6 s after the takeover, past the time a's worker would have
    // spoken (6 s into its run, which began before the cut).
    let read = call(&lb, "channel_read", json!({"limit": 50})).await.ok();
    let done = contents(&read)
        .into_iter()
        .filter(|m| m.contains("done: slow work one"))
        .count();
    assert_eq!(done, 1, "said once: {read}");
    let log = std::fs::read_to_string(dirs[0].path().join("logs/agent-worker.log")).unwrap();
    assert!(
        log.contains("stopping this node's workers"),
        "a fenced itself: {log}"
    );
    // a serves its clients again: a question through it is answered on b.
    let la = a.lead(Proto::Legacy).await;
    let r = ask(&la, "slow", "work two", 30).await;
    assert_eq!(r["status"], "succeeded", "{r}");
    assert_eq!(info(&la, "slow").await["agent"]["node"], "b");
    a.stop().await;
    b.stop().await;
}
