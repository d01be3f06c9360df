//! Coding teams with a real CLI: a Claude Code coder and an sdk coder, both
//! driven by the fake model, each in a worktree of one repository, change the same
//! function differently at the same time. Neither sees the other's edit; each run
//! ends in a commit on its own branch; the first merges by fast-forward, the
//! second conflicts (with its hunks, main untouched), resolves in a run after a
//! sync, and merges. With AGENT_WORKER_HEAVY=1 (scripts/test) a missing CLI fails.

use crate::common;
use common::clis::{cli_bin, cli_env};
use common::fake_llm::{FakeLlm, Script};
use common::repo::*;
use common::*;
use serde_json::json;

#[tokio::test]
#[cfg_attr(
    not(heavy),
    ignore = "heavy: the worker CLIs from npm (AGENT_WORKER_HEAVY=1, scripts/interop-setup)"
)]
async fn claude_code_and_sdk_coders_in_worktrees_of_one_repository() {
    let Some(bin) = cli_bin() else { return };
    let repo = repository();
    let dir = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    // Claude Code reads before it writes, by absolute path: where its worktree will be.
    let data = dir.path().canonicalize().unwrap();
    let target = data
        .join("worktrees/global/main/cody/lib.rs")
        .display()
        .to_string();
    let content = "fn answer() -> u32 { 42 }\n";
    let steps = [
        ("Read", json!({ "file_path": target })),
        ("Write", json!({"file_path": target, "content": content})),
    ];
    let claude = FakeLlm::start(Script::steps(&steps, "answer is 42 now")).await;
    let sdk = steady_writer(43).await;
    let s = InProcess::start(dir.path()).await;
    let lead = s.lead(Proto::Modern).await;
    let env = cli_env("claude", &bin, home.path(), &claude.url);
    let made = call(
        &lead,
        "agent_new",
        json!({"name": "cody", "backend": "claude", "model": "claude-sonnet-4-5", "env": env,
               "cwd": repo.path().display().to_string(), "workspace": "worktree"}),
    )
    .await
    .ok();
    assert_eq!(made["agent"]["workspace"]["mode"], "worktree", "{made}");
    coder(&lead, "ada", repo.path(), &sdk.url).await;
    let (c, a) = tokio::join!(
        ask(&lead, "cody", "make it 42", 50),
        ask(&lead, "ada", "make it 43", 50)
    );
    assert_eq!(c["status"], "succeeded", "{c}");
    assert_eq!(a["status"], "succeeded", "{a}");
    for (name, answer) in [("cody", 42), ("ada", 43)] {
        let i = info(&lead, name).await;
        let folder = std::path::PathBuf::from(folder_of(&lead, name).await);
        let text = std::fs::read_to_string(folder.join("lib.rs")).unwrap();
        assert_eq!(
            text,
            format!("fn answer() -> u32 {{ {answer} }}\n"),
            "{name} sees another's edit"
        );
        let head = git(
            repo.path(),
            &["rev-parse", &format!("aw/global-main/{name}")],
        );
        assert_eq!(
            i["runs"][0]["commit"], head,
            "{name}'s run is its commit: {i}"
        );
        assert!(last_commit(repo.path(), &head).starts_with(&format!("{name}\n")));
    }
    merge_back(&lead, repo.path(), ("cody", 42), ("ada", 43)).await;
    s.stop().await;
}
