//! Reaching an agent in the middle of its run: a message to a running sdk agent is
//! in its next model request; a backend that reads its inbox only at the start (the
//! mock) gets it in the run that follows, as before; `urgent` stops the run and
//! the next one starts with the message.

use crate::common;
use common::fake_llm::{FakeLlm, Script};
use common::*;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Four slow commands, one per model call, then the answer: five model calls.
fn slow_steps(secs: u32) -> Script {
    let cmd = json!({"command": format!("sleep {secs}")});
    let steps: Vec<(&str, Value)> = (0..4).map(|_| ("run_command", cmd.clone())).collect();
    Script::steps(&steps, "done")
}

/// Waits until the fake model has been called `n` times.
async fn model_calls(llm: &FakeLlm, n: usize, secs: u64) -> Vec<Value> {
    let end = Instant::now() + Duration::from_secs(secs);
    loop {
        let calls = llm.model_calls();
        if calls.len() >= n {
            return calls;
        }
        assert!(
            Instant::now() < end,
            "{} model calls in {secs} s",
            calls.len()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn send(lead: &Client, to: &str, message: &str) -> Out {
    call(lead, "channel_send", json!({"to": to, "message": message})).await
}

fn runs(i: &Value) -> usize {
    i["runs"].as_array().map_or(0, Vec::len)
}

#[tokio::test]
async fn a_message_sent_during_the_second_model_call_is_in_the_third_request() {
    let llm = FakeLlm::start(slow_steps(1)).await;
    let dir = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let s = InProcess::start(dir.path()).await;
    let lead = s.lead(Proto::Modern).await;
    new_sdk_in(&lead, "coder", work.path(), &llm.url, json!("full")).await;
    send(&lead, "coder", "build the parser").await.ok();
    let t = Instant::now();
    model_calls(&llm, 2, 30).await;
    send(&lead, "coder", "stop: use the other grammar")
        .await
        .ok();
    let sent = t.elapsed();
    let calls = model_calls(&llm, 3, 30).await;
    println!(
        "sent {sent:?} after the start; in request 3 at {:?}",
        t.elapsed()
    );
    let body = |i: usize| calls[i]["body"]["messages"].to_string();
    assert!(!body(1).contains("other grammar"), "too early: {}", body(1));
    let third = body(2);
    assert!(third.contains("stop: use the other grammar"), "{third}");
    assert!(
        third.contains("from @user (DM, ") && third.contains("new in your inbox while you worked"),
        "says who sent it and how: {third}"
    );
    let i = wait_info(&lead, "coder", 30, |i| {
        i.get("running").is_none() && runs(i) >= 1
    })
    .await;
    assert_eq!(llm.model_calls().len(), 5, "the run went on to its end");
    // The inbox stays the record: the run read it, its success acked it, and no
    // run follows for a message already handled.
    assert_eq!(i["inbox"]["pending"], 0, "{i}");
    assert_eq!(i["inbox"]["acked"], 2, "{i}");
    assert_eq!(runs(&i), 1, "{i}");
    s.stop().await;
}

/// The baseline, a backend with nothing mid-run (the mock reads its inbox once, at
/// the start): a message sent during the run is read by the run that follows.
#[tokio::test]
async fn without_mid_run_delivery_the_message_waits_for_the_next_run() {
    let dir = tempfile::tempdir().unwrap();
    let s = InProcess::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    let rules = json!([{"when": "build", "sleep": "2s", "send": "built"},
                       {"send": "read: {message}"}]);
    new_mock(&lead, "slow", rules).await;
    send(&lead, "slow", "build the parser").await.ok();
    // Sent once the run has read its inbox (and sleeps).
    wait_info(&lead, "slow", 10, |i| i["inbox"]["seen"] == 1).await;
    send(&lead, "slow", "use the other grammar").await.ok();
    let i = wait_info(&lead, "slow", 30, |i| {
        i.get("running").is_none() && runs(i) == 2
    })
    .await;
    assert_eq!(i["inbox"]["pending"], 0, "{i}");
    let read = call(&lead, "channel_read", json!({"limit": 10})).await.ok();
    let said = contents(&read);
    let built = said.iter().position(|m| m == "built").expect("first run");
    let later = said
        .iter()
        .position(|m| m == "read: use the other grammar")
        .expect("second run");
    assert!(built < later, "{said:?}");
}

/// `urgent` stops a long command at once, and the next run continues the same
/// conversation (the stopped call answered in it) starting with the message.
#[tokio::test]
async fn an_urgent_message_stops_the_turn_and_starts_the_next_request() {
    let cmd = json!({"command": "sleep 60"});
    let llm = FakeLlm::start(Script::steps(&[("run_command", cmd)], "done")).await;
    let dir = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let s = InProcess::start(dir.path()).await;
    let lead = s.lead(Proto::Modern).await;
    new_sdk_in(&lead, "coder", work.path(), &llm.url, json!("full")).await;
    new_mock(&lead, "peer", json!([])).await;
    // Only the lead, and only to one agent.
    let peer = join(&s, &lead, "peer", Proto::Modern).await;
    let e = call(
        &peer,
        "channel_send",
        json!({"to": "coder", "message": "x", "urgent": true}),
    )
    .await
    .err();
    assert!(e.contains("only the lead may stop"), "{e}");
    let e = call(
        &lead,
        "channel_send",
        json!({"message": "@coder x", "urgent": true}),
    )
    .await
    .err();
    assert!(e.contains("urgent needs `to`"), "{e}");

    send(&lead, "coder", "build the parser").await.ok();
    model_calls(&llm, 1, 30).await;
    wait_info(&lead, "coder", 10, |i| i.get("running").is_some()).await;
    let t = Instant::now();
    call(
        &lead,
        "channel_send",
        json!({"to": "coder", "message": "wrong branch: stop and use main", "urgent": true}),
    )
    .await
    .ok();
    let calls = model_calls(&llm, 2, 20).await;
    let took = t.elapsed();
    println!("urgent message to the next model request: {took:?}");
    assert!(took < Duration::from_secs(15), "took {took:?}");
    let msgs = calls[1]["body"]["messages"].as_array().unwrap().clone();
    let opening = msgs.last().unwrap()["content"].as_str().unwrap();
    assert!(
        opening.starts_with("## Urgent: this stopped your last turn")
            && opening.contains("from @user [DM] [URGENT]: wrong branch: stop and use main"),
        "{opening}"
    );
    let kept = serde_json::to_string(&msgs).unwrap();
    assert!(
        kept.contains("build the parser"),
        "the conversation goes on: {kept}"
    );
    assert!(kept.contains("stopped before it finished"), "{kept}");
    let i = wait_info(&lead, "coder", 20, |i| {
        i.get("running").is_none() && runs(i) == 2
    })
    .await;
    let status: Vec<&str> = i["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["status"].as_str().unwrap())
        .collect();
    assert_eq!(status, ["succeeded", "stopped"], "newest first: {i}");
    assert_eq!(i["inbox"]["pending"], 0, "{i}");
    s.stop().await;
}

/// A login profile in the agent's own home (`data`'s first agent) that prints
/// before anything the shell runs, as a user's profile may. Codex 0.169 sources
/// it for its shell snapshot and first command, not for its hooks; whatever it
/// prints must not cost the hook's answer.
fn talkative_profile(data: &Path) -> PathBuf {
    let home = data.join("homes/agent-1");
    std::fs::create_dir_all(&home).unwrap();
    let say = "echo ran >> \"$HOME/.profile-ran\"; echo hello; echo '{\"x\": 1}'\n";
    for f in [".profile", ".bash_profile", ".bashrc"] {
        std::fs::write(home.join(f), say).unwrap();
    }
    home.join(".profile-ran")
}

/// Claude Code, Gemini CLI and Codex: the run's hook after each tool call
/// (`PostToolUse`, `AfterTool`: this binary in hook mode) adds what arrived to the conversation
/// after the tool call under way, so a message sent during the second model call
/// is in the third request.
async fn cli_gets_a_message_after_its_next_tool_call(backend: &str) {
    use common::clis::{cli_bin, cli_env, model_for};
    let Some(bin) = cli_bin() else { return };
    let (tool, cmd) = match backend {
        "claude" => ("Bash", json!({"command": "sleep 2"})),
        "gemini" => (
            "run_shell_command",
            json!({"command": "sleep 2", "description": "wait"}),
        ),
        "codex" => ("exec_command", json!({"cmd": "sleep 2"})),
        _ => unreachable!(),
    };
    let steps: Vec<(&str, Value)> = (0..4).map(|_| (tool, cmd.clone())).collect();
    let llm = FakeLlm::start(Script::steps(&steps, "done")).await;
    let (dir, home) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let work = tempfile::tempdir().unwrap();
    // The user's own project settings: a run leaves them byte for byte.
    let project = work.path().join(".gemini/settings.json");
    let theirs = "{\n  \"ui\": {\"theme\": \"Default\"}\n}\n";
    std::fs::create_dir_all(project.parent().unwrap()).unwrap();
    std::fs::write(&project, theirs).unwrap();
    let s = HttpServer::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    // Under the run's OS sandbox (edit: required), as sandbox.rs runs these CLIs,
    // with a home of the agent's own: the hook is a process of the sandboxed CLI.
    // Codex allows no shell below full; under edit its commands run anyway.
    let permissions = match backend {
        "codex" => json!("edit"),
        _ => json!({"profile": "edit", "allow": ["shell"]}),
    };
    let args = json!({"name": "coder", "backend": backend, "model": model_for(backend),
        "env": cli_env(backend, &bin, home.path(), &llm.url), "permissions": permissions,
        "cwd": work.path().display().to_string()});
    let profile_ran = talkative_profile(dir.path());
    call(&lead, "agent_new", args).await.ok();
    send(&lead, "coder", "build the parser").await.ok();
    let t = Instant::now();
    model_calls(&llm, 2, 60).await;
    send(&lead, "coder", "stop: use the other grammar")
        .await
        .ok();
    let sent = t.elapsed();
    let calls = model_calls(&llm, 3, 60).await;
    // Sent as the second `sleep 2` starts: past 2 s is the CLI's own delay.
    println!(
        "{backend}: sent at {sent:?}; in request 3 {:?} later",
        t.elapsed() - sent
    );
    let body = |i: usize| calls[i]["body"].to_string();
    assert!(!body(1).contains("other grammar"), "too early: {}", body(1));
    let third = body(2);
    assert!(
        third.contains("stop: use the other grammar"),
        "{backend}: {third}"
    );
    assert!(third.contains("from @user (DM, "), "{backend}: {third}");
    let i = wait_info(&lead, "coder", 60, |i| {
        i.get("running").is_none() && runs(i) >= 1
    })
    .await;
    assert_eq!(i["runs"][0]["status"], "succeeded", "{backend}: {i}");
    assert_eq!(i["inbox"]["pending"], 0, "{backend}: {i}");
    assert_eq!(i["inbox"]["acked"], 2, "{backend}: {i}");
    if backend == "codex" {
        assert!(profile_ran.exists(), "the agent's login profile never ran");
    }
    // The hook went to the agent's own home: not the project, not the user's home.
    assert_eq!(std::fs::read_to_string(&project).unwrap(), theirs);
    let user = std::fs::read_to_string(home.path().join(".gemini/settings.json")).unwrap();
    assert!(!user.contains("__hook"), "{user}");
    assert!(!home.path().join(".gemini/trusted_hooks.json").exists());
    s.stop().await;
}

#[tokio::test]
#[cfg_attr(
    not(heavy),
    ignore = "heavy: the worker CLIs from npm (AGENT_WORKER_HEAVY=1, scripts/interop-setup)"
)]
async fn claude_code_gets_a_message_after_its_next_tool_call() {
    cli_gets_a_message_after_its_next_tool_call("claude").await;
}

#[tokio::test]
#[cfg_attr(
    not(heavy),
    ignore = "heavy: the worker CLIs from npm (AGENT_WORKER_HEAVY=1, scripts/interop-setup)"
)]
async fn gemini_cli_gets_a_message_after_its_next_tool_call() {
    cli_gets_a_message_after_its_next_tool_call("gemini").await;
}

#[tokio::test]
#[cfg_attr(
    not(heavy),
    ignore = "heavy: the worker CLIs from npm (AGENT_WORKER_HEAVY=1, scripts/interop-setup)"
)]
async fn codex_gets_a_message_after_its_next_tool_call() {
    cli_gets_a_message_after_its_next_tool_call("codex").await;
}

/// A CLI with no way into its turn (OpenCode; Gemini CLI unsandboxed): a message sent while it runs a slow
/// command is named in the result of its next team tool call ("New for you"),
/// which its model reads in the next request; its run reads the message in full
/// after.
async fn cli_sees_news_in_its_next_team_tool_result(backend: &str) {
    use common::clis::{cli_bin, cli_env, model_for};
    let Some(bin) = cli_bin() else { return };
    let team = ("team_members", json!({}));
    // The steps, and the model calls made when the slow command has started.
    let (steps, started) = match backend {
        "opencode" => {
            let shell = json!({"command": "sleep 3", "description": "wait"});
            (vec![("bash", shell), team], 1)
        }
        "gemini" => {
            let shell = json!({"command": "sleep 3", "description": "wait"});
            (vec![("run_shell_command", shell), team], 1)
        }
        _ => unreachable!(),
    };
    // Gemini CLI with no home of its own (sandbox off) has no hook.
    let permissions = match backend {
        "gemini" => json!({"profile": "full", "sandbox": "off"}),
        _ => json!("full"),
    };
    let llm = FakeLlm::start(Script::steps(&steps, "done")).await;
    let (dir, home) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let work = tempfile::tempdir().unwrap();
    let s = HttpServer::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    let args = json!({"name": "coder", "backend": backend, "model": model_for(backend),
        "env": cli_env(backend, &bin, home.path(), &llm.url), "permissions": permissions,
        "cwd": work.path().display().to_string()});
    call(&lead, "agent_new", args).await.ok();
    send(&lead, "coder", "build the parser").await.ok();
    let before = model_calls(&llm, started, 60).await.len();
    send(&lead, "coder", "stop: use the other grammar")
        .await
        .ok();
    let i = wait_info(&lead, "coder", 60, |i| {
        i.get("running").is_none() && i["inbox"]["pending"] == 0 && runs(i) >= 2
    })
    .await;
    // Every model request after the send (a CLI makes side requests too).
    let after: String = llm.model_calls()[before..]
        .iter()
        .map(|c| c["body"].to_string())
        .collect();
    assert!(
        after.contains(r#"New for you: 1 unread (@user: \"stop: use the other grammar\"); my_inbox reads them."#),
        "{backend}: {after}"
    );
    assert_eq!(i["inbox"]["acked"], 2, "{backend}: {i}");
    s.stop().await;
}

#[tokio::test]
#[cfg_attr(
    not(heavy),
    ignore = "heavy: the worker CLIs from npm (AGENT_WORKER_HEAVY=1, scripts/interop-setup)"
)]
async fn opencode_reads_news_in_a_team_tool_result() {
    cli_sees_news_in_its_next_team_tool_result("opencode").await;
}

#[tokio::test]
#[cfg_attr(
    not(heavy),
    ignore = "heavy: the worker CLIs from npm (AGENT_WORKER_HEAVY=1, scripts/interop-setup)"
)]
async fn gemini_cli_without_a_sandbox_reads_news_in_a_team_tool_result() {
    cli_sees_news_in_its_next_team_tool_result("gemini").await;
}

/// `urgent` to Claude Code: its `Bash` call is stopped, and the next run resumes
/// the same session with the message first.
#[tokio::test]
#[cfg_attr(
    not(heavy),
    ignore = "heavy: the worker CLIs from npm (AGENT_WORKER_HEAVY=1, scripts/interop-setup)"
)]
async fn an_urgent_message_stops_claude_code_and_resumes_its_session() {
    use common::clis::{cli_bin, cli_env};
    let Some(bin) = cli_bin() else { return };
    let cmd = json!({"command": "sleep 60"});
    let llm = FakeLlm::start(Script::steps(&[("Bash", cmd)], "done")).await;
    let (dir, home) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let work = tempfile::tempdir().unwrap();
    let s = HttpServer::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    let args = json!({"name": "coder", "backend": "claude", "model": "claude-sonnet-4-5",
        "env": cli_env("claude", &bin, home.path(), &llm.url), "permissions": "full",
        "cwd": work.path().display().to_string()});
    call(&lead, "agent_new", args).await.ok();
    send(&lead, "coder", "build the parser").await.ok();
    model_calls(&llm, 1, 60).await;
    let t = Instant::now();
    let urgent = json!({"to": "coder", "message": "wrong branch: use main", "urgent": true});
    call(&lead, "channel_send", urgent).await.ok();
    let calls = model_calls(&llm, 2, 40).await;
    println!(
        "claude: urgent to the next model request in {:?}",
        t.elapsed()
    );
    let next = calls[1]["body"]["messages"].to_string();
    assert!(
        next.contains("build the parser"),
        "the session goes on: {next}"
    );
    assert!(
        next.contains(r"## Urgent: this stopped your last turn; act on it first\n- ")
            && next.contains("[URGENT]: wrong branch: use main"),
        "{next}"
    );
    // The first run was stopped; the second goes on (the fake model, seeing no
    // result for the cut call, makes it again: the kernel's stop ends it).
    let i = info(&lead, "coder").await;
    assert_eq!(runs(&i), 2, "{i}");
    assert_eq!(i["runs"][1]["status"], "stopped", "{i}");
    s.stop().await;
}

/// `urgent` to a coder in a worktree: what its stopped turn wrote is committed on
/// its branch, and its next run goes on from there.
#[tokio::test]
async fn an_urgent_stop_commits_the_coders_worktree() {
    use common::repo::{git, repository};
    let repo = repository();
    let write = json!({"path": "lib.rs", "content": "fn answer() -> u32 { 44 }\n"});
    let steps = [
        ("write_file", write),
        ("run_command", json!({"command": "sleep 60"})),
    ];
    let llm = FakeLlm::start(Script::steps(&steps, "done")).await;
    let dir = tempfile::tempdir().unwrap();
    let s = InProcess::start(dir.path()).await;
    let lead = s.lead(Proto::Modern).await;
    let args = json!({"name": "ada", "backend": "sdk", "model": "claude-sonnet-4-5",
        "env": {"ANTHROPIC_BASE_URL": llm.url, "ANTHROPIC_API_KEY": "sk-test"},
        "cwd": repo.path().display().to_string(), "workspace": "worktree", "permissions": "full"});
    call(&lead, "agent_new", args).await.ok();
    send(&lead, "ada", "make it 44").await.ok();
    model_calls(&llm, 2, 30).await;
    let urgent = json!({"to": "ada", "message": "stop: keep 41", "urgent": true});
    call(&lead, "channel_send", urgent).await.ok();
    let calls = model_calls(&llm, 3, 20).await;
    let last = calls[2]["body"]["messages"].to_string();
    assert!(last.contains("[URGENT]: stop: keep 41"), "{last}");
    let i = wait_info(&lead, "ada", 20, |i| {
        i.get("running").is_none() && runs(i) == 2
    })
    .await;
    assert_eq!(i["runs"][1]["status"], "stopped", "{i}");
    assert!(
        i["runs"][1]["commit"].is_string(),
        "the stop committed: {i}"
    );
    let on_branch = git(repo.path(), &["show", "aw/global-main/ada:lib.rs"]);
    assert!(on_branch.contains("44"), "{on_branch}");
    s.stop().await;
}

/// A member may send `urgent` only when a contract allows it: refused before the
/// contract, and once it is set the reviewer's message stops the coder's turn and
/// opens its next model request, as the lead's does.
#[tokio::test]
async fn a_contract_lets_a_member_send_urgent() {
    let cmd = json!({"command": "sleep 60"});
    let llm = FakeLlm::start(Script::steps(&[("run_command", cmd)], "done")).await;
    let dir = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let s = InProcess::start(dir.path()).await;
    let lead = s.lead(Proto::Modern).await;
    new_sdk_in(&lead, "coder", work.path(), &llm.url, json!("full")).await;
    new_mock(&lead, "reviewer", json!([])).await;
    let reviewer = join(&s, &lead, "reviewer", Proto::Modern).await;
    let stop = json!({"to": "coder", "message": "stop: the tests fail", "urgent": true});
    let e = call(&reviewer, "channel_send", stop.clone()).await.err();
    assert!(
        e.contains("or a member a contract allows") && e.contains("urgent: true"),
        "{e}"
    );
    let rule = json!({"name": "reviewer-stops", "when": {"event": "message",
        "from": "reviewer", "urgent": true}, "then": {"action": "allow"}});
    call(&lead, "contract_set", rule).await.ok();

    send(&lead, "coder", "build the parser").await.ok();
    model_calls(&llm, 1, 30).await;
    wait_info(&lead, "coder", 10, |i| i.get("running").is_some()).await;
    let t = Instant::now();
    call(&reviewer, "channel_send", stop).await.ok();
    let calls = model_calls(&llm, 2, 20).await;
    assert!(t.elapsed() < Duration::from_secs(15), "{:?}", t.elapsed());
    let msgs = calls[1]["body"]["messages"].as_array().unwrap();
    let opening = msgs.last().unwrap()["content"].as_str().unwrap();
    assert!(
        opening.starts_with("## Urgent: this stopped your last turn")
            && opening.contains("from @reviewer [DM] [URGENT]: stop: the tests fail"),
        "{opening}"
    );
    s.stop().await;
}
