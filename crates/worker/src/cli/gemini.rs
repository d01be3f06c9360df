//! Gemini CLI: `gemini -p -o stream-json`.
//!
//! Gemini has no MCP flag: our server is merged into `.gemini/settings.json` in the
//! agent's working directory (restored after the run), with `trust` so headless mode
//! offers its tools, and the workspace is marked trusted (an untrusted folder
//! silently disables MCP). The token is expanded by Gemini from the environment.
//! `GEMINI_SYSTEM_MD` would replace Gemini's own system prompt (and its tool
//! guidance), so the agent's system prompt leads the task text instead.
//!
//! What arrives for the agent during the run reaches its model after each tool
//! call when the run has a home of its own (a sandboxed run: `HOME` is the
//! agent's): an `AfterTool` hook (crate::hook) in that home's user settings
//! (`.gemini/settings.json`), which no other agent and not the user's Gemini
//! reads. Never in the project's file: the agent's branch would commit it, and
//! another agent's run in the folder would run what one planted there. Gemini
//! 0.61 skips a system settings or defaults file unless it and every folder above
//! it are root's, so the scratch folder has no place for it. With no home of its
//! own (sandbox off) the run has no hook: the New for you line of each team
//! tool's result tells the agent instead.

use super::{
    Events, Invocation, SERVER, Scratch, TOKEN_ENV, WorkspaceFile, call_detail, failure_from, num,
    own_servers, secret_refs, str_at,
};
use crate::{Failure, Reporter, Run, prompt};
use domain::permissions;
use domain::protocol::{ErrorClass, McpServer, Report, Usage};
use os::process::Finished;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

/// `doc` (Gemini's user settings) with our `AfterTool` hook `ours` in place of
/// any of ours from an earlier run; the user's own hooks are kept as they are.
fn with_hook(mut doc: Value, ours: Value) -> Result<Value, String> {
    let at = doc
        .as_object_mut()
        .ok_or("it must hold a JSON object")?
        .entry("hooks")
        .or_insert_with(|| json!({}))
        .as_object_mut()
        .ok_or("its hooks must be an object")?
        .entry("AfterTool")
        .or_insert_with(|| json!([]))
        .as_array_mut()
        .ok_or("its hooks.AfterTool must be a list")?;
    let mine = |v: &Value| v.to_string().contains(crate::hook::HOOK_MODE);
    at.retain(|item| !mine(item));
    at.extend(ours.as_array().into_iter().flatten().cloned());
    Ok(doc)
}

/// Puts the inbox hook into the run's own user settings `path` (its agent's
/// home: it stays there from run to run, the same command each time).
fn hook_in_user_settings(path: &Path, exe: &Path) -> Result<(), String> {
    let shown = path.display();
    let doc = match std::fs::read_to_string(path) {
        Ok(t) => serde_json::from_str(&t).map_err(|e| format!("{shown} is not JSON ({e})"))?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => json!({}),
        Err(e) => return Err(format!("cannot read {shown}: {e}")),
    };
    let doc =
        with_hook(doc, crate::hook::shared_entry(exe)).map_err(|e| format!("{shown}: {e}"))?;
    let dir = path.parent().unwrap_or(Path::new("."));
    let tmp = dir.join(format!(".settings.json.{}", std::process::id()));
    std::fs::create_dir_all(dir)
        .and_then(|()| std::fs::write(&tmp, serde_json::to_vec_pretty(&doc).unwrap_or_default()))
        .and_then(|()| std::fs::rename(&tmp, path))
        .map_err(|e| format!("cannot write {shown}: {e}"))
}

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

pub fn invocation(
    run: &Run<'_>,
    session: Option<&str>,
    scratch: &Scratch,
) -> Result<Invocation, Failure> {
    let cfg = run.cfg;
    let rules = permissions::backends::gemini(&cfg.permissions)
        .map_err(|e| Failure::new(ErrorClass::Other, e))?;
    let mut env: Vec<(String, String)> = vec![
        ("GEMINI_CLI_TRUST_WORKSPACE".into(), "true".into()),
        // Gemini otherwise re-executes itself once per run (about 3 s).
        ("GEMINI_CLI_NO_RELAUNCH".into(), "true".into()),
    ];
    let mut servers = vec![(
        SERVER.to_owned(),
        json!({
            "httpUrl": cfg.url,
            "headers": { "Authorization": format!("Bearer ${{{TOKEN_ENV}}}") },
            "trust": true,
            "timeout": 30000,
        }),
    )];
    // The agent's own servers, trusted (they were given to it); secret values stay
    // in the environment, the file only names them.
    for (name, server) in own_servers(cfg) {
        let refer = |var: &str| format!("${{{var}}}");
        let entry = match server {
            McpServer::Stdio(st) => json!({
                "command": st.command, "args": st.args, "trust": true,
                "env": secret_refs(name, &st.env, refer, &mut env),
            }),
            McpServer::Http(h) => json!({
                "httpUrl": h.url, "trust": true,
                "headers": secret_refs(name, &h.headers, refer, &mut env),
            }),
        };
        servers.push((name.clone(), entry));
    }
    if let Some(home) = crate::sandbox::own_home() {
        let file = crate::hook::write_state(run, scratch)?;
        env.push((crate::hook::FILE_ENV.into(), file.display().to_string()));
        let user = std::env::var_os("GEMINI_CLI_HOME").map_or(home, PathBuf::from);
        let exe = crate::hook::own_binary()?;
        if let Err(e) = hook_in_user_settings(&user.join(".gemini/settings.json"), &exe) {
            run.report.progress(format!("no inbox hook: {e}"));
        }
    }
    let settings = WorkspaceFile::merge_servers(
        crate::sandbox::workspace_dir(&cfg.cwd, cfg.sandbox.as_ref(), ".gemini")
            .join("settings.json"),
        "mcpServers",
        servers,
    )?;
    let mut args: Vec<String> = vec![
        "-p".into(),
        prompt::combined(cfg, run.context),
        "-o".into(),
        "stream-json".into(),
        "--approval-mode".into(),
        rules.approval_mode.into(),
    ];
    if !rules.policy.is_empty() {
        let policy = scratch.write("policy.toml", &rules.policy)?;
        args.extend(["--policy".into(), policy.display().to_string()]);
    }
    if let Some(m) = &cfg.model {
        args.extend(["-m".into(), m.clone()]);
    }
    if let Some(s) = session {
        args.extend(["--resume".into(), s.to_owned()]);
    }
    Ok(Invocation {
        program: "gemini".into(),
        args,
        env,
        files: vec![settings],
    })
}

#[derive(Default)]
pub struct Stream {
    text: String,
    result: Option<Value>,
    /// Tool calls by id: (tool, what it is about), for refusals.
    calls: std::collections::HashMap<String, (String, String)>,
}

impl Events for Stream {
    fn event(&mut self, v: &Value, report: &Reporter) {
        match str_at(v, &["type"]) {
            Some("init") => {
                if let Some(id) = str_at(v, &["session_id"]) {
                    report.session(id);
                }
            }
            Some("tool_use") => {
                let tool = str_at(v, &["tool_name"]).unwrap_or("a tool");
                report.progress(format!("calls {tool}"));
                if let Some(id) = str_at(v, &["tool_id"]) {
                    let detail = call_detail(
                        &v["parameters"],
                        &["command", "file_path", "absolute_path", "url", "pattern"],
                    );
                    self.calls.insert(id.to_owned(), (tool.to_owned(), detail));
                }
            }
            // A call its policy refused, or to a tool its approval mode does not
            // offer: Gemini answers the model with the reason.
            Some("tool_result") if str_at(v, &["status"]) == Some("error") => {
                let message = str_at(v, &["error", "message"])
                    .or_else(|| str_at(v, &["output"]))
                    .unwrap_or_default();
                let lower = message.to_lowercase();
                let refused = ["policy", "denied", "not allowed", "refused"]
                    .iter()
                    .any(|w| lower.contains(w))
                    || (lower.starts_with("tool \"") && lower.contains("not found"));
                if refused {
                    let id = str_at(v, &["tool_id"]).unwrap_or_default();
                    let (tool, detail) = self.calls.get(id).cloned().unwrap_or_else(|| {
                        // Not offered, so never announced: the id starts with its name.
                        let name = message.split('"').nth(1).unwrap_or(id);
                        (name.to_owned(), String::new())
                    });
                    report.send(&Report::Denied {
                        tool,
                        detail,
                        reason: crate::clip(message, 500).into_owned(),
                    });
                }
            }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hook_replaces_ours_and_keeps_the_users_own() {
        let exe = Path::new("/opt/aw");
        let ours = crate::hook::shared_entry(exe);
        let theirs = json!({"matcher": "x", "hooks": [{"type": "command", "command": "mine"}]});
        let stale = crate::hook::shared_entry(Path::new("/old/aw"))[0].clone();
        let cases = [
            (json!({}), json!([ours[0]])),
            (
                json!({"theme": 1, "hooks": {"AfterTool": [theirs, stale]}}),
                json!([theirs, ours[0]]),
            ),
        ];
        for (doc, want) in cases {
            let got = with_hook(doc.clone(), ours.clone()).unwrap();
            assert_eq!(got["hooks"]["AfterTool"], want, "{doc}");
            assert_eq!(got["theme"], doc["theme"]);
        }
        let e = with_hook(json!({"hooks": {"AfterTool": {}}}), ours).unwrap_err();
        assert!(e.contains("hooks.AfterTool must be a list"), "{e}");
    }
}
