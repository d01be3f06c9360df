//! Waiting for what an agent or a contract does, with a deadline (never a fixed
//! sleep): polled through the lead's tools.

use super::*;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

/// Waits until `cond` holds for the agent's info, or panics with the last info.
pub async fn wait_info(
    lead: &Client,
    target: &str,
    secs: u64,
    cond: impl Fn(&Value) -> bool,
) -> Value {
    let end = Instant::now() + Duration::from_secs(secs);
    loop {
        let i = info(lead, target).await;
        if cond(&i) {
            return i;
        }
        if Instant::now() > end {
            panic!("{target}: condition not met in {secs} s: {i}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Polls approval_list until an approval in `state` shows up (contracts).
pub async fn approval_in(lead: &Client, state: &str, secs: u64) -> Value {
    approvals_in(lead, state, 1, secs).await.remove(0)
}

/// Polls approval_list as `who` sees it until `n` approvals are in `state`
/// (or panics after `secs`); returns those in it.
pub async fn approvals_in(who: &Client, state: &str, n: usize, secs: u64) -> Vec<Value> {
    let end = Instant::now() + Duration::from_secs(secs);
    loop {
        let l = call(who, "approval_list", json!({})).await.ok();
        let found: Vec<Value> = l["approvals"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|a| a["state"] == state)
            .cloned()
            .collect();
        if found.len() >= n {
            return found;
        }
        assert!(
            Instant::now() < end,
            "not {n} {state} approval(s) in {secs} s: {l}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Polls contract_list until `contract` has a decision with `outcome`; returns it.
pub async fn decision_by(lead: &Client, contract: &str, outcome: &str, secs: u64) -> Value {
    let end = Instant::now() + Duration::from_secs(secs);
    loop {
        let l = call(lead, "contract_list", json!({})).await.ok();
        let found = l["decisions"].as_array().and_then(|v| {
            v.iter()
                .find(|d| d["outcome"] == outcome && d["contracts"].to_string().contains(contract))
        });
        if let Some(d) = found {
            return d.clone();
        }
        assert!(
            Instant::now() < end,
            "no {outcome} decision by {contract} in {secs} s: {l}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// workflow_status, long-polled until the instance is no longer running (90 s at
/// most, or panics).
pub async fn finished(lead: &Client, workflow: &str) -> Value {
    for _ in 0..9 {
        let s = call(
            lead,
            "workflow_status",
            json!({"workflow": workflow, "wait_seconds": 10}),
        )
        .await
        .ok();
        if s["status"] != "running" {
            return s;
        }
    }
    panic!("{workflow} still running after 90 s");
}

/// agent_ask for a run longer than one call may wait (a real CLI's many steps on
/// a loaded machine): asks, waiting what a call may (50 s), then polls agent_info
/// until the run it started has ended, `secs` in all at most. The answer's
/// `status` is the run's end; when the ask had to be waited out, the run's
/// `final_text`, `error` and `error_class` are added at its top level (agent_ask
/// itself gives its text under `reply`).
pub async fn ask_long(lead: &Client, target: &str, message: &str, secs: u64) -> Value {
    let asked = Instant::now();
    let mut r = ask(lead, target, message, secs.min(50)).await;
    let Some(id) = r["run_id"].as_str().filter(|_| r["status"] == "running") else {
        return r;
    };
    let id = id.to_owned();
    let run = |i: &Value| -> Option<Value> {
        let runs = i["runs"].as_array()?;
        runs.iter().find(|run| run["id"] == id.as_str()).cloned()
    };
    let left = secs.saturating_sub(asked.elapsed().as_secs());
    let i = wait_info(lead, target, left, |i| {
        run(i).is_some_and(|run| run["status"] != "running")
    })
    .await;
    let run = run(&i).expect("the run, found by the wait");
    for key in ["status", "final_text", "error", "error_class"] {
        r[key] = run[key].clone();
    }
    r
}
