//! Restarts: agents and messages survive; deliveries read but not acked come back
//! as pending; acks survive even a kill -9.

use crate::common;
use common::*;
use serde_json::json;

#[tokio::test]
async fn restart_keeps_state_and_requeues_seen_deliveries() {
    let dir = tempfile::tempdir().unwrap();
    let s = HttpServer::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    new_agents(&lead, "@team:r", &["alice", "bob"]).await;
    let mut ids = Vec::new();
    for i in 0..3 {
        let r = call(
            &lead,
            "channel_send",
            json!({"workflow": "@team:r", "message": format!("@alice job {i}")}),
        )
        .await
        .ok();
        ids.push(r["id"].as_str().unwrap().to_owned());
    }
    let alice = join(&s, &lead, "alice@team:r", Proto::Modern).await;
    assert_eq!(
        call(&alice, "my_inbox", json!({})).await.ok()["messages"]
            .as_array()
            .unwrap()
            .len(),
        3
    );
    call(&alice, "my_inbox_ack", json!({"message_id": ids[0]}))
        .await
        .ok();
    let before = call(&lead, "agent_info", json!({"target": "alice@team:r"}))
        .await
        .ok();
    assert_eq!(
        before["inbox"],
        json!({"pending": 0, "seen": 2, "deferred": 0, "acked": 1})
    );
    drop((alice, lead));
    s.stop().await;

    let s = HttpServer::start(dir.path()).await;
    let lead = s.lead(Proto::Modern).await;
    let agents = call(&lead, "agent_list", json!({"workflow": "@team:r"}))
        .await
        .ok();
    assert_eq!(agents["agents"].as_array().unwrap().len(), 2);
    let after = call(&lead, "agent_info", json!({"target": "alice@team:r"}))
        .await
        .ok();
    assert_eq!(
        after["inbox"],
        json!({"pending": 2, "seen": 0, "deferred": 0, "acked": 1}),
        "seen -> pending on restart"
    );
    let read = call(&lead, "channel_read", json!({"workflow": "@team:r"}))
        .await
        .ok();
    assert_eq!(
        contents(&read),
        vec!["@alice job 0", "@alice job 1", "@alice job 2"]
    );
    let alice = join(&s, &lead, "alice@team:r", Proto::Legacy).await;
    assert_eq!(
        common::ids(&call(&alice, "my_inbox", json!({})).await.ok()),
        ids[1..]
    );
    s.stop().await;
}

#[tokio::test]
async fn acked_work_stays_acked_after_kill_9() {
    let dir = tempfile::tempdir().unwrap();
    let s = HttpServer::start(dir.path()).await;
    let lead = s.lead(Proto::Modern).await;
    new_agents(&lead, "@global:main", &["alice"]).await;
    let alice = join(&s, &lead, "alice", Proto::Modern).await;
    let mut ids = Vec::new();
    for i in 0..20 {
        let r = call(
            &lead,
            "channel_send",
            json!({"message": format!("@alice item {i}")}),
        )
        .await
        .ok();
        ids.push(r["id"].as_str().unwrap().to_owned());
    }
    call(&alice, "my_inbox", json!({"limit": 200})).await.ok();
    call(
        &alice,
        "my_inbox_ack",
        json!({"message_id": ids[9], "through": true}),
    )
    .await
    .ok();
    s.kill().await;

    let s = HttpServer::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    let info = call(&lead, "agent_info", json!({"target": "alice"}))
        .await
        .ok();
    assert_eq!(
        info["inbox"],
        json!({"pending": 10, "seen": 0, "deferred": 0, "acked": 10})
    );
    let read = call(&lead, "channel_read", json!({"limit": 200}))
        .await
        .ok();
    assert_eq!(common::ids(&read), ids, "no message lost, none duplicated");
}
