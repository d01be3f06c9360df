//! The scheduler end to end, through the real binary, real MCP and real mock
//! workers: a mention wakes its agent at once (measured), retries with backoff,
//! auth errors pause, the hop guard stops a ping-pong loop, `every` and `cron`
//! schedules fire, and the worker limit queues runs instead of overlapping them.

use crate::common;
use common::*;
use serde_json::{Value, json};
use std::time::Duration;

async fn send(lead: &Client, message: &str) -> Value {
    call(lead, "channel_send", json!({"message": message}))
        .await
        .ok()
}

async fn channel(lead: &Client) -> Vec<Value> {
    call(lead, "channel_read", json!({"limit": 200})).await.ok()["messages"]
        .as_array()
        .unwrap()
        .clone()
}

fn ms(rfc3339: &Value) -> i64 {
    let t = humantime::parse_rfc3339(rfc3339.as_str().unwrap()).unwrap();
    t.duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64
}

fn runs(i: &Value) -> Vec<Value> {
    i["runs"].as_array().unwrap().clone()
}

/// Returns once the wall clock is past `at` (ms since the epoch).
async fn wait_past(at: i64) {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    if at > now {
        tokio::time::sleep(Duration::from_millis((at - now) as u64)).await;
    }
}

#[tokio::test]
async fn a_mention_wakes_its_agent_at_once() {
    const PINGS: usize = 5;
    let dir = tempfile::tempdir().unwrap();
    let s = HttpServer::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    new_mock(&lead, "bob", json!([{"send": "@user pong"}])).await;
    let mut latencies = Vec::new();
    for n in 0..PINGS {
        let sent = send(&lead, &format!("@bob ping {n}")).await;
        let i = wait_info(&lead, "bob", 20, |i| {
            runs(i).len() > n && runs(i)[0]["status"] == "succeeded"
        })
        .await;
        let msg = channel(&lead)
            .await
            .into_iter()
            .find(|m| m["id"] == sent["id"])
            .unwrap();
        let latency = ms(&runs(&i)[0]["started_at"]) - ms(&msg["created_at"]);
        assert_eq!(runs(&i)[0]["trigger"], "message");
        assert!(
            latency >= 0,
            "a run started before its message: {latency} ms"
        );
        latencies.push(latency);
    }
    eprintln!("wake latency (message written -> run started), ms: {latencies:?}");
    // Event-driven: a polling loop would show its interval here (the original polled
    // every 5 s; each ping is sent as the run before ends, so in step with the poll).
    // The median, not every wake: one wake on a loaded machine may take a second.
    latencies.sort();
    let median = latencies[PINGS / 2];
    assert!(median < 1000, "median {median} ms of {latencies:?}");
    let replies = channel(&lead)
        .await
        .into_iter()
        .filter(|m| m["from"] == "bob")
        .count();
    assert_eq!(replies, PINGS, "one run per message, no extra runs");
    let i = info(&lead, "bob").await;
    assert_eq!(i["inbox"]["acked"], PINGS, "{i}");
    assert_eq!(runs(&i).len(), PINGS, "{i}");
    s.stop().await;
}

#[tokio::test]
async fn a_failed_run_is_retried_with_backoff_and_succeeds() {
    let dir = tempfile::tempdir().unwrap();
    // The backoff shortened tenfold (production's is 1 s, 2 s, 4 s).
    let s = HttpServer::start_with_env(dir.path(), &[SHORT_RETRIES]).await;
    let lead = s.lead(Proto::Legacy).await;
    // Fails its first two runs, then answers.
    new_mock(
        &lead,
        "carol",
        json!([{"fail": "flaky network", "times": 2}, {"send": "@user done at last"}]),
    )
    .await;
    // Always fails: three retries, then it is marked failed.
    new_mock(&lead, "dave", json!([{"fail": "always broken"}])).await;
    send(&lead, "@carol @dave please work").await;
    let i = wait_info(&lead, "carol", 30, |i| {
        runs(i).first().is_some_and(|r| r["status"] == "succeeded")
    })
    .await;
    let r = runs(&i);
    assert_eq!(r.len(), 3, "{i}");
    let triggers: Vec<&str> = r
        .iter()
        .rev()
        .map(|r| r["trigger"].as_str().unwrap())
        .collect();
    assert_eq!(triggers, ["message", "retry", "retry"]);
    let statuses: Vec<&str> = r
        .iter()
        .rev()
        .map(|r| r["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses, ["failed", "failed", "succeeded"]);
    // Backoff: 100 ms before the first retry, 200 ms before the second.
    let gap1 = ms(&r[1]["started_at"]) - ms(&r[2]["ended_at"]);
    let gap2 = ms(&r[0]["started_at"]) - ms(&r[1]["ended_at"]);
    eprintln!("retry gaps: {gap1} ms, {gap2} ms");
    assert!((95..3000).contains(&gap1), "{gap1}");
    assert!((195..3000).contains(&gap2), "{gap2}");
    assert_eq!(i["inbox"]["acked"], 1, "acked only after the success: {i}");

    let d = wait_info(&lead, "dave", 30, |i| i["agent"]["state"] == "failed").await;
    assert_eq!(runs(&d).len(), 4, "one run and three retries: {d}");
    assert_eq!(d["inbox"]["pending"], 1, "its message is not lost: {d}");
    assert!(
        d["agent"]["reason"]
            .as_str()
            .unwrap()
            .contains("always broken"),
        "{d}"
    );
    let told = channel(&lead).await;
    assert!(
        told.iter().any(|m| m["from"] == "system"
            && m["content"]
                .as_str()
                .unwrap()
                .starts_with("@user dave failed 4 times")),
        "{told:?}"
    );
    // A new message gives it fresh attempts.
    send(&lead, "@dave try again").await;
    wait_info(&lead, "dave", 20, |i| runs(i).len() >= 5).await;
    s.stop().await;
}

#[tokio::test]
async fn an_auth_error_pauses_the_agent_and_tells_the_lead() {
    let dir = tempfile::tempdir().unwrap();
    let s = HttpServer::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    new_mock(
        &lead,
        "erin",
        json!([{"fail": "401 Unauthorized: invalid x-api-key"}]),
    )
    .await;
    let before = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    send(&lead, "@erin hello").await;
    let i = wait_info(&lead, "erin", 20, |i| i["agent"]["state"] == "paused").await;
    assert_eq!(runs(&i).len(), 1, "no retries for an auth error: {i}");
    assert_eq!(runs(&i)[0]["error_class"], "auth");
    assert_eq!(i["inbox"]["pending"], 1);
    let wait = ms(&i["agent"]["resume_at"]) - before;
    assert!(
        (295_000..310_000).contains(&wait),
        "resumes after 5 min: {wait}"
    );
    let told = channel(&lead).await;
    let note = told.iter().find(|m| m["from"] == "system").unwrap();
    let text = note["content"].as_str().unwrap();
    assert!(
        text.starts_with("@user erin is paused. auth: 401 Unauthorized"),
        "{text}"
    );
    assert!(
        text.contains("resume erin (agent_pause, resume: true)"),
        "{text}"
    );
    // A resume runs it again at once; the same error pauses it for twice as long.
    let resumed_at = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    resume(&lead, "erin").await;
    let i = wait_info(&lead, "erin", 20, |i| {
        runs(i).len() == 2 && i["agent"]["state"] == "paused"
    })
    .await;
    let wait = ms(&i["agent"]["resume_at"]) - resumed_at;
    assert!(
        (595_000..610_000).contains(&wait),
        "then after 10 min: {wait}"
    );
    s.stop().await;
}

#[tokio::test]
async fn the_hop_guard_stops_a_ping_pong_loop() {
    let dir = tempfile::tempdir().unwrap();
    let s = HttpServer::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    for (me, other) in [("ping", "pong"), ("pong", "ping")] {
        call(
            &lead,
            "agent_new",
            json!({"name": me, "backend": "mock", "budget": {"max_hops": 6},
                   "mock": [{"send": format!("@{other} your turn")}]}),
        )
        .await
        .ok();
    }
    send(&lead, "@ping start").await;
    // ping, pong, ping, pong, ping, pong: six hops; ping would send the seventh.
    let i = wait_info(&lead, "ping", 30, |i| i["agent"]["state"] == "paused").await;
    assert!(
        i["agent"]["reason"]
            .as_str()
            .unwrap()
            .contains("max_hops 6"),
        "{i}"
    );
    // Count once nothing can run: ping is paused, and pong is idle with no run in
    // progress and nothing in its inbox (a runaway loop would show here).
    wait_info(&lead, "pong", 10, |i| {
        i["agent"]["state"] == "idle" && i.get("running").is_none() && i["inbox"]["pending"] == 0
    })
    .await;
    let msgs = channel(&lead).await;
    let hops = msgs
        .iter()
        .filter(|m| m["from"] == "ping" || m["from"] == "pong")
        .count();
    assert_eq!(hops, 6, "{msgs:?}");
    assert!(msgs.iter().any(|m| {
        m["from"] == "system"
            && m["content"]
                .as_str()
                .unwrap()
                .contains("ping is paused. guard:")
    }));
    // The message that would have gone on waits in the paused agent's inbox.
    assert_eq!(info(&lead, "ping").await["inbox"]["pending"], 1);
    assert_eq!(info(&lead, "pong").await["agent"]["state"], "idle");
    // The lead looked: resuming restarts the count, and the loop goes on (until the
    // guard trips again after six more).
    resume(&lead, "ping").await;
    wait_info(&lead, "ping", 30, |i| {
        i["agent"]["state"] == "paused" && runs(i).len() >= 6
    })
    .await;
    let hops = channel(&lead)
        .await
        .iter()
        .filter(|m| m["from"] == "ping" || m["from"] == "pong")
        .count();
    assert_eq!(hops, 12);
    s.stop().await;
}

#[tokio::test]
async fn every_fires_after_idle_and_clearing_the_schedule_stops_it() {
    let dir = tempfile::tempdir().unwrap();
    let s = HttpServer::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    let clear = async |target: &str| {
        call(
            &lead,
            "schedule_set",
            json!({"target": target, "clear": true}),
        )
        .await
        .ok()
    };
    let a = call(
        &lead,
        "agent_new",
        json!({"name": "tick", "backend": "mock",
               "schedule": {"every": "1s", "prompt": "time for a tick"},
               "mock": [{"when": "tick", "send": "tock from {from}"}]}),
    )
    .await
    .ok();
    assert_eq!(a["agent"]["name"], "tick");
    let i = wait_info(&lead, "tick", 20, |i| {
        runs(i)
            .iter()
            .filter(|r| r["status"] == "succeeded")
            .count()
            >= 3
    })
    .await;
    assert!(runs(&i).iter().all(|r| r["trigger"] == "schedule"), "{i}");
    let tocks: Vec<Value> = channel(&lead)
        .await
        .into_iter()
        .filter(|m| m["from"] == "tick")
        .collect();
    assert!(tocks.len() >= 3, "{tocks:?}");
    assert_eq!(tocks[0]["content"], "tock from schedule");
    // `every` counts from the end of the last run.
    let r: Vec<Value> = runs(&i)
        .into_iter()
        .filter(|r| r["status"] == "succeeded")
        .collect();
    let gap = ms(&r[0]["started_at"]) - ms(&r[1]["ended_at"]);
    assert!((900..5000).contains(&gap), "{gap}");
    let armed = info(&lead, "tick").await["schedule"]["next_at"].clone();
    let e = call(
        &lead,
        "schedule_set",
        json!({"target": "tick", "clear": true, "every": "1s"}),
    )
    .await
    .err();
    assert!(e.contains("without every"), "{e}");
    let c = clear("tick").await;
    assert_eq!(c["cleared"], true);
    // Past the fire that was armed, and the one a run under way would arm when it
    // ends (the interval counts from then): nothing more.
    let i = settled(&lead, "tick").await;
    let n = runs(&i).len();
    let ended = runs(&i)
        .first()
        .and_then(|r| r["ended_at"].as_str().map(|_| ms(&r["ended_at"])))
        .unwrap_or(0);
    let armed = armed.as_str().map_or(0, |_| ms(&armed));
    wait_past(armed.max(ended + 1000) + 300).await;
    assert_eq!(
        runs(&info(&lead, "tick").await).len(),
        n,
        "no fire after clear"
    );
    let c = clear("tick").await;
    assert_eq!(c["cleared"], false);
    // A lead's old script is told the call that replaced the old tool.
    let e = try_call(&lead, "schedule_clear", json!({"target": "tick"}))
        .await
        .expect_err("an old tool name");
    assert!(
        e.to_string().contains("schedule_set {target, clear: true}"),
        "{e}"
    );
    s.stop().await;
}

/// A cron schedule is set on a minute boundary, and a bad one is refused. Its fire
/// at that minute is the runtime's test, on a manual clock
/// (crates/kernel/src/runtime/schedules/tests.rs).
#[tokio::test]
async fn cron_schedules_are_set_on_a_minute() {
    let dir = tempfile::tempdir().unwrap();
    let s = HttpServer::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    new_mock(
        &lead,
        "clock",
        json!([{"when": "chime", "send": "it is {message}"}]),
    )
    .await;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let set = call(
        &lead,
        "schedule_set",
        json!({"target": "clock", "cron": "* * * * *", "prompt": "chime"}),
    )
    .await
    .ok();
    assert_eq!(set["schedule"]["kind"], "cron");
    let next = ms(&set["next_at"]);
    assert_eq!(next % 60_000, 0, "on a minute boundary: {set}");
    assert!(next > now - 1000 && next <= now + 61_000, "{set}");
    for bad in [
        json!({"target": "clock", "cron": "* * * *"}),
        json!({"target": "clock", "cron": "0 25 * * *"}),
        json!({"target": "clock", "every": "1s", "cron": "* * * * *"}),
        json!({"target": "clock"}),
        json!({"target": "clock", "every": "100ms"}),
        json!({"target": "nobody", "every": "1m"}),
    ] {
        let e = call(&lead, "schedule_set", bad.clone()).await.err();
        assert!(!e.is_empty(), "{bad}");
    }
    s.stop().await;
}

#[tokio::test]
async fn the_worker_limit_queues_runs_fairly() {
    let dir = tempfile::tempdir().unwrap();
    let s = HttpServer::start_with_env(dir.path(), &[("AGENT_WORKER_MAX_WORKERS", "1")]).await;
    let lead = s.lead(Proto::Legacy).await;
    for n in ["w1", "w2", "w3"] {
        new_mock(
            &lead,
            n,
            json!([{"sleep": "300ms"}, {"send": "{name} done"}]),
        )
        .await;
    }
    send(&lead, "@w1 @w2 @w3 go").await;
    let mut spans = Vec::new();
    for n in ["w1", "w2", "w3"] {
        let i = wait_info(&lead, n, 20, |i| {
            runs(i).first().is_some_and(|r| r["status"] == "succeeded")
        })
        .await;
        let r = &runs(&i)[0];
        spans.push((ms(&r["started_at"]), ms(&r["ended_at"])));
    }
    spans.sort();
    for w in spans.windows(2) {
        assert!(
            w[1].0 >= w[0].1,
            "runs overlapped with a limit of 1: {spans:?}"
        );
    }
    s.stop().await;
}
