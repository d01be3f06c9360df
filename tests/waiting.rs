//! Waiting instead of polling: my_inbox and channel_read with `wait_seconds` answer
//! at once when there is something, else as soon as something for the caller
//! arrives, else empty when the wait is over; what is not for the caller (a direct
//! message to someone else, another instance) does not end the wait.

use crate::common;
use agent_worker::kernel::events::Events;
use common::*;
use serde_json::json;
use std::time::{Duration, Instant};

/// Returns once more than `before` listen to the kernel's events: a waiting read
/// subscribes before it first reads (a few seconds at most).
async fn until_a_read_waits(events: &Events, before: usize) {
    let end = Instant::now() + Duration::from_secs(10);
    while events.subscribers() <= before {
        assert!(Instant::now() < end, "no read began to wait");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test]
async fn an_empty_inbox_waits_for_the_next_message() {
    let dir = tempfile::tempdir().unwrap();
    let s = InProcess::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    new_agents(&lead, "@team", &["alice", "bob"]).await;
    let alice = join(&s, &lead, "alice@team", Proto::Modern).await;

    // Nothing for alice: a message to bob, then one to alice, arrive while she waits.
    let (events, before) = (s.kernel.events.clone(), s.kernel.events.subscribers());
    let sender = tokio::spawn(async move {
        until_a_read_waits(&events, before).await;
        let dm = json!({"message": "for bob only", "to": "bob", "workflow": "@team"});
        call(&lead, "channel_send", dm).await.ok();
        // Time for the DM to end her wait, if it wrongly did.
        tokio::time::sleep(Duration::from_millis(40)).await;
        let sent = Instant::now();
        let hers = json!({"message": "@alice your turn", "workflow": "@team"});
        call(&lead, "channel_send", hers).await.ok();
        (lead, sent, Instant::now())
    });
    let t = Instant::now();
    let inbox = call(&alice, "my_inbox", json!({"wait_seconds": 20}))
        .await
        .ok();
    let answered = Instant::now();
    let took = t.elapsed();
    assert_eq!(contents(&inbox), ["@alice your turn"], "{inbox}");
    let (lead, sent, delivered) = sender.await.unwrap();
    assert!(
        answered >= sent && took < Duration::from_secs(10),
        "it answered when alice's message came, not before or at the end ({took:?})"
    );
    // The answer may even beat the sender's own response home.
    let after = answered.saturating_duration_since(delivered);
    println!("my_inbox answered {after:?} after the delivery's channel_send returned");
    assert!(after < Duration::from_secs(1), "{after:?}");

    // Something there: at once, even with a long wait.
    let t = Instant::now();
    let again = call(&alice, "my_inbox", json!({"wait_seconds": 20}))
        .await
        .ok();
    assert_eq!(contents(&again), ["@alice your turn"]);
    assert!(t.elapsed() < Duration::from_secs(5));

    // Nothing comes: empty when the wait is over.
    let id = again["messages"][0]["id"].clone();
    call(&alice, "my_inbox_ack", json!({"message_id": id}))
        .await
        .ok();
    let t = Instant::now();
    let empty = call(&alice, "my_inbox", json!({"wait_seconds": 1}))
        .await
        .ok();
    assert!(contents(&empty).is_empty(), "{empty}");
    assert!(t.elapsed() >= Duration::from_secs(1));

    let e = call(&alice, "my_inbox", json!({"wait_seconds": 51}))
        .await
        .err();
    assert!(e.contains("wait_seconds") && e.contains("50"), "{e}");
    drop(lead);
    s.stop().await;
}

#[tokio::test]
async fn channel_read_waits_after_since_for_what_the_reader_may_see() {
    let dir = tempfile::tempdir().unwrap();
    let s = InProcess::start(dir.path()).await;
    let lead = s.lead(Proto::Modern).await;
    new_agents(&lead, "@team", &["alice", "bob", "carol"]).await;
    new_agents(&lead, "@other", &["alice"]).await;
    let carol = join(&s, &lead, "carol@team", Proto::Legacy).await;
    let first = call(
        &lead,
        "channel_send",
        json!({"message": "kickoff", "workflow": "@team"}),
    )
    .await
    .ok();
    let since = first["id"].as_str().unwrap().to_owned();

    let (events, before) = (s.kernel.events.clone(), s.kernel.events.subscribers());
    let sender = tokio::spawn(async move {
        until_a_read_waits(&events, before).await;
        // Not for carol: a DM between others, and a post in another instance.
        call(
            &lead,
            "channel_send",
            json!({"message": "psst", "to": "bob", "workflow": "@team"}),
        )
        .await
        .ok();
        call(
            &lead,
            "channel_send",
            json!({"message": "elsewhere", "workflow": "@other"}),
        )
        .await
        .ok();
        // Time for either to end her wait, if it wrongly did.
        tokio::time::sleep(Duration::from_millis(40)).await;
        call(
            &lead,
            "channel_send",
            json!({"message": "news for everyone", "workflow": "@team"}),
        )
        .await
        .ok();
        lead
    });
    let t = Instant::now();
    let r = call(
        &carol,
        "channel_read",
        json!({"since": since, "wait_seconds": 20}),
    )
    .await
    .ok();
    assert_eq!(contents(&r), ["news for everyone"], "{r}");
    assert!(t.elapsed() < Duration::from_secs(10));
    let lead = sender.await.unwrap();

    // Without since, a channel with messages answers at once.
    let t = Instant::now();
    let latest = call(&carol, "channel_read", json!({"wait_seconds": 20}))
        .await
        .ok();
    assert!(!contents(&latest).is_empty());
    assert!(t.elapsed() < Duration::from_secs(5));
    drop(lead);
    s.stop().await;
}
