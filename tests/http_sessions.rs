//! HTTP sessions belong to the token that opened them, expire when idle, are capped
//! per token, cost little while idle (parked and restored transparently), and a
//! burst of abandoned handshakes does not grow the server.

use crate::common;
use common::*;
use reqwest::StatusCode;
use serde_json::json;
use std::time::{Duration, Instant};

async fn open(url: &str, token: &str) -> String {
    let r = raw_post(url, token, None)
        .json(&raw_init("2025-11-25"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let sid = r.headers()["mcp-session-id"].to_str().unwrap().to_owned();
    let _ = r.text().await;
    let n = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let r = raw_post(url, token, Some(&sid))
        .json(&n)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::ACCEPTED);
    sid
}

async fn ping(url: &str, token: &str, sid: &str) -> StatusCode {
    let r = raw_post(url, token, Some(sid))
        .json(&json!({"jsonrpc": "2.0", "id": 9, "method": "ping"}))
        .send()
        .await
        .unwrap();
    let status = r.status();
    let _ = r.text().await;
    status
}

/// An agent token can neither use, stream, nor close the lead's session (or
/// another agent's): it is told the session does not exist.
#[tokio::test]
async fn a_session_belongs_to_the_token_that_opened_it() {
    let dir = tempfile::tempdir().unwrap();
    let s = HttpServer::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    new_agents(&lead, "@global:main", &["mallory", "bob"]).await;
    let mallory = call(&lead, "agent_join", json!({"target": "mallory"}))
        .await
        .ok();
    let mallory = mallory["token"].as_str().unwrap().to_owned();
    let bob = call(&lead, "agent_join", json!({"target": "bob"}))
        .await
        .ok();
    let bob = bob["token"].as_str().unwrap().to_owned();
    let lead_sid = open(&s.url, &s.admin).await;
    let bob_sid = open(&s.url, &bob).await;
    let http = reqwest::Client::new();
    for sid in [&lead_sid, &bob_sid] {
        assert_eq!(ping(&s.url, &mallory, sid).await, StatusCode::NOT_FOUND);
        let r = http
            .get(&s.url)
            .bearer_auth(&mallory)
            .header("accept", "text/event-stream")
            .header("mcp-session-id", sid.as_str())
            .header("mcp-protocol-version", "2025-11-25")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::NOT_FOUND, "GET stream of {sid}");
        let r = http
            .delete(&s.url)
            .bearer_auth(&mallory)
            .header("mcp-session-id", sid.as_str())
            .header("mcp-protocol-version", "2025-11-25")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::NOT_FOUND, "DELETE of {sid}");
    }
    // Untouched: their owners carry on.
    assert_eq!(ping(&s.url, &s.admin, &lead_sid).await, StatusCode::OK);
    assert_eq!(ping(&s.url, &bob, &bob_sid).await, StatusCode::OK);
    s.stop().await;
}

/// Waits for session expiry without touching a session that should expire (a
/// request would keep it): opens canaries, sessions left alone after, then asks
/// them one at a time, oldest first, every 40 ms (asking brings back one still
/// there) until one is gone (404). Every session idle since before that canary was
/// opened is gone too. `meanwhile` runs between steps. Asserts the canary lasted
/// the TTL; panics when none expired while they lasted.
pub(crate) async fn until_a_session_expires(
    url: &str,
    token: &str,
    ttl: Duration,
    mut meanwhile: impl AsyncFnMut(),
) {
    // With the caller's own, within the 64 sessions a token may hold.
    let mut canaries = std::collections::VecDeque::new();
    for _ in 0..50 {
        // It was last used after this.
        let began = Instant::now();
        canaries.push_back((open(url, token).await, began));
        meanwhile().await;
    }
    loop {
        let (sid, began) = canaries
            .pop_front()
            .expect("no session expired while its canaries lasted");
        if ping(url, token, &sid).await == StatusCode::NOT_FOUND {
            let idle = began.elapsed();
            assert!(
                idle >= ttl,
                "forgotten after {idle:?}, before the TTL ({ttl:?})"
            );
            return;
        }
        meanwhile().await;
        tokio::time::sleep(Duration::from_millis(40)).await;
    }
}

/// With a short TTL: a session idle past half of it is parked, and its next request
/// brings it back without the client noticing (again and again); one idle past the
/// TTL is gone (404). The sweep's decisions are tested on a manual clock in the mcp
/// crate (http/sessions.rs); this is their wiring.
#[tokio::test]
async fn idle_sessions_are_parked_then_expire() {
    let dir = tempfile::tempdir().unwrap();
    let ttl = Duration::from_millis(600);
    let s = HttpServer::start_with_env(dir.path(), &[("AGENT_WORKER_SESSION_TTL", "600ms")]).await;
    let b = open(&s.url, &s.admin).await;
    let a = open(&s.url, &s.admin).await;
    let mut used = Instant::now();
    let (mut restored, url, admin) = (0, s.url.clone(), s.admin.clone());
    until_a_session_expires(&s.url, &s.admin, ttl, async || {
        // Parked by now (idle past half the TTL, swept every quarter of it), and
        // before any canary (opened after a) can expire.
        if used.elapsed() < ttl * 3 / 4 {
            return;
        }
        assert_eq!(ping(&url, &admin, &a).await, StatusCode::OK, "restored");
        let r = raw_post(&url, &admin, Some(&a))
            .json(&json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                          "params": {"name": "agent_list", "arguments": {}}}))
            .send()
            .await
            .unwrap();
        let body = r.text().await.unwrap();
        assert!(
            body.contains("\"agents\""),
            "a tool call in the restored session: {body}"
        );
        used = Instant::now();
        restored += 1;
    })
    .await;
    assert!(restored >= 1, "a was never idle long enough to be parked");
    // a, used since, is there; b, never used again and older than the canary that
    // expired, is gone.
    assert_eq!(
        ping(&s.url, &s.admin, &a).await,
        StatusCode::OK,
        "a was used"
    );
    assert_eq!(ping(&s.url, &s.admin, &b).await, StatusCode::NOT_FOUND);
    s.stop().await;
}

/// 3,000 abandoned handshakes from one token: only the newest 64 sessions are
/// kept, the oldest answer 404, and the server's memory hardly moves.
#[tokio::test]
async fn abandoned_handshakes_are_capped_and_cheap() {
    let dir = tempfile::tempdir().unwrap();
    let s = HttpServer::start(dir.path()).await;
    let pid = s.child.id().unwrap();
    // Warm up the allocator and the handler.
    for _ in 0..64 {
        open(&s.url, &s.admin).await;
    }
    let before = rss_kib(pid);
    let http = reqwest::Client::new();
    let mut sids = Vec::new();
    for _ in 0..3000 {
        let r = http
            .post(&s.url)
            .bearer_auth(&s.admin)
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json")
            .json(&raw_init("2025-11-25"))
            .send()
            .await
            .unwrap();
        sids.push(r.headers()["mcp-session-id"].to_str().unwrap().to_owned());
        let _ = r.text().await;
    }
    let after = rss_kib(pid);
    eprintln!("RSS {before} KiB before 3,000 abandoned handshakes, {after} KiB after");
    assert_eq!(
        ping(&s.url, &s.admin, &sids[0]).await,
        StatusCode::NOT_FOUND
    );
    assert_eq!(ping(&s.url, &s.admin, &sids[2999]).await, StatusCode::OK);
    // Before: ~100 KB per session kept (about 300 MB here). Now at most 64 live.
    assert!(
        after.saturating_sub(before) < 40 * 1024,
        "RSS grew from {before} to {after} KiB"
    );
    s.stop().await;
}
