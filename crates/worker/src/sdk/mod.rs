//! The `sdk` backend: our own tool loop over HTTP, no CLI.
//!
//! The model gets local tools for files and commands in the agent's folder
//! ([`local`], governed by the agent's permissions) and the kernel's MCP tools;
//! each tool call is made (a team tool over MCP as the agent) and the result goes
//! back to it, until it answers without calling a tool or the step cap is reached.
//! Its conversation is kept across runs ([`conversation`]). Two wire formats cover the
//! field: the Anthropic Messages API and OpenAI-compatible Chat Completions (OpenAI,
//! Ollama, llama.cpp, vLLM, ...).
//!
//! Model names: `anthropic/<model>` or `openai/<model>`; a bare name starting with
//! `claude` is Anthropic, any other bare name OpenAI-compatible. Keys and base URLs
//! come from the agent's env or the kernel's: `ANTHROPIC_API_KEY`,
//! `ANTHROPIC_BASE_URL`, `OPENAI_API_KEY`, `OPENAI_BASE_URL`.

mod anthropic;
pub(crate) mod arrivals;
mod command;
mod conversation;
pub mod fs;
pub(crate) mod local;
mod openai;
pub mod price;
mod servers;
mod skills;

use super::client::ToolFailed;
use super::protocol::{ErrorClass, Usage};
use super::{Failure, Run, classify, prompt};
use domain::permissions::Request;
use serde_json::Value;
use std::time::Duration;

/// A tool as the model sees it.
pub struct ToolDef {
    pub name: String,
    pub description: String,
    pub schema: Value,
}

/// One tool call the model asked for; `args` is an error when the model sent
/// arguments that are not a JSON object.
pub struct Call {
    pub id: String,
    pub name: String,
    pub args: Result<Value, String>,
}

/// One model turn.
pub struct Turn {
    pub text: Option<String>,
    pub calls: Vec<Call>,
    pub usage: Usage,
    /// The assistant message to append to the conversation, verbatim.
    pub assistant: Value,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Provider {
    Anthropic,
    OpenAi,
}

/// Where and how to reach the model.
pub struct Endpoint {
    pub provider: Provider,
    pub model: String,
    pub base: String,
    pub key: Option<String>,
    /// The key is an OAuth-style token (`ANTHROPIC_AUTH_TOKEN`), sent as
    /// `Authorization: Bearer` rather than `x-api-key`.
    pub bearer: bool,
    pub http: reqwest::Client,
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

impl Endpoint {
    pub fn from_env(model: Option<&str>) -> Result<Self, Failure> {
        let (provider, model) = match model.map(str::trim).filter(|m| !m.is_empty()) {
            Some(m) => match m.split_once('/') {
                Some(("anthropic", rest)) => (Provider::Anthropic, rest.to_owned()),
                Some(("openai", rest)) => (Provider::OpenAi, rest.to_owned()),
                _ if m.starts_with("claude") => (Provider::Anthropic, m.to_owned()),
                _ => (Provider::OpenAi, m.to_owned()),
            },
            None if env("ANTHROPIC_API_KEY").is_some() => {
                (Provider::Anthropic, "claude-sonnet-4-5".to_owned())
            }
            None if env("OPENAI_API_KEY").is_some() || env("OPENAI_BASE_URL").is_some() => {
                (Provider::OpenAi, "gpt-5".to_owned())
            }
            None => {
                return Err(Failure::new(
                    ErrorClass::Auth,
                    "the sdk backend found no model credentials: set ANTHROPIC_API_KEY or OPENAI_API_KEY (or OPENAI_BASE_URL for a local server) in the agent's env",
                ));
            }
        };
        let (base, key) = match provider {
            Provider::Anthropic => (
                env("ANTHROPIC_BASE_URL").unwrap_or_else(|| "https://api.anthropic.com".into()),
                env("ANTHROPIC_API_KEY").or_else(|| env("ANTHROPIC_AUTH_TOKEN")),
            ),
            Provider::OpenAi => (
                env("OPENAI_BASE_URL").unwrap_or_else(|| "https://api.openai.com/v1".into()),
                env("OPENAI_API_KEY"),
            ),
        };
        // A local OpenAI-compatible server needs no key; the hosted APIs do.
        let local = base.contains("://127.0.0.1")
            || base.contains("://localhost")
            || base.contains("://[::1]");
        if key.is_none() && !local {
            let var = match provider {
                Provider::Anthropic => "ANTHROPIC_API_KEY",
                Provider::OpenAi => "OPENAI_API_KEY",
            };
            return Err(Failure::new(
                ErrorClass::Auth,
                format!(
                    "the sdk backend needs {var} in the agent's env for model {model} at {base}"
                ),
            ));
        }
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(600))
            .build()
            .map_err(|e| Failure::new(ErrorClass::Other, format!("HTTP client: {e}")))?;
        Ok(Self {
            provider,
            model,
            base: base.trim_end_matches('/').to_owned(),
            bearer: provider == Provider::Anthropic
                && env("ANTHROPIC_API_KEY").is_none()
                && key.is_some(),
            key,
            http,
        })
    }

    /// POSTs a JSON body; a non-2xx answer is a classified failure in the
    /// provider's own words.
    pub async fn post(
        &self,
        url: &str,
        headers: &[(&str, String)],
        body: &Value,
    ) -> Result<Value, Failure> {
        let mut req = self.http.post(url).json(body);
        for (k, v) in headers {
            req = req.header(*k, v);
        }
        let resp = req
            .send()
            .await
            .map_err(|e| Failure::new(ErrorClass::Network, format!("cannot reach {url}: {e}")))?;
        let status = resp.status();
        let text = resp.text().await.map_err(|e| {
            Failure::new(
                ErrorClass::Network,
                format!("reading the answer from {url}: {e}"),
            )
        })?;
        if !status.is_success() {
            let detail = serde_json::from_str::<Value>(&text)
                .ok()
                .and_then(|v| v["error"]["message"].as_str().map(str::to_owned))
                .unwrap_or_else(|| text.chars().take(500).collect());
            return Err(Failure::new(
                classify::classify_status(status.as_u16(), &text),
                format!("{url} answered {status}: {detail}"),
            ));
        }
        serde_json::from_str(&text).map_err(|e| {
            Failure::new(
                ErrorClass::Other,
                format!("{url} answered with something that is not JSON: {e}"),
            )
        })
    }
}

pub async fn run(run: &Run<'_>) -> Result<Option<String>, Failure> {
    let ep = Endpoint::from_env(run.cfg.model.as_deref())?;
    let idle = std::time::Duration::from_millis(run.cfg.idle_ms);
    let servers = servers::Servers::connect(&run.cfg.mcp_servers, &run.cfg.cwd, run.report, idle);
    let servers = crate::or_stop(run.stop, servers).await?;
    // The loop answers a stop itself: it keeps the conversation first.
    let result = tool_loop(run, &ep, &servers).await;
    servers.close().await;
    result
}

/// The tools the model is offered: the local ones, the kernel's (but those the
/// local ones stand for, and the permission hook), the agent's own servers' and
/// its skills'.
async fn all_tools(run: &Run<'_>, servers: &servers::Servers) -> Result<Vec<ToolDef>, Failure> {
    let mut tools = local::tools();
    for t in run.client.tools().await? {
        if local::NAMES.contains(&t.name.as_ref()) || t.name == local::PERMISSION_TOOL {
            continue;
        }
        tools.push(ToolDef {
            name: t.name.to_string(),
            description: t.description.as_deref().unwrap_or_default().to_owned(),
            schema: Value::Object((*t.input_schema).clone()),
        });
    }
    tools.extend(servers.tools().await?);
    tools.extend(skills::tool(&run.cfg.skills));
    Ok(tools)
}

async fn tool_loop(
    run: &Run<'_>,
    ep: &Endpoint,
    servers: &servers::Servers,
) -> Result<Option<String>, Failure> {
    let tools = crate::or_stop(run.stop, all_tools(run, servers)).await?;
    let local = local::Local {
        root: fs::Root::new(&run.cfg.cwd).map_err(|e| Failure::new(ErrorClass::Other, e))?,
        permissions: &run.cfg.permissions,
        client: run.client,
        stop: run.stop,
        report: run.report,
    };
    let system = prompt::system(run.cfg) + &skills::section(&run.cfg.skills);
    let provider = match ep.provider {
        Provider::Anthropic => "anthropic",
        Provider::OpenAi => "openai",
    };
    let history = conversation::Conversation::new(
        &run.cfg.state_dir,
        provider,
        &ep.model,
        &system,
        &run.cfg.cwd,
    );
    let mut convo = history.load();
    if !convo.is_empty() {
        run.report.progress(format!(
            "continuing the conversation ({} earlier messages)",
            convo.len()
        ));
    }
    convo
        .push(serde_json::json!({ "role": "user", "content": prompt::task(run.cfg, run.context) }));
    let is_prompt = |m: &Value| m["role"] == "user" && m["content"].is_string();
    // A stopped run keeps its conversation too (every tool call answered), so the
    // run that follows an urgent message continues it.
    let keep = |convo: &[Value]| {
        if let Err(e) = history.save(convo, is_prompt) {
            run.report
                .progress(format!("could not keep the conversation: {e}"));
        }
        run.report.session(history.id());
    };
    let mut arrivals = arrivals::Arrivals::new(&run.context.inbox);
    let mut last_text = None;
    for step in 1..=run.cfg.max_steps {
        if step > 1 {
            deliver(run, ep.provider, &mut arrivals, &mut convo).await;
        }
        let turn = tokio::select! {
            t = model_turn(ep, &system, &convo, &tools) => t?,
            _ = run.stop.cancelled() => {
                keep(&convo);
                return Err(stopped());
            }
        };
        let mut usage = turn.usage;
        usage.cost_usd = price::cost(&ep.model, &usage);
        run.report.add_usage(usage);
        if turn.text.is_some() {
            last_text = turn.text.clone();
        }
        convo.push(turn.assistant);
        if turn.calls.is_empty() {
            keep(&convo);
            return Ok(last_text);
        }
        let results = calls(run, &local, servers, step, turn.calls).await?;
        match ep.provider {
            Provider::Anthropic => anthropic::push_results(&mut convo, results),
            Provider::OpenAi => openai::push_results(&mut convo, results),
        }
        if run.stop.is_cancelled() {
            keep(&convo);
            return Err(stopped());
        }
    }
    run.report
        .progress(format!("stopped at the step cap ({})", run.cfg.max_steps));
    Ok(Some(format!(
        "{}(stopped after {} steps while still calling tools)",
        last_text.map(|t| format!("{t}\n")).unwrap_or_default(),
        run.cfg.max_steps
    )))
}

fn stopped() -> Failure {
    Failure::new(ErrorClass::Stopped, "stopped by the kernel (SIGTERM)")
}

/// Adds to the conversation what arrived in the inbox since the model last looked.
async fn deliver(
    run: &Run<'_>,
    provider: Provider,
    arrivals: &mut arrivals::Arrivals,
    convo: &mut Vec<Value>,
) {
    let new = arrivals.fetch(run.client).await;
    if new.is_empty() {
        return;
    }
    run.report.progress(format!(
        "{} new message(s) reach the model mid-run",
        new.len()
    ));
    arrivals::push(convo, provider, arrivals::text(&new));
}

/// Makes one turn's tool calls, in order: each result, or once the run is stopped,
/// a note that it was not made (so the kept conversation answers every call).
async fn calls(
    run: &Run<'_>,
    local: &local::Local<'_>,
    servers: &servers::Servers,
    step: u32,
    calls: Vec<Call>,
) -> Result<Vec<(String, String, bool)>, Failure> {
    let mut results = Vec::new();
    for call in calls {
        if run.stop.is_cancelled() {
            let why = "not made: the run was stopped (an urgent message or the lead)";
            results.push((call.id, why.to_owned(), true));
            continue;
        }
        run.report
            .progress(format!("step {step}: calls {}", call.name));
        let span = telemetry::Span::start(
            format!("execute_tool {}", call.name),
            telemetry::SpanKind::Internal,
            None,
            vec![telemetry::KeyValue::new(
                "gen_ai.tool.name",
                call.name.clone(),
            )],
        );
        let work = answer(run, local, servers, call.name, call.args);
        let work = async {
            tokio::select! {
                r = work => r,
                _ = run.stop.cancelled() => Ok(("stopped before it finished: the run was stopped".to_owned(), true)),
            }
        };
        let (text, is_error) = match &span {
            Some(s) => telemetry::FutureExt::with_context(work, s.context().clone()).await?,
            None => work.await?,
        };
        if let Some(s) = span {
            if is_error {
                s.set("error.type", "tool_error");
            }
            s.end();
        }
        results.push((call.id, text, is_error));
    }
    Ok(results)
}

/// One model turn, in a span with what it used (when traces are exported).
async fn model_turn(
    ep: &Endpoint,
    system: &str,
    convo: &[Value],
    tools: &[ToolDef],
) -> Result<Turn, Failure> {
    use telemetry::KeyValue;
    let span = telemetry::Span::start(
        format!("chat {}", ep.model),
        telemetry::SpanKind::Client,
        None,
        vec![
            KeyValue::new("gen_ai.operation.name", "chat"),
            KeyValue::new("gen_ai.request.model", ep.model.clone()),
        ],
    );
    let turn = match ep.provider {
        Provider::Anthropic => anthropic::turn(ep, system, convo, tools).await,
        Provider::OpenAi => openai::turn(ep, system, convo, tools).await,
    };
    if let Some(s) = span {
        match &turn {
            Ok(t) => {
                s.set("gen_ai.usage.input_tokens", t.usage.input_tokens as i64);
                s.set("gen_ai.usage.output_tokens", t.usage.output_tokens as i64);
            }
            Err(f) => s.fail(domain::redact::shown(&f.message)),
        }
        s.end();
    }
    turn
}

/// What the model gets back for one tool call: refused if too big to make, else
/// a local tool's result, its own MCP server's (asked of the permissions and
/// contracts first), or the team server's. The text and whether it is an error.
async fn answer(
    run: &Run<'_>,
    local: &local::Local<'_>,
    servers: &servers::Servers,
    name: String,
    args: Result<Value, String>,
) -> Result<(String, bool), Failure> {
    let args = match args {
        Err(e) => {
            let why = format!(
                "your arguments were not a JSON object ({e}); call {name} again with a JSON object"
            );
            return Ok((why, true));
        }
        Ok(a) => a,
    };
    if let Some(why) = super::client::oversized(&name, &args) {
        run.report.progress(why.clone());
        return Ok((why, true));
    }
    if name == skills::TOOL && !run.cfg.skills.is_empty() {
        return Ok(skills::load(&run.cfg.skills, &args).await);
    }
    if let Some(r) = local.call(&name, &args).await {
        return Ok(r);
    }
    let Some((server, tool)) = servers.resolve(&name) else {
        return Ok(match run.client.call(&name, args).await? {
            Ok(v) => (v.to_string(), false),
            Err(ToolFailed(e)) => (e, true),
        });
    };
    let asked = Request::Mcp {
        server: server.clone(),
        tool: tool.to_owned(),
    };
    if let Some(why) = local.ask(asked, &name) {
        return Ok((why, true));
    }
    if let Some(why) = local.govern(&name, &args).await {
        return Ok((why, true));
    }
    servers.call(&server, tool, args).await
}
