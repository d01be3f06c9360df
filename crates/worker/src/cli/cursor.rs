//! Cursor Agent: `cursor-agent -p --output-format stream-json`.
//!
//! Cursor reads MCP servers from `<workspace>/.cursor/mcp.json`: ours (and the
//! agent's own) are merged in for the run and the file restored after (the token
//! and secrets are expanded by Cursor from `${env:...}`); `--approve-mcps` and
//! `--trust` let it run unattended. The agent's permissions decide `--force` (from
//! `edit` up) and the allow/deny rules merged into `<workspace>/.cursor/cli.json`.
//! Cursor has no system-prompt flag, so the agent's system prompt leads the task.
//! Not on npm: its stream format is tested against recorded lines.

use super::{
    Events, Invocation, ResultEnd, SERVER, TOKEN_ENV, WorkspaceFile, env_set, num, own_servers,
    probe, secret_refs, str_at,
};
use crate::{Failure, Reporter, Run, prompt};
use domain::permissions;
use domain::protocol::{ErrorClass, McpServer, Usage};
use os::process::Finished;
use serde_json::{Value, json};

pub async fn auth_missing() -> Option<String> {
    if env_set("CURSOR_API_KEY") {
        return None;
    }
    match probe("cursor-agent", &["status", "--format", "json"]).await {
        Some((_, out)) => {
            let ok = serde_json::from_str::<Value>(&out)
                .ok()
                .and_then(|v| v["isAuthenticated"].as_bool())
                .unwrap_or(false);
            (!ok).then(|| format!(
                "Cursor Agent is not logged in ({out}); run `cursor-agent login` or set CURSOR_API_KEY in the agent's env"
            ))
        }
        None => Some("`cursor-agent status` did not answer; check the Cursor Agent install".into()),
    }
}

pub fn invocation(run: &Run<'_>, session: Option<&str>) -> Result<Invocation, Failure> {
    let cfg = run.cfg;
    let rules = permissions::backends::cursor(&cfg.permissions)
        .map_err(|e| Failure::new(ErrorClass::Other, e))?;
    let mut env: Vec<(String, String)> = Vec::new();
    let mut servers = vec![(
        SERVER.to_owned(),
        json!({
            "url": cfg.url,
            "headers": { "Authorization": format!("Bearer ${{env:{TOKEN_ENV}}}") },
        }),
    )];
    // The agent's own servers; secret values stay in the environment, the file
    // only names them.
    for (name, server) in own_servers(cfg) {
        let refer = |var: &str| format!("${{env:{var}}}");
        let entry = match server {
            McpServer::Stdio(st) => json!({
                "command": st.command, "args": st.args,
                "env": secret_refs(name, &st.env, refer, &mut env),
            }),
            McpServer::Http(h) => json!({
                "url": h.url,
                "headers": secret_refs(name, &h.headers, refer, &mut env),
            }),
        };
        servers.push((name.clone(), entry));
    }
    let dir = crate::sandbox::workspace_dir(&cfg.cwd, cfg.sandbox.as_ref(), ".cursor");
    // In the run's home (its folder is the user's home) the CLI's config is the
    // user-level one, which has another name.
    let cli = if dir == cfg.cwd.join(".cursor") {
        "cli.json"
    } else {
        "cli-config.json"
    };
    let mut files = vec![WorkspaceFile::merge_servers(
        dir.join("mcp.json"),
        "mcpServers",
        servers,
    )?];
    // The profile's rules, for this run, in the workspace's CLI config. Put first
    // so it is restored first: the folder it shares with mcp.json goes last.
    if !rules.allow.is_empty() || !rules.deny.is_empty() {
        files.insert(
            0,
            WorkspaceFile::merge_servers(
                dir.join(cli),
                "permissions",
                vec![
                    ("allow".into(), json!(rules.allow)),
                    ("deny".into(), json!(rules.deny)),
                ],
            )?,
        );
    }
    let mut args: Vec<String> = vec!["-p".into(), "--output-format".into(), "stream-json".into()];
    if rules.force {
        args.push("--force".into());
    }
    args.extend([
        "--trust".into(),
        "--approve-mcps".into(),
        "--workspace".into(),
        cfg.cwd.display().to_string(),
    ]);
    if let Some(m) = &cfg.model {
        args.extend(["--model".into(), m.clone()]);
    }
    if let Some(s) = session {
        args.extend(["--resume".into(), s.to_owned()]);
    }
    args.push(prompt::combined(cfg, run.context));
    Ok(Invocation {
        program: "cursor-agent".into(),
        args,
        env,
        files,
    })
}

#[derive(Default)]
pub struct Stream(ResultEnd);

impl Events for Stream {
    fn event(&mut self, v: &Value, report: &Reporter) {
        match str_at(v, &["type"]) {
            Some("system") if str_at(v, &["subtype"]) == Some("init") => {
                if let Some(id) = str_at(v, &["session_id"]) {
                    report.session(id);
                }
            }
            Some("tool_call") if str_at(v, &["subtype"]) == Some("started") => {
                let call = &v["tool_call"];
                let name = str_at(call, &["mcpToolCall", "args", "toolName"])
                    .map(str::to_owned)
                    .or_else(|| call.as_object().and_then(|o| o.keys().next().cloned()))
                    .unwrap_or_else(|| "a tool".into());
                report.progress(format!("calls {name}"));
            }
            Some("assistant") => {
                for block in v["message"]["content"].as_array().into_iter().flatten() {
                    if let Some(t) = str_at(block, &["text"]) {
                        self.0.last_text = Some(t.to_owned());
                    }
                }
            }
            Some("error") => {
                if let Some(m) = str_at(v, &["message"]).or(str_at(v, &["error", "message"])) {
                    self.0.errors.push(m.to_owned());
                }
            }
            Some("result") => {
                report.set_usage(Usage {
                    input_tokens: num(v, &["usage", "inputTokens"])
                        + num(v, &["usage", "cacheReadTokens"]),
                    output_tokens: num(v, &["usage", "outputTokens"]),
                    cost_usd: None,
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
        self.0.finish(done, "cursor-agent")
    }
}

#[cfg(test)]
mod tests {
    //! Cursor's CLI is not on npm; these are lines recorded from its stream-json
    //! output (see the worker CLI reference).
    use super::*;
    use os::process::{Ended, Finished};

    fn finished(code: i32) -> Finished {
        use std::os::unix::process::ExitStatusExt;
        Finished {
            ended: Ended::Exited,
            status: Some(std::process::ExitStatus::from_raw(code << 8)),
            killed: false,
            stderr_tail: String::new(),
        }
    }

    #[test]
    fn a_recorded_successful_run() {
        let lines = [
            r#"{"type":"system","subtype":"init","apiKeySource":"login","cwd":"/w","session_id":"771e5f2a-0c1b-4b7e-9a55-2f0e8e9d1a11","model":"Auto","permissionMode":"default"}"#,
            r#"{"type":"user","message":{"role":"user","content":[{"type":"text","text":"hi"}]},"session_id":"771e5f2a-0c1b-4b7e-9a55-2f0e8e9d1a11"}"#,
            r#"{"type":"thinking","subtype":"delta","text":"Let me","session_id":"771e5f2a-0c1b-4b7e-9a55-2f0e8e9d1a11"}"#,
            r#"{"type":"tool_call","subtype":"started","call_id":"c1","tool_call":{"mcpToolCall":{"args":{"name":"team-channel_send","args":{"message":"@bob hi"},"toolName":"channel_send","providerIdentifier":"team"}}},"session_id":"771e5f2a-0c1b-4b7e-9a55-2f0e8e9d1a11"}"#,
            r#"{"type":"tool_call","subtype":"completed","call_id":"c1","tool_call":{"mcpToolCall":{"args":{"name":"team-channel_send"},"result":{"success":{"content":[{"text":{"text":"{\"id\":\"x\"}"}}]}}}},"session_id":"771e5f2a-0c1b-4b7e-9a55-2f0e8e9d1a11"}"#,
            r#"{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"Sent."}]},"session_id":"771e5f2a-0c1b-4b7e-9a55-2f0e8e9d1a11"}"#,
            r#"{"type":"result","subtype":"success","is_error":false,"duration_ms":4313,"duration_api_ms":4313,"result":"Sent.","session_id":"771e5f2a-0c1b-4b7e-9a55-2f0e8e9d1a11","request_id":"r1","usage":{"inputTokens":11322,"outputTokens":39,"cacheReadTokens":5941,"cacheWriteTokens":0}}"#,
        ];
        let report = Reporter::default();
        let mut s: Box<dyn Events> = Box::<Stream>::default();
        for l in lines {
            s.event(&serde_json::from_str(l).unwrap(), &report);
        }
        assert_eq!(report.usage().input_tokens, 11322 + 5941);
        assert_eq!(report.usage().output_tokens, 39);
        assert_eq!(s.finish(&finished(0)).unwrap().as_deref(), Some("Sent."));
    }

    #[test]
    fn a_recorded_auth_failure() {
        let s: Box<dyn Events> = Box::<Stream>::default();
        let mut done = finished(1);
        done.stderr_tail = "Error: Authentication required. Please run 'cursor-agent login' first, or set CURSOR_API_KEY environment variable.".into();
        let f = s.finish(&done).unwrap_err();
        assert_eq!(f.class, domain::protocol::ErrorClass::Auth);
        assert!(f.message.contains("Authentication required"));
    }
}
