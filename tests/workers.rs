//! Workers end to end: the kernel spawns a real worker subprocess per run, which
//! talks to the kernel over real MCP with its own run token. The mock backend makes
//! this deterministic: agent_ask replies, acks after success only, failures leave
//! the inbox pending, pause stops a run, delete stops the worker first, and the
//! run's token dies with the run.

use crate::common;
use agent_worker::process::proc_stat;
use common::*;
use serde_json::json;
use std::path::Path;
use std::time::Duration;

#[tokio::test]
async fn agent_ask_returns_the_reply_and_acks_after_success() {
    let dir = tempfile::tempdir().unwrap();
    let s = HttpServer::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    new_mock(
        &lead,
        "bob",
        json!([
            {"when": "capital", "send": "@user the capital is Paris (asked: {message})", "reply": "answered {from}"},
        ]),
    )
    .await;
    // A plain mock: no rules, it acknowledges its inbox without any @.
    call(
        &lead,
        "agent_new",
        json!({"name": "carol", "backend": "mock"}),
    )
    .await
    .ok();

    let r = ask(&lead, "bob", "What is the capital of @France?", 30).await;
    assert_eq!(r["status"], "succeeded", "{r}");
    assert_eq!(
        r["reply"]["messages"],
        json!(["@user the capital is Paris (asked: What is the capital of France?)"])
    );
    assert_eq!(r["reply"]["final_text"], "answered user");

    let i = info(&lead, "bob").await;
    assert_eq!(i["inbox"]["pending"], 0, "{i}");
    assert_eq!(i["inbox"]["seen"], 0, "{i}");
    assert_eq!(i["inbox"]["acked"], 1, "{i}");
    assert_eq!(i["runs"].as_array().unwrap().len(), 1);
    let run = &i["runs"][0];
    assert_eq!(run["status"], "succeeded");
    // The ask's own run, or the one the question's delivery woke first (a slower
    // store gives the scheduler that head start): either way one run answers.
    assert!(
        run["trigger"] == "ask" || run["trigger"] == "message",
        "{run}"
    );
    assert_eq!(run["id"], r["run_id"]);
    assert_eq!(i["usage"]["runs"], 1);
    // The run's token died with the run.
    assert_eq!(i["active_tokens"], 0, "{i}");
    assert_eq!(i["agent"]["state"], "idle");

    let r = ask(&lead, "carol", "hello @bob, see @carol", 30).await;
    assert_eq!(r["status"], "succeeded", "{r}");
    assert_eq!(r["reply"]["final_text"], "carol done");
    let ch = call(&lead, "channel_read", json!({"limit": 10})).await.ok();
    let last = ch["messages"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["from"], "carol");
    assert_eq!(
        last["content"],
        "[carol] Processed: user: hello bob, see carol"
    );
    // No @ in the acknowledgement, so nobody was woken by it.
    assert_eq!(last["mentions"], json!([]));
    s.stop().await;
}

#[tokio::test]
async fn a_failing_run_leaves_the_inbox_pending_and_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let s = HttpServer::start(dir.path()).await;
    let lead = s.lead(Proto::Modern).await;
    new_mock(
        &lead,
        "dave",
        json!([
            {"when": "quota", "fail": "Quota exceeded. Check your plan and billing details."},
            {"when": "boom", "fail": "simulated failure"},
            {"reply": "fine"},
        ]),
    )
    .await;
    let r = ask(&lead, "dave", "boom", 30).await;
    assert_eq!(r["status"], "failed", "{r}");
    assert_eq!(r["error_class"], "other");
    assert_eq!(r["error"], "simulated failure");
    assert_eq!(r["reply"]["messages"], json!([]));
    let i = info(&lead, "dave").await;
    assert_eq!(
        i["inbox"]["pending"], 1,
        "the failed run's message is pending: {i}"
    );
    assert_eq!(i["inbox"]["acked"], 0);
    assert_eq!(i["runs"][0]["status"], "failed");
    assert_eq!(i["usage"]["failed"], 1);

    // A classified failure: billing words make it billing_quota. (A new agent: dave's
    // next run would meet "boom" first again, as it is still pending.)
    new_mock(
        &lead,
        "erin",
        json!([
            {"when": "quota", "fail": "Quota exceeded. Check your plan and billing details."},
        ]),
    )
    .await;
    let r = ask(&lead, "erin", "quota", 30).await;
    assert_eq!(r["error_class"], "billing_quota", "{r}");
    let r = ask(&lead, "dave", "second", 30).await;
    assert_eq!(
        r["error"], "simulated failure",
        "the pending message is read again: {r}"
    );
    let i = info(&lead, "dave").await;
    assert_eq!(i["inbox"]["pending"], 2, "{i}");
    call(&lead, "agent_delete", json!({"target": "dave"}))
        .await
        .ok();
    s.stop().await;
}

#[tokio::test]
async fn pause_stops_a_running_worker_and_resume_lets_it_run_again() {
    let dir = tempfile::tempdir().unwrap();
    let s = HttpServer::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    new_mock(
        &lead,
        "slow",
        json!([
            {"when": "wait", "sleep": "60s"},
            {"reply": "woke"},
        ]),
    )
    .await;
    let r = ask(&lead, "slow", "please wait", 1).await;
    assert_eq!(r["status"], "running", "{r}");
    assert!(r.get("reply").is_none());
    let i = info(&lead, "slow").await;
    assert_eq!(i["running"], r["run_id"]);
    assert_eq!(i["agent"]["state"], "running");

    let p = call(&lead, "agent_pause", json!({"target": "slow"}))
        .await
        .ok();
    assert_eq!(p["agent"]["state"], "paused");
    let i = info(&lead, "slow").await;
    assert!(i.get("running").is_none(), "{i}");
    assert_eq!(i["runs"][0]["status"], "stopped");
    assert_eq!(i["runs"][0]["error_class"], "stopped");
    assert_eq!(i["inbox"]["pending"], 1, "a stopped run loses nothing: {i}");
    assert_eq!(i["active_tokens"], 0);

    let e = call(
        &lead,
        "agent_ask",
        json!({"target": "slow", "message": "hello"}),
    )
    .await
    .err();
    assert!(
        e.contains("paused") && e.contains("agent_pause {resume: true}"),
        "{e}"
    );

    resume(&lead, "slow").await;
    // The pending "please wait" sleeps again; delete stops it, leaving no run behind.
    // The run resume started may have begun before "hi" (then "hi" waits for the next
    // run) or after it (then this run has read it too).
    let r = ask(&lead, "slow", "hi", 1).await;
    assert!(r["status"] == "running" || r["status"] == "waiting", "{r}");
    assert_eq!(r["status"] == "waiting", r.get("run_id").is_none(), "{r}");
    let d = call(&lead, "agent_delete", json!({"target": "slow"}))
        .await
        .ok();
    assert_eq!(d["deleted"], "slow");
    assert!(
        workers_of(s.child.id().unwrap()).is_empty(),
        "delete left a worker running"
    );
    s.stop().await;
}

#[tokio::test]
async fn bad_input_is_refused_with_a_reason() {
    let dir = tempfile::tempdir().unwrap();
    let s = HttpServer::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    let cases = [
        (
            json!({"name": "m", "backend": "mock", "mock": [{"when": "("}]}),
            "not a valid regex",
        ),
        (
            json!({"name": "m", "backend": "mock", "mock": [{"when": "x"}]}),
            "does nothing",
        ),
        (
            json!({"name": "m", "backend": "mock", "mock": [{"sleep": "soon"}]}),
            "not a duration",
        ),
        (
            json!({"name": "m", "backend": "mock", "mock": [{"to": "bob", "reply": "x"}]}),
            "`to` needs `send`",
        ),
        (
            json!({"name": "m", "backend": "mock", "mock": [{"task": {"hold": "ever"}}]}),
            "mock rule 1: task.hold \"ever\" is not a duration",
        ),
        (
            json!({"name": "m", "backend": "mock", "mock": [{"task": {"status": "done"}}]}),
            "status",
        ),
        (
            json!({"name": "m", "backend": "claude", "mock": [{"reply": "x"}]}),
            "mock rules are for the mock backend",
        ),
        (
            json!({"name": "m", "backend": "mock", "max_steps": 0}),
            "max_steps",
        ),
        (
            json!({"name": "m", "backend": "sdk", "env": {"AW_RUN": "{}"}}),
            "reserved",
        ),
        (
            json!({"name": "m", "backend": "sdk", "env": {"AGENT_WORKER_TOKEN": "x"}}),
            "reserved",
        ),
    ];
    for (args, want) in cases {
        let e = call(&lead, "agent_new", args.clone()).await.err();
        assert!(e.contains(want), "{args}: {e}");
    }
    assert_eq!(
        call(&lead, "agent_list", json!({})).await.ok()["agents"],
        json!([])
    );
    call(&lead, "agent_new", json!({"name": "m", "backend": "mock"}))
        .await
        .ok();
    let e = call(
        &lead,
        "agent_ask",
        json!({"target": "m", "message": "hi", "wait_seconds": 51}),
    )
    .await
    .err();
    assert!(e.contains("at most 50"), "{e}");
    let e = call(
        &lead,
        "agent_ask",
        json!({"target": "nobody", "message": "hi"}),
    )
    .await
    .err();
    assert!(e.contains("no agent"), "{e}");
    // Nothing was posted for the refused asks.
    let ch = call(&lead, "channel_read", json!({})).await.ok();
    assert_eq!(ch["messages"], json!([]));
    s.stop().await;
}

#[tokio::test]
async fn a_run_of_a_missing_cli_is_a_clear_failure() {
    let dir = tempfile::tempdir().unwrap();
    let s = HttpServer::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    for backend in ["claude", "codex", "gemini", "opencode", "cursor"] {
        let name = format!("{backend}-agent");
        call(
            &lead,
            "agent_new",
            json!({"name": name, "backend": backend, "env": {"PATH": "/nonexistent"}}),
        )
        .await
        .ok();
        let r = ask(&lead, &name, "hi", 30).await;
        assert_eq!(r["status"], "failed", "{r}");
        let err = r["error"].as_str().unwrap();
        assert!(
            err.contains("not on the PATH") && err.contains("install"),
            "{err}"
        );
        let i = info(&lead, &name).await;
        assert_eq!(i["inbox"]["pending"], 1, "{i}");
    }
    s.stop().await;
}

#[tokio::test]
async fn a_busy_agent_takes_the_question_in_its_next_run() {
    let dir = tempfile::tempdir().unwrap();
    let s = HttpServer::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    new_mock(
        &lead,
        "eve",
        json!([
            {"when": "first", "sleep": "2s"},
            {"when": "first", "send": "@user first done"},
            {"when": "second", "send": "@user second done"},
        ]),
    )
    .await;
    let first = ask(&lead, "eve", "first", 0).await;
    assert_eq!(first["status"], "running");
    // Ask again once the first run has read its inbox (and sleeps).
    for _ in 0..100 {
        if info(&lead, "eve").await["inbox"]["seen"] == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let second = ask(&lead, "eve", "second", 30).await;
    assert_eq!(second["status"], "succeeded", "{second}");
    assert_ne!(second["run_id"], first["run_id"]);
    // Everything eve sent the lead since the question, the first run's answer included.
    assert_eq!(
        second["reply"]["messages"],
        json!(["@user first done", "@user second done"])
    );
    let i = settled(&lead, "eve").await;
    assert_eq!(i["usage"]["runs"], 2, "{i}");
    assert_eq!(i["inbox"]["acked"], 2);
    s.stop().await;
}

/// Asked while busy with a run that then fails: the question is answered by the retry
/// that follows (a tenth of a second later here), not by the failed run that never
/// read it.
#[tokio::test]
async fn a_question_behind_a_failing_run_is_answered_by_the_retry() {
    let dir = tempfile::tempdir().unwrap();
    let s = HttpServer::start_with_env(dir.path(), &[SHORT_RETRIES]).await;
    let lead = s.lead(Proto::Legacy).await;
    new_mock(
        &lead,
        "fay",
        json!([
            {"when": "first", "sleep": "1s"},
            {"when": "first", "fail": "flaky disk", "times": 1},
            {"when": "second", "send": "@user second done"},
        ]),
    )
    .await;
    let first = ask(&lead, "fay", "first", 0).await;
    assert_eq!(first["status"], "running");
    wait_info(&lead, "fay", 10, |i| i["inbox"]["seen"] == 1).await;
    let second = ask(&lead, "fay", "second", 30).await;
    assert_eq!(second["status"], "succeeded", "{second}");
    assert_ne!(second["run_id"], first["run_id"], "{second}");
    assert_eq!(second["reply"]["messages"], json!(["@user second done"]));
    let i = settled(&lead, "fay").await;
    assert_eq!(i["runs"][1]["status"], "failed", "{i}");
    assert_eq!(i["runs"][0]["trigger"], "retry", "{i}");
    s.stop().await;
}

fn alive(pid: u32) -> bool {
    proc_stat(pid).is_some_and(|s| s.alive())
}

#[tokio::test]
async fn a_worker_killed_mid_run_is_a_crash_and_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let s = HttpServer::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    new_mock(&lead, "frank", json!([{"sleep": "60s"}])).await;
    let r = ask(&lead, "frank", "work", 1).await;
    assert_eq!(r["status"], "running");
    let w = workers_of(s.child.id().unwrap());
    assert_eq!(w.len(), 1, "{w:?}");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(w[0] as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    let i = settled(&lead, "frank").await;
    let run = &i["runs"][0];
    assert_eq!(run["status"], "failed", "{i}");
    assert_eq!(run["error_class"], "crash");
    assert!(run["error"].as_str().unwrap().contains("signal 9"), "{run}");
    assert_eq!(i["inbox"]["pending"], 1, "{i}");
    assert_eq!(i["active_tokens"], 0);
    // The kernel is fine: the agent runs again.
    assert!(workers_of(s.child.id().unwrap()).is_empty());
    s.stop().await;
}

#[tokio::test]
async fn a_kernel_restart_closes_runs_as_lost_and_kills_their_workers() {
    let dir = tempfile::tempdir().unwrap();
    let s = HttpServer::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    new_mock(&lead, "gina", json!([{"sleep": "60s"}])).await;
    let r = ask(&lead, "gina", "work", 1).await;
    assert_eq!(r["status"], "running");
    let w = workers_of(s.child.id().unwrap());
    assert_eq!(w.len(), 1);
    drop(lead);
    s.kill().await;
    // The worker outlived its kernel (it sleeps); the next kernel must end it.
    assert!(
        alive(w[0]),
        "the orphaned worker should still be there before the restart"
    );
    let s = HttpServer::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    for _ in 0..50 {
        if !alive(w[0]) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(!alive(w[0]), "the previous kernel's worker was not killed");
    // The lost run is closed, its message went back to pending, and the new kernel's
    // scheduler serves it in a fresh run (nothing is lost).
    let mut i = info(&lead, "gina").await;
    for _ in 0..100 {
        if i["runs"].as_array().unwrap().len() == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        i = info(&lead, "gina").await;
    }
    let runs = i["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2, "{i}");
    assert_eq!(runs[1]["id"], r["run_id"]);
    assert_eq!(runs[1]["status"], "lost", "{i}");
    assert_eq!(runs[0]["trigger"], "message", "{i}");
    assert_eq!(
        i["inbox"]["pending"].as_i64().unwrap() + i["inbox"]["seen"].as_i64().unwrap(),
        1,
        "{i}"
    );
    assert_eq!(i["inbox"]["acked"], 0, "{i}");
    s.stop().await;
}

#[tokio::test]
async fn stopping_the_kernel_stops_its_workers() {
    let dir = tempfile::tempdir().unwrap();
    let s = HttpServer::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    new_mock(&lead, "hal", json!([{"sleep": "60s"}])).await;
    ask(&lead, "hal", "work", 1).await;
    let w = workers_of(s.child.id().unwrap());
    assert_eq!(w.len(), 1);
    drop(lead);
    s.stop().await;
    assert!(!alive(w[0]), "a worker outlived its kernel");
}

/// Waits up to `secs` for `cond`.
async fn eventually(secs: u64, mut cond: impl FnMut() -> bool) -> bool {
    for _ in 0..secs * 20 {
        if cond() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    cond()
}

/// Writes the stand-in gemini, cursor-agent and claude scripts into `bin`.
fn write_stand_in_clis(bin: &Path) {
    for cli in ["gemini", "cursor-agent", "claude"] {
        let p = bin.join(cli);
        std::fs::write(
            &p,
            r#"#!/bin/sh
[ "$1" = "--version" ] && { echo "0.0.0 (test)"; exit 0; }
{ cat .gemini/settings.json .cursor/mcp.json 2>/dev/null; ls "$TMPDIR"; echo "$@"; } > "$MARKS/$AGENT.tmp"
mv "$MARKS/$AGENT.tmp" "$MARKS/$AGENT"
echo '{"type":"init","session_id":"s"}'
sleep 600
"#,
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
}

/// Each CLI started and found our server (and the user's own) in its config.
async fn assert_each_cli_saw_our_server(marks: &Path, agents: [(&str, &str); 4], url: &str) {
    for (name, _) in agents {
        let mark = marks.join(name);
        assert!(
            eventually(30, || mark.exists()).await,
            "{name}'s CLI did not start"
        );
    }
    let seen = |name: &str| std::fs::read_to_string(marks.join(name)).unwrap();
    // While running, each CLI found our server in its config, and the user's own.
    for g in ["g1", "g2"] {
        assert!(seen(g).contains(url), "{g}: {}", seen(g));
    }
    assert!(
        seen("c1").contains(url) && seen("c1").contains("http://example"),
        "{}",
        seen("c1")
    );
    assert!(seen("k1").contains("/scratch/run-"), "{}", seen("k1"));
}

/// Kills k1's worker process with SIGKILL, giving it no chance to clean up.
fn sigkill_k1s_worker(s: &HttpServer) {
    let k1 = workers_of(s.child.id().unwrap())
        .into_iter()
        .find(|pid| {
            std::fs::read(format!("/proc/{pid}/environ"))
                .is_ok_and(|e| e.split(|b| *b == 0).any(|v| v == b"AGENT=k1"))
        })
        .expect("k1's worker");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(k1 as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
}

/// Soon the shared workspace holds only the user's files again, and the scratch area is empty.
async fn assert_workspace_restored(work: &Path, tmp: &Path, users_cursor: &str) {
    let clean = || {
        !work.join(".gemini").exists()
            && std::fs::read_to_string(work.join(".cursor/mcp.json")).ok()
                == Some(users_cursor.to_owned())
            && std::fs::read_dir(work.join(".cursor")).unwrap().count() == 1
            && std::fs::read_dir(tmp).unwrap().count() == 0
    };
    assert!(
        eventually(10, clean).await,
        "left behind: {:?} {:?} {:?}",
        std::fs::read_dir(work.join(".gemini"))
            .map(|d| d.flatten().map(|e| e.file_name()).collect::<Vec<_>>()),
        std::fs::read_dir(work.join(".cursor"))
            .map(|d| d.flatten().map(|e| e.file_name()).collect::<Vec<_>>()),
        std::fs::read_dir(tmp).map(|d| d.flatten().map(|e| e.file_name()).collect::<Vec<_>>()),
    );
}

/// CLI agents that share a workspace (a workflow's agents default to its folder):
/// each run merges our server into the CLI's config file there. Stopping one run
/// must leave the file in place for the other still running; stopping the last puts
/// the user's file back as it was, and the runs' private scratch folders go too,
/// even though the kernel stops a worker with SIGTERM in the middle of its CLI.
#[tokio::test]
async fn stopped_cli_runs_put_the_shared_workspace_back() {
    let dir = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let bin = tempfile::tempdir().unwrap();
    let marks = tempfile::tempdir().unwrap();
    // A stand-in for each CLI: it records what it found in its workspace and
    // scratch area, says it started, and then waits like a long model call. Asked
    // its version (agent_new's readiness probe), it answers at once: the probe
    // would otherwise wait out its 20 s limit per agent.
    write_stand_in_clis(bin.path());
    let users_cursor = "{\"mcpServers\": {\"mine\": {\"url\": \"http://example\"}}}\n";
    std::fs::create_dir(work.path().join(".cursor")).unwrap();
    std::fs::write(work.path().join(".cursor/mcp.json"), users_cursor).unwrap();

    let s = HttpServer::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    let agents = [
        ("g1", "gemini"),
        ("g2", "gemini"),
        ("c1", "cursor"),
        ("k1", "claude"),
    ];
    for (name, backend) in agents {
        let env = json!({
            "PATH": format!("{}:/usr/bin:/bin", bin.path().display()),
            "TMPDIR": tmp.path().display().to_string(),
            "MARKS": marks.path().display().to_string(),
            "AGENT": name,
            "CURSOR_API_KEY": "k",
            "ANTHROPIC_API_KEY": "k",
        });
        // The stand-ins report through files outside their folder and list the
        // shared TMPDIR, which a sandbox hides (it is tested in sandbox.rs).
        call(
            &lead,
            "agent_new",
            json!({"name": name, "backend": backend, "env": env,
                   "cwd": work.path().display().to_string(),
                   "permissions": {"profile": "edit", "sandbox": "off"}}),
        )
        .await
        .ok();
        let r = ask(&lead, name, "work", 0).await;
        assert_eq!(r["status"], "running", "{name}: {r}");
    }
    assert_each_cli_saw_our_server(marks.path(), agents, &s.url).await;
    let settings = work.path().join(".gemini/settings.json");

    call(&lead, "agent_pause", json!({"target": "g1"}))
        .await
        .ok();
    let i = wait_info(&lead, "g1", 10, |i| i.get("running").is_none()).await;
    assert_eq!(i["runs"][0]["status"], "stopped", "{i}");
    assert!(
        std::fs::read_to_string(&settings).is_ok_and(|t| t.contains(&s.url)),
        "stopping g1 took the server away from g2, which still runs"
    );
    for name in ["g2", "c1"] {
        call(&lead, "agent_pause", json!({"target": name}))
            .await
            .ok();
    }
    // k1's worker is killed outright (no chance to clean up): the kernel removes the
    // run's scratch folder, which holds Claude's MCP config with the run's token.
    sigkill_k1s_worker(&s);
    // Held there (a crash is retried a second later).
    wait_info(&lead, "k1", 10, |i| i.get("running").is_none()).await;
    call(&lead, "agent_pause", json!({"target": "k1"}))
        .await
        .ok();
    // The runs' scratch folders are in the data dir.
    assert_workspace_restored(work.path(), &dir.path().join("scratch"), users_cursor).await;
    for (name, _) in agents {
        let i = wait_info(&lead, name, 10, |i| i.get("running").is_none()).await;
        let (status, class) = match name {
            "k1" => ("failed", "crash"),
            _ => ("stopped", "stopped"),
        };
        assert_eq!(i["runs"][0]["status"], status, "{name}: {i}");
        assert_eq!(i["runs"][0]["error_class"], class, "{name}: {i}");
        assert_eq!(i["inbox"]["pending"], 1, "{name}: {i}");
    }
    assert!(workers_of(s.child.id().unwrap()).is_empty());
    s.stop().await;
}
