//! MCP Tasks through rmcp's client: a lead client that declares the tasks
//! extension gets agent_ask and workflow_run back as tasks at once, and polls
//! tasks/get for the same result a plain call gives; an agent's session cannot
//! see the lead's task; a client without the extension gets plain results.

mod common;
use common::*;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ClientCapabilities, ClientConfig,
    GetTaskParams, Implementation, TaskPayload,
};
use rmcp::service::{ClientLifecycleMode, ClientServiceExt};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Value, json};
use std::time::Duration;

async fn as_task(
    c: &rmcp::service::RunningService<rmcp::RoleClient, ClientConfig>,
    tool: &str,
    args: Value,
) -> Value {
    let response = c
        .call_tool_once(
            CallToolRequestParams::new(tool.to_owned())
                .with_arguments(args.as_object().unwrap().clone()),
        )
        .await
        .unwrap();
    let create = match response {
        CallToolResponse::Task(create) => create,
        other => panic!("{tool}: expected a task, got {other:?}"),
    };
    let id = create.task.task_id.clone();
    for _ in 0..120 {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let info = c
            .peer()
            .get_task(GetTaskParams::new(id.clone()))
            .await
            .unwrap();
        if info.task.status().is_terminal() {
            return match info.task.payload {
                TaskPayload::Completed { result } => {
                    let r: CallToolResult = serde_json::from_value(Value::Object(result)).unwrap();
                    assert_ne!(r.is_error, Some(true), "{tool}: {r:?}");
                    r.structured_content.expect("structured result")
                }
                other => panic!("{tool}: the task did not complete: {other:?}"),
            };
        }
    }
    panic!("{tool}: the task did not end within 30 s");
}

#[tokio::test]
async fn agent_ask_and_workflow_run_run_as_tasks() {
    let dir = tempfile::tempdir().unwrap();
    let s = HttpServer::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    call(
        &lead,
        "agent_new",
        json!({"name": "echo", "backend": "mock"}),
    )
    .await
    .ok();

    let t = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(s.url.as_str()).auth_header(s.admin.clone()),
    );
    let tasks_client = ClientConfig::new(
        ClientCapabilities::builder().enable_tasks().build(),
        Implementation::from_build_env(),
    )
    .serve_with_lifecycle(t, ClientLifecycleMode::Initialize)
    .await
    .unwrap();

    let r = as_task(
        &tasks_client,
        "agent_ask",
        json!({"target": "echo", "message": "hello"}),
    )
    .await;
    assert_eq!(r["status"], "succeeded", "{r}");
    assert_eq!(r["reply"]["final_text"], "echo done", "{r}");

    let r = as_task(
        &tasks_client,
        "workflow_run",
        json!({"yaml": "name: t\nagents:\n  a: { backend: mock }\nkickoff: \"@a go\"\n"}),
    )
    .await;
    assert_eq!(r["status"], "completed", "{r}");

    // An agent's session cannot look at the lead's task.
    let create = tasks_client
        .call_tool_once(
            CallToolRequestParams::new("agent_ask").with_arguments(
                json!({"target": "echo", "message": "again"})
                    .as_object()
                    .unwrap()
                    .clone(),
            ),
        )
        .await
        .unwrap();
    let CallToolResponse::Task(create) = create else {
        panic!("expected a task")
    };
    new_agents(&lead, "@global:main", &["peer"]).await;
    let t = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(s.url.as_str()).auth_header(
            call(&lead, "agent_join", json!({"target": "peer"}))
                .await
                .ok()["token"]
                .as_str()
                .unwrap()
                .to_owned(),
        ),
    );
    let agent = ClientConfig::new(
        ClientCapabilities::builder().enable_tasks().build(),
        Implementation::from_build_env(),
    )
    .serve_with_lifecycle(t, ClientLifecycleMode::Initialize)
    .await
    .unwrap();
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
