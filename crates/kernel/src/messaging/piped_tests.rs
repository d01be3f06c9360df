//! Inbox reads, acks and sends piped in one transaction (PostgreSQL; on SQLite
//! each job runs whole, so the table checks itself): each gives what it would
//! give alone. A broadcast sent earlier in the transaction makes the reads and
//! acks after it run again, whole; an ack the lookup refuses acks nothing, though
//! its statements went out before its refusal was read.

use crate::Scope;
use crate::testing::{Rooms, said};
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;
use store::{Isolation, WriteScope};

type Call<'a> = Pin<Box<dyn Future<Output = String> + Send + 'a>>;

/// Runs `calls` in one transaction of the instance's writer: a first job holds the
/// writer until every call's job is queued behind it.
async fn in_one_transaction(r: &Rooms, wid: i64, calls: Vec<Call<'_>>) -> Vec<String> {
    let (started_tx, started_rx) = std::sync::mpsc::channel::<()>();
    let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
    let mut blocker = Box::pin(r.store.write_as(
        WriteScope::Instance(wid),
        Isolation::Savepoint,
        move |_| {
            let _ = started_tx.send(());
            let _ = go_rx.recv_timeout(Duration::from_secs(30));
            Ok(())
        },
    ));
    assert!(futures::poll!(blocker.as_mut()).is_pending());
    started_rx.recv_timeout(Duration::from_secs(30)).unwrap();
    let mut queued = Vec::new();
    for mut call in calls {
        assert!(futures::poll!(call.as_mut()).is_pending(), "queued");
        // A send's job is queued by a task of its own (`together`): let it run.
        for _ in 0..4 {
            tokio::task::yield_now().await;
        }
        queued.push(call);
    }
    go_tx.send(()).unwrap();
    blocker.await.unwrap();
    futures::future::join_all(queued).await
}

fn inbox<'a>(r: &'a Rooms, who: &'a Scope) -> Call<'a> {
    Box::pin(async move {
        match r.messaging.my_inbox(who, None).await {
            Ok(i) => {
                let texts: Vec<&str> = i.messages.iter().map(|m| m.content.as_str()).collect();
                format!("{}: {}", who.me, texts.join(", "))
            }
            Err(e) => said::<()>(&Err(e)),
        }
    })
}

fn ack<'a>(r: &'a Rooms, who: &'a Scope, id: &'a str) -> Call<'a> {
    Box::pin(async move {
        match r.messaging.my_inbox_ack(who, id, true).await {
            Ok(a) => format!("{} acked {}", who.me, a.acked),
            Err(e) => said::<()>(&Err(e))
                .split(':')
                .next()
                .unwrap_or("")
                .to_owned(),
        }
    })
}

fn send<'a>(r: &'a Rooms, who: &'a Scope, text: &'static str) -> Call<'a> {
    Box::pin(async move {
        let sent = r.messaging.channel_send(
            who,
            super::Outgoing {
                message: text.into(),
                ..Default::default()
            },
        );
        said(&sent.await)
    })
}

#[tokio::test]
async fn piped_inbox_jobs_give_what_they_give_alone() {
    let r = Rooms::new().await;
    r.agents(&["alice", "bob", "carol"]).await;
    let mut ids = Vec::new();
    for i in 0..3 {
        ids.push(r.send("alice", &format!("@bob m{i}")).await.id);
    }
    let for_carol = r.send("alice", "@carol c0").await.id;
    let (alice, bob, carol) = (
        r.scope("alice").await,
        r.scope("bob").await,
        r.scope("carol").await,
    );
    let got = in_one_transaction(
        &r,
        bob.workflow_id,
        vec![
            // Refused (not bob's), and acks nothing of bob's through it.
            ack(&r, &bob, &for_carol),
            inbox(&r, &carol),
            ack(&r, &carol, &for_carol),
            send(&r, &alice, "@carol c1"),
            // Not bob's rows yet: bob's read and ack below run again, whole.
            send(&r, &alice, "@all standup"),
            inbox(&r, &bob),
            ack(&r, &bob, &ids[1]),
            inbox(&r, &bob),
            ack(&r, &carol, "no-such-id"),
        ],
    )
    .await;
    let want = [
        "forbidden",
        "carol: @carol c0",
        "carol acked 1",
        "ok",
        "ok",
        "bob: @bob m0, @bob m1, @bob m2, @all standup",
        "bob acked 2",
        "bob: @bob m2, @all standup",
        "not found",
    ];
    assert_eq!(got, want);
    let carol_now = inbox(&r, &carol).await;
    assert_eq!(carol_now, "carol: @carol c1, @all standup");
}
