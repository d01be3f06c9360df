//! OpenCode: `opencode run --format json`.
//!
//! Per-run configuration comes from `OPENCODE_CONFIG_CONTENT`, layered over the
//! user's own: our MCP server (the token expanded from the environment by OpenCode's
//! `{env:...}`), and the system prompt as an instructions file. An agent env that
//! already sets `OPENCODE_CONFIG_CONTENT` (a local provider, say) is merged, not
//! replaced. OpenCode falls back to free hosted models when no provider is
//! configured, so the run is gated on finding credentials.

use super::{
    Events, Invocation, SERVER, Scratch, TOKEN_ENV, call_detail, env_set, failure_from, num,
    own_servers, secret_refs, str_at,
};
use crate::{Failure, Reporter, Run, classify, prompt};
use domain::permissions;
use domain::protocol::{ErrorClass, McpServer, Report, Usage};
use os::process::Finished;
use serde_json::{Value, json};

const CONFIG_ENV: &str = "OPENCODE_CONFIG_CONTENT";
const KEY_VARS: &[&str] = &[
    "ANTHROPIC_API_KEY",
    "OPENAI_API_KEY",
    "OPENROUTER_API_KEY",
    "GEMINI_API_KEY",
    "GOOGLE_GENERATIVE_AI_API_KEY",
    "GROQ_API_KEY",
    "DEEPSEEK_API_KEY",
    "XAI_API_KEY",
    "MISTRAL_API_KEY",
    "OPENCODE_API_KEY",
];

pub fn auth_missing() -> Option<String> {
    if KEY_VARS.iter().any(|k| env_set(k)) || env_set(CONFIG_ENV) || env_set("OPENCODE_CONFIG") {
        return None;
    }
    let data = std::env::var_os("XDG_DATA_HOME")
        .map(std::path::PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME").map(|h| std::path::Path::new(&h).join(".local/share"))
        });
    if data.is_some_and(|d| d.join("opencode/auth.json").is_file()) {
        return None;
    }
    Some(format!(
        "OpenCode has no provider credentials: run `opencode auth login`, or set one of {} in the agent's env (or a provider in {CONFIG_ENV})",
        KEY_VARS[..3].join(", ")
    ))
}

pub fn invocation(
    run: &Run<'_>,
    session: Option<&str>,
    scratch: &Scratch,
) -> Result<Invocation, Failure> {
    let cfg = run.cfg;
    let system = scratch.write("instructions.md", &prompt::system(cfg))?;
    let mut config: Value = match std::env::var(CONFIG_ENV) {
        Ok(s) if !s.trim().is_empty() => serde_json::from_str(&s).map_err(|e| {
            Failure::new(
                ErrorClass::Other,
                format!("the agent's {CONFIG_ENV} is not valid JSON: {e}"),
            )
        })?,
        _ => json!({}),
    };
    if !config.is_object() {
        return Err(Failure::new(
            ErrorClass::Other,
            format!("the agent's {CONFIG_ENV} must be a JSON object"),
        ));
    }
    config["mcp"][SERVER] = json!({
        "type": "remote",
        "url": cfg.url,
        "headers": { "Authorization": format!("Bearer {{env:{TOKEN_ENV}}}") },
        "enabled": true,
        "oauth": false,
    });
    // The agent's own servers; secret values stay in the environment, the config
    // names them (`{env:...}`).
    let mut env: Vec<(String, String)> = Vec::new();
    for (name, server) in own_servers(cfg) {
        let refer = |var: &str| format!("{{env:{var}}}");
        config["mcp"][name.as_str()] = match server {
            McpServer::Stdio(st) => {
                let mut command = vec![st.command.clone()];
                command.extend(st.args.iter().cloned());
                json!({"type": "local", "command": command, "enabled": true,
                    "environment": secret_refs(name, &st.env, refer, &mut env)})
            }
            McpServer::Http(h) => {
                json!({"type": "remote", "url": h.url, "enabled": true, "oauth": false,
                "headers": secret_refs(name, &h.headers, refer, &mut env)})
            }
        };
    }
    // The agent's permissions replace whatever its own config said about them.
    let rules = permissions::backends::opencode(&cfg.permissions);
    config["permission"] = rules["permission"].clone();
    if let Some(off) = rules.get("tools").and_then(Value::as_object) {
        for (k, v) in off {
            config["tools"][k.as_str()] = v.clone();
        }
    }
    let mut instructions = config["instructions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    instructions.push(json!(system.display().to_string()));
    config["instructions"] = Value::Array(instructions);
    let mut args: Vec<String> = vec!["run".into(), "--format".into(), "json".into()];
    if let Some(m) = &cfg.model {
        args.extend(["-m".into(), m.clone()]);
    }
    if let Some(s) = session {
        args.extend(["-s".into(), s.to_owned()]);
    }
    args.push(prompt::task(cfg, run.context));
    Ok(Invocation {
        program: "opencode".into(),
        args,
        env: {
            env.push((CONFIG_ENV.into(), config.to_string()));
            env
        },
        files: vec![],
    })
}

#[derive(Default)]
pub struct Stream {
    session: Option<String>,
    last_text: Option<String>,
    errors: Vec<(Option<u16>, String)>,
}

impl Events for Stream {
    fn event(&mut self, v: &Value, report: &Reporter) {
        if self.session.is_none()
            && let Some(id) = str_at(v, &["sessionID"])
        {
            self.session = Some(id.to_owned());
            report.session(id);
        }
        match str_at(v, &["type"]) {
            Some("tool_use") => {
                let tool = str_at(v, &["part", "tool"]).unwrap_or("a tool");
                report.progress(format!("calls {tool}"));
                // A call its permission config refused ends in an error that says so.
                // A tool its permissions switch off whole is not offered: a call to
                // it goes to OpenCode's `invalid` tool, which names it.
                let state = &v["part"]["state"];
                let (tool, error) = if tool == "invalid" {
                    (
                        str_at(state, &["input", "tool"]).unwrap_or("a tool"),
                        str_at(state, &["input", "error"]).unwrap_or("not available"),
                    )
                } else {
                    (tool, str_at(state, &["error"]).unwrap_or_default())
                };
                let refused = (str_at(&v["part"], &["tool"]) == Some("invalid")
                    && error.contains("unavailable tool"))
                    || (str_at(state, &["status"]) == Some("error")
                        && ["permission", "rule", "denied", "not allowed"]
                            .iter()
                            .any(|w| error.to_lowercase().contains(w)));
                if refused {
                    report.send(&Report::Denied {
                        tool: tool.to_owned(),
                        detail: call_detail(
                            &state["input"],
                            &["command", "filePath", "path", "url", "pattern"],
                        ),
                        reason: crate::clip(error, 500).into_owned(),
                    });
                }
            }
            Some("step_finish") => report.add_usage(Usage {
                input_tokens: num(v, &["part", "tokens", "input"])
                    + num(v, &["part", "tokens", "cache", "read"]),
                output_tokens: num(v, &["part", "tokens", "output"]),
                cost_usd: v["part"]["cost"].as_f64(),
            }),
            Some("text") => {
                if let Some(t) = str_at(v, &["part", "text"]) {
                    self.last_text = Some(t.to_owned());
                }
            }
            Some("error") => {
                let e = &v["error"];
                let msg = str_at(e, &["data", "message"])
                    .or(str_at(e, &["message"]))
                    .or(str_at(e, &["name"]))
                    .unwrap_or("error")
                    .to_owned();
                let status = e["data"]["statusCode"].as_u64().map(|s| s as u16);
                self.errors.push((status, msg));
            }
            _ => {}
        }
    }

    fn finish(self: Box<Self>, done: &Finished) -> Result<Option<String>, Failure> {
        if self.errors.is_empty() && done.success() {
            return Ok(self.last_text);
        }
        if let Some((Some(status), msg)) = self.errors.first() {
            return Err(Failure::new(
                classify::classify_status(*status, msg),
                msg.clone(),
            ));
        }
        let msgs: Vec<String> = self.errors.into_iter().map(|(_, m)| m).collect();
        Err(failure_from(&msgs, done, "opencode"))
    }
}
