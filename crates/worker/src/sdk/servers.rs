//! The agent's own MCP servers, for the sdk backend: the worker connects to each
//! (a stdio server is started in the agent's folder and stays in the worker's
//! process group, so it ends with the run) and offers its tools to the model as
//! `mcp__<server>__<tool>`, each call asked of the agent's permissions first
//! (class `mcp:<server>` / `mcp:<server>:<tool>`).

use super::ToolDef;
use crate::{Failure, Reporter};
use domain::protocol::{ErrorClass, McpServer};
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

/// How long a server may take to start and answer `initialize`, or to list its
/// tools (at most: within the run's own limit, below).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
/// The longest tool result passed to the model (as read_file's).
const MAX_RESULT: usize = 256 * 1024;

pub struct Servers {
    connected: Vec<(String, RunningService<RoleClient, ()>)>,
    /// How long any request to a server may take: a little inside the run's
    /// silence limit, so the run fails naming the server before the kernel stops
    /// it for silence.
    limit: Duration,
}

/// A request to a server that does not answer within its limit fails the run.
fn silent(server: &str, what: &str, limit: Duration) -> Failure {
    Failure::new(
        ErrorClass::Timeout,
        format!(
            "the agent's MCP server {server} did not answer {what} within {}s; check that it \
             works (run it by hand), or remove it from the agent's mcp_servers",
            limit.as_secs()
        ),
    )
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
        idle: Duration,
    ) -> Result<Self, Failure> {
        let limit = idle.saturating_sub((idle / 10).min(Duration::from_secs(30)));
        let start_limit = CONNECT_TIMEOUT.min(limit);
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
                    crate::sandbox::counted().map_err(fail)?;
                    let mut cmd = tokio::process::Command::new(&s.command);
                    crate::agent_otel(&mut cmd);
                    cmd.args(&s.args).envs(&s.env).current_dir(cwd);
                    for k in [domain::protocol::RUN_ENV, crate::cli::TOKEN_ENV] {
                        cmd.env_remove(k);
                    }
                    let (t, _) = TokioChildProcess::builder(cmd)
                        .stderr(std::process::Stdio::inherit())
                        .spawn()
                        .map_err(|e| fail(format!("{}: {e}", s.command)))?;
                    tokio::time::timeout(start_limit, ().serve(t)).await
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
                    tokio::time::timeout(start_limit, ().serve(t)).await
                }
            };
            let service = service
                .map_err(|_| silent(name, "initialize", start_limit))?
                .map_err(|e| fail(e.to_string()))?;
            report.progress(format!("connected to the MCP server {name}"));
            connected.push((name.clone(), service));
        }
        Ok(Self { connected, limit })
    }

    /// Every tool of every server, as the model sees it.
    pub async fn tools(&self) -> Result<Vec<ToolDef>, Failure> {
        let mut out = Vec::new();
        let limit = CONNECT_TIMEOUT.min(self.limit);
        for (name, s) in &self.connected {
            let tools = tokio::time::timeout(limit, s.list_all_tools())
                .await
                .map_err(|_| silent(name, "tools/list", limit))?
                .map_err(|e| {
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

    /// Calls a tool; the text and whether it is an error, as the model gets it. A
    /// server that does not answer within the limit fails the run; a result over
    /// [`MAX_RESULT`] is refused (the model is told its size).
    pub async fn call(
        &self,
        server: &str,
        tool: &str,
        args: Value,
    ) -> Result<(String, bool), Failure> {
        let Some((_, s)) = self.connected.iter().find(|(n, _)| n == server) else {
            return Ok((format!("no MCP server {server}"), true));
        };
        let args = match args {
            Value::Object(m) => m,
            _ => Default::default(),
        };
        let call = s.call_tool(CallToolRequestParams::new(tool.to_owned()).with_arguments(args));
        let r = match tokio::time::timeout(self.limit, call).await {
            Err(_) => return Err(silent(server, &format!("a call of {tool}"), self.limit)),
            Ok(Err(e)) => return Ok((format!("the call to {server} failed: {e}"), true)),
            Ok(Ok(r)) => r,
        };
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
        if text.len() > MAX_RESULT {
            let why = format!(
                "refused: {server}'s {tool} answered {} bytes, at most {MAX_RESULT}; ask it for less",
                text.len()
            );
            return Ok((why, true));
        }
        Ok((text, r.is_error == Some(true)))
    }

    pub async fn close(self) {
        for (_, s) in self.connected {
            let _ = s.cancel().await;
        }
    }
}
