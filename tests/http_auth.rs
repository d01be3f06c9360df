//! HTTP identity and transport hygiene: 401s that say why, Origin/Host checks,
//! malformed JSON-RPC, and what an agent session may see and do.

use crate::common;
use common::*;
use serde_json::json;
use std::time::Duration;

fn init_body() -> serde_json::Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
           "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}})
}

async fn post(
    url: &str,
    token: Option<&str>,
    extra: &[(&str, &str)],
    body: String,
) -> (u16, String) {
    let mut rb = reqwest::Client::new()
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(body);
    if let Some(t) = token {
        rb = rb.header("authorization", format!("Bearer {t}"));
    }
    for (k, v) in extra {
        rb = rb.header(*k, *v);
    }
    let r = rb.send().await.unwrap();
    (r.status().as_u16(), r.text().await.unwrap())
}

#[tokio::test]
async fn unauthenticated_requests_get_401_with_a_reason() {
    let dir = tempfile::tempdir().unwrap();
    let s = HttpServer::start(dir.path()).await;
    let body = init_body().to_string();

    let (code, text) = post(&s.url, None, &[], body.clone()).await;
    assert_eq!(code, 401);
    assert!(text.contains("missing bearer token"), "{text}");
    let (code, text) = post(&s.url, Some("awt_not_a_real_token"), &[], body.clone()).await;
    assert_eq!(code, 401);
    assert!(text.contains("unknown token"), "{text}");
    // ?agent= without a token is never trusted.
    let (code, _) = post(&format!("{}?agent=alice", s.url), None, &[], body.clone()).await;
    assert_eq!(code, 401);
    let (code, _) = post(&s.url, Some(&s.admin), &[], body.clone()).await;
    assert_eq!(code, 200);

    // Expired and revoked agent tokens.
    let lead = s.lead(Proto::Legacy).await;
    new_agents(&lead, "@global:main", &["alice", "bob"]).await;
    let short = call(&lead, "agent_join", json!({"target": "alice", "ttl": "1s"}))
        .await
        .ok();
    let short = short["token"].as_str().unwrap().to_owned();
    let (code, _) = post(&s.url, Some(&short), &[], body.clone()).await;
    assert_eq!(code, 200);
    // Refused once its second is up.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let (code, text) = loop {
        let (code, text) = post(&s.url, Some(&short), &[], body.clone()).await;
        if code != 200 || std::time::Instant::now() > deadline {
            break (code, text);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(code, 401);
    assert!(text.contains("expired"), "{text}");

    let bob = call(&lead, "agent_join", json!({"target": "bob"}))
        .await
        .ok();
    let bob_token = bob["token"].as_str().unwrap().to_owned();
    let bob_session = s.client(&bob_token, Proto::Modern).await;
    call(&bob_session, "my_inbox", json!({})).await.ok();
    call(&lead, "agent_delete", json!({"target": "bob"}))
        .await
        .ok();
    let (code, text) = post(&s.url, Some(&bob_token), &[], body.clone()).await;
    assert_eq!(code, 401);
    assert!(text.contains("revoked"), "{text}");
    assert!(
        try_call(&bob_session, "my_inbox", json!({})).await.is_err(),
        "a live session loses access when its agent is deleted"
    );

    let e = call(
        &lead,
        "agent_join",
        json!({"target": "alice", "ttl": "90d"}),
    )
    .await
    .err();
    assert!(e.contains("at most"), "{e}");
    let e = call(
        &lead,
        "agent_join",
        json!({"target": "alice", "ttl": "soon"}),
    )
    .await
    .err();
    assert!(e.contains("cannot read ttl"), "{e}");
}

#[tokio::test]
async fn foreign_origin_and_host_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let s = HttpServer::start(dir.path()).await;
    let body = init_body().to_string();
    let (code, _) = post(
        &s.url,
        Some(&s.admin),
        &[("origin", "http://evil.example")],
        body.clone(),
    )
    .await;
    assert_eq!(
        code, 403,
        "a browser page from another origin must not reach the server"
    );
    let (code, _) = post(
        &s.url,
        Some(&s.admin),
        &[("host", "evil.example")],
        body.clone(),
    )
    .await;
    assert_eq!(code, 403, "DNS rebinding: a foreign Host is refused");
    let port = s.url.split(':').nth(2).unwrap().split('/').next().unwrap();
    let (code, _) = post(
        &s.url,
        Some(&s.admin),
        &[("origin", &format!("http://localhost:{port}"))],
        body,
    )
    .await;
    assert_eq!(code, 200, "a loopback origin is fine");
}

#[tokio::test]
async fn malformed_json_rpc_is_a_protocol_error_and_harmless() {
    let dir = tempfile::tempdir().unwrap();
    let s = HttpServer::start(dir.path()).await;
    let (code, text) = post(&s.url, Some(&s.admin), &[], "{not json".into()).await;
    assert!(
        (400..500).contains(&code),
        "malformed JSON gets a 4xx, got {code}: {text}"
    );
    let (code, _) = post(
        &s.url,
        Some(&s.admin),
        &[],
        json!({"jsonrpc": "2.0", "id": 1}).to_string(),
    )
    .await;
    assert!(
        (400..500).contains(&code),
        "a request without a method is refused, got {code}"
    );
    // The server is unharmed.
    let lead = s.lead(Proto::Modern).await;
    call(&lead, "agent_list", json!({})).await.ok();
}

#[tokio::test]
async fn agent_sessions_see_only_their_context_tools() {
    let dir = tempfile::tempdir().unwrap();
    let s = HttpServer::start(dir.path()).await;
    for p in [Proto::Legacy, Proto::Modern] {
        let lead = s.lead(p).await;
        assert_eq!(tool_names(&lead).await, lead_tools());
        let name = format!("agent{}", matches!(p, Proto::Modern) as u8);
        new_agents(&lead, "@team:x", &[&name]).await;
        let j = call(
            &lead,
            "agent_join",
            json!({"target": format!("{name}@team:x")}),
        )
        .await
        .ok();
        assert_eq!(j["url"].as_str().unwrap(), s.url);
        assert!(
            j["configs"]["claude_code"]
                .as_str()
                .unwrap()
                .contains("--transport http")
        );
        assert!(
            j["configs"]["cursor"]
                .as_str()
                .unwrap()
                .contains(j["token"].as_str().unwrap())
        );
        let agent = s.client(j["token"].as_str().unwrap(), p).await;
        assert_eq!(tool_names(&agent).await, CONTEXT_TOOLS);
        assert!(
            try_call(
                &agent,
                "agent_new",
                json!({"name": "evil", "backend": "mock"})
            )
            .await
            .is_err()
        );
        assert!(
            try_call(&agent, "agent_join", json!({"target": name}))
                .await
                .is_err()
        );
        // Identity comes from the token: the message is from this agent.
        call(&agent, "channel_send", json!({"message": "@user hi"}))
            .await
            .ok();
        let r = call(&lead, "channel_read", json!({"workflow": "@team:x"}))
            .await
            .ok();
        assert_eq!(
            r["messages"].as_array().unwrap().last().unwrap()["from"],
            name.as_str()
        );
    }
    // Nothing was created by the refused calls.
    let lead = s.lead(Proto::Legacy).await;
    let all = call(&lead, "agent_list", json!({})).await.ok();
    assert_eq!(all["agents"].as_array().unwrap().len(), 2);
}

#[tokio::test]
async fn a_second_kernel_on_the_same_data_dir_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let _s = HttpServer::start(dir.path()).await;
    let out = tokio::process::Command::new(BIN)
        .args(["--http", "127.0.0.1:0", "--data-dir"])
        .arg(dir.path())
        .output()
        .await
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("in use by another agent-worker kernel"),
        "{err}"
    );
}

#[tokio::test]
async fn bad_launch_flags_exit_2_with_a_message() {
    for (args, want) in [
        (vec!["--http", "0.0.0.0:1"], "loopback"),
        (vec!["--http", "nonsense"], "not an address"),
        (vec!["--frobnicate"], "unknown argument"),
        (vec!["--log", "loud"], "--log"),
    ] {
        let out = std::process::Command::new(BIN)
            .args(&args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(want),
            "{args:?}"
        );
        assert!(out.stdout.is_empty(), "nothing on stdout, ever");
    }
}
