//! Nodes: the nodes resource shows the kernel under its `--node` name, every agent with a
//! worker shows the node that runs it, and a kernel that opens the store under
//! another name takes its agents over (and the old node leaves the list).

mod common;
use common::*;
use rmcp::model::{ReadResourceRequestParams, ResourceContents};
use serde_json::{Value, json};

/// The lead's `agent-worker://nodes`.
async fn nodes(c: &Client) -> Value {
    let r = c
        .peer()
        .read_resource(ReadResourceRequestParams::new("agent-worker://nodes"))
        .await
        .unwrap();
    match &r.contents[0] {
        ResourceContents::TextResourceContents { text, .. } => serde_json::from_str(text).unwrap(),
        other => panic!("not text: {other:?}"),
    }
}

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
    let bob = list["agents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["name"] == "bob")
        .unwrap();
    assert_eq!(bob["node"], "alpha", "{list}");
    let st = call(
        &lead,
        "workflow_status",
        json!({"workflow": "@global:main"}),
    )
    .await
    .ok();
    let bob = st["agents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["name"] == "bob")
        .unwrap();
    assert_eq!(bob["node"], "alpha", "{st}");
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
