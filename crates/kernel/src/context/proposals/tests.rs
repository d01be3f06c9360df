//! Proposals in the room: which options and terms are accepted, who votes (the
//! instance's members, a revote replacing), when a vote resolves one, who may
//! cancel, expiry on the deadline (with the plurality winner), how a proposal is
//! named, and contracts drafted by agents that only the lead's approve installs.

use super::{NewProposal, OptionArg, options_for};
use crate::Scope;
use crate::testing::{Rooms, expect, names, said};
use serde_json::json;

fn labels(v: &[&str]) -> Vec<OptionArg> {
    v.iter().map(|l| OptionArg::Label((*l).into())).collect()
}

/// The option ids `kind` with `given` gets among agents `agents`, or the refusal.
#[track_caller]
fn check_options(kind: &str, given: Vec<OptionArg>, agents: &[&str], want: &str) {
    let got = match options_for(kind, &given, &names(agents)) {
        Ok(o) => o
            .iter()
            .map(|o| format!("{}={}", o.id, o.label))
            .collect::<Vec<_>>()
            .join(" "),
        Err(e) => said::<()>(&Err(e)),
    };
    assert!(
        got.starts_with(want),
        "{kind} {given:?}: got {got:?}, want {want:?}"
    );
}

#[test]
fn options_default_by_type_and_must_be_two_or_more_distinct_ones() {
    check_options("approval", vec![], &[], "approve=approve reject=reject");
    check_options("election", vec![], &["a", "b"], "a=a b=b");
    check_options(
        "election",
        vec![],
        &["a"],
        "invalid: a election needs options",
    );
    check_options(
        "decision",
        vec![],
        &["a", "b"],
        "invalid: a decision needs options",
    );
    check_options(
        "decision",
        labels(&[" Postgres ", "SQLite"]),
        &[],
        "Postgres=Postgres SQLite=SQLite",
    );
    let full = vec![
        OptionArg::Full {
            id: "pg".into(),
            label: "Postgres".into(),
        },
        OptionArg::Full {
            id: "lite".into(),
            label: " ".into(),
        },
    ];
    check_options("decision", full, &[], "pg=Postgres lite=lite");
    check_options(
        "decision",
        labels(&["a", "A"]),
        &[],
        "invalid: option \"A\" is given twice",
    );
    check_options(
        "decision",
        labels(&["a", "  "]),
        &[],
        "invalid: an option is empty",
    );
    check_options(
        "decision",
        labels(&["only"]),
        &[],
        "invalid: a proposal needs at least two options",
    );
    let many: Vec<String> = (0..21).map(|i| format!("o{i}")).collect();
    let many: Vec<&str> = many.iter().map(String::as_str).collect();
    check_options(
        "decision",
        labels(&many),
        &[],
        "invalid: 21 options given; at most 20",
    );
    check_options(
        "decision",
        labels(&["a", &"x".repeat(65)]),
        &[],
        "invalid: an option id is 65 characters; at most 64",
    );
}

fn proposal(kind: &str, options: &[&str]) -> NewProposal {
    NewProposal {
        kind: kind.into(),
        title: "Which database?".into(),
        description: None,
        options: labels(options),
        resolution: None,
        quorum: None,
        tie_breaker: None,
        binding: None,
        timeout: None,
        contract: None,
    }
}

async fn rooms() -> Rooms {
    let r = Rooms::new().await;
    r.agents(&["alice", "bob", "carol"]).await;
    r
}

async fn create(r: &Rooms, who: &str, p: NewProposal) -> String {
    let scope = r.scope(who).await;
    said(&r.context.proposal_create(&scope, p).await)
}

#[tokio::test]
async fn a_proposal_s_terms_are_checked_field_by_field() {
    let r = rooms().await;
    let with = |f: &dyn Fn(&mut NewProposal)| {
        let mut p = proposal("decision", &["pg", "lite"]);
        f(&mut p);
        p
    };
    for (p, want) in [
        (
            proposal("poll", &["a", "b"]),
            "invalid: unknown proposal type \"poll\": use one of election, decision, approval, assignment",
        ),
        (with(&|p| p.title = "  ".into()), "invalid: title is empty"),
        (
            with(&|p| p.title = "t".repeat(201)),
            "invalid: title is 201 characters; at most 200",
        ),
        (
            with(&|p| p.description = Some("d".repeat(2001))),
            "invalid: description is 2001 characters",
        ),
        (
            with(&|p| p.resolution = Some("loudest".into())),
            "invalid: unknown resolution \"loudest\": use one of plurality, majority, unanimous",
        ),
        (
            with(&|p| p.tie_breaker = Some("coin".into())),
            "invalid: unknown tie_breaker \"coin\"",
        ),
        (
            with(&|p| p.timeout = Some("0s".into())),
            "invalid: timeout must be between 1s and 7d",
        ),
        (
            with(&|p| p.timeout = Some("8d".into())),
            "invalid: timeout must be between 1s and 7d",
        ),
        (
            with(&|p| p.quorum = Some(0)),
            "invalid: quorum 0 is impossible: 4 member(s) can vote here",
        ),
        (
            with(&|p| p.quorum = Some(5)),
            "invalid: quorum 5 is impossible",
        ),
        (with(&|p| p.quorum = Some(4)), "ok"),
        (with(&|p| p.resolution = Some(" Majority ".into())), "ok"),
    ] {
        expect(&create(&r, "alice", p).await, want, &[]);
    }
}

/// The default quorum is every agent; the announcement asks the others by name.
#[tokio::test]
async fn a_new_proposal_asks_every_other_agent_and_waits_for_all() {
    let r = rooms().await;
    let alice = r.scope("alice").await;
    let made = r
        .context
        .proposal_create(&alice, proposal("decision", &["pg", "lite"]))
        .await
        .unwrap();
    let p = made.proposal;
    assert_eq!(
        (p.id.as_str(), p.quorum, p.status.as_str(), p.binding),
        ("prop-1", 3, "open", true)
    );
    assert_eq!(p.waiting_for, names(&["alice", "bob", "carol"]));
    for (who, want) in [("alice", 0), ("bob", 1), ("carol", 1)] {
        let s = r.scope(who).await;
        assert_eq!(
            r.messaging.inbox_peek(&s, 10).await.unwrap().messages.len(),
            want,
            "{who}"
        );
    }
    let again = r
        .context
        .proposal_create(&alice, proposal("approval", &[]))
        .await
        .unwrap();
    assert_eq!(again.proposal.id, "prop-2");
}

async fn vote(r: &Rooms, who: &str, choice: &str) -> String {
    let scope = r.scope(who).await;
    match r
        .context
        .proposal_vote(&scope, "latest", choice, None)
        .await
    {
        Ok(v) => format!(
            "{} {}",
            v.proposal.status,
            v.winner.map(|w| w.id).unwrap_or_default()
        ),
        Err(e) => said::<()>(&Err(e)),
    }
}

#[tokio::test]
async fn members_vote_by_id_or_label_and_a_revote_replaces() {
    let r = rooms().await;
    let mut p = proposal("decision", &[]);
    p.options = vec![
        OptionArg::Full {
            id: "pg".into(),
            label: "Postgres".into(),
        },
        OptionArg::Label("lite".into()),
    ];
    p.quorum = Some(2);
    create(&r, "alice", p).await;
    expect(
        &vote(&r, "bob", "mysql").await,
        "invalid: \"mysql\" is not an option of prop-1; choose one of: pg, lite",
        &[],
    );
    expect(&vote(&r, "bob", "POSTGRES").await, "open ", &[]);
    expect(&vote(&r, "bob", "lite").await, "open ", &[]);
    let outsider = Scope {
        me: "zed".into(),
        lead: false,
        ..r.scope("bob").await
    };
    let got = said(
        &r.context
            .proposal_vote(&outsider, "prop-1", "pg", None)
            .await,
    );
    expect(
        &got,
        "forbidden: only members of @global:main vote; members: alice, bob, carol, user",
        &[],
    );
    expect(&vote(&r, "user", "LITE").await, "resolved lite", &[]);
    expect(
        &vote(&r, "carol", "pg").await,
        "conflict: prop-1 is resolved (lite); it takes no more votes",
        &[],
    );
}

/// A plurality tie the creator breaks stays open until the creator's vote names
/// one of the tied options.
#[tokio::test]
async fn a_tie_waits_for_the_creator_when_the_creator_decides() {
    let r = rooms().await;
    let mut p = proposal("decision", &["a", "b"]);
    p.quorum = Some(2);
    p.tie_breaker = Some("creator-decides".into());
    create(&r, "alice", p).await;
    vote(&r, "bob", "a").await;
    expect(&vote(&r, "carol", "b").await, "open ", &[]);
    let alice = r.scope("alice").await;
    let status = r
        .context
        .proposal_status(&alice, Some("prop-1"))
        .await
        .unwrap();
    assert_eq!(
        status.proposals[0].note.as_deref(),
        Some("tie between a and b: alice decides by voting for one of them")
    );
    expect(&vote(&r, "alice", "b").await, "resolved b", &[]);
}

#[tokio::test]
async fn only_the_creator_or_the_lead_cancels_and_only_while_open() {
    let r = rooms().await;
    create(&r, "alice", proposal("decision", &["a", "b"])).await;
    let (alice, bob) = (r.scope("alice").await, r.scope("bob").await);
    let got = said(&r.context.proposal_cancel(&bob, "prop-1").await);
    expect(
        &got,
        "forbidden: only alice (who created prop-1) or the lead can cancel it",
        &[],
    );
    let done = r.context.proposal_cancel(&alice, "1").await.unwrap();
    assert_eq!(
        (
            done.proposal.status.as_str(),
            done.proposal.closed_by.as_deref()
        ),
        ("cancelled", Some("alice"))
    );
    let got = said(&r.context.proposal_cancel(&alice, "prop-1").await);
    expect(&got, "conflict: prop-1 is already cancelled", &[]);
    create(&r, "bob", proposal("decision", &["a", "b"])).await;
    let lead = r.scope("user").await;
    expect(
        &said(&r.context.proposal_cancel(&lead, "latest").await),
        "ok",
        &[],
    );
}

#[tokio::test]
async fn a_proposal_is_named_prop_n_n_or_latest() {
    let r = rooms().await;
    let alice = r.scope("alice").await;
    let status = |id: &'static str| r.context.proposal_status(&alice, Some(id));
    expect(
        &said(&status("latest").await),
        "not found: there are no proposals yet",
        &[],
    );
    create(&r, "alice", proposal("decision", &["a", "b"])).await;
    create(&r, "alice", proposal("decision", &["a", "b"])).await;
    r.context.proposal_cancel(&alice, "prop-2").await.unwrap();
    assert_eq!(
        status("latest").await.unwrap().proposals[0].id,
        "prop-1",
        "the newest open one first"
    );
    assert_eq!(status(" 2 ").await.unwrap().proposals[0].id, "prop-2");
    expect(
        &said(&status("prop-9").await),
        "not found: no proposal prop-9 here",
        &[],
    );
    expect(
        &said(&status("p9").await),
        "invalid: unknown proposal id \"p9\"",
        &[],
    );
    let all = r.context.proposal_status(&alice, None).await.unwrap();
    let ids: Vec<&str> = all.proposals.iter().map(|p| p.id.as_str()).collect();
    assert_eq!(ids, ["prop-2", "prop-1"]);
}

/// At its deadline a proposal closes with the plurality winner of the votes cast,
/// whatever its rule; until the timer runs, a vote is refused and a status read
/// closes it first.
#[tokio::test]
async fn at_its_deadline_a_proposal_expires_with_the_plurality_winner() {
    let r = rooms().await;
    let mut p = proposal("decision", &["a", "b"]);
    p.resolution = Some("unanimous".into());
    create(&r, "alice", p).await;
    vote(&r, "bob", "b").await;
    create(&r, "alice", proposal("decision", &["x", "y"])).await;
    r.execute(
        "UPDATE proposals SET expires_at = 1 WHERE num = 1 AND title <> ?1",
        "",
    )
    .await;
    let got = said(
        &r.context
            .proposal_vote(&r.scope("carol").await, "prop-1", "a", None)
            .await,
    );
    expect(
        &got,
        "conflict: prop-1 passed its deadline",
        &["being closed with the votes cast by then"],
    );
    let alice = r.scope("alice").await;
    let p1 = &r
        .context
        .proposal_status(&alice, Some("prop-1"))
        .await
        .unwrap()
        .proposals[0];
    assert_eq!(
        (
            p1.status.as_str(),
            p1.winner.as_ref().map(|w| w.id.as_str())
        ),
        ("expired", Some("b"))
    );
    let next = r.context.expire_due().await.unwrap();
    assert!(
        next.is_some_and(|at| at > r.clock.now_ms()),
        "prop-2's deadline is next"
    );
    let told = r
        .messaging
        .inbox_peek(&r.scope("bob").await, 10)
        .await
        .unwrap();
    assert!(told.messages.iter().any(|m| m.content.contains(
        "prop-1 \"Which database?\" expired at its deadline with 1 of 3 votes: b by plurality."
    )));
}

fn drafted(extra: serde_json::Value) -> NewProposal {
    let mut contract = json!({"name": "no-force-push", "when": {"event": "tool_request", "tool": "shell", "match": "git push -f*"},
                              "then": {"action": "deny"}});
    for (k, v) in extra.as_object().unwrap() {
        contract[k] = v.clone();
    }
    NewProposal {
        contract: Some(contract),
        ..proposal("approval", &[])
    }
}

#[tokio::test]
async fn a_drafted_contract_is_an_approval_bound_to_this_instance() {
    let r = rooms().await;
    let with_kind = NewProposal {
        kind: "decision".into(),
        options: labels(&["a", "b"]),
        ..drafted(json!({}))
    };
    expect(
        &create(&r, "alice", with_kind).await,
        "invalid: contract goes with type approval",
        &[],
    );
    let advisory = NewProposal {
        binding: Some(false),
        ..drafted(json!({}))
    };
    expect(
        &create(&r, "alice", advisory).await,
        "invalid: a contract proposal is binding",
        &[],
    );
    expect(
        &create(&r, "alice", drafted(json!({"workflow": "x"}))).await,
        "invalid: contract.workflow: a drafted contract applies to this workflow instance",
        &[],
    );
    expect(
        &create(&r, "alice", drafted(json!({"when": {"event": "nope"}}))).await,
        "invalid: contract.when.event",
        &[],
    );
}

/// The agents' votes are advice; the lead's approve installs the contract in
/// this instance, the lead's reject drops it.
#[tokio::test]
async fn only_the_lead_s_approve_installs_a_drafted_contract() {
    let r = rooms().await;
    create(&r, "alice", drafted(json!({}))).await;
    vote(&r, "bob", "approve").await;
    vote(&r, "carol", "approve").await;
    assert!(
        r.contracts.all().is_empty(),
        "agents cannot install what binds them"
    );
    expect(&vote(&r, "user", "approve").await, "resolved approve", &[]);
    let all = r.contracts.all();
    let installed: Vec<(&str, &str, Option<i64>)> = all
        .iter()
        .map(|s| (s.contract.name.as_str(), s.source.as_str(), s.owner))
        .collect();
    assert_eq!(
        installed,
        [(
            "no-force-push",
            "proposal",
            Some(r.scope("alice").await.workflow_id)
        )]
    );
    create(&r, "alice", drafted(json!({"name": "other"}))).await;
    expect(&vote(&r, "user", "reject").await, "resolved reject", &[]);
    assert_eq!(
        r.contracts.all().len(),
        1,
        "a rejected draft installs nothing"
    );
}
