//! The inbox's rules and the send guard: what a member's inbox shows (oldest
//! first, deferred ones aside, looking is not reading), what an ack may settle
//! (only one's own deliveries, once; `through` up to an id, sparing what is
//! deferred), deferring's bounds, recovery after a restart, member status, and
//! which messages the send guard says were missed.

use super::inbox::Inbox;
use super::team::StatusUpdate;
use super::{Outgoing, SendResult};
use crate::Scope;
use crate::events::Event;
use crate::testing::{Rooms, expect, said};

fn contents(i: &Inbox) -> Vec<&str> {
    i.messages.iter().map(|m| m.content.as_str()).collect()
}

async fn rooms() -> Rooms {
    let r = Rooms::new().await;
    r.agents(&["alice", "bob", "carol"]).await;
    r
}

/// `n` messages from alice to bob (`@bob m0`…), the second (m1) deferred for an
/// hour: their ids, and bob's scope.
async fn bob_with_m1_deferred(r: &Rooms, n: usize) -> (Vec<String>, Scope) {
    let mut ids = Vec::new();
    for i in 0..n {
        ids.push(r.send("alice", &format!("@bob m{i}")).await.id);
    }
    let bob = r.scope("bob").await;
    r.messaging
        .my_inbox_defer(&bob, &ids[1], Some("1h"))
        .await
        .unwrap();
    (ids, bob)
}

#[tokio::test]
async fn the_inbox_shows_open_deliveries_oldest_first_and_pages() {
    let r = rooms().await;
    for i in 0..3 {
        r.send("alice", &format!("@bob m{i}")).await;
    }
    r.send("alice", "@carol not for bob").await;
    let bob = r.scope("bob").await;
    let page = r.messaging.my_inbox(&bob, Some(2)).await.unwrap();
    assert_eq!(
        (contents(&page), page.remaining),
        (vec!["@bob m0", "@bob m1"], 1)
    );
    assert_eq!(page.messages[0].from, "alice");
    for limit in [0, 201] {
        expect(
            &said(&r.messaging.my_inbox(&bob, Some(limit)).await),
            "invalid: limit must be between 1 and 200",
            &[],
        );
    }
}

/// Looking (a resource's peek) marks nothing seen; reading does, and a restart
/// makes what was seen but not acked pending again.
#[tokio::test]
async fn looking_is_not_reading_and_a_restart_requeues_what_was_read() {
    let r = rooms().await;
    r.send("alice", "@bob hi").await;
    let bob = r.scope("bob").await;
    let seen = "SELECT count(*) FROM deliveries WHERE state = 'seen' AND recipient = ?1";
    assert_eq!(
        contents(&r.messaging.inbox_peek(&bob, 10).await.unwrap()),
        ["@bob hi"]
    );
    assert_eq!(r.count(seen, "bob").await, 0);
    r.messaging.my_inbox(&bob, None).await.unwrap();
    assert_eq!(r.count(seen, "bob").await, 1);
    assert_eq!(r.messaging.requeue_seen().await.unwrap(), 1);
    assert_eq!(r.count(seen, "bob").await, 0);
}

/// Another node's agents keep their seen deliveries: their runs are that node's.
#[tokio::test]
async fn a_restart_leaves_another_node_s_deliveries_alone() {
    let r = rooms().await;
    r.send("alice", "@bob @carol hi").await;
    r.execute(
        "UPDATE agents SET node = ?1 WHERE name = 'carol'",
        "elsewhere",
    )
    .await;
    for who in ["bob", "carol"] {
        let s = r.scope(who).await;
        r.messaging.my_inbox(&s, None).await.unwrap();
    }
    assert_eq!(r.messaging.requeue_seen().await.unwrap(), 1);
}

#[tokio::test]
async fn a_member_acks_only_its_own_deliveries_and_only_once() {
    let r = rooms().await;
    let sent = r.send("alice", "@bob hi").await;
    let (bob, carol) = (r.scope("bob").await, r.scope("carol").await);
    let got = said(&r.messaging.my_inbox_ack(&carol, &sent.id, false).await);
    expect(
        &got,
        &format!("forbidden: message {} was not delivered to carol", sent.id),
        &[],
    );
    let got = said(&r.messaging.my_inbox_ack(&bob, "nope", false).await);
    expect(
        &got,
        "not found: unknown message id \"nope\" in @global:main",
        &[],
    );
    let mut heard = r.events.subscribe();
    let first = r
        .messaging
        .my_inbox_ack(&bob, &format!(" {} ", sent.id), false)
        .await
        .unwrap();
    assert_eq!(first.acked, 1);
    assert!(matches!(heard.try_recv(), Ok(Event::Acked { agent, .. }) if agent == "bob"));
    let again = r
        .messaging
        .my_inbox_ack(&bob, &sent.id, false)
        .await
        .unwrap();
    assert_eq!(again.acked, 0, "acks are final");
    assert!(heard.try_recv().is_err(), "nothing new to tell");
    assert_eq!(
        r.count(
            "SELECT count(*) FROM deliveries_done WHERE recipient = ?1",
            "bob"
        )
        .await,
        1
    );
}

/// Reading marks exactly its page seen: not the deliveries beyond it, nor one
/// deferred to later that lies between the page's ids.
#[tokio::test]
async fn reading_marks_its_page_seen_and_nothing_else() {
    let r = rooms().await;
    let (_, bob) = bob_with_m1_deferred(&r, 5).await;
    let states = async || {
        let mut n = Vec::new();
        for sql in [
            "SELECT count(*) FROM deliveries WHERE recipient = ?1 AND state = 'pending'",
            "SELECT count(*) FROM deliveries WHERE recipient = ?1 AND state = 'seen'",
            "SELECT count(*) FROM deliveries WHERE recipient = ?1 AND state = 'deferred'",
        ] {
            n.push(r.count(sql, "bob").await);
        }
        n
    };
    let page = r.messaging.my_inbox(&bob, Some(2)).await.unwrap();
    assert_eq!(contents(&page), ["@bob m0", "@bob m2"]);
    assert_eq!(states().await, [2, 2, 1], "pending, seen, deferred");
    let all = r.messaging.my_inbox(&bob, None).await.unwrap();
    assert_eq!(all.messages.len(), 4);
    assert_eq!(states().await, [0, 4, 1], "pending, seen, deferred");
}

/// A read that first makes broadcasts the member's rows marks the page they make:
/// an older broadcast moves a later message off a full page, and that one stays
/// pending.
#[tokio::test]
async fn reading_after_broadcasts_marks_the_page_they_make() {
    let r = rooms().await;
    r.send("alice", "@all standup").await;
    r.send("alice", "@bob m1").await;
    let m2 = r.send("alice", "@bob m2").await.id;
    let bob = r.scope("bob").await;
    let page = r.messaging.my_inbox(&bob, Some(2)).await.unwrap();
    assert_eq!(contents(&page), ["@all standup", "@bob m1"]);
    let pending = "SELECT count(*) FROM deliveries WHERE recipient = ?1 AND state = 'pending'";
    assert_eq!(r.count(pending, "bob").await, 1);
    let still = "SELECT count(*) FROM deliveries WHERE message_id = ?1 AND state = 'pending'";
    assert_eq!(r.count(still, &m2).await, 1, "m2 is not on the page");
}

/// `through` acks every open delivery up to the id, except those deferred to later.
#[tokio::test]
async fn an_ack_through_an_id_spares_later_and_deferred_ones() {
    let r = rooms().await;
    let (ids, bob) = bob_with_m1_deferred(&r, 4).await;
    let acked = r.messaging.my_inbox_ack(&bob, &ids[2], true).await.unwrap();
    assert_eq!(acked.acked, 2, "m0 and m2; m1 is deferred, m3 is later");
    let inbox = r.messaging.my_inbox(&bob, None).await.unwrap();
    assert_eq!((inbox.messages.len(), inbox.deferred), (1, 1));
}

/// An ack settles broadcasts whose deliveries are not rows yet (the member never
/// read), and one refused changes nothing, those rows included.
#[tokio::test]
async fn an_ack_settles_unread_broadcasts_and_a_refused_one_nothing() {
    let r = rooms().await;
    r.send("alice", "@bob direct").await;
    let all = r.send("alice", "@all standup").await;
    r.send("alice", "@bob later").await;
    let (bob, carol) = (r.scope("bob").await, r.scope("carol").await);
    let rows =
        |who: &'static str| r.count("SELECT count(*) FROM deliveries WHERE recipient = ?1", who);
    let got = said(&r.messaging.my_inbox_ack(&carol, "nope", false).await);
    expect(&got, "not found: unknown message id", &[]);
    assert_eq!(rows("carol").await, 0, "the refused ack wrote no row");
    let acked = r
        .messaging
        .my_inbox_ack(&carol, &all.id, false)
        .await
        .unwrap();
    assert_eq!(acked.acked, 1, "carol's broadcast, never read");
    let acked = r.messaging.my_inbox_ack(&bob, &all.id, true).await.unwrap();
    assert_eq!(acked.acked, 2, "bob's direct message and the broadcast");
    let inbox = r.messaging.my_inbox(&bob, None).await.unwrap();
    assert_eq!(contents(&inbox), ["@bob later"]);
}

/// A through-ack of an id delivered to another member changes nothing: the copy
/// and the delete sent with its lookup are rolled back with it.
#[tokio::test]
async fn a_refused_ack_through_keeps_every_open_delivery() {
    let r = rooms().await;
    r.send("alice", "@bob one").await;
    r.send("alice", "@bob two").await;
    let carols = r.send("alice", "@carol yours").await;
    let bob = r.scope("bob").await;
    let got = said(&r.messaging.my_inbox_ack(&bob, &carols.id, true).await);
    expect(&got, "forbidden: message", &["was not delivered to bob"]);
    let open = r.count(
        "SELECT count(*) FROM deliveries WHERE recipient = ?1",
        "bob",
    );
    assert_eq!(open.await, 2);
    let done = r.count(
        "SELECT count(*) FROM deliveries_done WHERE recipient = ?1",
        "bob",
    );
    assert_eq!(done.await, 0);
}

#[tokio::test]
async fn a_deferral_is_ahead_within_thirty_days_and_never_of_an_acked_one() {
    let r = rooms().await;
    let sent = r.send("alice", "@bob hi").await;
    let bob = r.scope("bob").await;
    let defer = |until: &'static str| r.messaging.my_inbox_defer(&bob, &sent.id, Some(until));
    expect(
        &said(&defer("2000-01-01T00:00:00Z").await),
        "invalid: until is in the past",
        &[],
    );
    expect(
        &said(&defer("31d").await),
        "invalid: until is more than 30 days away",
        &[],
    );
    expect(&said(&defer("soon").await), "invalid", &["until"]);
    expect(&said(&defer("29d").await), "ok", &[]);
    let inbox = r.messaging.my_inbox(&bob, None).await.unwrap();
    assert_eq!((inbox.messages.len(), inbox.deferred), (0, 1));
    r.messaging
        .my_inbox_ack(&bob, &sent.id, false)
        .await
        .unwrap();
    expect(
        &said(&defer("1h").await),
        "conflict: message",
        &["already acked; acks are final"],
    );
}

/// Each member sees a broadcast in its inbox, once it reads, and the sender none.
#[tokio::test]
async fn a_broadcast_is_in_every_other_agent_s_inbox() {
    let r = rooms().await;
    r.send("alice", "@all standup").await;
    for (who, want) in [("alice", 0), ("bob", 1), ("carol", 1)] {
        let s = r.scope(who).await;
        assert_eq!(
            r.messaging.inbox_peek(&s, 10).await.unwrap().messages.len(),
            want,
            "{who}"
        );
    }
    // A later agent never gets what was broadcast before it existed.
    r.agents(&["dave"]).await;
    let dave = r.scope("dave").await;
    assert!(
        r.messaging
            .my_inbox(&dave, None)
            .await
            .unwrap()
            .messages
            .is_empty()
    );
}

async fn guarded(r: &Rooms, from: &str, text: &str) -> SendResult {
    let scope = r.scope(from).await;
    let out = Outgoing {
        message: text.into(),
        ..Default::default()
    };
    r.messaging.channel_send(&scope, out).await.unwrap()
}

/// The send guard lists what others posted since the sender last read; its own
/// posts, what it read, and (with force) everything are not missed.
#[tokio::test]
async fn the_send_guard_lists_what_others_posted_since_the_sender_last_read() {
    let r = rooms().await;
    r.send("bob", "mine").await;
    r.send("alice", "first").await;
    r.send("carol", "second").await;
    let sent = guarded(&r, "bob", "@alice reply").await;
    let missed: Vec<(&str, &str)> = sent
        .missed
        .iter()
        .map(|m| (m.from.as_str(), m.preview.as_str()))
        .collect();
    assert_eq!(
        (missed, sent.missed_count),
        (vec![("alice", "first"), ("carol", "second")], 2)
    );
    assert!(
        sent.note
            .unwrap()
            .starts_with("2 message(s) were posted since you last read the channel")
    );
    let again = guarded(&r, "bob", "@alice more").await;
    assert_eq!(again.missed_count, 0, "its own send moved its cursor");
    r.send("alice", "third").await;
    let bob = r.scope("bob").await;
    r.messaging.channel_read(&bob, None, None).await.unwrap();
    assert_eq!(
        guarded(&r, "bob", "@alice ok").await.missed_count,
        0,
        "read"
    );
}

/// A message the sender already has in its inbox (read there) is not missed; one
/// to it that it has not read is; a direct message between others is not its.
#[tokio::test]
async fn the_send_guard_spares_what_was_read_through_the_inbox_and_others_dms() {
    let r = rooms().await;
    let scope = r.scope("alice").await;
    let dm = Outgoing {
        message: "psst".into(),
        to: Some("carol".into()),
        force: true,
        urgent: false,
    };
    r.messaging.channel_send(&scope, dm).await.unwrap();
    r.send("alice", "@bob read this").await;
    r.send("alice", "@bob and this").await;
    let bob = r.scope("bob").await;
    r.messaging.my_inbox(&bob, Some(1)).await.unwrap();
    let sent = guarded(&r, "bob", "@alice ok").await;
    let missed: Vec<&str> = sent.missed.iter().map(|m| m.preview.as_str()).collect();
    assert_eq!(missed, ["@bob and this"]);
    let forced = r.send("bob", "@alice forced").await;
    assert_eq!(
        (forced.missed.len(), forced.missed_count, forced.note),
        (0, 0, None)
    );
}

/// The guard lists ten, counts the rest, and previews long texts.
#[tokio::test]
async fn the_send_guard_lists_ten_and_counts_them_all() {
    let r = rooms().await;
    let posts: Vec<String> = (0..12)
        .map(|i| format!("{i:02} {}", "x".repeat(200)))
        .collect();
    let scope = r.scope("alice").await;
    let sends = posts
        .iter()
        .map(|p| Outgoing {
            message: p.clone(),
            to: None,
            force: true,
            urgent: false,
        })
        .collect();
    r.messaging.channel_send_many(&scope, sends).await.unwrap();
    let sent = guarded(&r, "bob", "@alice hi").await;
    assert_eq!((sent.missed.len(), sent.missed_count), (10, 12));
    assert!(
        sent.missed[0].preview.starts_with("02 ") && sent.missed[9].preview.starts_with("11 "),
        "the newest ten, oldest first"
    );
    assert_eq!(
        sent.missed[0].preview.chars().count(),
        161,
        "160 characters and an ellipsis"
    );
}

#[tokio::test]
async fn a_status_merges_its_fields_and_idle_clears_the_task() {
    let r = rooms().await;
    let bob = r.scope("bob").await;
    let set = |state: Option<&str>, task: Option<&str>, note: Option<&str>| {
        let u = StatusUpdate {
            state: state.map(Into::into),
            task: task.map(Into::into),
            note: note.map(Into::into),
        };
        r.messaging.my_status_set(&bob, u)
    };
    expect(
        &said(&set(Some("sleeping"), None, None).await),
        "invalid: state \"sleeping\" is not one of idle, busy, blocked",
        &[],
    );
    expect(
        &said(&set(None, None, None).await),
        "invalid: nothing to set",
        &[],
    );
    expect(
        &said(&set(None, Some(&"t".repeat(1000)), None).await),
        "invalid: task is longer than",
        &[],
    );
    let s = set(Some("busy"), Some("tests"), Some("half way"))
        .await
        .unwrap();
    assert_eq!(
        (s.state.as_str(), s.task.as_deref(), s.note.as_deref()),
        ("busy", Some("tests"), Some("half way"))
    );
    let s = set(None, None, Some("")).await.unwrap();
    assert_eq!(
        (s.state.as_str(), s.task.as_deref(), s.note),
        ("busy", Some("tests"), None),
        "an empty note clears it"
    );
    let s = set(Some("idle"), None, None).await.unwrap();
    assert_eq!((s.task, s.state.as_str()), (None, "idle"));
    let members = r.messaging.team_members(&bob, true).await.unwrap();
    let listed: Vec<(&str, bool, Option<&str>)> = members
        .iter()
        .map(|m| (m.name.as_str(), m.is_you, m.state.as_deref()))
        .collect();
    assert_eq!(
        listed,
        [
            ("alice", false, Some("idle")),
            ("bob", true, Some("idle")),
            ("carol", false, Some("idle")),
            ("user", false, Some("idle"))
        ]
    );
    let plain = r.messaging.team_members(&bob, false).await.unwrap();
    assert!(plain.iter().all(|m| m.state.is_none()));
    assert_eq!(plain.last().map(|m| m.backend.as_str()), Some("lead"));
}
