//! Ready-to-paste MCP client configuration for an HTTP endpoint and a bearer token,
//! for the clients people actually use. Used by `agent_join`.

use schemars::JsonSchema;
use serde::Serialize;
use serde_json::json;

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ClientConfigs {
    /// Shell command for Claude Code.
    pub claude_code: String,
    /// TOML for ~/.codex/config.toml.
    pub codex: String,
    /// JSON for .cursor/mcp.json (or ~/.cursor/mcp.json).
    pub cursor: String,
    /// JSON for .vscode/mcp.json.
    pub vscode: String,
    /// JSON for .gemini/settings.json.
    pub gemini: String,
    /// Shell command that lists the tools with the MCP Inspector CLI (Node 22 or newer).
    pub inspector: String,
}

pub fn for_http(server_name: &str, url: &str, token: &str) -> ClientConfigs {
    let auth = format!("Bearer {token}");
    let pretty = |v: serde_json::Value| serde_json::to_string_pretty(&v).unwrap_or_default();
    ClientConfigs {
        claude_code: format!(
            "claude mcp add --transport http {server_name} {url} --header \"Authorization: {auth}\""
        ),
        codex: format!(
            "[mcp_servers.{server_name}]\nurl = \"{url}\"\nhttp_headers = {{ Authorization = \"{auth}\" }}\n\
             default_tools_approval_mode = \"approve\"\n"
        ),
        cursor: pretty(
            json!({"mcpServers": {server_name: {"url": url, "headers": {"Authorization": auth}}}}),
        ),
        vscode: pretty(
            json!({"servers": {server_name: {"type": "http", "url": url, "headers": {"Authorization": auth}}}}),
        ),
        gemini: pretty(
            json!({"mcpServers": {server_name: {"httpUrl": url, "headers": {"Authorization": auth}, "trust": true}}}),
        ),
        inspector: format!(
            "npx -y @modelcontextprotocol/inspector --cli {url} --transport http --header \"Authorization: {auth}\" --method tools/list"
        ),
    }
}
