//! Resource subscriptions through rmcp's client: a legacy (2025-11-25) session
//! that subscribes to a channel gets notifications/resources/updated when a
//! message is posted there, well within 100 ms of the send returning, and
//! list_changed when an agent appears; a 2026-07-28 client gets the same through
//! subscriptions/listen. An agent cannot watch what it may not read. A lead session
//! that sets a log level hears what it should notice (a guard that paused an agent,
//! a workflow run's end) as notifications/message.

use crate::common;
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

/// Where a watcher's stream is shown to be open: a channel no test watches.
const PROBE: &str = "agent-worker://workflows/probe/main/channel";

/// A 2025-11-25 lead session over HTTP whose notifications the test hears, once its
/// notification stream is open (rmcp drops what is sent before): it subscribes to a
/// probe instance's channel, and `lead` posts there until the update arrives.
#[allow(deprecated)] // resources/subscribe is the legacy protocol's, on purpose
async fn watch(
    s: &HttpServer,
    lead: &Client,
) -> (rmcp::service::RunningService<RoleClient, Watcher>, Heard) {
    // Before the session: its list_changed reaches no watcher.
    new_agents(lead, "@probe", &["prober"]).await;
    let (tx, mut rx) = mpsc::unbounded_channel();
    let t = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(s.url.as_str()).auth_header(s.admin.clone()),
    );
    let client = Watcher(tx)
        .serve_with_lifecycle(t, ClientLifecycleMode::Initialize)
        .await
        .unwrap();
    client
        .peer()
        .subscribe(SubscribeRequestParams::new(PROBE))
        .await
        .unwrap();
    let end = Instant::now() + Duration::from_secs(10);
    loop {
        let probe = json!({"message": "is the stream open?", "workflow": "@probe"});
        call(lead, "channel_send", probe).await.ok();
        let heard = tokio::time::timeout(Duration::from_millis(200), wait_for(&mut rx, PROBE));
        if heard.await.is_ok() {
            return (client, rx);
        }
        assert!(
            Instant::now() < end,
            "the notification stream did not open in 10 s"
        );
    }
}

/// Subscribes `client` (whose stream is open) to `uri`.
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
}

#[tokio::test]
#[allow(deprecated)] // resources/subscribe is the legacy protocol's, on purpose
async fn a_legacy_session_hears_of_changes_to_what_it_subscribed() {
    let dir = tempfile::tempdir().unwrap();
    let s = HttpServer::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    new_agents(&lead, "@team", &["alice"]).await;

    let (watcher, mut rx) = watch(&s, &lead).await;
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

/// A change of a task updates the instance's board resource (and lists it).
#[tokio::test]
async fn a_task_changed_updates_the_board_resource() {
    let dir = tempfile::tempdir().unwrap();
    let s = HttpServer::start(dir.path()).await;
    let lead = s.lead(Proto::Modern).await;
    let (watcher, mut rx) = watch(&s, &lead).await;
    let uri = "agent-worker://workflows/global/main/board";
    subscribe(&watcher, uri).await;
    call(&lead, "task_add", json!({"title": "watch me"}))
        .await
        .ok();
    wait_for(&mut rx, uri).await;
    wait_for(&mut rx, "list_changed").await;
    call(&lead, "task_claim", json!({})).await.ok();
    wait_for(&mut rx, uri).await;
    s.stop().await;
}

/// A report (my_feedback) updates the instance's feedback resource and lists it.
#[tokio::test]
async fn a_report_updates_the_feedback_resource() {
    let dir = tempfile::tempdir().unwrap();
    let s = HttpServer::start(dir.path()).await;
    let lead = s.lead(Proto::Modern).await;
    new_agents(&lead, "@team", &["alice"]).await;
    let (watcher, mut rx) = watch(&s, &lead).await;
    watcher.peer().list_all_resources().await.unwrap();
    let uri = "agent-worker://workflows/team/main/feedback";
    subscribe(&watcher, uri).await;
    let alice = join(&s, &lead, "alice@team", Proto::Legacy).await;
    call(
        &alice,
        "my_feedback",
        json!({"kind": "suggestion", "about": "team_doc_write", "text": "say who changed it"}),
    )
    .await
    .ok();
    wait_for(&mut rx, uri).await;
    wait_for(&mut rx, "list_changed").await;
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
    let (watcher, mut rx) = watch(&s, &lead).await;
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
    let (watcher, mut rx) = watch(&s, &lead).await;
    watcher
        .peer()
        .set_level(rmcp::model::SetLevelRequestParams::new(
            rmcp::model::LoggingLevel::Info,
        ))
        .await
        .unwrap();

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
    // The relay opens the session's stream once the session exists: a post made
    // before that is not heard, so post until one is (at most 10 s).
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let params = rmcp::model::CallToolRequestParams::new("channel_send").with_arguments(
            json!({"message": "through the relay"})
                .as_object()
                .unwrap()
                .clone(),
        );
        client.peer().call_tool(params).await.unwrap();
        let heard = tokio::time::timeout(Duration::from_millis(300), async {
            while let Some((uri, _)) = rx.recv().await {
                if uri == global {
                    return;
                }
            }
        })
        .await;
        if heard.is_ok() {
            break;
        }
        assert!(Instant::now() < deadline, "no update through the relay");
    }
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

/// The lead's `channel_read`, timed every 20 ms until `stop` is set: the slowest.
fn time_the_lead(
    lead: std::sync::Arc<Client>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> tokio::task::JoinHandle<Duration> {
    tokio::spawn(async move {
        let mut slowest = Duration::ZERO;
        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
            let t = Instant::now();
            call(&lead, "channel_read", json!({"workflow": "@team"}))
                .await
                .ok();
            slowest = slowest.max(t.elapsed());
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        slowest
    })
}

/// The error a refused listen ends with (rmcp acknowledges before the handler runs,
/// so a refusal may come as the listen's answer or as its end).
async fn listen_refusal(agent: &Client, uris: Vec<String>) -> String {
    let mut filter = SubscriptionFilter::new();
    filter.resource_subscriptions = Some(uris);
    let mut sub = match agent.peer().listen(filter).await {
        Err(e) => return e.to_string(),
        Ok(sub) => sub,
    };
    match tokio::time::timeout(Duration::from_secs(30), sub.next()).await {
        Ok(Err(e)) => e.to_string(),
        other => panic!("the listen was not refused: {other:?}"),
    }
}

/// A hostile pass: five listens of one agent, each naming 60,000 of its own
/// documents (3.6 MB of filter), held the lead's channel_read up to 31.6 s and took
/// the server from 29 to 247 MB. Now each is refused before the store is read,
/// naming the limit, and the lead keeps answering.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_agent_cannot_stall_the_server_with_listens() {
    let dir = tempfile::tempdir().unwrap();
    let s = HttpServer::start(dir.path()).await;
    let lead = std::sync::Arc::new(s.lead(Proto::Modern).await);
    new_agents(&lead, "@team", &["alice"]).await;
    let alice = std::sync::Arc::new(join(&s, &lead, "alice@team", Proto::Modern).await);
    let pid = s.child.id().unwrap();
    let rss_before = rss_kib(pid);

    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let timing = time_the_lead(lead.clone(), stop.clone());
    let floods = (0..5).map(|i| {
        let alice = alice.clone();
        let uris = (0..60_000)
            .map(|n| format!("agent-worker://workflows/team/main/documents/f{i}-{n}.md"))
            .collect();
        async move { listen_refusal(&alice, uris).await }
    });
    for e in futures::future::join_all(floods).await {
        assert!(
            e.contains("60000 URIs in one subscription: at most 1024"),
            "{e}"
        );
    }
    // Bounded in number too: 32 listens of one identity, not 33.
    let mut open = Vec::new();
    for _ in 0..32 {
        let mut f = SubscriptionFilter::new();
        f.resource_subscriptions = Some(vec![CHANNEL.to_owned()]);
        open.push(alice.peer().listen(f).await.unwrap());
    }
    let e = listen_refusal(&alice, vec![CHANNEL.to_owned()]).await;
    assert!(e.contains("at most 32"), "{e}");
    // The lead is another identity: its listen is not held back.
    let mut f = SubscriptionFilter::new();
    f.resource_subscriptions = Some(vec![CHANNEL.to_owned()]);
    let _lead_listen = lead.peer().listen(f).await.unwrap();

    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let slowest = timing.await.unwrap();
    let grown = rss_kib(pid).saturating_sub(rss_before) / 1024;
    println!(
        "the lead's slowest channel_read during the floods: {slowest:?}; RSS grew {grown} MiB"
    );
    // Debug build on two cores: 0.21 s alone, 1.27 s beside a parallel compile;
    // before the bounds it waited minutes (183 s here, 31.6 s on a release build).
    assert!(
        slowest < Duration::from_secs(3),
        "the lead waited {slowest:?}"
    );
    assert!(grown < 100, "the server grew by {grown} MiB");
    s.stop().await;
}

/// A hostile pass: one agent token, 8 sessions x 100 legacy subscriptions to
/// `agent-worker://resources/<1 MiB>`: all accepted, RSS 29 -> 865 MB. Now a URI is
/// checked before it is kept, and a session holds at most 1024 of them.
#[tokio::test]
#[allow(deprecated)] // resources/subscribe is the legacy protocol's, on purpose
async fn an_agent_cannot_grow_the_server_with_subscriptions() {
    let dir = tempfile::tempdir().unwrap();
    let s = HttpServer::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    new_agents(&lead, "@team", &["alice"]).await;
    let pid = s.child.id().unwrap();
    let rss_before = rss_kib(pid);
    let huge = format!("agent-worker://resources/{}", "a".repeat(1024 * 1024));
    let mut sessions = Vec::new();
    // 200 refused 1 MiB URIs: kept, they would be twice the bound below.
    for _ in 0..4 {
        let alice = join(&s, &lead, "alice@team", Proto::Legacy).await;
        for _ in 0..50 {
            let e = alice
                .peer()
                .subscribe(SubscribeRequestParams::new(huge.as_str()))
                .await
                .unwrap_err();
            assert!(e.to_string().contains("at most 1024"), "{e}");
        }
        sessions.push(alice);
    }
    let grown = rss_kib(pid).saturating_sub(rss_before) / 1024;
    println!("RSS grew {grown} MiB after 200 refused subscriptions of 1 MiB URIs");
    assert!(grown < 100, "the server grew by {grown} MiB");

    // Well-formed URIs: at most 1024 in one session.
    let alice = &sessions[0];
    let doc = |n: usize| format!("agent-worker://workflows/team/main/documents/d{n}.md");
    for n in 0..1024 {
        alice
            .peer()
            .subscribe(SubscribeRequestParams::new(doc(n)))
            .await
            .unwrap();
    }
    let e = alice
        .peer()
        .subscribe(SubscribeRequestParams::new(doc(1024)))
        .await
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("1025 URIs in one subscription: at most 1024"),
        "{e}"
    );
    // A resource id is checked for its shape, not kept as given.
    let e = alice
        .peer()
        .subscribe(SubscribeRequestParams::new("agent-worker://resources/nope"))
        .await
        .unwrap_err();
    assert!(e.to_string().contains("unknown resource"), "{e}");
    s.stop().await;
}

/// A worktree agent's diff resource: a subscriber hears of each run's commit, and
/// reading it shows what the branch changed; a teammate may read it too.
#[tokio::test]
#[allow(deprecated)] // resources/subscribe is the legacy protocol's, on purpose
async fn a_subscriber_hears_of_each_commit_on_an_agent_s_branch() {
    let repo = common::repo::repository();
    let llm = common::repo::writer(42).await;
    let dir = tempfile::tempdir().unwrap();
    let s = HttpServer::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    common::repo::coder(&lead, "ada", repo.path(), &llm.url).await;
    let uri = "agent-worker://workflows/global/main/agents/ada/diff";
    let (watcher, mut rx) = watch(&s, &lead).await;
    subscribe(&watcher, uri).await;
    let a = ask(&lead, "ada", "make it 42", 45).await;
    assert_eq!(a["status"], "succeeded", "{a}");
    wait_for(&mut rx, uri).await;
    let r = watcher
        .peer()
        .read_resource(rmcp::model::ReadResourceRequestParams::new(uri))
        .await
        .unwrap();
    let text = serde_json::to_string(&r).unwrap();
    assert!(text.contains("lib.rs") && text.contains("{ 42 }"), "{text}");
    s.stop().await;
}
