//! A fake LLM provider for driving the real worker CLIs offline.
//!
//! One loopback HTTP server speaks every wire protocol the four CLIs use
//! (verified with claude-code 2.1.197, codex 0.169.0, gemini-cli 0.61.0,
//! opencode 1.18.33; see scripts/interop-setup):
//!
//! | CLI         | point it here                                   | it calls                                  |
//! |-------------|-------------------------------------------------|-------------------------------------------|
//! | Claude Code | `ANTHROPIC_BASE_URL={url}`                      | `POST /v1/messages?beta=true` (SSE)       |
//! | Codex       | `-c openai_base_url="{url}/v1"`                 | `POST /v1/responses` (SSE)                |
//! | Gemini CLI  | `GOOGLE_GEMINI_BASE_URL={url}`                  | `POST /v1beta/models/{m}:streamGenerateContent?alt=sse` |
//! | OpenCode    | provider `options.baseURL` = `{url}/v1`         | `/v1/messages` (anthropic) or `/v1/chat/completions` (openai-compatible), SSE |
//!
//! Non-streaming variants (`stream:false`, `:generateContent`) are answered too.
//!
//! Every endpoint follows the same [`Script`]: while the conversation holds no
//! tool result, answer with ONE call to the first offered tool whose name ends
//! with `tool_suffix` (each CLI names MCP tools differently: `mcp__aw__channel_send`,
//! `mcp_aw_channel_send`, `aw_channel_send`, or Codex's namespace `mcp__aw` +
//! `channel_send`); once a tool result is in the conversation, answer with
//! `final_text`. So one script drives a full "model -> MCP tools/call -> final
//! text" loop in any CLI. Side requests that offer no such tool (OpenCode's
//! session title) get `final_text` at once.
//!
//! Streamed answers are written as one complete SSE body: clients parse it
//! incrementally anyway, and it keeps this file free of stream plumbing.
//! Every request (method, path, query, headers, JSON body) is recorded, and
//! other paths (Claude's `HEAD /`, model lists, count_tokens) get a harmless 200.
#![allow(dead_code)]

use axum::{
    Router,
    body::{Body, Bytes},
    extract::State,
    http::{HeaderMap, Method, StatusCode, Uri, header},
    response::Response,
};
use serde_json::{Value, json};
use std::fmt::Write as _;
use std::sync::{
    Arc, Mutex,
    atomic::{AtomicU64, Ordering},
};

/// What the fake model does.
#[derive(Clone, Debug)]
pub struct Script {
    /// Call the first offered tool whose name ends with this (empty: never call).
    pub tool_suffix: String,
    /// Arguments for that call.
    pub tool_args: Value,
    /// The answer once a tool result is in the conversation.
    pub final_text: String,
    /// Fail every model call with this HTTP status and the provider's error
    /// body: 401 = bad key; 429 = quota exhausted (OpenAI `insufficient_quota`,
    /// Gemini per-day quota; Anthropic has no quota 429, so `rate_limit_error`).
    pub error_status: Option<u16>,
    /// Further calls after the first: once the conversation holds k tool results,
    /// call `then[k - 1]` (a tool named exactly so if offered, else the first
    /// offered tool ending with it, else that name even though it is not offered,
    /// as a model may); when they are used up, answer `final_text`. A string
    /// `"{{/a/json/pointer}}"` in their args is that value of the last tool
    /// result (Anthropic), e.g. the id a task_claim returned; a result without
    /// it ends the script there.
    pub then: Vec<(String, Value)>,
    /// Count only the tool results since the conversation's last prompt (a
    /// user message with text), so a backend that keeps its conversation from
    /// run to run plays the script again in every run.
    pub every_run: bool,
}

impl Script {
    /// One call to the tool ending with `suffix`, then `final_text`.
    pub fn tool_then_text(suffix: &str, args: Value, final_text: &str) -> Self {
        Self {
            tool_suffix: suffix.into(),
            tool_args: args,
            final_text: final_text.into(),
            error_status: None,
            then: Vec::new(),
            every_run: false,
        }
    }
    /// Calls to each of `steps` (tool, args) in turn, one per model call, then
    /// `final_text`: e.g. a built-in file write, then a shell command.
    pub fn steps(steps: &[(&str, Value)], final_text: &str) -> Self {
        let mut s = Self::tool_then_text(steps[0].0, steps[0].1.clone(), final_text);
        s.then = steps[1..]
            .iter()
            .map(|(n, a)| ((*n).to_owned(), a.clone()))
            .collect();
        s
    }
    /// [`Self::steps`], played again in every run of an agent whose backend
    /// keeps its conversation (the sdk).
    pub fn every_run(steps: &[(&str, Value)], final_text: &str) -> Self {
        Self {
            every_run: true,
            ..Self::steps(steps, final_text)
        }
    }
    /// Plain text answers, no tool calls.
    pub fn text(final_text: &str) -> Self {
        Self::tool_then_text("", json!({}), final_text)
    }
    /// Every model call fails with `status` (e.g. 401, 429).
    pub fn error(status: u16) -> Self {
        Self {
            error_status: Some(status),
            ..Self::text("")
        }
    }
}

/// The running server; stops when dropped.
pub struct FakeLlm {
    /// `http://127.0.0.1:PORT`, no trailing slash. Base URLs per CLI:
    /// Anthropic `{url}`, OpenAI `{url}/v1`, Gemini `{url}`.
    pub url: String,
    state: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

struct Shared {
    script: Script,
    log: Mutex<Vec<Value>>,
    ids: AtomicU64,
}

impl FakeLlm {
    pub async fn start(script: Script) -> FakeLlm {
        let state = Arc::new(Shared {
            script,
            log: Mutex::new(Vec::new()),
            ids: AtomicU64::new(1),
        });
        // One fallback handler: Gemini paths put `:action` inside a segment,
        // and we want to record and answer unknown paths anyway.
        // Requests as big as a real provider takes (a conversation carrying a big
        // tool call), not axum's default 2 MB.
        let app = Router::new()
            .fallback(handle)
            .layer(axum::extract::DefaultBodyLimit::max(32 * 1024 * 1024))
            .with_state(state.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind fake LLM");
        let url = format!("http://{}", listener.local_addr().unwrap());
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.ok();
        });
        FakeLlm { url, state, task }
    }

    /// Every request so far: `{"method","path","query","headers","body"}`
    /// (body is the parsed JSON, or the raw text, or null).
    pub fn requests(&self) -> Vec<Value> {
        self.state.log.lock().unwrap().clone()
    }

    /// The recorded requests that were model calls (not lists, telemetry, ...).
    pub fn model_calls(&self) -> Vec<Value> {
        self.requests()
            .into_iter()
            .filter(|r| api_of(r["path"].as_str().unwrap_or("")).is_some())
            .collect()
    }
}

impl Drop for FakeLlm {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Api {
    Anthropic,
    Responses,
    Chat,
    /// `true`: streamGenerateContent.
    Gemini(bool),
}

fn api_of(path: &str) -> Option<Api> {
    if path.ends_with("/messages") {
        Some(Api::Anthropic)
    } else if path.ends_with("/responses") {
        Some(Api::Responses)
    } else if path.ends_with("/chat/completions") {
        Some(Api::Chat)
    } else if path.ends_with(":streamGenerateContent") {
        Some(Api::Gemini(true))
    } else if path.ends_with(":generateContent") {
        Some(Api::Gemini(false))
    } else {
        None
    }
}

/// What to answer this turn.
enum Turn {
    /// Call a tool; `namespace` only for Codex's namespaced MCP tools.
    Call {
        namespace: Option<String>,
        name: String,
        args: Value,
    },
    /// Codex only: a `tool_search_call` for this query.
    Search(String),
    Text(String),
}

async fn handle(
    State(st): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path = uri.path().to_owned();
    let text = String::from_utf8_lossy(&body).into_owned();
    let req: Value = if text.is_empty() {
        Value::Null
    } else {
        serde_json::from_str(&text).unwrap_or(Value::String(text))
    };
    let hdrs: serde_json::Map<String, Value> = headers
        .iter()
        .map(|(k, v)| (k.to_string(), json!(v.to_str().unwrap_or(""))))
        .collect();
    st.log.lock().unwrap().push(json!({
        "method": method.as_str(), "path": path, "query": uri.query().unwrap_or(""),
        "headers": hdrs, "body": req,
    }));

    // Codex first tries a WebSocket on GET /v1/responses; 426 makes it fall
    // back to HTTP SSE at once (anything else costs ~6 s of reconnects).
    if headers.contains_key(header::UPGRADE) {
        return json_response(
            426,
            json!({"error": {"message": "websockets not supported"}}),
        );
    }
    let Some(api) = api_of(&path).filter(|_| method == Method::POST) else {
        return other_path(&path);
    };
    if let Some(status) = st.script.error_status {
        return error(api, status);
    }
    let id = st.ids.fetch_add(1, Ordering::Relaxed);
    let turn = decide(&st.script, api, &req);
    // Gemini picks streaming by path; the others by the `stream` field.
    let stream = match api {
        Api::Gemini(s) => s,
        _ => req["stream"].as_bool().unwrap_or(false),
    };
    let model = match api {
        Api::Gemini(_) => path
            .rsplit('/')
            .next()
            .and_then(|m| m.split(':').next())
            .unwrap_or("gemini")
            .to_owned(),
        _ => req["model"].as_str().unwrap_or("fake-model").to_owned(),
    };
    match api {
        Api::Anthropic => anthropic(&turn, &model, id, stream),
        Api::Responses => responses(&turn, &model, id, stream),
        Api::Chat => chat(&turn, &model, id, stream, &req),
        Api::Gemini(_) => gemini(&turn, &model, stream),
    }
}

/// The scripted policy, applied to each provider's request shape.
fn decide(script: &Script, api: Api, req: &Value) -> Turn {
    let done = Turn::Text(script.final_text.clone());
    let results = match (script.every_run, api) {
        (true, Api::Anthropic) => tool_results_since_prompt(req),
        _ => tool_results(api, req),
    };
    if script.tool_suffix.is_empty() {
        return done;
    }
    if results > 0 {
        // A multi-step script: the next step by how many results came back.
        let Some((want, args)) = script.then.get(results - 1) else {
            return done;
        };
        let Some(args) = filled(args, api, req) else {
            return done;
        };
        let offered = offered_tools(api, req);
        let (namespace, name) = offered
            .iter()
            .find(|(_, n)| n == want)
            .or_else(|| offered.iter().find(|(_, n)| n.ends_with(want.as_str())))
            .cloned()
            .unwrap_or((None, want.clone()));
        return Turn::Call {
            namespace,
            name,
            args,
        };
    }
    if let Some((namespace, name)) = offered_tools(api, req)
        .into_iter()
        .find(|(_, n)| n.ends_with(&script.tool_suffix))
    {
        return Turn::Call {
            namespace,
            name,
            args: script.tool_args.clone(),
        };
    }
    // Codex defers MCP tools behind its client-side `tool_search` tool for
    // models that support it (e.g. gpt-5.5): search first, and the matches
    // come back in a `tool_search_output` input item on the next request.
    let searched = arr(&req["input"])
        .iter()
        .any(|i| i["type"] == "tool_search_output");
    if api == Api::Responses
        && !searched
        && arr(&req["tools"])
            .iter()
            .any(|t| t["type"] == "tool_search")
    {
        return Turn::Search(script.tool_suffix.clone());
    }
    if !script.then.is_empty() && !offered_tools(api, req).is_empty() {
        // Not offered: call it anyway, as a model may, and see what the CLI says.
        // (Side requests that offer no tools at all, like a title, get text.)
        return Turn::Call {
            namespace: None,
            name: script.tool_suffix.clone(),
            args: script.tool_args.clone(),
        };
    }
    done
}

/// A step's `args` with each string `"{{/a/json/pointer}}"` replaced by that
/// value of the last tool result (its text read as JSON; Anthropic requests):
/// e.g. `{"id": "{{/task/id}}"}` after a task_claim. None when the result holds
/// no such value: the script ends there, as a model would stop.
fn filled(args: &Value, api: Api, req: &Value) -> Option<Value> {
    fn walk(v: &Value, last: &Value) -> Option<Value> {
        Some(match v {
            Value::String(s) if s.starts_with("{{/") && s.ends_with("}}") => {
                let found = last.pointer(&s[2..s.len() - 2])?;
                (!found.is_null()).then(|| found.clone())?
            }
            Value::Array(a) => {
                Value::Array(a.iter().map(|x| walk(x, last)).collect::<Option<_>>()?)
            }
            Value::Object(o) => Value::Object(
                o.iter()
                    .map(|(k, x)| Some((k.clone(), walk(x, last)?)))
                    .collect::<Option<_>>()?,
            ),
            other => other.clone(),
        })
    }
    if !args.to_string().contains("{{/") {
        return Some(args.clone());
    }
    let last = match api {
        Api::Anthropic => last_tool_result(req),
        _ => Value::Null,
    };
    walk(args, &last)
}

/// The last `tool_result` block's text of an Anthropic request, read as JSON
/// (null when it is not JSON).
fn last_tool_result(req: &Value) -> Value {
    let Some(block) = arr(&req["messages"])
        .iter()
        .flat_map(|m| arr(&m["content"]))
        .rfind(|b| b["type"] == "tool_result")
    else {
        return Value::Null;
    };
    let text = match &block["content"] {
        Value::String(t) => t.clone(),
        blocks => arr(blocks)
            .iter()
            .filter_map(|b| b["text"].as_str())
            .collect::<String>(),
    };
    serde_json::from_str(&text).unwrap_or(Value::Null)
}

fn arr(v: &Value) -> &[Value] {
    v.as_array().map(Vec::as_slice).unwrap_or(&[])
}

/// How many `tool_result` blocks follow the last user message with text (the
/// prompt of the run under way), in an Anthropic request.
fn tool_results_since_prompt(req: &Value) -> usize {
    let messages = arr(&req["messages"]);
    let prompt = messages.iter().rposition(|m| {
        m["role"] == "user"
            && (m["content"].is_string() || arr(&m["content"]).iter().any(|b| b["type"] == "text"))
    });
    messages[prompt.map_or(0, |p| p + 1)..]
        .iter()
        .flat_map(|m| arr(&m["content"]))
        .filter(|b| b["type"] == "tool_result")
        .count()
}

/// How many answers to tool calls the conversation holds.
fn tool_results(api: Api, req: &Value) -> usize {
    match api {
        // User messages' `tool_result` content blocks.
        Api::Anthropic => arr(&req["messages"])
            .iter()
            .flat_map(|m| arr(&m["content"]))
            .filter(|b| b["type"] == "tool_result")
            .count(),
        // Input items `function_call_output` (or the MCP/custom variants).
        Api::Responses => arr(&req["input"])
            .iter()
            .filter(|i| {
                i["type"]
                    .as_str()
                    .is_some_and(|t| t.ends_with("call_output"))
            })
            .count(),
        // `role: tool` messages.
        Api::Chat => arr(&req["messages"])
            .iter()
            .filter(|m| m["role"] == "tool")
            .count(),
        // `functionResponse` parts.
        Api::Gemini(_) => arr(&req["contents"])
            .iter()
            .flat_map(|c| arr(&c["parts"]))
            .filter(|p| p.get("functionResponse").is_some())
            .count(),
    }
}

/// Offered tools as (namespace, name), in order.
fn offered_tools(api: Api, req: &Value) -> Vec<(Option<String>, String)> {
    let mut out = Vec::new();
    if let Api::Gemini(_) = api {
        // Gemini groups declarations: tools[].functionDeclarations[].name
        for t in arr(&req["tools"]) {
            for d in arr(&t["functionDeclarations"]) {
                out.extend(d["name"].as_str().map(|n| (None, n.to_owned())));
            }
        }
        return out;
    }
    // Chat: tools[].function.name; Anthropic/Responses: tools[].name.
    // Codex (Responses) groups each MCP server's tools in a namespace,
    // {"type":"namespace","name":"mcp__aw","tools":[{"name":"channel_send"}]},
    // and its tool_search results arrive as input items shaped the same way.
    let searched = arr(&req["input"])
        .iter()
        .filter(|i| i["type"] == "tool_search_output")
        .flat_map(|i| arr(&i["tools"]));
    for t in arr(&req["tools"]).iter().chain(searched) {
        if t["type"] == "namespace" {
            let ns = t["name"].as_str().map(String::from);
            for inner in arr(&t["tools"]) {
                out.extend(inner["name"].as_str().map(|n| (ns.clone(), n.to_owned())));
            }
        } else if let Some(n) = t["function"]["name"].as_str().or(t["name"].as_str()) {
            out.push((None, n.to_owned()));
        }
    }
    out
}

// Fixed token counts: enough for the CLIs to show usage, easy to assert.
const IN_TOKENS: u64 = 120;
const OUT_TOKENS: u64 = 12;

fn json_response(status: u16, v: Value) -> Response {
    Response::builder()
        .status(StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR))
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(v.to_string()))
        .unwrap()
}

/// SSE from (event name, data) pairs; `None` event = data-only lines.
fn sse(events: Vec<(Option<&str>, String)>) -> Response {
    let mut s = String::new();
    for (ev, data) in events {
        if let Some(ev) = ev {
            let _ = writeln!(s, "event: {ev}");
        }
        let _ = write!(s, "data: {data}\n\n");
    }
    Response::builder()
        .header(header::CONTENT_TYPE, "text/event-stream")
        .header(header::CACHE_CONTROL, "no-cache")
        .body(Body::from(s))
        .unwrap()
}

// ---------- Anthropic Messages ----------

fn anthropic(turn: &Turn, model: &str, id: u64, stream: bool) -> Response {
    // `block` is the whole content block (non-streaming); streamed, the block
    // starts empty (`start`) and its payload arrives as one `delta`, like the
    // real API: tool input as `input_json_delta` (a JSON string), text as `text_delta`.
    let (block, start, delta, stop) = match turn {
        Turn::Call { name, args, .. } => {
            let block = json!({"type": "tool_use", "id": format!("toolu_{id:02}"), "name": name,
                "input": args});
            let mut start = block.clone();
            start["input"] = json!({});
            let delta = json!({"type": "input_json_delta", "partial_json": args.to_string()});
            (block, start, delta, "tool_use")
        }
        Turn::Text(t) => (
            json!({"type": "text", "text": t}),
            json!({"type": "text", "text": ""}),
            json!({"type": "text_delta", "text": t}),
            "end_turn",
        ),
        Turn::Search(_) => unreachable!("tool_search is Codex-only"),
    };
    let usage = json!({"input_tokens": IN_TOKENS, "output_tokens": OUT_TOKENS,
        "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0});
    let msg_id = format!("msg_{id:02}");
    if !stream {
        return json_response(
            200,
            json!({"id": msg_id, "type": "message", "role": "assistant", "model": model,
                "content": [block], "stop_reason": stop, "stop_sequence": null, "usage": usage}),
        );
    }
    let mut start_usage = usage.clone();
    start_usage["output_tokens"] = json!(1);
    let ev = |name: &'static str, v: Value| (Some(name), v.to_string());
    sse(vec![
        ev(
            "message_start",
            json!({"type": "message_start", "message": {"id": msg_id,
            "type": "message", "role": "assistant", "model": model, "content": [],
            "stop_reason": null, "stop_sequence": null, "usage": start_usage}}),
        ),
        ev(
            "content_block_start",
            json!({"type": "content_block_start", "index": 0, "content_block": start}),
        ),
        ev(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": delta}),
        ),
        ev(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 0}),
        ),
        ev(
            "message_delta",
            json!({"type": "message_delta",
            "delta": {"stop_reason": stop, "stop_sequence": null},
            "usage": {"output_tokens": OUT_TOKENS}}),
        ),
        ev("message_stop", json!({"type": "message_stop"})),
    ])
}

// ---------- OpenAI Responses (Codex) ----------

fn responses(turn: &Turn, model: &str, id: u64, stream: bool) -> Response {
    let item = match turn {
        // A free-form tool (Codex's apply_patch) takes its input as plain text.
        Turn::Call { name, args, .. }
            if args["input"].is_string() && args.as_object().is_some_and(|o| o.len() == 1) =>
        {
            json!({"type": "custom_tool_call", "id": format!("ctc_{id}"),
                "call_id": format!("call_{id}"), "name": name, "input": args["input"],
                "status": "completed"})
        }
        Turn::Call {
            namespace,
            name,
            args,
        } => {
            let mut call = json!({"type": "function_call", "id": format!("fc_{id}"),
                "call_id": format!("call_{id}"), "name": name, "arguments": args.to_string(),
                "status": "completed"});
            // A namespaced tool is called by its short name plus `namespace`.
            if let Some(ns) = namespace {
                call["namespace"] = json!(ns);
            }
            call
        }
        // Codex runs the search itself (BM25 over the deferred tools).
        Turn::Search(q) => json!({"type": "tool_search_call", "id": format!("ts_{id}"),
            "call_id": format!("search_{id}"), "status": "completed", "execution": "client",
            "arguments": {"query": q, "limit": 8}}),
        Turn::Text(t) => json!({"type": "message", "id": format!("msg_{id}"), "role": "assistant",
            "status": "completed", "content": [{"type": "output_text", "text": t, "annotations": []}]}),
    };
    let usage = json!({"input_tokens": IN_TOKENS, "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": OUT_TOKENS, "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": IN_TOKENS + OUT_TOKENS});
    let resp_id = format!("resp_{id}");
    let done = json!({"id": resp_id, "object": "response", "created_at": 0, "model": model,
        "status": "completed", "output": [item], "usage": usage});
    if !stream {
        return json_response(200, done);
    }
    // Codex builds its turn from `output_item.done` items and needs
    // `response.completed` (else "stream closed before response.completed").
    let mut started = done.clone();
    started["status"] = json!("in_progress");
    started["output"] = json!([]);
    started["usage"] = Value::Null;
    let mut ev = vec![(
        "response.created",
        json!({"type": "response.created", "sequence_number": 0, "response": started}),
    )];
    ev.push((
        "response.output_item.added",
        json!({"type": "response.output_item.added", "output_index": 0, "item": item}),
    ));
    if let Turn::Text(t) = turn {
        ev.push((
            "response.output_text.delta",
            json!({"type": "response.output_text.delta", "item_id": format!("msg_{id}"),
                "output_index": 0, "content_index": 0, "delta": t}),
        ));
    }
    ev.push((
        "response.output_item.done",
        json!({"type": "response.output_item.done", "output_index": 0, "item": item}),
    ));
    ev.push((
        "response.completed",
        json!({"type": "response.completed", "response": done}),
    ));
    sse(ev
        .into_iter()
        .map(|(n, v)| (Some(n), v.to_string()))
        .collect())
}

// ---------- OpenAI Chat Completions ----------

fn chat(turn: &Turn, model: &str, id: u64, stream: bool, req: &Value) -> Response {
    let cid = format!("chatcmpl-{id}");
    let usage = json!({"prompt_tokens": IN_TOKENS, "completion_tokens": OUT_TOKENS,
        "total_tokens": IN_TOKENS + OUT_TOKENS});
    let (message, finish) = match turn {
        Turn::Call { name, args, .. } => (
            json!({"role": "assistant", "content": null, "tool_calls": [{"id": format!("call_{id}"),
                "type": "function", "function": {"name": name, "arguments": args.to_string()}}]}),
            "tool_calls",
        ),
        Turn::Text(t) => (json!({"role": "assistant", "content": t}), "stop"),
        Turn::Search(_) => unreachable!("tool_search is Codex-only"),
    };
    if !stream {
        return json_response(
            200,
            json!({"id": cid, "object": "chat.completion", "created": 0, "model": model,
                "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                "usage": usage}),
        );
    }
    let chunk = |delta: Value, finish: Value| {
        json!({"id": cid, "object": "chat.completion.chunk", "created": 0, "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
        .to_string()
    };
    let mut out = Vec::new();
    match turn {
        // Name first with empty arguments, then the arguments: clients must
        // concatenate `function.arguments` by `index`, as with real servers.
        Turn::Call { name, args, .. } => {
            out.push(chunk(
                json!({"role": "assistant", "content": null, "tool_calls": [{"index": 0,
                    "id": format!("call_{id}"), "type": "function",
                    "function": {"name": name, "arguments": ""}}]}),
                Value::Null,
            ));
            out.push(chunk(
                json!({"tool_calls": [{"index": 0, "function": {"arguments": args.to_string()}}]}),
                Value::Null,
            ));
        }
        Turn::Text(t) => {
            out.push(chunk(
                json!({"role": "assistant", "content": ""}),
                Value::Null,
            ));
            out.push(chunk(json!({"content": t}), Value::Null));
        }
        Turn::Search(_) => unreachable!("tool_search is Codex-only"),
    }
    out.push(chunk(json!({}), json!(finish)));
    // Usage comes in a final choice-less chunk only when asked for.
    if req["stream_options"]["include_usage"] == true {
        out.push(
            json!({"id": cid, "object": "chat.completion.chunk", "created": 0, "model": model,
                "choices": [], "usage": usage})
            .to_string(),
        );
    }
    out.push("[DONE]".into());
    sse(out.into_iter().map(|d| (None, d)).collect())
}

// ---------- Gemini ----------

fn gemini(turn: &Turn, model: &str, stream: bool) -> Response {
    let part = match turn {
        Turn::Call { name, args, .. } => json!({"functionCall": {"name": name, "args": args}}),
        Turn::Text(t) => json!({"text": t}),
        Turn::Search(_) => unreachable!("tool_search is Codex-only"),
    };
    let body = json!({
        "candidates": [{"content": {"role": "model", "parts": [part]},
            "finishReason": "STOP", "index": 0}],
        "usageMetadata": {"promptTokenCount": IN_TOKENS, "candidatesTokenCount": OUT_TOKENS,
            "totalTokenCount": IN_TOKENS + OUT_TOKENS},
        "modelVersion": model,
    });
    if stream {
        sse(vec![(None, body.to_string())])
    } else {
        json_response(200, body)
    }
}

// ---------- errors and other paths ----------

/// The error body each provider sends, so the CLIs classify it as they would
/// in production (auth vs quota vs server error).
fn error(api: Api, status: u16) -> Response {
    let body = match (api, status) {
        (Api::Anthropic, _) => {
            let (kind, msg) = match status {
                401 => ("authentication_error", "invalid x-api-key"),
                403 => ("permission_error", "Your API key does not have permission"),
                429 => (
                    "rate_limit_error",
                    "This request would exceed your account's rate limit. Please try again later.",
                ),
                529 => ("overloaded_error", "Overloaded"),
                _ => ("api_error", "Internal server error"),
            };
            json!({"type": "error", "error": {"type": kind, "message": msg}})
        }
        (Api::Responses | Api::Chat, _) => {
            let (kind, code, msg) = match status {
                401 => (
                    "invalid_request_error",
                    "invalid_api_key",
                    "Incorrect API key provided: sk-fake. You can find your API key at https://platform.openai.com/account/api-keys.",
                ),
                429 => (
                    "insufficient_quota",
                    "insufficient_quota",
                    "You exceeded your current quota, please check your plan and billing details.",
                ),
                _ => ("server_error", "server_error", "The server had an error"),
            };
            json!({"error": {"message": msg, "type": kind, "param": null, "code": code}})
        }
        // A bad key is really a 400 INVALID_ARGUMENT with reason API_KEY_INVALID;
        // 401 is what a bad OAuth token gets. 429 carries a per-day QuotaFailure,
        // which Gemini CLI treats as terminal ("exhausted your daily quota")
        // instead of retrying for minutes.
        (Api::Gemini(_), _) => {
            let (st, msg, details) = match status {
                400 => (
                    "INVALID_ARGUMENT",
                    "API key not valid. Please pass a valid API key.",
                    json!([{"@type": "type.googleapis.com/google.rpc.ErrorInfo",
                        "reason": "API_KEY_INVALID", "domain": "googleapis.com"}]),
                ),
                401 => (
                    "UNAUTHENTICATED",
                    "Request had invalid authentication credentials.",
                    json!([]),
                ),
                403 => ("PERMISSION_DENIED", "Permission denied", json!([])),
                429 => (
                    "RESOURCE_EXHAUSTED",
                    "You exceeded your current quota, please check your plan and billing details.",
                    json!([{"@type": "type.googleapis.com/google.rpc.QuotaFailure",
                        "violations": [{"quotaId": "GenerateRequestsPerDayPerProjectPerModel-FreeTier",
                            "quotaMetric": "generativelanguage.googleapis.com/generate_content_free_tier_requests"}]}]),
                ),
                _ => ("INTERNAL", "Internal error", json!([])),
            };
            json!({"error": {"code": status, "message": msg, "status": st, "details": details}})
        }
    };
    let mut r = json_response(status, body);
    if status == 429 {
        r.headers_mut()
            .insert(header::RETRY_AFTER, header::HeaderValue::from_static("1"));
    }
    r
}

/// Non-model paths the CLIs touch: answer so nothing retries or crashes.
fn other_path(path: &str) -> Response {
    let body = if path.ends_with("/count_tokens") {
        json!({"input_tokens": IN_TOKENS})
    } else if path.ends_with(":countTokens") {
        json!({"totalTokens": IN_TOKENS})
    } else if path.ends_with("/models") {
        // Shape shared by OpenAI (`data`), Anthropic (`data` + `has_more`),
        // Gemini (`models`) and Codex's own catalog (`models`): empty lists.
        json!({"object": "list", "data": [], "has_more": false, "models": []})
    } else {
        json!({})
    };
    json_response(200, body)
}
