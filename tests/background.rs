//! The team outlives its client: a stdio launch relays to a kernel it starts in
//! the background. That kernel keeps firing schedules after the client has gone
//! (seen over HTTP with the credential in the data dir), stops by itself after its
//! idle limit once nothing is owed, and a client attached when it is killed -9
//! carries on with the next call (a new kernel is started under it).

use crate::common;
use common::*;
use rmcp::service::ServiceExt;
use serde_json::{Value, json};
use std::path::Path;
use std::time::{Duration, Instant};

/// A stdio client of the default launch (no --foreground).
async fn launch(dir: &Path, idle_exit: &str) -> Client {
    let t = stdio_launch(dir, &["--idle-exit", idle_exit]);
    ().serve(t).await.expect("initialize through the relay")
}

fn kernel_json(dir: &Path) -> Option<Value> {
    serde_json::from_str(&std::fs::read_to_string(dir.join("kernel.json")).ok()?).ok()
}

fn alive(pid: i64) -> bool {
    // A zombie is gone for our purposes.
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        s.rsplit(')')
            .next()
            .is_some_and(|rest| !rest.trim_start().starts_with('Z'))
    })
}

/// Waits until `cond` holds, at most `limit`.
async fn until(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if cond() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    cond()
}

/// Stops a background kernel a test left running.
fn stop(pid: i64) {
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGTERM,
    );
}

#[tokio::test]
async fn schedules_keep_firing_after_the_client_has_gone() {
    let dir = tempfile::tempdir().unwrap();
    let client = launch(dir.path(), "10m").await;
    call(
        &client,
        "agent_new",
        json!({"name": "ticker", "backend": "mock",
               "schedule": {"every": "1s", "prompt": "tick"}}),
    )
    .await
    .ok();
    let k = kernel_json(dir.path()).expect("the background kernel wrote kernel.json");
    let pid = k["pid"].as_i64().unwrap();
    client.cancel().await.unwrap();

    // The client is gone; the kernel is not, and its schedule keeps running the agent.
    let url = k["url"].as_str().unwrap();
    let token = k["token"].as_str().unwrap();
    let lead = http_client(url, token, Proto::Legacy).await;
    let runs = |info: &Value| info["usage"]["runs"].as_i64().unwrap_or(0);
    let first = runs(
        &call(&lead, "agent_info", json!({"target": "ticker"}))
            .await
            .ok(),
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let later = loop {
        let later = runs(
            &call(&lead, "agent_info", json!({"target": "ticker"}))
                .await
                .ok(),
        );
        if later >= first + 2 || std::time::Instant::now() > deadline {
            break later;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(alive(pid), "the kernel stopped with its client");
    assert!(
        later >= first + 2,
        "the schedule did not keep firing: {first} runs, then {later}"
    );
    drop(lead);
    stop(pid);
    assert!(until(Duration::from_secs(10), || !alive(pid)).await);
}

/// A kernel that still owes work (a schedule) stops when its data dir is deleted
/// under it: nothing it keeps outlives it, and no client could find it again.
#[tokio::test]
async fn a_kernel_whose_data_dir_is_deleted_stops() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let client = launch(&data, "500ms").await;
    call(
        &client,
        "agent_new",
        json!({"name": "ticker", "backend": "mock",
               "schedule": {"every": "1h", "prompt": "tick"}}),
    )
    .await
    .ok();
    let pid = kernel_json(&data).unwrap()["pid"].as_i64().unwrap();
    client.cancel().await.unwrap();
    std::fs::remove_dir_all(&data).unwrap();
    assert!(
        until(Duration::from_secs(15), || !alive(pid)).await,
        "the kernel outlived its data dir"
    );
}

#[tokio::test]
async fn an_idle_kernel_with_nothing_owed_stops_by_itself() {
    let dir = tempfile::tempdir().unwrap();
    let client = launch(dir.path(), "500ms").await;
    call(&client, "channel_send", json!({"message": "hello"}))
        .await
        .ok();
    let pid = kernel_json(dir.path()).unwrap()["pid"].as_i64().unwrap();
    // While the client is attached (and calls), it stays.
    tokio::time::sleep(Duration::from_millis(700)).await;
    call(&client, "agent_list", json!({})).await.ok();
    assert!(alive(pid));
    client.cancel().await.unwrap();
    assert!(
        until(Duration::from_secs(15), || !alive(pid)).await,
        "the kernel did not stop after its idle limit"
    );
    assert!(
        !dir.path().join("kernel.json").exists(),
        "a stopped kernel leaves no kernel.json"
    );
}

#[tokio::test]
async fn a_client_carries_on_when_its_kernel_is_killed() {
    let dir = tempfile::tempdir().unwrap();
    let client = launch(dir.path(), "10m").await;
    call(
        &client,
        "agent_new",
        json!({"name": "keeper", "backend": "external"}),
    )
    .await
    .ok();
    let pid = kernel_json(dir.path()).unwrap()["pid"].as_i64().unwrap();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    assert!(until(Duration::from_secs(5), || !alive(pid)).await);
    // The next call succeeds, against a new kernel with the same state.
    let r = call(&client, "agent_list", json!({})).await.ok();
    let names: Vec<&str> = r["agents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["keeper"], "{r}");
    let new_pid = kernel_json(dir.path()).unwrap()["pid"].as_i64().unwrap();
    assert_ne!(new_pid, pid);
    client.cancel().await.unwrap();
    stop(new_pid);
    assert!(until(Duration::from_secs(10), || !alive(new_pid)).await);
}

/// A kernel stopped with SIGSTOP: a new stdio client's initialize is answered
/// within the bridge's timeout (`AGENT_WORKER_BRIDGE_TIMEOUT`, here 2 s) with
/// which kernel, that it is stopped and what to do; it used to wait in silence
/// for as long as the kernel stayed stopped.
#[tokio::test]
async fn a_new_client_of_a_stopped_kernel_is_told_what_to_do() {
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;
    let dir = tempfile::tempdir().unwrap();
    let first = launch(dir.path(), "10m").await;
    let pid = kernel_json(dir.path()).unwrap()["pid"].as_i64().unwrap();
    /// Resumes and stops the kernel however the test ends.
    struct Cleanup(i32);
    impl Drop for Cleanup {
        fn drop(&mut self) {
            let _ = kill(Pid::from_raw(self.0), Signal::SIGCONT);
            let _ = kill(Pid::from_raw(self.0), Signal::SIGTERM);
        }
    }
    let _cleanup = Cleanup(pid as i32);
    kill(Pid::from_raw(pid as i32), Signal::SIGSTOP).unwrap();

    let t = launch_with_bridge_timeout(dir.path(), "2s");
    let started = Instant::now();
    let answer = tokio::time::timeout(Duration::from_secs(20), ().serve(t)).await;
    let took = started.elapsed();
    kill(Pid::from_raw(pid as i32), Signal::SIGCONT).unwrap();
    let err = answer
        .expect("an answer within the bridge's timeout, not silence")
        .expect_err("initialize fails while the kernel is stopped");
    let text = format!("{err:?}");
    assert!(took < Duration::from_secs(6), "{took:?}");
    for part in [
        format!("(pid {pid}) did not answer within 2 s and is stopped"),
        format!("kill -CONT {pid}"),
        format!("kill {pid}"),
        "starts a new kernel".to_owned(),
    ] {
        assert!(text.contains(&part), "{part:?} not in {text}");
    }
    eprintln!("answered after {took:?}: {text}");
    // Resumed, the kernel serves the first client again.
    call(&first, "agent_list", json!({})).await.ok();
    first.cancel().await.unwrap();
    stop(pid);
    assert!(until(Duration::from_secs(10), || !alive(pid)).await);
}

/// A stdio launch whose bridge gives the kernel `timeout` to show a sign of life.
fn launch_with_bridge_timeout(dir: &Path, timeout: &str) -> rmcp::transport::TokioChildProcess {
    let mut cmd = tokio::process::Command::new(BIN);
    cmd.arg("--data-dir")
        .arg(dir)
        .args(["--idle-exit", "10m"])
        .env_remove("AGENT_WORKER_FOREGROUND")
        .env("AGENT_WORKER_BRIDGE_TIMEOUT", timeout);
    let (t, _) = rmcp::transport::TokioChildProcess::builder(cmd)
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    t
}

/// The bridge's timeout bounds silence, not a call's length: a read that waits
/// four times the timeout for a message is answered, not cut.
#[tokio::test]
async fn a_call_longer_than_the_bridge_timeout_is_not_cut() {
    let dir = tempfile::tempdir().unwrap();
    let client = ().serve(launch_with_bridge_timeout(dir.path(), "1s")).await.unwrap();
    let pid = kernel_json(dir.path()).unwrap()["pid"].as_i64().unwrap();
    let started = Instant::now();
    let r = call(&client, "channel_read", json!({"wait_seconds": 4}))
        .await
        .ok();
    let took = started.elapsed();
    assert!(took >= Duration::from_millis(3900), "{took:?}: {r}");
    assert_eq!(r["messages"], json!([]), "{r}");
    client.cancel().await.unwrap();
    stop(pid);
    assert!(until(Duration::from_secs(10), || !alive(pid)).await);
}

/// What agent_join hands out outlives the background kernel: after it is killed
/// and a new stdio launch starts another, the URL it returned still reaches the
/// agent's inbox with its token (the data dir's port is remembered), and so does
/// its stdio launch, which starts a kernel itself when none runs.
#[tokio::test]
async fn what_agent_join_hands_out_outlives_the_kernel() {
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;
    let dir = tempfile::tempdir().unwrap();
    let lead = launch(dir.path(), "10m").await;
    call(
        &lead,
        "agent_new",
        json!({"name": "bob", "backend": "external"}),
    )
    .await
    .ok();
    let j = call(&lead, "agent_join", json!({"target": "bob"}))
        .await
        .ok();
    let (url, token) = (j["url"].as_str().unwrap(), j["token"].as_str().unwrap());
    assert!(j["lasts"].as_str().unwrap().contains("kernel.port"), "{j}");
    call(&lead, "channel_send", json!({"message": "@bob before"}))
        .await
        .ok();
    let pid = kernel_json(dir.path()).unwrap()["pid"].as_i64().unwrap();
    lead.cancel().await.unwrap();
    kill(Pid::from_raw(pid as i32), Signal::SIGKILL).unwrap();
    assert!(until(Duration::from_secs(5), || !alive(pid)).await);

    // A new stdio launch starts another kernel: on the same URL.
    let lead = launch(dir.path(), "10m").await;
    call(&lead, "channel_send", json!({"message": "@bob after"}))
        .await
        .ok();
    let k = kernel_json(dir.path()).unwrap();
    let pid = k["pid"].as_i64().unwrap();
    assert_eq!(k["url"], url, "the kernel came back on another port");
    let agent = http_client(url, token, Proto::Legacy).await;
    let inbox = call(&agent, "my_inbox", json!({})).await.ok().to_string();
    assert!(
        inbox.contains("before") && inbox.contains("after"),
        "{inbox}"
    );
    drop(agent);
    lead.cancel().await.unwrap();
    kill(Pid::from_raw(pid as i32), Signal::SIGKILL).unwrap();
    assert!(until(Duration::from_secs(5), || !alive(pid)).await);

    // No kernel runs: the stdio launch starts one and acts as bob, not as the lead.
    let s = &j["stdio"];
    let mut cmd = tokio::process::Command::new(s["command"].as_str().unwrap());
    cmd.args(
        s["args"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap()),
    )
    .env_remove("AGENT_WORKER_FOREGROUND");
    for (k, v) in s["env"].as_object().unwrap() {
        cmd.env(k, v.as_str().unwrap());
    }
    let (t, _) = rmcp::transport::TokioChildProcess::builder(cmd)
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let agent = ().serve(t).await.expect("the stdio launch agent_join returned");
    let tools = tool_names(&agent).await;
    assert!(!tools.iter().any(|t| t == "agent_new"), "{tools:?}");
    let inbox = call(&agent, "my_inbox", json!({})).await.ok().to_string();
    assert!(
        inbox.contains("before") && inbox.contains("after"),
        "{inbox}"
    );
    let pid = kernel_json(dir.path()).unwrap()["pid"].as_i64().unwrap();
    agent.cancel().await.unwrap();
    stop(pid);
    assert!(until(Duration::from_secs(10), || !alive(pid)).await);
}

/// The data dir's port held by another program: the kernel serves on another,
/// remembers that one from then on, and says so in its log.
#[tokio::test]
async fn a_taken_port_is_replaced_and_said() {
    let dir = tempfile::tempdir().unwrap();
    let holder = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let taken = holder.local_addr().unwrap().port();
    std::fs::write(dir.path().join("kernel.port"), format!("{taken}\n")).unwrap();
    let lead = launch(dir.path(), "10m").await;
    let k = kernel_json(dir.path()).unwrap();
    let now: u16 = std::fs::read_to_string(dir.path().join("kernel.port"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert_ne!(now, taken);
    assert_eq!(k["url"], format!("http://127.0.0.1:{now}/mcp"));
    let log = std::fs::read_to_string(dir.path().join("logs/agent-worker.log")).unwrap();
    assert!(
        log.contains(&format!("port {taken}")) && log.contains("is not free"),
        "{log}"
    );
    drop(holder);
    lead.cancel().await.unwrap();
    let pid = k["pid"].as_i64().unwrap();
    stop(pid);
    assert!(until(Duration::from_secs(10), || !alive(pid)).await);
}
