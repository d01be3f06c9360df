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

/// A model that writes `lib.rs` its own way in every run, then says so (for an
/// sdk agent, whose conversation goes on from run to run).
pub async fn steady_writer(answer: u32) -> FakeLlm {
    let content = format!("fn answer() -> u32 {{ {answer} }}\n");
    let steps = [("write_file", json!({"path": "lib.rs", "content": content}))];
    FakeLlm::start(Script::every_run(
        &steps,
        &format!("answer is {answer} now"),
    ))
    .await
}

pub async fn merge(lead: &Client, args: Value) -> Value {
    call(lead, "branch_merge", args).await.ok()
}

pub fn main_head(repo: &Path) -> String {
    git(repo, &["rev-parse", "main"])
}

/// Waits (up to 20 s) until main is no longer at `before`: a held merge was done.
pub async fn main_moved_from(repo: &Path, before: &str, what: &str) {
    let end = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while main_head(repo) == before {
        assert!(std::time::Instant::now() < end, "{what}");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// Two agents' branches, each with one run's change of the same line of
/// `lib.rs` (to `answer`), brought back: the first fast-forwards main and the
/// checkout of main; the second conflicts, with its hunks, and main stays as it
/// was; a sync of main into the second's branch leaves the markers for it, its
/// next run (the `steady_writer`'s) resolves them in a merge commit, and its
/// branch then fast-forwards main.
pub async fn merge_back(lead: &Client, repo: &Path, first: (&str, u32), second: (&str, u32)) {
    let line = |n: u32| format!("fn answer() -> u32 {{ {n} }}\n");
    let d = call(lead, "branch_diff", json!({"agent": first.0}))
        .await
        .ok();
    assert_eq!(
        d["files"],
        json!([{"path": "lib.rs", "added": 1, "removed": 1}]),
        "{d}"
    );
    let patch = d["patch"].as_str().unwrap();
    assert!(
        patch.contains(&format!("+{}", line(first.1).trim_end())),
        "{patch}"
    );
    let m = merge(lead, json!({"agent": first.0})).await;
    assert_eq!(m["status"], "merged", "{m}");
    assert_eq!(m["how"], "fast-forward", "{m}");
    let first_head = git(repo, &["rev-parse", &format!("aw/global-main/{}", first.0)]);
    assert_eq!(main_head(repo), first_head);
    assert_eq!(
        std::fs::read_to_string(repo.join("lib.rs")).unwrap(),
        line(first.1)
    );
    assert_eq!(git(repo, &["status", "--porcelain"]), "");
    let again = merge(lead, json!({"agent": first.0})).await;
    assert_eq!(again["status"], "up_to_date", "{again}");

    let m = merge(lead, json!({"agent": second.0})).await;
    assert_eq!(m["status"], "conflict", "{m}");
    let f = &m["conflicts"][0];
    assert_eq!(f["file"], "lib.rs", "{m}");
    assert_eq!(f["kind"], "content", "{m}");
    assert_eq!(f["hunks"][0]["ours"], line(first.1), "{m}");
    assert_eq!(f["hunks"][0]["theirs"], line(second.1), "{m}");
    assert_eq!(main_head(repo), first_head, "main did not move");
    assert_eq!(git(repo, &["status", "--porcelain"]), "");

    let runs_before = info(lead, second.0).await["runs"].as_array().unwrap().len();
    let sync = merge(lead, json!({"agent": second.0, "from": "main"})).await;
    assert_eq!(sync["status"], "conflict", "{sync}");
    assert_eq!(sync["conflicts"][0]["file"], "lib.rs", "{sync}");
    let i = wait_info(lead, second.0, 45, |i| {
        i.get("running").is_none() && i["runs"].as_array().is_some_and(|r| r.len() > runs_before)
    })
    .await;
    assert_eq!(i["runs"][0]["status"], "succeeded", "{i}");
    let head = git(
        repo,
        &["rev-parse", &format!("aw/global-main/{}", second.0)],
    );
    let parents = git(repo, &["rev-list", "--parents", "-n", "1", &head]);
    assert_eq!(parents.split(' ').count(), 3, "a merge commit: {parents}");
    let m = merge(lead, json!({"agent": second.0})).await;
    assert_eq!(m["status"], "merged", "{m}");
    assert_eq!(m["how"], "fast-forward", "{m}");
    assert_eq!(
        std::fs::read_to_string(repo.join("lib.rs")).unwrap(),
        line(second.1)
    );
    assert_eq!(git(repo, &["status", "--porcelain"]), "");
}

/// What must live as long as a test's coder: its model and its data dir.
pub type Keep = (FakeLlm, tempfile::TempDir);

/// One sdk coder, `ada`, with a worktree of a fresh repository, its model making
/// `lib.rs` answer 42, on a kernel in the test's process: the repository, the
/// lead, the kernel, and what must be kept.
pub async fn one_coder(p: Proto) -> (tempfile::TempDir, Client, InProcess, Keep) {
    let repo = repository();
    let llm = writer(42).await;
    let data = tempfile::tempdir().unwrap();
    let server = InProcess::start(data.path()).await;
    let lead = server.lead(p).await;
    coder(&lead, "ada", repo.path(), &llm.url).await;
    (repo, lead, server, (llm, data))
}
