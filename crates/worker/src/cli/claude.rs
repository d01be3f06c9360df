//! Claude Code: `claude -p` with a stream-json event stream.
//!
//! MCP comes from a private config file (`--mcp-config` + `--strict-mcp-config`, so
//! project servers needing approval are not consulted): the team server and the
//! agent's own. The agent's permissions become a `--permission-mode` and
//! `--allowedTools` / `--disallowedTools` rules (see `permissions::backends`); in
//! `-p` a tool not allowed is denied, not prompted, and the result lists it;
//! the system prompt is appended to Claude Code's own; `--resume` continues the
//! agent's conversation. Claude Code retries even 401s for minutes, so retries are
//! capped with `CLAUDE_CODE_MAX_RETRIES`.

use super::{
    Events, Invocation, ResultEnd, SERVER, Scratch, call_detail, env_set, num, own_servers, probe,
    str_at,
};
use crate::{Failure, Reporter, Run, prompt};
use domain::permissions;
use domain::protocol::{McpServer, Report, RunConfig, Usage};
use os::process::Finished;
use serde_json::{Value, json};

pub async fn auth_missing() -> Option<String> {
    if [
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_AUTH_TOKEN",
        "CLAUDE_CODE_OAUTH_TOKEN",
    ]
    .iter()
    .any(|k| env_set(k))
    {
        return None;
    }
    match probe("claude", &["auth", "status"]).await {
        Some((true, _)) => None,
        Some((false, out)) => Some(format!(
            "Claude Code is not logged in ({out}); run `claude` and /login, or set ANTHROPIC_API_KEY (or CLAUDE_CODE_OAUTH_TOKEN from `claude setup-token`) in the agent's env"
        )),
        None => Some("`claude auth status` did not answer; check the Claude Code install".into()),
    }
}

/// The `--mcp-config` file: the kernel, then the agent's own servers.
fn mcp_config(cfg: &RunConfig, own: &[(&String, &McpServer)]) -> serde_json::Value {
    let mut servers = serde_json::Map::new();
    servers.insert(
        SERVER.into(),
        json!({
            "type": "http",
            "url": cfg.url,
            "headers": { "Authorization": format!("Bearer {}", cfg.token) },
        }),
    );
    // In print mode Claude Code connects servers in the background and runs the turn
    // without those not ready yet: a slow stdio server's tools were missing from the
    // model's first request. `alwaysLoad` servers it waits for (up to
    // MCP_CONNECT_TIMEOUT_MS), so the agent's own servers are part of the run.
    for (name, server) in own {
        servers.insert(
            (*name).clone(),
            match server {
                McpServer::Stdio(s) => json!({"type": "stdio", "command": s.command,
                    "args": s.args, "env": s.env, "alwaysLoad": true}),
                McpServer::Http(h) => {
                    json!({"type": "http", "url": h.url, "headers": h.headers, "alwaysLoad": true})
                }
            },
        );
    }
    json!({ "mcpServers": servers })
}

pub fn invocation(
    run: &Run<'_>,
    session: Option<&str>,
    scratch: &Scratch,
) -> Result<Invocation, Failure> {
    let cfg = run.cfg;
    let own = own_servers(cfg);
    // The file holds the run's token and the servers' secrets: private to this user.
    let mcp_file = scratch.write("mcp.json", &mcp_config(cfg, &own).to_string())?;
    let names: Vec<&str> = own.iter().map(|(n, _)| n.as_str()).collect();
    let governed: Vec<permissions::Kind> = cfg
        .governed
        .iter()
        .filter_map(|k| permissions::Kind::parse(k))
        .collect();
    let rules = if governed.is_empty() {
        permissions::backends::claude(&cfg.permissions, &names)
    } else {
        permissions::governed::claude_governed(&cfg.permissions, &names, &governed)
    };
    // After each tool call, what arrived for the agent (see crate::hook).
    let settings = crate::hook::write(run, scratch, "PostToolUse")?;
    let mut args: Vec<String> = vec![
        "--settings".into(),
        settings.display().to_string(),
        "-p".into(),
        prompt::task(cfg, run.context),
        "--output-format".into(),
        "stream-json".into(),
        "--verbose".into(),
        "--mcp-config".into(),
        mcp_file.display().to_string(),
        "--strict-mcp-config".into(),
        "--permission-mode".into(),
        rules.mode.into(),
        "--append-system-prompt".into(),
        prompt::system(cfg),
        "--max-turns".into(),
        cfg.max_steps.to_string(),
    ];
    if let Some(m) = &cfg.model {
        args.extend(["--model".into(), m.clone()]);
    }
    if !governed.is_empty() {
        // Contracts govern some of its tools: Claude Code asks the kernel first.
        args.extend([
            "--permission-prompt-tool".into(),
            format!("mcp__{SERVER}__permission_request"),
        ]);
    }
    if let Some(s) = session {
        args.extend(["--resume".into(), s.to_owned()]);
    }
    // One argument per rule (a rule such as `Bash(npm test*)` holds a space).
    args.push("--allowedTools".into());
    args.extend(rules.allowed);
    if !rules.disallowed.is_empty() {
        args.push("--disallowedTools".into());
        args.extend(rules.disallowed);
    }
    let mut env = vec![(
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC".into(),
        "1".into(),
    )];
    // Claude Code refuses bypassPermissions as root unless told it is sandboxed;
    // the lead chose `full` for this agent, and agent_new said so in its warning.
    if rules.mode == "bypassPermissions" && nix::unistd::Uid::effective().is_root() {
        env.push(("IS_SANDBOX".into(), "1".into()));
    }
    if !env_set("CLAUDE_CODE_MAX_RETRIES") {
        env.push(("CLAUDE_CODE_MAX_RETRIES".into(), "2".into()));
    }
    // Its default wait for those servers is 5 s; a server that installs or builds on
    // first start (npx, uvx) takes longer.
    if !own.is_empty() && !env_set("MCP_CONNECT_TIMEOUT_MS") {
        env.push(("MCP_CONNECT_TIMEOUT_MS".into(), "30000".into()));
    }
    Ok(Invocation {
        program: "claude".into(),
        args,
        env,
        files: vec![],
    })
}

#[derive(Default)]
pub struct Stream(ResultEnd, Calls);

/// The tool calls of the run so far, by id: what a refusal was about.
#[derive(Default)]
struct Calls(std::collections::HashMap<String, (String, String)>);

/// What a Claude Code tool call is about (its command, path, URL or pattern).
fn detail_of(input: &Value) -> String {
    call_detail(input, &["command", "file_path", "path", "url", "pattern"])
}

impl Events for Stream {
    fn event(&mut self, v: &Value, report: &Reporter) {
        match str_at(v, &["type"]) {
            Some("system") => match str_at(v, &["subtype"]) {
                Some("init") => {
                    if let Some(id) = str_at(v, &["session_id"]) {
                        report.session(id);
                    }
                    let failed = v["mcp_servers"].as_array().into_iter().flatten().any(|s| {
                        str_at(s, &["name"]) == Some(SERVER)
                            && str_at(s, &["status"]) != Some("connected")
                    });
                    if failed {
                        self.0
                            .errors
                            .push("Claude Code could not connect to the team's MCP server".into());
                    }
                }
                Some("api_retry") => {
                    let e = format!(
                        "API retry {}: {} (status {})",
                        num(v, &["attempt"]),
                        str_at(v, &["error"]).unwrap_or("error"),
                        v["error_status"]
                    );
                    report.progress(e.clone());
                    self.0.errors.push(e);
                }
                _ => {}
            },
            Some("assistant") => {
                if let Some(e) = str_at(v, &["error"]) {
                    self.0.errors.push(e.to_owned());
                }
                for block in v["message"]["content"].as_array().into_iter().flatten() {
                    match str_at(block, &["type"]) {
                        Some("tool_use") => {
                            let name = str_at(block, &["name"]).unwrap_or("a tool");
                            report.progress(format!("calls {name}"));
                            if let Some(id) = str_at(block, &["id"]) {
                                self.1.0.insert(
                                    id.to_owned(),
                                    (name.to_owned(), detail_of(&block["input"])),
                                );
                            }
                        }
                        Some("text") => {
                            self.0.last_text = str_at(block, &["text"]).map(str::to_owned)
                        }
                        _ => {}
                    }
                }
            }
            Some("user") => {
                // A tool the agent's rules take away (--disallowedTools) is not
                // offered at all: a call to it is refused as unknown.
                for block in v["message"]["content"].as_array().into_iter().flatten() {
                    let refused = block["is_error"].as_bool() == Some(true)
                        && block["content"]
                            .to_string()
                            .contains("No such tool available");
                    if let (true, Some(id)) = (refused, str_at(block, &["tool_use_id"]))
                        && let Some((tool, detail)) = self.1.0.get(id)
                    {
                        report.send(&Report::Denied {
                            tool: tool.clone(),
                            detail: detail.clone(),
                            reason: "Claude Code does not offer this tool to this agent (its permissions deny it)".into(),
                        });
                    }
                }
            }
            Some("result") => {
                report.set_usage(Usage {
                    input_tokens: num(v, &["usage", "input_tokens"])
                        + num(v, &["usage", "cache_read_input_tokens"])
                        + num(v, &["usage", "cache_creation_input_tokens"]),
                    output_tokens: num(v, &["usage", "output_tokens"]),
                    cost_usd: v["total_cost_usd"].as_f64(),
                });
                if let Some(id) = str_at(v, &["session_id"]) {
                    report.session(id);
                }
                for d in v["permission_denials"].as_array().into_iter().flatten() {
                    report.send(&Report::Denied {
                        tool: str_at(d, &["tool_name"]).unwrap_or("a tool").to_owned(),
                        detail: detail_of(&d["tool_input"]),
                        reason: "Claude Code refused it: the agent's permissions do not allow it"
                            .into(),
                    });
                }
                self.0.result = Some(v.clone());
            }
            _ => {}
        }
    }

    fn finish(self: Box<Self>, done: &Finished) -> Result<Option<String>, Failure> {
        self.0.finish(done, "claude")
    }
}
