//! Gemini CLI: `gemini -p -o stream-json`.
//!
//! Gemini has no MCP flag: our server is merged into `.gemini/settings.json` in the
//! agent's working directory (restored after the run), with `trust` so headless mode
//! offers its tools, and the workspace is marked trusted (an untrusted folder
//! silently disables MCP). The token is expanded by Gemini from the environment.
//! `GEMINI_SYSTEM_MD` would replace Gemini's own system prompt (and its tool
//! guidance), so the agent's system prompt leads the task text instead.

use super::{Events, Invocation, TOKEN_ENV, WorkspaceFile, failure_from, num, str_at};
use crate::process::Finished;
use crate::worker::protocol::{ErrorClass, Usage};
use crate::worker::{Failure, Reporter, Run, prompt};
use serde_json::{Value, json};

/// Gemini fails fast without credentials (exit 41), so a run does not gate on this;
/// readiness reports use it: a key in the env, Vertex or Google login settings, or
/// an auth type chosen in its settings file.
pub fn auth_missing() -> Option<String> {
    let env = [
        "GEMINI_API_KEY",
        "GOOGLE_API_KEY",
        "GOOGLE_GENAI_USE_VERTEXAI",
        "GOOGLE_GENAI_USE_GCA",
    ];
    if env.iter().any(|k| super::env_set(k)) {
        return None;
    }
    let home = std::env::var_os("GEMINI_CLI_HOME").or_else(|| std::env::var_os("HOME"))?;
    let dot = std::path::Path::new(&home).join(".gemini");
    if dot.join("oauth_creds.json").is_file() {
        return None;
    }
    let chosen = std::fs::read_to_string(dot.join("settings.json"))
        .ok()
        .and_then(|t| serde_json::from_str::<Value>(&t).ok())
        .is_some_and(|v| {
            v.pointer("/security/auth/selectedType").is_some()
                || v.get("selectedAuthType").is_some()
        });
    (!chosen).then(|| {
        "Gemini CLI has no credentials: set GEMINI_API_KEY in the agent's env, or run `gemini` once and log in"
            .to_owned()
    })
}

pub fn invocation(run: &Run<'_>, session: Option<&str>) -> Result<Invocation, Failure> {
    let cfg = run.cfg;
    let settings = WorkspaceFile::merge_server(
        cfg.cwd.join(".gemini").join("settings.json"),
        "mcpServers",
        json!({
            "httpUrl": cfg.url,
            "headers": { "Authorization": format!("Bearer ${{{TOKEN_ENV}}}") },
            "trust": true,
            "timeout": 30000,
        }),
    )?;
    let mut args: Vec<String> = vec![
        "-p".into(),
        prompt::combined(cfg, run.context),
        "-o".into(),
        "stream-json".into(),
    ];
    if let Some(m) = &cfg.model {
        args.extend(["-m".into(), m.clone()]);
    }
    if let Some(s) = session {
        args.extend(["--resume".into(), s.to_owned()]);
    }
    Ok(Invocation {
        program: "gemini".into(),
        args,
        env: vec![
            ("GEMINI_CLI_TRUST_WORKSPACE".into(), "true".into()),
            // Gemini otherwise re-executes itself once per run (about 3 s).
            ("GEMINI_CLI_NO_RELAUNCH".into(), "true".into()),
        ],
        files: vec![settings],
    })
}

#[derive(Default)]
pub struct Stream {
    text: String,
    result: Option<Value>,
}

impl Events for Stream {
    fn event(&mut self, v: &Value, report: &Reporter) {
        match str_at(v, &["type"]) {
            Some("init") => {
                if let Some(id) = str_at(v, &["session_id"]) {
                    report.session(id);
                }
            }
            Some("tool_use") => report.progress(format!(
                "calls {}",
                str_at(v, &["tool_name"]).unwrap_or("a tool")
            )),
            Some("message") if str_at(v, &["role"]) == Some("assistant") => {
                if let Some(t) = str_at(v, &["content"]) {
                    if v["delta"] != Value::Bool(true) {
                        self.text.clear();
                    }
                    self.text.push_str(t);
                }
            }
            Some("result") => {
                report.set_usage(Usage {
                    input_tokens: num(v, &["stats", "input_tokens"]),
                    output_tokens: num(v, &["stats", "output_tokens"]),
                    cost_usd: None,
                });
                self.result = Some(v.clone());
            }
            _ => {}
        }
    }

    fn finish(self: Box<Self>, done: &Finished) -> Result<Option<String>, Failure> {
        if let Some(r) = &self.result {
            if str_at(r, &["status"]) == Some("success") && done.success() {
                return Ok(Some(self.text).filter(|t| !t.is_empty()));
            }
            if let Some(m) = str_at(r, &["error", "message"]) {
                return Err(Failure::classified(m));
            }
        }
        let f = failure_from(&[], done, "gemini");
        // Exit 41 is Gemini's own code for missing or invalid auth.
        if done.exit_code() == Some(41) {
            return Err(Failure::new(ErrorClass::Auth, f.message));
        }
        Err(f)
    }
}
