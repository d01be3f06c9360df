//! Contracts on the real Claude Code CLI, offline against a fake model: with a
//! tool_request contract in force, Claude Code asks the kernel through its
//! permission prompt tool before the governed tool runs. A deny on `rm *` keeps the
//! file and the model reads the contract's reason; a required approval holds the
//! write until the lead approves it, and then the file appears.

mod common;
use common::clis::*;
use common::fake_llm::{FakeLlm, Script};
use common::*;
use serde_json::json;
use std::time::Duration;

async fn claude_agent(
    lead: &Client,
    work: &std::path::Path,
    home: &std::path::Path,
    bin: &std::path::Path,
    llm: &FakeLlm,
    permissions: &str,
) {
    let mut args = json!({
        "name": "worker", "backend": "claude", "env": cli_env("claude", bin, home, &llm.url),
        "cwd": work.display().to_string(), "permissions": permissions,
    });
    if let Some(m) = model_for("claude") {
        args["model"] = json!(m);
    }
    call(lead, "agent_new", args).await.ok();
}

#[tokio::test]
async fn claude_code_asks_the_kernel_and_a_deny_keeps_the_file() {
    let Some(bin) = cli_bin() else { return };
    let (home, work, dir) = (
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
    );
    let victim = work.path().join("victim.txt");
    std::fs::write(&victim, "keep me").unwrap();
    let steps = [(
        "Bash",
        json!({"command": format!("rm -f {}", victim.display()), "description": "clean up"}),
    )];
    let llm = FakeLlm::start(Script::steps(&steps, "done")).await;
    let s = HttpServer::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    claude_agent(&lead, work.path(), home.path(), &bin, &llm, "full").await;
    call(
        &lead,
        "contract_set",
        json!({"name": "no-rm", "when": {"event": "tool_request", "tool": "shell", "match": "rm *"},
               "then": {"action": "deny", "reason": "nobody deletes files"}}),
    )
    .await
    .ok();
    let r = ask(&lead, "worker", "clean up", 50).await;
    let told = llm
        .model_calls()
        .last()
        .map(|c| c["body"].to_string())
        .unwrap_or_default();
    assert_eq!(r["status"], "succeeded", "{r}");
    assert!(
        victim.exists(),
        "Claude Code deleted the file despite the contract"
    );
    assert!(
        told.contains("nobody deletes files"),
        "the model was not told why: {told}"
    );
    let list = call(&lead, "contract_list", json!({})).await.ok();
    assert_eq!(list["decisions"][0]["outcome"], "denied", "{list}");
    s.stop().await;
}

#[tokio::test]
async fn claude_code_waits_for_an_approval_then_writes() {
    let Some(bin) = cli_bin() else { return };
    let (home, work, dir) = (
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
    );
    let file = work.path().join("hello.txt");
    let steps = [(
        "Write",
        json!({"file_path": file.display().to_string(), "content": "written"}),
    )];
    let llm = FakeLlm::start(Script::steps(&steps, "done")).await;
    let s = HttpServer::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    claude_agent(&lead, work.path(), home.path(), &bin, &llm, "edit").await;
    call(
        &lead,
        "contract_set",
        json!({"name": "edits-need-me", "when": {"event": "tool_request", "tool": "edit"},
               "then": {"action": "require_approval", "timeout": "2m"}}),
    )
    .await
    .ok();
    call(
        &lead,
        "channel_send",
        json!({"message": "@worker write hello.txt"}),
    )
    .await
    .ok();
    let pending = approval_in(&lead, "pending", 60).await;
    assert!(
        pending["what"].as_str().unwrap().starts_with("Write"),
        "{pending}"
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(!file.exists(), "written before the approval");
    call(
        &lead,
        "approval_decide",
        json!({"id": pending["id"], "decision": "approve"}),
    )
    .await
    .ok();
    let i = wait_info(&lead, "worker", 60, |i| {
        i.get("running").is_none() && i["runs"].as_array().is_some_and(|r| !r.is_empty())
    })
    .await;
    assert_eq!(i["runs"][0]["status"], "succeeded", "{i}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "written");
    s.stop().await;
}

/// Codex, Gemini CLI and OpenCode have no hook to ask the kernel in a headless
/// run: a deny contract reaches them as a deny rule of the profile, and the CLI
/// refuses the command itself (Codex, which cannot match commands, loses its shell).
async fn hookless_deny(backend: &str) {
    let Some(bin) = cli_bin() else { return };
    let (home, work, dir) = (
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
    );
    let victim = work.path().join("victim.txt");
    std::fs::write(&victim, "keep me").unwrap();
    let command = format!("rm -f {}", victim.display());
    let step = match backend {
        "gemini" => (
            "run_shell_command",
            json!({"command": command, "description": "clean up"}),
        ),
        "opencode" => (
            "bash",
            json!({"command": command, "description": "clean up"}),
        ),
        "codex" => ("exec_command", json!({"cmd": command})),
        _ => unreachable!(),
    };
    let llm = FakeLlm::start(Script::steps(&[step], "done")).await;
    let s = HttpServer::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    let mut args = json!({
        "name": "worker", "backend": backend, "env": cli_env(backend, &bin, home.path(), &llm.url),
        "cwd": work.path().display().to_string(), "permissions": "full",
    });
    if let Some(m) = model_for(backend) {
        args["model"] = json!(m);
    }
    call(&lead, "agent_new", args).await.ok();
    call(
        &lead,
        "contract_set",
        json!({"name": "no-rm", "when": {"event": "tool_request", "tool": "shell", "match": "rm *"},
               "then": {"action": "deny", "reason": "nobody deletes files"}}),
    )
    .await
    .ok();
    let r = ask(&lead, "worker", "clean up", 50).await;
    assert_eq!(r["status"], "succeeded", "{backend}: {r}");
    assert!(
        victim.exists(),
        "{backend} deleted the file despite the contract"
    );
    s.stop().await;
}

#[tokio::test]
async fn gemini_cli_holds_a_deny_contract_through_its_profile() {
    hookless_deny("gemini").await;
}

#[tokio::test]
async fn opencode_holds_a_deny_contract_through_its_profile() {
    hookless_deny("opencode").await;
}

#[tokio::test]
async fn codex_holds_a_deny_contract_through_its_profile() {
    hookless_deny("codex").await;
}

/// Codex cannot refuse edits by rule: a contract holding edits for approval (with
/// nobody to ask) puts it in its read-only sandbox for the run.
#[tokio::test]
async fn codex_holds_an_edit_approval_as_its_read_only_sandbox() {
    let Some(bin) = cli_bin() else { return };
    let (home, work, dir) = (
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
    );
    let file = work.path().join("hello.txt");
    let patch = format!(
        "*** Begin Patch\n*** Add File: {}\n+written\n*** End Patch\n",
        file.display()
    );
    let llm = FakeLlm::start(Script::steps(
        &[("apply_patch", json!({"input": patch}))],
        "done",
    ))
    .await;
    let s = HttpServer::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    let mut args = json!({
        "name": "worker", "backend": "codex", "env": cli_env("codex", &bin, home.path(), &llm.url),
        "cwd": work.path().display().to_string(), "permissions": "edit",
    });
    if let Some(m) = model_for("codex") {
        args["model"] = json!(m);
    }
    call(&lead, "agent_new", args).await.ok();
    call(
        &lead,
        "contract_set",
        json!({"name": "edits-need-me", "when": {"event": "tool_request", "tool": "edit"},
               "then": {"action": "require_approval"}}),
    )
    .await
    .ok();
    let r = ask(&lead, "worker", "write hello.txt", 50).await;
    assert_eq!(r["status"], "succeeded", "{r}");
    assert!(!file.exists(), "codex wrote the file despite the contract");
    s.stop().await;
}
