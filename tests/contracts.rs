//! Contracts through real sessions: the sdk backend against a fake model, whose
//! local tools ask the kernel before they run; approvals decided by the lead (and
//! refused, and timed out); hot-loading; the seed's cost escalation; routing and
//! refusing messages between joined members; restart with a pending approval.

mod common;
use common::fake_llm::{FakeLlm, Script};
use common::*;
use serde_json::{Value, json};
use std::path::Path;
use std::time::Duration;

async fn sdk_agent(lead: &Client, name: &str, work: &Path, llm: &FakeLlm, permissions: &str) {
    call(
        lead,
        "agent_new",
        json!({"name": name, "backend": "sdk", "model": "claude-sonnet-4-5",
               "env": {"ANTHROPIC_BASE_URL": llm.url, "ANTHROPIC_API_KEY": "sk-test"},
               "cwd": work.display().to_string(), "permissions": permissions}),
    )
    .await
    .ok();
}

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
    let s = HttpServer::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    sdk_agent(&lead, "worker", work.path(), &llm, "full").await;

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
    sdk_agent(&lead, "second", work.path(), &llm2, "full").await;
    let r = ask(&lead, "second", "clean up", 40).await;
    assert_eq!(r["status"], "succeeded", "{r}");
    assert!(!victim.exists(), "with the contract gone, the command runs");
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
    sdk_agent(&lead, "worker", work.path(), &llm, "edit").await;
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
    // It waits: running, nothing written, the lead told in its inbox.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!work.path().join("hello.txt").exists());
    assert!(info(&lead, "worker").await.get("running").is_some());
    let inbox = call(&lead, "my_inbox", json!({})).await.ok();
    let id = a["id"].as_i64().unwrap();
    assert!(
        inbox.to_string().contains(&format!("approval {id}")),
        "the approver's inbox has it: {inbox}"
    );

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
    tokio::time::sleep(Duration::from_millis(300)).await;
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
    let s = HttpServer::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    sdk_agent(&lead, "worker", work.path(), &llm, "read").await;
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
    tokio::time::sleep(Duration::from_millis(500)).await;
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

#[tokio::test]
async fn messages_to_a_member_are_routed_through_a_reviewer_or_refused() {
    let dir = tempfile::tempdir().unwrap();
    let s = HttpServer::start(dir.path()).await;
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

#[tokio::test]
async fn contract_errors_name_the_field_and_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let s = HttpServer::start(dir.path()).await;
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
    let s = HttpServer::start(dir.path()).await;
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
    let s = HttpServer::start(dir.path()).await;
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
    let s = HttpServer::start(dir.path()).await;
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
    assert_eq!(says.len(), 7, "{says:#?}");
    for quoted in [
        "When any agent asks to run a command matching \"rm *\", refuse it",
        "When the workflow has spent more than $5, hold the agent's next runs until you (the lead) approve; \
         if nobody decides within 4h, refuse it",
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
