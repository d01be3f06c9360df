//! Shared by the examples: an in-process kernel served over loopback HTTP, and a
//! thin MCP client over rmcp. Everything the examples do goes through MCP.
#![allow(dead_code)]

use agent_worker::kernel::Kernel;
use agent_worker::mcp::{Tools, http};
use rmcp::{
    RoleClient,
    model::{CallToolRequestParams, ProtocolVersion},
    service::{ClientLifecycleMode, ClientServiceExt, RunningService},
    transport::{
        StreamableHttpClientTransport, streamable_http_client::StreamableHttpClientTransportConfig,
    },
};
use serde_json::Value;
use std::path::Path;
use std::sync::Arc;

pub type Client = RunningService<RoleClient, ()>;

/// A kernel on `dir`, served at the returned loopback URL until the process ends.
pub async fn start_kernel(dir: &Path, admin: &str) -> (Arc<Kernel>, String) {
    let kernel = Kernel::open(dir, admin.to_owned())
        .await
        .expect("open kernel");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind loopback");
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    kernel.set_url(url.clone());
    let app = http::app(
        kernel.clone(),
        Tools::new(),
        tokio_util::sync::CancellationToken::new(),
    );
    tokio::spawn(async move { axum::serve(listener, app).await.expect("serve") });
    (kernel, url)
}

pub async fn connect(url: &str, token: &str, modern: bool) -> Client {
    let t = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(url).auth_header(token),
    );
    let life = if modern {
        ClientLifecycleMode::Discover {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        }
    } else {
        ClientLifecycleMode::Initialize
    };
    ().serve_with_lifecycle(t, life).await.expect("connect")
}

/// Calls a tool and returns its structured result; a tool error aborts with its text.
pub async fn call(c: &Client, tool: &str, args: Value) -> Value {
    let Value::Object(m) = args else {
        panic!("arguments must be an object")
    };
    let r = c
        .call_tool(CallToolRequestParams::new(tool.to_owned()).with_arguments(m))
        .await
        .expect(tool);
    if r.is_error == Some(true) {
        panic!("{tool} failed: {:?}", r.content);
    }
    r.structured_content.unwrap_or(Value::Null)
}
