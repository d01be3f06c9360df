//! A 2026-07-28 `subscriptions/listen` ends when its client goes, however it goes.
//! A hostile pass found every listen of a client that exited without cancelling
//! (the Inspector CLI, each run) kept for good: after 32 runs the lead's next
//! listen was refused ("32 subscriptions/listen requests of this identity are
//! open already"), still after a minute idle, so its notifications stopped.
//! Over HTTP a modern client cancels by closing the listen's stream, so here
//! clients close their connection (or their relay is closed or killed), 37 in a
//! row, more than the 32 one identity may hold, and each listen must be served.

use crate::common;
use common::*;
use futures::StreamExt;
use serde_json::{Value, json};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

const GLOBAL: &str = "agent-worker://workflows/global/main/channel";
/// More listens in a row than one identity may hold at once (32).
pub(crate) const IN_A_ROW: usize = 37;

fn meta() -> Value {
    json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
           "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
           "io.modelcontextprotocol/clientCapabilities": {}})
}

fn listen_request() -> Value {
    listen_numbered(1)
}

fn listen_numbered(id: u64) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "subscriptions/listen", "params": {
        "_meta": meta(), "notifications": {"resourceSubscriptions": [GLOBAL]}}})
}

fn send_request(text: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "_meta": meta(), "name": "channel_send", "arguments": {"message": text}}})
}

/// What one message of a listen says, for the test.
#[derive(Debug, PartialEq)]
pub(crate) enum Said {
    Acknowledged,
    Updated,
    /// The listen's own answer: it ended (a refusal is an error answer).
    Ended(String),
    Other,
}

fn said(v: &Value) -> Said {
    said_to(v, 1)
}

/// What a message says of listen `id` (another listen's messages are `Other`).
fn said_to(v: &Value, id: u64) -> Said {
    let ours = v["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == id;
    match v["method"].as_str() {
        Some("notifications/subscriptions/acknowledged") if ours => Said::Acknowledged,
        Some("notifications/resources/updated") if ours && v["params"]["uri"] == GLOBAL => {
            Said::Updated
        }
        None if v["id"] == id => Said::Ended(v.to_string()),
        _ => Said::Other,
    }
}

/// The events of an SSE body: (id, data as JSON if any).
pub(crate) struct Events {
    body: futures::stream::BoxStream<'static, reqwest::Result<Vec<u8>>>,
    buf: Vec<u8>,
}

impl Events {
    fn of(resp: reqwest::Response) -> Self {
        assert!(resp.status().is_success(), "{}", resp.status());
        Self {
            body: resp.bytes_stream().map(|c| c.map(|b| b.to_vec())).boxed(),
            buf: Vec::new(),
        }
    }

    async fn next(&mut self) -> Option<(Option<String>, Option<Value>)> {
        loop {
            if let Some(end) = agent_worker::mcp::http::sse::event_end(&self.buf) {
                let event = String::from_utf8_lossy(&self.buf[..end]).into_owned();
                self.buf.drain(..end);
                let field = |name: &str| {
                    event
                        .lines()
                        .find_map(|l| l.strip_prefix(name))
                        .map(|v| v.trim().to_owned())
                };
                let data = field("data:").and_then(|d| serde_json::from_str(&d).ok());
                return Some((field("id:"), data));
            }
            let chunk = self.body.next().await?.ok()?;
            self.buf.extend_from_slice(&chunk);
        }
    }

    /// Reads until `want` (or the listen's end, or 10 s): what came instead.
    pub(crate) async fn until(&mut self, want: Said) -> Result<(), String> {
        let read = async {
            while let Some((_, data)) = self.next().await {
                match data.as_ref().map(said) {
                    Some(s) if s == want => return Ok(()),
                    Some(Said::Ended(v)) => return Err(format!("the listen ended: {v}")),
                    _ => {}
                }
            }
            Err("the stream closed".to_owned())
        };
        tokio::time::timeout(Duration::from_secs(10), read)
            .await
            .unwrap_or_else(|_| Err(format!("no {want:?} within 10 s")))
    }
}

/// A listen of the lead's over a connection of its own (its own client): the
/// client, to be dropped to close the connection, and the listen's events.
pub(crate) async fn listen_over_http(s: &HttpServer) -> (reqwest::Client, Events) {
    let http = reqwest::Client::new();
    let resp = http
        .post(&s.url)
        .bearer_auth(&s.admin)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "subscriptions/listen")
        .json(&listen_request())
        .send()
        .await
        .unwrap();
    (http, Events::of(resp))
}

/// Each listen is served and hears a post, then its client closes the
/// connection without cancelling; 37 in a row.
#[tokio::test]
async fn listens_of_clients_that_closed_their_connection_give_way_over_http() {
    let dir = tempfile::tempdir().unwrap();
    let s = HttpServer::start(dir.path()).await;
    let lead = s.lead(Proto::Modern).await;
    for run in 1..=IN_A_ROW {
        let (http, mut events) = listen_over_http(&s).await;
        events.until(Said::Acknowledged).await.unwrap();
        call(
            &lead,
            "channel_send",
            json!({"message": format!("run {run}")}),
        )
        .await
        .ok();
        if let Err(e) = events.until(Said::Updated).await {
            panic!("listen {run} of {IN_A_ROW} was not served: {e}");
        }
        drop((events, http));
    }
    s.stop().await;
}

/// Closing a 2026-07-28 listen's stream is its cancellation (the text says a
/// server MUST treat a client's disconnect so): the listen ends at once, and what
/// the server kept of its stream (`Last-Event-ID`) holds its end.
#[tokio::test]
async fn a_listen_whose_connection_closed_ends_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let s = HttpServer::start(dir.path()).await;
    let (http, mut events) = listen_over_http(&s).await;
    let (first, _) = events.next().await.expect("a priming event");
    let first = first.expect("the priming event has an id");
    events.until(Said::Acknowledged).await.unwrap();
    drop((events, http));
    let closed = std::time::Instant::now();
    let resume = async || {
        let resp = reqwest::Client::new()
            .get(&s.url)
            .bearer_auth(&s.admin)
            .header("accept", "text/event-stream")
            .header("mcp-protocol-version", "2026-07-28")
            .header("last-event-id", &first)
            .send()
            .await
            .unwrap();
        let mut events = Events::of(resp);
        let mut ended = None;
        while let Some((_, data)) = events.next().await {
            if let Some(Said::Ended(v)) = data.as_ref().map(said) {
                ended = Some(v);
            }
        }
        ended
    };
    let ended = loop {
        if let Some(v) = resume().await {
            break v;
        }
        assert!(
            closed.elapsed() < Duration::from_secs(30),
            "the listen did not end after its connection closed"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    assert!(
        ended.contains("\"result\""),
        "it ends as a listen does: {ended}"
    );
    eprintln!(
        "the listen ended {:.1?} after its connection closed",
        closed.elapsed()
    );
    s.stop().await;
}

/// A listen through a relay to the data dir's kernel (a stdio launch while the
/// kernel runs): the relay, its stdin, and whether the listen was served (it
/// heard a post).
pub(crate) async fn listen_through_a_relay(
    dir: &std::path::Path,
    run: usize,
) -> (
    tokio::process::Child,
    tokio::process::ChildStdin,
    Result<(), String>,
) {
    let mut relay = foreground_kernel(dir);
    let mut stdin = relay.stdin.take().unwrap();
    let mut stdout = BufReader::new(relay.stdout.take().unwrap()).lines();
    let mut write = async |v: Value| {
        stdin.write_all(format!("{v}\n").as_bytes()).await.unwrap();
    };
    write(listen_request()).await;
    let mut heard = Vec::new();
    let mut sent = false;
    let outcome = tokio::time::timeout(Duration::from_secs(10), async {
        while let Some(line) = stdout.next_line().await.unwrap() {
            let v: Value = serde_json::from_str(&line).unwrap();
            match said(&v) {
                Said::Acknowledged if !sent => {
                    sent = true;
                    write(send_request(&format!("relay {run}"))).await;
                }
                Said::Updated => return Ok(()),
                Said::Ended(v) => return Err(format!("the listen ended: {v}")),
                _ => heard.push(line),
            }
        }
        Err("the relay closed its stdout".to_owned())
    })
    .await
    .unwrap_or_else(|_| Err(format!("nothing within 10 s: {heard:?}")));
    (relay, stdin, outcome)
}

/// The same through the stdio relay: 37 relays in a row each listen and hear a
/// post, then go, every other one closing its stdin and the rest killed.
#[tokio::test]
async fn listens_through_relays_that_went_give_way() {
    let dir = tempfile::tempdir().unwrap();
    let s = HttpServer::start(dir.path()).await;
    for run in 1..=IN_A_ROW {
        let (mut relay, stdin, outcome) = listen_through_a_relay(dir.path(), run).await;
        if let Err(e) = outcome {
            panic!("listen {run} of {IN_A_ROW} through the relay was not served: {e}");
        }
        if run % 2 == 0 {
            relay.kill().await.unwrap();
        } else {
            drop(stdin);
            let status = tokio::time::timeout(Duration::from_secs(10), relay.wait())
                .await
                .expect("the relay exits when its stdin closes")
                .unwrap();
            assert!(status.success(), "{status}");
        }
    }
    s.stop().await;
}

/// A stdio client that cancels its listens (`notifications/cancelled`, as stdio
/// does) through one relay that lives on: each cancelled listen gives way (the
/// relay closes its stream, which is how a listen is cancelled over HTTP); the
/// kernel used to keep them all, and refused the 33rd.
#[tokio::test]
async fn listens_cancelled_through_a_relay_give_way() {
    let dir = tempfile::tempdir().unwrap();
    let s = HttpServer::start(dir.path()).await;
    let mut relay = foreground_kernel(dir.path());
    let mut stdin = relay.stdin.take().unwrap();
    let mut stdout = BufReader::new(relay.stdout.take().unwrap()).lines();
    let mut write = async |v: Value| {
        stdin.write_all(format!("{v}\n").as_bytes()).await.unwrap();
    };
    let mut read_until = async |id: u64, want: Said| {
        let read = async {
            while let Some(line) = stdout.next_line().await.unwrap() {
                let v: Value = serde_json::from_str(&line).unwrap();
                match said_to(&v, id) {
                    s if s == want => return Ok(()),
                    Said::Ended(v) => return Err(format!("listen {id} ended: {v}")),
                    _ => {}
                }
            }
            Err("the relay closed its stdout".to_owned())
        };
        tokio::time::timeout(Duration::from_secs(10), read)
            .await
            .unwrap_or_else(|_| Err(format!("listen {id}: no {want:?} within 10 s")))
    };
    for id in 1..=IN_A_ROW as u64 {
        write(listen_numbered(id)).await;
        read_until(id, Said::Acknowledged).await.unwrap();
        write(
            json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                     "params": {"requestId": id, "reason": "done"}}),
        )
        .await;
    }
    let last = IN_A_ROW as u64 + 1;
    write(listen_numbered(last)).await;
    read_until(last, Said::Acknowledged).await.unwrap();
    write(send_request("after the cancels")).await;
    if let Err(e) = read_until(last, Said::Updated).await {
        panic!("a listen after {IN_A_ROW} cancelled ones was not served: {e}");
    }
    relay.kill().await.unwrap();
    s.stop().await;
}
