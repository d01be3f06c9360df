//! Claude Code: `claude -p` with a stream-json event stream.
//!
//! MCP comes from a private config file (`--mcp-config` + `--strict-mcp-config`, so
//! project servers needing approval are not consulted); `--allowedTools mcp__team`
//! lets it call our tools unattended (a tool not allowed is denied, not prompted);
//! the system prompt is appended to Claude Code's own; `--resume` continues the
//! agent's conversation. Claude Code retries even 401s for minutes, so retries are
//! capped with `CLAUDE_CODE_MAX_RETRIES`.

use super::{Events, Invocation, ResultEnd, SERVER, Scratch, env_set, num, probe, str_at};
use crate::process::Finished;
use crate::worker::protocol::Usage;
use crate::worker::{Failure, Reporter, Run, prompt};
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

pub fn invocation(
    run: &Run<'_>,
    session: Option<&str>,
    scratch: &Scratch,
) -> Result<Invocation, Failure> {
    let cfg = run.cfg;
    let mcp = json!({ "mcpServers": { SERVER: {
        "type": "http",
        "url": cfg.url,
        "headers": { "Authorization": format!("Bearer {}", cfg.token) },
    }}});
    let mcp_file = scratch.write("mcp.json", &mcp.to_string())?;
    let mut args: Vec<String> = vec![
        "-p".into(),
        prompt::task(cfg, run.context),
        "--output-format".into(),
        "stream-json".into(),
        "--verbose".into(),
        "--mcp-config".into(),
        mcp_file.display().to_string(),
        "--strict-mcp-config".into(),
        "--allowedTools".into(),
        format!("mcp__{SERVER}"),
        "--append-system-prompt".into(),
        prompt::system(cfg),
        "--max-turns".into(),
        cfg.max_steps.to_string(),
    ];
    if let Some(m) = &cfg.model {
        args.extend(["--model".into(), m.clone()]);
    }
    if let Some(s) = session {
        args.extend(["--resume".into(), s.to_owned()]);
    }
    let mut env = vec![(
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC".into(),
        "1".into(),
    )];
    if !env_set("CLAUDE_CODE_MAX_RETRIES") {
        env.push(("CLAUDE_CODE_MAX_RETRIES".into(), "2".into()));
    }
    Ok(Invocation {
        program: "claude".into(),
        args,
        env,
        files: vec![],
    })
}

#[derive(Default)]
pub struct Stream(ResultEnd);

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
                        Some("tool_use") => report.progress(format!(
                            "calls {}",
                            str_at(block, &["name"]).unwrap_or("a tool")
                        )),
                        Some("text") => {
                            self.0.last_text = str_at(block, &["text"]).map(str::to_owned)
                        }
                        _ => {}
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
                self.0.result = Some(v.clone());
            }
            _ => {}
        }
    }

    fn finish(self: Box<Self>, done: &Finished) -> Result<Option<String>, Failure> {
        self.0.finish(done, "claude")
    }
}
