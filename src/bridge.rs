//! The stdio bridge: a second stdio launch on a data dir whose kernel is already
//! running relays its MCP session to that kernel over loopback HTTP, instead of
//! opening the database a second time (DESIGN "One kernel per data dir").
//!
//! It is a JSON-RPC relay, not a second server: each line from stdin is POSTed to the
//! kernel's `/mcp` with the admin token; JSON responses are written back as one line,
//! SSE responses as one line per event (progress notifications included). It derives
//! the per-request headers streamable HTTP wants from the message itself: the session
//! id and protocol version from `initialize`, and for 2026-07-28 messages the
//! `MCP-Protocol-Version`, `Mcp-Method` and `Mcp-Name` headers.
//!
//! Limit: server-initiated messages outside a request (legacy GET stream) are not
//! relayed; agent-worker sends none today.

use anyhow::Context;
use futures::StreamExt;
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

const META_VERSION: &str = "io.modelcontextprotocol/protocolVersion";

struct Relay {
    http: reqwest::Client,
    url: String,
    token: String,
    /// Legacy (2025-11-25) session id and negotiated version, from `initialize`.
    session: Mutex<Option<(String, String)>>,
    out: tokio::sync::Mutex<tokio::io::Stdout>,
}

impl Relay {
    async fn write(&self, line: &[u8]) {
        let mut out = self.out.lock().await;
        let _ = out.write_all(line).await;
        let _ = out.write_all(b"\n").await;
        let _ = out.flush().await;
    }

    async fn error(&self, id: &Value, msg: String) {
        if id.is_null() {
            tracing::warn!("bridge: {msg}");
            return;
        }
        let e = json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32603, "message": msg}});
        self.write(e.to_string().as_bytes()).await;
    }

    async fn forward(&self, msg: Value) {
        let id = msg.get("id").cloned().unwrap_or(Value::Null);
        let method = msg
            .get("method")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let mut req = self
            .http
            .post(&self.url)
            .bearer_auth(&self.token)
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json");
        let per_request = msg
            .pointer(&format!(
                "/params/_meta/{}",
                META_VERSION.replace('/', "~1")
            ))
            .and_then(Value::as_str);
        if let Some(v) = per_request {
            req = req
                .header("mcp-protocol-version", v)
                .header("mcp-method", &method);
            let name = msg
                .pointer("/params/name")
                .or_else(|| msg.pointer("/params/uri"))
                .and_then(Value::as_str);
            if let Some(name) = name.filter(|_| {
                matches!(
                    method.as_str(),
                    "tools/call" | "resources/read" | "prompts/get"
                )
            }) {
                req = req.header("mcp-name", name);
            }
        } else if let Some((sid, ver)) = self.session.lock().unwrap().clone() {
            req = req.header("mcp-session-id", sid);
            if !ver.is_empty() {
                req = req.header("mcp-protocol-version", ver);
            }
        }
        let resp = match req.json(&msg).send().await {
            Ok(r) => r,
            Err(e) => {
                return self
                    .error(
                        &id,
                        format!(
                            "the agent-worker kernel at {} is unreachable: {e}",
                            self.url
                        ),
                    )
                    .await;
            }
        };
        if let Some(sid) = resp
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
        {
            self.session.lock().unwrap().replace((sid, String::new()));
        }
        let is_sse = resp
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|ct| ct.starts_with("text/event-stream"));
        let status = resp.status();
        if status == reqwest::StatusCode::ACCEPTED {
            return;
        }
        if is_sse {
            self.relay_sse(resp, &method).await;
        } else {
            match resp.bytes().await {
                Ok(body) if !body.is_empty() => {
                    self.note_version(&method, &body);
                    self.write(&body).await
                }
                Ok(_) => {
                    self.error(
                        &id,
                        format!("the kernel answered HTTP {status} with no body"),
                    )
                    .await
                }
                Err(e) => {
                    self.error(&id, format!("reading the kernel's answer failed: {e}"))
                        .await
                }
            }
        }
    }

    /// Remembers the negotiated version from an `initialize` result (sent as a header later).
    fn note_version(&self, method: &str, body: &[u8]) {
        if method != "initialize" {
            return;
        }
        let ver = serde_json::from_slice::<Value>(body).ok().and_then(|v| {
            v.pointer("/result/protocolVersion")
                .and_then(Value::as_str)
                .map(str::to_owned)
        });
        if let (Some(ver), Some(s)) = (ver, self.session.lock().unwrap().as_mut()) {
            s.1 = ver;
        }
    }

    async fn relay_sse(&self, resp: reqwest::Response, method: &str) {
        let mut stream = resp.bytes_stream();
        let mut buf = Vec::<u8>::new();
        while let Some(chunk) = stream.next().await {
            let Ok(chunk) = chunk else { break };
            buf.extend_from_slice(&chunk);
            while let Some(end) = find_event_end(&buf) {
                let event: Vec<u8> = buf.drain(..end).collect();
                let data: Vec<&[u8]> = event
                    .split(|b| *b == b'\n')
                    .filter_map(|l| l.strip_prefix(b"data:"))
                    .map(|d| d.strip_prefix(b" ").unwrap_or(d))
                    .map(|d| d.strip_suffix(b"\r").unwrap_or(d))
                    .collect();
                let payload = data.join(&b'\n');
                if !payload.iter().all(u8::is_ascii_whitespace) {
                    self.note_version(method, &payload);
                    self.write(&payload).await;
                }
            }
        }
    }
}

/// The end (exclusive, including the blank line) of the first complete SSE event.
fn find_event_end(buf: &[u8]) -> Option<usize> {
    let lf = buf.windows(2).position(|w| w == b"\n\n").map(|i| i + 2);
    let crlf = buf.windows(4).position(|w| w == b"\r\n\r\n").map(|i| i + 4);
    match (lf, crlf) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// Relays stdin/stdout to the kernel at `url` until stdin closes.
pub async fn run(url: String, token: String) -> anyhow::Result<()> {
    let http = reqwest::Client::builder().build().context("http client")?;
    let relay = Arc::new(Relay {
        http,
        url,
        token,
        session: Mutex::new(None),
        out: tokio::sync::Mutex::new(tokio::io::stdout()),
    });
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    let mut tasks = tokio::task::JoinSet::new();
    while let Some(line) = lines.next_line().await? {
        if line.trim().is_empty() {
            continue;
        }
        let msg: Value = match serde_json::from_str(&line) {
            Ok(v) => v,
            Err(e) => {
                let err = json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32700, "message": format!("parse error: {e}")}});
                relay.write(err.to_string().as_bytes()).await;
                continue;
            }
        };
        // The handshake must finish before anything else is sent (it sets the session).
        if msg.get("method").and_then(Value::as_str) == Some("initialize") {
            relay.forward(msg).await;
        } else {
            let r = relay.clone();
            tasks.spawn(async move { r.forward(msg).await });
        }
    }
    while tasks.join_next().await.is_some() {}
    let session = relay.session.lock().unwrap().clone();
    if let Some((sid, _)) = session {
        let _ = relay
            .http
            .delete(&relay.url)
            .bearer_auth(&relay.token)
            .header("mcp-session-id", sid)
            .send()
            .await;
    }
    Ok(())
}
