//! MCP Tasks, as each protocol era says:
//! - 2026-07-28 (the tasks extension, SEP-2663): a request that declares the
//!   extension gets agent_ask and workflow_run back as tasks at once, and polls
//!   tasks/get for the same result a plain call gives; an agent's session cannot
//!   see the lead's task.
//! - 2025-11-25: a client that declared the extension at `initialize` but sent a
//!   plain tools/call gets the plain result with its structured content; a
//!   request with `params.task` (that era's task augmentation) gets a task, over
//!   HTTP and over stdio.

use crate::common;
use common::*;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ClientCapabilities, ClientConfig,
    GetTaskParams, Implementation, ProtocolVersion, TaskPayload,
};
use rmcp::service::{ClientLifecycleMode, ClientServiceExt, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Value, json};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

type TasksClient = RunningService<rmcp::RoleClient, ClientConfig>;

const WORKFLOW: &str = "name: t\nagents:\n  a: { backend: mock }\nkickoff: \"@a go\"\n";

/// A client of `token` that declares the tasks extension, in era `p`.
async fn tasks_client(s: &impl Served, token: &str, p: Proto) -> TasksClient {
    let t = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(s.url()).auth_header(token),
    );
    let lifecycle = match p {
        Proto::Legacy => ClientLifecycleMode::Initialize,
        Proto::Modern => ClientLifecycleMode::Discover {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        },
    };
    ClientConfig::new(
        ClientCapabilities::builder().enable_tasks().build(),
        Implementation::from_build_env(),
    )
    .serve_with_lifecycle(t, lifecycle)
    .await
    .unwrap()
}

async fn call_once(c: &TasksClient, tool: &str, args: Value) -> CallToolResponse {
    c.call_tool_once(
        CallToolRequestParams::new(tool.to_owned())
            .with_arguments(args.as_object().unwrap().clone()),
    )
    .await
    .unwrap()
}

async fn as_task(c: &TasksClient, tool: &str, args: Value) -> Value {
    let create = match call_once(c, tool, args).await {
        CallToolResponse::Task(create) => create,
        other => panic!("{tool}: expected a task, got {other:?}"),
    };
    let id = create.task.task_id.clone();
    match task_ended(c.peer(), &id, 30).await.payload {
        TaskPayload::Completed { result } => {
            let r: CallToolResult = serde_json::from_value(Value::Object(result)).unwrap();
            assert_ne!(r.is_error, Some(true), "{tool}: {r:?}");
            r.structured_content.expect("structured result")
        }
        other => panic!("{tool}: the task did not complete: {other:?}"),
    }
}

/// The plain answer, with its structured content.
async fn plain(c: &TasksClient, tool: &str, args: Value) -> Value {
    match call_once(c, tool, args).await {
        CallToolResponse::Complete(r) => {
            assert_ne!(r.is_error, Some(true), "{tool}: {r:?}");
            let what = format!("{r:?}");
            r.structured_content
                .unwrap_or_else(|| panic!("{tool}: no structured content: {what}"))
        }
        other => panic!("{tool}: expected the plain result, got {other:?}"),
    }
}

#[tokio::test]
async fn a_modern_client_gets_agent_ask_and_workflow_run_as_tasks() {
    let dir = tempfile::tempdir().unwrap();
    let s = InProcess::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    new_mock(&lead, "echo", json!([])).await;
    let tasks = tasks_client(&s, &s.admin, Proto::Modern).await;

    let r = as_task(
        &tasks,
        "agent_ask",
        json!({"target": "echo", "message": "hello"}),
    )
    .await;
    assert_eq!(r["status"], "succeeded", "{r}");
    assert_eq!(r["reply"]["final_text"], "echo done", "{r}");
    let r = as_task(&tasks, "workflow_run", json!({ "yaml": WORKFLOW })).await;
    assert_eq!(r["status"], "completed", "{r}");

    // An agent's session cannot look at the lead's task.
    let CallToolResponse::Task(create) = call_once(
        &tasks,
        "agent_ask",
        json!({"target": "echo", "message": "again"}),
    )
    .await
    else {
        panic!("expected a task")
    };
    new_agents(&lead, "@global:main", &["peer"]).await;
    let token = call(&lead, "agent_join", json!({"target": "peer"}))
        .await
        .ok()["token"]
        .as_str()
        .unwrap()
        .to_owned();
    let agent = tasks_client(&s, &token, Proto::Modern).await;
    let e = agent
        .peer()
        .get_task(GetTaskParams::new(create.task.task_id.clone()))
        .await
        .unwrap_err();
    assert!(e.to_string().contains("unknown task"), "{e}");

    // Without the extension: the plain answer, as before.
    let plain = ask(&lead, "echo", "plain", 30).await;
    assert_eq!(plain["status"], "succeeded", "{plain}");
    s.stop().await;
}

/// A 2025-11-25 initialize that declares the tasks extension.
fn init_with_tasks() -> Value {
    let mut init = raw_init("2025-11-25");
    init["params"]["capabilities"] = json!({"extensions": {"io.modelcontextprotocol/tasks": {}}});
    init
}

/// One request in a raw legacy session; its answer's `result`.
async fn raw_request(s: &impl Served, sid: &str, msg: Value) -> Value {
    let body = raw_post(s.url(), s.admin(), Some(sid))
        .json(&msg)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let answer = messages(&body)
        .into_iter()
        .find(|m| m["id"] == msg["id"])
        .unwrap_or_else(|| panic!("no answer to {msg}: {body}"));
    answer["result"].clone()
}

#[tokio::test]
async fn a_legacy_client_gets_a_task_only_when_its_request_asks_for_one() {
    let dir = tempfile::tempdir().unwrap();
    let s = InProcess::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    new_mock(&lead, "echo", json!([])).await;

    // Declared at initialize, not asked for: the plain result (as the MCP
    // Inspector, which declares the extension, expects).
    let legacy = tasks_client(&s, &s.admin, Proto::Legacy).await;
    let r = plain(
        &legacy,
        "agent_ask",
        json!({"target": "echo", "message": "hi"}),
    )
    .await;
    assert_eq!(r["reply"]["final_text"], "echo done", "{r}");
    let r = plain(
        &legacy,
        "workflow_run",
        json!({"yaml": WORKFLOW, "wait_seconds": 30}),
    )
    .await;
    assert_eq!(r["status"], "completed", "{r}");

    // Asked for with `params.task`: a task, polled with tasks/get.
    let r = raw_post(&s.url, &s.admin, None)
        .json(&init_with_tasks())
        .send()
        .await
        .unwrap();
    let sid = r.headers()["mcp-session-id"].to_str().unwrap().to_owned();
    let n = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    raw_post(&s.url, &s.admin, Some(&sid))
        .json(&n)
        .send()
        .await
        .unwrap();
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "agent_ask", "arguments": {"target": "echo", "message": "as a task"},
        "task": {"ttl": 60000}}});
    let created = raw_request(&s, &sid, call).await;
    let id = created["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("not a task: {created}"))
        .to_owned();
    assert!(created.get("structuredContent").is_none(), "{created}");
    let mut done = Value::Null;
    for n in 0..120 {
        let get = json!({"jsonrpc": "2.0", "id": 3 + n, "method": "tasks/get",
            "params": {"taskId": id}});
        done = raw_request(&s, &sid, get).await;
        if done["status"] != "working" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(
        done["result"]["structuredContent"]["reply"]["final_text"], "echo done",
        "{done}"
    );
    s.stop().await;
}

/// The same rule over stdio (a kernel in the foreground: no HTTP in between).
#[tokio::test]
async fn over_stdio_a_legacy_task_is_only_what_the_request_asked_for() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = foreground_kernel(dir.path());
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut send = async |msg: Value| {
        stdin
            .write_all(format!("{msg}\n").as_bytes())
            .await
            .unwrap();
        let Some(id) = msg.get("id").cloned() else {
            return Value::Null;
        };
        loop {
            let line = tokio::time::timeout(Duration::from_secs(30), stdout.next_line())
                .await
                .expect("an answer within 30 s")
                .unwrap()
                .expect("the server answered");
            let v: Value = serde_json::from_str(&line).unwrap();
            if v["id"] == id {
                return v["result"].clone();
            }
        }
    };
    send(init_with_tasks()).await;
    send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).await;
    let tool = |id: u32, name: &str, args: Value, task: bool| {
        let mut m = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": name, "arguments": args}});
        if task {
            m["params"]["task"] = json!({});
        }
        m
    };
    let r = send(tool(
        2,
        "agent_new",
        json!({"name": "echo", "backend": "mock"}),
        false,
    ))
    .await;
    assert_eq!(r["structuredContent"]["agent"]["name"], "echo", "{r}");
    let r = send(tool(
        3,
        "agent_ask",
        json!({"target": "echo", "message": "hi"}),
        false,
    ))
    .await;
    assert_eq!(
        r["structuredContent"]["reply"]["final_text"], "echo done",
        "{r}"
    );
    let r = send(tool(
        4,
        "agent_ask",
        json!({"target": "echo", "message": "t"}),
        true,
    ))
    .await;
    assert_eq!(r["resultType"], "task", "{r}");
    assert!(r["taskId"].is_string(), "{r}");
    child.kill().await.ok();
}
