//! Interval schedules that poll, through the real binary, real MCP and mock
//! workers: seed 004's `schedule: 30s  # polling interval` runs its reviewer only
//! when something waits for it (a message at once; a post by someone else at the
//! next poll), its instance is `completed` while nothing does, and workflow_stop
//! disarms the poll. A 1 s interval stands for the seed's 30 s: five seconds of
//! polls that start nothing show what five minutes of 30 s polls would.

use crate::common;
use common::*;
use serde_json::{Value, json};
use std::collections::HashSet;
use std::time::{Duration, Instant};

/// Seed 004's workflow as written, but for the interval (1 s for 30 s) and the
/// setup command (an echo for `gh pr diff`).
const SEED_004: &str = r#"name: code-review

agents:
  reviewer:
    model: anthropic/claude-sonnet-4-5
    system_prompt: prompts/reviewer.md
    schedule: 1s               # polling interval
    backend: default           # sdk | claude | codex | cursor | mock

  coder:
    model: anthropic/claude-sonnet-4-5
    system_prompt: prompts/coder.md

context:
  provider: sqlite             # default
  documentOwner: reviewer      # optional single-writer

setup:
  - shell: echo "+ fix the retry loop"
    as: diff

kickoff: |
  PR diff: ${{ diff }}
  @reviewer please review.
"#;

const WORKFLOW: &str = "@code-review:main";
const REVIEWER: &str = "reviewer@code-review";

fn runs(i: &Value) -> Vec<Value> {
    i["runs"].as_array().unwrap().clone()
}

fn ms(rfc3339: &Value) -> i64 {
    let t = humantime::parse_rfc3339(rfc3339.as_str().unwrap()).unwrap();
    t.duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64
}

/// Watches the reviewer until its schedule has shown `fires` next fires (so it
/// fired `fires - 1` times meanwhile): its runs must stay `n` throughout.
async fn no_run_while_firing(lead: &Client, fires: usize, n: usize) -> HashSet<String> {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut seen = HashSet::new();
    while seen.len() < fires {
        let i = info(lead, REVIEWER).await;
        assert_eq!(runs(&i).len(), n, "a run with nothing waiting: {i}");
        seen.insert(i["schedule"]["next_at"].to_string());
        assert!(
            Instant::now() < deadline,
            "the schedule fired {} times in 30 s",
            seen.len()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    seen
}

/// Watches a stopped instance's reviewer for `secs` seconds (an absence can only
/// be watched for a while): its runs must stay `n`. Returns the next fires shown.
async fn no_run_for(lead: &Client, secs: u64, n: usize) -> HashSet<String> {
    let until = Instant::now() + Duration::from_secs(secs);
    let mut fires = HashSet::new();
    while Instant::now() < until {
        let i = info(lead, REVIEWER).await;
        assert_eq!(runs(&i).len(), n, "a run with nothing waiting: {i}");
        fires.insert(i["schedule"]["next_at"].to_string());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    fires
}

/// The instance, once it is `completed` again (a run just ended may leave it
/// `running` for a moment).
async fn completed(lead: &Client) -> Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let st = call(
            lead,
            "workflow_status",
            json!({"workflow": WORKFLOW, "wait_seconds": 2}),
        )
        .await
        .ok();
        if st["status"] == "completed" {
            return st;
        }
        assert!(Instant::now() < deadline, "not completed: {st}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn send(lead: &Client, message: &str) -> Value {
    call(
        lead,
        "channel_send",
        json!({"message": message, "workflow": WORKFLOW}),
    )
    .await
    .ok()
}

/// The created_at of the message with this id.
async fn posted_at(lead: &Client, id: &Value) -> i64 {
    let read = call(
        lead,
        "channel_read",
        json!({"workflow": WORKFLOW, "limit": 200}),
    )
    .await
    .ok();
    let m = read["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["id"] == *id);
    ms(&m.expect("the message is in the channel")["created_at"])
}

#[tokio::test]
async fn seed_004s_poller_runs_only_when_something_waits_and_its_instance_completes() {
    let dir = tempfile::tempdir().unwrap();
    let s =
        HttpServer::start_with_env(dir.path(), &[("AGENT_WORKER_DEFAULT_BACKEND", "mock")]).await;
    let lead = s.lead(Proto::Legacy).await;
    let work = tempfile::tempdir().unwrap();
    std::fs::create_dir(work.path().join("prompts")).unwrap();
    std::fs::write(work.path().join("prompts/reviewer.md"), "You review.").unwrap();
    std::fs::write(work.path().join("prompts/coder.md"), "You code.").unwrap();
    let file = work.path().join("code-review.yaml");
    std::fs::write(&file, SEED_004).unwrap();
    call(
        &lead,
        "workflow_run",
        json!({"file": file.display().to_string()}),
    )
    .await
    .ok();
    // The kickoff's run, then nothing waits: done, and it says the reviewer polls.
    let st = completed(&lead).await;
    let reason = st["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("polls run again only when something waits") && reason.contains("reviewer"),
        "{st}"
    );
    let i = settled(&lead, REVIEWER).await;
    assert_eq!(runs(&i).len(), 1, "{i}");
    assert_eq!(runs(&i)[0]["trigger"], "message");

    // Three fires with nothing waiting: no run starts.
    let fires = no_run_while_firing(&lead, 4, 1).await;
    assert!(fires.len() >= 4, "the schedule kept firing: {fires:?}");

    // A message wakes it at once, not at the next poll.
    let sent = send(&lead, "@reviewer one more look, please").await;
    let i = wait_info(&lead, REVIEWER, 10, |i| runs(i).len() == 2).await;
    let latency = ms(&runs(&i)[0]["started_at"]) - posted_at(&lead, &sent["id"]).await;
    assert!(latency < 1000, "woken {latency} ms after the message");
    assert_eq!(runs(&i)[0]["trigger"], "message");
    completed(&lead).await;
    settled(&lead, REVIEWER).await;

    // A post by someone else that names nobody: the next poll runs it, once.
    send(&lead, "CI is green on main").await;
    let i = wait_info(&lead, REVIEWER, 10, |i| runs(i).len() == 3).await;
    assert_eq!(runs(&i)[0]["trigger"], "poll", "{i}");
    settled(&lead, REVIEWER).await;
    completed(&lead).await;
    no_run_while_firing(&lead, 3, 3).await;
    let coder = info(&lead, "coder@code-review").await;
    assert!(
        runs(&coder).is_empty(),
        "nothing was for the coder: {coder}"
    );

    // workflow_stop disarms the poll: its next fire stays where it was.
    call(&lead, "workflow_stop", json!({"workflow": WORKFLOW}))
        .await
        .ok();
    send(&lead, "a post while stopped").await;
    let fires = no_run_for(&lead, 3, 3).await;
    assert_eq!(fires.len(), 1, "it fired after workflow_stop: {fires:?}");
    s.stop().await;
}

/// A member without a worker (a joined client) that has a poll: the schedule
/// starts no run of it, so others' posts owe it none and the instance completes.
#[tokio::test]
async fn a_poll_of_a_member_without_a_worker_owes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let s = HttpServer::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    let yaml = "name: watched\nagents:\n  watcher: { backend: external, schedule: 1s }\n  \
                coder: { backend: mock }\nkickoff: \"@coder go\"\n";
    call(&lead, "workflow_run", json!({"yaml": yaml}))
        .await
        .ok();
    let st = finished(&lead, "@watched:main").await;
    assert_eq!(st["status"], "completed", "{st}");
    assert_eq!(agent_named(&st, "coder")["runs"], 1, "{st}");
    s.stop().await;
}
