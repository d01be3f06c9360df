//! Fan-out keeps memory bounded: a burst of `@all` sends to hundreds of agents must
//! not leave the server holding memory per delivery.

mod common;
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
    tokio::time::sleep(Duration::from_secs(2)).await;
    let before = rss_kib(pid);
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
    tokio::time::sleep(Duration::from_secs(5)).await;
    let after = rss_kib(pid);
    eprintln!(
        "RSS before {before} KiB, right after 60 @all sends to 400 agents {peak} KiB, 5 s later {after} KiB; \
         {threads} threads"
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
