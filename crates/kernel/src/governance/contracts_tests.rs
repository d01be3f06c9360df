//! The contracts room's decisions: which contracts are in force in an instance
//! (the lead's, by workflow; an organisation's; the instance's own), the outcome
//! word a verdict is logged as, what contract_set and its removal accept, what
//! contract_list shows, and what a rate lets through.

use super::contracts::{Decision, in_force, put_tx};
use super::rates::count_tx;
use crate::events::Event;
use crate::testing::{Rooms, T0, expect, names, said};
use domain::contracts::{self, Approval, Event as On, OnTimeout, Verdict};
use domain::names::WorkflowRef;
use serde_json::{Value, json};
use std::time::Duration;

/// A deny contract named `name` on messages, with `extra` fields (workflow, org).
fn deny(name: &str, extra: Value) -> Value {
    let mut v = json!({"name": name, "when": {"event": "message"}, "then": {"action": "deny"}});
    for (k, x) in extra.as_object().unwrap() {
        v[k] = x.clone();
    }
    v
}

async fn set(r: &Rooms, spec: Value) -> String {
    let c = contracts::parse(&spec).unwrap();
    said(&r.contracts.set(c, spec).await)
}

/// The names in force in instance `wf` (which must exist), in order.
async fn in_force_in(r: &Rooms, wf: &str) -> Vec<String> {
    let wf = WorkflowRef::parse(wf).unwrap();
    let id = r.registry.workflow_id(&wf).await.unwrap();
    let all = r.contracts.all();
    in_force(&all, id, &wf).map(|c| c.name.clone()).collect()
}

#[tokio::test]
async fn the_lead_s_contracts_apply_everywhere_or_where_their_workflow_says() {
    let r = Rooms::new().await;
    r.agent_in("@review:pr-1", "a", "mock").await;
    r.agent_in("@review:pr-2", "a", "mock").await;
    r.agent_in("@build:main", "a", "mock").await;
    set(&r, deny("everywhere", json!({}))).await;
    set(&r, deny("reviews", json!({"workflow": "review"}))).await;
    set(&r, deny("pr-1", json!({"workflow": "@review:pr-1"}))).await;
    assert_eq!(
        in_force_in(&r, "@review:pr-1").await,
        names(&["everywhere", "reviews", "pr-1"])
    );
    assert_eq!(
        in_force_in(&r, "@review:pr-2").await,
        names(&["everywhere", "reviews"])
    );
    assert_eq!(in_force_in(&r, "@build").await, names(&["everywhere"]));
}

/// In force in an instance: the lead's, then its organisation's, then its own;
/// an instance's own contracts apply nowhere else.
#[tokio::test]
async fn an_instance_reads_the_lead_s_then_its_organisation_s_then_its_own() {
    let r = Rooms::new().await;
    r.registry.org_put("team", None, None).await.unwrap();
    let own = r.agent_in("@review:pr-1", "a", "mock").await;
    r.agent_in("@review:pr-2", "a", "mock").await;
    r.execute(
        "UPDATE workflows SET org = ?1 WHERE name = 'review' AND tag = 'pr-1'",
        "team",
    )
    .await;
    let wid = r.identity("a@review:pr-1").await.workflow_id;
    assert!(own > 0);
    let spec = deny("own", json!({}));
    r.store
        .write(move |c| put_tx(c, Some(wid), "yaml", &spec, "own", crate::testing::T0))
        .await
        .unwrap();
    set(&r, deny("of-team", json!({"org": "Team"}))).await;
    set(&r, deny("lead", json!({}))).await;
    assert_eq!(
        in_force_in(&r, "@review:pr-1").await,
        names(&["lead", "of-team", "own"])
    );
    assert_eq!(in_force_in(&r, "@review:pr-2").await, names(&["lead"]));
}

/// A verdict as the decision log words it: one outcome, the contracts behind it,
/// and why; a deny wins over everything else the verdict holds.
#[test]
fn a_verdict_is_logged_with_one_outcome_word() {
    let approval = Approval {
        contracts: names(&["edits", "edits2"]),
        approvers: names(&["user"]),
        count: 1,
        votes: Vec::new(),
        timeout: Duration::from_secs(60),
        on_timeout: OnTimeout::Deny,
    };
    let notify = vec![("tell".to_owned(), names(&["ops"]))];
    let cases: Vec<(Verdict, &str, Vec<&str>, Option<&str>)> = vec![
        (
            Verdict {
                deny: Some(("no".into(), "why".into(), false)),
                notify: notify.clone(),
                ..Default::default()
            },
            "denied",
            vec!["no"],
            Some("why"),
        ),
        (
            Verdict {
                deny: Some(("stop".into(), "halt".into(), true)),
                ..Default::default()
            },
            "paused",
            vec!["stop"],
            Some("halt"),
        ),
        (
            Verdict {
                allowed_by: Some("notes".into()),
                notify: notify.clone(),
                ..Default::default()
            },
            "allowed",
            vec!["notes"],
            None,
        ),
        (
            Verdict {
                approval: Some(approval),
                ..Default::default()
            },
            "approval_requested",
            vec!["edits", "edits2"],
            None,
        ),
        (
            Verdict {
                routes: vec![("chain".into(), "rev".into())],
                ..Default::default()
            },
            "routed",
            vec!["chain"],
            None,
        ),
        (
            Verdict {
                pause: vec![("cap".into(), "over".into()), ("cap2".into(), "x".into())],
                ..Default::default()
            },
            "paused",
            vec!["cap", "cap2"],
            Some("over"),
        ),
        (
            Verdict {
                notify,
                ..Default::default()
            },
            "notified",
            vec!["tell"],
            None,
        ),
    ];
    for (v, outcome, contracts, reason) in cases {
        let d = Decision::of(7, "alice", "message", "hello", &v);
        assert_eq!(
            (d.outcome.as_str(), d.reason.as_deref()),
            (outcome, reason),
            "{v:?}"
        );
        assert_eq!(d.contracts, names(&contracts), "{v:?}");
        assert_eq!(
            (d.workflow_id, d.agent.as_str(), d.event.as_str()),
            (7, "alice", "message")
        );
    }
    let long = "é".repeat(600);
    let d = Decision::new(1, "a", "message", &long, Vec::new(), "notified");
    assert_eq!(
        d.detail.chars().count(),
        500,
        "the detail is kept in part, by characters"
    );
}

#[tokio::test]
async fn contract_set_replaces_by_name_and_refuses_step_contracts() {
    let r = Rooms::new().await;
    let mut heard = r.events.subscribe();
    expect(&set(&r, deny("x", json!({}))).await, "ok", &[]);
    assert!(
        matches!(heard.try_recv(), Ok(Event::ContractsChanged)),
        "the other kernels are told"
    );
    let allow = json!({"name": "x", "when": {"event": "message"}, "then": {"action": "allow"}});
    expect(&set(&r, allow).await, "ok", &[]);
    let all = r.contracts.all();
    assert_eq!(all.len(), 1, "replaced, not added");
    assert_eq!(all[0].contract.then.action(), "allow");
    let step = contracts::Contract {
        when: contracts::When::Step { on: Vec::new() },
        ..all[0].contract.clone()
    };
    let got = said(&r.contracts.set(step, json!({})).await);
    expect(
        &got,
        "invalid: contract.when.event: a step contract is made from a workflow's `steps:`",
        &[],
    );
}

#[tokio::test]
async fn removing_an_unknown_contract_lists_the_lead_s() {
    let r = Rooms::new().await;
    let got = said(&r.contracts.delete("nope").await);
    expect(
        &got,
        "not found: no contract named \"nope\"",
        &["contracts: none"],
    );
    set(&r, deny("a", json!({}))).await;
    set(&r, deny("b", json!({}))).await;
    expect(
        &said(&r.contracts.delete("nope").await),
        "not found",
        &["contracts: a, b"],
    );
    expect(&said(&r.contracts.delete("a").await), "ok", &[]);
    let left: Vec<String> = r
        .contracts
        .all()
        .iter()
        .map(|s| s.contract.name.clone())
        .collect();
    assert_eq!(left, names(&["b"]));
}

/// Removing an organisation removes the lead's contracts bound to it, and only those.
#[tokio::test]
async fn an_organisation_s_contracts_go_with_it() {
    let r = Rooms::new().await;
    set(&r, deny("t1", json!({"org": "team"}))).await;
    set(&r, deny("t2", json!({"org": "team"}))).await;
    set(&r, deny("o", json!({"org": "other"}))).await;
    set(&r, deny("all", json!({}))).await;
    assert_eq!(r.contracts.delete_org("team").await.unwrap(), 2);
    let left: Vec<String> = r
        .contracts
        .all()
        .iter()
        .map(|s| s.contract.name.clone())
        .collect();
    assert_eq!(left, names(&["o", "all"]));
}

/// contract_list: the contracts in force in the instance asked (or bound to the
/// organisation asked), the built-in guards in words, the decisions newest first.
#[tokio::test]
async fn contract_list_shows_what_is_in_force_the_guards_and_the_decisions() {
    let r = Rooms::new().await;
    r.agent_in("@review:pr-1", "a", "mock").await;
    set(&r, deny("everywhere", json!({}))).await;
    set(&r, deny("builds", json!({"workflow": "build"}))).await;
    set(&r, deny("of-team", json!({"org": "team"}))).await;
    let wf = WorkflowRef::parse("@review:pr-1").unwrap();
    let wid = r.registry.workflow_id(&wf).await.unwrap();
    for detail in ["first", "second"] {
        let d = Decision::new(
            wid,
            "a",
            "message",
            detail,
            names(&["everywhere"]),
            "denied",
        );
        let now = r.clock.now_ms();
        r.store
            .write(move |c| super::contracts::record_tx(c, &d, now))
            .await
            .unwrap();
    }
    let listed = r.contracts.list(Some((wid, wf)), None).await.unwrap();
    let shown: Vec<&str> = listed.contracts.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(shown, ["everywhere"]);
    let guards: Vec<&str> = listed.built_in.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(
        guards,
        ["runs-per-hour", "hops"],
        "no token or cost guard without a budget"
    );
    assert!(
        listed.built_in[0].says.ends_with("(in @review:pr-1)."),
        "{}",
        listed.built_in[0].says
    );
    let details: Vec<(&str, &str)> = listed
        .decisions
        .iter()
        .map(|d| (d.detail.as_str(), d.workflow.as_str()))
        .collect();
    assert_eq!(
        details,
        [("second", "@review:pr-1"), ("first", "@review:pr-1")]
    );
    let of_team = r.contracts.list(None, Some("team".into())).await.unwrap();
    let shown: Vec<&str> = of_team.contracts.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(shown, ["of-team"]);
    let every = r.contracts.list(None, None).await.unwrap();
    assert_eq!(every.contracts.len(), 3);
}

/// A rate contract acts only past its rate: the events it lets through are
/// counted per agent within the window, and an event past it is not counted.
#[tokio::test]
async fn a_rate_lets_through_so_many_events_per_agent_within_its_window() {
    let r = Rooms::new().await;
    let spec = json!({"name": "chatty", "when": {"event": "message", "more_than": 2, "within": "1m"},
                      "then": {"action": "deny"}});
    let k = contracts::parse(&spec).unwrap();
    let rooms = &r;
    let check = |agent: &'static str, at: i64, past: bool| {
        let k = k.clone();
        async move {
            let got = rooms
                .store
                .write(move |c| {
                    let to = names(&["bob"]);
                    let e = On::Message {
                        from: agent,
                        to: &to,
                        text: "hi",
                        urgent: false,
                    };
                    count_tx(c, 1, agent, [&k], &e, at)
                })
                .await
                .unwrap();
            let want: Vec<String> = if past { names(&["chatty"]) } else { Vec::new() };
            assert_eq!(got, want, "{agent} at +{}ms", at - T0);
        }
    };
    check("alice", T0, false).await;
    check("alice", T0 + 1, false).await;
    check("alice", T0 + 2, true).await;
    check("alice", T0 + 3, true).await;
    check("carol", T0 + 3, false).await;
    // The first two are out of the window a minute later; the refused ones never counted.
    check("alice", T0 + 60_001, false).await;
    check("alice", T0 + 60_002, false).await;
    check("alice", T0 + 60_003, true).await;
}

/// A contract without a rate, or one whose filters the event does not meet, is
/// never counted.
#[tokio::test]
async fn only_rate_contracts_that_match_are_counted() {
    let r = Rooms::new().await;
    let plain = contracts::parse(&deny("plain", json!({}))).unwrap();
    let other = contracts::parse(
        &json!({"name": "bobs", "when": {"event": "message", "from": "bob",
        "more_than": 0, "within": "1h"}, "then": {"action": "deny"}}),
    )
    .unwrap();
    let past = r
        .store
        .write(move |c| {
            let to = names(&["carol"]);
            let e = On::Message {
                from: "alice",
                to: &to,
                text: "hi",
                urgent: false,
            };
            count_tx(c, 1, "alice", [&plain, &other], &e, T0)
        })
        .await
        .unwrap();
    assert!(past.is_empty());
    assert_eq!(
        r.count(
            "SELECT count(*) FROM contract_hits WHERE agent = ?1",
            "alice"
        )
        .await,
        0
    );
}

/// An instance's budget adds the token and cost guards, in its numbers.
#[tokio::test]
async fn a_budget_adds_its_guards_in_its_own_numbers() {
    let r = Rooms::new().await;
    let budget =
        r#"{"max_runs_per_hour": 7, "max_hops": 3, "max_tokens": 1000, "max_cost_usd": 2.5}"#;
    r.execute(
        "UPDATE workflows SET budget = ?1 WHERE name = 'global'",
        budget,
    )
    .await;
    let listed = r.contracts.list(None, None).await.unwrap();
    let says: Vec<(&str, &str)> = listed
        .built_in
        .iter()
        .map(|c| (c.name.as_str(), c.says.as_str()))
        .collect();
    assert_eq!(
        says,
        [
            (
                "runs-per-hour",
                "When an agent has started 7 runs in the last hour, pause it until it is resumed (in @global:main)."
            ),
            (
                "hops",
                "When agents have sent each other 3 messages without one from you (the lead), pause the one about to run until it is resumed (in @global:main)."
            ),
            (
                "tokens",
                "When an agent has used more than 1000 tokens, pause it until it is resumed (in @global:main)."
            ),
            (
                "cost",
                "When an agent has spent more than $2.5, pause it until it is resumed (in @global:main)."
            ),
        ]
    );
}
