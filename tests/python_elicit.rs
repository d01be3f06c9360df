//! An approval answered inline by a person: the official Python MCP SDK as the
//! lead's client declares elicitation and answers it (tests/python/elicit_check.py);
//! the sdk agent's write, held by a contract, then happens. Over 2025-11-25 the
//! server asks by an elicitation request; over 2026-07-28 the waiting call returns
//! input_required and the SDK retries it with the answer.

use crate::common;
use common::HttpServer;
use common::fake_llm::{FakeLlm, Script};
use serde_json::json;
use std::path::Path;
use std::process::Stdio;

const REPO: &str = env!("CARGO_MANIFEST_DIR");

const LEGACY: &str = "legacy";
const MODERN: &str = "2026-07-28";

#[tokio::test]
#[cfg_attr(
    not(heavy),
    ignore = "heavy: the Python SDK's virtualenv (AGENT_WORKER_HEAVY=1, scripts/py-env)"
)]
async fn the_lead_approves_inline_from_the_python_sdk() {
    assert!(check(LEGACY, "approve").await, "the file was written");
}

#[tokio::test]
#[cfg_attr(
    not(heavy),
    ignore = "heavy: the Python SDK's virtualenv (AGENT_WORKER_HEAVY=1, scripts/py-env)"
)]
async fn the_lead_approves_inline_by_input_required() {
    assert!(check(MODERN, "approve").await, "the file was written");
}

#[tokio::test]
#[cfg_attr(
    not(heavy),
    ignore = "heavy: the Python SDK's virtualenv (AGENT_WORKER_HEAVY=1, scripts/py-env)"
)]
async fn a_declined_form_decides_nothing_and_a_later_wait_asks_again() {
    assert!(check(MODERN, "decline").await, "the file was written");
}

#[tokio::test]
#[cfg_attr(
    not(heavy),
    ignore = "heavy: the Python SDK's virtualenv (AGENT_WORKER_HEAVY=1, scripts/py-env)"
)]
async fn a_forged_request_state_decides_nothing() {
    assert!(check(MODERN, "forged").await, "the file was written");
}

/// Runs the script in `mode` (legacy or a protocol version) for `scenario`;
/// whether the agent's file was written.
async fn check(mode: &str, scenario: &str) -> bool {
    let python = common::python();
    let work = tempfile::tempdir().unwrap();
    let write = [(
        "write_file",
        json!({"path": "hello.txt", "content": "written"}),
    )];
    let llm = FakeLlm::start(Script::steps(&write, "done")).await;
    let dir = tempfile::tempdir().unwrap();
    let s = HttpServer::start(dir.path()).await;
    let out = tokio::time::timeout(
        std::time::Duration::from_secs(150),
        tokio::process::Command::new(&python)
            .arg(Path::new(REPO).join("tests/python/elicit_check.py"))
            .args([&s.url, &s.admin, &llm.url])
            .arg(work.path())
            .args([mode, scenario])
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .stdin(Stdio::null())
            .output(),
    )
    .await
    .expect("elicit_check.py finished in time")
    .expect("run elicit_check.py");
    let report = format!(
        "{}\n--- stdout\n{}--- stderr\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{report}");
    println!("{report}");
    // The run writes its file after its approval; it ends before the run does.
    let file = work.path().join("hello.txt");
    let written = std::fs::read_to_string(&file).is_ok_and(|t| t == "written");
    s.stop().await;
    written
}
