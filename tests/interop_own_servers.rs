//! An agent's own MCP servers through real runs, on the sdk backend and each CLI:
//! started for the run with the env the lead gave them (and in the agent's
//! sandbox), the model's call reaching them, their secrets shown nowhere; one
//! that cannot start fails a Codex run with its name.

use crate::common;
use crate::interop_permissions::{agent_env, bin_for};
use common::clis::*;
use common::fake_llm::{FakeLlm, Script};
use common::*;
use serde_json::{Value, json};
use std::path::Path;

/// A kernel, a fake model that calls `file_issue`, and `worker` on `backend` with
/// `servers` as its own MCP servers (and `permissions`, unless null), asked to file
/// the crash. What the ask and agent_info said; the rest is kept alive for more calls.
struct Asked {
    r: Value,
    info: Value,
    lead: Client,
    s: HttpServer,
    _keep: (
        tempfile::TempDir,
        tempfile::TempDir,
        tempfile::TempDir,
        FakeLlm,
    ),
}

async fn ask_with_own_servers(
    backend: &str,
    bin: &Path,
    servers: Value,
    permissions: Value,
) -> Asked {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let llm = FakeLlm::start(Script::tool_then_text(
        "file_issue",
        json!({"title": "crash on start"}),
        "filed it",
    ))
    .await;
    let dir = tempfile::tempdir().unwrap();
    let s = HttpServer::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    let env = agent_env(backend, bin, home.path(), &llm.url);
    let model = model_for(backend).unwrap_or("claude-sonnet-4-5");
    let mut args = json!({"name": "worker", "backend": backend, "env": env, "model": model,
           "cwd": work.path().display().to_string(), "mcp_servers": servers});
    if !permissions.is_null() {
        args["permissions"] = permissions;
    }
    call(&lead, "agent_new", args).await.ok();
    let r = ask(&lead, "worker", "file the crash", 50).await;
    let info = info(&lead, "worker").await;
    Asked {
        r,
        info,
        lead,
        s,
        _keep: (home, work, dir, llm),
    }
}

/// An agent's own stdio MCP server (a tiny server in tests/python, two seconds slow
/// to start) is started for its run, with the env the lead gave it, and the model's
/// call to its tool reaches it, on the sdk backend and on the CLIs. The secret in its env is shown back
/// nowhere: not in agent_info, not in the channel.
async fn own_server_row(backend: &str) {
    let Some(bin) = bin_for(backend) else { return };
    let python = Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv/bin/python");
    assert!(
        python.exists(),
        "the Python venv is missing: run scripts/py-env"
    );
    let server = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/tracker_server.py");
    let marks = tempfile::tempdir().unwrap();
    let mark = marks.path().join("issues");
    let Asked {
        r, info, lead, s, ..
    } = ask_with_own_servers(
        backend,
        &bin,
        json!({"tracker": {
            // Two seconds slow to start, as a server that installs or builds is: each
            // backend must wait for it, not run the turn without its tools.
            "command": "sh",
            "args": ["-c", "sleep 2; exec \"$0\" \"$1\"", python.display().to_string(), server.display().to_string()],
            "env": {"TRACKER_MARK": mark.display().to_string(), "TRACKER_KEY": "tk-secret-42"}}}),
        // The server runs in the agent's sandbox: where it records is granted.
        json!({"allow": [format!("edit:{}", marks.path().display())]}),
    )
    .await;
    assert_eq!(
        r["status"], "succeeded",
        "{backend}: {r}\n{}",
        info["runs"][0]
    );
    let filed = std::fs::read_to_string(&mark).unwrap_or_default();
    assert_eq!(
        filed, "crash on start|tk-secret-42\n",
        "{backend}: the tool call did not reach the agent's server with its env\nrun: {}",
        info["runs"][0]
    );
    assert_eq!(r["reply"]["final_text"], "filed it", "{backend}: {r}");
    let shown = format!(
        "{info}{}",
        call(&lead, "channel_read", json!({"limit": 50})).await.ok()
    );
    assert!(shown.contains("tracker"), "{backend}: {info}");
    assert!(
        !shown.contains("tk-secret-42"),
        "{backend}: a secret was shown: {shown}"
    );
    s.stop().await;
}

#[tokio::test]
#[cfg_attr(
    not(heavy),
    ignore = "heavy: the Python SDK's virtualenv (AGENT_WORKER_HEAVY=1, scripts/py-env)"
)]
async fn own_mcp_server_on_sdk() {
    own_server_row("sdk").await;
}

#[tokio::test]
#[cfg_attr(
    not(heavy),
    ignore = "heavy: the worker CLIs from npm (AGENT_WORKER_HEAVY=1, scripts/interop-setup)"
)]
async fn own_mcp_server_on_claude_code() {
    own_server_row("claude").await;
}

#[tokio::test]
#[cfg_attr(
    not(heavy),
    ignore = "heavy: the worker CLIs from npm (AGENT_WORKER_HEAVY=1, scripts/interop-setup)"
)]
async fn own_mcp_server_on_gemini_cli() {
    own_server_row("gemini").await;
}

#[tokio::test]
#[cfg_attr(
    not(heavy),
    ignore = "heavy: the worker CLIs from npm (AGENT_WORKER_HEAVY=1, scripts/interop-setup)"
)]
async fn own_mcp_server_on_opencode() {
    own_server_row("opencode").await;
}

#[tokio::test]
#[cfg_attr(
    not(heavy),
    ignore = "heavy: the worker CLIs from npm (AGENT_WORKER_HEAVY=1, scripts/interop-setup)"
)]
async fn own_mcp_server_on_codex() {
    own_server_row("codex").await;
}

/// On Codex an agent's own server is required, as on the sdk backend: one that
/// cannot start fails the run with the server's name, instead of a run that goes
/// on without its tools (and the model's call to them).
#[tokio::test]
#[cfg_attr(
    not(heavy),
    ignore = "heavy: the worker CLIs from npm (AGENT_WORKER_HEAVY=1, scripts/interop-setup)"
)]
async fn own_mcp_server_that_cannot_start_fails_the_codex_run() {
    let Some(bin) = bin_for("codex") else { return };
    let Asked { r, info, s, .. } = ask_with_own_servers(
        "codex",
        &bin,
        json!({"tracker": {"command": "/nonexistent/agent-worker-test-server"}}),
        Value::Null,
    )
    .await;
    assert_eq!(r["status"], "failed", "{r}\n{}", info["runs"][0]);
    let error = info["runs"][0]["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("tracker"),
        "the error names no server: {}",
        info["runs"][0]
    );
    s.stop().await;
}
