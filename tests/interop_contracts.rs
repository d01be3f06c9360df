//! Contracts on the real worker CLIs, offline against a fake model. Claude Code,
//! with a tool_request contract in force, asks the kernel through its permission
//! prompt tool before the governed tool runs: a deny on `rm *` keeps the file and
//! the model reads the contract's reason; a required approval holds the write until
//! the lead approves it, and then the file appears. Codex, Gemini CLI and OpenCode,
//! which have no such hook, hold the same contracts through their profile.

use crate::common;
use common::clis::*;
use common::fake_llm::{FakeLlm, Script};
use common::*;
use serde_json::{Value, json};
use std::path::PathBuf;
use std::time::Duration;

/// One agent named `worker` on a real CLI with a fake model, and a contract.
struct Team {
    work: tempfile::TempDir,
    llm: FakeLlm,
    s: HttpServer,
    lead: Client,
    _home: tempfile::TempDir,
    _dir: tempfile::TempDir,
}

const NO_RM: &str = r#"{"name": "no-rm", "when": {"event": "tool_request", "tool": "shell", "match": "rm *"},
    "then": {"action": "deny", "reason": "nobody deletes files"}}"#;

impl Team {
    /// None (skip) when the CLIs are not installed and not required. `step` makes
    /// the model's one tool call from the agent's folder.
    async fn start(
        backend: &str,
        permissions: &str,
        contract: &str,
        step: impl FnOnce(&std::path::Path) -> (&'static str, Value),
    ) -> Option<Self> {
        let bin = cli_bin()?;
        let (home, work, dir) = (
            tempfile::tempdir().unwrap(),
            tempfile::tempdir().unwrap(),
            tempfile::tempdir().unwrap(),
        );
        let llm = FakeLlm::start(Script::steps(&[step(work.path())], "done")).await;
        let s = HttpServer::start(dir.path()).await;
        let lead = s.lead(Proto::Legacy).await;
        let mut args = json!({
            "name": "worker", "backend": backend, "env": cli_env(backend, &bin, home.path(), &llm.url),
            "cwd": work.path().display().to_string(), "permissions": permissions,
        });
        if let Some(m) = model_for(backend) {
            args["model"] = json!(m);
        }
        call(&lead, "agent_new", args).await.ok();
        let spec: Value = serde_json::from_str(contract).unwrap();
        call(&lead, "contract_set", spec).await.ok();
        Some(Self {
            work,
            llm,
            s,
            lead,
            _home: home,
            _dir: dir,
        })
    }

    fn file(&self, name: &str) -> PathBuf {
        self.work.path().join(name)
    }

    /// What the model was told last.
    fn told(&self) -> String {
        self.llm
            .model_calls()
            .last()
            .map(|c| c["body"].to_string())
            .unwrap_or_default()
    }
}

/// A file the model will try to delete.
fn victim(work: &std::path::Path) -> String {
    let v = work.join("victim.txt");
    std::fs::write(&v, "keep me").unwrap();
    // Plain `rm`: Codex refuses `rm -f` by itself as dangerous, whatever the profile.
    format!("rm {}", v.display())
}

#[tokio::test]
#[cfg_attr(
    not(heavy),
    ignore = "heavy: the worker CLIs from npm (AGENT_WORKER_HEAVY=1, scripts/interop-setup)"
)]
async fn claude_code_asks_the_kernel_and_a_deny_keeps_the_file() {
    let Some(t) = Team::start("claude", "full", NO_RM, |w| {
        (
            "Bash",
            json!({"command": victim(w), "description": "clean up"}),
        )
    })
    .await
    else {
        return;
    };
    let r = ask(&t.lead, "worker", "clean up", 50).await;
    assert_eq!(r["status"], "succeeded", "{r}");
    assert!(
        t.file("victim.txt").exists(),
        "Claude Code deleted the file despite the contract"
    );
    let told = t.told();
    assert!(
        told.contains("nobody deletes files"),
        "the model was not told why: {told}"
    );
    let list = call(&t.lead, "contract_list", json!({})).await.ok();
    assert_eq!(list["decisions"][0]["outcome"], "denied", "{list}");
    t.s.stop().await;
}

#[tokio::test]
#[cfg_attr(
    not(heavy),
    ignore = "heavy: the worker CLIs from npm (AGENT_WORKER_HEAVY=1, scripts/interop-setup)"
)]
async fn claude_code_waits_for_an_approval_then_writes() {
    let edits = r#"{"name": "edits-need-me", "when": {"event": "tool_request", "tool": "edit"},
        "then": {"action": "require_approval", "timeout": "2m"}}"#;
    let Some(t) = Team::start("claude", "edit", edits, |w| {
        let f = w.join("hello.txt").display().to_string();
        ("Write", json!({"file_path": f, "content": "written"}))
    })
    .await
    else {
        return;
    };
    call(
        &t.lead,
        "channel_send",
        json!({"message": "@worker write hello.txt"}),
    )
    .await
    .ok();
    let pending = approval_in(&t.lead, "pending", 60).await;
    assert!(
        pending["what"].as_str().unwrap().starts_with("Write"),
        "{pending}"
    );
    tokio::time::sleep(Duration::from_millis(40)).await;
    assert!(!t.file("hello.txt").exists(), "written before the approval");
    call(
        &t.lead,
        "approval_decide",
        json!({"id": pending["id"], "decision": "approve"}),
    )
    .await
    .ok();
    let i = wait_info(&t.lead, "worker", 60, |i| {
        i.get("running").is_none() && i["runs"].as_array().is_some_and(|r| !r.is_empty())
    })
    .await;
    assert_eq!(i["runs"][0]["status"], "succeeded", "{i}");
    assert_eq!(
        std::fs::read_to_string(t.file("hello.txt")).unwrap(),
        "written"
    );
    t.s.stop().await;
}

/// Codex, Gemini CLI and OpenCode have no hook to ask the kernel in a headless
/// run: a deny contract reaches them as a deny rule of the profile, and the CLI
/// refuses the command itself (Codex, which cannot match commands, loses its shell).
/// The same run under a contract that refuses nothing deletes the file, so the
/// model's call really is the deletion.
async fn hookless_deny(backend: &'static str) {
    let unrelated = r#"{"name": "tell-me", "when": {"event": "run_end", "status": "failed"},
        "then": {"action": "notify"}}"#;
    for (contract, kept) in [(unrelated, false), (NO_RM, true)] {
        let Some(t) = Team::start(backend, "full", contract, |w| {
            let command = victim(w);
            match backend {
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
            }
        })
        .await
        else {
            return;
        };
        let r = ask(&t.lead, "worker", "clean up", 50).await;
        assert_eq!(r["status"], "succeeded", "{backend}: {r}");
        assert_eq!(
            t.file("victim.txt").exists(),
            kept,
            "{backend} under {contract}: the file should {}",
            if kept { "be kept" } else { "be deleted" }
        );
        t.s.stop().await;
    }
}

#[tokio::test]
#[cfg_attr(
    not(heavy),
    ignore = "heavy: the worker CLIs from npm (AGENT_WORKER_HEAVY=1, scripts/interop-setup)"
)]
async fn gemini_cli_holds_a_deny_contract_through_its_profile() {
    hookless_deny("gemini").await;
}

#[tokio::test]
#[cfg_attr(
    not(heavy),
    ignore = "heavy: the worker CLIs from npm (AGENT_WORKER_HEAVY=1, scripts/interop-setup)"
)]
async fn opencode_holds_a_deny_contract_through_its_profile() {
    hookless_deny("opencode").await;
}

#[tokio::test]
#[cfg_attr(
    not(heavy),
    ignore = "heavy: the worker CLIs from npm (AGENT_WORKER_HEAVY=1, scripts/interop-setup)"
)]
async fn codex_holds_a_deny_contract_through_its_profile() {
    hookless_deny("codex").await;
}

/// Codex cannot refuse edits by rule: a contract holding edits for approval (with
/// nobody to ask) puts it in its read-only sandbox for the run.
#[tokio::test]
#[cfg_attr(
    not(heavy),
    ignore = "heavy: the worker CLIs from npm (AGENT_WORKER_HEAVY=1, scripts/interop-setup)"
)]
async fn codex_holds_an_edit_approval_as_its_read_only_sandbox() {
    let edits = r#"{"name": "edits-need-me", "when": {"event": "tool_request", "tool": "edit"},
        "then": {"action": "require_approval"}}"#;
    // First with a contract on something else: the same call does write.
    for (contract, written) in [(NO_RM, true), (edits, false)] {
        let Some(t) = Team::start("codex", "edit", contract, |w| {
            let patch = format!(
                "*** Begin Patch\n*** Add File: {}\n+written\n*** End Patch\n",
                w.join("hello.txt").display()
            );
            ("apply_patch", json!({"input": patch}))
        })
        .await
        else {
            return;
        };
        let r = ask(&t.lead, "worker", "write hello.txt", 50).await;
        assert_eq!(r["status"], "succeeded", "{r}");
        assert_eq!(
            t.file("hello.txt").exists(),
            written,
            "under {contract}: codex should {}write the file",
            if written { "" } else { "not " }
        );
        t.s.stop().await;
    }
}
