//! A second stdio launch on a data dir with a running kernel relays to it over HTTP
//! (one database, one kernel), in both protocol generations, with the headers each
//! generation requires for every method family (tools, prompts, resources, tasks,
//! subscriptions).

use crate::common;
use common::*;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskParams, ClientCapabilities, ClientConfig,
    GetPromptRequestParams, Implementation, ProtocolVersion, ReadResourceRequestParams,
    ServerNotification, SubscribeRequestParams, SubscriptionFilter, TaskPayload, TaskStatus,
    UnsubscribeRequestParams, UpdateTaskParams,
};
use rmcp::service::{ClientLifecycleMode, ClientServiceExt, RunningService};
use rmcp::transport::TokioChildProcess;
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
    let s = HttpServer::start_with_env(dir.path(), &[("AGENT_WORKER_SESSION_TTL", "150ms")]).await;
    let bridged = stdio_client(dir.path(), Proto::Legacy).await;
    call(&bridged, "agent_list", json!({})).await.ok();
    // Expired: idle past the TTL and the next sweep, as sessions opened since are.
    let ttl = std::time::Duration::from_millis(150);
    crate::http_sessions::until_a_session_expires(&s.url, &s.admin, ttl, async || {}).await;
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
    let n = nodes(&c).await;
    assert_eq!(n["this"], "alpha", "{n}");
    c.cancel().await.ok();
    s.stop().await;
}

/// A 2026-07-28 client of a relayed stdio launch that declares the tasks extension.
async fn bridged_modern(dir: &std::path::Path) -> RunningService<rmcp::RoleClient, ClientConfig> {
    let mut cmd = tokio::process::Command::new(BIN);
    cmd.arg("--data-dir").arg(dir).arg("--foreground");
    cmd.envs(common::store::env_for(dir));
    let (t, _) = TokioChildProcess::builder(cmd)
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    ClientConfig::new(
        ClientCapabilities::builder().enable_tasks().build(),
        Implementation::from_build_env(),
    )
    .serve_with_lifecycle(
        t,
        ClientLifecycleMode::Discover {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        },
    )
    .await
    .expect("a relayed 2026-07-28 session")
}

/// What the relay must never answer with: a request the kernel refused for its
/// headers, or one the relay could not send.
#[track_caller]
fn not_a_header_fault(what: &str, e: &impl std::fmt::Display) {
    let e = e.to_string();
    assert!(
        !e.contains("header") && !e.contains("unreachable"),
        "{what}: {e}"
    );
}

/// Tools, prompts and resources: each names its tool, prompt or resource in
/// `Mcp-Name` (Base64 when the name is not plain ASCII).
#[tokio::test]
async fn a_bridged_2026_client_calls_tools_prompts_and_resources() {
    let dir = tempfile::tempdir().unwrap();
    let s = HttpServer::start(dir.path()).await;
    let c = bridged_modern(dir.path()).await;
    let r = c
        .peer()
        .call_tool(CallToolRequestParams::new("agent_list"))
        .await
        .unwrap();
    assert!(r.structured_content.unwrap()["agents"].is_array());
    let e = c
        .peer()
        .call_tool(CallToolRequestParams::new("outil_été"))
        .await
        .unwrap_err();
    not_a_header_fault("a tool named in Base64", &e);
    assert!(e.to_string().contains("tool not found"), "{e}");
    let mut args = serde_json::Map::new();
    args.insert("goal".into(), json!("ship it"));
    let p = c
        .peer()
        .get_prompt(GetPromptRequestParams::new("start-team").with_arguments(args))
        .await
        .unwrap();
    assert!(!p.messages.is_empty());
    let r = c
        .peer()
        .read_resource(ReadResourceRequestParams::new("agent-worker://backends"))
        .await
        .unwrap();
    assert!(!r.contents.is_empty());
    c.cancel().await.ok();
    s.stop().await;
}

/// The tasks extension: tasks/get, tasks/update and tasks/cancel each name their
/// task in `Mcp-Name` (the relay used to drop it: "missing required Mcp-Name
/// header for `tasks/get`").
#[tokio::test]
async fn a_bridged_2026_client_follows_updates_and_cancels_tasks() {
    let dir = tempfile::tempdir().unwrap();
    let s = HttpServer::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    new_mock(&lead, "echo", json!([])).await;
    new_mock(&lead, "slow", json!([{"sleep": "5s"}])).await;
    let c = bridged_modern(dir.path()).await;
    let task = async |target: &str| {
        let args = json!({"target": target, "message": "hi"});
        match c
            .call_tool_once(
                CallToolRequestParams::new("agent_ask")
                    .with_arguments(args.as_object().unwrap().clone()),
            )
            .await
            .unwrap()
        {
            CallToolResponse::Task(t) => t.task.task_id,
            other => panic!("expected a task, got {other:?}"),
        }
    };
    let id = task("echo").await;
    let TaskPayload::Completed { result } = task_ended(c.peer(), &id, 10).await.payload else {
        panic!("the task did not complete")
    };
    assert_eq!(
        result["structuredContent"]["reply"]["final_text"], "echo done",
        "{result:?}"
    );
    c.peer()
        .update_task(UpdateTaskParams::new(id, Default::default()))
        .await
        .unwrap_or_else(|e| panic!("tasks/update: {e}"));
    let slow = task("slow").await;
    c.peer()
        .cancel_task(CancelTaskParams::new(slow.clone()))
        .await
        .unwrap_or_else(|e| panic!("tasks/cancel: {e}"));
    let status = Some(task_ended(c.peer(), &slow, 5).await.status());
    assert_eq!(status, Some(TaskStatus::Cancelled));
    c.cancel().await.ok();
    s.stop().await;
}

/// Subscriptions: a 2026-07-28 `subscriptions/listen` through the relay hears a
/// channel post; a 2025-11-25 session subscribes and unsubscribes by URI.
#[tokio::test]
#[allow(deprecated)] // resources/subscribe is 2025-11-25's, still served
async fn bridged_clients_of_both_eras_subscribe() {
    const CHANNEL: &str = "agent-worker://workflows/global/main/channel";
    let dir = tempfile::tempdir().unwrap();
    let s = HttpServer::start(dir.path()).await;
    let lead = s.lead(Proto::Modern).await;
    let c = bridged_modern(dir.path()).await;
    let mut filter = SubscriptionFilter::new();
    filter.resource_subscriptions = Some(vec![CHANNEL.to_owned()]);
    let mut sub = c.peer().listen(filter).await.unwrap();
    call(&lead, "channel_send", json!({"message": "hello"}))
        .await
        .ok();
    let heard = tokio::time::timeout(std::time::Duration::from_secs(10), async {
        loop {
            match sub.next().await {
                Ok(Some(ServerNotification::ResourceUpdatedNotification(u))) => {
                    return u.params.uri;
                }
                Ok(Some(_)) => continue,
                other => panic!("the listen ended: {other:?}"),
            }
        }
    })
    .await
    .expect("an update within 10 s");
    assert_eq!(heard, CHANNEL);
    drop(sub);
    c.cancel().await.ok();

    let legacy = stdio_client(dir.path(), Proto::Legacy).await;
    legacy
        .peer()
        .subscribe(SubscribeRequestParams::new(CHANNEL))
        .await
        .unwrap_or_else(|e| panic!("resources/subscribe: {e}"));
    legacy
        .peer()
        .unsubscribe(UnsubscribeRequestParams::new(CHANNEL))
        .await
        .unwrap_or_else(|e| panic!("resources/unsubscribe: {e}"));
    legacy.cancel().await.ok();
    s.stop().await;
}

/// A client that closes stdin while its `subscriptions/listen` is open (the MCP
/// Inspector does after each call) sees the relay exit at once: the listen ends
/// with its client. It used to wait for the stream, so the client waited too
/// (2.5 s per Inspector call) and then killed it.
#[tokio::test]
async fn the_relay_exits_when_its_client_closes_stdin_during_a_listen() {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    let dir = tempfile::tempdir().unwrap();
    let s = HttpServer::start(dir.path()).await;
    let mut child = foreground_kernel(dir.path());
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap()).lines();
    let listen = json!({"jsonrpc": "2.0", "id": 1, "method": "subscriptions/listen", "params": {
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                  "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
                  "io.modelcontextprotocol/clientCapabilities": {}},
        "notifications": {"resourcesListChanged": true}}});
    stdin
        .write_all(format!("{listen}\n").as_bytes())
        .await
        .unwrap();
    let ack = tokio::time::timeout(std::time::Duration::from_secs(10), stdout.next_line())
        .await
        .expect("the listen is acknowledged")
        .unwrap()
        .unwrap();
    assert!(ack.contains("subscriptions/acknowledged"), "{ack}");
    drop(stdin);
    let started = std::time::Instant::now();
    let status = tokio::time::timeout(std::time::Duration::from_secs(10), child.wait())
        .await
        .expect("the relay exits")
        .unwrap();
    assert!(status.success(), "{status}");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );
    s.stop().await;
}
