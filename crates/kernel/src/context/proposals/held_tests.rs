//! A vote of the members held by a proposal: the members vote on it as their
//! decisions on its approval (the asker never votes), it closes when the approval
//! does, with its outcome, whoever closed it, and it is never cancelled by hand.

use super::held::{NewVote, close_settled_tx, open_tx};
use crate::governance::approvals::{NewApproval, expire_tx, get, insert_tx};
use crate::testing::{Rooms, expect, names, said};
use domain::contracts::{Approval, OnTimeout, Votes};
use domain::names::WorkflowRef;
use std::time::Duration;

/// Rooms where `coder` asks for an approval the members (alice, bob, carol)
/// decide by 2 votes, held by prop-1; the approval's id.
async fn held(timeout: Duration) -> (Rooms, i64) {
    let r = Rooms::new().await;
    r.agents(&["alice", "bob", "carol", "coder"]).await;
    let wid = r.scope("coder").await.workflow_id;
    let now = r.clock.now_ms();
    let id = r
        .store
        .write(move |c| {
            let a = NewApproval {
                workflow_id: wid,
                agent_id: 4,
                agent: "coder".into(),
                run_id: None,
                event: "tool_request".into(),
                detail: "shell: deploy prod".into(),
                approval: Approval {
                    contracts: names(&["deploys"]),
                    approvers: names(&["alice", "bob", "carol"]),
                    count: 2,
                    votes: vec![Votes::Count(2)],
                    timeout,
                    on_timeout: OnTimeout::Deny,
                },
            };
            let id = insert_tx(c, &a, now)?;
            let wf = WorkflowRef::global();
            let voters = names(&["alice", "bob", "carol"]);
            let v = NewVote {
                workflow_id: wid,
                workflow: &wf,
                approval_id: id,
                asker: "coder",
                title: "coder asks to deploy prod".into(),
                voters: &voters,
                needed: 2,
                deadline_ms: get(c, id)?.unwrap().deadline_ms(),
            };
            open_tx(c, &v, now)?;
            Ok(id)
        })
        .await
        .unwrap();
    (r, id)
}

async fn vote(r: &Rooms, who: &str, choice: &str) -> String {
    let scope = r.scope(who).await;
    match r
        .context
        .proposal_vote(&scope, "prop-1", choice, None)
        .await
    {
        Ok(v) => format!("{} {:?}", v.proposal.status, v.closed_approval),
        Err(e) => said::<()>(&Err(e)),
    }
}

async fn approval_state(r: &Rooms, id: i64) -> String {
    let row = r.store.read(move |c| get(c, id)).await.unwrap().unwrap();
    row.view.state.to_string()
}

#[tokio::test]
async fn the_members_are_asked_and_the_asker_does_not_vote() {
    let (r, _) = held(Duration::from_secs(3600)).await;
    let bob = r.scope("bob").await;
    let told = r.messaging.inbox_peek(&bob, 10).await.unwrap();
    assert!(told.messages[0].content.starts_with("@alice @bob @carol prop-1 \"coder asks to deploy prod\": approval 1 waits for a vote of the members, 2 of 3 for it."), "{}", told.messages[0].content);
    let status = r
        .context
        .proposal_status(&bob, Some("prop-1"))
        .await
        .unwrap();
    assert_eq!(
        status.proposals[0].waiting_for,
        names(&["alice", "bob", "carol"])
    );
    expect(
        &vote(&r, "coder", "approve").await,
        "forbidden: approval 1 is your own request",
        &[],
    );
    let got = said(
        &r.context
            .proposal_cancel(&r.scope("user").await, "prop-1")
            .await,
    );
    expect(
        &got,
        "conflict: prop-1 is the members' vote on approval 1 and closes with it",
        &[],
    );
}

#[tokio::test]
async fn enough_votes_for_approve_it_and_close_the_proposal() {
    let (r, id) = held(Duration::from_secs(3600)).await;
    assert_eq!(vote(&r, "alice", "approve").await, "open None");
    assert_eq!(vote(&r, "bob", "reject").await, "open None");
    assert_eq!(
        vote(&r, "carol", "approve").await,
        format!("resolved Some({id})")
    );
    assert_eq!(approval_state(&r, id).await, "approved");
}

/// Refused once too many voted against for it to pass.
#[tokio::test]
async fn enough_votes_against_refuse_it() {
    let (r, id) = held(Duration::from_secs(3600)).await;
    assert_eq!(vote(&r, "alice", "reject").await, "open None");
    assert_eq!(
        vote(&r, "bob", "reject").await,
        format!("resolved Some({id})")
    );
    assert_eq!(approval_state(&r, id).await, "denied");
}

/// An approval closed elsewhere (its deadline) closes its proposal, expired.
#[tokio::test]
async fn a_proposal_closes_with_an_approval_closed_elsewhere() {
    let (r, id) = held(Duration::ZERO).await;
    let now = r.clock.now_ms();
    let closed = r
        .store
        .write(move |c| {
            expire_tx(c, &get(c, id)?.unwrap(), now)?;
            Ok(close_settled_tx(c, now)?.len())
        })
        .await
        .unwrap();
    assert_eq!(closed, 1);
    let bob = r.scope("bob").await;
    let p = &r
        .context
        .proposal_status(&bob, Some("prop-1"))
        .await
        .unwrap()
        .proposals[0];
    assert_eq!(
        (
            p.status.as_str(),
            p.closed_by.as_deref(),
            p.winner.is_none()
        ),
        ("expired", Some("approval"), true)
    );
    let again = r
        .store
        .write(move |c| close_settled_tx(c, now))
        .await
        .unwrap();
    assert!(again.is_empty(), "closed once");
}
