//! Who a message reaches and what its sender is told: the addressed rule and
//! `@all` (pure, as a table), a direct message's one recipient, the text's
//! limits (a long one of the lead's becomes a resource), the notes of a send,
//! the send guard's missed messages, what channel_read shows whom, and which
//! sends are one broadcast row.

use super::broadcast::covers_all;
use super::mentions::{parse, priority, recipients};
use super::{MAX_MESSAGE_CHARS, Outgoing, SendResult};
use crate::events::Event;
use crate::testing::{Rooms, expect, names, said};

/// Who `text` from `sender` reaches among alice, bob, carol and the lead (`user`),
/// and which mentions are of no member: "bob, carol | zed".
#[track_caller]
fn check(sender: &str, text: &str, want: &str) {
    let agents = names(&["alice", "bob", "carol"]);
    let mut members = agents.clone();
    members.push("user".into());
    let (to, unknown) = recipients(&parse(text), &members, &agents, sender);
    let got = format!("{} | {}", to.join(", "), unknown.join(", "));
    assert_eq!(got.trim_end_matches(" | "), want, "{sender}: {text:?}");
}

#[test]
fn the_leading_mentions_address_and_the_body_s_only_without_them() {
    check("alice", "@bob please look", "bob");
    check("alice", "@bob, @carol: please look", "bob, carol");
    check("alice", "@bob review, then tell @carol", "bob");
    check("alice", "please ask @carol and @bob", "bob, carol");
    check("alice", "nobody here", "");
    check("alice", "  \n@bob after blank lines", "bob");
}

#[test]
fn all_is_every_agent_but_the_sender_and_user_is_the_lead() {
    check("alice", "@all standup", "bob, carol");
    check("user", "@all standup", "alice, bob, carol");
    check("alice", "@ALL standup", "bob, carol");
    check("alice", "@user done", "user");
    check("alice", "@all @user done", "bob, carol, user");
    check("alice", "@alice note to self", "");
}

#[test]
fn names_match_in_any_case_and_unknown_ones_are_reported() {
    check("alice", "@BOB hi", "bob");
    check("alice", "@zed hi @Bob", "bob | zed");
    check("alice", "@bob hi, cc @zed and @ZED", "bob | zed");
    check("alice", "@zed @yan hi", " | zed, yan");
    check("alice", "mail bob@example.com or x.@carol", "");
    check("alice", "(@carol) see this", "carol");
}

#[test]
fn several_names_or_an_urgent_word_make_a_message_high_priority() {
    for (text, want) in [
        ("@bob hi", "normal"),
        ("@bob @carol hi", "high"),
        ("@bob this is URGENT", "high"),
        ("@bob asap please", "high"),
        ("@bob I am blocked.", "high"),
        ("@bob critical-path work", "high"),
        ("@bob unblocked now", "normal"),
        ("@bob @bob twice", "normal"),
    ] {
        assert_eq!(priority(&parse(text), text), want, "{text:?}");
    }
}

/// A message to every agent but the sender, of at least two others, is one row.
#[test]
fn a_broadcast_covers_every_other_agent_and_at_least_two() {
    let agents = names(&["alice", "bob", "carol"]);
    let check = |to: &[&str], sender: &str, want: bool| {
        assert_eq!(
            covers_all(&names(to), &agents, sender),
            want,
            "{to:?} from {sender}"
        );
    };
    check(&["bob", "carol"], "alice", true);
    check(&["bob", "carol", "user"], "alice", true);
    check(&["alice", "bob", "carol"], "user", true);
    check(&["bob"], "alice", false);
    check(&["bob", "user"], "alice", false);
    check(&["alice", "bob"], "user", false);
    let two = names(&["alice", "bob"]);
    assert!(
        !covers_all(&names(&["bob", "user"]), &two, "alice"),
        "one other agent"
    );
}

async fn send_as(
    r: &Rooms,
    from: &str,
    text: &str,
    to: Option<&str>,
) -> domain::error::Result<SendResult> {
    let scope = r.scope(from).await;
    let out = Outgoing {
        message: text.into(),
        to: to.map(str::to_owned),
        force: true,
        urgent: false,
    };
    r.messaging.channel_send(&scope, out).await
}

/// A direct message reaches its addressee only, whatever it mentions; it must be
/// to another member.
#[tokio::test]
async fn a_direct_message_reaches_only_its_addressee() {
    let r = Rooms::new().await;
    r.agents(&["alice", "bob", "carol"]).await;
    let sent = send_as(&r, "alice", "@carol fyi", Some("@BOB"))
        .await
        .unwrap();
    assert_eq!(sent.recipients, names(&["bob"]));
    let got = said(&send_as(&r, "alice", "hi", Some("zed")).await);
    expect(
        &got,
        "not found: cannot send a direct message to \"zed\": not a member of @global:main",
        &["members: alice, bob, carol, user"],
    );
    let got = said(&send_as(&r, "alice", "hi", Some("Alice")).await);
    expect(
        &got,
        "invalid: cannot send a direct message to yourself",
        &[],
    );
    let sent = send_as(&r, "alice", "@bob hi", Some("  ")).await.unwrap();
    assert_eq!(
        sent.recipients,
        names(&["bob"]),
        "a blank `to` is no direct message"
    );
}

/// channel_read shows a direct message to its two members only.
#[tokio::test]
async fn a_direct_message_is_read_by_its_two_members_only() {
    let r = Rooms::new().await;
    r.agents(&["alice", "bob", "carol"]).await;
    send_as(&r, "alice", "secret", Some("bob")).await.unwrap();
    send_as(&r, "alice", "@all public", None).await.unwrap();
    for (who, want) in [("alice", 2), ("bob", 2), ("carol", 1), ("user", 1)] {
        let scope = r.scope(who).await;
        let read = r.messaging.channel_read(&scope, None, None).await.unwrap();
        assert_eq!(read.messages.len(), want, "{who}");
    }
}

#[tokio::test]
async fn the_text_is_not_empty_and_an_agent_s_is_not_too_long() {
    let r = Rooms::new().await;
    r.agents(&["alice", "bob"]).await;
    expect(
        &said(&send_as(&r, "alice", "  \n ", None).await),
        "invalid: message is empty",
        &[],
    );
    let long = format!("@bob {}", "x".repeat(MAX_MESSAGE_CHARS));
    let got = said(&send_as(&r, "alice", &long, None).await);
    expect(
        &got,
        "invalid: message too long (4005 characters, the limit is 4000)",
        &["resource_create"],
    );
    let exact = format!("@bob {}", "é".repeat(MAX_MESSAGE_CHARS - 5));
    expect(&said(&send_as(&r, "alice", &exact, None).await), "ok", &[]);
}

/// The lead's long message is stored as a resource; the channel keeps a pointer
/// that reaches the same people.
#[tokio::test]
async fn a_long_message_of_the_lead_becomes_a_resource_that_reaches_the_same_people() {
    let r = Rooms::new().await;
    r.agents(&["alice", "bob"]).await;
    let long = format!("@bob, @alice: {}", "y".repeat(MAX_MESSAGE_CHARS));
    let sent = send_as(&r, "user", &long, None).await.unwrap();
    assert_eq!(sent.recipients, names(&["alice", "bob"]));
    let id = sent.resource.expect("a resource");
    let stored = r.messaging.resource_read(&id).await.unwrap();
    assert_eq!(stored.content, long);
    let scope = r.scope("bob").await;
    let read = r.messaging.channel_read(&scope, None, None).await.unwrap();
    let pointer = &read.messages[0].content;
    assert!(
        pointer.starts_with(&format!(
            "@bob @alice [long message (4014 characters) stored as resource {id}]"
        )),
        "{pointer}"
    );
    let huge = "z".repeat(super::MAX_LEAD_MESSAGE_BYTES + 1);
    expect(
        &said(&send_as(&r, "user", &huge, None).await),
        "invalid: message too long",
        &["even the lead's limit"],
    );
}

#[tokio::test]
async fn the_sender_is_told_of_unknown_mentions_and_of_reaching_nobody() {
    let r = Rooms::new().await;
    r.agents(&["alice", "bob"]).await;
    let sent = send_as(&r, "alice", "@bob and @zed", None).await.unwrap();
    assert_eq!(sent.unknown_mentions, names(&["zed"]));
    let note = sent.note.unwrap();
    assert!(note.starts_with("not members of @global:main: @zed (nobody got those mentions); members: alice, bob, user"), "{note}");
    let sent = send_as(&r, "alice", "thinking aloud", None).await.unwrap();
    assert!(sent.recipients.is_empty());
    assert!(
        sent.note
            .unwrap()
            .starts_with("nobody was mentioned, so no inbox got this")
    );
    let sent = send_as(&r, "alice", "@bob all good", None).await.unwrap();
    assert_eq!(sent.note, None);
}

/// Every send is announced as posted; one that reaches someone, as delivered to
/// all its recipients in one event.
#[tokio::test]
async fn a_send_is_announced_as_posted_and_delivered() {
    let r = Rooms::new().await;
    r.agents(&["alice", "bob", "carol"]).await;
    let mut heard = r.events.subscribe();
    let sent = send_as(&r, "alice", "@bob @carol hi", None).await.unwrap();
    match heard.try_recv() {
        Ok(Event::Posted { message_id, .. }) => assert_eq!(message_id, sent.id),
        other => panic!("{other:?}"),
    }
    match heard.try_recv() {
        Ok(Event::Delivered { recipients, .. }) => {
            assert_eq!(recipients.to_vec(), names(&["bob", "carol"]))
        }
        other => panic!("{other:?}"),
    }
    send_as(&r, "alice", "to nobody", None).await.unwrap();
    assert!(matches!(heard.try_recv(), Ok(Event::Posted { .. })));
    assert!(heard.try_recv().is_err(), "no delivery without recipients");
}

/// An `@all` of an agent to two or more others is one broadcast row and no
/// delivery rows; the lead's own row is written with it.
#[tokio::test]
async fn an_all_is_one_broadcast_row_and_the_lead_s_delivery() {
    let r = Rooms::new().await;
    r.agents(&["alice", "bob", "carol"]).await;
    let sent = send_as(&r, "alice", "@all @user standup", None)
        .await
        .unwrap();
    assert_eq!(sent.recipients, names(&["bob", "carol", "user"]));
    assert_eq!(
        r.count("SELECT count(*) FROM broadcasts WHERE sender = ?1", "alice")
            .await,
        1
    );
    assert_eq!(
        r.count(
            "SELECT count(*) FROM deliveries WHERE message_id = ?1",
            &sent.id
        )
        .await,
        1
    );
    let dm = send_as(&r, "alice", "@all", Some("bob")).await.unwrap();
    assert_eq!(
        r.count(
            "SELECT count(*) FROM broadcasts WHERE message_id = ?1",
            &dm.id
        )
        .await,
        0,
        "a DM is no broadcast"
    );
}

#[tokio::test]
async fn channel_read_pages_after_an_id_and_checks_its_limit() {
    let r = Rooms::new().await;
    r.agents(&["alice"]).await;
    let mut ids = Vec::new();
    for i in 0..5 {
        ids.push(
            send_as(&r, "alice", &format!("m{i}"), None)
                .await
                .unwrap()
                .id,
        );
    }
    let scope = r.scope("alice").await;
    let read = |since: Option<&str>, limit: Option<i64>| {
        r.messaging
            .channel_read(&scope, since.map(str::to_owned), limit)
    };
    let latest = read(None, Some(2)).await.unwrap();
    let texts: Vec<&str> = latest.messages.iter().map(|m| m.content.as_str()).collect();
    assert_eq!((texts, latest.has_more), (vec!["m3", "m4"], false));
    let page = read(Some(&ids[0]), Some(2)).await.unwrap();
    let texts: Vec<&str> = page.messages.iter().map(|m| m.content.as_str()).collect();
    assert_eq!((texts, page.has_more), (vec!["m1", "m2"], true));
    let last = read(Some(&ids[2]), Some(2)).await.unwrap();
    assert!(!last.has_more);
    for limit in [0, 201] {
        expect(
            &said(&read(None, Some(limit)).await),
            "invalid: limit must be between 1 and 200",
            &[],
        );
    }
    expect(
        &said(&read(Some("nope"), None).await),
        "not found: unknown message id \"nope\"",
        &[],
    );
}

/// The hop guard's count: an agent's message that reaches another agent adds one,
/// one to the lead alone adds none, the lead's message starts it over.
#[tokio::test]
async fn agent_to_agent_messages_count_hops_and_the_lead_resets_them() {
    let r = Rooms::new().await;
    r.agents(&["alice", "bob"]).await;
    let hops = "SELECT hops FROM workflows WHERE name = ?1";
    let mut want = Vec::new();
    let mut got = Vec::new();
    for (from, text, after) in [
        ("alice", "@bob one", 1),
        ("bob", "@alice two", 2),
        ("bob", "@user to the lead", 2),
        ("alice", "nobody", 2),
        ("user", "@alice reset", 0),
        ("alice", "@bob @user again", 1),
    ] {
        send_as(&r, from, text, None).await.unwrap();
        got.push(r.count(hops, "global").await);
        want.push(after);
    }
    assert_eq!(got, want);
}

/// The run of mentions a message starts with, and the text after it (what a
/// long message's pointer keeps).
#[test]
fn the_leading_run_is_mentions_separated_by_spaces_commas_and_colons() {
    use super::mentions::leading_run;
    for (text, names_, rest) in [
        ("@a, @b: brief", vec!["a", "b"], "brief"),
        ("  @a\n@b rest", vec!["a", "b"], "rest"),
        ("@a,@b,", vec!["a", "b"], ""),
        ("@a and @b", vec!["a"], "and @b"),
        ("hi @a", vec![], "hi @a"),
        ("@1a go", vec![], "@1a go"),
        ("@a-b_c: go", vec!["a-b_c"], "go"),
    ] {
        assert_eq!(leading_run(text), (names_, rest), "{text:?}");
    }
}

/// A hook's post is sent as `hook:<name>`, no member: its direct message reaches
/// its addressee and is the lead's to read too (nobody else's); it starts no hop
/// count over, adds none, and moves nobody's reading (the lead's cursor stays,
/// so the post is news to it).
#[tokio::test]
async fn a_hook_posts_as_itself_and_moves_no_count_nor_cursor() {
    let r = Rooms::new().await;
    r.agents(&["alice", "bob"]).await;
    send_as(&r, "user", "@alice start", None).await.unwrap();
    send_as(&r, "alice", "@bob one", None).await.unwrap();
    let hops = "SELECT hops FROM workflows WHERE name = ?1";
    let cursor = "SELECT count(*) FROM read_cursors WHERE reader = ?1 AND last_read >= \
                  (SELECT max(id) FROM messages)";
    assert_eq!(r.count(hops, "global").await, 1);
    let lead = r.scope("user").await;
    let out = Outgoing {
        message: "[hook ci] the build broke".into(),
        to: Some("bob".into()),
        ..Outgoing::default()
    };
    let sent = r.messaging.hook_post(&lead, "ci", out).await.unwrap();
    assert_eq!(sent.recipients, ["bob"]);
    assert_eq!(r.count(hops, "global").await, 1, "no reset, no hop");
    assert_eq!(r.count(cursor, "user").await, 0, "the lead's cursor stays");
    assert_eq!(
        r.count(cursor, "hook:ci").await,
        0,
        "the hook reads nothing"
    );
    let from = "SELECT count(*) FROM messages WHERE sender = ?1 AND to_member = 'bob'";
    assert_eq!(r.count(from, "hook:ci").await, 1);
    let pending = "SELECT count(*) FROM deliveries WHERE recipient = ?1 AND state = 'pending'";
    assert_eq!(r.count(pending, "bob").await, 2);
    for (who, sees) in [("user", true), ("bob", true), ("alice", false)] {
        let scope = r.scope(who).await;
        let read = r.messaging.channel_read(&scope, None, None).await.unwrap();
        let got = read.messages.iter().any(|m| m.from == "hook:ci");
        assert_eq!(got, sees, "{who}: {:?}", read.messages);
    }
}
