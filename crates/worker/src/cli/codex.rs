//! Codex: `codex exec --json`.
//!
//! Codex reads MCP servers only from its config, which `-c` overrides per run: the
//! URL, the token by env var name (never its value on the command line), and
//! `default_tools_approval_mode = "approve"` (exec never asks, so without it every
//! MCP call fails). `required` makes an unreachable kernel a fast failure. The system
//! prompt goes in as developer instructions; the sandbox lets it write in the agent's
//! folder (and only there). Codex does not fail fast without
//! credentials, so the run is gated on `CODEX_API_KEY` or `codex login status`.
//!
//! What arrives for the agent during the run reaches its model after each tool
//! call when the run's OS sandbox is applied (`required`, or a `best_effort` the
//! machine honoured): a `PostToolUse` hook (crate::hook) given by `-c` like the
//! server. Codex runs a hook only once its hash is recorded as trusted in its
//! config (a `-c hooks.state` override is not read), so the run passes
//! `--dangerously-bypass-hook-trust`: every enabled hook runs unreviewed for this
//! invocation, those of the agent's own home included, inside the sandbox like
//! the rest of the run. Without it the run has no hook: the New for you line of
//! each team tool's result tells the agent instead. Codex 0.169 sources the
//! login profile of the run's home (the agent's own) for its shell snapshot, not
//! for a hook (seen on the fake model); the hook prints its answer as one JSON
//! line, last, in case a later Codex does.

use super::{
    Events, Invocation, SERVER, Scratch, TOKEN_ENV, env_set, failure_from, num, own_servers, probe,
    secret_var, str_at,
};
use crate::{Failure, Reporter, Run, prompt};
use domain::permissions;
use domain::protocol::{ErrorClass, McpServer, RunConfig, Usage};
use os::process::Finished;
use serde_json::Value;

pub async fn auth_missing() -> Option<String> {
    if env_set("CODEX_API_KEY") {
        return None;
    }
    match probe("codex", &["login", "status"]).await {
        Some((true, _)) => None,
        Some((false, out)) => Some(format!(
            "Codex is not logged in ({out}); run `codex login` (or `printenv OPENAI_API_KEY | codex login --with-api-key`), or set CODEX_API_KEY in the agent's env"
        )),
        None => Some("`codex login status` did not answer; check the Codex install".into()),
    }
}

/// A TOML string: JSON's escapes are a subset of TOML basic strings'.
fn toml_str(s: &str) -> String {
    serde_json::to_string(s).expect("strings serialise")
}

/// The agent's own servers, as `-c` overrides on `args`; returns the environment
/// they read. Secrets never go on the command line (other users can read it): a
/// stdio server's env values are passed by name from Codex's environment
/// (`env_vars`), headers through `env_http_headers`.
fn own_server_args(cfg: &RunConfig, args: &mut Vec<String>) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = Vec::new();
    for (name, server) in own_servers(cfg) {
        let key = |k: &str| format!("mcp_servers.{name}.{k}");
        match server {
            McpServer::Stdio(st) => {
                args.extend([
                    "-c".into(),
                    format!("{}={}", key("command"), toml_str(&st.command)),
                ]);
                let list = st
                    .args
                    .iter()
                    .map(|a| toml_str(a))
                    .collect::<Vec<_>>()
                    .join(",");
                args.extend(["-c".into(), format!("{}=[{list}]", key("args"))]);
                let names = st
                    .env
                    .keys()
                    .map(|k| toml_str(k))
                    .collect::<Vec<_>>()
                    .join(",");
                args.extend(["-c".into(), format!("{}=[{names}]", key("env_vars"))]);
                env.extend(st.env.iter().map(|(k, v)| (k.clone(), v.clone())));
            }
            McpServer::Http(h) => {
                args.extend(["-c".into(), format!("{}={}", key("url"), toml_str(&h.url))]);
                let headers = h
                    .headers
                    .iter()
                    .map(|(k, v)| {
                        let var = secret_var(name, k);
                        env.push((var.clone(), v.clone()));
                        format!("{}={}", toml_str(k), toml_str(&var))
                    })
                    .collect::<Vec<_>>()
                    .join(",");
                args.extend([
                    "-c".into(),
                    format!("{}={{{headers}}}", key("env_http_headers")),
                ]);
            }
        }
        args.extend([
            "-c".into(),
            format!(
                "{}={}",
                key("default_tools_approval_mode"),
                toml_str("approve")
            ),
            // Codex starts servers that are not required in the background and runs
            // the turn without them: a slow one's tools were missing from the model's
            // first call, and one that cannot start was skipped without a word. As on
            // the sdk backend, the agent's servers are part of the run: it waits for
            // them, and one that cannot start fails the run with its name.
            "-c".into(),
            format!("{}=true", key("required")),
        ]);
    }
    env
}

/// The flag Codex needs to run a hook nobody recorded as trusted; it says so in an
/// error item of its stream, which is not the run's error.
const BYPASS_HOOK_TRUST: &str = "--dangerously-bypass-hook-trust";

/// The `-c` override holding the run's inbox hook after every tool call.
fn hook_args(run: &Run<'_>, scratch: &Scratch) -> Result<[String; 3], Failure> {
    let file = crate::hook::write_state(run, scratch)?;
    let hooks = crate::hook::settings(&crate::hook::own_binary()?, &file, "PostToolUse");
    let command = &hooks["hooks"]["PostToolUse"][0]["hooks"][0]["command"];
    let command = toml_str(command.as_str().unwrap_or_default());
    Ok([
        "-c".into(),
        format!(
            r#"hooks.PostToolUse=[{{matcher="*",hooks=[{{type="command",command={command}}}]}}]"#
        ),
        BYPASS_HOOK_TRUST.into(),
    ])
}

pub fn invocation(
    run: &Run<'_>,
    session: Option<&str>,
    scratch: &Scratch,
) -> Result<Invocation, Failure> {
    let cfg = run.cfg;
    let rules = permissions::backends::codex(&cfg.permissions)
        .map_err(|e| Failure::new(ErrorClass::Other, e))?;
    let server = |k: &str, v: String| ["-c".to_owned(), format!("mcp_servers.{SERVER}.{k}={v}")];
    let mut args: Vec<String> = vec!["exec".into()];
    if let Some(s) = session {
        args.extend(["resume".into(), s.to_owned()]);
    }
    args.extend(["--json".into(), "--skip-git-repo-check".into()]);
    args.extend(server("url", toml_str(&cfg.url)));
    args.extend(server("bearer_token_env_var", toml_str(TOKEN_ENV)));
    args.extend(server("default_tools_approval_mode", toml_str("approve")));
    args.extend(server("required", "true".into()));
    // Codex's own sandbox cannot start inside the run's OS sandbox (Landlock
    // forbids the mounts it makes); a required one holds the same profile for
    // every process of the run, so Codex's steps aside.
    let ours = cfg
        .sandbox
        .as_ref()
        .is_some_and(|s| s.mode == domain::sandbox::Mode::Required);
    let sandbox = if ours {
        "danger-full-access"
    } else {
        rules.sandbox
    };
    args.extend([
        "-c".into(),
        format!("developer_instructions={}", toml_str(&prompt::system(cfg))),
        // The profile's sandbox. `-s` is not accepted by `exec resume`; the config
        // key is.
        "-c".into(),
        format!("sandbox_mode={}", toml_str(sandbox)),
    ]);
    if sandbox == "workspace-write" {
        // Codex's workspace-write also lets commands write in /tmp and $TMPDIR; the
        // edit profile means the agent's folder only.
        for k in ["exclude_slash_tmp", "exclude_tmpdir_env_var"] {
            args.extend(["-c".into(), format!("sandbox_workspace_write.{k}=true")]);
        }
    }
    for feature in &rules.disable {
        args.extend(["-c".into(), format!("features.{feature}=false")]);
    }
    let env = own_server_args(cfg, &mut args);
    // Hooks run unreviewed only where the run's sandbox holds them.
    if crate::sandbox::landlocked() {
        args.extend(hook_args(run, scratch)?);
    }
    if let Some(m) = &cfg.model {
        args.extend(["-m".into(), m.clone()]);
    }
    // Codex ignores OPENAI_BASE_URL in its environment; honour it the way Codex
    // reads a base URL, so an agent's env means the same for every backend.
    if let Ok(base) = std::env::var("OPENAI_BASE_URL")
        && !base.trim().is_empty()
    {
        args.extend([
            "-c".into(),
            format!("openai_base_url={}", toml_str(base.trim())),
        ]);
    }
    args.push(prompt::task(cfg, run.context));
    Ok(Invocation {
        program: "codex".into(),
        args,
        env,
        files: vec![],
    })
}

#[derive(Default)]
pub struct Stream {
    last_message: Option<String>,
    completed: bool,
    errors: Vec<String>,
    /// The resumed thread's total when its last run ended.
    before: Usage,
}

impl Stream {
    /// `before`: what the thread being resumed had counted (nothing for a new one).
    pub fn new(before: Option<Usage>) -> Self {
        Self {
            last_message: None,
            completed: false,
            errors: Vec::new(),
            before: before.unwrap_or_default(),
        }
    }
}

impl Events for Stream {
    fn event(&mut self, v: &Value, report: &Reporter) {
        match str_at(v, &["type"]) {
            Some("thread.started") => {
                if let Some(id) = str_at(v, &["thread_id"]) {
                    report.session(id);
                }
            }
            Some("item.started") if str_at(v, &["item", "type"]) == Some("mcp_tool_call") => {
                report.progress(format!(
                    "calls {}",
                    str_at(v, &["item", "tool"]).unwrap_or("a tool")
                ));
            }
            Some("item.completed") => {
                let item = &v["item"];
                match str_at(item, &["type"]) {
                    Some("agent_message") => {
                        self.last_message = str_at(item, &["text"]).map(str::to_owned)
                    }
                    Some("error") => {
                        if let Some(m) = str_at(item, &["message"])
                            && !m.contains(BYPASS_HOOK_TRUST)
                        {
                            self.errors.push(m.to_owned());
                        }
                    }
                    Some("mcp_tool_call") => {
                        if let Some(e) = str_at(item, &["error", "message"]) {
                            report.progress(format!("tool call failed: {e}"));
                        }
                    }
                    _ => {}
                }
            }
            Some("turn.completed") => {
                self.completed = true;
                // Codex reports the thread's running totals, earlier runs included:
                // this run's own is what was added since the thread was resumed.
                let total = Usage {
                    input_tokens: num(v, &["usage", "input_tokens"]),
                    output_tokens: num(v, &["usage", "output_tokens"]),
                    cost_usd: None,
                };
                report.session_total(total);
                report.set_usage(Usage {
                    input_tokens: total.input_tokens.saturating_sub(self.before.input_tokens),
                    output_tokens: total
                        .output_tokens
                        .saturating_sub(self.before.output_tokens),
                    cost_usd: None,
                });
            }
            Some("turn.failed") => {
                let m = str_at(v, &["error", "message"]).unwrap_or("turn failed");
                self.errors.insert(0, m.to_owned());
            }
            Some("error") => {
                if let Some(m) = str_at(v, &["message"]) {
                    report.progress(m.to_owned());
                    self.errors.push(m.to_owned());
                }
            }
            _ => {}
        }
    }

    fn finish(self: Box<Self>, done: &Finished) -> Result<Option<String>, Failure> {
        if self.completed && done.success() {
            return Ok(self.last_message);
        }
        Err(failure_from(&self.errors, done, "codex"))
    }
}
