//! Workflows end to end through workflow_run over real MCP: every example runs to
//! completion with mock agents, instances with different tags stay apart, mistakes
//! in the YAML come back as file:line:column errors and start nothing, a guard
//! blocks a run, workflow_stop stops it, and a kernel killed mid-workflow finishes
//! the workflow after a restart with no message lost or delivered twice.

use crate::common;
use common::*;
use serde_json::{Value, json};
use std::path::PathBuf;
use std::time::Duration;

fn example(name: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("examples/workflows")
        .join(name)
        .display()
        .to_string()
}

async fn run(lead: &Client, args: Value) -> Value {
    call(lead, "workflow_run", args).await.ok()
}

async fn channel(lead: &Client, workflow: &str) -> Vec<Value> {
    call(
        lead,
        "channel_read",
        json!({"workflow": workflow, "limit": 200}),
    )
    .await
    .ok()["messages"]
        .as_array()
        .unwrap()
        .clone()
}

fn from<'a>(msgs: &'a [Value], sender: &str) -> Vec<&'a str> {
    msgs.iter()
        .filter(|m| m["from"] == sender)
        .map(|m| m["content"].as_str().unwrap())
        .collect()
}

#[tokio::test]
async fn the_review_loop_example_runs_to_completion() {
    let dir = tempfile::tempdir().unwrap();
    let s = HttpServer::start(dir.path()).await;
    let lead = s.lead(Proto::Modern).await;
    let r = run(
        &lead,
        json!({"file": example("review-loop.yaml"), "wait_seconds": 40}),
    )
    .await;
    assert_eq!(r["status"], "completed", "{r}");
    assert_eq!(r["workflow"], "@review-loop:main");
    let doc = r["document"]["content"].as_str().unwrap();
    for part in [
        "## Draft 1",
        "## Review 1",
        "## Draft 2",
        "## Review 2",
        "approved",
    ] {
        assert!(doc.contains(part), "{part} missing from {doc}");
    }
    assert_eq!(agent_named(&r, "coder")["runs"], 2, "{r}");
    assert_eq!(agent_named(&r, "reviewer")["runs"], 2, "{r}");
    assert_eq!(r["pending"], 0);
    let msgs = channel(&lead, "@review-loop:main").await;
    assert_eq!(
        from(&msgs, "reviewer").last().unwrap(),
        &"@user approved after two rounds; the result is in notes.md"
    );
    s.stop().await;
}

#[tokio::test]
async fn the_debate_example_ends_in_a_vote() {
    let dir = tempfile::tempdir().unwrap();
    let s = HttpServer::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    let r = run(
        &lead,
        json!({"file": example("debate-vote.yaml"), "params": {"topic": "adopt Rust"},
               "wait_seconds": 40}),
    )
    .await;
    assert_eq!(r["status"], "completed", "{r}");
    let doc = r["document"]["content"].as_str().unwrap();
    assert!(
        doc.contains("## Decision") && doc.contains("yes wins"),
        "{doc}"
    );
    let p = call(
        &lead,
        "team_proposal_status",
        json!({"workflow": "@debate-vote:main"}),
    )
    .await
    .ok();
    let prop = &p["proposals"][0];
    assert_eq!(prop["status"], "resolved", "{p}");
    assert_eq!(
        prop["title"], "adopt Rust?",
        "params reach the mock script: {p}"
    );
    assert_eq!(prop["votes"].as_array().unwrap().len(), 3, "{p}");
    let msgs = channel(&lead, "@debate-vote:main").await;
    assert!(
        from(&msgs, "moderator")
            .iter()
            .any(|m| m.starts_with("@user the vote is in:")),
        "{msgs:?}"
    );
    // The system prompt was interpolated with the param.
    let a = call(
        &lead,
        "agent_info",
        json!({"target": "optimist@debate-vote"}),
    )
    .await
    .ok();
    assert_eq!(a["agent"]["system"], "You argue for: adopt Rust.");
    s.stop().await;
}

#[tokio::test]
async fn the_scheduled_digest_example_is_scheduled_not_completed_after_its_scheduled_run() {
    let dir = tempfile::tempdir().unwrap();
    let s = HttpServer::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    let r = run(&lead, json!({"file": example("scheduled-digest.yaml")})).await;
    assert_eq!(
        r["status"], "running",
        "wait_seconds 0 returns at once: {r}"
    );
    let r = finished(&lead, "@scheduled-digest:main").await;
    // Idle, but its schedule will run the editor again: not `completed`, and it says so.
    assert_eq!(r["status"], "scheduled", "{r}");
    let reason = r["reason"].as_str().unwrap();
    assert!(
        reason.contains("editor at") && reason.contains("workflow_stop"),
        "{reason}"
    );
    let editor = agent_named(&r, "editor");
    assert!(
        editor["next_wake"].is_string(),
        "the schedule stays armed: {r}"
    );
    // Later fires keep it `scheduled`: it never claims to be done while spending.
    let first_runs = editor["runs"].as_i64().unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let st = call(
            &lead,
            "workflow_status",
            json!({"workflow": "@scheduled-digest:main"}),
        )
        .await
        .ok();
        if agent_named(&st, "editor")["runs"].as_i64().unwrap() > first_runs {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "no later fire: {st}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let again = finished(&lead, "@scheduled-digest:main").await;
    assert_eq!(again["status"], "scheduled", "{again}");
    assert!(editor["runs"].as_i64().unwrap() >= 1);
    let doc = r["document"]["content"].as_str().unwrap();
    assert!(doc.contains("## Digest"), "{doc}");
    let msgs = channel(&lead, "@scheduled-digest:main").await;
    assert_eq!(from(&msgs, "editor"), ["@user the digest is in notes.md"]);
    assert_eq!(from(&msgs, "scout_web").len(), 1);
    assert_eq!(from(&msgs, "scout_repo").len(), 1);
    // workflow_stop disarms it; the channel and document stay.
    let st = call(
        &lead,
        "workflow_stop",
        json!({"workflow": "@scheduled-digest:main"}),
    )
    .await
    .ok();
    assert_eq!(st["workflow"], "@scheduled-digest:main");
    let after = call(
        &lead,
        "workflow_status",
        json!({"workflow": "@scheduled-digest:main"}),
    )
    .await
    .ok();
    assert_eq!(after["status"], "stopped");
    assert!(
        after["document"]["content"]
            .as_str()
            .unwrap()
            .contains("## Digest")
    );
    let runs = agent_named(&after, "editor")["runs"].as_i64().unwrap();
    // Past the fire it had armed (its row keeps the time), and a second more.
    let due = agent_named(&after, "editor")["next_wake"]
        .as_str()
        .map(|t| humantime::parse_rfc3339(t).unwrap())
        .unwrap_or_else(std::time::SystemTime::now);
    let until = due + Duration::from_secs(1);
    if let Ok(left) = until.duration_since(std::time::SystemTime::now()) {
        tokio::time::sleep(left).await;
    }
    let later = call(
        &lead,
        "workflow_status",
        json!({"workflow": "@scheduled-digest:main"}),
    )
    .await
    .ok();
    assert_eq!(
        agent_named(&later, "editor")["runs"].as_i64().unwrap(),
        runs,
        "no fire after stop"
    );
    let list = call(&lead, "workflow_list", json!({})).await.ok();
    assert!(
        list["workflows"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w["workflow"] == "@scheduled-digest:main" && w["status"] == "stopped"),
        "{list}"
    );
    s.stop().await;
}

const PAIR: &str = r#"
name: pair
params:
  - { name: who, required: true }
agents:
  a:
    backend: mock
    mock:
      - when: "start"
        send: "@b hello from ${{ params.who }}"
  b:
    backend: mock
    mock:
      - when: "hello"
        send: "@user b heard: {message}"
kickoff: "@a start (${{ params.who }}, ${{ workflow.tag }})"
"#;

#[tokio::test]
async fn instances_with_different_tags_run_side_by_side() {
    let dir = tempfile::tempdir().unwrap();
    let s = HttpServer::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    let (one, two) = tokio::join!(
        run(
            &lead,
            json!({"yaml": PAIR, "tag": "one", "params": {"who": "ann"}, "wait_seconds": 30})
        ),
        run(
            &lead,
            json!({"yaml": PAIR, "tag": "two", "params": {"who": "ben"}, "wait_seconds": 30})
        ),
    );
    assert_eq!(one["status"], "completed", "{one}");
    assert_eq!(two["status"], "completed", "{two}");
    let m1 = channel(&lead, "@pair:one").await;
    let m2 = channel(&lead, "@pair:two").await;
    assert_eq!(from(&m1, "user"), ["@a start (ann, one)"]);
    assert_eq!(from(&m2, "user"), ["@a start (ben, two)"]);
    assert_eq!(from(&m1, "b"), ["@user b heard: b hello from ann"]);
    assert_eq!(from(&m2, "b"), ["@user b heard: b hello from ben"]);
    // The same instance cannot run twice at once, but runs again once finished.
    let again = run(
        &lead,
        json!({"yaml": PAIR, "tag": "one", "params": {"who": "cy"}, "wait_seconds": 30}),
    )
    .await;
    assert_eq!(again["status"], "completed", "{again}");
    assert_eq!(
        from(&channel(&lead, "@pair:one").await, "b").len(),
        2,
        "a second run of the same instance"
    );
    let missing = call(&lead, "workflow_run", json!({"yaml": PAIR}))
        .await
        .err();
    assert!(missing.contains("who"), "{missing}");
    s.stop().await;
}

#[tokio::test]
async fn yaml_mistakes_are_reported_with_their_position_and_start_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let s = HttpServer::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    let cases = [
        (
            "name: x
agents:
  a:
    backend: mokc
",
            "<inline>:4:14",
            "mokc",
        ),
        (
            "name: x
agents:
  a: { backend: mock }
kickof: hi
",
            "<inline>:4:1",
            "kickoff",
        ),
        (
            "name: x
agents:
  a:
    backend: mock
    wakeup: often
",
            "<inline>:5:13",
            "wakeup",
        ),
        (
            "name: x
agents:
  a: { backend: mock }
kickoff: |
  hi
  ${{ nope }}
",
            "<inline>:6:3",
            "nope",
        ),
        (
            "name: x
agents:
	a: { backend: mock }
",
            "<inline>:3:1",
            "tab",
        ),
    ];
    for (yaml, at, word) in cases {
        let e = call(&lead, "workflow_run", json!({"yaml": yaml}))
            .await
            .err();
        assert!(e.starts_with(at), "{yaml:?}: expected {at}, got {e}");
        assert!(e.to_lowercase().contains(word), "{yaml:?}: {e}");
    }
    // A file names itself in the error.
    let f = dir.path().join("bad.yaml");
    std::fs::write(
        &f,
        "agents:
  a:
    backend: mock
    colour: blue
",
    )
    .unwrap();
    let e = call(
        &lead,
        "workflow_run",
        json!({"file": f.display().to_string()}),
    )
    .await
    .err();
    assert!(e.starts_with(&format!("{}:4:5", f.display())), "{e}");
    // A failing setup step is named, and nothing was registered.
    let e = call(
        &lead,
        "workflow_run",
        json!({"yaml": "name: setupfail
agents:
  a: { backend: mock }
setup:
  - shell: echo ok
  - shell: 'echo boom >&2; exit 3'
    as: second
"}),
    )
    .await
    .err();
    assert!(e.contains("setup step 2") && e.contains("boom"), "{e}");
    let list = call(&lead, "workflow_list", json!({})).await.ok();
    assert!(
        !list.to_string().contains("setupfail") && !list.to_string().contains("@x:"),
        "{list}"
    );
    let e = call(&lead, "workflow_run", json!({})).await.err();
    assert!(e.contains("file") && e.contains("yaml"), "{e}");
    s.stop().await;
}

#[tokio::test]
async fn a_tripped_guard_blocks_the_workflow_and_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let s = HttpServer::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    let yaml = r#"
name: loop
budget: { max_hops: 4 }
agents:
  a:
    backend: mock
    mock: [ { send: "@b again" } ]
  b:
    backend: mock
    mock: [ { send: "@a again" } ]
kickoff: "@a go"
"#;
    let r = run(&lead, json!({"yaml": yaml, "wait_seconds": 30})).await;
    assert_eq!(r["status"], "blocked", "{r}");
    assert!(r["reason"].as_str().unwrap().contains("max_hops 4"), "{r}");
    let paused: Vec<&Value> = r["agents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["state"] == "paused")
        .collect();
    assert_eq!(paused.len(), 1, "{r}");
    assert_eq!(paused[0]["pending"], 1);
    s.stop().await;
}

#[tokio::test]
async fn a_failing_agent_fails_the_workflow_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let s = HttpServer::start_with_env(dir.path(), &[SHORT_RETRIES]).await;
    let lead = s.lead(Proto::Legacy).await;
    let yaml = r#"
name: broken
agents:
  a:
    backend: mock
    mock: [ { fail: "disk full" } ]
kickoff: "@a go"
"#;
    let r = run(&lead, json!({"yaml": yaml, "wait_seconds": 30})).await;
    assert_eq!(r["status"], "failed", "{r}");
    assert!(r["reason"].as_str().unwrap().contains("disk full"), "{r}");
    assert_eq!(agent_named(&r, "a")["runs"], 4, "{r}");
    s.stop().await;
}

const STEPS: &str = r#"
name: steps
agents:
  a:
    backend: mock
    mock:
      - when: "begin"
        sleep: 300ms
      - when: "begin"
        send: "@b step 1"
      - when: "step 2"
        send: "@user finished"
  b:
    backend: mock
    mock:
      - when: "step 1"
        sleep: 3s
      - when: "step 1"
        send: "@a step 2"
kickoff: "@a begin"
"#;

#[tokio::test]
async fn a_kernel_killed_mid_workflow_finishes_it_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let s = HttpServer::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    run(&lead, json!({"yaml": STEPS})).await;
    // Wait until b is in the middle of its (slow) run, its prompt read, then kill -9
    // the kernel.
    wait_info(&lead, "b@steps", 10, |i| {
        i.get("running").is_some() && i["inbox"]["seen"] == 1
    })
    .await;
    s.kill().await;

    let s = HttpServer::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    let r = finished(&lead, "@steps:main").await;
    assert_eq!(r["status"], "completed", "{r}");
    let msgs = channel(&lead, "@steps:main").await;
    let texts: Vec<(&str, &str)> = msgs
        .iter()
        .map(|m| (m["from"].as_str().unwrap(), m["content"].as_str().unwrap()))
        .collect();
    assert_eq!(
        texts,
        [
            ("user", "@a begin"),
            ("a", "@b step 1"),
            ("b", "@a step 2"),
            ("a", "@user finished"),
        ],
        "every message exactly once"
    );
    let b = call(&lead, "agent_info", json!({"target": "b@steps"}))
        .await
        .ok();
    let statuses: Vec<&str> = b["runs"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .map(|r| r["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses, ["lost", "succeeded"], "{b}");
    // Every delivery was acked once: nothing pending, nothing read twice.
    for t in ["a@steps", "b@steps"] {
        let i = call(&lead, "agent_info", json!({"target": t})).await.ok();
        assert_eq!(i["inbox"]["pending"], 0, "{i}");
        assert_eq!(i["inbox"]["seen"], 0, "{i}");
    }
    let a = call(&lead, "agent_info", json!({"target": "a@steps"}))
        .await
        .ok();
    assert_eq!(a["inbox"]["acked"], 2);
    assert_eq!(b["inbox"]["acked"], 1);
    s.stop().await;
}

/// A CLI agent of a workflow file works in the file's folder, and its `timeout` is an
/// idle limit: a CLI that keeps printing events outlives it (its events are signs of
/// life even though the worker reports none of them), one that goes quiet is stopped
/// and the run recorded as a timeout. A stand-in `gemini` plays both.
#[tokio::test]
async fn cli_agents_work_in_the_workflow_folder_and_time_out_only_when_quiet() {
    let dir = tempfile::tempdir().unwrap();
    let proj = tempfile::tempdir().unwrap();
    let bin = tempfile::tempdir().unwrap();
    let marks = tempfile::tempdir().unwrap();
    let gemini = bin.path().join("gemini");
    std::fs::write(
        &gemini,
        r#"#!/bin/sh
pwd > "$MARKS/$AGENT"
echo '{"type":"init","session_id":"s"}'
if [ "$AGENT" = busy ]; then
  for i in 1 2 3 4 5 6 7 8 9 10; do
    echo '{"type":"message","role":"assistant","content":"x","delta":true}'
    sleep 0.3
  done
  echo '{"type":"result","status":"success","stats":{"input_tokens":1,"output_tokens":1}}'
else
  sleep 30
fi
"#,
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&gemini, std::fs::Permissions::from_mode(0o755)).unwrap();
    let env = |agent: &str| {
        format!(
            "{{PATH: \"{}:/usr/bin:/bin\", MARKS: \"{}\", AGENT: {agent}}}\n    \
             permissions: {{profile: edit, allow: [\"edit:{}\"]}}",
            bin.path().display(),
            marks.path().display(),
            marks.path().display()
        )
    };
    let file = proj.path().join("team.yaml");
    std::fs::write(
        &file,
        format!(
            "name: quiet\nagents:\n  busy:\n    backend: gemini\n    timeout: 1s\n    env: {}\n  \
             stuck:\n    backend: gemini\n    timeout: 1s\n    env: {}\nkickoff: \"@busy @stuck go\"\n",
            env("busy"),
            env("stuck")
        ),
    )
    .unwrap();
    let s = HttpServer::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    run(
        &lead,
        json!({"file": file.display().to_string(), "wait_seconds": 0}),
    )
    .await;
    let busy = wait_info(&lead, "busy@quiet", 30, |i| {
        i["runs"][0]["status"]
            .as_str()
            .is_some_and(|s| s != "running")
    })
    .await;
    assert_eq!(busy["runs"][0]["status"], "succeeded", "{busy}");
    assert!(
        busy["runs"][0]["duration_ms"].as_u64().unwrap() >= 3000,
        "{busy}"
    );
    let stuck = wait_info(&lead, "stuck@quiet", 30, |i| {
        i["runs"][0]["status"]
            .as_str()
            .is_some_and(|s| s != "running")
    })
    .await;
    assert_eq!(stuck["runs"][0]["status"], "failed", "{stuck}");
    assert_eq!(stuck["runs"][0]["error_class"], "timeout", "{stuck}");
    for agent in ["busy", "stuck"] {
        let cwd = std::fs::read_to_string(marks.path().join(agent)).unwrap();
        assert_eq!(
            std::fs::canonicalize(cwd.trim()).unwrap(),
            std::fs::canonicalize(proj.path()).unwrap(),
            "{agent} did not run in the workflow's folder"
        );
    }
    call(&lead, "workflow_stop", json!({"workflow": "@quiet"}))
        .await
        .ok();
    s.stop().await;
}

/// The coding team example: each agent with the least permission it needs, shown
/// by agent_info, and the hand-over from coder to tester to reviewer to the lead.
#[tokio::test]
async fn the_coding_team_example_runs_with_its_permissions() {
    let dir = tempfile::tempdir().unwrap();
    let s = HttpServer::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    run(
        &lead,
        json!({"file": example("coding-team.yaml"), "wait_seconds": 30}),
    )
    .await;
    let r = finished(&lead, "@coding-team:main").await;
    assert_eq!(r["status"], "completed", "{r}");
    let msgs = channel(&lead, "@coding-team:main").await;
    assert_eq!(
        from(&msgs, "reviewer"),
        [
            "@user the retry change is implemented, tested and approved (see notes.md); merge it \
             with branch_merge {agent: \"coder@coding-team:main\"}"
        ]
    );
    // The coder wrote in a worktree of its own; its run is a commit on its branch,
    // which the lead reads and merges into the demo repository's main.
    let coder = info(&lead, "coder@coding-team").await;
    assert_eq!(coder["worktree"]["commits"], 1, "{coder}");
    let project = std::path::PathBuf::from(coder["agent"]["cwd"].as_str().unwrap());
    let d = call(&lead, "branch_diff", json!({"agent": "coder@coding-team"}))
        .await
        .ok();
    assert_eq!(d["files"][0]["path"], "retry.rs", "{d}");
    assert!(
        d["patch"]
            .as_str()
            .unwrap()
            .contains("+    1 << attempt.min(2)"),
        "{d}"
    );
    let before = std::fs::read_to_string(project.join("retry.rs")).unwrap();
    assert!(
        before.contains("    0\n"),
        "the project is as it was: {before}"
    );
    let m = call(&lead, "branch_merge", json!({"agent": "coder@coding-team"}))
        .await
        .ok();
    assert_eq!(m["how"], "fast-forward", "{m}");
    let after = std::fs::read_to_string(project.join("retry.rs")).unwrap();
    assert!(after.contains("1 << attempt.min(2)"), "{after}");
    std::fs::remove_dir_all(&project).unwrap();
    // `${{ project }}` was filled in before any folder was made, never taken as a name.
    let literal = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("${{ project }}");
    assert!(
        !literal.exists(),
        "a folder named after the unfilled cwd was made"
    );
    for (name, means) in [
        ("coder", "may read, create and edit files in its folder"),
        (
            "tester",
            "may read and search files in its folder, and also shell:cargo test*",
        ),
        ("reviewer", "may read and search files in its folder"),
    ] {
        let info = call(
            &lead,
            "agent_info",
            json!({"target": format!("{name}@coding-team")}),
        )
        .await
        .ok();
        assert_eq!(info["agent"]["permissions"]["means"], means, "{info}");
    }
    s.stop().await;
}

/// Seed 004's example YAML runs as written with mock agents: no backend (and
/// `backend: default`) take the kernel's default backend, `schedule: 30s` arms the
/// reviewer's poll (which keeps nothing from being done: see polls.rs), the
/// original's context form and a setup step work, and YAML agents carry their
/// permissions. A default backend that is no backend is refused by name.
#[tokio::test]
async fn the_seed_example_runs_with_the_default_backend() {
    let dir = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    std::fs::create_dir(work.path().join("prompts")).unwrap();
    std::fs::write(work.path().join("prompts/reviewer.md"), "You review.").unwrap();
    std::fs::write(work.path().join("prompts/coder.md"), "You code.").unwrap();
    let yaml = r#"name: code-review

agents:
  reviewer:
    model: anthropic/claude-sonnet-4-5
    system_prompt: prompts/reviewer.md
    schedule: 30s              # polling interval
    backend: default           # sdk | claude | codex | cursor | mock
    permissions: read

  coder:
    model: anthropic/claude-sonnet-4-5
    system_prompt: prompts/coder.md
    permissions: { profile: edit, allow: ["shell:npm test*"] }

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
    let file = work.path().join("code-review.yaml");
    std::fs::write(&file, yaml).unwrap();
    let s =
        HttpServer::start_with_env(dir.path(), &[("AGENT_WORKER_DEFAULT_BACKEND", "mock")]).await;
    let lead = s.lead(Proto::Legacy).await;
    run(&lead, json!({"file": file.display().to_string()})).await;
    let r = finished(&lead, "@code-review:main").await;
    // The reviewer's schedule only polls, and nothing waits for it: done.
    assert_eq!(r["status"], "completed", "{r}");
    for name in ["reviewer", "coder"] {
        let info = call(
            &lead,
            "agent_info",
            json!({"target": format!("{name}@code-review")}),
        )
        .await
        .ok();
        assert_eq!(info["agent"]["backend"], "mock", "{info}");
        if name == "reviewer" {
            assert_eq!(info["agent"]["permissions"]["profile"], "read", "{info}");
            assert!(info["schedule"].to_string().contains("30"), "{info}");
            assert!(
                info["runs"].as_array().is_some_and(|r| !r.is_empty()),
                "{info}"
            );
        } else {
            assert_eq!(
                info["agent"]["permissions"]["allow"],
                json!(["shell:npm test*"]),
                "{info}"
            );
        }
    }
    let msgs = channel(&lead, "@code-review:main").await;
    assert!(
        msgs.iter().any(|m| m["content"]
            .as_str()
            .unwrap_or("")
            .contains("+ fix the retry loop")),
        "the setup step's output reached the kickoff: {msgs:?}"
    );
    assert!(!from(&msgs, "reviewer").is_empty(), "{msgs:?}");
    call(
        &lead,
        "workflow_stop",
        json!({"workflow": "@code-review:main"}),
    )
    .await
    .ok();
    s.stop().await;

    let dir = tempfile::tempdir().unwrap();
    let s =
        HttpServer::start_with_env(dir.path(), &[("AGENT_WORKER_DEFAULT_BACKEND", "gpt")]).await;
    let lead = s.lead(Proto::Legacy).await;
    let e = call(
        &lead,
        "workflow_run",
        json!({"file": file.display().to_string(), "tag": "again"}),
    )
    .await
    .err();
    assert!(
        e.contains("AGENT_WORKER_DEFAULT_BACKEND") && e.contains("gpt") && e.contains(":8:"),
        "{e}"
    );
    s.stop().await;
}

/// A YAML agent is held to agent_new's rules: what agent_new refuses, workflow_run
/// refuses too, naming the agent, and starts nothing.
#[tokio::test]
async fn yaml_agents_meet_agent_new_rules() {
    let dir = tempfile::tempdir().unwrap();
    let s = HttpServer::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    let long = "x".repeat(70 * 1024);
    for (yaml, says) in [
        (
            "name: r1\nagents:\n  a:\n    backend: sdk\n    mock: [ { when: hi, send: hello } ]\nkickoff: \"@a go\"\n".to_owned(),
            "mock rules are for the mock backend",
        ),
        (
            format!("name: r2\nagents:\n  a:\n    backend: mock\n    system_prompt: \"{long}\"\nkickoff: \"@a go\"\n"),
            "system prompt is",
        ),
    ] {
        let e = call(&lead, "workflow_run", json!({"yaml": yaml})).await.err();
        assert!(e.contains("agents.a") && e.contains(says), "{e}");
    }
    let listed = call(&lead, "workflow_list", json!({})).await.ok();
    assert!(
        !listed.to_string().contains("@r1:") && !listed.to_string().contains("@r2:"),
        "{listed}"
    );
    s.stop().await;
}
