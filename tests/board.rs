//! The task board over MCP (task_add, task_claim, task_update, task_list and the
//! instance's `board` resource): a plan with dependencies, claims and their
//! refusals, results, and many agents claiming at once. The protocol's own Tasks
//! extension is `tasks.rs`.

use crate::common;
use common::*;
use rmcp::model::ReadResourceRequestParams;
use serde_json::{Value, json};
use std::collections::HashMap;

const WF: &str = "@team:main";

async fn board(c: &Client, uri: &str) -> Value {
    let r = c
        .read_resource(ReadResourceRequestParams::new(uri))
        .await
        .expect("read the board");
    let text = match &r.contents[0] {
        rmcp::model::ResourceContents::TextResourceContents { text, .. } => text.clone(),
        other => panic!("not text: {other:?}"),
    };
    serde_json::from_str(&text).unwrap()
}

fn ids_of(v: &Value) -> Vec<i64> {
    v["tasks"]
        .as_array()
        .unwrap_or_else(|| panic!("no tasks in {v}"))
        .iter()
        .map(|t| t["id"].as_i64().unwrap())
        .collect()
}

/// The lead adds a plan of tasks with dependencies by local name in one call;
/// agents claim them in an order the dependencies allow, finish them with
/// results, and nobody takes one twice; refusals name the field and the fix.
#[tokio::test]
async fn a_plan_is_worked_through_claims_in_dependency_order() {
    let dir = tempfile::tempdir().unwrap();
    let s = InProcess::start(dir.path()).await;
    let lead = s.lead(Proto::Modern).await;
    let agents = agent_sessions(&s, &lead, WF, &["ann", "bob"]).await;
    let (ann, bob) = (&agents[0], &agents[1]);
    let plan = json!({"workflow": WF, "plan": [
        {"name": "design", "title": "Design the API", "priority": 5},
        {"name": "build", "title": "Build it", "deps": ["design"], "assign": "bob"},
        {"name": "docs", "title": "Write the docs", "deps": ["design"]},
        {"name": "ship", "title": "Ship", "deps": ["build", "docs"],
         "result_schema": {"type": "object"}},
    ]});
    let added = call(&lead, "task_add", plan).await.ok();
    let ids = ids_of(&added);
    assert_eq!(ids.len(), 4, "{added}");
    assert_eq!(
        added["tasks"][3]["blocked_by"],
        json!([ids[1], ids[2]]),
        "{added}"
    );

    // Only the design is claimable: bob takes it; ann finds nothing.
    let got = call(bob, "task_claim", json!({})).await.ok();
    assert_eq!(got["task"]["id"], ids[0], "{got}");
    assert_eq!(got["task"]["owner"], "bob", "{got}");
    let none = call(ann, "task_claim", json!({})).await.ok();
    assert!(
        none["task"].is_null() && none["note"].as_str().unwrap().contains("nothing"),
        "{none}"
    );
    refusals(ann, bob, &ids).await;
    let done = call(
        bob,
        "task_update",
        json!({"id": ids[0], "state": "done", "result": {"api": "v1"}}),
    )
    .await
    .ok();
    assert_eq!(done["task"]["state"], "done", "{done}");
    let again = call(bob, "task_update", json!({"id": ids[0], "state": "done"}))
        .await
        .err();
    assert!(again.contains("is done already"), "{again}");

    // build is bob's by name; ann gets docs.
    let a = call(ann, "task_claim", json!({})).await.ok();
    assert_eq!(a["task"]["id"], ids[2], "{a}");
    let e = call(ann, "task_claim", json!({"id": ids[1]})).await.err();
    assert!(e.contains("you hold task"), "{e}");
    let b = call(bob, "task_claim", json!({})).await.ok();
    assert_eq!(b["task"]["id"], ids[1], "{b}");
    for (who, id) in [(ann, ids[2]), (bob, ids[1])] {
        call(
            who,
            "task_update",
            json!({"id": id, "state": "done", "links": ["branch:x"]}),
        )
        .await
        .ok();
    }
    let ship = call(ann, "task_claim", json!({})).await.ok();
    assert_eq!(ship["task"]["id"], ids[3], "{ship}");
    let e = call(ann, "task_update", json!({"id": ids[3], "state": "done"}))
        .await
        .err();
    assert!(
        e.contains("result: task") && e.contains("result_schema"),
        "{e}"
    );
    call(
        ann,
        "task_update",
        json!({"id": ids[3], "state": "done", "result": {"ok": true}}),
    )
    .await
    .ok();

    all_done(&lead, bob, &ids).await;
    s.stop().await;
}

/// Refused plans name the field: a cycle, an unknown name, a dependency on another
/// instance's task; nothing of a refused plan is written.
#[tokio::test]
async fn bad_plans_are_refused_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let s = InProcess::start(dir.path()).await;
    let lead = s.lead(Proto::Modern).await;
    new_agents(&lead, WF, &["ann"]).await;
    let other = call(&lead, "task_add", json!({"title": "elsewhere"}))
        .await
        .ok();
    let elsewhere = ids_of(&other)[0];
    for (args, says) in [
        (
            json!({"plan": [{"name": "a", "title": "A", "deps": ["b"]},
                         {"name": "b", "title": "B", "deps": ["a"]}]}),
            "cycle (a -> b -> a)",
        ),
        (
            json!({"plan": [{"name": "a", "title": "A", "deps": ["zz"]}]}),
            "plan[0].deps: \"zz\"",
        ),
        (
            json!({"plan": [{"name": "a", "title": "A"}, {"name": "a", "title": "B"}]}),
            "plan[1].name",
        ),
        (json!({"plan": [{"title": "A", "colour": "red"}]}), "colour"),
        (
            json!({"title": "A", "deps": [elsewhere]}),
            "is not on the board of @team:main",
        ),
        (json!({"title": " "}), "title: give the task a title"),
        (json!({"title": "A", "assign": "role:"}), "assign:"),
        (
            json!({"title": "A", "priority": 5000}),
            "priority: from -1000",
        ),
        (json!({"title": "A", "result_schema": []}), "result_schema"),
        (json!({}), "give a title"),
    ] {
        let mut args = args;
        args["workflow"] = json!(WF);
        let e = call(&lead, "task_add", args).await.err();
        assert!(e.contains(says), "{says}: {e}");
    }
    let all = call(&lead, "task_list", json!({"workflow": WF})).await.ok();
    assert_eq!(all["tasks"], json!([]), "{all}");
    s.stop().await;
}

/// Twenty agent sessions claim and finish fifty tasks at once, a thousand
/// claims in all: every task is done exactly once, and its history never shows
/// a claim while another is held.
#[tokio::test]
async fn a_thousand_concurrent_claims_do_each_task_once() {
    let dir = tempfile::tempdir().unwrap();
    let s = InProcess::start(dir.path()).await;
    let lead = s.lead(Proto::Modern).await;
    let names: Vec<String> = (0..20).map(|i| format!("w{i:02}")).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let sessions = agent_sessions(&s, &lead, WF, &refs).await;
    let plan: Vec<Value> = (0..50).map(|i| json!({"title": format!("t{i}")})).collect();
    let added = call(&lead, "task_add", json!({"workflow": WF, "plan": plan}))
        .await
        .ok();
    let ids = ids_of(&added);
    let won = claim_race(&sessions, &ids, 50).await;
    assert_eq!(won, 50, "each of the 50 tasks is won once in 1000 claims");
    check_history(&lead, &ids).await;
    s.stop().await;
}

/// The same race on PostgreSQL with two kernels (nodes a and b) sharing one
/// database, half the sessions on each.
#[tokio::test]
async fn a_thousand_claims_on_two_nodes_of_postgresql_do_each_task_once() {
    let Some(_) = store::cluster() else {
        return;
    };
    let dirs = [(); 2].map(|_| tempfile::tempdir().unwrap());
    let url = store::database(&format!("board {}", dirs[0].path().display()));
    let a = HttpServer::start_with(dirs[0].path(), &["--node", "a", "--store", &url], &[]).await;
    let b = HttpServer::start_with(dirs[1].path(), &["--node", "b", "--store", &url], &[]).await;
    let (la, lb) = (a.lead(Proto::Modern).await, b.lead(Proto::Legacy).await);
    let names: Vec<String> = (0..20).map(|i| format!("w{i:02}")).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    new_agents(&la, WF, &refs).await;
    let mut sessions = Vec::new();
    for (i, n) in names.iter().enumerate() {
        let target = format!("{n}{WF}");
        sessions.push(match i % 2 {
            0 => join(&a, &la, &target, Proto::Modern).await,
            _ => join(&b, &lb, &target, Proto::Legacy).await,
        });
    }
    let plan: Vec<Value> = (0..50).map(|i| json!({"title": format!("t{i}")})).collect();
    let added = call(&lb, "task_add", json!({"workflow": WF, "plan": plan}))
        .await
        .ok();
    let ids = ids_of(&added);
    let won = claim_race(&sessions, &ids, 50).await;
    assert_eq!(won, 50, "each of the 50 tasks is won once in 1000 claims");
    check_history(&la, &ids).await;
    drop(sessions);
    a.stop().await;
    b.stop().await;
}

/// Each session makes `per` claims, every other one naming a task (round-robin
/// from its own offset, so that they collide, done tasks included) and the others
/// taking the best; what it wins it finishes. The claims won, in all.
pub async fn claim_race(sessions: &[Client], ids: &[i64], per: usize) -> usize {
    let mut joins = Vec::new();
    for (i, c) in sessions.iter().enumerate() {
        let c: rmcp::Peer<rmcp::RoleClient> = c.peer().clone();
        let ids = ids.to_vec();
        joins.push(tokio::spawn(async move {
            let mut won = 0;
            for k in 0..per {
                let args = if k % 2 == 0 {
                    json!({"id": ids[(i * 7 + k) % ids.len()]})
                } else {
                    json!({})
                };
                let got = match call(&c, "task_claim", args).await {
                    Out::Ok(v) => v,
                    Out::Err(e) => {
                        assert!(e.contains("claimed by") || e.contains("is done"), "{e}");
                        continue;
                    }
                };
                let Some(id) = got["task"]["id"].as_i64() else {
                    continue;
                };
                won += 1;
                call(
                    &c,
                    "task_update",
                    json!({"id": id, "state": "done", "result": k}),
                )
                .await
                .ok();
            }
            won
        }));
    }
    let mut won = 0;
    for j in joins {
        won += j.await.unwrap();
    }
    won
}

/// Every task is done once, and between two claims of it there was a release.
pub async fn check_history(lead: &Client, ids: &[i64]) {
    let mut owners = HashMap::new();
    for id in ids {
        let one = call(lead, "task_list", json!({"workflow": WF, "id": id}))
            .await
            .ok();
        let t = &one["tasks"][0];
        assert_eq!(t["state"], "done", "{t}");
        let mut held = false;
        let mut dones = 0;
        for h in t["history"].as_array().unwrap() {
            match h["what"].as_str().unwrap() {
                "claimed" => {
                    assert!(!held, "task {id} claimed while held: {t}");
                    held = true;
                }
                "released" => held = false,
                "done" => {
                    assert!(held, "task {id} done while not held: {t}");
                    dones += 1;
                    held = false;
                }
                _ => {}
            }
        }
        assert_eq!(dones, 1, "{t}");
        *owners
            .entry(t["owner"].as_str().unwrap().to_owned())
            .or_insert(0) += 1;
    }
    assert!(owners.len() > 1, "one agent did everything: {owners:?}");
}

/// What ann and bob are refused while bob holds the first task: claims of taken,
/// blocked, held and unknown tasks; moves by another, without a reason, to no
/// state, by an agent to cancelled; a result without done; an unknown argument.
async fn refusals(ann: &Client, bob: &Client, ids: &[i64]) {
    for (who, args, says) in [
        (ann, json!({"id": ids[0]}), "claimed by bob"),
        (ann, json!({"id": ids[3]}), "blocked by"),
        (bob, json!({"id": ids[0]}), "you hold task"),
        (ann, json!({"id": 999_999}), "no task 999999"),
    ] {
        let e = call(who, "task_claim", args).await.err();
        assert!(e.contains(says), "{says}: {e}");
    }
    for (who, args, says) in [
        (
            ann,
            json!({"id": ids[0], "state": "done"}),
            "only its owner or the lead",
        ),
        (
            bob,
            json!({"id": ids[0], "state": "failed"}),
            "note: say why",
        ),
        (
            bob,
            json!({"id": ids[0], "state": "finished"}),
            "state: \"finished\" is not one of",
        ),
        (
            bob,
            json!({"id": ids[0], "state": "cancelled"}),
            "only the lead cancels",
        ),
        (
            bob,
            json!({"id": ids[0], "result": 1}),
            "result: give it with state done",
        ),
        (bob, json!({"id": ids[0], "bogus": 1}), "bogus"),
    ] {
        let e = call(who, "task_update", args).await.err();
        assert!(e.contains(says), "{says}: {e}");
    }
}

/// The whole plan is done with its results, as task_list (all, mine, one with its
/// history) and the board resource show it.
async fn all_done(lead: &Client, bob: &Client, ids: &[i64]) {
    let all = call(lead, "task_list", json!({"workflow": WF})).await.ok();
    let states: Vec<&str> = all["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["state"].as_str().unwrap())
        .collect();
    assert_eq!(states, ["done"; 4], "{all}");
    assert_eq!(all["tasks"][3]["result"], json!({"ok": true}), "{all}");
    let mine = call(bob, "task_list", json!({"mine": true})).await.ok();
    assert_eq!(ids_of(&mine), [ids[0], ids[1]], "{mine}");
    let one = call(lead, "task_list", json!({"workflow": WF, "id": ids[3]}))
        .await
        .ok();
    let what: Vec<&str> = one["tasks"][0]["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["what"].as_str().unwrap())
        .collect();
    assert_eq!(what, ["added", "claimed", "done"], "{one}");

    let b = board(lead, "agent-worker://workflows/team/main/board").await;
    assert_eq!(b["workflow"], WF, "{b}");
    assert_eq!(b["counts"]["done"], 4, "{b}");
    assert_eq!(b["tasks"].as_array().unwrap().len(), 4, "{b}");
}
