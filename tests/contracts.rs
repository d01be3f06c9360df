//! Contracts on tool requests through real sessions: the sdk backend against a fake
//! model, whose local tools ask the kernel before they run; approvals decided by the
//! lead (and refused, and timed out); hot-loading; the seed's cost escalation;
//! restart with a pending approval. Messages, workflow files and drafts:
//! `tests/contract_rules.rs`.

use crate::common;
use common::fake_llm::{FakeLlm, Script};
use common::*;
use serde_json::{Value, json};
use std::time::Duration;

async fn contract(lead: &Client, spec: Value) -> Value {
    call(lead, "contract_set", spec).await.ok()
}

/// The last request the fake model got, as text.
fn last_call(llm: &FakeLlm) -> String {
    llm.model_calls()
        .last()
        .map(|c| c["body"].to_string())
        .unwrap_or_default()
}

#[tokio::test]
async fn a_deny_contract_stops_rm_and_the_model_reads_why_until_it_is_removed() {
    let work = tempfile::tempdir().unwrap();
    let victim = work.path().join("victim.txt");
    std::fs::write(&victim, "keep me").unwrap();
    let rm = [("run_command", json!({"command": "rm -f victim.txt"}))];
    let llm = FakeLlm::start(Script::steps(&rm, "done")).await;
    let dir = tempfile::tempdir().unwrap();
    let s = InProcess::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    new_sdk_in(&lead, "worker", work.path(), &llm.url, json!("full")).await;

    let set = contract(
        &lead,
        json!({"name": "no-rm", "when": {"event": "tool_request", "tool": "shell", "match": "rm *"},
               "then": {"action": "deny", "reason": "nobody deletes files"}}),
    )
    .await;
    assert_eq!(
        set["contract"]["says"],
        "When any agent asks to run a command matching \"rm *\", refuse it: \"nobody deletes files\"."
    );
    let r = ask(&lead, "worker", "clean up", 40).await;
    assert_eq!(r["status"], "succeeded", "{r}");
    assert!(victim.exists(), "the file was deleted despite the contract");
    let told = last_call(&llm);
    assert!(
        told.contains("nobody deletes files"),
        "the model was not told why: {told}"
    );

    let list = call(&lead, "contract_list", json!({})).await.ok();
    let d = &list["decisions"][0];
    assert_eq!(d["outcome"], "denied", "{list}");
    assert_eq!(d["contracts"], json!(["no-rm"]));
    assert_eq!(d["agent"], "worker");
    assert!(
        d["detail"].as_str().unwrap().contains("rm -f victim.txt"),
        "{d}"
    );
    assert!(
        list["built_in"]
            .as_array()
            .unwrap()
            .iter()
            .any(|g| g["says"]
                .as_str()
                .unwrap()
                .contains("60 runs in the last hour")),
        "the guards are shown as contracts: {list}"
    );
    let i = info(&lead, "worker").await;
    assert!(
        i["runs"][0]["denials"]
            .to_string()
            .contains("nobody deletes files"),
        "the refusal is kept with the run: {i}"
    );

    // Hot-loaded: removing it changes the very next decision, with no restart.
    let removed = contract(&lead, json!({"name": "no-rm", "remove": true})).await;
    assert_eq!(removed["removed"], true);
    let llm2 = FakeLlm::start(Script::steps(&rm, "done")).await;
    new_sdk_in(&lead, "second", work.path(), &llm2.url, json!("full")).await;
    let r = ask(&lead, "second", "clean up", 40).await;
    assert_eq!(r["status"], "succeeded", "{r}");
    assert!(!victim.exists(), "with the contract gone, the command runs");
    s.stop().await;
}

/// A rate on tool requests: an sdk agent may run three commands an hour; its
/// fourth is refused and the agent paused, and the three before it ran.
#[tokio::test]
async fn a_rate_pauses_an_agent_at_its_fourth_command() {
    let work = tempfile::tempdir().unwrap();
    let steps: Vec<(&str, Value)> = (1..=4)
        .map(|i| {
            (
                "run_command",
                json!({"command": format!("echo {i} >> log.txt")}),
            )
        })
        .collect();
    let llm = FakeLlm::start(Script::steps(&steps, "done")).await;
    let dir = tempfile::tempdir().unwrap();
    let s = InProcess::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    new_sdk_in(&lead, "worker", work.path(), &llm.url, json!("full")).await;
    let set = contract(
        &lead,
        json!({"name": "three-an-hour",
               "when": {"event": "tool_request", "tool": "shell", "more_than": 3, "within": "1h"},
               "then": {"action": "pause", "reason": "three commands an hour"}}),
    )
    .await;
    assert_eq!(
        set["contract"]["says"],
        "When any agent asks to run a command more than 3 times within 1h, refuse it and pause the agent \
         until it is resumed (\"three commands an hour\")."
    );
    ask(&lead, "worker", "log four lines", 40).await;
    let d = decision_by(&lead, "three-an-hour", "paused", 30).await;
    assert!(d["detail"].as_str().unwrap().contains("echo 4"), "{d}");
    let i = wait_info(&lead, "worker", 30, |i| i["agent"]["state"] == "paused").await;
    assert!(i.to_string().contains("three commands an hour"), "{i}");
    let log = std::fs::read_to_string(work.path().join("log.txt")).unwrap();
    assert_eq!(
        log, "1\n2\n3\n",
        "the three commands before the rate ran, the fourth not"
    );
    s.stop().await;
}

/// A team that votes: mock members (each with its rules), an sdk agent `deployer`
/// whose one command (`echo v2 > deployed.txt`) a `require_votes` contract
/// (`then`) holds. Returns its folder and its fake model.
async fn vote_team(
    lead: &Client,
    members: &[(&str, Value)],
    then: Value,
) -> (tempfile::TempDir, FakeLlm, Value) {
    let work = tempfile::tempdir().unwrap();
    let deploy = [("run_command", json!({"command": "echo v2 > deployed.txt"}))];
    let llm = FakeLlm::start(Script::steps(&deploy, "done")).await;
    for (name, rules) in members {
        new_mock(lead, name, rules.clone()).await;
    }
    new_sdk_in(lead, "deployer", work.path(), &llm.url, json!("full")).await;
    let set = contract(
        lead,
        json!({"name": "deploys-voted", "when": {"event": "tool_request", "tool": "shell"},
               "then": then}),
    )
    .await;
    (work, llm, set)
}

/// A mock member that votes `choice` on the latest proposal when one reaches it.
fn voter(choice: &str) -> Value {
    json!([{"when": "prop-", "vote": {"proposal": "latest", "choice": choice}}])
}

/// A mock member that never votes.
fn silent() -> Value {
    json!([{"when": "^never$", "reply": "-"}])
}

/// Asks the deployer to deploy and waits for the vote's approval to be pending.
async fn deploy_held(lead: &Client) -> Value {
    call(lead, "channel_send", json!({"message": "@deployer deploy"}))
        .await
        .ok();
    approval_in(lead, "pending", 30).await
}

/// "Deployments need 2/3 of the members": an sdk agent's command waits for a vote
/// of the three other agents (mocks that vote as `choice` says when the proposal
/// reaches them, the third never). Returns whether the command ran, the approval
/// and the proposal.
async fn voted_deploy(choice: &str) -> (bool, Value, Value) {
    let dir = tempfile::tempdir().unwrap();
    let s = InProcess::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    let members = [
        ("m1", voter(choice)),
        ("m2", voter(choice)),
        ("m3", silent()),
    ];
    let then = json!({"action": "require_votes", "votes": "2/3", "timeout": "1m"});
    let (work, _llm, set) = vote_team(&lead, &members, then).await;
    assert!(
        set["contract"]["says"]
            .as_str()
            .unwrap()
            .contains("wait until 2/3 of the members vote for it"),
        "{set}"
    );
    let r = ask(&lead, "deployer", "deploy v2", 40).await;
    assert_eq!(r["status"], "succeeded", "{r}");
    let approvals = call(&lead, "approval_list", json!({})).await.ok();
    let proposals = call(&lead, "team_proposal_status", json!({})).await.ok();
    let ran = work.path().join("deployed.txt").exists();
    s.stop().await;
    (
        ran,
        approvals["approvals"][0].clone(),
        proposals["proposals"][0].clone(),
    )
}

#[tokio::test]
async fn two_of_three_members_voting_for_it_let_a_command_run() {
    let (ran, a, p) = voted_deploy("approve").await;
    assert!(ran, "the command ran once two of three voted for it");
    assert_eq!(a["state"], "approved", "{a}");
    assert_eq!(
        (a["vote"].clone(), a["needed"].clone()),
        (json!("2/3"), json!(2)),
        "{a}"
    );
    let voters: Vec<&str> = a["votes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["who"].as_str().unwrap())
        .collect();
    assert_eq!(voters.len(), 2, "decided at the second vote: {a}");
    assert!(
        a["reason"]
            .as_str()
            .unwrap()
            .starts_with("approved by a vote of the members (for: m"),
        "{a}"
    );
    assert!(voters.iter().all(|v| ["m1", "m2"].contains(v)), "{a}");
    assert_eq!(p["status"], "resolved", "{p}");
    assert_eq!(p["winner"]["id"], "approve", "{p}");
}

#[tokio::test]
async fn two_of_three_members_voting_against_it_refuse_a_command() {
    let (ran, a, p) = voted_deploy("reject").await;
    assert!(!ran, "the command did not run");
    assert_eq!(a["state"], "denied", "{a}");
    assert_eq!(a["votes"].as_array().unwrap().len(), 2, "{a}");
    assert_eq!(p["winner"]["id"], "reject", "{p}");
}

/// A vote the members cannot give (three of two) goes to the lead, told why, and
/// the lead's approval lets the command run.
#[tokio::test]
async fn a_vote_the_members_cannot_give_goes_to_the_lead() {
    let dir = tempfile::tempdir().unwrap();
    let s = InProcess::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    let members = [("m1", voter("approve")), ("m2", voter("approve"))];
    let then = json!({"action": "require_votes", "votes": 3});
    let (work, _llm, _) = vote_team(&lead, &members, then).await;
    let a = deploy_held(&lead).await;
    assert_eq!(a["approvers"], json!(["user"]), "{a}");
    let ch = call(&lead, "channel_read", json!({"limit": 50})).await.ok();
    assert!(
        ch.to_string().contains(
            "asks a vote of 3 of the members, and deployer has 2 other member(s), so you decide"
        ),
        "{ch}"
    );
    let id = a["id"].clone();
    call(
        &lead,
        "approval_decide",
        json!({"id": id, "decision": "approve"}),
    )
    .await
    .ok();
    settled(&lead, "deployer").await;
    assert!(work.path().join("deployed.txt").exists());
    s.stop().await;
}

/// kill -9 while the members vote: the run's approval is lost at the restart, and
/// its proposal closes with it instead of asking for votes nobody can give.
#[tokio::test]
async fn a_restart_closes_the_members_vote_of_a_lost_approval() {
    let dir = tempfile::tempdir().unwrap();
    let s = HttpServer::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    let members = [("m1", silent()), ("m2", silent())];
    let then = json!({"action": "require_votes", "votes": "2/3", "timeout": "1h"});
    let (work, _llm, _) = vote_team(&lead, &members, then).await;
    let a = deploy_held(&lead).await;
    let open = call(&lead, "team_proposal_status", json!({})).await.ok();
    assert_eq!(open["proposals"][0]["status"], "open", "{open}");
    assert_eq!(
        open["proposals"][0]["waiting_for"],
        json!(["m1", "m2"]),
        "the asker does not vote: {open}"
    );
    drop(lead);
    s.kill().await;
    let s = HttpServer::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    let lost = approval_in(&lead, "lost", 10).await;
    assert_eq!(lost["id"], a["id"]);
    let p = call(&lead, "team_proposal_status", json!({})).await.ok();
    assert_eq!(p["proposals"][0]["status"], "expired", "{p}");
    assert!(!work.path().join("deployed.txt").exists());
    s.stop().await;
}

/// An sdk agent whose write needs the lead's approval, waiting on it.
async fn held_write(
    timeout: &str,
    approvers: Value,
) -> (
    tempfile::TempDir,
    tempfile::TempDir,
    FakeLlm,
    HttpServer,
    Client,
) {
    let work = tempfile::tempdir().unwrap();
    let write = [(
        "write_file",
        json!({"path": "hello.txt", "content": "written"}),
    )];
    let llm = FakeLlm::start(Script::steps(&write, "done")).await;
    let dir = tempfile::tempdir().unwrap();
    let s = HttpServer::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    new_sdk_in(&lead, "worker", work.path(), &llm.url, json!("edit")).await;
    contract(
        &lead,
        json!({"name": "edits-need-me", "when": {"event": "tool_request", "tool": "edit"},
               "then": {"action": "require_approval", "approvers": approvers, "timeout": timeout}}),
    )
    .await;
    call(
        &lead,
        "channel_send",
        json!({"message": "@worker write hello.txt"}),
    )
    .await
    .ok();
    (work, dir, llm, s, lead)
}

#[tokio::test]
async fn an_approval_holds_the_run_until_the_lead_approves() {
    let (work, _dir, llm, s, lead) = held_write("60s", json!(["user"])).await;
    let a = approval_in(&lead, "pending", 20).await;
    assert_eq!(a["agent"], "worker");
    assert_eq!(a["event"], "tool_request");
    assert!(a["what"].as_str().unwrap().contains("hello.txt"), "{a}");
    assert_eq!(a["contracts"], json!(["edits-need-me"]));
    // It waits: running, the lead told in its inbox, nothing written meanwhile.
    tokio::time::sleep(Duration::from_millis(40)).await;
    assert!(info(&lead, "worker").await.get("running").is_some());
    let inbox = call(&lead, "my_inbox", json!({})).await.ok();
    let id = a["id"].as_i64().unwrap();
    assert!(
        inbox.to_string().contains(&format!("approval {id}")),
        "the approver's inbox has it: {inbox}"
    );
    assert!(!work.path().join("hello.txt").exists());

    let decided = call(
        &lead,
        "approval_decide",
        json!({"id": id, "decision": "approve", "reason": "fine"}),
    )
    .await
    .ok();
    assert_eq!(decided["state"], "approved", "{decided}");
    let i = settled(&lead, "worker").await;
    assert_eq!(i["runs"][0]["status"], "succeeded", "{i}");
    assert_eq!(
        std::fs::read_to_string(work.path().join("hello.txt")).unwrap(),
        "written"
    );
    let again = call(
        &lead,
        "approval_decide",
        json!({"id": id, "decision": "deny"}),
    )
    .await
    .err();
    assert!(again.contains("already approved"), "{again}");
    let list = call(&lead, "contract_list", json!({})).await.ok();
    assert_eq!(list["decisions"][0]["outcome"], "approved", "{list}");
    assert_eq!(list["decisions"][0]["decided_by"], "user");
    // The same, as the lead's resource; an agent's session cannot read it.
    let r = lead
        .peer()
        .read_resource(rmcp::model::ReadResourceRequestParams::new(
            "agent-worker://contracts",
        ))
        .await
        .unwrap();
    let rmcp::model::ResourceContents::TextResourceContents { text, .. } = &r.contents[0] else {
        panic!("{r:?}")
    };
    let v: Value = serde_json::from_str(text).unwrap();
    assert_eq!(v["approvals"][0]["state"], "approved", "{v}");
    assert_eq!(v["contracts"][0]["name"], "edits-need-me");
    call(
        &lead,
        "agent_new",
        json!({"name": "peer", "backend": "external"}),
    )
    .await
    .ok();
    let peer = join(&s, &lead, "peer", Proto::Legacy).await;
    assert!(
        peer.peer()
            .read_resource(rmcp::model::ReadResourceRequestParams::new(
                "agent-worker://contracts"
            ))
            .await
            .is_err()
    );
    drop(llm);
    s.stop().await;
}

#[tokio::test]
async fn a_refused_approval_writes_nothing_and_tells_the_model() {
    let (work, _dir, llm, s, lead) = held_write("60s", json!(["worker", "reviewer"])).await;
    let a = approval_in(&lead, "pending", 20).await;
    // Named approvers decide, but never their own request; others are refused.
    let me = join(&s, &lead, "worker", Proto::Legacy).await;
    let e = call(
        &me,
        "approval_decide",
        json!({"id": a["id"], "decision": "approve"}),
    )
    .await
    .err();
    assert!(e.contains("your own request"), "{e}");
    call(
        &lead,
        "agent_new",
        json!({"name": "bystander", "backend": "external"}),
    )
    .await
    .ok();
    let other = join(&s, &lead, "bystander", Proto::Legacy).await;
    let e = call(
        &other,
        "approval_decide",
        json!({"id": a["id"], "decision": "approve"}),
    )
    .await
    .err();
    assert!(e.contains("not an approver"), "{e}");
    let seen = call(&other, "approval_list", json!({})).await.ok();
    assert_eq!(seen["approvals"], json!([]), "not its business: {seen}");
    call(
        &lead,
        "approval_decide",
        json!({"id": a["id"], "decision": "deny", "reason": "not today"}),
    )
    .await
    .ok();
    let i = settled(&lead, "worker").await;
    assert_eq!(i["runs"][0]["status"], "succeeded", "{i}");
    assert!(!work.path().join("hello.txt").exists());
    let told = last_call(&llm);
    assert!(told.contains("not today"), "the model was told why: {told}");
    s.stop().await;
}

#[tokio::test]
async fn an_approval_nobody_decides_times_out_as_its_contract_says() {
    let (work, _dir, llm, s, lead) = held_write("2s", json!(["user"])).await;
    let a = approval_in(&lead, "timed_out", 20).await;
    assert!(a["reason"].as_str().unwrap().contains("refused"), "{a}");
    settled(&lead, "worker").await;
    assert!(!work.path().join("hello.txt").exists());
    assert!(last_call(&llm).contains("nobody decided in time"));
    s.stop().await;
}

#[tokio::test]
async fn a_restart_keeps_contracts_and_decisions_and_loses_the_killed_runs_approval() {
    let (work, dir, _llm, s, lead) = held_write("60s", json!(["user"])).await;
    let a = approval_in(&lead, "pending", 20).await;
    drop(lead);
    s.kill().await;
    let s = HttpServer::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    let list = call(&lead, "contract_list", json!({})).await.ok();
    assert_eq!(list["contracts"][0]["name"], "edits-need-me", "{list}");
    let lost = approval_in(&lead, "lost", 5).await;
    assert_eq!(lost["id"], a["id"]);
    let e = call(
        &lead,
        "approval_decide",
        json!({"id": a["id"], "decision": "approve"}),
    )
    .await
    .err();
    assert!(
        e.contains("already lost"),
        "never approved after the fact: {e}"
    );
    tokio::time::sleep(Duration::from_millis(40)).await;
    assert!(!work.path().join("hello.txt").exists());
    s.stop().await;
}

#[tokio::test]
async fn spending_past_a_threshold_waits_for_the_lead() {
    // The seed's escalation ("if cost > $5, require human approval"), scaled to the
    // fake model: one answer costs $0.00054 at claude-sonnet-4-5's price.
    let work = tempfile::tempdir().unwrap();
    let llm = FakeLlm::start(Script::text("done")).await;
    let dir = tempfile::tempdir().unwrap();
    let s = InProcess::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    new_sdk_in(&lead, "worker", work.path(), &llm.url, json!("read")).await;
    let set = contract(
        &lead,
        json!({"name": "budget", "when": {"event": "spend", "usd": 0.0005},
               "then": {"action": "require_approval", "timeout": "10m"}}),
    )
    .await;
    assert!(
        set["contract"]["says"]
            .as_str()
            .unwrap()
            .contains("more than $0.0005")
    );
    let r = ask(&lead, "worker", "first", 40).await;
    assert_eq!(r["status"], "succeeded", "{r}");
    call(&lead, "channel_send", json!({"message": "@worker second"}))
        .await
        .ok();
    let a = approval_in(&lead, "pending", 20).await;
    assert_eq!(a["event"], "spend");
    assert!(a["what"].as_str().unwrap().contains("$0.0005"), "{a}");
    tokio::time::sleep(Duration::from_millis(40)).await;
    let i = info(&lead, "worker").await;
    assert_eq!(
        i["runs"].as_array().unwrap().len(),
        1,
        "held: no second run yet: {i}"
    );
    call(
        &lead,
        "approval_decide",
        json!({"id": a["id"], "decision": "approve"}),
    )
    .await
    .ok();
    let i = wait_info(&lead, "worker", 20, |i| {
        i["runs"].as_array().is_some_and(|r| r.len() == 2) && i.get("running").is_none()
    })
    .await;
    assert_eq!(i["runs"][0]["status"], "succeeded", "{i}");
    s.stop().await;
}
