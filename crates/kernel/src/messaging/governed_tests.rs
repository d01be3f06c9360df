//! Contracts on messages, inside the send: a deny refuses (nothing stored, the
//! decision kept, a batch all or none), a route hands the message to a member
//! first (a chain passes on from the last), a notify tells without changing who
//! gets it, a rate acts past its count; the lead's and the kernel's posts are
//! never governed.

use super::{Outgoing, SendResult};
use crate::testing::{Rooms, expect, names, said};
use domain::error::Result;
use serde_json::{Value, json};

async fn rooms(contracts: &[Value]) -> Rooms {
    let r = Rooms::new().await;
    r.agents(&["alice", "coder", "reviewer", "ops"]).await;
    for spec in contracts {
        let c = domain::contracts::parse(spec).unwrap();
        r.contracts.set(c, spec.clone()).await.unwrap();
    }
    r
}

async fn send(r: &Rooms, from: &str, text: &str, to: Option<&str>) -> Result<SendResult> {
    let scope = r.scope(from).await;
    let out = Outgoing {
        message: text.into(),
        to: to.map(Into::into),
        force: true,
        urgent: false,
    };
    r.messaging.channel_send(&scope, out).await
}

fn no_secrets() -> Value {
    json!({"name": "no-secrets", "when": {"event": "message", "text": "(?i)password"},
           "then": {"action": "deny", "reason": "no secrets in the channel"}})
}

#[tokio::test]
async fn a_denied_message_is_not_stored_but_its_decision_is() {
    let r = rooms(&[no_secrets()]).await;
    let got = said(&send(&r, "alice", "@coder the Password is x", None).await);
    expect(
        &got,
        "forbidden: refused by contract \"no-secrets\": no secrets in the channel (nothing was sent)",
        &[],
    );
    assert_eq!(
        r.count("SELECT count(*) FROM messages WHERE sender = ?1", "alice")
            .await,
        0
    );
    let outcome = "SELECT count(*) FROM contract_decisions WHERE outcome = 'denied' AND agent = ?1";
    assert_eq!(r.count(outcome, "alice").await, 1);
    expect(
        &said(&send(&r, "user", "@coder the password is x", None).await),
        "ok",
        &[],
    );
    expect(
        &said(&send(&r, "alice", "@coder all fine", None).await),
        "ok",
        &[],
    );
}

/// One refused message refuses its whole batch.
#[tokio::test]
async fn a_batch_with_a_refused_message_is_sent_whole_or_not_at_all() {
    let r = rooms(&[no_secrets()]).await;
    let scope = r.scope("alice").await;
    let batch = ["@coder one", "@coder password two", "@coder three"]
        .iter()
        .map(|m| Outgoing {
            message: (*m).into(),
            to: None,
            force: true,
            urgent: false,
        })
        .collect();
    expect(
        &said(&r.messaging.channel_send_many(&scope, batch).await),
        "forbidden",
        &[],
    );
    assert_eq!(
        r.count("SELECT count(*) FROM messages WHERE sender = ?1", "alice")
            .await,
        0
    );
}

fn review_first() -> Value {
    json!({"name": "review-first", "when": {"event": "message", "to": "coder"},
           "then": {"action": "route", "to": ["reviewer", "coder"]}})
}

/// A route takes the message from the recipients it names and hands it to its
/// first member, who is told; what that member sends on passes.
#[tokio::test]
async fn a_route_hands_the_message_to_its_first_member_and_the_chain_passes_on() {
    let r = rooms(&[review_first()]).await;
    let sent = send(&r, "alice", "@coder @ops patch ready", None)
        .await
        .unwrap();
    assert_eq!(
        sent.recipients,
        names(&["ops"]),
        "coder's copy goes to the reviewer first"
    );
    let note = sent.note.unwrap();
    assert!(
        note.starts_with(
            "contract \"review-first\" routed this to @reviewer first instead of coder"
        ),
        "{note}"
    );
    let reviewer = r.scope("reviewer").await;
    let inbox = r.messaging.inbox_peek(&reviewer, 10).await.unwrap();
    assert!(
        inbox.messages[0].content.starts_with(
            "@reviewer contract \"review-first\": a message from alice for coder was routed to you"
        ),
        "{}",
        inbox.messages[0].content
    );
    let forwarded = send(&r, "reviewer", "@coder patch ready, reviewed", None)
        .await
        .unwrap();
    assert_eq!(
        (forwarded.recipients, forwarded.note),
        (names(&["coder"]), None)
    );
}

/// A direct message for a routed member is addressed to the route's member
/// instead, who is told of it as of any routed message; the member it named
/// gets nothing.
#[tokio::test]
async fn a_routed_direct_message_changes_its_addressee() {
    let r = rooms(&[review_first()]).await;
    let sent = send(&r, "alice", "psst", Some("coder")).await.unwrap();
    assert!(sent.recipients.is_empty(), "{:?}", sent.recipients);
    let note = sent.note.unwrap();
    assert!(
        note.contains("routed this to @reviewer first instead of coder (@reviewer"),
        "{note}"
    );
    let coder = r.scope("coder").await;
    assert!(
        r.messaging
            .inbox_peek(&coder, 10)
            .await
            .unwrap()
            .messages
            .is_empty()
    );
    let reviewer = r.scope("reviewer").await;
    let told = r.messaging.inbox_peek(&reviewer, 10).await.unwrap();
    let texts: Vec<&str> = told.messages.iter().map(|m| m.content.as_str()).collect();
    assert!(
        texts
            .iter()
            .any(|t| t.contains("a message from alice for coder was routed to you")),
        "{texts:?}"
    );
    let alice = r.scope("alice").await;
    let read = r.messaging.channel_read(&alice, None, None).await.unwrap();
    let dm = read.messages.iter().find(|m| m.content == "psst").unwrap();
    assert_eq!(dm.to.as_deref(), Some("reviewer"));
}

/// A notify tells its members who got what, and changes nothing else.
#[tokio::test]
async fn a_notify_tells_without_changing_the_recipients() {
    let tell = json!({"name": "tell-ops", "when": {"event": "message", "from": "alice"},
                      "then": {"action": "notify", "to": "ops"}});
    let r = rooms(&[tell]).await;
    let sent = send(&r, "alice", "@coder hi @reviewer", None)
        .await
        .unwrap();
    assert_eq!(sent.recipients, names(&["coder"]));
    let ops = r.scope("ops").await;
    let told = r.messaging.inbox_peek(&ops, 10).await.unwrap();
    let text = &told.messages[0].content;
    assert!(
        text.starts_with("@ops contract \"tell-ops\": alice sent a message to coder (id "),
        "{text}"
    );
    assert!(
        text.ends_with("«coder hi reviewer»."),
        "quoted without mentions: {text}"
    );
    send(&r, "coder", "@alice thanks", None).await.unwrap();
    assert_eq!(
        r.messaging
            .inbox_peek(&ops, 10)
            .await
            .unwrap()
            .messages
            .len(),
        1,
        "coder is not watched"
    );
}

/// A rate contract lets so many messages through, then refuses.
#[tokio::test]
async fn a_rate_refuses_past_its_count() {
    let chatty = json!({"name": "chatty", "when": {"event": "message", "more_than": 2, "within": "1h"},
                        "then": {"action": "deny", "reason": "slow down"}});
    let r = rooms(&[chatty]).await;
    for i in 0..2 {
        expect(
            &said(&send(&r, "alice", &format!("@coder {i}"), None).await),
            "ok",
            &[],
        );
    }
    expect(
        &said(&send(&r, "alice", "@coder 2", None).await),
        "forbidden: refused by contract \"chatty\": slow down",
        &[],
    );
    expect(
        &said(&send(&r, "coder", "@alice mine count apart", None).await),
        "ok",
        &[],
    );
}

/// What a contract says about a direct message stays as private as it: the
/// route's member and the members told get it as direct messages; nobody else
/// reads its text in the channel.
#[tokio::test]
async fn the_kernel_s_notes_about_a_direct_message_are_direct_too() {
    let tell = json!({"name": "tell-ops", "when": {"event": "message", "from": "alice"},
                      "then": {"action": "notify", "to": ["ops", "nobody-here"]}});
    let r = rooms(&[review_first(), tell]).await;
    r.agents(&["carol"]).await;
    send(&r, "alice", "psst, the key is under the mat", Some("coder"))
        .await
        .unwrap();
    let shows = |who: &'static str| {
        let r = &r;
        async move {
            let scope = r.scope(who).await;
            let read = r.messaging.channel_read(&scope, None, None).await.unwrap();
            read.messages
                .iter()
                .filter(|m| m.content.contains("under the mat"))
                .count()
        }
    };
    assert_eq!(shows("carol").await, 0, "a bystander reads nothing of it");
    assert_eq!(
        shows("user").await,
        0,
        "nor does the lead, as for any direct message"
    );
    assert_eq!(
        shows("reviewer").await,
        2,
        "its message, and the route's note to it"
    );
    assert_eq!(shows("ops").await, 1, "the contract's note to it");
    let ops = r.scope("ops").await;
    assert_eq!(
        r.messaging
            .inbox_peek(&ops, 10)
            .await
            .unwrap()
            .messages
            .len(),
        1
    );
}

/// `urgent` is the lead's, and a member's whom an `allow` of urgent messages
/// names: an allow of its messages in general, or an urgent allow for someone
/// else, does not do; a deny still wins; `to` is still needed.
#[tokio::test]
async fn an_urgent_message_needs_the_lead_or_an_urgent_allow() {
    let urgent_allow = json!({"name": "reviewer-stops", "when": {"event": "message",
        "from": "reviewer", "to": "coder", "urgent": true}, "then": {"action": "allow"}});
    let plain_allow = json!({"name": "ops-direct", "when": {"event": "message", "from": "ops"},
        "then": {"action": "allow"}});
    let r = rooms(&[urgent_allow, plain_allow, no_secrets()]).await;
    let refused = "forbidden: urgent: only the lead may stop an agent's turn";
    // (from, text, to, what it is told, what that also says)
    type Case<'a> = (&'a str, &'a str, Option<&'a str>, &'a str, &'a [&'a str]);
    let table: &[Case] = &[
        ("user", "stop", Some("coder"), "ok", &[]),
        ("reviewer", "stop", Some("coder"), "ok", &[]),
        (
            "reviewer",
            "stop",
            Some("alice"),
            refused,
            &["from: reviewer, urgent: true"],
        ),
        ("reviewer", "stop", None, refused, &[]),
        ("ops", "stop", Some("coder"), refused, &["from: ops"]),
        ("alice", "stop", Some("coder"), refused, &[]),
        (
            "reviewer",
            "the password",
            Some("coder"),
            "forbidden: refused by contract",
            &[],
        ),
    ];
    for (from, text, to, want, also) in table {
        let scope = r.scope(from).await;
        let out = Outgoing {
            message: (*text).into(),
            to: to.map(Into::into),
            force: true,
            urgent: true,
        };
        let got = said(&r.messaging.channel_send(&scope, out).await);
        expect(&got, want, also);
    }
    let urgent = "SELECT count(*) FROM messages WHERE priority = 'urgent' AND sender = ?1";
    assert_eq!(r.count(urgent, "reviewer").await, 1);
    assert_eq!(r.count(urgent, "ops").await, 0);
}
