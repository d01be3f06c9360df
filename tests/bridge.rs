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

/// A kernel started with --token leaves no admin.token; a second stdio launch still
/// gets in (with the kernel's own credential from kernel.json, readable only by its
/// owner) and writes no token file of its own.
#[tokio::test]
async fn a_second_launch_gets_in_when_the_kernel_was_started_with_a_token() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let s = HttpServer::start_with(
        dir.path(),
        &["--token", "a-token-the-user-chose-0123456789"],
        &[],
    )
    .await;
    let mode = std::fs::metadata(dir.path().join("kernel.json"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600, "kernel.json holds a credential");
    let kernel_json = std::fs::read_to_string(dir.path().join("kernel.json")).unwrap();
    assert!(
        !kernel_json.contains("a-token-the-user-chose"),
        "the user's token is never written down"
    );
    let bridged = tokio::time::timeout(
        std::time::Duration::from_secs(10),
        stdio_client(dir.path(), Proto::Legacy),
    )
    .await
    .expect("the bridge answered initialize");
    assert_eq!(tool_names(&bridged).await, lead_tools());
    assert!(
        !dir.path().join("admin.token").exists(),
        "the bridge wrote no admin.token"
    );
    bridged.cancel().await.unwrap();
    s.stop().await;
}

/// When the bridge cannot find the kernel's credential, the client's initialize is
/// answered with what to do, at once (it used to wait 15 s for nothing).
#[tokio::test]
async fn a_bridge_without_a_credential_answers_initialize_with_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    let s = HttpServer::start_with(
        dir.path(),
        &["--token", "a-token-the-user-chose-0123456789"],
        &[],
    )
    .await;
    // An older kernel's kernel.json: a URL, no credential.
    std::fs::write(
        dir.path().join("kernel.json"),
        format!("{{\"pid\": 1, \"url\": \"{}\"}}", s.url),
    )
    .unwrap();
    let t = stdio_launch(dir.path(), &[]);
    let started = std::time::Instant::now();
    use rmcp::service::ServiceExt;
    let err = tokio::time::timeout(std::time::Duration::from_secs(10), ().serve(t))
        .await
        .expect("an answer, not a hang")
        .expect_err("initialize fails");
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
    let text = format!("{err:?}");
    assert!(text.contains("--token"), "{text}");
    s.stop().await;
}

/// The kernel forgets idle sessions; a bridged client that comes back later carries
/// on: the bridge opens a new session with the client's own initialize.
#[tokio::test]
async fn a_bridged_client_survives_its_session_expiring() {
    let dir = tempfile::tempdir().unwrap();
    let s = HttpServer::start_with_env(dir.path(), &[("AGENT_WORKER_SESSION_TTL", "2s")]).await;
    let bridged = stdio_client(dir.path(), Proto::Legacy).await;
    call(&bridged, "agent_list", json!({})).await.ok();
    tokio::time::sleep(std::time::Duration::from_secs(4)).await;
    let r = call(&bridged, "agent_list", json!({})).await.ok();
    assert!(r["agents"].is_array(), "{r}");
    bridged.cancel().await.unwrap();
    s.stop().await;
}

/// A launch that names a store relays only to a kernel keeping its state there: one
/// naming another database is answered with the mismatch (and no password) instead
/// of reaching a team it did not ask for.
#[tokio::test]
async fn a_launch_naming_another_store_is_refused_not_relayed() {
    let dir = tempfile::tempdir().unwrap();
    let s = HttpServer::start(dir.path()).await;
    let t = stdio_launch(
        dir.path(),
        &["--store", "postgres://aw:hunter2@127.0.0.1:1/another_team"],
    );
    use rmcp::service::ServiceExt;
    let err = tokio::time::timeout(std::time::Duration::from_secs(10), ().serve(t))
        .await
        .expect("an answer, not a hang")
        .expect_err("initialize fails");
    let text = format!("{err:?}");
    assert!(text.contains("keeps its state in"), "{text}");
    assert!(text.contains("another_team"), "{text}");
    assert!(
        !text.contains("hunter2"),
        "the password reached the client: {text}"
    );
    // The running kernel's own clients are untouched.
    let lead = s.lead(Proto::Modern).await;
    call(&lead, "agent_list", json!({})).await.ok();
    s.stop().await;
}

#[tokio::test]
async fn a_launch_naming_another_node_is_refused_not_relayed() {
    let dir = tempfile::tempdir().unwrap();
    let s = HttpServer::start_with(dir.path(), &["--node", "alpha"], &[]).await;
    use rmcp::service::ServiceExt;
    let t = stdio_launch(dir.path(), &["--node", "beta"]);
    let err = tokio::time::timeout(std::time::Duration::from_secs(10), ().serve(t))
        .await
        .expect("an answer, not a hang")
        .expect_err("initialize fails");
    let text = format!("{err:?}");
    assert!(text.contains("is node alpha, not beta"), "{text}");
    // Naming the running node relays as usual.
    let c = ().serve(stdio_launch(dir.path(), &["--node", "alpha"])).await.unwrap();
    let r = c
        .peer()
        .read_resource(rmcp::model::ReadResourceRequestParams::new(
            "agent-worker://nodes",
        ))
        .await
        .unwrap();
    let rmcp::model::ResourceContents::TextResourceContents { text, .. } = &r.contents[0] else {
        panic!("not text: {r:?}");
    };
    assert!(text.contains("\"this\": \"alpha\""), "{text}");
    c.cancel().await.ok();
    s.stop().await;
}
