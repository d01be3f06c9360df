//! A second stdio launch on a data dir with a running kernel relays to it over HTTP
//! (one database, one kernel), in both protocol generations.

mod common;
use common::*;
use serde_json::json;

#[tokio::test]
async fn second_stdio_launch_bridges_to_the_running_kernel() {
    let dir = tempfile::tempdir().unwrap();
    let s = HttpServer::start(dir.path()).await;
    let lead = s.lead(Proto::Modern).await;
    for (p, name) in [(Proto::Legacy, "legacy"), (Proto::Modern, "modern")] {
        let bridged = stdio_client(dir.path(), p).await;
        assert_eq!(
            tool_names(&bridged).await,
            lead_tools(),
            "{name}: the bridged client is the lead"
        );
        let a = call(
            &bridged,
            "agent_new",
            json!({"name": format!("via-{name}"), "backend": "external"}),
        )
        .await
        .ok();
        assert_eq!(a["agent"]["target"], format!("via-{name}"));
        let e = call(
            &bridged,
            "agent_new",
            json!({"name": format!("via-{name}"), "backend": "external"}),
        )
        .await
        .err();
        assert!(
            e.contains("already exists"),
            "{name}: tool errors pass through: {e}"
        );
        assert!(
            try_call(&bridged, "no_such_tool", json!({})).await.is_err(),
            "{name}: protocol errors pass through"
        );
        let r = call(
            &bridged,
            "channel_send",
            json!({"message": format!("@via-{name} hello through the bridge")}),
        )
        .await
        .ok();
        assert_eq!(r["recipients"], json!([format!("via-{name}")]));
        bridged.cancel().await.unwrap();
    }
    // Everything landed in the running kernel's one database.
    let agents = call(&lead, "agent_list", json!({})).await.ok();
    let names: Vec<_> = agents["agents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(names, vec!["via-legacy", "via-modern"]);
    let read = call(&lead, "channel_read", json!({})).await.ok();
    assert_eq!(contents(&read).len(), 2);
    s.stop().await;
}
