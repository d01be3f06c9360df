//! Approvals as rows: who may decide (an approver, never the asker; the lead
//! always), how many approvals it takes, one refusal refusing (a vote of the
//! members only once it cannot pass), the deadline and its `on_timeout`, runs
//! that end first, what each decision logs, and what a spend approval grants.

use super::approvals::{
    Ended, NewApproval, decide_tx, ended, expire_tx, get, insert_tx, list, lose_orphans_tx,
    lose_run_tx, next_deadline, spend_state,
};
use crate::testing::{Rooms, expect, names, said};
use domain::contracts::{Approval, OnTimeout, Votes};
use std::time::Duration;

const HOUR: Duration = Duration::from_secs(3600);

/// An approval `alice` asks for, decided by `approvers`, `count` of them.
fn asked(approvers: &[&str], count: usize) -> NewApproval {
    NewApproval {
        workflow_id: 1,
        agent_id: 1,
        agent: "alice".into(),
        run_id: Some("run-1".into()),
        event: "tool_request".into(),
        detail: "shell: rm -rf build".into(),
        approval: Approval {
            contracts: names(&["no-rm"]),
            approvers: names(approvers),
            count,
            votes: Vec::new(),
            timeout: HOUR,
            on_timeout: OnTimeout::Deny,
        },
    }
}

async fn open(r: &Rooms, a: NewApproval) -> i64 {
    let now = r.clock.now_ms();
    r.store.write(move |c| insert_tx(c, &a, now)).await.unwrap()
}

/// `who` decides approval `id`; the answer short: the state after it, or the refusal.
async fn decide(r: &Rooms, id: i64, who: &'static str, approve: bool) -> String {
    let now = r.clock.now_ms();
    let got = r
        .store
        .write(move |c| Ok(decide_tx(c, (id, who, approve, Some("looked")), now)))
        .await
        .unwrap();
    match got {
        Ok(row) => format!(
            "{}{}",
            row.view.state,
            row.view
                .reason
                .map(|x| format!(" ({x})"))
                .unwrap_or_default()
        ),
        Err(e) => said::<()>(&Err(e)),
    }
}

async fn ended_of(r: &Rooms, id: i64) -> Ended {
    r.store
        .read(move |c| Ok(ended(&get(c, id)?.unwrap())))
        .await
        .unwrap()
}

#[tokio::test]
async fn only_an_approver_or_the_lead_decides_and_never_the_asker() {
    let r = Rooms::new().await;
    let id = open(&r, asked(&["bob", "Alice"], 1)).await;
    expect(
        &decide(&r, id, "alice", true).await,
        "forbidden: approval 1 is your own request",
        &[],
    );
    expect(
        &decide(&r, id, "carol", true).await,
        "forbidden: you are not an approver of approval 1; its approvers: bob, Alice",
        &[],
    );
    expect(
        &decide(&r, 99, "bob", true).await,
        "not found: no approval 99; approval_list shows them",
        &[],
    );
    expect(
        &decide(&r, id, "BOB", true).await,
        "approved (approved by BOB: looked)",
        &[],
    );
    expect(
        &decide(&r, id, "bob", false).await,
        "conflict: approval 1 is already approved (approved by BOB: looked); nothing to decide",
        &[],
    );
    assert_eq!(
        ended_of(&r, id).await,
        Ended::Allowed("approved by BOB: looked".into())
    );
}

#[tokio::test]
async fn it_takes_count_approvals_and_a_revote_counts_once() {
    let r = Rooms::new().await;
    let id = open(&r, asked(&["bob", "carol", "dave"], 2)).await;
    expect(&decide(&r, id, "bob", true).await, "pending", &[]);
    expect(&decide(&r, id, "bob", true).await, "pending", &[]);
    assert_eq!(ended_of(&r, id).await, Ended::Pending);
    expect(
        &decide(&r, id, "carol", true).await,
        "approved (approved by carol",
        &[],
    );
    let votes = r
        .store
        .read(move |c| Ok(get(c, id)?.unwrap().view.votes))
        .await
        .unwrap();
    let who: Vec<(&str, &str)> = votes
        .iter()
        .map(|v| (v.who.as_str(), v.decision.as_str()))
        .collect();
    assert_eq!(who, [("bob", "approve"), ("carol", "approve")]);
}

#[tokio::test]
async fn one_refusal_refuses_and_the_lead_s_word_is_final() {
    let r = Rooms::new().await;
    let id = open(&r, asked(&["bob", "carol"], 2)).await;
    expect(&decide(&r, id, "bob", true).await, "pending", &[]);
    expect(
        &decide(&r, id, "carol", false).await,
        "denied (refused by carol: looked)",
        &[],
    );
    assert_eq!(
        ended_of(&r, id).await,
        Ended::Refused("refused by carol: looked".into())
    );
    let id = open(&r, asked(&["bob", "carol"], 2)).await;
    expect(
        &decide(&r, id, "user", true).await,
        "approved (approved by user: looked)",
        &[],
    );
    let id = open(&r, asked(&["bob"], 1)).await;
    expect(
        &decide(&r, id, "user", false).await,
        "denied (refused by user: looked)",
        &[],
    );
}

/// A vote of the members: refused only once too many voted against for it to
/// pass, and decided in the words of the whole vote.
#[tokio::test]
async fn a_vote_of_the_members_is_refused_only_once_it_cannot_pass() {
    let r = Rooms::new().await;
    let vote = |needed: usize| {
        let mut a = asked(&["bob", "carol", "dave"], needed);
        a.approval.votes = vec![Votes::Share { num: 2, den: 3 }];
        a
    };
    let id = open(&r, vote(2)).await;
    expect(&decide(&r, id, "bob", false).await, "pending", &[]);
    expect(
        &decide(&r, id, "carol", false).await,
        "denied (refused by a vote of the members (for: nobody; against: bob, carol): looked)",
        &[],
    );
    let id = open(&r, vote(2)).await;
    expect(&decide(&r, id, "bob", true).await, "pending", &[]);
    expect(&decide(&r, id, "carol", false).await, "pending", &[]);
    expect(
        &decide(&r, id, "dave", true).await,
        "approved (approved by a vote of the members (for: bob, dave; against: carol): looked)",
        &[],
    );
    let row = r
        .store
        .read(move |c| Ok(get(c, id)?.unwrap().view))
        .await
        .unwrap();
    assert_eq!(row.vote.as_deref(), Some("2/3"));
    // The lead's word decides a vote as any approval.
    let id = open(&r, vote(2)).await;
    expect(
        &decide(&r, id, "user", false).await,
        "denied (refused by user: looked)",
        &[],
    );
}

/// At the deadline nobody decided: timed out, then allowed or refused as its
/// `on_timeout` says; a deadline still ahead changes nothing.
#[tokio::test]
async fn a_deadline_passed_closes_it_as_on_timeout_says() {
    let r = Rooms::new().await;
    let now = r.clock.now_ms();
    for (on_timeout, want) in [
        (
            OnTimeout::Allow,
            Ended::Allowed("nobody decided in time, so it was allowed".into()),
        ),
        (
            OnTimeout::Deny,
            Ended::Refused("nobody decided in time, so it was refused".into()),
        ),
    ] {
        let mut a = asked(&["bob"], 1);
        a.approval.timeout = Duration::ZERO;
        a.approval.on_timeout = on_timeout;
        let id = open(&r, a).await;
        let expired = r
            .store
            .write(move |c| expire_tx(c, &get(c, id)?.unwrap(), now))
            .await
            .unwrap();
        assert!(expired);
        assert_eq!(ended_of(&r, id).await, want);
        let again = r
            .store
            .write(move |c| expire_tx(c, &get(c, id)?.unwrap(), now))
            .await
            .unwrap();
        assert!(!again, "closed once");
    }
    let id = open(&r, asked(&["bob"], 1)).await;
    let expired = r
        .store
        .write(move |c| expire_tx(c, &get(c, id)?.unwrap(), now))
        .await
        .unwrap();
    assert!(!expired, "an hour ahead");
}

/// A decision that comes after the deadline finds the approval timed out.
#[tokio::test]
async fn a_late_decision_finds_it_timed_out() {
    let r = Rooms::new().await;
    let mut a = asked(&["bob"], 1);
    a.approval.timeout = Duration::ZERO;
    let id = open(&r, a).await;
    expect(
        &decide(&r, id, "bob", true).await,
        "conflict: approval 1 is already timed_out",
        &["nobody decided in time"],
    );
}

/// A run that ended loses its pending approvals (never approved); others stay.
#[tokio::test]
async fn the_approvals_of_a_run_that_ended_are_lost() {
    let r = Rooms::new().await;
    let mine = open(&r, asked(&["bob"], 1)).await;
    let mut other = asked(&["bob"], 1);
    other.run_id = Some("run-2".into());
    let theirs = open(&r, other).await;
    let mut none = asked(&["bob"], 1);
    none.run_id = None;
    let joined = open(&r, none).await;
    let now = r.clock.now_ms();
    let lost = r
        .store
        .write(move |c| lose_run_tx(c, "run-1", now))
        .await
        .unwrap();
    assert_eq!(lost, vec![mine]);
    assert!(
        matches!(ended_of(&r, mine).await, Ended::Refused(why) if why.contains("ended before a decision"))
    );
    assert_eq!(ended_of(&r, theirs).await, Ended::Pending);
    // After a restart no run is running: every pending approval of a run is lost.
    assert_eq!(
        r.store
            .write(move |c| lose_orphans_tx(c, now))
            .await
            .unwrap(),
        1
    );
    assert!(matches!(ended_of(&r, theirs).await, Ended::Refused(_)));
    assert_eq!(
        ended_of(&r, joined).await,
        Ended::Pending,
        "no run asked it"
    );
}

/// The log holds each approval's request and its end, a denial worded "refused".
#[tokio::test]
async fn each_request_and_end_is_a_decision_in_the_log() {
    let r = Rooms::new().await;
    let a = open(&r, asked(&["bob"], 1)).await;
    let b = open(&r, asked(&["bob"], 1)).await;
    decide(&r, a, "bob", true).await;
    decide(&r, b, "bob", false).await;
    let outcomes = r
        .store
        .read(|c| {
            let mut st = c.prepare(
                "SELECT approval_id, outcome, decided_by FROM contract_decisions ORDER BY id",
            )?;
            let rows = st.query_map((), |r| {
                Ok((
                    r.get::<i64>(0)?,
                    r.get::<String>(1)?,
                    r.get::<Option<String>>(2)?,
                ))
            })?;
            Ok(rows.collect::<store::sql::Result<Vec<_>>>()?)
        })
        .await
        .unwrap();
    let bob = Some("bob".to_owned());
    assert_eq!(
        outcomes,
        vec![
            (a, "approval_requested".into(), None),
            (b, "approval_requested".into(), None),
            (a, "approved".into(), bob.clone()),
            (b, "refused".into(), bob),
        ]
    );
}

/// approval_list: pending first, then the closed ones, newest first; an agent sees
/// those it asked or may decide.
#[tokio::test]
async fn a_member_lists_what_it_asked_or_may_decide() {
    let r = Rooms::new().await;
    let first = open(&r, asked(&["bob"], 1)).await;
    let second = open(&r, asked(&["carol"], 1)).await;
    let third = open(&r, asked(&["bob"], 1)).await;
    decide(&r, first, "bob", true).await;
    let rooms = &r;
    let ids = |member: Option<&'static str>| async move {
        let rows = rooms
            .store
            .read(move |c| list(c, None, member))
            .await
            .unwrap();
        rows.iter().map(|a| a.id).collect::<Vec<_>>()
    };
    assert_eq!(ids(None).await, vec![third, second, first]);
    assert_eq!(ids(Some("Bob")).await, vec![third, first]);
    assert_eq!(ids(Some("carol")).await, vec![second]);
    assert_eq!(
        ids(Some("alice")).await,
        vec![third, second, first],
        "the asker"
    );
    assert_eq!(ids(Some("zed")).await, Vec::<i64>::new());
    let next = r.store.read(next_deadline).await.unwrap().map(|(id, _)| id);
    assert_eq!(next, Some(second), "the earliest pending deadline");
}

/// Whether a spend was granted (approved, or timed out with allow) and whether
/// one is still open, for the agent or (no agent) anyone in the instance.
#[tokio::test]
async fn a_spend_approval_grants_the_agent_that_asked() {
    let r = Rooms::new().await;
    let spend = |timeout: Duration, on_timeout: OnTimeout| {
        let mut a = asked(&["bob"], 1);
        a.event = "spend".into();
        a.approval.contracts = names(&["budget"]);
        a.approval.timeout = timeout;
        a.approval.on_timeout = on_timeout;
        a
    };
    let key = names(&["budget"]);
    let rooms = &r;
    let state = move |agent: Option<i64>| {
        let key = key.clone();
        rooms.store.read(move |c| spend_state(c, 1, agent, &key))
    };
    assert_eq!(state(Some(1)).await.unwrap(), (false, false));
    let id = open(&r, spend(HOUR, OnTimeout::Deny)).await;
    assert_eq!(state(Some(1)).await.unwrap(), (false, true));
    decide(&r, id, "bob", true).await;
    assert_eq!(state(Some(1)).await.unwrap(), (true, false));
    assert_eq!(
        state(Some(2)).await.unwrap(),
        (false, false),
        "another agent"
    );
    assert_eq!(
        state(None).await.unwrap(),
        (true, false),
        "anyone in the instance"
    );
    let r2 = Rooms::new().await;
    let now = r2.clock.now_ms();
    let id = open(&r2, spend(Duration::ZERO, OnTimeout::Allow)).await;
    r2.store
        .write(move |c| expire_tx(c, &get(c, id)?.unwrap(), now))
        .await
        .unwrap();
    let granted = r2
        .store
        .read(|c| spend_state(c, 1, Some(1), &names(&["budget"])))
        .await
        .unwrap();
    assert_eq!(granted, (true, false), "timed out with allow");
}
