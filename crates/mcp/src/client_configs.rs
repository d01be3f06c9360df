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

/// How a client launches agent-worker on stdio as the agent: the program, its
/// arguments (`--data-dir DIR --token-env AGENT_WORKER_AGENT_TOKEN`) and the token
/// in the environment (never on the command line, which every user of the machine
/// sees). The launch relays to the data dir's kernel, starting one if none runs, so
/// it needs no port: it works across the kernel's idle exits and restarts.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct StdioLaunch {
    pub command: String,
    pub args: Vec<String>,
    pub env: std::collections::BTreeMap<String, String>,
    /// Ready-to-paste configuration of that launch for the clients that start stdio servers.
    pub configs: StdioConfigs,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct StdioConfigs {
    /// Shell command for Claude Code.
    pub claude_code: String,
    /// JSON for claude_desktop_config.json.
    pub claude_desktop: String,
    /// TOML for ~/.codex/config.toml.
    pub codex: String,
    /// JSON for .cursor/mcp.json (or ~/.cursor/mcp.json).
    pub cursor: String,
    /// JSON for .vscode/mcp.json.
    pub vscode: String,
    /// JSON for .gemini/settings.json.
    pub gemini: String,
}

pub fn for_stdio(server_name: &str, program: &str, data_dir: &str, token: &str) -> StdioLaunch {
    let var = kernel::AGENT_TOKEN_ENV;
    let args: Vec<String> = vec![
        "--data-dir".into(),
        data_dir.into(),
        "--token-env".into(),
        var.into(),
    ];
    let env = std::collections::BTreeMap::from([(var.to_owned(), token.to_owned())]);
    let pretty = |v: serde_json::Value| serde_json::to_string_pretty(&v).unwrap_or_default();
    let server = json!({"command": program, "args": args, "env": env});
    let with = |extra: serde_json::Value| {
        let mut s = server.clone();
        if let (Some(s), Some(extra)) = (s.as_object_mut(), extra.as_object()) {
            s.extend(extra.clone());
        }
        s
    };
    // TOML basic strings accept JSON's string escapes.
    let toml = |s: &str| serde_json::to_string(s).unwrap_or_default();
    let toml_args: Vec<String> = args.iter().map(|a| toml(a)).collect();
    let shell_args: Vec<String> = args.iter().map(|a| sh_quote(a)).collect();
    StdioLaunch {
        configs: StdioConfigs {
            claude_code: format!(
                "claude mcp add {server_name} --env {var}={} -- {} {}",
                sh_quote(token),
                sh_quote(program),
                shell_args.join(" ")
            ),
            claude_desktop: pretty(json!({"mcpServers": {server_name: server}})),
            codex: format!(
                "[mcp_servers.{server_name}]\ncommand = {}\nargs = [{}]\nenv = {{ {var} = {} }}\n\
                 default_tools_approval_mode = \"approve\"\n",
                toml(program),
                toml_args.join(", "),
                toml(token)
            ),
            cursor: pretty(json!({"mcpServers": {server_name: server}})),
            vscode: pretty(json!({"servers": {server_name: with(json!({"type": "stdio"}))}})),
            gemini: pretty(json!({"mcpServers": {server_name: with(json!({"trust": true}))}})),
        },
        command: program.to_owned(),
        args,
        env,
    }
}

/// A word for a POSIX shell: as it is when it needs no quoting, else single-quoted.
fn sh_quote(s: &str) -> String {
    let plain = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:=@%+,".contains(c));
    if plain {
        s.to_owned()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stdio_configs_carry_the_token_in_the_environment() {
        let l = for_stdio(
            "agent-worker-bob",
            "/opt/a w/agent-worker",
            "/d it's",
            "awagent_x",
        );
        assert_eq!(
            l.args,
            [
                "--data-dir",
                "/d it's",
                "--token-env",
                "AGENT_WORKER_AGENT_TOKEN"
            ]
        );
        assert_eq!(l.env["AGENT_WORKER_AGENT_TOKEN"], "awagent_x");
        assert_eq!(
            l.configs.claude_code,
            "claude mcp add agent-worker-bob --env AGENT_WORKER_AGENT_TOKEN=awagent_x -- \
             '/opt/a w/agent-worker' --data-dir '/d it'\\''s' --token-env AGENT_WORKER_AGENT_TOKEN"
        );
        assert!(l.configs.codex.contains(
            "args = [\"--data-dir\", \"/d it's\", \"--token-env\", \"AGENT_WORKER_AGENT_TOKEN\"]\n\
             env = { AGENT_WORKER_AGENT_TOKEN = \"awagent_x\" }"
        ), "{}", l.configs.codex);
        for json in [
            &l.configs.claude_desktop,
            &l.configs.cursor,
            &l.configs.vscode,
            &l.configs.gemini,
        ] {
            let v: serde_json::Value = serde_json::from_str(json).unwrap();
            let s = v
                .pointer("/mcpServers/agent-worker-bob")
                .or(v.pointer("/servers/agent-worker-bob"))
                .unwrap();
            assert_eq!(s["command"], "/opt/a w/agent-worker");
            assert_eq!(s["env"]["AGENT_WORKER_AGENT_TOKEN"], "awagent_x");
            assert!(!json.contains("Authorization"));
        }
    }
}
