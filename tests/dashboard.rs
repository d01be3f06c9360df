//! The team dashboard (an MCP App) as the protocol shows it, through rmcp's client
//! in both eras: offered only to a lead whose client declares
//! `io.modelcontextprotocol/ui` (the `ui://` resource, its CSP, the tools that open
//! it, `dashboard_open` under the dashboard's title, the app-only
//! `dashboard_watch`), unchanged for every other client, never to agents; and
//! `dashboard_watch` showing an instance live (a message within a second of its
//! sending, an approval a contract asked for and the agent waiting on it, the
//! lead's decision).

use crate::common;
use common::*;
use rmcp::ClientServiceExt;
use rmcp::model::{
    ClientCapabilities, ClientConfig, ExtensionCapabilities, Implementation, ProtocolVersion,
    ReadResourceRequestParams, ResourceContents,
};
use rmcp::service::{ClientLifecycleMode, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{RoleClient, ServiceError};
use serde_json::{Value, json};
use std::path::Path;
use std::time::{Duration, Instant};

const URI: &str = "ui://agent-worker/dashboard";
pub(crate) const MIME: &str = "text/html;profile=mcp-app";

pub(crate) type UiClient = RunningService<RoleClient, ClientConfig>;

/// The capabilities of a host that renders MCP Apps of `mime_types`.
fn ui_capabilities(mime_types: Value) -> ClientConfig {
    let mut ext = ExtensionCapabilities::new();
    ext.insert(
        "io.modelcontextprotocol/ui".into(),
        serde_json::from_value(json!({ "mimeTypes": mime_types })).unwrap(),
    );
    ClientConfig::new(
        ClientCapabilities::builder()
            .enable_extensions_with(ext)
            .build(),
        Implementation::from_build_env(),
    )
}

/// A session of `token` whose client renders MCP Apps of `mime_types`.
pub(crate) async fn ui_client(
    s: &impl Served,
    token: &str,
    p: Proto,
    mime_types: Value,
) -> UiClient {
    let t = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(s.url()).auth_header(token),
    );
    let lifecycle = match p {
        Proto::Legacy => ClientLifecycleMode::Initialize,
        Proto::Modern => ClientLifecycleMode::Discover {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        },
    };
    ui_capabilities(mime_types)
        .serve_with_lifecycle(t, lifecycle)
        .await
        .unwrap()
}

async fn tools_json(c: &rmcp::Peer<RoleClient>) -> Vec<Value> {
    c.list_all_tools()
        .await
        .unwrap()
        .into_iter()
        .map(|t| serde_json::to_value(t).unwrap())
        .collect()
}

fn named<'a>(tools: &'a [Value], name: &str) -> Option<&'a Value> {
    tools.iter().find(|t| t["name"] == name)
}

async fn read(
    c: &rmcp::Peer<RoleClient>,
    uri: &str,
) -> Result<Vec<ResourceContents>, ServiceError> {
    c.read_resource(ReadResourceRequestParams::new(uri))
        .await
        .map(|r| r.contents)
}

/// The ext-apps SDK's own schema (the version the page is built with, installed by
/// scripts/ui-build) accepts every `_meta.ui` offered (tests/python/app_check.py).
fn sdk_schema_accepts(tools: &[Value], contents: &[ResourceContents]) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let schema = root.join(
        "crates/mcp/ui/node_modules/@modelcontextprotocol/ext-apps/dist/src/generated/schema.json",
    );
    if !common::heavy::on() {
        eprintln!("skipping the ext-apps schema check (heavy: the Python SDK's virtualenv)");
        return;
    }
    if !schema.exists() {
        common::heavy::missing(&schema.display().to_string(), "scripts/ui-build");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let offer = dir.path().join("offer.json");
    let body = json!({"tools": tools, "contents": contents, "uri": URI});
    std::fs::write(&offer, serde_json::to_vec(&body).unwrap()).unwrap();
    let out = std::process::Command::new(python())
        .arg(root.join("tests/python/app_check.py"))
        .arg(&schema)
        .arg(&offer)
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&out.stdout);
    eprintln!("{report}");
    assert!(
        out.status.success(),
        "{report}{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test]
async fn a_host_that_renders_apps_is_offered_the_dashboard_in_both_eras() {
    let dir = tempfile::tempdir().unwrap();
    let s = InProcess::start(dir.path()).await;
    for p in [Proto::Legacy, Proto::Modern] {
        let host = ui_client(&s, &s.admin, p, json!([MIME])).await;
        let tools = tools_json(&host).await;
        for opener in [
            "dashboard_open",
            "workflow_run",
            "workflow_status",
            "agent_ask",
            "workflow_list",
        ] {
            let t = named(&tools, opener).unwrap();
            assert_eq!(t["_meta"]["ui"]["resourceUri"], URI, "{p:?} {t}");
        }
        // A host titles the app's panel with the tool that opened it.
        let open = named(&tools, "dashboard_open").expect("the dashboard's own tool is listed");
        assert_eq!(open["title"], "Team dashboard", "{open}");
        assert!(open["_meta"]["ui"].get("visibility").is_none(), "{open}");
        let watch = named(&tools, "dashboard_watch").expect("the app-only tool is listed");
        assert_eq!(
            watch["_meta"]["ui"]["visibility"],
            json!(["app"]),
            "{watch}"
        );
        assert!(
            named(&tools, "channel_send")
                .unwrap()
                .get("_meta")
                .is_none()
        );

        let listed = host.list_resources(None).await.unwrap().resources;
        let ui = serde_json::to_value(&listed[0]).unwrap();
        assert_eq!(ui["uri"], URI, "{p:?}: {ui}");
        assert_eq!(ui["mimeType"], MIME, "{ui}");
        let contents = read(&host, URI).await.unwrap();
        let page = serde_json::to_value(&contents[0]).unwrap();
        assert_eq!(page["mimeType"], MIME);
        let csp = &page["_meta"]["ui"]["csp"];
        for key in [
            "connectDomains",
            "resourceDomains",
            "frameDomains",
            "baseUriDomains",
        ] {
            assert_eq!(csp[key], json!([]), "no outside domain: {csp}");
        }
        if matches!(p, Proto::Legacy) {
            sdk_schema_accepts(&tools, &contents);
        }
        let html = page["text"].as_str().unwrap();
        assert!(
            html.starts_with("<!doctype html>"),
            "{}",
            &html[..80.min(html.len())]
        );
        assert!(
            html.contains("dashboard_watch"),
            "the page polls the app-only tool"
        );
        for outside in ["src=\"http", "href=\"http", "src=\"//", "@import"] {
            assert!(
                !html.contains(outside),
                "the page loads nothing from outside: {outside}"
            );
        }
        host.cancel().await.unwrap();
    }
    s.stop().await;
}

/// The dashboard's tools answered as tools that do not exist.
async fn not_found(c: &rmcp::Peer<RoleClient>) {
    for tool in ["dashboard_watch", "dashboard_open"] {
        match try_call(c, tool, json!({})).await {
            Err(e) => assert!(e.to_string().contains("tool not found"), "{e}"),
            Ok(o) => panic!("{tool} answered: {o:?}"),
        }
    }
}

#[tokio::test]
async fn other_clients_and_agents_see_no_dashboard() {
    let dir = tempfile::tempdir().unwrap();
    let s = InProcess::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    let plain = s.client(&s.admin, Proto::Modern).await;
    // A host that renders some other kind of app only.
    let other_mime = ui_client(&s, &s.admin, Proto::Legacy, json!(["text/x-other"])).await;
    for c in [&*lead, &*plain, &*other_mime] {
        let tools = tools_json(c).await;
        assert!(named(&tools, "dashboard_watch").is_none());
        assert!(named(&tools, "dashboard_open").is_none());
        assert!(
            tools.iter().all(|t| t.get("_meta").is_none()),
            "no _meta on any tool"
        );
        let listed = c.list_resources(None).await.unwrap().resources;
        assert!(listed.iter().all(|r| r.uri != URI));
        not_found(c).await;
    }
    // An agent, even from a host that renders apps.
    new_agents(&lead, "@global:main", &["alice"]).await;
    let token = call(&lead, "agent_join", json!({"target": "alice"}))
        .await
        .ok();
    let token = token["token"].as_str().unwrap().to_owned();
    let agent = ui_client(&s, &token, Proto::Modern, json!([MIME])).await;
    let tools = tools_json(&agent).await;
    assert!(named(&tools, "dashboard_watch").is_none());
    assert!(named(&tools, "dashboard_open").is_none());
    assert!(tools.iter().all(|t| t.get("_meta").is_none()));
    not_found(&agent).await;
    assert!(read(&agent, URI).await.is_err(), "the page is the lead's");
    s.stop().await;
}

/// A mock agent whose write waits for the lead's approval, in `@dash:main`.
async fn team_with_an_approval(lead: &rmcp::Peer<RoleClient>) {
    let yaml = "name: dash\nagents:\n  coder:\n    backend: mock\n    permissions: edit\n    mock:\n      - write: {path: out.txt, content: hi}\nkickoff: \"@coder go\"\n";
    call(
        lead,
        "contract_set",
        json!({"name": "edits-need-me", "when": {"event": "tool_request", "tool": "edit"},
               "then": {"action": "require_approval", "timeout": "5m"}}),
    )
    .await
    .ok();
    call(lead, "workflow_run", json!({"yaml": yaml})).await.ok();
}

/// `@dash:main` followed as the app follows it: each call passes back the
/// version shown (`seen`) and the last message (`since`), so it waits for news.
struct Follow {
    seen: Value,
    since: Value,
    wait: u64,
}

impl Default for Follow {
    fn default() -> Self {
        Self {
            seen: Value::Null,
            since: Value::Null,
            wait: 5,
        }
    }
}

impl Follow {
    /// Follows until a view satisfies `done` (within `seconds`): that view.
    async fn until(
        &mut self,
        host: &rmcp::Peer<RoleClient>,
        seconds: u64,
        mut done: impl FnMut(&Value) -> bool,
    ) -> Value {
        let deadline = Instant::now() + Duration::from_secs(seconds);
        loop {
            let args = json!({"workflow": "@dash:main", "seen": self.seen, "since": self.since,
                              "wait_seconds": self.wait});
            let v = watch(host, args).await;
            self.seen = v["version"].clone();
            if let Some(m) = v["messages"].as_array().unwrap().last() {
                self.since = m["id"].clone();
            }
            if done(&v) {
                return v;
            }
            assert!(
                Instant::now() < deadline,
                "not shown within {seconds} s: {v}"
            );
        }
    }
}

async fn watch(c: &rmcp::Peer<RoleClient>, args: Value) -> Value {
    call(c, "dashboard_watch", args).await.ok()
}

/// The dashboard's view once the approval the contract asked for shows, the coder
/// running and waiting on it.
async fn approval_shown(host: &rmcp::Peer<RoleClient>) -> Value {
    let mut app = Follow::default();
    app.until(host, 30, |v| {
        v["approvals"].as_array().is_some_and(|a| !a.is_empty())
    })
    .await;
    // The whole channel so far, for the caller.
    watch(host, json!({"workflow": "@dash:main", "wait_seconds": 0})).await
}

/// Watches from `snap` until a call returns with nothing new: the version and
/// the last message id it leaves at.
async fn settled(host: &rmcp::Peer<RoleClient>, snap: &Value) -> (Value, Value) {
    let mut app = Follow {
        seen: snap["version"].clone(),
        since: snap["messages"].as_array().unwrap().last().unwrap()["id"].clone(),
        wait: 1,
    };
    // Settled: a call that waited and came back with nothing new.
    let mut before = app.seen.clone();
    app.until(host, 20, |v| {
        let quiet = v["version"] == before && v["messages"] == json!([]);
        before = v["version"].clone();
        quiet
    })
    .await;
    (app.seen, app.since)
}

/// Watches until approval `id` shows approved and the coder's run succeeded.
async fn decided_shown(host: &rmcp::Peer<RoleClient>, id: i64) {
    let mut app = Follow::default();
    let v = app
        .until(host, 30, |v| {
            let a = v["approvals"]
                .as_array()
                .unwrap()
                .iter()
                .find(|a| a["id"] == id);
            a.is_some_and(|a| a["state"] == "approved") && v["agents"][0]["state"] == "idle"
        })
        .await;
    assert!(v["agents"][0].get("waiting_for").is_none(), "{v}");
    let run = &v["agents"][0]["runs"][0];
    assert_eq!(run["status"], "succeeded", "{v}");
    assert!(run["duration_ms"].is_number(), "{run}");
}

#[tokio::test]
async fn the_watch_shows_an_instance_live_and_waits_for_what_changes() {
    let dir = tempfile::tempdir().unwrap();
    let s = InProcess::start(dir.path()).await;
    let host = ui_client(&s, &s.admin, Proto::Legacy, json!([MIME])).await;
    team_with_an_approval(&host).await;

    let snap = approval_shown(&host).await;
    let approval = &snap["approvals"][0];
    assert_eq!(approval["state"], "pending", "{approval}");
    // The coder's run is held for it: the dashboard says so, not just "running".
    let coder = &snap["agents"][0];
    assert_eq!(coder["waiting_for"]["approval"], approval["id"], "{coder}");
    assert_eq!(coder["waiting_for"]["since"], approval["since"], "{coder}");
    let opened = call(&host, "dashboard_open", json!({})).await.ok();
    assert_eq!(
        opened,
        json!({"workflow": "@dash:main", "status": "running"}),
        "the newest running instance"
    );
    assert!(
        snap["messages"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["content"] == "@coder go"),
        "{snap}"
    );

    // Nothing changed: the call waits. First the view settles (the run asked
    // and waits), then a wait is held until a message ends it within a second.
    let (seen, last) = settled(&host, &snap).await;
    let args = json!({"workflow": "@dash:main", "since": last, "seen": seen, "wait_seconds": 20});
    let mut waiting = tokio::spawn({
        let peer = host.peer().clone();
        async move { watch(&peer, args).await }
    });
    let early = tokio::time::timeout(Duration::from_millis(300), &mut waiting).await;
    assert!(
        early.is_err(),
        "with nothing new, the call waits: {early:?}"
    );
    let sent_at = Instant::now();
    call(
        &host,
        "channel_send",
        json!({"workflow": "@dash:main", "message": "status please"}),
    )
    .await
    .ok();
    let v = waiting.await.unwrap();
    assert!(
        sent_at.elapsed() < Duration::from_secs(1),
        "the message ended the wait at once"
    );
    let texts: Vec<&str> = v["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["content"].as_str())
        .collect();
    assert_eq!(
        texts,
        ["status please"],
        "only what came after `since`: {v}"
    );

    // The lead's decision (the app's Approve is this call) shows as approved.
    let id = approval["id"].as_i64().unwrap();
    call(
        &host,
        "approval_decide",
        json!({"id": id, "decision": "approve"}),
    )
    .await
    .ok();
    decided_shown(&host, id).await;
    let e = call(&host, "dashboard_watch", json!({"wait_seconds": 51}))
        .await
        .err();
    assert!(e.contains("wait_seconds is at most 50"), "{e}");
    for tool in ["dashboard_watch", "dashboard_open"] {
        let e = call(&host, tool, json!({"workflow": "@nope:main"}))
            .await
            .err();
        assert!(e.contains("nope"), "{tool}: {e}");
    }
    let e = call(&host, "dashboard_watch", json!({"bogus": 1}))
        .await
        .err();
    assert!(e.contains("bogus"), "{e}");
    host.cancel().await.unwrap();
    s.stop().await;
}

#[tokio::test]
async fn a_host_over_stdio_is_offered_the_dashboard_too() {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = tokio::process::Command::new(BIN);
    cmd.arg("--data-dir").arg(dir.path()).arg("--foreground");
    cmd.envs(store::env_for(dir.path()));
    let (t, _) = rmcp::transport::TokioChildProcess::builder(cmd)
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let host = ui_capabilities(json!([MIME]))
        .serve_with_lifecycle(t, ClientLifecycleMode::Initialize)
        .await
        .unwrap();
    let tools = tools_json(&host).await;
    assert!(named(&tools, "dashboard_watch").is_some());
    let page = serde_json::to_value(&read(&host, URI).await.unwrap()[0]).unwrap();
    assert_eq!(page["mimeType"], MIME);
    let v = call(&host, "dashboard_watch", json!({"wait_seconds": 0}))
        .await
        .ok();
    assert!(v["version"].is_string(), "{v}");
    host.cancel().await.unwrap();
}

#[tokio::test]
async fn the_page_is_not_read_by_a_lead_whose_client_does_not_render_apps() {
    let dir = tempfile::tempdir().unwrap();
    let s = InProcess::start(dir.path()).await;
    let plain = s.client(&s.admin, Proto::Legacy).await;
    let e = read(&plain, URI).await.unwrap_err().to_string();
    assert!(e.contains("not found") || e.contains("unknown"), "{e}");
    plain.cancel().await.unwrap();
    s.stop().await;
}

#[tokio::test]
async fn the_dashboard_shows_the_channel_as_the_lead_reads_it() {
    let dir = tempfile::tempdir().unwrap();
    let s = InProcess::start(dir.path()).await;
    let host = ui_client(&s, &s.admin, Proto::Modern, json!([MIME])).await;
    new_agents(&host, "@global:main", &["alice", "bob"]).await;
    let j = call(&host, "agent_join", json!({"target": "alice"}))
        .await
        .ok();
    let alice = s.client(j["token"].as_str().unwrap(), Proto::Modern).await;
    call(
        &alice,
        "channel_send",
        json!({"message": "between us", "to": "bob"}),
    )
    .await
    .ok();
    call(&alice, "channel_send", json!({"message": "hello all"}))
        .await
        .ok();
    call(
        &alice,
        "channel_send",
        json!({"message": "for the lead", "to": "user"}),
    )
    .await
    .ok();
    let v = watch(
        &host,
        json!({"workflow": "@global:main", "wait_seconds": 0}),
    )
    .await;
    let shown: Vec<&str> = v["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["content"].as_str())
        .collect();
    let read = call(&host, "channel_read", json!({"workflow": "@global:main"}))
        .await
        .ok();
    let lead_reads: Vec<&str> = read["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["content"].as_str())
        .collect();
    assert_eq!(shown, lead_reads, "{v}");
    assert!(
        !shown.contains(&"between us"),
        "another pair's direct message: {shown:?}"
    );
    assert!(
        shown.contains(&"for the lead") && shown.contains(&"hello all"),
        "{shown:?}"
    );
    alice.cancel().await.unwrap();
    host.cancel().await.unwrap();
    s.stop().await;
}
