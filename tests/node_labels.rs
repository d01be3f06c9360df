//! Placement by labels: a node offers labels (`--labels`), an agent asks for them
//! (`node: {labels: [..]}` in agent_new, agent_update and YAML) and runs only on a
//! live node with all of them; one whose node is gone waits for such a node rather
//! than being taken over by any.

use crate::common;
use common::*;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

/// Waits (15 s at most) until `target` runs on `node`.
async fn until_on(lead: &Client, target: &str, node: &str) {
    wait_info(lead, target, 15, |i| i["agent"]["node"] == node).await;
}

const GPU_YAML: &str = r#"
name: render
agents:
  painter:
    backend: mock
    node: { labels: [gpu] }
    mock:
      - reply: "painted"
"#;

/// Placement by labels through a node without them, refusals, labels given later
/// and a YAML agent by labels (gpu1 offers gpu and eu, cpu none).
async fn placed_and_moved_by_labels(lead: &Client) {
    // Placed by labels, whichever node is asked and however loaded.
    let g = json!({"name": "g", "backend": "mock", "node": {"labels": ["gpu"]},
                   "mock": [{"reply": "g here"}]});
    let g = call(lead, "agent_new", g).await.ok();
    assert_eq!(g["agent"]["node"], "gpu1", "{g}");
    assert_eq!(g["agent"]["labels"], json!(["gpu"]), "{g}");
    let e = call(
        lead,
        "agent_new",
        json!({"name": "t", "backend": "mock", "node": {"labels": ["tpu", "gpu"]}}),
    )
    .await
    .err();
    assert!(
        e.contains("no live node has all of [gpu, tpu]") && e.contains("gpu1 [eu, gpu]"),
        "{e}"
    );
    let e = call(
        lead,
        "agent_new",
        json!({"name": "t", "backend": "mock", "node": {"labels": "gpu"}}),
    )
    .await
    .err();
    assert!(e.contains("node.labels must be a list"), "{e}");
    // A move to a node without its labels is refused.
    let e = call(lead, "agent_update", json!({"target": "g", "node": "cpu"}))
        .await
        .err();
    assert!(e.contains("does not have g's labels [gpu]"), "{e}");

    // Labels given later move an agent whose node lacks them.
    call(
        lead,
        "agent_new",
        json!({"name": "p", "backend": "mock", "node": "cpu", "mock": [{"reply": "p here"}]}),
    )
    .await
    .ok();
    let p = call(
        lead,
        "agent_update",
        json!({"target": "p", "node": {"labels": ["eu"]}}),
    )
    .await
    .ok();
    assert_eq!(p["agent"]["node"], "gpu1", "{p}");
    assert_eq!(
        ask(lead, "p", "where?", 30).await["reply"]["final_text"],
        "p here"
    );

    // YAML: by labels, and checked with the position.
    let w = call(lead, "workflow_run", json!({"yaml": GPU_YAML}))
        .await
        .ok();
    assert_eq!(w["status"], "running", "{w}");
    assert_eq!(node_of(lead, "painter@render").await, "gpu1");
    let bad = GPU_YAML.replace("labels: [gpu]", "labels: [\"a b\"]");
    let e = call(lead, "workflow_run", json!({"yaml": bad})).await.err();
    assert!(
        e.contains("node.labels: label \"a b\"") && e.contains("<inline>:6:"),
        "{e}"
    );
}

#[tokio::test]
async fn agents_run_only_on_nodes_with_their_labels() {
    if store::cluster().is_none() {
        return;
    }
    let dirs = [(); 3].map(|_| tempfile::tempdir().unwrap());
    let url = store::database(&format!("labels {}", dirs[0].path().display()));
    let lease = [("AGENT_WORKER_NODE_LEASE", "2s")];
    let start = |i: usize, args: &'static [&'static str]| {
        let (url, dir) = (url.clone(), dirs[i].path().to_owned());
        async move {
            let mut all = vec!["--store", url.as_str()];
            all.extend_from_slice(args);
            HttpServer::start_with(&dir, &all, &lease).await
        }
    };
    let cpu = start(0, &["--node", "cpu"]).await;
    let gpu1 = start(1, &["--node", "gpu1", "--labels", "gpu, eu,gpu"]).await;
    let lead = cpu.lead(Proto::Modern).await;
    let n = nodes(&lead).await;
    let offered: Vec<&Value> = n["nodes"].as_array().unwrap().iter().collect();
    assert_eq!(offered[0]["name"], "cpu", "{n}");
    assert!(offered[0].get("labels").is_none(), "cpu offers none: {n}");
    assert_eq!(offered[1]["labels"], json!(["eu", "gpu"]), "{n}");

    placed_and_moved_by_labels(&lead).await;

    // gpu1 dies: its unlabelled agent goes to cpu, the gpu agents wait for a gpu node.
    call(
        &lead,
        "agent_new",
        json!({"name": "u", "backend": "mock", "node": "gpu1", "mock": [{"reply": "u here"}]}),
    )
    .await
    .ok();
    gpu1.kill().await;
    until_on(&lead, "u", "cpu").await;
    for waiting in ["g", "p", "painter@render"] {
        assert_eq!(node_of(&lead, waiting).await, "gpu1", "{waiting} waits");
    }
    call(
        &lead,
        "channel_send",
        json!({"message": "@g are you there?"}),
    )
    .await
    .ok();
    let gpu2 = start(2, &["--node", "gpu2", "--labels", "gpu"]).await;
    until_on(&lead, "g", "gpu2").await;
    assert_eq!(
        node_of(&lead, "p").await,
        "gpu1",
        "p needs eu, which gpu2 lacks"
    );
    // The message that waited is served there.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let i = info(&lead, "g").await;
        if i["runs"][0]["status"] == "succeeded" {
            assert_eq!(i["runs"][0]["final_text"], "g here", "{i}");
            break;
        }
        assert!(Instant::now() < deadline, "g never ran on gpu2: {i}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    gpu2.stop().await;
    cpu.stop().await;
}

/// One kernel on SQLite: labels it lacks are refused with what it offers; labels
/// it has place the agent on it.
#[tokio::test]
async fn a_single_kernel_checks_labels() {
    let dir = tempfile::tempdir().unwrap();
    let s = HttpServer::start_with(dir.path(), &["--node", "solo", "--labels", "gpu"], &[]).await;
    let lead = s.lead(Proto::Legacy).await;
    let e = call(
        &lead,
        "agent_new",
        json!({"name": "x", "backend": "mock", "node": {"labels": ["eu"]}}),
    )
    .await
    .err();
    assert!(e.contains("[eu]") && e.contains("solo [gpu]"), "{e}");
    let y = call(
        &lead,
        "agent_new",
        json!({"name": "y", "backend": "mock", "node": {"labels": ["gpu"]}, "mock": [{"reply": "ok"}]}),
    )
    .await
    .ok();
    assert_eq!(y["agent"]["node"], "solo", "{y}");
    assert_eq!(ask(&lead, "y", "hi", 30).await["reply"]["final_text"], "ok");
    for bad in ["--labels=a b", "--labels=,-x"] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_agent-worker"))
            .args([
                "--data-dir",
                &dir.path().display().to_string(),
                "--http",
                "127.0.0.1:0",
                bad,
            ])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && err.contains("--labels: label"),
            "{bad}: {err}"
        );
    }
    s.stop().await;
}
