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

/// The most one request to the kernel may carry: the kernel's body limit
/// ([`domain::protocol::MAX_MCP_BODY`]). A larger request is refused by the kernel
/// before rmcp's client would hear an answer.
pub const MAX_REQUEST: usize = domain::protocol::MAX_MCP_BODY;
/// The most a tool call's arguments may be, leaving room for the request around
/// them (a permission request wraps a local call's arguments).
pub const MAX_ARGS: usize = MAX_REQUEST - 64 * 1024;

/// Why a call's arguments are too big to make, naming their size and the limit.
pub fn oversized(tool: &str, args: &Value) -> Option<String> {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0 += b.len();
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut n = Count(0);
    let _ = serde_json::to_writer(&mut n, args);
    (n.0 > MAX_ARGS).then(|| {
        format!(
            "refused: the {tool} call's arguments are {} bytes, at most {MAX_ARGS}; make smaller calls \
             (a big file in several smaller files, long content with resource_create in parts)",
            n.0
        )
    })
}

/// A connected session, as the run's agent.
pub struct KernelClient {
    service: RunningService<RoleClient, ()>,
}

/// The text of a failed tool call, as the model should see it.
#[derive(Debug, Clone)]
pub struct ToolFailed(pub String);

impl KernelClient {
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
        if let Some(why) = oversized(tool, &args) {
            return Ok(Err(ToolFailed(why)));
        }
        let args = match args {
            Value::Object(m) => m,
            _ => Default::default(),
        };
        let mut params = CallToolRequestParams::new(tool.to_owned()).with_arguments(args);
        let span = traced(&mut params, tool);
        let r = self.service.call_tool(params).await;
        let r = match r {
            Ok(r) => r,
            Err(e) => {
                let why = format!("calling {tool} failed: {e}");
                if let Some(s) = span {
                    s.fail(domain::redact::shown(&why));
                    s.end();
                }
                return Err(Failure::new(ErrorClass::Network, why));
            }
        };
        if let Some(s) = span {
            if r.is_error == Some(true) {
                s.set("error.type", "tool_error");
            }
            s.end();
        }
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

/// A client span for a call to the kernel, its context carried in the
/// request's `_meta` (SEP-414) so that the kernel's span of it nests here.
fn traced(params: &mut CallToolRequestParams, tool: &str) -> Option<telemetry::Span> {
    use rmcp::model::RequestParamsMeta;
    let span = telemetry::Span::start(
        format!("tools/call {tool}"),
        telemetry::SpanKind::Client,
        None,
        vec![
            telemetry::KeyValue::new("mcp.method.name", "tools/call"),
            telemetry::KeyValue::new("gen_ai.tool.name", tool.to_owned()),
        ],
    )?;
    for (k, v) in span.carrier() {
        match k {
            "traceparent" => params.set_traceparent(&v),
            _ => params.set_tracestate(&v),
        }
    }
    Some(span)
}

fn text_of(content: &[rmcp::model::ContentBlock]) -> String {
    content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    #[test]
    fn oversized_arguments_are_named_with_their_size() {
        let big = serde_json::json!({"content": "x".repeat(super::MAX_ARGS)});
        let why = super::oversized("write_file", &big).unwrap();
        assert!(
            why.contains(&format!("{} bytes", super::MAX_ARGS + 14)),
            "{why}"
        );
        assert!(super::oversized("write_file", &serde_json::json!({"a": 1})).is_none());
    }
}
