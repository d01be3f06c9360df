//! The agent's own MCP servers, for the sdk backend: the worker connects to each
//! (a stdio server is started in the agent's folder and stays in the worker's
//! process group, so it ends with the run) and offers its tools to the model as
//! `mcp__<server>__<tool>`, each call asked of the agent's permissions first
//! (class `mcp:<server>` / `mcp:<server>:<tool>`).

use super::ToolDef;
use crate::worker::protocol::{ErrorClass, McpServer};
use crate::worker::{Failure, Reporter};
use rmcp::{
    RoleClient,
    model::CallToolRequestParams,
    service::{RunningService, ServiceExt},
    transport::{
        StreamableHttpClientTransport, TokioChildProcess,
        streamable_http_client::StreamableHttpClientTransportConfig,
    },
};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

/// How long a server may take to start and answer `initialize`.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

pub struct Servers {
    connected: Vec<(String, RunningService<RoleClient, ()>)>,
}

/// The model's name for a server's tool.
pub fn tool_name(server: &str, tool: &str) -> String {
    format!("mcp__{server}__{tool}")
}

impl Servers {
    /// Connects to every server; one that cannot be reached fails the run with its
    /// name and why (a missing program, a refused connection).
    pub async fn connect(
        servers: &BTreeMap<String, McpServer>,
        cwd: &Path,
        report: &Reporter,
    ) -> Result<Self, Failure> {
        let mut connected = Vec::new();
        for (name, spec) in servers {
            let fail = |e: String| {
                Failure::new(
                    ErrorClass::Other,
                    format!("the agent's MCP server {name} could not be started: {e}"),
                )
            };
            let service = match spec {
                McpServer::Stdio(s) => {
                    let mut cmd = tokio::process::Command::new(&s.command);
                    cmd.args(&s.args).envs(&s.env).current_dir(cwd);
                    for k in [
                        crate::worker::protocol::RUN_ENV,
                        crate::worker::cli::TOKEN_ENV,
                    ] {
                        cmd.env_remove(k);
                    }
                    let (t, _) = TokioChildProcess::builder(cmd)
                        .stderr(std::process::Stdio::inherit())
                        .spawn()
                        .map_err(|e| fail(format!("{}: {e}", s.command)))?;
                    tokio::time::timeout(CONNECT_TIMEOUT, ().serve(t)).await
                }
                McpServer::Http(h) => {
                    let mut headers = reqwest::header::HeaderMap::new();
                    for (k, v) in &h.headers {
                        let (Ok(k), Ok(v)) = (
                            reqwest::header::HeaderName::from_bytes(k.as_bytes()),
                            reqwest::header::HeaderValue::from_str(v),
                        ) else {
                            return Err(fail(format!("header {k:?} is not a valid HTTP header")));
                        };
                        headers.insert(k, v);
                    }
                    let http = reqwest::Client::builder()
                        .default_headers(headers)
                        .build()
                        .map_err(|e| fail(e.to_string()))?;
                    let t = StreamableHttpClientTransport::with_client(
                        http,
                        StreamableHttpClientTransportConfig::with_uri(h.url.clone()),
                    );
                    tokio::time::timeout(CONNECT_TIMEOUT, ().serve(t)).await
                }
            };
            let service = service
                .map_err(|_| fail(format!("no answer within {}s", CONNECT_TIMEOUT.as_secs())))?
                .map_err(|e| fail(e.to_string()))?;
            report.progress(format!("connected to the MCP server {name}"));
            connected.push((name.clone(), service));
        }
        Ok(Self { connected })
    }

    /// Every tool of every server, as the model sees it.
    pub async fn tools(&self) -> Result<Vec<ToolDef>, Failure> {
        let mut out = Vec::new();
        for (name, s) in &self.connected {
            let tools = s.list_all_tools().await.map_err(|e| {
                Failure::new(
                    ErrorClass::Other,
                    format!("listing the tools of the MCP server {name} failed: {e}"),
                )
            })?;
            for t in tools {
                out.push(ToolDef {
                    name: tool_name(name, &t.name),
                    description: format!(
                        "[{name}] {}",
                        t.description.as_deref().unwrap_or_default()
                    ),
                    schema: Value::Object((*t.input_schema).clone()),
                });
            }
        }
        Ok(out)
    }

    /// The server and tool a model tool name stands for, if it is one of ours.
    pub fn resolve<'a>(&self, model_name: &'a str) -> Option<(String, &'a str)> {
        let rest = model_name.strip_prefix("mcp__")?;
        self.connected.iter().find_map(|(name, _)| {
            let tool = rest.strip_prefix(name.as_str())?.strip_prefix("__")?;
            Some((name.clone(), tool))
        })
    }

    /// Calls a tool; the text and whether it is an error, as the model gets it.
    pub async fn call(&self, server: &str, tool: &str, args: Value) -> (String, bool) {
        let Some((_, s)) = self.connected.iter().find(|(n, _)| n == server) else {
            return (format!("no MCP server {server}"), true);
        };
        let args = match args {
            Value::Object(m) => m,
            _ => Default::default(),
        };
        match s
            .call_tool(CallToolRequestParams::new(tool.to_owned()).with_arguments(args))
            .await
        {
            Err(e) => (format!("the call to {server} failed: {e}"), true),
            Ok(r) => {
                let text = r
                    .structured_content
                    .map(|v| v.to_string())
                    .unwrap_or_else(|| {
                        r.content
                            .iter()
                            .filter_map(|c| c.as_text().map(|t| t.text.clone()))
                            .collect::<Vec<_>>()
                            .join("\n")
                    });
                (text, r.is_error == Some(true))
            }
        }
    }

    pub async fn close(self) {
        for (_, s) in self.connected {
            let _ = s.cancel().await;
        }
    }
}
