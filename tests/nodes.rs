//! Nodes: the nodes resource shows the kernel under its `--node` name, every agent with a
//! worker shows the node that runs it, and a kernel that opens the store under
//! another name takes its agents over (and the old node leaves the list).

use crate::common;
use common::*;
use serde_json::{Value, json};
use std::path::Path;

const PAIR: &str = r#"
name: pair
agents:
  a:
    backend: mock
    mock:
      - when: "start"
        send: "@b hello"
  b:
    backend: mock
    mock:
      - when: "hello"
        send: "@user b heard: {message}"
kickoff: "@a start"
"#;

fn node_names(v: &Value) -> Vec<String> {
    v["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["name"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn agents_show_their_node_and_a_renamed_kernel_takes_them_over() {
    let dir = tempfile::tempdir().unwrap();
    let s = HttpServer::start_with(dir.path(), &["--node", "alpha"], &[]).await;
    let lead = s.lead(Proto::Modern).await;
    let n = nodes(&lead).await;
    assert_eq!(n["this"], "alpha", "{n}");
    assert_eq!(node_names(&n), ["alpha"], "{n}");
    let me = &n["nodes"][0];
    assert_eq!(me["this"], true, "{n}");
    assert_eq!(me["alive"], true, "{n}");
    assert_eq!(me["url"], s.url.as_str(), "{n}");
    assert_eq!(me["pid"], s.child.id().unwrap(), "{n}");
    assert_eq!(
        (me["agents"].as_i64(), me["running"].as_i64()),
        (Some(0), Some(0))
    );

    new_mock(&lead, "bob", json!([{"reply": "hi from bob"}])).await;
    let ext = call(
        &lead,
        "agent_new",
        json!({"name": "ext", "backend": "external"}),
    )
    .await
    .ok();
    assert!(
        ext["agent"].get("node").is_none(),
        "no worker, no node: {ext}"
    );
    assert_eq!(info(&lead, "bob").await["agent"]["node"], "alpha");
    let list = call(&lead, "agent_list", json!({})).await.ok();
    assert_eq!(agent_named(&list, "bob")["node"], "alpha", "{list}");
    let st = call(
        &lead,
        "workflow_status",
        json!({"workflow": "@global:main"}),
    )
    .await
    .ok();
    assert_eq!(agent_named(&st, "bob")["node"], "alpha", "{st}");
    let r = ask(&lead, "bob", "hello", 30).await;
    assert_eq!(r["status"], "succeeded", "{r}");
    // A workflow's agents are placed too.
    let w = call(
        &lead,
        "workflow_run",
        json!({"yaml": PAIR, "tag": "t", "wait_seconds": 30}),
    )
    .await
    .ok();
    assert_eq!(w["status"], "completed", "{w}");
    for a in w["agents"].as_array().unwrap() {
        assert_eq!(a["node"], "alpha", "{w}");
    }
    let n = nodes(&lead).await;
    assert_eq!(
        (
            n["nodes"][0]["agents"].as_i64(),
            n["nodes"][0]["running"].as_i64()
        ),
        (Some(3), Some(0)),
        "{n}"
    );
    s.stop().await;

    // The same store under another name: bob moves, alpha (running nothing) goes.
    let s = HttpServer::start_with(dir.path(), &["--node", "beta"], &[]).await;
    let lead = s.lead(Proto::Modern).await;
    let n = nodes(&lead).await;
    assert_eq!(node_names(&n), ["beta"], "{n}");
    assert_eq!(n["nodes"][0]["agents"], 3, "{n}");
    assert_eq!(info(&lead, "bob").await["agent"]["node"], "beta");
    let r = ask(&lead, "bob", "again", 30).await;
    assert_eq!(r["status"], "succeeded", "{r}");
    s.stop().await;
}

#[tokio::test]
async fn a_bad_node_name_is_refused_at_launch() {
    let dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(BIN)
        .args(["--http", "127.0.0.1:0", "--data-dir"])
        .arg(dir.path())
        .args(["--node", "no spaces/please"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--node") && err.contains("letters, digits"),
        "{err}"
    );
    assert!(
        !dir.path().join("admin.token").exists(),
        "nothing was written"
    );
}

const SPLIT: &str = r#"
name: split
agents:
  here:
    backend: mock
    mock:
      - when: "start"
        send: "@there over to you"
  there:
    backend: mock
    node: c
    mock:
      - when: "over to you"
        send: "@user done on c"
kickoff: "@here start"
"#;

const RELAY: &str = r#"
name: relay
agents:
  a1:
    backend: mock
    mock:
      - when: "start"
        sleep: "2s"
        send: "@a2 step one"
  a2:
    backend: mock
    mock:
      - when: "step one"
        sleep: "1s"
        send: "@a3 step two"
  a3:
    backend: mock
    mock:
      - when: "step two"
        send: "@user relay finished"
kickoff: "@a1 start"
"#;

/// Agents go to the node asked for, or the least loaded; an unknown node is refused.
async fn places_agents(la: &Client, lc: &Client) {
    // Placement: asked for, or the least loaded (a tie goes to the node asked).
    let bob = call(
        la,
        "agent_new",
        json!({"name": "bob", "backend": "mock", "node": "b", "mock": [{"reply": "bob here"}]}),
    )
    .await
    .ok();
    assert_eq!(bob["agent"]["node"], "b", "{bob}");
    let e = call(
        la,
        "agent_new",
        json!({"name": "x", "backend": "mock", "node": "nowhere"}),
    )
    .await
    .err();
    assert!(
        e.contains("not a live node") && e.contains("a, b, c"),
        "{e}"
    );
    new_mock(lc, "carl", json!([{"reply": "carl here"}])).await;
    assert_eq!(node_of(la, "carl").await, "c", "c had none, b had one");
    call(
        la,
        "agent_new",
        json!({"name": "sink", "backend": "external"}),
    )
    .await
    .ok();
}

/// A question through a is answered on b; a workflow through a places an agent on c.
async fn runs_across_nodes(la: &Client, lb: &Client) {
    // A question through a, answered by b's worker (the delivery wakes it there).
    let r = ask(la, "bob", "hello from a", 30).await;
    assert_eq!(r["status"], "succeeded", "{r}");
    assert_eq!(r["reply"]["final_text"], "bob here", "{r}");
    let on_b = info(lb, "bob").await;
    assert_eq!(on_b["runs"][0]["id"], r["run_id"], "{on_b}");

    // A workflow run through a with one agent placed on c by its YAML.
    let w = call(
        la,
        "workflow_run",
        json!({"yaml": SPLIT, "wait_seconds": 30}),
    )
    .await
    .ok();
    assert_eq!(w["status"], "completed", "{w}");
    assert_eq!(agent_named(&w, "here")["node"], "a", "{w}");
    assert_eq!(agent_named(&w, "there")["node"], "c", "{w}");
    let e = call(
        la,
        "workflow_run",
        json!({"yaml": SPLIT.replace("node: c", "node: nowhere"), "tag": "bad"}),
    )
    .await
    .err();
    assert!(
        e.contains("agents.there.node")
            && e.contains("not a live node")
            && e.contains("the node that runs the workflow"),
        "{e}"
    );
}

/// A pause through a stops a run on c and returns once it is recorded.
async fn pauses_a_run_on_another_node(la: &Client, lc: &Client) {
    // A pause through a stops a run on c, and waits until it is recorded.
    call(
        lc,
        "agent_new",
        json!({"name": "slow", "backend": "mock", "node": "c", "mock": [{"sleep": "30s", "reply": "late"}]}),
    )
    .await
    .ok();
    let r = ask(la, "slow", "take your time", 1).await;
    assert_eq!(r["status"], "running", "{r}");
    // a shows the run in progress on c as its run in progress.
    let seen = info(la, "slow").await;
    assert_eq!(seen["running"], r["run_id"], "{seen}");
    // Not moved while it runs.
    let e = call(la, "agent_update", json!({"target": "slow", "node": "a"}))
        .await
        .err();
    assert!(e.contains("is running on c"), "{e}");
    let paused_at = std::time::Instant::now();
    let p = call(la, "agent_pause", json!({"target": "slow"}))
        .await
        .ok();
    assert_eq!(p["agent"]["state"], "paused", "{p}");
    assert!(paused_at.elapsed() < std::time::Duration::from_secs(5));
    let slow = info(lc, "slow").await;
    assert_eq!(slow["runs"][0]["status"], "stopped", "{slow}");
    assert!(slow.get("running").is_none(), "{slow}");
}

/// An agent moved from b to c by hand (through a) takes its waiting message with
/// it: c runs it (its folder is made in c's data dir, not b's).
async fn moves_an_agent_by_hand(la: &Client, lb: &Client, c_dir: &Path) {
    let made =
        json!({"name": "mover", "backend": "mock", "node": "b", "mock": [{"reply": "moved fine"}]});
    call(lb, "agent_new", made).await.ok();
    call(la, "agent_pause", json!({"target": "mover"}))
        .await
        .ok();
    call(
        la,
        "channel_send",
        json!({"message": "@mover waiting for you"}),
    )
    .await
    .ok();
    let m = call(la, "agent_update", json!({"target": "mover", "node": "c"}))
        .await
        .ok();
    assert_eq!(m["agent"]["node"], "c", "{m}");
    assert_eq!(info(la, "mover").await["inbox"]["pending"], 1);
    call(
        la,
        "agent_pause",
        json!({"target": "mover", "resume": true}),
    )
    .await
    .ok();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let done = loop {
        let i = info(la, "mover").await;
        if i["runs"][0]["status"] == "succeeded" {
            break i;
        }
        assert!(std::time::Instant::now() < deadline, "mover never ran: {i}");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };
    assert_eq!(done["runs"][0]["final_text"], "moved fine", "{done}");
    assert_eq!(done["inbox"]["acked"], 1, "{done}");
    assert!(
        c_dir.join("workspaces/global/main/mover").is_dir(),
        "c ran it (its folder is in c's data dir)"
    );
}

/// Within the lease after `killed`, b's agents run on a or c and b leaves the node list.
async fn waits_for_takeover(la: &Client, lc: &Client, killed: std::time::Instant) {
    // Within the lease (2 s, and a beat to notice), b's agents run elsewhere.
    let moved = loop {
        let nodes: Vec<String> = futures::future::join_all(
            ["bob", "a1@relay", "a2@relay", "a3@relay"].map(|t| node_of(la, t)),
        )
        .await;
        if nodes.iter().all(|n| n == "a" || n == "c") {
            break killed.elapsed();
        }
        assert!(
            killed.elapsed() < std::time::Duration::from_secs(15),
            "b's agents were not taken over: {nodes:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };
    assert!(moved < std::time::Duration::from_secs(6), "took {moved:?}");
    let n = nodes(lc).await;
    assert_eq!(
        node_names(&n),
        ["c", "a"],
        "b left the list once taken over: {n}"
    );
}

/// The relay workflow completes on its new node with each message once; a1's run on b is lost.
async fn relay_completes_once(la: &Client, lc: &Client) {
    // The workflow completes on its new node, each message once.
    let s = call(
        la,
        "workflow_status",
        json!({"workflow": "@relay:main", "wait_seconds": 40}),
    )
    .await
    .ok();
    assert_eq!(s["status"], "completed", "{s}");
    let ch = call(
        lc,
        "channel_read",
        json!({"workflow": "@relay:main", "limit": 100}),
    )
    .await
    .ok();
    let texts = contents(&ch);
    for m in ["@a2 step one", "@a3 step two", "@user relay finished"] {
        assert_eq!(
            texts.iter().filter(|t| t.as_str() == m).count(),
            1,
            "{m:?} once: {texts:?}"
        );
    }
    let a1 = info(la, "a1@relay").await;
    let statuses: Vec<&str> = a1["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["status"].as_str().unwrap())
        .collect();
    assert!(statuses.contains(&"lost"), "a1's run on b was lost: {a1}");
}

/// Three kernels (three data dirs) on one PostgreSQL database: an agent on node b
/// answers a question asked through node a; a kill -9 of b moves its agents to a or
/// c within the lease, the workflow b was running completes there with each of its
/// messages once, every send acknowledged by a or c reaches its inbox exactly once,
/// and a token minted on one node works on another.
#[tokio::test]
async fn three_nodes_share_a_postgresql_database() {
    if store::cluster().is_none() {
        return;
    }
    let dirs = [
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
    ];
    let url = store::database(&format!("three-nodes {}", dirs[0].path().display()));
    let lease = [("AGENT_WORKER_NODE_LEASE", "2s")];
    let start = |i: usize, name: &'static str| {
        let url = url.clone();
        let dir = dirs[i].path().to_owned();
        async move { HttpServer::start_with(&dir, &["--node", name, "--store", &url], &lease).await }
    };
    let a = start(0, "a").await;
    let b = start(1, "b").await;
    let c = start(2, "c").await;
    let (la, lb, lc) = (
        a.lead(Proto::Modern).await,
        b.lead(Proto::Modern).await,
        c.lead(Proto::Legacy).await,
    );
    let n = nodes(&la).await;
    assert_eq!(node_names(&n), ["a", "b", "c"], "{n}");
    assert!(
        n["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .all(|n| n["alive"] == true),
        "{n}"
    );

    places_agents(&la, &lc).await;

    runs_across_nodes(&la, &lb).await;

    pauses_a_run_on_another_node(&la, &lc).await;

    moves_an_agent_by_hand(&la, &lb, dirs[2].path()).await;

    // b runs a workflow; it is killed while a1 sleeps in its first run.
    let w = call(&lb, "workflow_run", json!({"yaml": RELAY})).await.ok();
    assert_eq!(w["status"], "running", "{w}");
    for x in ["a1@relay", "a2@relay", "a3@relay"] {
        assert_eq!(node_of(&lb, x).await, "b", "{x}");
    }
    // A token minted through a, used on c.
    let j = call(&la, "agent_join", json!({"target": "sink"}))
        .await
        .ok();
    let sink = c.client(j["token"].as_str().unwrap(), Proto::Modern).await;
    let mut acked = Vec::new();
    for i in 0..10 {
        let text = format!("before {i}");
        call(&la, "channel_send", json!({"message": text, "to": "sink"}))
            .await
            .ok();
        acked.push(text);
    }
    // a1's first run is in progress (it sleeps two seconds) when b dies.
    // Node b runs it: only b knows its run is in progress.
    wait_info(&lb, "a1@relay", 20, |i| i.get("running").is_some()).await;
    let killed = std::time::Instant::now();
    b.kill().await;
    for i in 0..10 {
        let text = format!("after {i}");
        let lead = if i % 2 == 0 { &la } else { &lc };
        call(lead, "channel_send", json!({"message": text, "to": "sink"}))
            .await
            .ok();
        acked.push(text);
    }

    waits_for_takeover(&la, &lc, killed).await;

    relay_completes_once(&la, &lc).await;

    // Every acknowledged send reached the sink once, read through c with a's token.
    let inbox = call(&sink, "my_inbox", json!({"limit": 100})).await.ok();
    let got = contents(&inbox);
    for t in &acked {
        assert_eq!(got.iter().filter(|g| *g == t).count(), 1, "{t:?}: {got:?}");
    }
    // bob answers on its new node.
    let r = ask(&lc, "bob", "still there?", 30).await;
    assert_eq!(r["status"], "succeeded", "{r}");
    a.stop().await;
    c.stop().await;
}

#[tokio::test]
async fn a_move_by_hand_is_checked() {
    let dir = tempfile::tempdir().unwrap();
    let s = InProcess::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    new_mock(&lead, "m", json!([{"reply": "hi"}])).await;
    let here = node_of(&lead, "m").await;
    let e = call(
        &lead,
        "agent_update",
        json!({"target": "m", "node": "nowhere"}),
    )
    .await
    .err();
    assert!(e.contains("not a live node") && e.contains(&here), "{e}");
    let e = call(
        &lead,
        "agent_update",
        json!({"target": "m", "node": here, "model": "x"}),
    )
    .await
    .err();
    assert!(e.contains("goes alone"), "{e}");
    let same = call(&lead, "agent_update", json!({"target": "m", "node": here}))
        .await
        .ok();
    assert_eq!(
        same["agent"]["node"],
        here.as_str(),
        "where it is: nothing to do"
    );
    new_agents(&lead, "@global:main", &["ext"]).await;
    let e = call(
        &lead,
        "agent_update",
        json!({"target": "ext", "node": here}),
    )
    .await
    .err();
    assert!(e.contains("has no worker"), "{e}");
    // A worktree lives in its node's data dir: it does not move.
    let repo = common::repo::repository();
    call(
        &lead,
        "agent_new",
        json!({"name": "wt", "backend": "mock", "cwd": repo.path().display().to_string(),
               "workspace": "worktree"}),
    )
    .await
    .ok();
    let same = call(&lead, "agent_update", json!({"target": "wt", "node": here}))
        .await
        .ok();
    assert_eq!(same["agent"]["node"], here.as_str(), "staying is no move");
    let e = call(
        &lead,
        "agent_update",
        json!({"target": "wt", "node": {"labels": ["gpu"]}}),
    )
    .await
    .err();
    assert!(e.contains("no live node has all of [gpu]"), "{e}");
    s.stop().await;
}
