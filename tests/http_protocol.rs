//! Protocol and HTTP edges, sent raw so nothing smooths them over: malformed
//! bodies, wrong parameter shapes, unknown cursors, oversized bodies, session
//! DELETE, OAuth discovery paths, SSE priming by protocol version and resuming
//! a stream, and the same framing checks on stdio.

use crate::common;
use common::*;
use futures::StreamExt;
use reqwest::StatusCode;
use serde_json::{Value, json};
use std::process::Stdio;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

struct Raw {
    http: reqwest::Client,
    url: String,
    token: String,
}

impl Raw {
    fn new(s: &HttpServer) -> Self {
        Self {
            http: reqwest::Client::new(),
            url: s.url.clone(),
            token: s.admin.clone(),
        }
    }

    fn post(&self, session: Option<&str>) -> reqwest::RequestBuilder {
        raw_post(&self.url, &self.token, session)
    }

    /// A legacy session: initialize + initialized. Returns its id and the raw
    /// initialize response body (SSE).
    async fn session(&self, version: &str) -> (String, String) {
        let r = self
            .post(None)
            .json(&raw_init(version))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::OK);
        let sid = r.headers()["mcp-session-id"].to_str().unwrap().to_owned();
        let body = r.text().await.unwrap();
        let n = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        let r = self
            .post(Some(&sid))
            .header("mcp-protocol-version", version)
            .json(&n)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::ACCEPTED);
        (sid, body)
    }
}

fn error_code(v: &Value) -> i64 {
    v["error"]["code"]
        .as_i64()
        .unwrap_or_else(|| panic!("no error in {v}"))
}

#[tokio::test]
async fn malformed_messages_get_the_json_rpc_error_the_spec_names() {
    let dir = tempfile::tempdir().unwrap();
    let s = HttpServer::start(dir.path()).await;
    let raw = Raw::new(&s);

    // Not JSON: 400 with a JSON-RPC parse error (was 415 with plain text).
    let r = raw.post(None).body("{\"jsonrpc\": ").send().await.unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    assert!(
        r.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("application/json")
    );
    let v: Value = r.json().await.unwrap();
    assert_eq!(error_code(&v), -32700, "{v}");

    // initialize without protocolVersion: invalid params naming it (was "Session ID is required").
    let mut bad_init = raw_init("2025-11-25");
    bad_init["params"]
        .as_object_mut()
        .unwrap()
        .remove("protocolVersion");
    let r = raw.post(None).json(&bad_init).send().await.unwrap();
    let v: Value = r.json().await.unwrap();
    assert_eq!(error_code(&v), -32602, "{v}");
    assert_eq!(v["id"], 1);
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("protocolVersion"),
        "{v}"
    );

    // arguments as an array: invalid params (was 404 -32601 "tools/call"), in a session
    // and stateless.
    let (sid, _) = raw.session("2025-11-25").await;
    let call = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
                      "params": {"name": "agent_list", "arguments": [1, 2]}});
    let r = raw.post(Some(&sid)).json(&call).send().await.unwrap();
    let v = messages(&r.text().await.unwrap()).remove(0);
    assert_eq!((error_code(&v), v["id"].clone()), (-32602, json!(5)), "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("arguments"),
        "{v}"
    );
    let mut modern = call.clone();
    modern["params"]["_meta"] = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28"});
    let r = raw
        .post(None)
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", "agent_list")
        .json(&modern)
        .send()
        .await
        .unwrap();
    let v = messages(&r.text().await.unwrap()).remove(0);
    assert_eq!(error_code(&v), -32602, "{v}");

    // An unknown pagination cursor: invalid params (was ignored).
    let list =
        json!({"jsonrpc": "2.0", "id": 6, "method": "tools/list", "params": {"cursor": "bogus"}});
    let r = raw.post(Some(&sid)).json(&list).send().await.unwrap();
    let v = messages(&r.text().await.unwrap()).remove(0);
    assert_eq!(error_code(&v), -32602, "{v}");
    assert!(
        v["error"]["message"].as_str().unwrap().contains("cursor"),
        "{v}"
    );

    // A body past the limit: 413 with a JSON-RPC error and Connection: close.
    let big = "x".repeat(5 * 1024 * 1024);
    let r = raw
        .post(Some(&sid))
        .json(&json!({"jsonrpc": "2.0", "id": 7, "method": "ping", "params": {"pad": big}}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(r.headers()["connection"], "close");
    let v: Value = r.json().await.unwrap();
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("larger than"),
        "{v}"
    );

    // The session still works after all that.
    let ping = json!({"jsonrpc": "2.0", "id": 8, "method": "ping"});
    let r = raw.post(Some(&sid)).json(&ping).send().await.unwrap();
    let v = messages(&r.text().await.unwrap()).remove(0);
    assert_eq!(v["id"], 8, "{v}");
    assert!(v.get("result").is_some(), "{v}");
    s.stop().await;
}

#[tokio::test]
async fn delete_answers_204_for_a_session_and_404_for_an_unknown_one() {
    let dir = tempfile::tempdir().unwrap();
    let s = HttpServer::start(dir.path()).await;
    let raw = Raw::new(&s);
    let (sid, _) = raw.session("2025-11-25").await;
    let del = |id: &str| {
        raw.http
            .delete(&raw.url)
            .bearer_auth(&raw.token)
            .header("mcp-session-id", id.to_owned())
            .header("mcp-protocol-version", "2025-11-25")
            .send()
    };
    assert_eq!(
        del("no-such-session").await.unwrap().status(),
        StatusCode::NOT_FOUND
    );
    assert_eq!(del(&sid).await.unwrap().status(), StatusCode::NO_CONTENT);
    // Gone: the next request in it is 404 (the client must initialize again).
    let ping = json!({"jsonrpc": "2.0", "id": 2, "method": "ping"});
    let r = raw.post(Some(&sid)).json(&ping).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    assert_eq!(del(&sid).await.unwrap().status(), StatusCode::NOT_FOUND);
    s.stop().await;
}

#[tokio::test]
async fn oauth_discovery_paths_are_404_not_401() {
    let dir = tempfile::tempdir().unwrap();
    let s = HttpServer::start(dir.path()).await;
    let base = s.url.trim_end_matches("/mcp").to_owned();
    let http = reqwest::Client::new();
    for path in [
        "/.well-known/oauth-protected-resource",
        "/.well-known/oauth-protected-resource/mcp",
        "/.well-known/oauth-authorization-server",
        "/register",
        "/",
    ] {
        let r = http.get(format!("{base}{path}")).send().await.unwrap();
        assert_eq!(r.status(), StatusCode::NOT_FOUND, "{path}");
        let r = http
            .post(format!("{base}{path}"))
            .bearer_auth(&s.admin)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::NOT_FOUND, "{path} with a token");
    }
    // /mcp itself still wants a token.
    let r = http.post(&s.url).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    s.stop().await;
}

/// 2025-11-25 clients get a priming event (an id, a retry hint) on every SSE stream;
/// older clients, some of which parse every event as JSON, get none.
#[tokio::test]
async fn sse_priming_follows_the_protocol_version_and_resume_sends_nothing_twice() {
    let dir = tempfile::tempdir().unwrap();
    let s = HttpServer::start(dir.path()).await;
    let raw = Raw::new(&s);

    let (_, old_body) = raw.session("2025-06-18").await;
    assert!(!old_body.contains("retry:"), "{old_body}");
    assert!(
        old_body
            .split("\n\n")
            .all(|ev| !ev.contains("data:") || messages(ev).len() == 1),
        "every event of an old client's stream is a message: {old_body:?}"
    );

    let (sid, new_body) = raw.session("2025-11-25").await;
    assert!(new_body.contains("retry:"), "{new_body:?}");
    let call = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                      "params": {"name": "agent_list", "arguments": {}}});
    let r = raw.post(Some(&sid)).json(&call).send().await.unwrap();
    let body = r.text().await.unwrap();
    assert!(
        body.contains("retry:"),
        "a request's stream is primed too: {body:?}"
    );
    let ids: Vec<&str> = body
        .lines()
        .filter_map(|l| l.strip_prefix("id:"))
        .map(str::trim)
        .collect();
    assert!(
        ids.len() >= 2,
        "a priming id and the response's id: {body:?}"
    );
    let last = ids.last().unwrap().to_string();
    let responses = messages(&body);
    assert_eq!(responses.len(), 1, "{body:?}");
    assert_eq!(responses[0]["id"], 3);

    let resume = async |after: &str| {
        let r = raw
            .http
            .get(&raw.url)
            .bearer_auth(&raw.token)
            .header("accept", "text/event-stream")
            .header("mcp-session-id", &sid)
            .header("mcp-protocol-version", "2025-11-25")
            .header("last-event-id", after)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::OK);
        // Whatever arrives within a moment (a resumed stream may stay open).
        let mut got = String::new();
        let mut body = r.bytes_stream();
        while let Ok(Some(Ok(chunk))) =
            tokio::time::timeout(std::time::Duration::from_millis(1500), body.next()).await
        {
            got.push_str(&String::from_utf8_lossy(&chunk));
        }
        got
    };
    // Resuming after the priming event (the stream was lost before the answer) gets
    // the answer once; resuming after the answer's own id replays nothing.
    let replay = resume(ids[0]).await;
    let again = messages(&replay);
    assert_eq!(again.len(), 1, "{replay:?}");
    assert_eq!(again[0]["id"], 3, "{replay:?}");
    let replay = resume(&last).await;
    assert!(
        messages(&replay).is_empty(),
        "nothing is sent twice: {replay:?}"
    );
    s.stop().await;
}

#[tokio::test]
async fn stdio_answers_malformed_lines_and_keeps_serving() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = tokio::process::Command::new(BIN)
        .arg("--data-dir")
        .arg(dir.path())
        .arg("--foreground")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut send = async |line: String| {
        stdin
            .write_all(format!("{line}\n").as_bytes())
            .await
            .unwrap();
    };
    let mut next = async || -> Value {
        let l = tokio::time::timeout(std::time::Duration::from_secs(10), out.next_line())
            .await
            .expect("an answer")
            .unwrap()
            .unwrap();
        serde_json::from_str(&l).unwrap()
    };
    send("{this is not json".into()).await;
    let v = next().await;
    assert_eq!(error_code(&v), -32700, "{v}");
    send(raw_init("2025-11-25").to_string()).await;
    let v = next().await;
    assert_eq!(v["id"], 1, "{v}");
    send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string()).await;
    send(
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
               "params": {"name": "agent_list", "arguments": "oops"}})
        .to_string(),
    )
    .await;
    let v = next().await;
    assert_eq!((error_code(&v), v["id"].clone()), (-32602, json!(2)), "{v}");
    send(json!({"jsonrpc": "2.0", "id": 3, "method": "ping"}).to_string()).await;
    let v = next().await;
    assert_eq!(v["id"], 3, "still serving: {v}");
    assert!(v.get("result").is_some(), "{v}");
}
