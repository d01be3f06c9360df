//! What the workflows room reads of an instance for its status and its idle
//! check: each agent's open messages (deferred ones only once due, broadcasts not
//! yet written counted), and its open binding proposals.

use super::facts::{agent_facts, open_binding_proposals};
use crate::context::proposals::{NewProposal, OptionArg};
use crate::testing::{Rooms, names};

#[tokio::test]
async fn an_agent_s_pending_count_is_its_open_and_due_messages() {
    let r = Rooms::new().await;
    r.agents(&["alice", "bob", "carol"]).await;
    r.send("alice", "@all standup").await;
    let later = r.send("alice", "@bob later").await;
    r.send("alice", "@bob now").await;
    let bob = r.scope("bob").await;
    r.messaging
        .my_inbox_defer(&bob, &later.id, Some("1h"))
        .await
        .unwrap();
    let wid = bob.workflow_id;
    let facts = r
        .store
        .read(move |c| agent_facts(c, wid, crate::testing::T0))
        .await
        .unwrap();
    let pending: Vec<(String, i64)> = facts
        .iter()
        .map(|a| (a.summary.name.clone(), a.summary.pending))
        .collect();
    let want = [("alice", 0), ("bob", 2), ("carol", 1)].map(|(n, p)| (n.to_owned(), p));
    assert_eq!(
        pending, want,
        "carol's broadcast is not a row yet; bob's deferred one is not due"
    );
    assert!(
        facts
            .iter()
            .all(|a| !a.running && !a.polls && !a.schedule_owed)
    );
    assert_eq!(
        facts
            .iter()
            .map(|a| a.summary.backend.as_str())
            .collect::<Vec<_>>(),
        ["mock"; 3]
    );
}

/// Open binding proposals keep an instance running; advisory or closed ones do not.
#[tokio::test]
async fn only_open_binding_proposals_hold_an_instance() {
    let r = Rooms::new().await;
    r.agents(&["alice", "bob"]).await;
    let alice = r.scope("alice").await;
    let new = |binding: bool| NewProposal {
        kind: "decision".into(),
        title: "t".into(),
        description: None,
        options: names(&["a", "b"])
            .into_iter()
            .map(OptionArg::Label)
            .collect(),
        resolution: None,
        quorum: None,
        tie_breaker: None,
        binding: Some(binding),
        timeout: None,
        contract: None,
    };
    for binding in [true, true, false] {
        r.context
            .proposal_create(&alice, new(binding))
            .await
            .unwrap();
    }
    r.context.proposal_cancel(&alice, "prop-1").await.unwrap();
    let wid = alice.workflow_id;
    let open = r
        .store
        .read(move |c| open_binding_proposals(c, wid))
        .await
        .unwrap();
    assert_eq!(open, 1);
}
