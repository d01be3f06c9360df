//! The real worker CLIs from npm (Claude Code, Codex, Gemini CLI, OpenCode), driven
//! offline: each runs as an agent's backend against a fake LLM server that scripts
//! one `channel_send` tool call, so the real CLI calls our MCP tool with the run's
//! token and the message must show up in the channel. Each CLI's missing-credentials
//! error must be classified `auth`. A second run resumes the CLI's conversation, and a
//! conversation the CLI no longer has is replaced by a new one.
//!
//! `scripts/interop-setup` installs the CLIs into `.interop/`; `scripts/test` runs it
//! and sets `AGENT_WORKER_HEAVY=1`, so in CI a missing CLI fails instead of skipping.

use crate::common;
use common::clis::*;
use common::fake_llm::{FakeLlm, Script};
use common::*;
use serde_json::{Value, json};

/// The worker's `channel_send` from the CLI shows up in the channel as `text`.
async fn assert_posted_to_channel(lead: &Client, llm: &FakeLlm, backend: &str, text: &str) {
    let ch = call(lead, "channel_read", json!({"limit": 10})).await.ok();
    let sent: Vec<(String, String)> = ch["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["from"].as_str().unwrap().to_owned(),
                m["content"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert!(
        sent.contains(&("worker".to_owned(), text.to_owned())),
        "{backend}: the CLI's tool call did not reach the channel: {sent:?}\nfirst model call: {}",
        llm.model_calls()
            .iter()
            .map(|c| c["body"]["tools"]
                .to_string()
                .split("\"name\":")
                .skip(1)
                .map(|x| x.chars().take(40).collect::<String>())
                .collect::<Vec<_>>()
                .join(" "))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// A second run resumes the CLI's conversation and reports only its own usage.
async fn resumes_the_conversation(lead: &Client, llm: &FakeLlm, backend: &str) {
    // The next run continues the CLI's conversation: the model sees the first question.
    let again = ask_worker(lead, "and once more?").await;
    assert_eq!(again["status"], "succeeded", "{backend}: {again}");
    let last = llm.model_calls().last().unwrap()["body"].to_string();
    assert!(
        last.contains("please say hello") && last.contains("and once more?"),
        "{backend}: the second run did not resume the conversation: {last}"
    );
    // Usage is this run's own, even where the CLI counts the whole conversation
    // (Codex): one model call now against the first run's two.
    let runs = call(lead, "agent_info", json!({"target": "worker"}))
        .await
        .ok()["runs"]
        .clone();
    let tokens = |i: usize| runs[i]["usage"]["input_tokens"].as_u64().unwrap();
    assert!(
        tokens(0) > 0 && tokens(0) < tokens(1),
        "{backend}: the resumed run's usage {} is not its own (first run: {})",
        tokens(0),
        tokens(1)
    );
}

async fn drive(backend: &str) {
    let Some(bin) = cli_bin() else { return };
    let text = format!("hello from {backend}");
    let llm = FakeLlm::start(Script::tool_then_text(
        "channel_send",
        json!({"message": text}),
        "all done",
    ))
    .await;
    let dir = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let s = HttpServer::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    let env = cli_env(backend, &bin, home.path(), &llm.url);
    let mut args = json!({
        "name": "worker", "backend": backend, "env": env,
        "cwd": work.path().display().to_string(),
        "system": "You are the interop checker. Always post with channel_send.",
    });
    if let Some(m) = model_for(backend) {
        args["model"] = json!(m);
    }
    call(&lead, "agent_new", args).await.ok();
    let r = call(
        &lead,
        "agent_ask",
        json!({"target": "worker", "message": "please say hello", "wait_seconds": 50}),
    )
    .await
    .ok();
    let info = call(&lead, "agent_info", json!({"target": "worker"}))
        .await
        .ok();
    assert_eq!(
        r["status"],
        "succeeded",
        "{backend}: {r}\nrun: {}\nrequests: {:?}",
        info["runs"][0],
        llm.requests()
            .iter()
            .map(|q| q["path"].clone())
            .collect::<Vec<_>>()
    );
    assert_posted_to_channel(&lead, &llm, backend, &text).await;
    assert_eq!(r["reply"]["final_text"], "all done", "{backend}: {r}");
    // The system prompt reached the model.
    let bodies = llm
        .model_calls()
        .iter()
        .map(|c| c["body"].to_string())
        .collect::<Vec<_>>()
        .join("\n");
    assert!(
        bodies.contains("You are the interop checker"),
        "{backend}: system prompt missing"
    );
    assert_eq!(info["inbox"]["acked"], 1, "{backend}: {info}");
    // Workspace files the CLI needed for this run are gone again.
    for f in [".gemini", ".cursor"] {
        assert!(
            !work.path().join(f).exists(),
            "{backend}: {f} was left behind"
        );
    }

    resumes_the_conversation(&lead, &llm, backend).await;
    drop(lead);
    s.stop().await;

    // A conversation the CLI no longer has (its files were wiped, another machine):
    // the run starts a new one instead of failing for good.
    let changed = common::store::execute(
        dir.path(),
        "UPDATE agents SET session_id = ?1 WHERE name = 'worker'",
        "0199a3b2-7c1d-7e00-9000-0000000000aa",
    );
    assert_eq!(changed, 1);
    let s = HttpServer::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    let fresh = ask_worker(&lead, "are you still there?").await;
    let info = call(&lead, "agent_info", json!({"target": "worker"}))
        .await
        .ok();
    assert_eq!(
        fresh["status"], "succeeded",
        "{backend}: a lost session was not replaced: {fresh}\n{}",
        info["runs"][0]
    );
    s.stop().await;
}

async fn ask_worker(lead: &Client, message: &str) -> Value {
    call(
        lead,
        "agent_ask",
        json!({"target": "worker", "message": message, "wait_seconds": 50}),
    )
    .await
    .ok()
}

/// Without any credentials the run fails at once as `auth`, in the CLI's words,
/// and the message stays pending.
async fn no_credentials(backend: &str) {
    let Some(bin) = cli_bin() else { return };
    let dir = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let s = HttpServer::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    let mut env = base_env(&bin, home.path());
    // Keys the machine may have must not leak in.
    for k in [
        "ANTHROPIC_API_KEY",
        "OPENAI_API_KEY",
        "CODEX_API_KEY",
        "GEMINI_API_KEY",
        "GOOGLE_API_KEY",
    ] {
        env.insert(k.into(), json!(""));
    }
    if backend == "codex" {
        std::fs::create_dir_all(home.path().join(".codex")).unwrap();
        env.insert(
            "CODEX_HOME".into(),
            json!(home.path().join(".codex").display().to_string()),
        );
    }
    call(
        &lead,
        "agent_new",
        json!({"name": "worker", "backend": backend, "env": env,
               "cwd": work.path().display().to_string()}),
    )
    .await
    .ok();
    let r = call(
        &lead,
        "agent_ask",
        json!({"target": "worker", "message": "hi", "wait_seconds": 50}),
    )
    .await
    .ok();
    assert_eq!(r["status"], "failed", "{backend}: {r}");
    assert_eq!(r["error_class"], "auth", "{backend}: {r}");
    let info = call(&lead, "agent_info", json!({"target": "worker"}))
        .await
        .ok();
    assert_eq!(info["inbox"]["pending"], 1, "{backend}: {info}");
    s.stop().await;
}

#[tokio::test]
#[cfg_attr(
    not(heavy),
    ignore = "heavy: the worker CLIs from npm (AGENT_WORKER_HEAVY=1, scripts/interop-setup)"
)]
async fn claude_code_calls_our_tools() {
    drive("claude").await;
}

#[tokio::test]
#[cfg_attr(
    not(heavy),
    ignore = "heavy: the worker CLIs from npm (AGENT_WORKER_HEAVY=1, scripts/interop-setup)"
)]
async fn codex_calls_our_tools() {
    drive("codex").await;
}

#[tokio::test]
#[cfg_attr(
    not(heavy),
    ignore = "heavy: the worker CLIs from npm (AGENT_WORKER_HEAVY=1, scripts/interop-setup)"
)]
async fn gemini_cli_calls_our_tools() {
    drive("gemini").await;
}

#[tokio::test]
#[cfg_attr(
    not(heavy),
    ignore = "heavy: the worker CLIs from npm (AGENT_WORKER_HEAVY=1, scripts/interop-setup)"
)]
async fn opencode_calls_our_tools() {
    drive("opencode").await;
}

#[tokio::test]
#[cfg_attr(
    not(heavy),
    ignore = "heavy: the worker CLIs from npm (AGENT_WORKER_HEAVY=1, scripts/interop-setup)"
)]
async fn missing_credentials_are_auth_errors() {
    for backend in ["claude", "codex", "gemini", "opencode"] {
        no_credentials(backend).await;
    }
}
