//! Fan-out keeps memory bounded: a burst of `@all` sends to hundreds of agents must
//! not leave the server holding memory per delivery.

use crate::common;
use common::*;
use serde_json::json;
use std::time::Duration;

#[tokio::test]
async fn all_sends_to_hundreds_of_agents_keep_memory_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let s = HttpServer::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    let pid = s.child.id().unwrap();
    for i in 0..400 {
        call(
            &lead,
            "agent_new",
            json!({"name": format!("a{i}"), "backend": "external", "workflow": "@fan"}),
        )
        .await
        .ok();
    }
    call(
        &lead,
        "channel_send",
        json!({"workflow": "@fan", "message": "@all warm up"}),
    )
    .await
    .ok();
    let before = steady_rss(pid).await;
    for n in 0..60 {
        call(
            &lead,
            "channel_send",
            json!({"workflow": "@fan", "message": format!("@all note {n}")}),
        )
        .await
        .ok();
    }
    let threads = proc_status(pid, "Threads:");
    let peak = rss_kib(pid);
    // What the burst took comes back within seconds: polled until it has, or 10 s.
    let t = std::time::Instant::now();
    let after = loop {
        let after = rss_kib(pid);
        if after.saturating_sub(before) < 48 * 1024 || t.elapsed() > Duration::from_secs(10) {
            break after;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    eprintln!(
        "RSS before {before} KiB, right after 60 @all sends to 400 agents {peak} KiB, {:?} later {after} KiB; \
         {threads} threads",
        t.elapsed()
    );
    // Before: ~400 threads (a blocking thread and a connection per delivery's read)
    // and ~250 MB more that never came back. The bound leaves room for a debug build.
    assert!(threads < 48, "{threads} threads after the burst");
    assert!(
        after.saturating_sub(before) < 48 * 1024,
        "RSS grew from {before} to {after} KiB"
    );
    s.stop().await;
}

/// The RSS once it holds still after a burst: two reads a quarter second apart
/// within 1 MiB of each other (at most 5 s).
async fn steady_rss(pid: u32) -> u64 {
    let t = std::time::Instant::now();
    let mut last = rss_kib(pid);
    loop {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let now = rss_kib(pid);
        if now.abs_diff(last) < 1024 || t.elapsed() > Duration::from_secs(5) {
            return now;
        }
        last = now;
    }
}
