//! The messaging rules through real MCP sessions over HTTP: agents act through
//! agent_join tokens, the lead through the admin token.

use crate::common;
use common::*;
use serde_json::json;

#[tokio::test]
async fn dm_never_leaks() {
    let dir = tempfile::tempdir().unwrap();
    let s = InProcess::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    new_agents(&lead, "@team:t", &["alice", "bob", "carol"]).await;
    let alice = join(&s, &lead, "alice@team:t", Proto::Modern).await;
    let bob = join(&s, &lead, "bob@team:t", Proto::Legacy).await;
    let carol = join(&s, &lead, "carol@team:t", Proto::Modern).await;

    let r = call(
        &alice,
        "channel_send",
        json!({"message": "secret for you, do not tell @carol", "to": "bob"}),
    )
    .await
    .ok();
    assert_eq!(r["recipients"], json!(["bob"]));

    let ib = call(&bob, "my_inbox", json!({})).await.ok();
    assert_eq!(contents(&ib), vec!["secret for you, do not tell @carol"]);
    assert_eq!(ib["messages"][0]["dm"], true);
    assert_eq!(ib["messages"][0]["from"], "alice");

    let ic = call(&carol, "my_inbox", json!({})).await.ok();
    assert!(
        ic["messages"].as_array().unwrap().is_empty(),
        "carol must not get the DM: {ic}"
    );
    let rc = call(&carol, "channel_read", json!({})).await.ok();
    assert!(
        rc["messages"].as_array().unwrap().is_empty(),
        "carol must not see the DM: {rc}"
    );
    let rl = call(&lead, "channel_read", json!({"workflow": "@team:t"}))
        .await
        .ok();
    assert!(
        rl["messages"].as_array().unwrap().is_empty(),
        "the DM is only for alice and bob: {rl}"
    );
    let ra = call(&alice, "channel_read", json!({})).await.ok();
    assert_eq!(ra["messages"][0]["to"], "bob");

    let e = call(
        &alice,
        "channel_send",
        json!({"message": "hi", "to": "zed"}),
    )
    .await
    .err();
    assert!(e.contains("not a member") && e.contains("bob"), "{e}");
    let e = call(
        &alice,
        "channel_send",
        json!({"message": "hi", "to": "alice"}),
    )
    .await
    .err();
    assert!(e.contains("yourself"), "{e}");
}

#[tokio::test]
async fn addressed_rule_and_all() {
    let dir = tempfile::tempdir().unwrap();
    let s = InProcess::start(dir.path()).await;
    let lead = s.lead(Proto::Modern).await;
    new_agents(&lead, "@team:t", &["alice", "bob", "carol"]).await;
    let alice = join(&s, &lead, "alice@team:t", Proto::Legacy).await;
    let bob = join(&s, &lead, "bob@team:t", Proto::Modern).await;
    let carol = join(&s, &lead, "carol@team:t", Proto::Modern).await;

    // Leading mentions are the recipients; body mentions are not.
    let r = call(
        &alice,
        "channel_send",
        json!({"message": "@bob please review, then tell @carol"}),
    )
    .await
    .ok();
    assert_eq!(r["recipients"], json!(["bob"]));
    // No leading mention: everyone mentioned anywhere.
    let r = call(
        &alice,
        "channel_send",
        json!({"message": "thanks @bob and @Carol"}),
    )
    .await
    .ok();
    assert_eq!(r["recipients"], json!(["bob", "carol"]));
    // Unknown mentions are reported, not delivered.
    let r = call(
        &alice,
        "channel_send",
        json!({"message": "@zed @bob hi", "force": true}),
    )
    .await
    .ok();
    assert_eq!(r["recipients"], json!(["bob"]));
    assert_eq!(r["unknown_mentions"], json!(["zed"]));
    assert!(r["note"].as_str().unwrap().contains("@zed"));
    // @all from an agent: every other agent.
    let r = call(
        &bob,
        "channel_send",
        json!({"message": "@all standup in 5", "force": true}),
    )
    .await
    .ok();
    assert_eq!(r["recipients"], json!(["alice", "carol"]));
    // @all from the lead: every agent; the lead can be mentioned as @user.
    let r = call(
        &lead,
        "channel_send",
        json!({"message": "@all ship it", "workflow": "@team:t"}),
    )
    .await
    .ok();
    assert_eq!(r["recipients"], json!(["alice", "bob", "carol"]));
    let r = call(
        &carol,
        "channel_send",
        json!({"message": "@user done", "force": true}),
    )
    .await
    .ok();
    assert_eq!(r["recipients"], json!(["user"]));
    let li = call(&lead, "my_inbox", json!({"workflow": "@team:t"}))
        .await
        .ok();
    assert_eq!(contents(&li), vec!["@user done"]);

    let ic = call(&carol, "my_inbox", json!({})).await.ok();
    assert_eq!(
        contents(&ic),
        vec![
            "thanks @bob and @Carol",
            "@all standup in 5",
            "@all ship it"
        ]
    );
    let ib = call(&bob, "my_inbox", json!({})).await.ok();
    assert_eq!(
        contents(&ib),
        vec![
            "@bob please review, then tell @carol",
            "thanks @bob and @Carol",
            "@zed @bob hi",
            "@all ship it"
        ]
    );
    assert_eq!(
        ib["messages"][1]["priority"], "high",
        "two mentions make it high priority"
    );
    // An email address mentions nobody.
    let r = call(
        &alice,
        "channel_send",
        json!({"message": "mail me at alice@bob.com", "force": true}),
    )
    .await
    .ok();
    assert_eq!(r["recipients"], json!([]));
    assert!(r["note"].as_str().unwrap().contains("nobody was mentioned"));
}

/// Sends alice five tasks (ids in time order) and bob one; returns their ids.
async fn send_tasks(lead: &Client) -> (Vec<String>, String) {
    let mut sent = Vec::new();
    for i in 0..5 {
        let r = call(
            lead,
            "channel_send",
            json!({"message": format!("@alice task {i}")}),
        )
        .await
        .ok();
        sent.push(r["id"].as_str().unwrap().to_owned());
    }
    let mut sorted = sent.clone();
    sorted.sort();
    assert_eq!(sorted, sent, "message ids sort by time");
    let bob_msg = call(lead, "channel_send", json!({"message": "@bob yours"}))
        .await
        .ok()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    (sent, bob_msg)
}

/// Acking or deferring what alice cannot, and a bad limit, are refused.
async fn alice_inbox_errors(alice: &Client, sent: &[String], bob_msg: &str) {
    // Errors: unknown id, someone else's message, deferring an acked one, bad until.
    let e = call(alice, "my_inbox_ack", json!({"message_id": "0190-nope"}))
        .await
        .err();
    assert!(e.contains("unknown message id"), "{e}");
    let e = call(alice, "my_inbox_ack", json!({"message_id": bob_msg}))
        .await
        .err();
    assert!(e.contains("was not delivered to alice"), "{e}");
    let e = call(alice, "my_inbox_defer", json!({"message_id": sent[1]}))
        .await
        .err();
    assert!(e.contains("already acked"), "{e}");
    let e = call(
        alice,
        "my_inbox_defer",
        json!({"message_id": sent[4], "until": "whenever"}),
    )
    .await
    .err();
    assert!(e.contains("cannot read until"), "{e}");
    let e = call(alice, "my_inbox", json!({"limit": 0})).await.err();
    assert!(e.contains("between 1 and 200"), "{e}");
}

#[tokio::test]
async fn acks_and_defers() {
    let dir = tempfile::tempdir().unwrap();
    let s = InProcess::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    new_agents(&lead, "@global:main", &["alice", "bob"]).await;
    let alice = join(&s, &lead, "alice", Proto::Modern).await;
    let bob = join(&s, &lead, "bob", Proto::Legacy).await;
    let (sent, bob_msg) = send_tasks(&lead).await;

    let page = call(&alice, "my_inbox", json!({"limit": 2})).await.ok();
    assert_eq!(ids(&page), sent[..2]);
    assert_eq!(page["remaining"], 3);
    // Reading does not ack: the same messages come back.
    let again = call(&alice, "my_inbox", json!({})).await.ok();
    assert_eq!(ids(&again), sent);

    // Per-message ack.
    assert_eq!(
        call(&alice, "my_inbox_ack", json!({"message_id": sent[1]}))
            .await
            .ok()["acked"],
        1
    );
    assert_eq!(
        call(&alice, "my_inbox_ack", json!({"message_id": sent[1]}))
            .await
            .ok()["acked"],
        0,
        "acking twice changes nothing"
    );
    // Defer one, then ack through a later id: the deferred one stays deferred.
    let d = call(
        &alice,
        "my_inbox_defer",
        json!({"message_id": sent[2], "until": "2s"}),
    )
    .await
    .ok();
    assert!(d["deferred_until"].as_str().unwrap().ends_with('Z'));
    let ib = call(&alice, "my_inbox", json!({})).await.ok();
    assert_eq!(
        ids(&ib),
        vec![sent[0].clone(), sent[3].clone(), sent[4].clone()]
    );
    assert_eq!(ib["deferred"], 1);
    assert_eq!(
        call(
            &alice,
            "my_inbox_ack",
            json!({"message_id": sent[3], "through": true})
        )
        .await
        .ok()["acked"],
        2
    );
    assert_eq!(
        ids(&call(&alice, "my_inbox", json!({})).await.ok()),
        vec![sent[4].clone()]
    );
    // The deferred message returns when its time comes.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let back = loop {
        let back = ids(&call(&alice, "my_inbox", json!({})).await.ok());
        if back.len() > 1 || std::time::Instant::now() > deadline {
            break back;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    assert_eq!(back, vec![sent[2].clone(), sent[4].clone()]);

    alice_inbox_errors(&alice, &sent, &bob_msg).await;
    // Acks only move forward: the acked one never comes back, and bob's delivery is untouched.
    let ib = call(&alice, "my_inbox", json!({})).await.ok();
    assert!(!ids(&ib).contains(&sent[1]));
    assert_eq!(
        ids(&call(&bob, "my_inbox", json!({})).await.ok()),
        vec![bob_msg.clone()]
    );

    let info = call(&lead, "agent_info", json!({"target": "alice"}))
        .await
        .ok();
    assert_eq!(
        info["inbox"],
        json!({"pending": 0, "seen": 2, "deferred": 0, "acked": 3})
    );
}

#[tokio::test]
async fn limits_and_long_lead_messages() {
    let dir = tempfile::tempdir().unwrap();
    let s = InProcess::start(dir.path()).await;
    let lead = s.lead(Proto::Modern).await;
    new_agents(&lead, "@global:main", &["alice", "bob"]).await;
    let alice = join(&s, &lead, "alice", Proto::Modern).await;

    let e = call(&alice, "channel_send", json!({"message": "   "}))
        .await
        .err();
    assert!(e.contains("empty"), "{e}");
    let exact = format!("@bob {}", "é".repeat(3995));
    assert_eq!(exact.chars().count(), 4000);
    call(
        &alice,
        "channel_send",
        json!({"message": exact, "force": true}),
    )
    .await
    .ok();
    let over = format!("@bob {}", "x".repeat(3996));
    let e = call(&alice, "channel_send", json!({"message": over}))
        .await
        .err();
    assert!(
        e.contains("4001 characters") && e.contains("resource_create"),
        "{e}"
    );

    let long = format!(
        "@alice @bob here is the brief:\n{}",
        "lorem ipsum ".repeat(800)
    );
    let r = call(&lead, "channel_send", json!({"message": long}))
        .await
        .ok();
    let res = r["resource"].as_str().unwrap().to_owned();
    assert!(res.starts_with("res_"));
    assert_eq!(r["recipients"], json!(["alice", "bob"]));
    let ib = call(&alice, "my_inbox", json!({})).await.ok();
    let c = ib["messages"][0]["content"].as_str().unwrap();
    assert!(
        c.starts_with("@alice @bob [long message") && c.contains(&res) && c.len() < 1000,
        "{c}"
    );
    assert!(
        c.contains("\nhere is the brief:\nlorem ipsum"),
        "the preview starts after the mentions: {c}"
    );
    // The agent can follow the pointer.
    let full = call(&alice, "resource_read", json!({"id": res})).await.ok();
    assert_eq!(full["content"].as_str().unwrap(), long);
    let e = call(
        &lead,
        "channel_send",
        json!({"message": "x".repeat(1024 * 1024 + 1)}),
    )
    .await
    .err();
    assert!(e.contains("even the lead's limit"), "{e}");
}

#[tokio::test]
async fn resources_are_content_addressed() {
    let dir = tempfile::tempdir().unwrap();
    let s = InProcess::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    new_agents(&lead, "@global:main", &["alice", "bob"]).await;
    let alice = join(&s, &lead, "alice", Proto::Modern).await;
    let bob = join(&s, &lead, "bob", Proto::Legacy).await;

    let a = call(
        &alice,
        "resource_create",
        json!({"content": "# Report\nall good", "type": "markdown"}),
    )
    .await
    .ok();
    assert_eq!(a["created"], true);
    let id = a["id"].as_str().unwrap().to_owned();
    assert_eq!(
        a["uri"].as_str().unwrap(),
        format!("agent-worker://resources/{id}")
    );
    let again = call(
        &bob,
        "resource_create",
        json!({"content": "# Report\nall good", "type": "markdown"}),
    )
    .await
    .ok();
    assert_eq!(
        (again["id"].as_str().unwrap(), &again["created"]),
        (id.as_str(), &json!(false)),
        "same content, same id"
    );
    let r = call(&bob, "resource_read", json!({"id": id})).await.ok();
    assert_eq!(
        (
            r["type"].as_str().unwrap(),
            r["content"].as_str().unwrap(),
            r["created_by"].as_str().unwrap()
        ),
        ("markdown", "# Report\nall good", "alice")
    );
    let r = call(&bob, "resource_read", json!({"id": a["uri"]}))
        .await
        .ok();
    assert_eq!(r["id"].as_str().unwrap(), id, "the URI works as an id too");

    call(
        &alice,
        "resource_create",
        json!({"content": "{\"ok\": true}", "type": "json"}),
    )
    .await
    .ok();
    let e = call(
        &alice,
        "resource_create",
        json!({"content": "{not json", "type": "json"}),
    )
    .await
    .err();
    assert!(e.contains("not valid JSON"), "{e}");
    let e = call(
        &alice,
        "resource_create",
        json!({"content": "x", "type": "pdf"}),
    )
    .await
    .err();
    assert!(e.contains("text, markdown, json, diff"), "{e}");
    let e = call(&alice, "resource_create", json!({"content": ""}))
        .await
        .err();
    assert!(e.contains("empty"), "{e}");
    let e = call(
        &alice,
        "resource_create",
        json!({"content": "y".repeat(1024 * 1024 + 1)}),
    )
    .await
    .err();
    assert!(e.contains("at most 1048576"), "{e}");
    let e = call(&alice, "resource_read", json!({"id": "res_nope"}))
        .await
        .err();
    assert!(e.contains("no resource"), "{e}");
}

#[tokio::test]
async fn channel_read_paging_and_isolation() {
    let dir = tempfile::tempdir().unwrap();
    let s = InProcess::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    new_agents(&lead, "@review:pr-1", &["alice"]).await;
    new_agents(&lead, "@review:pr-2", &["alice"]).await;
    let a1 = join(&s, &lead, "alice@review:pr-1", Proto::Modern).await;
    let a2 = join(&s, &lead, "alice@review:pr-2", Proto::Legacy).await;
    for i in 0..25 {
        call(
            &a1,
            "channel_send",
            json!({"message": format!("one {i}"), "force": true}),
        )
        .await
        .ok();
    }
    call(&a2, "channel_send", json!({"message": "two 0"}))
        .await
        .ok();

    let latest = call(&a1, "channel_read", json!({})).await.ok();
    assert_eq!(
        latest["messages"].as_array().unwrap().len(),
        20,
        "default limit is 20"
    );
    assert_eq!(contents(&latest).last().unwrap(), "one 24");
    let first = contents(&latest)[0].clone();
    assert_eq!(first, "one 5");
    let all = call(&a1, "channel_read", json!({"limit": 200})).await.ok();
    let ids_all = ids(&all);
    assert_eq!(ids_all.len(), 25);
    let page = call(
        &a1,
        "channel_read",
        json!({"since": ids_all[9], "limit": 10}),
    )
    .await
    .ok();
    assert_eq!(contents(&page)[0], "one 10");
    assert_eq!(page["has_more"], true);
    let tail = call(
        &a1,
        "channel_read",
        json!({"since": ids_all[19], "limit": 10}),
    )
    .await
    .ok();
    assert_eq!(tail["messages"].as_array().unwrap().len(), 5);
    assert_eq!(tail["has_more"], false);

    // Instances with different tags are isolated.
    assert_eq!(
        contents(&call(&a2, "channel_read", json!({})).await.ok()),
        vec!["two 0"]
    );
    let e = call(&a2, "channel_read", json!({"since": ids_all[0]}))
        .await
        .err();
    assert!(e.contains("unknown message id"), "{e}");
    // An agent acts in its own instance only (`workflow` names its organisation's).
    let e = call(&a2, "channel_read", json!({"workflow": "@review:pr-1"}))
        .await
        .err();
    assert!(e.contains("act only in"), "{e}");
    let e = call(
        &a2,
        "team_vote",
        json!({"workflow": "@review:pr-1", "proposal": "latest", "choice": "a"}),
    )
    .await
    .err();
    assert!(e.contains("unknown argument \"workflow\""), "{e}");
    let e = call(&a1, "channel_read", json!({"limit": 201})).await.err();
    assert!(e.contains("between 1 and 200"), "{e}");
    let e = call(&lead, "channel_read", json!({"workflow": "@review:pr-9"}))
        .await
        .err();
    assert!(e.contains("no workflow instance @review:pr-9"), "{e}");
}

#[tokio::test]
async fn status_and_team_members() {
    let dir = tempfile::tempdir().unwrap();
    let s = InProcess::start(dir.path()).await;
    let lead = s.lead(Proto::Modern).await;
    new_agents(&lead, "@global:main", &["alice", "bob"]).await;
    let alice = join(&s, &lead, "alice", Proto::Modern).await;

    let st = call(
        &alice,
        "my_status_set",
        json!({"task": "review PR", "state": "busy", "note": "halfway"}),
    )
    .await
    .ok();
    assert_eq!(st["status"]["state"], "busy");
    let st = call(&alice, "my_status_set", json!({"note": "almost done"}))
        .await
        .ok();
    assert_eq!(st["status"]["task"], "review PR", "fields merge");
    let e = call(&alice, "my_status_set", json!({"state": "sleeping"}))
        .await
        .err();
    assert!(e.contains("idle, busy, blocked"), "{e}");
    let e = call(&alice, "my_status_set", json!({})).await.err();
    assert!(e.contains("nothing to set"), "{e}");

    let m = call(&alice, "team_members", json!({"include_status": true}))
        .await
        .ok();
    let members = m["members"].as_array().unwrap();
    let names: Vec<_> = members
        .iter()
        .map(|m| m["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, vec!["alice", "bob", "user"]);
    assert_eq!(members[0]["is_you"], true);
    assert_eq!(members[0]["task"], "review PR");
    assert_eq!(members[1]["state"], "idle");
    let m = call(&alice, "team_members", json!({})).await.ok();
    assert!(m["members"][0].get("state").is_none());
    let st = call(&alice, "my_status_set", json!({"state": "idle"}))
        .await
        .ok();
    assert!(
        st["status"].get("task").is_none(),
        "idle without a task clears it"
    );
}
