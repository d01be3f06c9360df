//! Single sends queued together and written by one call of PostgreSQL's
//! `channel_send_many` give what the same sends give one by one through `post`:
//! each one's answer, its rows, the hop count and the cursors after them all. On
//! SQLite both ways are `post` (no sends are queued), so the table checks itself.

use super::Outgoing;
use super::send_cases::facts;
use crate::testing::{Rooms, said};
use domain::names::LEAD;

/// (sender, `to`, force, text), in the order they are made.
#[rustfmt::skip]
const SENDS: &[(&str, &str, bool, &str)] = &[
    ("user", "", false, "@alice start"),
    ("alice", "", false, "@bob please review"),
    ("bob", "", false, "@all standup"),
    ("alice", "", false, "@bob again"),
    ("carol", "zed", false, "hi"),
    ("carol", "", true, "@alice @bob @user sync"),
    ("alice", "bob", false, "private @carol"),
    ("carol", "", false, "hello nobody"),
    ("user", "", false, "@all @user hi"),
    ("alice", "", false, "@zed and @Bob, look"),
    ("bob", "", false, "@user done"),
];

/// `f`'s output, or a failure when it takes 30 s (a send nobody answers).
async fn within<T>(f: impl std::future::Future<Output = T>) -> T {
    let limit = std::time::Duration::from_secs(30);
    tokio::time::timeout(limit, f)
        .await
        .expect("answered within 30 s")
}

async fn scope(r: &Rooms, from: &str) -> crate::Scope {
    match from {
        LEAD => r.scope_in("@global:main", LEAD).await,
        _ => r.scope(from).await,
    }
}

fn outgoing(to: &str, force: bool, text: &str) -> Outgoing {
    Outgoing {
        message: text.to_owned(),
        to: (!to.is_empty()).then(|| to.to_owned()),
        force,
        urgent: false,
    }
}

/// Each send's outcome (as `send_cases` spells it, read once all were written) or
/// refusal, and each send's id.
async fn outcomes(
    r: &Rooms,
    sent: Vec<domain::error::Result<super::SendResult>>,
) -> (Vec<String>, Vec<String>) {
    let (mut out, mut ids) = (Vec::new(), Vec::new());
    for ((from, ..), s) in SENDS.iter().zip(&sent) {
        match s {
            Ok(s) => {
                out.push(facts::outcome(r, from, s).await);
                ids.push(s.id.clone());
            }
            Err(_) => out.push(said(s)),
        }
    }
    (out, ids)
}

#[tokio::test]
async fn sends_written_together_give_what_they_give_one_by_one() {
    let together = Rooms::new().await;
    let alone = Rooms::new().await;
    alone.messaging.known.turn_off();
    for r in [&together, &alone] {
        r.agents(&["alice", "bob", "carol"]).await;
    }
    // Queued in order before the first job runs: polled in turn on this thread.
    let mut scopes = Vec::new();
    for &(from, ..) in SENDS {
        scopes.push(scope(&together, from).await);
    }
    let queued = SENDS.iter().zip(&scopes).map(|(&(_, to, force, text), s)| {
        together
            .messaging
            .channel_send(s, outgoing(to, force, text))
    });
    let sent = within(futures::future::join_all(queued)).await;
    let mut one_by_one = Vec::new();
    for &(from, to, force, text) in SENDS {
        let s = scope(&alone, from).await;
        one_by_one.push(
            alone
                .messaging
                .channel_send(&s, outgoing(to, force, text))
                .await,
        );
    }
    let (got, ids) = outcomes(&together, sent).await;
    let (want, _) = outcomes(&alone, one_by_one).await;
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert_eq!(g, w, "send {i}: {:?}", SENDS[i]);
    }
    assert!(
        ids.windows(2).all(|w| w[0] < w[1]),
        "ids in the sends' order: {ids:?}"
    );
    let functions = together
        .store
        .read(|c| Ok(c.server_functions()))
        .await
        .unwrap();
    let (written, calls) = (
        together.messaging.known.counts().0,
        together.messaging.known.calls(),
    );
    let want = if functions { (10, 1) } else { (0, 0) };
    assert_eq!(
        (written, calls),
        want,
        "(sends written by the function, its calls)"
    );
}

/// A caller that gives up after its send was queued does not strand the sends
/// queued behind it: they are answered, and the one given up is written all the
/// same (as a send whose job was queued always was).
#[tokio::test]
async fn a_caller_that_gives_up_strands_no_other_send() {
    let r = Rooms::new().await;
    r.agents(&["alice", "bob"]).await;
    let alice = r.scope("alice").await;
    let bob = r.scope("bob").await;
    let mut first = Box::pin(
        r.messaging
            .channel_send(&alice, outgoing("", true, "@bob one")),
    );
    // Polled once: queued (or, on SQLite, its job pushed), not answered.
    let _ = futures::poll!(&mut first);
    let second = r
        .messaging
        .channel_send(&bob, outgoing("", true, "@alice two"));
    drop(first);
    let two = within(second)
        .await
        .expect("the send behind the one given up");
    assert_eq!(two.recipients, ["alice"]);
    let n = r
        .count("SELECT count(*) FROM messages WHERE sender = ?1", "alice")
        .await;
    assert_eq!(n, 1, "the send given up was written");
}

/// The task writing an instance's sends ends with its runtime (an embedder that
/// drops one, a test): the next send of the instance starts a task of its own
/// instead of queueing behind the one that is gone.
#[test]
fn a_send_after_its_instance_s_task_was_dropped_is_written() {
    let runtime = || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    };
    let main = runtime();
    let r = main.block_on(async {
        let r = Rooms::new().await;
        r.agents(&["alice", "bob"]).await;
        r
    });
    let alice = main.block_on(r.scope("alice"));
    let other = runtime();
    other.block_on(async {
        let mut first = Box::pin(
            r.messaging
                .channel_send(&alice, outgoing("", true, "@bob one")),
        );
        let _ = futures::poll!(&mut first);
    });
    drop(other);
    let two = main.block_on(within(
        r.messaging
            .channel_send(&alice, outgoing("", true, "@bob two")),
    ));
    assert_eq!(two.expect("the send after").recipients, ["bob"]);
}
