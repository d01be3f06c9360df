//! Resource subscriptions through rmcp's client: a legacy (2025-11-25) session
//! that subscribes to a channel gets notifications/resources/updated when a
//! message is posted there, well within 100 ms of the send returning, and
//! list_changed when an agent appears; a 2026-07-28 client gets the same through
//! subscriptions/listen. An agent cannot watch what it may not read. A lead session
//! that sets a log level hears what it should notice (a guard that paused an agent,
//! a workflow run's end) as notifications/message.

mod common;
use common::*;
use rmcp::model::{ServerNotification, SubscribeRequestParams, SubscriptionFilter};
use rmcp::service::{ClientLifecycleMode, ClientServiceExt, NotificationContext};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, RoleClient};
use serde_json::json;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// A client that forwards resource notifications to the test.
#[derive(Clone)]
struct Watcher(mpsc::UnboundedSender<(String, Instant)>);

impl ClientHandler for Watcher {
    async fn on_resource_updated(
        &self,
        params: rmcp::model::ResourceUpdatedNotificationParam,
        _: NotificationContext<RoleClient>,
    ) {
        let _ = self.0.send((params.uri, Instant::now()));
    }

    async fn on_resource_list_changed(&self, _: NotificationContext<RoleClient>) {
        let _ = self.0.send(("list_changed".into(), Instant::now()));
    }

    #[allow(deprecated)] // logging is the legacy protocol's
    async fn on_logging_message(
        &self,
        params: rmcp::model::LoggingMessageNotificationParam,
        _: NotificationContext<RoleClient>,
    ) {
        let text = params.data.as_str().unwrap_or_default().to_owned();
        let _ = self.0.send((format!("log:{text}"), Instant::now()));
    }
}

/// Waits for a notification naming `what`, skipping others.
async fn wait_for(rx: &mut mpsc::UnboundedReceiver<(String, Instant)>, what: &str) -> Instant {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        match tokio::time::timeout_at(deadline, rx.recv()).await {
            Ok(Some((uri, at))) if uri == what => return at,
            Ok(Some(_)) => {}
            _ => panic!("no notification for {what} within 10 s"),
        }
    }
}

const CHANNEL: &str = "agent-worker://workflows/team/main/channel";

type Heard = mpsc::UnboundedReceiver<(String, Instant)>;

/// A 2025-11-25 lead session over HTTP whose notifications the test hears.
async fn watch(s: &HttpServer) -> (rmcp::service::RunningService<RoleClient, Watcher>, Heard) {
    let (tx, rx) = mpsc::unbounded_channel();
    let t = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(s.url.as_str()).auth_header(s.admin.clone()),
    );
    let client = Watcher(tx)
        .serve_with_lifecycle(t, ClientLifecycleMode::Initialize)
        .await
        .unwrap();
    (client, rx)
}

/// Subscribes `client` to `uri` and gives the session's notification stream a moment
/// to be open.
#[allow(deprecated)] // resources/subscribe is the legacy protocol's, on purpose
async fn subscribe<H: ClientHandler>(
    client: &rmcp::service::RunningService<RoleClient, H>,
    uri: &str,
) {
    client
        .peer()
        .subscribe(SubscribeRequestParams::new(uri))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
}

#[tokio::test]
#[allow(deprecated)] // resources/subscribe is the legacy protocol's, on purpose
async fn a_legacy_session_hears_of_changes_to_what_it_subscribed() {
    let dir = tempfile::tempdir().unwrap();
    let s = HttpServer::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    new_agents(&lead, "@team", &["alice"]).await;

    let (watcher, mut rx) = watch(&s).await;
    watcher.peer().list_all_resources().await.unwrap();
    subscribe(&watcher, CHANNEL).await;

    let sent = Instant::now();
    call(
        &lead,
        "channel_send",
        json!({"message": "hello watchers", "workflow": "@team"}),
    )
    .await
    .ok();
    let returned = Instant::now();
    let at = wait_for(&mut rx, CHANNEL).await;
    let after_send = at.saturating_duration_since(returned);
    println!(
        "resources/updated {:?} after channel_send returned ({:?} after it was sent)",
        after_send,
        at - sent
    );
    assert!(
        after_send < Duration::from_millis(100),
        "the update came {after_send:?} after the send"
    );

    // A new agent changes the list.
    new_agents(&lead, "@team", &["bob"]).await;
    wait_for(&mut rx, "list_changed").await;

    // An agent cannot watch another instance or another agent's inbox.
    new_agents(&lead, "@other", &["carol"]).await;
    let alice = join(&s, &lead, "alice@team", Proto::Legacy).await;
    for uri in [
        "agent-worker://workflows/other/main/channel",
        "agent-worker://workflows/team/main/agents/bob/inbox",
    ] {
        let e = alice
            .peer()
            .subscribe(SubscribeRequestParams::new(uri))
            .await
            .unwrap_err();
        assert!(e.to_string().contains("unknown resource"), "{uri}: {e}");
    }
    s.stop().await;
}

#[tokio::test]
async fn a_2026_client_listens_for_updates() {
    let dir = tempfile::tempdir().unwrap();
    let s = HttpServer::start(dir.path()).await;
    let lead = s.lead(Proto::Modern).await;
    new_agents(&lead, "@team", &["alice"]).await;
    let listener = s.lead(Proto::Modern).await;
    let mut filter = SubscriptionFilter::new();
    filter.resource_subscriptions = Some(vec![
        CHANNEL.to_owned(),
        "agent-worker://workflows/team/main/agents/alice/inbox".to_owned(),
    ]);
    let mut sub = listener.peer().listen(filter).await.unwrap();
    call(
        &lead,
        "channel_send",
        json!({"message": "@alice ping", "workflow": "@team"}),
    )
    .await
    .ok();
    let mut seen = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while seen.len() < 2 {
        let n = tokio::time::timeout_at(deadline, sub.next())
            .await
            .expect("notifications within 10 s")
            .unwrap()
            .expect("the subscription is open");
        if let ServerNotification::ResourceUpdatedNotification(u) = n {
            seen.push(u.params.uri);
        }
    }
    seen.sort();
    assert_eq!(
        seen,
        [
            "agent-worker://workflows/team/main/agents/alice/inbox".to_owned(),
            CHANNEL.to_owned(),
        ]
    );
    s.stop().await;
}

/// A worker's start changes its agent's resource (state running, the run in
/// progress): a subscriber hears it while the run still works, not only at its end.
#[tokio::test]
async fn a_subscriber_hears_that_a_run_started() {
    let dir = tempfile::tempdir().unwrap();
    let s = HttpServer::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    call(
        &lead,
        "agent_new",
        json!({"name": "slow", "backend": "mock", "mock": [{"sleep": "20s"}]}),
    )
    .await
    .ok();
    let (watcher, mut rx) = watch(&s).await;
    let uri = "agent-worker://workflows/global/main/agents/slow";
    subscribe(&watcher, uri).await;
    let sent = Instant::now();
    call(
        &lead,
        "channel_send",
        json!({"message": "@slow take your time"}),
    )
    .await
    .ok();
    let at = tokio::time::timeout(Duration::from_secs(10), wait_for(&mut rx, uri))
        .await
        .expect("no update of the agent while its 20 s run works");
    println!(
        "resources/updated for the run's start {:?} after the send",
        at - sent
    );
    call(&lead, "agent_pause", json!({"target": "slow"}))
        .await
        .ok();
    s.stop().await;
}

#[tokio::test]
#[allow(deprecated)] // logging is the legacy protocol's, on purpose
async fn the_lead_hears_what_it_should_notice() {
    let dir = tempfile::tempdir().unwrap();
    let s = HttpServer::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    let (watcher, mut rx) = watch(&s).await;
    watcher
        .peer()
        .set_level(rmcp::model::SetLevelRequestParams::new(
            rmcp::model::LoggingLevel::Info,
        ))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;

    // A guard pauses an agent: the lead is told in the channel, and its client here.
    call(
        &lead,
        "agent_new",
        json!({"name": "busy", "backend": "mock", "budget": {"max_runs_per_hour": 1}}),
    )
    .await
    .ok();
    ask(&lead, "busy", "one", 30).await;
    call(&lead, "channel_send", json!({"message": "@busy two"}))
        .await
        .ok();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    let heard = loop {
        match tokio::time::timeout_at(deadline, rx.recv()).await {
            Ok(Some((m, _))) if m.starts_with("log:") && m.contains("busy") => break m,
            Ok(Some(_)) => {}
            _ => panic!("no log message about the paused agent"),
        }
    };
    assert!(
        heard.contains("@global:main") && heard.contains("paused"),
        "{heard}"
    );

    // A workflow run's end.
    call(
        &lead,
        "workflow_run",
        json!({"yaml": "name: tiny\nagents:\n  a: { backend: mock }\nkickoff: \"@a go\"\n", "wait_seconds": 20}),
    )
    .await
    .ok();
    wait_for(&mut rx, "log:@tiny:main: the workflow run is completed").await;
    s.stop().await;
}

/// The default stdio launch relays to a background kernel: what that kernel sends
/// outside a request (here a resource update) reaches the stdio client too.
#[tokio::test]
#[allow(deprecated)] // resources/subscribe is the legacy protocol's, on purpose
async fn updates_reach_a_client_through_the_stdio_relay() {
    let dir = tempfile::tempdir().unwrap();
    let t = stdio_launch(dir.path(), &["--idle-exit", "1s"]);
    let (tx, mut rx) = mpsc::unbounded_channel();
    let client = Watcher(tx)
        .serve_with_lifecycle(t, ClientLifecycleMode::Initialize)
        .await
        .unwrap();
    let global = "agent-worker://workflows/global/main/channel";
    client
        .peer()
        .subscribe(SubscribeRequestParams::new(global))
        .await
        .unwrap();
    // The relay opens the session's stream once the session exists.
    tokio::time::sleep(Duration::from_millis(800)).await;
    let params = rmcp::model::CallToolRequestParams::new("channel_send").with_arguments(
        json!({"message": "through the relay"})
            .as_object()
            .unwrap()
            .clone(),
    );
    client.peer().call_tool(params).await.unwrap();
    wait_for(&mut rx, global).await;
    let pid: i64 = serde_json::from_str::<serde_json::Value>(
        &std::fs::read_to_string(dir.path().join("kernel.json")).unwrap(),
    )
    .unwrap()["pid"]
        .as_i64()
        .unwrap();
    client.cancel().await.unwrap();
    // Nothing is owed: the background kernel stops after its idle second.
    let deadline = Instant::now() + Duration::from_secs(15);
    while std::path::Path::new(&format!("/proc/{pid}")).exists() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        Instant::now() < deadline,
        "the background kernel did not stop"
    );
}
