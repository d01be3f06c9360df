//! The task board with real worker runs and contracts: mock agents woken by a
//! task they may take (the next one when its dependency is done) claim and finish
//! it; a kill -9 of the kernel while a run holds a task leaves it open or held by
//! a live run after the restart, never lost or done twice; contracts on
//! `event: task` refuse a move or hold it for the lead's approval.

use crate::common;
use common::*;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

/// Polls task_list (the lead's, in `@global:main`) until `ok` holds of the
/// board's tasks, for at most `secs` seconds: the board then.
async fn until(lead: &Client, secs: u64, ok: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    let end = Instant::now() + Duration::from_secs(secs);
    loop {
        let all = call(lead, "task_list", json!({})).await.ok();
        let tasks = all["tasks"].as_array().cloned().unwrap_or_default();
        if ok(&tasks) {
            return tasks;
        }
        assert!(
            Instant::now() < end,
            "the board did not get there: {tasks:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn history(lead_view: &Value) -> Vec<String> {
    lead_view["tasks"][0]["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            format!(
                "{} {}",
                h["who"].as_str().unwrap(),
                h["what"].as_str().unwrap()
            )
        })
        .collect()
}

/// Two idle mock agents: the first task is announced to its assignee only, who
/// claims and finishes it in its run; that wakes the other, whose task waited for
/// it, and it claims and finishes its own. Each is done once, with its result.
#[tokio::test]
async fn idle_agents_are_woken_by_the_tasks_they_may_take() {
    let dir = tempfile::tempdir().unwrap();
    let s = InProcess::start(dir.path()).await;
    let lead = s.lead(Proto::Modern).await;
    let rule = |who: &str| {
        json!([{"when": "can be taken",
                "task": {"state": "done", "result": {"by": who}}}])
    };
    new_mock(&lead, "first", rule("first")).await;
    new_mock(&lead, "second", rule("second")).await;
    let plan = json!({"plan": [
        {"name": "a", "title": "lay the ground", "assign": "first"},
        {"name": "b", "title": "build on it", "deps": ["a"], "assign": "second"},
    ]});
    call(&lead, "task_add", plan).await.ok();
    let tasks = until(&lead, 30, |t| t.iter().all(|x| x["state"] == "done")).await;
    assert_eq!(tasks[0]["result"], json!({"by": "first"}), "{tasks:?}");
    assert_eq!(tasks[1]["result"], json!({"by": "second"}), "{tasks:?}");
    assert_eq!(
        (&tasks[0]["owner"], &tasks[1]["owner"]),
        (&json!("first"), &json!("second"))
    );
    for t in &tasks {
        let one = call(&lead, "task_list", json!({"id": t["id"]})).await.ok();
        let who = t["owner"].as_str().unwrap();
        assert_eq!(
            history(&one),
            [
                "user added",
                &format!("{who} claimed"),
                &format!("{who} done")
            ]
        );
    }
    // The second agent ran only once its task could be taken: its one run began
    // after the first task was done.
    let second = settled(&lead, "second").await;
    let runs = second["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 1, "{second}");
    let started = runs[0]["started_at"].as_str().unwrap();
    assert!(
        started >= tasks[0]["updated_at"].as_str().unwrap(),
        "{second} {tasks:?}"
    );
    s.stop().await;
}

/// A kill -9 while a mock run holds a task: after the restart the lost run's
/// claim is released (its history says why), the task is taken again and done
/// once.
#[tokio::test]
async fn a_task_held_by_a_killed_kernels_run_is_open_again() {
    let dir = tempfile::tempdir().unwrap();
    let s = HttpServer::start(dir.path()).await;
    let lead = s.lead(Proto::Modern).await;
    // The first claim is held for an hour (the kernel dies meanwhile); later
    // ones finish at once.
    let rules = json!([
        {"when": "can be taken", "times": 1, "task": {"hold": "1h"}},
        {"when": "can be taken", "task": {"state": "done", "result": "again"}},
    ]);
    new_mock(&lead, "worker", rules).await;
    call(&lead, "task_add", json!({"title": "survive"}))
        .await
        .ok();
    until(&lead, 30, |t| t[0]["state"] == "claimed").await;
    s.kill().await;

    let s = HttpServer::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    let tasks = until(&lead, 30, |t| t[0]["state"] == "done").await;
    assert_eq!(tasks[0]["result"], "again");
    let one = call(&lead, "task_list", json!({"id": tasks[0]["id"]}))
        .await
        .ok();
    let h = history(&one);
    assert_eq!(
        h,
        [
            "user added",
            "worker claimed",
            "system released",
            "worker claimed",
            "worker done"
        ],
        "{one}"
    );
    let why = &one["tasks"][0]["history"][2]["why"];
    assert!(why.as_str().unwrap().contains("run was lost"), "{why}");
    s.stop().await;
}

/// A contract refuses an agent's move to done; another holds it for the lead's
/// approval: the task stays claimed and shows the approval, and moves once it is
/// given. A refused approval leaves it where it was.
#[tokio::test]
async fn contracts_on_tasks_refuse_a_move_or_hold_it_for_approval() {
    let dir = tempfile::tempdir().unwrap();
    let s = InProcess::start(dir.path()).await;
    let lead = s.lead(Proto::Modern).await;
    let agents = agent_sessions(&s, &lead, "@global:main", &["ann", "bob"]).await;
    let (ann, bob) = (&agents[0], &agents[1]);
    let contract = |name: &str, agent: &str, then: Value| json!({"name": name, "when": {"event": "task", "state": "done", "agent": agent}, "then": then});
    let deny = json!({"action": "deny", "reason": "ann's work is reviewed first"});
    call(&lead, "contract_set", contract("no-self-done", "ann", deny))
        .await
        .ok();
    let approve = json!({"action": "require_approval", "approvers": ["user"]});
    call(&lead, "contract_set", contract("review", "bob", approve))
        .await
        .ok();
    let added = call(
        &lead,
        "task_add",
        json!({"plan": [{"title": "one"}, {"title": "two"}]}),
    )
    .await
    .ok();
    let (one, two) = (
        added["tasks"][0]["id"].clone(),
        added["tasks"][1]["id"].clone(),
    );
    call(ann, "task_claim", json!({"id": one})).await.ok();
    let e = call(ann, "task_update", json!({"id": one, "state": "done"}))
        .await
        .err();
    assert!(
        e.contains("contract \"no-self-done\"") && e.contains("reviewed first"),
        "{e}"
    );
    // ann may still give it back: only done is governed.
    call(ann, "task_update", json!({"id": one, "state": "open"}))
        .await
        .ok();

    call(bob, "task_claim", json!({"id": two})).await.ok();
    let held = call(
        bob,
        "task_update",
        json!({"id": two, "state": "done", "result": 2}),
    )
    .await
    .ok();
    assert_eq!(held["task"]["state"], "claimed", "{held}");
    let approval = held["task"]["approval"]
        .as_i64()
        .expect("the approval it waits for");
    assert!(
        held["held"]
            .as_str()
            .unwrap()
            .contains(&format!("approval {approval}")),
        "{held}"
    );
    let again = call(bob, "task_update", json!({"id": two, "state": "done"}))
        .await
        .err();
    assert!(again.contains("waits for approval"), "{again}");
    call(
        &lead,
        "approval_decide",
        json!({"id": approval, "decision": "approve"}),
    )
    .await
    .ok();
    let tasks = until(&lead, 10, |t| t[1]["state"] == "done").await;
    assert_eq!(tasks[1]["result"], 2, "{tasks:?}");
    assert!(tasks[1].get("approval").is_none(), "{tasks:?}");

    refused_approval(&lead, bob, &one).await;
    s.stop().await;
}

/// bob's move of task `one` to done waits for an approval the lead refuses: the
/// task stays claimed by bob, without the approval, and bob is told.
async fn refused_approval(lead: &Client, bob: &Client, one: &Value) {
    call(bob, "task_claim", json!({"id": one})).await.ok();
    let held = call(bob, "task_update", json!({"id": one, "state": "done"}))
        .await
        .ok();
    let approval = held["task"]["approval"].as_i64().unwrap();
    call(
        lead,
        "approval_decide",
        json!({"id": approval, "decision": "deny"}),
    )
    .await
    .ok();
    let tasks = until(lead, 10, |t| t[0].get("approval").is_none()).await;
    assert_eq!(
        (&tasks[0]["state"], &tasks[0]["owner"]),
        (&json!("claimed"), &json!("bob"))
    );
    let inbox = call(bob, "my_inbox", json!({})).await.ok();
    let told = inbox["messages"].as_array().unwrap().iter().any(|m| {
        m["content"]
            .as_str()
            .unwrap()
            .contains(&format!("approval {approval} was not given"))
    });
    assert!(told, "{inbox}");
}

/// On PostgreSQL with two nodes: the node whose run holds a task is killed; the
/// other takes its agent over once the lease is out, the lost run's claim is
/// released there (its history says why), and the agent's run on the live node
/// holds it again.
#[tokio::test]
async fn a_task_held_on_a_lost_node_is_held_again_by_a_live_run() {
    let Some(_) = store::cluster() else {
        return;
    };
    let dirs = [(); 2].map(|_| tempfile::tempdir().unwrap());
    let url = store::database(&format!("board-nodes {}", dirs[0].path().display()));
    let lease = [("AGENT_WORKER_NODE_LEASE", "2s")];
    let a = HttpServer::start_with(dirs[0].path(), &["--node", "a", "--store", &url], &lease).await;
    let b = HttpServer::start_with(dirs[1].path(), &["--node", "b", "--store", &url], &lease).await;
    let lb = b.lead(Proto::Modern).await;
    let rules = json!([{"when": "can be taken", "task": {"hold": "1h"}}]);
    let made = json!({"name": "worker", "backend": "mock", "node": "a", "mock": rules});
    call(&lb, "agent_new", made).await.ok();
    let added = call(&lb, "task_add", json!({"title": "survive a node"}))
        .await
        .ok();
    let id = added["tasks"][0]["id"].clone();
    until(&lb, 30, |t| t[0]["state"] == "claimed").await;
    a.kill().await;

    let end = Instant::now() + Duration::from_secs(40);
    let one = loop {
        let one = call(&lb, "task_list", json!({ "id": id })).await.ok();
        if history(&one).len() == 4 {
            break one;
        }
        assert!(Instant::now() < end, "not held again: {one}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(
        history(&one),
        [
            "user added",
            "worker claimed",
            "system released",
            "worker claimed"
        ],
        "{one}"
    );
    let why = &one["tasks"][0]["history"][2]["why"];
    assert!(why.as_str().unwrap().contains("run was lost"), "{why}");
    let i = info(&lb, "worker").await;
    assert_eq!(i["agent"]["node"], "b", "{i}");
    assert_eq!(i["runs"][0]["status"], "running", "{i}");
    assert_eq!(i["runs"][1]["status"], "lost", "{i}");
    b.stop().await;
    // The killed node's worker outlived it (no kernel came back there to sweep it).
    end_workers_in(&std::fs::canonicalize(dirs[0].path()).unwrap());
}

/// Ends the processes working under `dir` (a killed kernel's workers).
fn end_workers_in(dir: &std::path::Path) {
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let pid = e.file_name().to_string_lossy().into_owned();
        let cwd = std::fs::read_link(e.path().join("cwd"));
        if pid.chars().all(|c| c.is_ascii_digit()) && cwd.is_ok_and(|c| c.starts_with(dir)) {
            let _ = std::process::Command::new("kill")
                .args(["-9", &pid])
                .status();
        }
    }
}

/// An sdk agent (the fake model's script) claims the task it is asked about and
/// finishes it with a result, through the same tools a model sees.
#[tokio::test]
async fn an_sdk_agent_claims_and_finishes_a_task() {
    let dir = tempfile::tempdir().unwrap();
    let s = InProcess::start(dir.path()).await;
    let lead = s.lead(Proto::Modern).await;
    let added = call(&lead, "task_add", json!({"title": "summarise the logs"}))
        .await
        .ok();
    let id = added["tasks"][0]["id"].clone();
    let done = json!({"id": id, "state": "done", "result": {"summary": "all quiet"}});
    let script = common::fake_llm::Script::steps(
        &[("task_claim", json!({})), ("task_update", done)],
        "the logs are summarised",
    );
    let llm = common::fake_llm::FakeLlm::start(script).await;
    let work = tempfile::tempdir().unwrap();
    new_sdk_in(&lead, "scribe", work.path(), &llm.url, json!("edit")).await;
    let r = ask(&lead, "scribe", "Take the task on the board.", 30).await;
    assert_eq!(r["status"], "succeeded", "{r}");
    let one = call(&lead, "task_list", json!({ "id": id })).await.ok();
    let t = &one["tasks"][0];
    assert_eq!(
        (&t["state"], &t["owner"]),
        (&json!("done"), &json!("scribe")),
        "{t}"
    );
    assert_eq!(t["result"], json!({"summary": "all quiet"}), "{t}");
    assert_eq!(
        history(&one),
        ["user added", "scribe claimed", "scribe done"]
    );
    s.stop().await;
}

/// A refused claim (the task is the lead's) is no failure of a mock run; a run
/// that ends holding a claim gives it back, its history saying why.
#[tokio::test]
async fn a_refused_claim_does_not_fail_a_mock_run() {
    let dir = tempfile::tempdir().unwrap();
    let s = InProcess::start(dir.path()).await;
    let lead = s.lead(Proto::Modern).await;
    let added = call(
        &lead,
        "task_add",
        json!({"plan": [{"title": "one"}, {"title": "two"}]}),
    )
    .await
    .ok();
    let (one, two) = (
        added["tasks"][0]["id"].clone(),
        added["tasks"][1]["id"].clone(),
    );
    call(&lead, "task_claim", json!({"id": one})).await.ok();
    new_mock(
        &lead,
        "keeper",
        json!([{"when": "grab", "task": {"id": one}}]),
    )
    .await;
    new_mock(&lead, "leaver", json!([{"when": "grab", "task": {}}])).await;
    for who in ["keeper", "leaver"] {
        let r = ask(&lead, who, "grab a task", 30).await;
        assert_eq!(r["status"], "succeeded", "{r}");
    }
    let tasks = until(&lead, 30, |t| t[1]["state"] == "open").await;
    assert_eq!(tasks[0]["owner"], "user", "{tasks:?}");
    let seen = call(&lead, "task_list", json!({"id": two})).await.ok();
    let last = seen["tasks"][0]["history"]
        .as_array()
        .unwrap()
        .last()
        .cloned();
    let why = last.as_ref().map(|l| l["why"].as_str().unwrap_or(""));
    assert!(
        why.is_some_and(|w| w.contains("of leaver ended without finishing it")),
        "{seen}"
    );
    s.stop().await;
}
