//! Proposals and votes through real MCP sessions: every resolution rule, quorum,
//! tie-breakers, expiry on time, cancel permissions, the channel messages that reach
//! whoever must act, and persistence across a restart.

use crate::common;
use common::*;
use serde_json::{Value, json};
use std::time::Duration;

/// The contents of a session's inbox from `system`, acked so the next read is fresh.
async fn system_inbox(c: &Client) -> Vec<String> {
    let ib = call(c, "my_inbox", json!({"limit": 50})).await.ok();
    let msgs = ib["messages"].as_array().unwrap().clone();
    if let Some(last) = msgs.last() {
        call(
            c,
            "my_inbox_ack",
            json!({"message_id": last["id"], "through": true}),
        )
        .await
        .ok();
    }
    msgs.iter()
        .filter(|m| m["from"] == "system")
        .map(|m| m["content"].as_str().unwrap().to_owned())
        .collect()
}

async fn vote(c: &Client, p: &str, choice: &str) -> Value {
    call(c, "team_vote", json!({"proposal": p, "choice": choice}))
        .await
        .ok()
}

/// Alice proposes prop-1; bob and carol are asked in their inboxes, alice is not.
async fn alice_proposes_and_the_others_are_asked(alice: &Client, bob: &Client, carol: &Client) {
    let c = call(
        alice,
        "team_proposal_create",
        json!({"type": "approval", "title": "Ship v1 on @Friday", "description": "All tests green."}),
    )
    .await
    .ok();
    let p = &c["proposal"];
    assert_eq!(p["id"], "prop-1");
    assert_eq!(p["options"][0]["id"], "approve");
    assert_eq!(p["options"][1]["id"], "reject");
    assert_eq!(
        (
            p["quorum"].as_u64(),
            p["resolution"].as_str(),
            p["tie_breaker"].as_str(),
            p["binding"].as_bool()
        ),
        (Some(3), Some("plurality"), Some("first"), Some(true))
    );
    assert_eq!(p["status"], "open");
    assert_eq!(p["waiting_for"], json!(["alice", "bob", "carol"]));

    // The others are asked in their inboxes; the creator is not, and the quoted title
    // mentions nobody.
    let b = system_inbox(bob).await;
    assert_eq!(b.len(), 1, "{b:?}");
    assert!(
        b[0].starts_with("@bob @carol alice proposes prop-1") && b[0].contains("team_vote"),
        "{}",
        b[0]
    );
    assert!(!b[0].contains("@Friday"), "{}", b[0]);
    assert_eq!(system_inbox(carol).await.len(), 1);
    assert!(system_inbox(alice).await.is_empty());
}

/// Two votes short of the quorum resolve nothing and wake nobody; bad votes are refused.
async fn votes_short_of_the_quorum(alice: &Client, bob: &Client, carol: &Client) {
    let v = call(
        bob,
        "team_vote",
        json!({"proposal": "prop-1", "choice": "Approve", "reason": "looks fine"}),
    )
    .await
    .ok();
    assert_eq!(v["resolved"], false);
    assert!(
        v["proposal"]["note"].as_str().unwrap().contains("1 of 3"),
        "{v}"
    );
    let v = vote(carol, "latest", "reject").await;
    assert_eq!(v["resolved"], false);
    // An ordinary vote wakes nobody.
    assert!(system_inbox(alice).await.is_empty());

    let e = call(
        alice,
        "team_vote",
        json!({"proposal": "prop-1", "choice": "maybe"}),
    )
    .await
    .err();
    assert!(e.contains("approve, reject"), "{e}");
    let e = call(
        alice,
        "team_vote",
        json!({"proposal": "prop-9", "choice": "approve"}),
    )
    .await
    .err();
    assert!(e.contains("no proposal prop-9"), "{e}");
}

#[tokio::test]
async fn approval_by_plurality_after_quorum_reaches_everyone() {
    let dir = tempfile::tempdir().unwrap();
    let s = InProcess::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    let t = agent_sessions(&s, &lead, "@vote:t", &["alice", "bob", "carol"]).await;
    let (alice, bob, carol) = (&t[0], &t[1], &t[2]);

    alice_proposes_and_the_others_are_asked(alice, bob, carol).await;

    votes_short_of_the_quorum(alice, bob, carol).await;

    // A revote replaces: carol switches, then alice completes the quorum.
    vote(carol, "prop-1", "approve").await;
    let v = vote(alice, "1", "reject").await;
    assert_eq!(v["resolved"], true, "{v}");
    assert_eq!(v["winner"]["id"], "approve");
    let p = &v["proposal"];
    assert_eq!(p["status"], "resolved");
    assert_eq!(p["closed_by"], "quorum");
    assert_eq!(p["options"][0]["votes"], 2);
    assert_eq!(p["votes"].as_array().unwrap().len(), 3);
    let bobs = p["votes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["voter"] == "bob")
        .unwrap();
    assert_eq!(bobs["reason"], "looks fine");

    // The resolution reaches everyone involved but the voter who settled it.
    for c in [bob, carol] {
        let got = system_inbox(c).await;
        assert!(
            got.iter()
                .any(|m| m.contains("prop-1") && m.contains("is resolved: approve")),
            "{got:?}"
        );
    }
    let e = call(
        alice,
        "team_vote",
        json!({"proposal": "prop-1", "choice": "approve"}),
    )
    .await
    .err();
    assert!(
        e.contains("is resolved") && e.contains("no more votes"),
        "{e}"
    );

    // The lead follows along in the channel, and can see the status.
    let st = call(
        &lead,
        "team_proposal_status",
        json!({"workflow": "@vote:t"}),
    )
    .await
    .ok();
    assert_eq!(st["proposals"][0]["winner"]["id"], "approve");
    let ch = call(&lead, "channel_read", json!({"workflow": "@vote:t"}))
        .await
        .ok();
    let kinds: Vec<&str> = ch["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["kind"].as_str().unwrap())
        .collect();
    assert!(kinds.iter().all(|k| *k == "system"), "{kinds:?}");
    assert_eq!(kinds.len(), 6, "create, four votes, resolution");
}

#[tokio::test]
async fn majority_deadlock_is_broken_by_a_revote() {
    let dir = tempfile::tempdir().unwrap();
    let s = InProcess::start(dir.path()).await;
    let lead = s.lead(Proto::Modern).await;
    let t = agent_sessions(&s, &lead, "@maj:t", &["alice", "bob", "carol"]).await;
    let c = call(
        &t[0],
        "team_proposal_create",
        json!({"type": "decision", "title": "Database", "resolution": "majority",
               "options": [{"id": "pg", "label": "PostgreSQL"}, {"id": "lite", "label": "SQLite"}, "MySQL"]}),
    )
    .await
    .ok();
    assert_eq!(c["proposal"]["options"][2]["id"], "MySQL");
    vote(&t[0], "prop-1", "pg").await;
    vote(&t[1], "prop-1", "SQLite").await; // a label works as a choice
    for c in &t {
        system_inbox(c).await;
    }
    let v = vote(&t[2], "prop-1", "mysql").await;
    assert_eq!(v["resolved"], false);
    let note = v["proposal"]["note"].as_str().unwrap();
    assert!(
        note.contains("more than half") && note.contains("revote"),
        "{note}"
    );
    // The deadlock asks the other voters to reconsider.
    let a = system_inbox(&t[0]).await;
    assert!(
        a.iter()
            .any(|m| m.starts_with("@alice @bob carol voted MySQL") && m.contains("revote")),
        "{a:?}"
    );
    let v = vote(&t[1], "prop-1", "pg").await;
    assert_eq!(v["resolved"], true);
    assert_eq!(v["winner"], json!({"id": "pg", "label": "PostgreSQL"}));
}

#[tokio::test]
async fn unanimous_needs_every_vote_alike() {
    let dir = tempfile::tempdir().unwrap();
    let s = InProcess::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    let t = agent_sessions(&s, &lead, "@una:t", &["alice", "bob"]).await;
    call(
        &t[0],
        "team_proposal_create",
        json!({"type": "approval", "title": "Merge", "resolution": "unanimous", "binding": false}),
    )
    .await
    .ok();
    vote(&t[0], "prop-1", "approve").await;
    let v = vote(&t[1], "prop-1", "reject").await;
    assert_eq!(v["resolved"], false);
    assert!(
        v["proposal"]["note"]
            .as_str()
            .unwrap()
            .contains("every vote"),
        "{v}"
    );
    let v = vote(&t[1], "prop-1", "approve").await;
    assert_eq!(v["resolved"], true);
    assert_eq!(v["proposal"]["binding"], false);
}

#[tokio::test]
async fn quorum_and_tie_breakers_incl_creator_decides() {
    let dir = tempfile::tempdir().unwrap();
    let s = InProcess::start(dir.path()).await;
    let lead = s.lead(Proto::Modern).await;
    let t = agent_sessions(&s, &lead, "@tie:t", &["alice", "bob", "carol", "dave"]).await;
    let (alice, bob, carol, dave) = (&t[0], &t[1], &t[2], &t[3]);

    // An explicit quorum of 2: two votes resolve; `first` breaks the tie by option order.
    call(
        bob,
        "team_proposal_create",
        json!({"type": "decision", "title": "first", "options": ["x", "y"], "quorum": 2}),
    )
    .await
    .ok();
    let v = vote(carol, "prop-1", "y").await;
    assert_eq!(v["resolved"], false);
    let v = vote(dave, "prop-1", "x").await;
    assert_eq!(v["resolved"], true);
    assert_eq!(v["winner"]["id"], "x");

    // creator-decides, tie with the creator undecided: it stays open and asks the creator.
    call(
        alice,
        "team_proposal_create",
        json!({"type": "decision", "title": "cd", "options": ["y", "x"], "quorum": 2,
               "tie_breaker": "creator-decides"}),
    )
    .await
    .ok();
    system_inbox(alice).await;
    vote(bob, "prop-2", "y").await;
    let v = vote(carol, "prop-2", "x").await;
    assert_eq!(v["resolved"], false);
    assert!(
        v["proposal"]["note"]
            .as_str()
            .unwrap()
            .contains("alice decides"),
        "{v}"
    );
    let a = system_inbox(alice).await;
    assert!(
        a.iter()
            .any(|m| m.starts_with("@alice carol voted x") && m.contains("alice decides")),
        "{a:?}"
    );
    let v = vote(alice, "prop-2", "x").await;
    assert_eq!(v["winner"]["id"], "x");

    // creator-decides with the creator among a 2-2 tie: the creator's option wins even
    // though `first` would have picked the other.
    call(
        alice,
        "team_proposal_create",
        json!({"type": "decision", "title": "cd2", "options": ["y", "x"],
               "tie_breaker": "creator-decides"}),
    )
    .await
    .ok();
    vote(alice, "prop-3", "x").await;
    vote(bob, "prop-3", "y").await;
    let v = vote(carol, "prop-3", "x").await;
    assert_eq!(v["resolved"], false, "3 of the default quorum of 4");
    let v = vote(dave, "prop-3", "y").await;
    assert_eq!(v["resolved"], true);
    assert_eq!(v["winner"]["id"], "x");

    // random picks one of the tied options.
    call(
        alice,
        "team_proposal_create",
        json!({"type": "election", "title": "lead", "quorum": 2, "tie_breaker": "random"}),
    )
    .await
    .ok();
    let st = call(alice, "team_proposal_status", json!({"proposal": "prop-4"}))
        .await
        .ok();
    let ids: Vec<&str> = st["proposals"][0]["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        ids,
        ["alice", "bob", "carol", "dave"],
        "an election defaults to the agents"
    );
    vote(bob, "prop-4", "carol").await;
    let v = vote(carol, "prop-4", "dave").await;
    let w = v["winner"]["id"].as_str().unwrap();
    assert!(w == "carol" || w == "dave", "{v}");

    // The lead is a member and may vote too.
    call(
        &lead,
        "team_proposal_create",
        json!({"workflow": "@tie:t", "type": "approval", "title": "by lead", "quorum": 1}),
    )
    .await
    .ok();
    let v = call(
        &lead,
        "team_vote",
        json!({"workflow": "@tie:t", "proposal": "prop-5", "choice": "approve"}),
    )
    .await
    .ok();
    assert_eq!(v["resolved"], true);
    assert_eq!(v["proposal"]["votes"][0]["voter"], "user");
}

#[tokio::test]
async fn bad_proposals_are_explained() {
    let dir = tempfile::tempdir().unwrap();
    let s = InProcess::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    let t = agent_sessions(&s, &lead, "@bad:t", &["alice", "bob"]).await;
    let cases = [
        (
            json!({"type": "poll", "title": "x"}),
            "election, decision, approval, assignment",
        ),
        (json!({"type": "decision", "title": "x"}), "needs options"),
        (
            json!({"type": "decision", "title": "x", "options": ["a"]}),
            "at least two",
        ),
        (
            json!({"type": "decision", "title": "x", "options": ["a", "A"]}),
            "given twice",
        ),
        (json!({"type": "approval", "title": " "}), "title is empty"),
        (
            json!({"type": "approval", "title": "x", "quorum": 4}),
            "impossible",
        ),
        (
            json!({"type": "approval", "title": "x", "quorum": 0}),
            "impossible",
        ),
        (
            json!({"type": "approval", "title": "x", "resolution": "vibes"}),
            "plurality, majority, unanimous",
        ),
        (
            json!({"type": "approval", "title": "x", "tie_breaker": "coin"}),
            "creator-decides",
        ),
        (
            json!({"type": "approval", "title": "x", "timeout": "8d"}),
            "7d",
        ),
        (
            json!({"type": "approval", "title": "x", "timeout": "soon"}),
            "duration",
        ),
        (
            json!({"type": "approval", "title": "x".repeat(201)}),
            "at most 200",
        ),
    ];
    for (args, why) in cases {
        let e = call(&t[0], "team_proposal_create", args.clone())
            .await
            .err();
        assert!(e.contains(why), "{args}: {e}");
    }
    let st = call(&t[0], "team_proposal_status", json!({})).await.ok();
    assert_eq!(st["proposals"], json!([]), "nothing was half-created");
    let e = call(
        &t[0],
        "team_vote",
        json!({"proposal": "latest", "choice": "a"}),
    )
    .await
    .err();
    assert!(e.contains("no proposals yet"), "{e}");
}

#[tokio::test]
async fn cancel_is_for_the_creator_or_the_lead() {
    let dir = tempfile::tempdir().unwrap();
    let s = InProcess::start(dir.path()).await;
    let lead = s.lead(Proto::Modern).await;
    let t = agent_sessions(&s, &lead, "@can:t", &["alice", "bob", "carol"]).await;
    for title in ["one", "two"] {
        call(
            &t[0],
            "team_proposal_create",
            json!({"type": "approval", "title": title}),
        )
        .await
        .ok();
    }
    vote(&t[1], "prop-1", "approve").await;
    for c in &t {
        system_inbox(c).await;
    }
    let e = call(&t[1], "team_proposal_cancel", json!({"proposal": "prop-1"}))
        .await
        .err();
    assert!(e.contains("only alice"), "{e}");
    let c = call(&t[0], "team_proposal_cancel", json!({"proposal": "prop-1"}))
        .await
        .ok();
    assert_eq!(c["proposal"]["status"], "cancelled");
    assert_eq!(c["proposal"]["closed_by"], "alice");
    // Those who still had to vote are told; bob, who voted, is not woken.
    assert!(
        system_inbox(&t[2])
            .await
            .iter()
            .any(|m| m.starts_with("@carol prop-1") && m.contains("cancelled")),
    );
    assert!(system_inbox(&t[1]).await.is_empty());
    let e = call(&t[0], "team_proposal_cancel", json!({"proposal": "prop-1"}))
        .await
        .err();
    assert!(e.contains("already cancelled"), "{e}");
    let e = call(
        &t[2],
        "team_vote",
        json!({"proposal": "prop-1", "choice": "approve"}),
    )
    .await
    .err();
    assert!(e.contains("cancelled"), "{e}");
    let c = call(
        &lead,
        "team_proposal_cancel",
        json!({"workflow": "@can:t", "proposal": "prop-2"}),
    )
    .await
    .ok();
    assert_eq!(c["proposal"]["closed_by"], "user");
}

#[tokio::test]
async fn expiry_happens_on_time_without_anyone_looking() {
    let dir = tempfile::tempdir().unwrap();
    let s = InProcess::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    let t = agent_sessions(&s, &lead, "@exp:t", &["alice", "bob", "carol"]).await;
    call(
        &t[0],
        "team_proposal_create",
        json!({"type": "decision", "title": "quick", "options": ["a", "b"], "resolution": "unanimous",
               "timeout": "2s"}),
    )
    .await
    .ok();
    call(
        &t[0],
        "team_proposal_create",
        json!({"type": "approval", "title": "nobody votes", "timeout": "1s"}),
    )
    .await
    .ok();
    vote(&t[1], "prop-1", "b").await;
    for c in &t {
        system_inbox(c).await;
    }
    // Read the channel (which never expires anything itself) until the kernel's timer
    // has expired both.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let (ch, expired) = loop {
        let ch = call(&t[2], "channel_read", json!({"limit": 5})).await.ok();
        let expired: Vec<String> = contents(&ch)
            .into_iter()
            .filter(|m| m.contains("expired"))
            .collect();
        if expired.len() >= 2 || std::time::Instant::now() > deadline {
            break (ch, expired);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(expired.len(), 2, "{ch}");
    assert!(
        expired
            .iter()
            .any(|m| m.contains("prop-1") && m.contains("1 of 3 votes: b")),
        "{expired:?}"
    );
    assert!(
        expired
            .iter()
            .any(|m| m.contains("prop-2") && m.contains("no winner")),
        "{expired:?}"
    );
    // Everyone involved got it in their inbox.
    for c in &t {
        assert_eq!(system_inbox(c).await.len(), 2);
    }
    let st = call(&t[0], "team_proposal_status", json!({"proposal": "prop-1"}))
        .await
        .ok();
    let p = &st["proposals"][0];
    assert_eq!(
        (
            p["status"].as_str(),
            p["winner"]["id"].as_str(),
            p["closed_by"].as_str()
        ),
        (Some("expired"), Some("b"), Some("expiry"))
    );
}

#[tokio::test]
async fn proposals_and_sqlite_documents_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let s = HttpServer::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    new_agents(&lead, "@keep:t", &["alice", "bob"]).await;
    call(
        &lead,
        "workflow_context_set",
        json!({"workflow": "@keep:t", "documents": "sqlite", "document_owner": "alice"}),
    )
    .await
    .ok();
    let alice = join(&s, &lead, "alice@keep:t", Proto::Modern).await;
    call(&alice, "team_doc_write", json!({"content": "kept"}))
        .await
        .ok();
    // A deadline that passes while the kernel is down is the room's test, on a
    // manual clock (context/proposals/expiry_tests.rs).
    for (title, timeout) in [("closed", "1h"), ("open", "1h")] {
        call(
            &alice,
            "team_proposal_create",
            json!({"type": "approval", "title": title, "timeout": timeout}),
        )
        .await
        .ok();
    }
    vote(&alice, "prop-1", "approve").await;
    let bob = join(&s, &lead, "bob@keep:t", Proto::Modern).await;
    assert_eq!(vote(&bob, "prop-1", "approve").await["resolved"], true);
    call(
        &bob,
        "team_vote",
        json!({"proposal": "prop-2", "choice": "reject", "reason": "not yet"}),
    )
    .await
    .ok();
    drop((alice, bob, lead));
    s.stop().await;

    let s = HttpServer::start(dir.path()).await;
    let lead = s.lead(Proto::Modern).await;
    let st = call(
        &lead,
        "team_proposal_status",
        json!({"workflow": "@keep:t"}),
    )
    .await
    .ok();
    let by_id = |id: &str| {
        st["proposals"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["id"] == id)
            .cloned()
            .unwrap_or_else(|| panic!("{id} missing after restart: {st}"))
    };
    assert_eq!(by_id("prop-1")["status"], "resolved");
    assert_eq!(by_id("prop-1")["winner"]["id"], "approve");
    let open = by_id("prop-2");
    assert_eq!(open["status"], "open");
    assert_eq!(open["votes"][0]["reason"], "not yet");

    let alice = join(&s, &lead, "alice@keep:t", Proto::Legacy).await;
    let v = vote(&alice, "prop-2", "approve").await;
    assert_eq!(v["resolved"], true, "{v}");
    assert_eq!(v["winner"]["id"], "approve", "first breaks the 1-1 tie");
    let r = call(&alice, "team_doc_read", json!({})).await.ok();
    assert_eq!(
        (r["content"].as_str(), r["owner"].as_str()),
        (Some("kept"), Some("alice"))
    );
    let c = call(
        &alice,
        "team_proposal_create",
        json!({"type": "approval", "title": "next"}),
    )
    .await
    .ok();
    assert_eq!(c["proposal"]["id"], "prop-3", "numbering continues");
}
