//! Events from outside: `POST /hooks/{name}` on the real HTTP server, for hooks
//! the lead declared with hook_set. A signed GitHub-shaped payload starts a
//! workflow once however often it is sent; everything else is refused fast and
//! alike (whether the hook exists or not), with nothing started; a hook reads
//! nothing back.

use crate::common;
use crate::hooks_hostile::outcomes;
use agent_worker::hooks::{sign_generic, sign_github};
use common::*;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

const SECRET: &str = "a-shared-secret-of-some-length";

fn pull_request(number: i64) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "action": "opened",
        "number": number,
        "pull_request": {"number": number, "title": "Fix the import", "user": {"login": "octo"}},
        "repository": {"full_name": "octo/widgets"},
    }))
    .unwrap()
}

/// A request to `/hooks/<name>` with GitHub's headers (no signature if `sig` is None).
async fn post_github(
    s: &HttpServer,
    name: &str,
    body: Vec<u8>,
    sig: Option<String>,
    delivery: &str,
) -> (u16, String, Duration) {
    let base = s.url.trim_end_matches("/mcp");
    let mut rb = reqwest::Client::new()
        .post(format!("{base}/hooks/{name}"))
        .header("content-type", "application/json")
        .header("x-github-event", "pull_request")
        .header("x-github-delivery", delivery);
    if let Some(sig) = sig {
        rb = rb.header("x-hub-signature-256", sig);
    }
    send(rb.body(body)).await
}

async fn send(rb: reqwest::RequestBuilder) -> (u16, String, Duration) {
    let t = Instant::now();
    let r = rb.send().await.expect("the server answers");
    let status = r.status().as_u16();
    let text = r.text().await.unwrap_or_default();
    (status, text, t.elapsed())
}

/// [`send`] for a body the server may refuse before it has all of it: it answers
/// and closes the connection, and a client still writing may see only the close
/// (reported as the refusal it is).
async fn send_large(rb: reqwest::RequestBuilder) -> (u16, String, Duration) {
    let t = Instant::now();
    match rb.send().await {
        Ok(r) => {
            let status = r.status().as_u16();
            (status, r.text().await.unwrap_or_default(), t.elapsed())
        }
        Err(e) => {
            let shown = format!("{e:?}");
            assert!(shown.contains("BodyWrite"), "{shown}");
            (403, "refused\n".into(), t.elapsed())
        }
    }
}

fn example(file: &str) -> String {
    format!("{}/examples/workflows/{file}", env!("CARGO_MANIFEST_DIR"))
}

async fn listed(lead: &Client) -> Value {
    call(lead, "workflow_list", json!({})).await.ok()
}

#[tokio::test]
async fn a_signed_pull_request_starts_the_code_review_once() {
    let dir = tempfile::tempdir().unwrap();
    let s = HttpServer::start(dir.path()).await;
    let lead = s.lead(Proto::Modern).await;
    let set = json!({
        "name": "github", "secret": SECRET, "file": example("code-review-steps.yaml"),
        "params": {"pr": "$.pull_request.number"}, "tag": "pr-$.pull_request.number",
    });
    let r = call(&lead, "hook_set", set).await.ok();
    assert_eq!(r["hook"]["secret"], "set", "{r}");
    assert_eq!(r["path"], "/hooks/github", "{r}");
    assert!(!r.to_string().contains(SECRET), "{r}");

    let body = pull_request(7);
    let sig = sign_github(SECRET.as_bytes(), &body);
    let (status, text, _) = post_github(&s, "github", body.clone(), Some(sig.clone()), "d-7").await;
    assert_eq!((status, text.as_str()), (202, "accepted\n"));
    // Answered once kept; the start follows, its outcome on the delivery.
    let got = outcomes(&lead, 1).await;
    assert_eq!(got, ["started @code-review-steps:pr-7"]);
    let wait = json!({"workflow": "@code-review-steps:pr-7", "wait_seconds": 40});
    let st = call(&lead, "workflow_status", wait).await.ok();
    assert_eq!(st["status"], "completed", "{st}");
    let review = call(
        &lead,
        "channel_read",
        json!({"workflow": "@code-review-steps:pr-7"}),
    )
    .await
    .ok();
    assert!(
        review.to_string().contains("Review pull request 7 opened"),
        "the PR number reached the step's prompt: {review}"
    );
    let runs = st["runs"].clone();

    // The sender retries the same delivery: answered alike, nothing starts again.
    let (status, text, _) = post_github(&s, "github", body, Some(sig), "d-7").await;
    assert_eq!((status, text.as_str()), (202, "accepted\n"));
    let l = listed(&lead).await;
    let instances: Vec<&Value> = l["workflows"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|w| {
            w["workflow"]
                .as_str()
                .unwrap()
                .starts_with("@code-review-steps")
        })
        .collect();
    assert_eq!(instances.len(), 1, "{l}");
    assert_eq!(instances[0]["status"], "completed", "{l}");
    let after = call(
        &lead,
        "workflow_status",
        json!({"workflow": "@code-review-steps:pr-7"}),
    )
    .await
    .ok();
    assert_eq!(after["runs"], runs, "{after}");
    assert_eq!(l["hooks"][0]["deliveries"], 1, "{l}");
    assert_eq!(
        l["hooks"][0]["last"], "started @code-review-steps:pr-7",
        "{l}"
    );
    assert_eq!(l["hook_deliveries"][0]["event"], "pull_request", "{l}");
    assert!(!l.to_string().contains(SECRET), "{l}");
    s.stop().await;
}

#[tokio::test]
async fn hostile_requests_are_refused_alike_fast_and_start_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let s = HttpServer::start(dir.path()).await;
    let lead = s.lead(Proto::Modern).await;
    let set = json!({"name": "github", "secret": SECRET, "file": example("code-review-steps.yaml"),
        "params": {"pr": "$.pull_request.number"}});
    call(&lead, "hook_set", set).await.ok();
    let base = s.url.trim_end_matches("/mcp").to_owned();
    let body = pull_request(8);
    let secret = SECRET.as_bytes();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let deep = ("[".repeat(10_000) + &"]".repeat(10_000)).into_bytes();
    let huge = vec![b' '; 10 << 20];
    let http = reqwest::Client::new();
    let to = |name: &str| http.post(format!("{base}/hooks/{name}"));
    let cases: Vec<(&str, reqwest::RequestBuilder)> = vec![
        ("unsigned", to("github").body(body.clone())),
        (
            "a bad signature",
            to("github")
                .header(
                    "x-hub-signature-256",
                    sign_github(b"not-the-secret-at-all", &body),
                )
                .body(body.clone()),
        ),
        (
            "an old timestamp",
            to("github")
                .header("x-hook-signature", sign_generic(secret, now - 3_600, &body))
                .body(body.clone()),
        ),
        (
            "an unknown hook",
            to("gitlab")
                .header("x-hub-signature-256", sign_github(secret, &body))
                .body(body.clone()),
        ),
        (
            "a 10 MiB body",
            to("github")
                .header("x-hub-signature-256", sign_github(secret, &huge))
                .body(huge.clone()),
        ),
        (
            "a 10 MiB body without a length",
            to("github")
                .header("x-hub-signature-256", sign_github(secret, &huge))
                .body(reqwest::Body::wrap_stream(futures::stream::iter(
                    huge.chunks(64 << 10)
                        .map(|c| Ok::<_, std::io::Error>(c.to_vec()))
                        .collect::<Vec<_>>(),
                ))),
        ),
        (
            "JSON nested 10,000 deep",
            to("github")
                .header("x-hub-signature-256", sign_github(secret, &deep))
                .body(deep.clone()),
        ),
        (
            "not JSON",
            to("github")
                .header("x-hub-signature-256", sign_github(secret, b"<xml/>"))
                .body("<xml/>"),
        ),
    ];
    let mut answers = Vec::new();
    for (what, rb) in cases {
        let (status, text, took) = send_large(rb).await;
        assert!(took < Duration::from_secs(3), "{what} took {took:?}");
        answers.push((what, status, text));
    }
    for (what, status, text) in &answers {
        assert_eq!((*status, text.as_str()), (403, "refused\n"), "{what}");
    }
    // The server stayed responsive and nothing started or was kept.
    let t = Instant::now();
    let l = listed(&lead).await;
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
    let started = l["workflows"].as_array().unwrap().iter().any(|w| {
        w["workflow"]
            .as_str()
            .unwrap()
            .starts_with("@code-review-steps")
    });
    assert!(!started, "{l}");
    assert_eq!(l["hooks"][0]["deliveries"], 0, "{l}");
    assert!(l.get("hook_deliveries").is_none(), "{l}");
    s.stop().await;
}

#[tokio::test]
async fn a_hook_posts_fields_reads_nothing_and_keeps_to_its_rate() {
    let dir = tempfile::tempdir().unwrap();
    let s = HttpServer::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    new_agents(&lead, "@global:main", &["triage"]).await;
    let set = json!({"name": "issues", "secret": SECRET, "workflow": "@global:main",
        "to": "@triage", "params": {"title": "$.pull_request.title", "pr": "$.number"}, "rate": 3});
    let r = call(&lead, "hook_set", set).await.ok();
    assert_eq!(
        r["hook"]["action"],
        "post in @global:main to @triage with pr=$.number, title=$.pull_request.title",
        "{r}"
    );
    let base = s.url.trim_end_matches("/mcp").to_owned();
    let http = reqwest::Client::new();
    let mut answers = Vec::new();
    for i in 0..5 {
        let body = pull_request(i);
        // The generic form, and the admin token besides: it buys nothing here.
        let rb = http
            .post(format!("{base}/hooks/issues"))
            .bearer_auth(&s.admin)
            .header("x-hook-delivery", format!("n-{i}"))
            .header(
                "x-hook-signature",
                sign_generic(SECRET.as_bytes(), now_secs(), &body),
            )
            .body(body);
        answers.push(send(rb).await.0);
    }
    assert_eq!(answers, [202, 202, 202, 403, 403], "the rate is 3 a minute");
    outcomes(&lead, 3).await;
    // Posted as the hook, not as the lead: the lead's reading has not moved past
    // them, and the addressee has them in its inbox.
    let noted = json!({"workflow": "@global:main", "message": "noted"});
    let sent = call(&lead, "channel_send", noted).await.ok();
    assert_eq!(sent["missed_count"], 3, "{sent}");
    let info = call(&lead, "agent_info", json!({"target": "triage@global:main"}));
    let info = info.await.ok();
    assert_eq!(info["inbox"]["pending"], 3, "{info}");
    let msgs = call(&lead, "channel_read", json!({"workflow": "@global:main"}))
        .await
        .ok();
    let posts: Vec<&Value> = msgs["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["content"].as_str().unwrap().starts_with("[hook issues]"))
        .collect();
    assert!(
        posts
            .iter()
            .all(|m| m["from"] == "hook:issues" && m["to"] == "triage"),
        "{msgs}"
    );
    let posted: Vec<&str> = posts
        .iter()
        .map(|m| m["content"].as_str().unwrap())
        .collect();
    assert_eq!(posted.len(), 3, "{msgs}");
    assert_eq!(
        posted[0],
        r#"[hook issues] {"pr":0,"title":"Fix the import"}"#
    );
    // Reading is not what a hook does: no other method, no other path.
    for (method, path) in [
        ("GET", "/hooks/issues"),
        ("GET", "/hooks"),
        ("PUT", "/hooks/issues"),
    ] {
        let rb = http
            .request(method.parse().unwrap(), format!("{base}{path}"))
            .bearer_auth(&s.admin);
        let (status, text, _) = send(rb).await;
        assert!(status == 404 || status == 405, "{method} {path}: {status}");
        assert!(
            !text.contains("triage") && !text.contains("issues"),
            "{text}"
        );
    }
    let gone = call(&lead, "hook_set", json!({"name": "issues", "delete": true}))
        .await
        .ok();
    assert_eq!(gone["deleted"], true, "{gone}");
    let e = call(&lead, "hook_set", json!({"name": "x", "secret": SECRET}))
        .await
        .err();
    assert!(e.contains("`file`") && e.contains("`workflow`"), "{e}");
    let e = call(
        &lead,
        "hook_set",
        json!({"name": "x", "secret": "short", "workflow": "@global"}),
    )
    .await
    .err();
    assert!(e.contains("secret"), "{e}");
    s.stop().await;
}

fn now_secs() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

#[tokio::test]
async fn a_contract_denies_a_kind_of_delivery_and_the_sender_learns_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let s = HttpServer::start(dir.path()).await;
    let lead = s.lead(Proto::Modern).await;
    let set = json!({"name": "github", "secret": SECRET, "workflow": "@global:main"});
    call(&lead, "hook_set", set).await.ok();
    let c = json!({"name": "reviews-only", "when": {"event": "hook", "hook": "git*", "kind": "push"},
        "then": {"action": "deny", "reason": "only pull requests start work"}});
    let r = call(&lead, "contract_set", c).await.ok();
    assert_eq!(
        r["contract"]["says"],
        "When a \"push\" event at a hook matching \"git*\" arrives, refuse it: \"only pull requests start work\".",
        "{r}"
    );
    let base = s.url.trim_end_matches("/mcp").to_owned();
    let http = reqwest::Client::new();
    // Each its own body: one signed body is taken once (a replay under another id is not new).
    for (kind, delivery, n) in [("push", "p-1", 9), ("pull_request", "p-2", 10)] {
        let body = pull_request(n);
        let rb = http
            .post(format!("{base}/hooks/github"))
            .header("x-github-event", kind)
            .header("x-github-delivery", delivery)
            .header("x-hub-signature-256", sign_github(SECRET.as_bytes(), &body))
            .body(body);
        let (status, text, _) = send(rb).await;
        assert_eq!((status, text.as_str()), (202, "accepted\n"), "{kind}");
    }
    outcomes(&lead, 2).await;
    let l = listed(&lead).await;
    let outcomes: Vec<(&str, &str)> = l["hook_deliveries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| (d["event"].as_str().unwrap(), d["outcome"].as_str().unwrap()))
        .collect();
    assert_eq!(outcomes.len(), 2, "{l}");
    assert!(outcomes[0].1.starts_with("posted "), "{l}");
    assert_eq!(outcomes[1].0, "push", "{l}");
    assert!(
        outcomes[1].1.starts_with("denied: ") && outcomes[1].1.contains("only pull requests"),
        "{l}"
    );
    let msgs = call(&lead, "channel_read", json!({"workflow": "@global:main"}))
        .await
        .ok();
    let posts = msgs.to_string().matches("[hook github]").count();
    assert_eq!(posts, 1, "only the pull request was posted: {msgs}");
    // The dashboard shows both deliveries, newest first, to a host that renders it.
    let mime = json!([crate::dashboard::MIME]);
    let host = crate::dashboard::ui_client(&s, &s.admin, Proto::Modern, mime).await;
    let v = call(&host, "dashboard_watch", json!({"wait_seconds": 0}))
        .await
        .ok();
    assert_eq!(v["hooks"][0]["delivery"], "p-2", "{v}");
    assert!(
        v["hooks"][1]["outcome"]
            .as_str()
            .unwrap()
            .starts_with("denied: "),
        "{v}"
    );
    host.cancel().await.unwrap();
    let decisions = call(&lead, "contract_list", json!({})).await.ok();
    assert!(
        decisions.to_string().contains("hook:github"),
        "the decision is on record: {decisions}"
    );
    s.stop().await;
}

#[tokio::test]
async fn a_workflow_s_hooks_post_into_its_instance() {
    let dir = tempfile::tempdir().unwrap();
    let env = [("TICKETS_HOOK_SECRET", SECRET)];
    let s = HttpServer::start_with_env(dir.path(), &env).await;
    let lead = s.lead(Proto::Modern).await;
    let yaml = "name: triage\nagents:\n  triager: {backend: mock}\nhooks:\n  tickets:\n    \
                secret: \"${{ env.TICKETS_HOOK_SECRET }}\"\n    to: triager\n    \
                params: {title: $.title}\n";
    let r = call(&lead, "workflow_run", json!({"yaml": yaml}))
        .await
        .ok();
    assert!(!r.to_string().contains(SECRET), "{r}");
    let l = listed(&lead).await;
    assert_eq!(
        l["hooks"][0]["action"], "post in @triage:main to @triager with title=$.title",
        "{l}"
    );
    let body = serde_json::to_vec(&json!({"title": "Printer on fire", "id": 3})).unwrap();
    let rb = reqwest::Client::new()
        .post(format!("{}/hooks/tickets", s.url.trim_end_matches("/mcp")))
        .header(
            "x-hook-signature",
            sign_generic(SECRET.as_bytes(), now_secs(), &body),
        )
        .body(body);
    assert_eq!(send(rb).await.0, 202);
    outcomes(&lead, 1).await;
    let msgs = call(&lead, "channel_read", json!({"workflow": "@triage:main"}))
        .await
        .ok();
    assert!(
        msgs.to_string()
            .contains(r#"[hook tickets] {\"title\":\"Printer on fire\"}"#),
        "{msgs}"
    );
    // A secret the environment does not give refuses the start, naming the field
    // (a hook of another name: `tickets` is @triage:main's while it runs).
    let missing = yaml
        .replace("TICKETS", "MISSING")
        .replace("tickets:", "alerts:");
    let e = call(&lead, "workflow_run", json!({"yaml": missing, "tag": "b"}))
        .await
        .err();
    assert!(e.contains("hooks.alerts.secret"), "{e}");
    // A variable every worker would inherit is refused, naming the suffix to use.
    let plain = yaml
        .replace("TICKETS_HOOK_SECRET", "TICKETS_SECRET")
        .replace("tickets:", "alerts:");
    let e = call(&lead, "workflow_run", json!({"yaml": plain, "tag": "c"}))
        .await
        .err();
    assert!(
        e.contains("hooks.alerts.secret: env.TICKETS_SECRET") && e.contains("_HOOK_SECRET"),
        "{e}"
    );
    s.stop().await;
}

#[tokio::test]
async fn a_contract_holds_a_delivery_until_the_lead_approves_it() {
    let dir = tempfile::tempdir().unwrap();
    let s = HttpServer::start(dir.path()).await;
    let lead = s.lead(Proto::Modern).await;
    let set = json!({"name": "deploys", "secret": SECRET, "workflow": "@global:main"});
    call(&lead, "hook_set", set).await.ok();
    let c = json!({"name": "ask-first", "when": {"event": "hook", "hook": "deploys"},
        "then": {"action": "require_approval", "approvers": ["user"], "timeout": "1h"}});
    call(&lead, "contract_set", c).await.ok();
    let base = s.url.trim_end_matches("/mcp").to_owned();
    let http = reqwest::Client::new();
    let mut held = Vec::new();
    for (delivery, n) in [("h-1", 11), ("h-2", 12)] {
        let body = pull_request(n);
        let rb = http
            .post(format!("{base}/hooks/deploys"))
            .header("x-hook-delivery", delivery)
            .header("x-hub-signature-256", sign_github(SECRET.as_bytes(), &body))
            .body(body);
        assert_eq!(send(rb).await.0, 202, "{delivery}");
        outcomes(&lead, held.len() + 1).await;
        let l = listed(&lead).await;
        let outcome = l["hook_deliveries"][0]["outcome"]
            .as_str()
            .unwrap()
            .to_owned();
        let id: i64 = outcome
            .strip_prefix("held for approval ")
            .unwrap_or_else(|| panic!("{l}"))
            .parse()
            .unwrap();
        held.push(id);
    }
    let msgs = call(&lead, "channel_read", json!({"workflow": "@global:main"}))
        .await
        .ok();
    assert!(
        !msgs.to_string().contains("[hook deploys]"),
        "nothing posted yet: {msgs}"
    );
    for (id, decision) in held.iter().zip(["approve", "deny"]) {
        let d = json!({"id": id, "decision": decision});
        call(&lead, "approval_decide", d).await.ok();
    }
    // The approved one posts, the denied one is dropped.
    let deadline = Instant::now() + Duration::from_secs(10);
    let outcomes = loop {
        let l = listed(&lead).await;
        let o: Vec<String> = l["hook_deliveries"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["outcome"].as_str().unwrap().to_owned())
            .collect();
        if o.iter().all(|x| !x.starts_with("held")) {
            break o;
        }
        assert!(Instant::now() < deadline, "still held: {l}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(outcomes[0].starts_with("denied: approval"), "{outcomes:?}");
    assert!(outcomes[1].starts_with("posted "), "{outcomes:?}");
    let msgs = call(&lead, "channel_read", json!({"workflow": "@global:main"}))
        .await
        .ok();
    assert_eq!(
        msgs.to_string().matches("[hook deploys]").count(),
        1,
        "{msgs}"
    );
    s.stop().await;
}
