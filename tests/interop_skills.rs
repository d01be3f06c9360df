//! Skills reach each real CLI (offline, the fake model): an agent given a skill
//! runs once, and the request its CLI sends the model names the skill and its
//! description (Claude Code in a system reminder, Codex in its developer
//! instructions, Gemini CLI in its system instruction, OpenCode in its system
//! message). In a shared folder the copy is there for the run only: afterwards
//! the folder is as it was, and a skill of the user's own in the same place is
//! never touched. With AGENT_WORKER_HEAVY=1 (scripts/test) a missing CLI fails.

use crate::common;
use common::clis::*;
use common::fake_llm::{FakeLlm, Script};
use common::*;
use serde_json::json;
use std::path::Path;

const DESCRIPTION: &str = "Use when greeting someone, greet with the words PINEAPPLE-HELLO.";

fn skill(root: &Path, name: &str, description: &str) -> std::path::PathBuf {
    let dir = root.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("SKILL.md"),
        format!("---\nname: {name}\ndescription: {description}\n---\n# {name}\nBe kind.\n"),
    )
    .unwrap();
    dir
}

async fn shown_to(backend: &str) {
    shown_and_loaded(backend, Script::text("greeted"), false).await;
}

/// The skill is shown; with `loads`, the model's call to load it (`script`) gets
/// its body back.
async fn shown_and_loaded(backend: &str, script: Script, loads: bool) {
    let Some(bin) = cli_bin() else { return };
    let skills = tempfile::tempdir().unwrap();
    let dir = skill(skills.path(), "greet-politely", DESCRIPTION);
    let work = tempfile::tempdir().unwrap();
    // A skill of the user's own where Codex, Gemini CLI and OpenCode look.
    let own = skill(
        &work.path().join(".agents/skills"),
        "house-style",
        "The user's own rules.",
    );
    let before = std::fs::read_to_string(own.join("SKILL.md")).unwrap();
    let llm = FakeLlm::start(script).await;
    let data = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let s = InProcess::start(data.path()).await;
    let lead = s.lead(Proto::Modern).await;
    let mut args = json!({
        "name": "greeter", "backend": backend,
        "env": cli_env(backend, &bin, home.path(), &llm.url),
        "cwd": work.path().display().to_string(),
        "skills": [dir.display().to_string()],
    });
    if let Some(m) = model_for(backend) {
        args["model"] = json!(m);
    }
    call(&lead, "agent_new", args).await.ok();
    let r = ask(&lead, "greeter", "greet the new member", 50).await;
    assert_eq!(r["status"], "succeeded", "{backend}: {r}");
    let bodies: String = llm
        .model_calls()
        .iter()
        .map(|c| c["body"].to_string())
        .collect();
    assert!(
        bodies.contains("greet-politely") && bodies.contains("PINEAPPLE-HELLO"),
        "{backend}: the model was not shown the skill"
    );
    if loads {
        assert!(
            bodies.contains("Be kind."),
            "{backend}: the skill's body was not loaded"
        );
    }
    // The folder is as it was: the copy is gone, the user's own skill untouched.
    let placed: Vec<String> = std::fs::read_dir(work.path().join(".agents/skills"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(placed, ["house-style"], "{backend}");
    assert_eq!(
        std::fs::read_to_string(own.join("SKILL.md")).unwrap(),
        before
    );
    s.stop().await;
}

#[tokio::test]
#[cfg_attr(
    not(heavy),
    ignore = "heavy: the worker CLIs from npm (AGENT_WORKER_HEAVY=1, scripts/interop-setup)"
)]
async fn claude_code_is_shown_the_agent_s_skill_and_loads_it() {
    let load = Script::tool_then_text("Skill", json!({"skill": "greet-politely"}), "greeted");
    shown_and_loaded("claude", load, true).await;
}

#[tokio::test]
#[cfg_attr(
    not(heavy),
    ignore = "heavy: the worker CLIs from npm (AGENT_WORKER_HEAVY=1, scripts/interop-setup)"
)]
async fn codex_is_shown_the_agent_s_skill() {
    shown_to("codex").await;
}

#[tokio::test]
#[cfg_attr(
    not(heavy),
    ignore = "heavy: the worker CLIs from npm (AGENT_WORKER_HEAVY=1, scripts/interop-setup)"
)]
async fn gemini_cli_is_shown_the_agent_s_skill() {
    shown_to("gemini").await;
}

#[tokio::test]
#[cfg_attr(
    not(heavy),
    ignore = "heavy: the worker CLIs from npm (AGENT_WORKER_HEAVY=1, scripts/interop-setup)"
)]
async fn opencode_is_shown_the_agent_s_skill() {
    shown_to("opencode").await;
}
