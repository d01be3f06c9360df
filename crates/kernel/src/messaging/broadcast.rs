//! Broadcasts: a message to every agent of an instance but its sender is one row,
//! not one delivery row per agent.
//!
//! Why: delivery rows are keyed by recipient (so an inbox is one range of the key),
//! which puts the rows of one send to 200 agents on 200 different pages; an `@all`
//! wrote about 200 pages to the WAL and topped out near 300 sends/s. A broadcast is
//! written once, in `broadcasts`, and each agent's own delivery row for it is written
//! only when that agent's inbox changes state: when it reads, acks, defers, or a run
//! of it starts. Until then the delivery is pending and lives in the broadcast.
//!
//! The rules, which keep every reader of deliveries exact:
//! - Each agent has a mark (`agents.broadcast_mark`): the newest broadcast of its
//!   instance whose delivery is already its own row, or that was sent before it
//!   joined (a trigger sets it when the agent is created). The agent's unwritten
//!   deliveries are the broadcasts after its mark that it did not send.
//! - [`write_own`] turns them into pending rows of `deliveries` and moves the mark,
//!   in the caller's transaction; every change of an agent's delivery states calls
//!   it first, so the state machine in `inbox.rs` only ever sees rows.
//! - Reads that count or test open deliveries add [`unwritten`] (or, across agents,
//!   [`UNWRITTEN_EXISTS`]); nothing else needs to know.
//! - A broadcast is used only when the recipients are exactly every agent but the
//!   sender (the lead may be among them too: it gets its own row), with at least
//!   [`MIN_AGENTS`] agents, and never for a direct message.

use domain::error::Result;
use std::collections::HashSet;
use store::sql;
use store::sql::Connection;

/// Below this many agents a message keeps one delivery row per recipient: nothing
/// to save, and the rows are what the inbox reads anyway.
pub const MIN_AGENTS: usize = 2;

/// Across agents `a`: true when agent `a` has a broadcast it has not written yet.
/// For `EXISTS`-style checks that cannot call [`unwritten`] per agent.
pub(crate) const UNWRITTEN_EXISTS: &str = "EXISTS (SELECT 1 FROM broadcasts b
     WHERE b.workflow_id = a.workflow_id AND b.message_id > a.broadcast_mark AND b.sender <> a.name)";

/// Whether a message from `sender` to `recipients` (no `to`) goes out as a broadcast:
/// the recipients cover every agent but the sender. Names are the canonical ones
/// (`recipients` come from the member list).
pub(crate) fn covers_all(recipients: &[String], agents: &[String], sender: &str) -> bool {
    if recipients.len() < MIN_AGENTS {
        return false;
    }
    let got: HashSet<&str> = recipients.iter().map(String::as_str).collect();
    let mut others = 0;
    for a in agents.iter().filter(|a| !a.eq_ignore_ascii_case(sender)) {
        if !got.contains(a.as_str()) {
            return false;
        }
        others += 1;
    }
    others >= MIN_AGENTS
}

/// Records a broadcast, in the send's transaction.
pub(crate) fn record(
    c: &Connection,
    workflow_id: i64,
    message_id: &str,
    sender: &str,
) -> Result<()> {
    c.prepare_cached(
        "INSERT INTO broadcasts (workflow_id, message_id, sender) VALUES (?1, ?2, ?3)",
    )?
    .execute_later((workflow_id, message_id, sender))?;
    Ok(())
}

/// Writes `name`'s unwritten broadcast deliveries as pending rows of `deliveries`
/// and moves its mark past them (nothing for the lead, who is no agent). Runs inside
/// a store job, before anything that reads or changes the agent's delivery states;
/// the writes go out with the job's next statement (one round trip on PostgreSQL).
pub(crate) fn write_own(c: &Connection, workflow_id: i64, name: &str, now: i64) -> Result<()> {
    let found = own_ahead(c, workflow_id, name)?;
    write_own_from(c, (workflow_id, name, now), found).map(drop)
}

/// [`write_own`]'s read, sent now: `name`'s mark and the newest broadcast past it.
/// On PostgreSQL it shares a round trip with the reads sent after it.
pub(crate) fn own_ahead(c: &Connection, workflow_id: i64, name: &str) -> Result<sql::Later> {
    Ok(c.prepare_cached(
        "SELECT a.broadcast_mark, (SELECT max(b.message_id) FROM broadcasts b
                                    WHERE b.workflow_id = ?1 AND b.message_id > a.broadcast_mark)
           FROM agents a WHERE a.workflow_id = ?1 AND a.name = ?2",
    )?
    .query_later((workflow_id, name))?)
}

/// An SQL condition on member `?2` of instance `?1`: no broadcast past its mark, so
/// [`write_own_from`] will write nothing (what [`own_ahead`] reads). For a statement
/// sent with that read, before its answer.
pub(crate) const NONE_UNWRITTEN: &str = "NOT EXISTS (
    SELECT 1 FROM agents a JOIN broadcasts b
        ON b.workflow_id = a.workflow_id AND b.message_id > a.broadcast_mark
     WHERE a.workflow_id = ?1 AND a.name = ?2)";

/// [`write_own`] with its read [`own_ahead`] sent: true when it wrote rows (reads
/// sent before them do not see them).
pub(crate) fn write_own_from(
    c: &Connection,
    (workflow_id, name, now): (i64, &str, i64),
    found: sql::Later,
) -> Result<bool> {
    let Some((mark, newest)) = past_mark(c, found)? else {
        return Ok(false);
    };
    c.prepare_cached(
        "INSERT INTO deliveries (workflow_id, recipient, message_id, state, updated_at)
         SELECT workflow_id, ?2, message_id, 'pending', ?4 FROM broadcasts
          WHERE workflow_id = ?1 AND message_id > ?3 AND message_id <= ?5 AND sender <> ?2
         ON CONFLICT DO NOTHING",
    )?
    .execute_later(sql::params![workflow_id, name, mark, now, newest])?;
    c.prepare_cached("UPDATE agents SET broadcast_mark = ?3 WHERE workflow_id = ?1 AND name = ?2")?
        .execute_later((workflow_id, name, &newest))?;
    Ok(true)
}

/// What [`own_ahead`] read: the member's mark and the newest broadcast past it,
/// if there is one (its rows are to be written).
fn past_mark(c: &Connection, found: sql::Later) -> Result<Option<(String, String)>> {
    let mut rows = found.rows(c)?;
    Ok(match rows.next()? {
        Some(r) => r
            .get::<Option<String>>(1)?
            .map(|n| r.get(0).map(|m| (m, n)))
            .transpose()?,
        None => None,
    })
}

/// Whether [`own_ahead`] found broadcasts that are not the member's rows yet
/// (statements sent with it under [`NONE_UNWRITTEN`] then did nothing).
pub(crate) fn any_unwritten(c: &Connection, found: sql::Later) -> Result<bool> {
    Ok(past_mark(c, found)?.is_some())
}

/// How many broadcast deliveries `name` has that are not rows yet (all pending).
pub(crate) fn unwritten(c: &Connection, workflow_id: i64, name: &str) -> Result<i64> {
    Ok(c
        .prepare_cached(
            "SELECT count(*) FROM agents a JOIN broadcasts b
                ON b.workflow_id = a.workflow_id AND b.message_id > a.broadcast_mark AND b.sender <> a.name
             WHERE a.workflow_id = ?1 AND a.name = ?2",
        )?
        .query_row((workflow_id, name), |r| r.get(0))?)
}

#[cfg(test)]
mod tests {
    use crate::messaging::Outgoing;
    use crate::registry::NewAgent;
    use crate::{Caller, Kernel, Scope};
    use std::sync::Arc;

    async fn kernel(dir: &std::path::Path, agents: &[&str]) -> Arc<Kernel> {
        let k = Kernel::open(dir, "awadmin_test_token_0123456789".into())
            .await
            .unwrap();
        for name in agents {
            add(&k, name).await;
        }
        k
    }

    async fn add(k: &Kernel, name: &str) {
        k.agent_new(NewAgent {
            name: (*name).into(),
            backend: "mock".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    }

    async fn as_agent(k: &Kernel, name: &str) -> Scope {
        let id = k.agent_get(name).await.unwrap().id;
        let caller = k.registry.agent_caller(id, None).await.unwrap();
        k.registry().scope(&caller, None).await.unwrap()
    }

    async fn send(k: &Kernel, scope: &Scope, message: &str) -> String {
        let sent = k
            .messaging()
            .channel_send(
                scope,
                Outgoing {
                    message: message.into(),
                    force: true,
                    ..Default::default()
                },
            )
            .await
            .unwrap();
        sent.id
    }

    async fn agent_ids(k: &Kernel, names: &[&str]) -> Vec<i64> {
        let mut ids = Vec::new();
        for n in names {
            ids.push(k.agent_get(n).await.unwrap().id);
        }
        ids
    }

    /// (broadcast rows, delivery rows) in the store.
    async fn rows(k: &Kernel) -> (i64, i64) {
        k.store
            .read(|c| {
                let n = |t: &str| -> domain::error::Result<i64> {
                    Ok(c.query_row(&format!("SELECT count(*) FROM {t}"), (), |r| r.get(0))?)
                };
                Ok((n("broadcasts")?, n("deliveries")?))
            })
            .await
            .unwrap()
    }

    async fn pending(k: &Kernel, name: &str) -> i64 {
        k.agent_info(name).await.unwrap().inbox.pending
    }

    /// An `@all` is one row; each agent's delivery is written when it reads, and the
    /// counts, the idle check and the inbox agree before and after.
    #[tokio::test]
    async fn an_all_is_one_row_until_each_agent_reads() {
        let dir = tempfile::tempdir().unwrap();
        let k = kernel(dir.path(), &["alice", "bob", "carol"]).await;
        assert!(k.owes_nothing().await.unwrap());
        let lead = k.registry().scope(&Caller::Lead, None).await.unwrap();
        let id = send(&k, &lead, "@all ship it").await;
        assert_eq!(rows(&k).await, (1, 0));
        for name in ["alice", "bob", "carol"] {
            assert_eq!(pending(&k, name).await, 1, "{name}");
        }
        // Mock agents with a delivery they have not handled: stopping now would lose it.
        assert!(!k.owes_nothing().await.unwrap());

        let bob = as_agent(&k, "bob").await;
        let peek = k.messaging().inbox_peek(&bob, 10).await.unwrap();
        assert_eq!(peek.messages.len(), 1);
        assert_eq!(rows(&k).await, (1, 1), "looking writes bob's row, pending");
        assert_eq!(pending(&k, "bob").await, 1);
        let inbox = k.messaging().my_inbox(&bob, None).await.unwrap();
        assert_eq!(inbox.messages[0].id, id);
        let info = k.agent_info("bob").await.unwrap().inbox;
        assert_eq!((info.pending, info.seen), (0, 1));
        // Read again: the broadcast is not written twice.
        assert_eq!(
            k.messaging()
                .my_inbox(&bob, None)
                .await
                .unwrap()
                .messages
                .len(),
            1
        );
        assert_eq!(rows(&k).await, (1, 1));

        // An ack of a delivery never read writes it first, then acks it.
        let carol = as_agent(&k, "carol").await;
        assert_eq!(
            k.messaging()
                .my_inbox_ack(&carol, &id, false)
                .await
                .unwrap()
                .acked,
            1
        );
        assert_eq!(pending(&k, "carol").await, 0);
        assert_eq!(k.agent_info("carol").await.unwrap().inbox.acked, 1);
        assert!(
            k.messaging()
                .my_inbox(&carol, None)
                .await
                .unwrap()
                .messages
                .is_empty()
        );
        // A defer of one never read, likewise.
        let alice = as_agent(&k, "alice").await;
        k.messaging()
            .my_inbox_defer(&alice, &id, Some("1h"))
            .await
            .unwrap();
        let info = k.agent_info("alice").await.unwrap().inbox;
        assert_eq!((info.pending, info.deferred), (0, 1));
        // Bob's seen and alice's deferred message are owed, until the lead pauses
        // them: then nothing runs them until a client acts, and nothing is owed.
        assert!(!k.owes_nothing().await.unwrap());
        for id in agent_ids(&k, &["alice", "bob", "carol"]).await {
            k.set_paused(id, true).await.unwrap();
        }
        assert!(k.owes_nothing().await.unwrap());
    }

    /// An agent's own `@all` is not its own; an agent that joins later, or is deleted
    /// and created again, never gets the broadcasts sent before it existed.
    #[tokio::test]
    async fn broadcasts_reach_the_agents_that_existed_but_the_sender() {
        let dir = tempfile::tempdir().unwrap();
        let k = kernel(dir.path(), &["alice", "bob", "carol"]).await;
        let alice = as_agent(&k, "alice").await;
        let first = send(&k, &alice, "@all standup").await;
        assert_eq!(rows(&k).await, (1, 0));
        assert_eq!(pending(&k, "alice").await, 0, "not to its sender");
        assert!(
            k.messaging()
                .my_inbox(&alice, None)
                .await
                .unwrap()
                .messages
                .is_empty()
        );
        assert_eq!(pending(&k, "bob").await, 1);

        add(&k, "dave").await;
        assert_eq!(pending(&k, "dave").await, 0, "sent before dave joined");
        k.agent_delete("carol", false).await.unwrap();
        add(&k, "carol").await;
        assert_eq!(pending(&k, "carol").await, 0, "sent before this carol");

        // To every other agent and the lead.
        let second = send(&k, &alice, "@all @user everyone").await;
        for (name, n) in [("alice", 0), ("bob", 2), ("carol", 1), ("dave", 1)] {
            assert_eq!(pending(&k, name).await, n, "{name}");
        }
        let bob = as_agent(&k, "bob").await;
        let ids: Vec<String> = k
            .messaging()
            .my_inbox(&bob, None)
            .await
            .unwrap()
            .messages
            .into_iter()
            .map(|m| m.id)
            .collect();
        assert_eq!(ids, [first.clone(), second.clone()], "oldest first");
        // `through` acks both, written or not.
        let dave = as_agent(&k, "dave").await;
        assert_eq!(
            k.messaging()
                .my_inbox_ack(&dave, &second, true)
                .await
                .unwrap()
                .acked,
            1
        );
        assert_eq!(
            k.messaging()
                .my_inbox_ack(&bob, &second, true)
                .await
                .unwrap()
                .acked,
            2
        );
        // The lead is not an agent: its delivery is an ordinary row.
        let lead = k.registry().scope(&Caller::Lead, None).await.unwrap();
        let lead_inbox = k.messaging().my_inbox(&lead, None).await.unwrap();
        assert_eq!(lead_inbox.messages.len(), 1);
        assert_eq!(lead_inbox.messages[0].id, second);
        // Foreign ids are still refused: alice sent the first one.
        assert!(
            k.messaging()
                .my_inbox_ack(&alice, &first, false)
                .await
                .is_err()
        );
    }

    /// Fewer than two other agents, a direct message, or a mention list short of
    /// everyone: ordinary delivery rows.
    #[tokio::test]
    async fn only_a_message_to_every_other_agent_is_a_broadcast() {
        let dir = tempfile::tempdir().unwrap();
        let k = kernel(dir.path(), &["alice", "bob", "carol"]).await;
        let lead = k.registry().scope(&Caller::Lead, None).await.unwrap();
        send(&k, &lead, "@alice @bob not carol").await;
        assert_eq!(rows(&k).await, (0, 2));
        send(&k, &lead, "@alice @bob @carol everyone, by name").await;
        assert_eq!(rows(&k).await, (1, 2));
        let bob = as_agent(&k, "bob").await;
        send(&k, &bob, "@alice @carol both others").await;
        assert_eq!(rows(&k).await, (2, 2));
        let dm = Outgoing {
            message: "@all only for alice".into(),
            to: Some("alice".into()),
            force: true,
            urgent: false,
        };
        k.messaging().channel_send(&lead, dm).await.unwrap();
        assert_eq!(rows(&k).await, (2, 3));

        let dir = tempfile::tempdir().unwrap();
        let k = kernel(dir.path(), &["alice", "bob"]).await;
        let alice = as_agent(&k, "alice").await;
        send(&k, &alice, "@all just bob").await;
        assert_eq!(rows(&k).await, (0, 1), "one other agent");
    }
}
