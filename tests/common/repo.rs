//! A git repository for the worktree tests, and sdk coders that edit it (the
//! fake model writes `lib.rs`).

use super::fake_llm::{FakeLlm, Script};
use super::*;
use serde_json::{Value, json};
use std::path::Path;
use std::process::Command;

/// `git -C dir args…`, which must succeed: its trimmed stdout.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["-c", "user.name=t", "-c", "user.email=t@t"])
        .args(args)
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// The folder of an agent's worktree, as agent_info gives it.
pub async fn folder_of(lead: &Client, target: &str) -> String {
    let i = info(lead, target).await;
    i["worktree"]["path"]
        .as_str()
        .unwrap_or_else(|| panic!("no worktree: {i}"))
        .to_owned()
}

/// The author and message of a branch's latest commit.
pub fn last_commit(repo: &Path, branch: &str) -> String {
    git(repo, &["log", "-1", "--format=%an%n%B", branch])
}

/// A repository with one commit on main: `lib.rs`.
pub fn repository() -> tempfile::TempDir {
    let repo = tempfile::tempdir().unwrap();
    git(repo.path(), &["init", "-q", "-b", "main"]);
    std::fs::write(repo.path().join("lib.rs"), "fn answer() -> u32 { 41 }\n").unwrap();
    git(repo.path(), &["add", "-A"]);
    git(repo.path(), &["commit", "-q", "-m", "first"]);
    repo
}

/// An sdk agent of the fake model at `llm` with its own worktree of `repo`.
pub async fn coder(lead: &Client, name: &str, repo: &Path, llm: &str) -> Value {
    call(
        lead,
        "agent_new",
        json!({"name": name, "backend": "sdk", "model": "claude-sonnet-4-5",
               "env": {"ANTHROPIC_BASE_URL": llm, "ANTHROPIC_API_KEY": "sk-test"},
               "cwd": repo.display().to_string(), "workspace": "worktree"}),
    )
    .await
    .ok()
}

/// A model that writes `lib.rs` its own way, then says so.
pub async fn writer(answer: u32) -> FakeLlm {
    let content = format!("fn answer() -> u32 {{ {answer} }}\n");
    let steps = [("write_file", json!({"path": "lib.rs", "content": content}))];
    FakeLlm::start(Script::steps(&steps, &format!("answer is {answer} now"))).await
}
