//! The worker's MCP client: the run's only way to the kernel's context.

use super::Failure;
use super::protocol::ErrorClass;
use rmcp::{
    RoleClient,
    model::{CallToolRequestParams, ProtocolVersion, Tool},
    service::{ClientLifecycleMode, ClientServiceExt, RunningService},
    transport::{
        StreamableHttpClientTransport, streamable_http_client::StreamableHttpClientTransportConfig,
    },
};
use serde_json::Value;

/// A connected session, as the run's agent.
pub struct Kernel {
    service: RunningService<RoleClient, ()>,
}

/// The text of a failed tool call, as the model should see it.
#[derive(Debug, Clone)]
pub struct ToolFailed(pub String);

impl Kernel {
    pub async fn connect(url: &str, token: &str) -> Result<Self, Failure> {
        // rmcp's default HTTP client disables connection pooling; a run makes many
        // calls, so keep connections.
        let http = reqwest::Client::builder()
            .build()
            .map_err(|e| Failure::new(ErrorClass::Other, format!("HTTP client: {e}")))?;
        let t = StreamableHttpClientTransport::with_client(
            http,
            StreamableHttpClientTransportConfig::with_uri(url.to_owned()).auth_header(token),
        );
        let lifecycle = ClientLifecycleMode::Discover {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        };
        let service = ().serve_with_lifecycle(t, lifecycle).await.map_err(|e| {
            Failure::new(
                ErrorClass::Network,
                format!("cannot reach the kernel at {url}: {e}"),
            )
        })?;
        Ok(Self { service })
    }

    /// Calls a tool. `Ok(Err)` is a tool error (the call reached the kernel, which
    /// refused it); `Err` is a transport failure.
    pub async fn call(
        &self,
        tool: &str,
        args: Value,
    ) -> Result<Result<Value, ToolFailed>, Failure> {
        let args = match args {
            Value::Object(m) => m,
            _ => Default::default(),
        };
        let r = self
            .service
            .call_tool(CallToolRequestParams::new(tool.to_owned()).with_arguments(args))
            .await
            .map_err(|e| {
                Failure::new(ErrorClass::Network, format!("calling {tool} failed: {e}"))
            })?;
        if r.is_error == Some(true) {
            return Ok(Err(ToolFailed(text_of(&r.content))));
        }
        Ok(Ok(r
            .structured_content
            .unwrap_or_else(|| Value::String(text_of(&r.content)))))
    }

    /// Calls a tool the run cannot do without; a refusal fails the run.
    pub async fn must(&self, tool: &str, args: Value) -> Result<Value, Failure> {
        self.call(tool, args).await?.map_err(|ToolFailed(e)| {
            Failure::new(ErrorClass::Other, format!("{tool} was refused: {e}"))
        })
    }

    pub async fn tools(&self) -> Result<Vec<Tool>, Failure> {
        self.service
            .list_all_tools()
            .await
            .map_err(|e| Failure::new(ErrorClass::Network, format!("listing tools failed: {e}")))
    }

    pub async fn close(self) {
        let _ = self.service.cancel().await;
    }
}

fn text_of(content: &[rmcp::model::ContentBlock]) -> String {
    content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n")
}
