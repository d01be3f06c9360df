//! Contracts on messages, from workflow files and drafted by agents, between
//! joined members (no model needed): routing through a human reviewer and refusing
//! by text; a workflow's own `contracts:` and one the lead adds while it runs; a
//! draft only the lead's approve puts in force; the parser's errors; the README's
//! worked examples.

use crate::common;
use agent_worker::kernel::timing::{Clock, Timing};
use common::*;
use serde_json::{Value, json};
use std::path::Path;
use std::time::Duration;

async fn contract(lead: &Client, spec: Value) -> Value {
    call(lead, "contract_set", spec).await.ok()
}

#[tokio::test]
async fn messages_to_a_member_are_routed_through_a_reviewer_or_refused() {
    let dir = tempfile::tempdir().unwrap();
    let s = InProcess::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    for (name, backend) in [
        ("alice", "external"),
        ("deployer", "human"),
        ("reviewer", "human"),
    ] {
        call(
            &lead,
            "agent_new",
            json!({"name": name, "backend": backend}),
        )
        .await
        .ok();
    }
    contract(
        &lead,
        json!({"name": "via-review", "when": {"event": "message", "to": "deployer"},
               "then": {"action": "route", "to": "reviewer"}}),
    )
    .await;
    contract(
        &lead,
        json!({"name": "no-secrets", "when": {"event": "message", "text": "(?i)password"},
               "then": {"action": "deny", "reason": "no secrets in the channel"}}),
    )
    .await;
    let alice = join(&s, &lead, "alice", Proto::Legacy).await;
    let deployer = join(&s, &lead, "deployer", Proto::Legacy).await;
    let reviewer = join(&s, &lead, "reviewer", Proto::Legacy).await;

    let sent = call(
        &alice,
        "channel_send",
        json!({"message": "@deployer ship v2 now"}),
    )
    .await
    .ok();
    assert!(sent["note"].as_str().unwrap().contains("routed"), "{sent}");
    let d = call(&deployer, "my_inbox", json!({})).await.ok();
    assert_eq!(d["messages"].as_array().unwrap().len(), 0, "{d}");
    let r = call(&reviewer, "my_inbox", json!({})).await.ok();
    assert!(r.to_string().contains("ship v2 now"), "{r}");
    // The reviewer forwards it: its own message is not routed back.
    call(
        &reviewer,
        "channel_send",
        json!({"message": "@deployer ship v2 now (reviewed)"}),
    )
    .await
    .ok();
    let d = call(&deployer, "my_inbox", json!({})).await.ok();
    assert!(d.to_string().contains("(reviewed)"), "{d}");

    let e = call(
        &alice,
        "channel_send",
        json!({"message": "@reviewer the password is hunter2"}),
    )
    .await
    .err();
    assert!(e.contains("no secrets in the channel"), "{e}");
    let ch = call(&lead, "channel_read", json!({"limit": 50})).await.ok();
    assert!(
        !ch.to_string().contains("hunter2"),
        "a refused message is not written: {ch}"
    );
    let list = call(&lead, "contract_list", json!({})).await.ok();
    let outcomes: Vec<&str> = list["decisions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["outcome"].as_str().unwrap())
        .collect();
    assert!(
        outcomes.contains(&"denied") && outcomes.contains(&"routed"),
        "{list}"
    );
    s.stop().await;
}

/// The seed's rate, "at most 10 messages per hour": a mock agent that answers
/// eleven messages sends ten; its eleventh is refused (as is every retry of it) and
/// the refusal is in the decision log.
#[tokio::test]
async fn a_rate_stops_the_eleventh_message_of_a_mock_agent() {
    let dir = tempfile::tempdir().unwrap();
    let timing = Timing {
        retry_delays: vec![Duration::from_millis(50)],
        ..Timing::default()
    };
    let s = InProcess::start_on(dir.path(), Clock::system(), timing).await;
    let lead = s.lead(Proto::Legacy).await;
    let set = contract(
        &lead,
        json!({"name": "ten-an-hour",
               "when": {"event": "message", "from": "coder", "more_than": 10, "within": "1h"},
               "then": {"action": "deny"}}),
    )
    .await;
    assert!(
        set.to_string()
            .contains("When @coder sends a message more than 10 times within 1h, refuse it"),
        "{set}"
    );
    new_mock(&lead, "coder", json!([{"send": "@user pong {message}"}])).await;
    for i in 1..=11 {
        let ping = format!("@coder ping {i}");
        call(&lead, "channel_send", json!({"message": ping}))
            .await
            .ok();
    }
    let d = decision_by(&lead, "ten-an-hour", "denied", 30).await;
    assert_eq!(d["agent"], "coder", "{d}");
    let i = wait_info(&lead, "coder", 30, |i| {
        i.get("running").is_none() && i["runs"][0]["status"] == "failed"
    })
    .await;
    assert!(
        i.to_string().contains("ten-an-hour"),
        "the run says why: {i}"
    );
    let ch = call(&lead, "channel_read", json!({"limit": 100}))
        .await
        .ok();
    let mut pongs: Vec<String> = ch["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["from"] == "coder")
        .map(|m| m["content"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(pongs.len(), 10, "{pongs:#?}");
    pongs.sort();
    pongs.dedup();
    assert_eq!(pongs.len(), 10, "each sent once: {pongs:#?}");
    s.stop().await;
}

/// A workflow's own rated contract named like one of the lead's shares its count
/// (an event counts once per name), and sends of one agent at once never pass a
/// rate together.
#[tokio::test]
async fn rates_count_once_per_name_and_hold_against_concurrent_sends() {
    let dir = tempfile::tempdir().unwrap();
    let s = InProcess::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    for (name, who, n) in [("cap", "alice", 4), ("two", "bob", 2)] {
        contract(
            &lead,
            json!({"name": name, "when": {"event": "message", "from": who, "more_than": n, "within": "1h"},
                   "then": {"action": "deny"}}),
        )
        .await;
    }
    let yaml = "name: guarded\nagents:\n  alice: { backend: external }\n  bob: { backend: external }\n\
                contracts:\n  - name: cap\n    when: { event: message, from: alice, more_than: 4, within: 1h }\n\
                \x20   then: { action: deny }\n";
    call(
        &lead,
        "workflow_run",
        json!({"yaml": yaml, "wait_seconds": 0}),
    )
    .await
    .ok();
    let alice = join(&s, &lead, "alice@guarded", Proto::Legacy).await;
    for i in 1..=4 {
        let hi = format!("@bob hi {i}");
        call(&alice, "channel_send", json!({"message": hi}))
            .await
            .ok();
    }
    let e = call(&alice, "channel_send", json!({"message": "@bob hi 5"}))
        .await
        .err();
    assert!(e.contains("\"cap\""), "the fifth is past both: {e}");
    let bob = join(&s, &lead, "bob@guarded", Proto::Legacy).await;
    let bob = &bob;
    let sends = (1..=6).map(|i| async move {
        let yo = format!("@alice yo {i}");
        matches!(
            call(bob, "channel_send", json!({"message": yo})).await,
            Out::Ok(_)
        )
    });
    let passed = futures::future::join_all(sends).await;
    assert_eq!(passed.iter().filter(|ok| **ok).count(), 2, "{passed:?}");
    s.stop().await;
}

#[tokio::test]
async fn contract_errors_name_the_field_and_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let s = InProcess::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    for (spec, want) in [
        (
            json!({"name": "x", "when": {"event": "tool_request", "tool": "exec"}, "then": {"action": "deny"}}),
            "contract.when.tool",
        ),
        (
            json!({"name": "x", "when": {"event": "message"}, "then": {"action": "require_approval"}}),
            "route",
        ),
        (
            json!({"name": "x", "when": {"event": "spend"}, "then": {"action": "pause"}}),
            "usd",
        ),
        (
            json!({"name": "x", "workflow": "@nope:never", "when": {"event": "run_end"}, "then": {"action": "notify"}}),
            "nope",
        ),
    ] {
        let e = call(&lead, "contract_set", spec.clone()).await.err();
        assert!(e.contains(want), "{spec}: {e}");
    }
    let e = call(&lead, "contract_set", json!({"name": "x", "remove": true}))
        .await
        .err();
    assert!(e.contains("no contract named"), "{e}");
    let e = call(
        &lead,
        "contract_set",
        json!({"name": "x", "when": {}, "bogus": 1}),
    )
    .await
    .err();
    assert!(e.contains("bogus"), "unknown arguments are refused: {e}");
    let list = call(&lead, "contract_list", json!({})).await.ok();
    assert_eq!(list["contracts"], json!([]), "{list}");
    s.stop().await;
}

#[tokio::test]
async fn an_agent_drafts_a_contract_and_only_the_leads_approve_puts_it_in_force() {
    let dir = tempfile::tempdir().unwrap();
    let s = InProcess::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    for name in ["alice", "bob"] {
        call(
            &lead,
            "agent_new",
            json!({"name": name, "backend": "external"}),
        )
        .await
        .ok();
    }
    let alice = join(&s, &lead, "alice", Proto::Legacy).await;
    let bob = join(&s, &lead, "bob", Proto::Legacy).await;
    let draft = |name: &str, word: &str| {
        json!({"type": "approval", "title": format!("ban {word}"),
               "contract": {"name": name, "when": {"event": "message", "text": word},
                            "then": {"action": "deny", "reason": format!("we agreed not to say {word}")}}})
    };
    let e = call(
        &alice,
        "team_proposal_create",
        json!({"type": "decision", "title": "x", "options": ["a", "b"],
        "contract": {"name": "x", "when": {"event": "run_end"}, "then": {"action": "notify"}}}),
    )
    .await
    .err();
    assert!(e.contains("type approval"), "{e}");
    let p = call(&alice, "team_proposal_create", draft("no-foo", "foo"))
        .await
        .ok();
    assert!(
        p["proposal"]["description"]
            .as_str()
            .unwrap()
            .contains("Installs the contract"),
        "{p}"
    );
    let id = p["proposal"]["id"].as_str().unwrap().to_owned();
    // An agent's approve is advice; nothing is in force yet.
    call(
        &bob,
        "team_vote",
        json!({"proposal": id, "choice": "approve"}),
    )
    .await
    .ok();
    call(
        &alice,
        "channel_send",
        json!({"message": "@bob foo is fine"}),
    )
    .await
    .ok();
    let list = call(&lead, "contract_list", json!({})).await.ok();
    assert_eq!(list["contracts"], json!([]), "{list}");
    let v = call(
        &lead,
        "team_vote",
        json!({"proposal": id, "choice": "approve"}),
    )
    .await
    .ok();
    assert_eq!(v["resolved"], true, "{v}");
    let list = call(&lead, "contract_list", json!({})).await.ok();
    assert_eq!(list["contracts"][0]["name"], "no-foo", "{list}");
    assert_eq!(list["contracts"][0]["source"], "proposal");
    assert_eq!(list["contracts"][0]["workflow"], "@global:main");
    let e = call(&alice, "channel_send", json!({"message": "@bob foo again"}))
        .await
        .err();
    assert!(e.contains("we agreed not to say foo"), "{e}");

    let p = call(&bob, "team_proposal_create", draft("no-bar", "bar"))
        .await
        .ok();
    call(
        &lead,
        "team_vote",
        json!({"proposal": p["proposal"]["id"], "choice": "reject"}),
    )
    .await
    .ok();
    let list = call(&lead, "contract_list", json!({})).await.ok();
    assert_eq!(
        list["contracts"].as_array().unwrap().len(),
        1,
        "rejected: {list}"
    );
    call(
        &bob,
        "channel_send",
        json!({"message": "@alice bar is fine"}),
    )
    .await
    .ok();
    s.stop().await;
}

#[tokio::test]
async fn a_workflow_brings_its_own_contracts_and_the_lead_adds_one_while_it_runs() {
    let dir = tempfile::tempdir().unwrap();
    let s = InProcess::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    let yaml = r#"
name: guarded
agents:
  alice: { backend: external }
  bob: { backend: external }
contracts:
  - name: quiet
    description: secrets stay out of the channel
    when: { event: message, text: "(?i)secret" }
    then: { action: deny, reason: keep it out of the channel }
"#;
    let bad = yaml.replace(
        "action: deny, reason: keep it out of the channel",
        "action: notify, to: carol",
    );
    let e = call(
        &lead,
        "workflow_run",
        json!({"yaml": bad, "wait_seconds": 0}),
    )
    .await
    .err();
    assert!(
        e.contains("carol") && e.contains("line"),
        "names the member and the place: {e}"
    );
    call(
        &lead,
        "workflow_run",
        json!({"yaml": yaml, "wait_seconds": 0}),
    )
    .await
    .ok();
    let list = call(&lead, "contract_list", json!({"workflow": "@guarded"}))
        .await
        .ok();
    assert_eq!(list["contracts"][0]["name"], "quiet", "{list}");
    assert_eq!(list["contracts"][0]["source"], "yaml");
    let alice = join(&s, &lead, "alice@guarded", Proto::Legacy).await;
    let e = call(
        &alice,
        "channel_send",
        json!({"message": "@bob the SECRET is out"}),
    )
    .await
    .err();
    assert!(e.contains("keep it out of the channel"), "{e}");
    // Not in other instances.
    let list = call(&lead, "contract_list", json!({"workflow": "@global"}))
        .await
        .ok();
    assert_eq!(list["contracts"], json!([]), "{list}");

    // While it runs, the lead adds a rule: the next send is decided by it.
    call(
        &alice,
        "channel_send",
        json!({"message": "@bob deploy friday"}),
    )
    .await
    .ok();
    contract(
        &lead,
        json!({"name": "no-friday", "workflow": "guarded",
               "when": {"event": "message", "text": "friday"},
               "then": {"action": "deny", "reason": "no deploys on friday"}}),
    )
    .await;
    let e = call(
        &alice,
        "channel_send",
        json!({"message": "@bob deploy friday"}),
    )
    .await
    .err();
    assert!(e.contains("no deploys on friday"), "{e}");
    s.stop().await;
}

/// The README's five worked examples are a valid `contracts:` block.
#[tokio::test]
async fn the_readmes_worked_examples_parse_and_read_back() {
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).unwrap();
    let start = readme
        .find("```yaml\ncontracts:")
        .expect("the examples block")
        + "```yaml\n".len();
    let block = &readme[start..start + readme[start..].find("```").unwrap()];
    let yaml = format!(
        "name: examples\nagents:\n  deployer: {{ backend: human }}\n  reviewer: {{ backend: human }}\n{block}"
    );
    let dir = tempfile::tempdir().unwrap();
    let s = InProcess::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    call(
        &lead,
        "workflow_run",
        json!({"yaml": yaml, "wait_seconds": 0}),
    )
    .await
    .ok();
    let list = call(&lead, "contract_list", json!({"workflow": "@examples"}))
        .await
        .ok();
    let says: Vec<&str> = list["contracts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["says"].as_str().unwrap())
        .collect();
    assert_eq!(says.len(), 8, "{says:#?}");
    for quoted in [
        "When any agent asks to run a command matching \"rm *\", refuse it",
        "When the workflow has spent more than $5, hold the agent's next runs until you (the lead) approve; \
         if nobody decides within 4h, refuse it",
        "When @coder sends a message more than 10 times within 1h, refuse it",
    ] {
        assert!(
            says.iter().any(|s| s.starts_with(quoted)),
            "{quoted:?} not in {says:#?}"
        );
        let flat = readme.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(
            flat.contains(&quoted.replace('*', "\\*")),
            "the README quotes {quoted:?}"
        );
    }
    s.stop().await;
}
