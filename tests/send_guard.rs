//! The send guard through real MCP sessions over HTTP: a send still goes out when
//! others posted since the sender last read, and the result says what was missed.

use crate::common;
use common::*;
use serde_json::{Value, json};

/// channel_send as `who`; its result.
async fn send(who: &Client, args: Value) -> Value {
    call(who, "channel_send", args).await.ok()
}

/// The previews a send's result lists as missed, oldest first.
fn previews(r: &Value) -> Vec<String> {
    r["missed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["preview"].as_str().unwrap().to_owned())
        .collect()
}

/// A server with agents alice, bob and carol, and sessions of the first two.
struct Team {
    _dir: tempfile::TempDir,
    _server: InProcess,
    alice: Client,
    bob: Client,
}

async fn team() -> Team {
    let dir = tempfile::tempdir().unwrap();
    let s = InProcess::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    new_agents(&lead, "@global:main", &["alice", "bob", "carol"]).await;
    let alice = join(&s, &lead, "alice", Proto::Modern).await;
    let bob = join(&s, &lead, "bob", Proto::Modern).await;
    Team {
        _dir: dir,
        _server: s,
        alice,
        bob,
    }
}

#[tokio::test]
async fn send_guard_reports_missed_messages() {
    let dir = tempfile::tempdir().unwrap();
    let s = InProcess::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    new_agents(&lead, "@global:main", &["alice", "bob"]).await;
    let alice = join(&s, &lead, "alice", Proto::Modern).await;
    let bob = join(&s, &lead, "bob", Proto::Modern).await;

    call(&alice, "channel_read", json!({})).await.ok();
    send(&bob, json!({"message": "I changed the plan: use branch b"})).await;
    let r = send(&alice, json!({"message": "@bob starting on branch a"})).await;
    assert_eq!(r["missed_count"], 1);
    assert_eq!(r["missed"][0]["from"], "bob");
    assert!(
        r["missed"][0]["preview"]
            .as_str()
            .unwrap()
            .contains("branch b")
    );
    assert!(r["note"].as_str().unwrap().contains("channel_read"));
    // The note was given; the next send is clean.
    let r = send(&alice, json!({"message": "@bob ok"})).await;
    assert_eq!(r["missed_count"], 0);
    // force suppresses the check.
    send(&bob, json!({"message": "another change", "force": true})).await;
    let r = send(&alice, json!({"message": "@bob fine", "force": true})).await;
    assert_eq!(r["missed"], json!([]));
    // A message already seen in the inbox is not "missed".
    send(
        &bob,
        json!({"message": "@alice look at this", "force": true}),
    )
    .await;
    call(&alice, "my_inbox", json!({})).await.ok();
    let r = send(&alice, json!({"message": "@bob looked"})).await;
    assert_eq!(r["missed_count"], 0, "{r}");
}

/// The guard lists the newest ten missed messages, oldest first, and counts up to
/// a hundred; a DM to someone else is not missed.
#[tokio::test]
async fn send_guard_lists_the_newest_ten_and_caps_the_count() {
    let t = team().await;
    call(&t.alice, "channel_read", json!({})).await.ok();
    for i in 1..=12 {
        send(
            &t.bob,
            json!({"message": format!("note {i}"), "force": true}),
        )
        .await;
    }
    send(
        &t.bob,
        json!({"message": "private", "to": "carol", "force": true}),
    )
    .await;
    let r = send(&t.alice, json!({"message": "@bob hi"})).await;
    assert_eq!(r["missed_count"], 12, "{r}");
    let expected: Vec<String> = (3..=12).map(|i| format!("note {i}")).collect();
    assert_eq!(previews(&r), expected, "{r}");
    let texts: Vec<String> = (0..105).map(|i| format!("more {i}")).collect();
    for text in &texts {
        send(&t.bob, json!({"message": text, "force": true})).await;
    }
    let r = send(&t.alice, json!({"message": "@bob back"})).await;
    assert_eq!(r["missed_count"], 100, "counted up to a hundred: {r}");
    assert_eq!(r["missed"][9]["preview"], "more 104", "{r}");
    assert_eq!(r["missed"][0]["preview"], "more 95", "{r}");
}

/// Messages delivered to the sender count as missed until its inbox has shown them
/// (or it acked them), whether they were its own rows or a broadcast's.
#[tokio::test]
async fn delivered_messages_are_missed_until_the_inbox_showed_them() {
    let t = team().await;
    let to_alice = |m: &str| json!({"message": m, "force": true});

    send(&t.bob, to_alice("@alice only you, unread")).await;
    send(&t.bob, to_alice("@all everyone, unread")).await;
    let r = send(&t.alice, json!({"message": "@bob hi"})).await;
    assert_eq!(r["missed_count"], 2, "{r}");
    assert_eq!(
        previews(&r),
        ["@alice only you, unread", "@all everyone, unread"]
    );

    send(&t.bob, to_alice("@alice only you, read")).await;
    send(&t.bob, to_alice("@all everyone, read")).await;
    call(&t.alice, "my_inbox", json!({})).await.ok();
    let acked = send(&t.bob, to_alice("@all everyone, acked unread")).await;
    call(&t.alice, "my_inbox_ack", json!({"message_id": acked["id"]}))
        .await
        .ok();
    let r = send(&t.alice, json!({"message": "@bob seen them"})).await;
    assert_eq!(r["missed_count"], 0, "{r}");
}

/// A missed message's preview is its first 160 characters, with an ellipsis only
/// when there were more, counted in characters (not bytes) on either store: the
/// guard reads no more of each text than that.
#[tokio::test]
async fn previews_are_160_characters_of_long_and_multibyte_texts() {
    let t = team().await;
    call(&t.alice, "channel_read", json!({})).await.ok();
    let exact = "é".repeat(160);
    let longer = format!("{}{}", "日".repeat(160), "x");
    let long = format!("{}{}", "a🙂".repeat(100), "tail");
    for text in [&exact, &longer, &long] {
        send(&t.bob, json!({ "message": text })).await;
    }
    // A NUL would end the text early in SQLite's functions, and PostgreSQL's text
    // cannot hold it: refused on either store, saying so.
    let e = call(&t.bob, "channel_send", json!({"message": "a\u{0}b"}))
        .await
        .err();
    assert!(
        e.contains("NUL character") && e.contains("remove it"),
        "{e}"
    );
    let r = send(&t.alice, json!({"message": "@bob read them"})).await;
    let expected = [
        exact.clone(),
        format!("{}…", "日".repeat(160)),
        format!("{}…", "a🙂".repeat(80)),
    ];
    assert_eq!(previews(&r), expected, "{r}");
}
