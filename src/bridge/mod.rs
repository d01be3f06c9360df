//! The stdio bridge: a second stdio launch on a data dir whose kernel is already
//! running relays its MCP session to that kernel over loopback HTTP, instead of
//! opening the database a second time (DESIGN "One kernel per data dir").
//!
//! It is a JSON-RPC relay, not a second server: each line from stdin is POSTed to the
//! kernel's `/mcp` with the kernel's local credential (from `kernel.json`), or, for
//! a launch with `--token-env`, with that agent's token (agent_join's stdio configs); JSON
//! responses are written back as one line, SSE responses as one line per event
//! (progress notifications included). It derives the per-request headers streamable
//! HTTP wants from the message itself: the session id and protocol version from
//! `initialize`, and for 2026-07-28 messages the `MCP-Protocol-Version`, `Mcp-Method`
//! and `Mcp-Name` headers of every method that has them (headers.rs).
//!
//! Every request gets an answer with its own id: an HTTP error from the kernel (a
//! refused credential, say) becomes a JSON-RPC error saying what to do, and if the
//! bridge could not find the kernel's credential at all, that is the answer. A
//! session the kernel expired (404) is opened again with the client's own
//! `initialize` and the request retried once, so a long-idle client carries on.
//!
//! A kernel that stops answering (stopped with SIGSTOP, hung) must not leave the
//! client waiting in silence, yet a call may rightly take many minutes (an
//! `agent_ask`, a stream, `subscriptions/listen`): so no request is cut for taking
//! long. Instead, a request still waiting after a third of the bridge's timeout
//! (`AGENT_WORKER_BRIDGE_TIMEOUT`, 10 s by default) has the bridge ask the kernel
//! whether it answers at all (a quick GET), and again every third while it waits.
//! A kernel that answers is left to finish; one that does not answer the probe
//! within the rest of the timeout gets the request answered with a JSON-RPC error
//! saying which kernel (URL, pid), that it is stopped if it is, and what to do;
//! one that is gone is started again, as when a request finds it gone.
//!
//! Server-initiated messages outside a request (resource updates, log messages)
//! come on a 2025-11-25 session's standalone stream (GET), which the bridge holds
//! open and relays; a 2026-07-28 client's `subscriptions/listen` is a request whose
//! streamed answer is relayed like any other, until the client cancels it or goes:
//! then the relay closes its stream, which is how a listen is cancelled over HTTP.

use anyhow::Context;
use futures::StreamExt;
use mcp::http::{MAX_BODY, sse::event_end};
use mcp::stdio::{Line, read_line};
use serde_json::{Value, json};
mod exchange;
mod headers;
mod liveness;

use liveness::timeout;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncWriteExt, BufReader};

const META_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
/// How often an attached client tells the kernel it is still there, at most.
const HEARTBEAT: std::time::Duration = std::time::Duration::from_secs(30);

struct Relay {
    http: reqwest::Client,
    /// The kernel's URL and the lead credential; replaced when a new kernel is started.
    target: Mutex<(String, String)>,
    /// Starts a new background kernel when the one relayed to is gone (None: a
    /// foreground kernel's, which is not ours to restart).
    launcher: Option<crate::background::Launcher>,
    /// Legacy (2025-11-25) session id and negotiated version, from `initialize`.
    session: Mutex<Option<(String, String)>>,
    /// The client's `initialize`, replayed when the kernel has forgotten the session.
    initialize: Mutex<Option<Value>>,
    /// Serialises re-opening a session (one re-initialize, however many requests saw 404).
    reopening: tokio::sync::Mutex<()>,
    out: tokio::sync::Mutex<tokio::io::Stdout>,
    /// The data dir (its kernel.json names the kernel's pid).
    dir: PathBuf,
    /// How long the kernel may leave a waiting request without a sign of life.
    timeout: Duration,
}

/// What a POST came back with, before it is written to the client.
enum Answer {
    Done,
    /// The kernel no longer knows the session this request was sent in.
    SessionGone(String),
    /// The kernel did not answer at all (it is gone): the URL tried.
    KernelGone(String),
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
        if method == "initialize" {
            self.initialize.lock().unwrap().replace(msg.clone());
        }
        let mut answer = self.post(&msg, &id, &method, true).await;
        if let Answer::KernelGone(url) = &answer {
            // A new kernel (its own state from the data dir), then the same request;
            // a legacy session is unknown there, and is opened again below.
            match self.restart(url).await {
                Ok(()) => answer = self.post(&msg, &id, &method, true).await,
                Err(e) => {
                    self.error(
                        &id,
                        format!(
                            "the agent-worker kernel is gone and could not be started again: {e}"
                        ),
                    )
                    .await;
                    return;
                }
            }
        }
        match answer {
            Answer::Done => {}
            Answer::KernelGone(url) => {
                self.error(
                    &id,
                    format!("the agent-worker kernel at {url} is unreachable"),
                )
                .await;
            }
            Answer::SessionGone(old) => {
                if self.reopen(&old).await {
                    let _ = self.post(&msg, &id, &method, true).await;
                } else {
                    self.error(
                        &id,
                        "the kernel closed this session and it could not be opened again; restart the \
                         MCP client"
                            .into(),
                    )
                    .await;
                }
            }
        }
    }

    /// POSTs one message; writes the answer to the client unless it is `SessionGone`
    /// (or `write` is false: a replayed handshake is not the client's to see).
    /// Starts a new background kernel if the one at `failed` is still the target
    /// (several requests may have seen it go; one restart serves them all).
    async fn restart(&self, failed: &str) -> Result<(), String> {
        let Some(launcher) = self.launcher.clone() else {
            return Err("it was not started by this launch".into());
        };
        let _one = self.reopening.lock().await;
        if self.target.lock().unwrap().0 != failed {
            return Ok(());
        }
        tracing::warn!("the kernel at {failed} is gone: starting another");
        let target = tokio::task::spawn_blocking(move || launcher.ensure())
            .await
            .map_err(|e| e.to_string())??;
        *self.target.lock().unwrap() = target;
        Ok(())
    }

    /// Opens a new session with the client's own `initialize` after the kernel
    /// forgot `old`. True when a session is open (possibly by another request).
    async fn reopen(&self, old: &str) -> bool {
        let _one = self.reopening.lock().await;
        let current = self.session.lock().unwrap().clone();
        if current.as_ref().is_some_and(|(sid, _)| sid != old) {
            return true;
        }
        let Some(init) = self.initialize.lock().unwrap().clone() else {
            return false;
        };
        self.session.lock().unwrap().take();
        let id = init.get("id").cloned().unwrap_or(Value::Null);
        self.post(&init, &id, "initialize", false).await;
        if self.session.lock().unwrap().is_none() {
            return false;
        }
        let done = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        self.post(&done, &Value::Null, "notifications/initialized", false)
            .await;
        tracing::info!("bridge: the kernel had closed the session; opened a new one");
        true
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

    /// Holds the session's standalone stream open (GET) and relays what comes on
    /// it; opened again when it ends or the session changes.
    async fn listen(&self) {
        loop {
            let session = self.session.lock().unwrap().clone();
            let Some((sid, ver)) = session else {
                tokio::time::sleep(std::time::Duration::from_millis(200)).await;
                continue;
            };
            let (url, token) = self.target.lock().unwrap().clone();
            let mut req = self
                .http
                .get(&url)
                .bearer_auth(&token)
                .header("accept", "text/event-stream")
                .header("mcp-session-id", &sid);
            if !ver.is_empty() {
                req = req.header("mcp-protocol-version", ver);
            }
            match req.send().await {
                Ok(resp) if resp.status().is_success() => {
                    self.relay_sse(resp, "", true).await;
                }
                _ => {}
            }
            tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        }
    }

    async fn relay_sse(&self, resp: reqwest::Response, method: &str, write: bool) {
        let mut stream = resp.bytes_stream();
        let mut buf = Vec::<u8>::new();
        while let Some(chunk) = stream.next().await {
            let Ok(chunk) = chunk else { break };
            buf.extend_from_slice(&chunk);
            while let Some(end) = event_end(&buf) {
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
                    if write {
                        self.write(&payload).await;
                    }
                }
            }
        }
    }
}

/// Relays stdin/stdout to the kernel at `url` with `token` until stdin closes. If
/// the kernel could not be found (`Err`), every request is answered with why.
pub async fn run(
    target: Result<(String, String), String>,
    launcher: Option<crate::background::Launcher>,
    dir: PathBuf,
) -> anyhow::Result<()> {
    let target = match target {
        Ok(t) => t,
        Err(why) => return refuse_all(why).await,
    };
    let http = reqwest::Client::builder().build().context("http client")?;
    let relay = Arc::new(Relay {
        http,
        target: Mutex::new(target),
        launcher,
        session: Mutex::new(None),
        initialize: Mutex::new(None),
        reopening: tokio::sync::Mutex::new(()),
        out: tokio::sync::Mutex::new(tokio::io::stdout()),
        dir,
        timeout: timeout(),
    });
    let heartbeat = heartbeat(&relay);
    // What the kernel sends outside a request (resource updates, log messages) comes
    // on a 2025-11-25 session's own stream: relayed to the client as it arrives.
    let listener = {
        let r = relay.clone();
        tokio::spawn(async move { r.listen().await })
    };
    let mut stdin = BufReader::new(tokio::io::stdin());
    let mut tasks = tokio::task::JoinSet::new();
    let mut listens = Listens::default();
    while let Some(msg) = next_message(&mut stdin, &relay).await {
        // The handshake must finish before anything else is sent (it sets the session).
        let method = msg.get("method").and_then(Value::as_str);
        if method == Some("initialize") {
            relay.forward(msg).await;
        } else if method == Some("subscriptions/listen") {
            listens.open(&relay, msg);
        } else {
            if method == Some("notifications/cancelled") {
                listens.cancel(&msg);
            }
            let r = relay.clone();
            tasks.spawn(async move { r.forward(msg).await });
        }
    }
    // What the client asked before closing stdin is still answered; its listens end.
    listens.streams.abort_all();
    while tasks.join_next().await.is_some() {}
    heartbeat.abort();
    listener.abort();
    close_session(&relay).await;
    Ok(())
}

/// A 2026-07-28 client's `subscriptions/listen` requests: streams that end only
/// when their client goes, or cancels them. Over HTTP a listen is cancelled by
/// closing its stream (a cancellation notification reaches no request there), so
/// the relay does that for a client that cancels one, and for every listen when
/// the client closes stdin.
#[derive(Default)]
struct Listens {
    streams: tokio::task::JoinSet<()>,
    /// The open ones by request id (as JSON text).
    by_id: std::collections::HashMap<String, tokio::task::AbortHandle>,
}

impl Listens {
    fn open(&mut self, relay: &Arc<Relay>, msg: Value) {
        // What ended is forgotten here, so a long-lived client costs nothing for it.
        while self.streams.try_join_next().is_some() {}
        self.by_id.retain(|_, h| !h.is_finished());
        let id = msg.get("id").map(Value::to_string);
        let r = relay.clone();
        let handle = self.streams.spawn(async move { r.forward(msg).await });
        if let Some(id) = id {
            self.by_id.insert(id, handle);
        }
    }

    /// A `notifications/cancelled` naming an open listen closes its stream.
    fn cancel(&mut self, msg: &Value) {
        let id = msg.pointer("/params/requestId").map(Value::to_string);
        if let Some(h) = id.and_then(|id| self.by_id.remove(&id)) {
            h.abort();
        }
    }
}

/// The kernel counts a client as present while it calls; an idle client still
/// says it is there, so a background kernel never stops under it.
fn heartbeat(relay: &Arc<Relay>) -> tokio::task::JoinHandle<()> {
    let every = relay
        .launcher
        .as_ref()
        .and_then(|l| l.idle_exit())
        .map_or(HEARTBEAT, |idle| {
            (idle / 3).clamp(std::time::Duration::from_millis(200), HEARTBEAT)
        });
    let r = relay.clone();
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(every).await;
            let (url, token) = r.target.lock().unwrap().clone();
            let _ = r
                .http
                .get(&url)
                .bearer_auth(&token)
                .timeout(r.timeout)
                .send()
                .await;
        }
    })
}

/// The client's next message, or None when stdin ends; a line too long or not
/// JSON is answered with its JSON-RPC error and skipped.
async fn next_message(stdin: &mut BufReader<tokio::io::Stdin>, relay: &Relay) -> Option<Value> {
    loop {
        let line = match read_line(stdin).await {
            Line::End => return None,
            Line::Text(l) => l,
            Line::TooLong => {
                let err = json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32600,
                    "message": format!("the message is longer than {MAX_BODY} bytes")}});
                relay.write(err.to_string().as_bytes()).await;
                continue;
            }
        };
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match serde_json::from_slice(&line) {
            Ok(v) => return Some(v),
            Err(e) => {
                let err = json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32700, "message": format!("parse error: {e}")}});
                relay.write(err.to_string().as_bytes()).await;
            }
        }
    }
}

/// Tells the kernel the client's session is over (2025-11-25: DELETE).
async fn close_session(relay: &Relay) {
    let session = relay.session.lock().unwrap().clone();
    let (url, token) = relay.target.lock().unwrap().clone();
    if let Some((sid, _)) = session {
        let _ = relay
            .http
            .delete(&url)
            .bearer_auth(&token)
            .header("mcp-session-id", sid)
            .send()
            .await;
    }
}

/// Answers each request with `why` (no kernel to relay to) until stdin closes.
async fn refuse_all(why: String) -> anyhow::Result<()> {
    tracing::error!("bridge: {why}");
    let mut out = tokio::io::stdout();
    let mut stdin = BufReader::new(tokio::io::stdin());
    loop {
        let line = match read_line(&mut stdin).await {
            Line::End => break,
            Line::TooLong => continue,
            Line::Text(l) => l,
        };
        let Ok(msg) = serde_json::from_slice::<Value>(&line) else {
            continue;
        };
        let Some(id) = msg.get("id").filter(|i| !i.is_null()) else {
            continue;
        };
        let e = json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32603,
            "message": format!("agent-worker cannot reach the kernel running on this data dir: {why}")}});
        out.write_all(format!("{e}\n").as_bytes()).await?;
        out.flush().await?;
    }
    Ok(())
}
