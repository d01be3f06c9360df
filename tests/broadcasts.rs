//! `@all` is stored as one broadcast row and each agent's delivery is written when
//! its inbox is first read or changed. End to end, through the real binary and
//! real mock workers: every agent is woken and settles its copy, and a broadcast
//! an agent never got to before a kill -9 is still owed after the restart.

use crate::common;
use common::*;
use serde_json::{Value, json};

fn succeeded(i: &Value) -> usize {
    i["runs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["status"] == "succeeded")
        .count()
}

/// How many times each text is in the channel.
async fn count(lead: &Client, text: &str) -> usize {
    let read = call(lead, "channel_read", json!({"limit": 200})).await.ok();
    contents(&read).iter().filter(|c| *c == text).count()
}

#[tokio::test]
async fn an_all_wakes_every_agent_and_each_run_settles_its_copy() {
    let dir = tempfile::tempdir().unwrap();
    let s = HttpServer::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    let names = ["w1", "w2", "w3"];
    for n in names {
        new_mock(&lead, n, json!([{"send": "@user {name} done"}])).await;
    }
    let sent = call(&lead, "channel_send", json!({"message": "@all go"}))
        .await
        .ok();
    assert_eq!(sent["recipients"], json!(names));
    for n in names {
        wait_info(&lead, n, 20, |i| succeeded(i) == 1).await;
        let i = wait_info(&lead, n, 5, |i| i["inbox"]["acked"] == 1).await;
        assert_eq!(
            i["inbox"],
            json!({"pending": 0, "seen": 0, "deferred": 0, "acked": 1}),
            "{n}"
        );
        assert_eq!(count(&lead, &format!("@user {n} done")).await, 1, "{n}");
    }
    // The lead got the three replies, not its own broadcast.
    let inbox = call(&lead, "my_inbox", json!({})).await.ok();
    assert_eq!(inbox["messages"].as_array().unwrap().len(), 3, "{inbox}");
    s.stop().await;
}

/// With one worker at a time, the second agent's copy is still only the broadcast
/// row when the kernel is killed; the next kernel must find it owed and run it.
#[tokio::test]
async fn an_unread_broadcast_is_owed_after_kill_9() {
    let dir = tempfile::tempdir().unwrap();
    let env = [("AGENT_WORKER_MAX_WORKERS", "1")];
    let s = HttpServer::start_with_env(dir.path(), &env).await;
    let lead = s.lead(Proto::Legacy).await;
    for n in ["w1", "w2"] {
        new_mock(
            &lead,
            n,
            json!([{"sleep": "2s"}, {"send": "@user {name} done"}]),
        )
        .await;
    }
    call(&lead, "channel_send", json!({"message": "@all go"}))
        .await
        .ok();
    // One runs, the other waits for the worker place.
    let end = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let waiting = loop {
        let (a, b) = (info(&lead, "w1").await, info(&lead, "w2").await);
        if a.get("running").is_some() {
            break b;
        }
        if b.get("running").is_some() {
            break a;
        }
        assert!(std::time::Instant::now() < end, "no run started: {a} {b}");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    assert_eq!(waiting["inbox"]["pending"], 1, "{waiting}");
    assert!(waiting["runs"].as_array().unwrap().is_empty(), "{waiting}");
    drop(lead);
    s.kill().await;

    let s = HttpServer::start_with_env(dir.path(), &env).await;
    let lead = s.lead(Proto::Legacy).await;
    for n in ["w1", "w2"] {
        wait_info(&lead, n, 30, |i| succeeded(i) == 1).await;
        let i = wait_info(&lead, n, 5, |i| i["inbox"]["acked"] == 1).await;
        assert_eq!(i["inbox"]["pending"], 0, "{i}");
        assert_eq!(count(&lead, &format!("@user {n} done")).await, 1, "{n}");
    }
    s.stop().await;
}
