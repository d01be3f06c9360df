//! Phase 6 (`--sandbox-starts`, 0 = off): a worker's start with its OS sandbox
//! against without it. Two mock agents, one `edit` (sandbox required), one
//! `{profile: edit, sandbox: off}`, asked alternately, so the machine's load
//! falls on both alike: agent_ask's round trip (a worker started, its sandbox
//! applied or not, its MCP session, its inbox read, its reply) for each.

use crate::common::RawClient;
use serde_json::json;
use std::time::Instant;

/// `n` asks of each agent, alternately; min, median and max of each in ms.
pub async fn starts(url: &str, admin: &str, n: usize) -> serde_json::Value {
    let agents = [
        ("boxed", json!("edit")),
        ("open", json!({"profile": "edit", "sandbox": "off"})),
    ];
    let lead = RawClient::new(url, admin);
    for (name, permissions) in &agents {
        // A refused agent_new fails the call (and the bench) with the reason.
        lead.call(
            "agent_new",
            json!({"name": name, "backend": "mock", "workflow": "@sandbox:main",
                   "permissions": permissions}),
        )
        .await;
    }
    let mut times: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
    for i in 0..n {
        for (k, (name, _)) in agents.iter().enumerate() {
            let t = Instant::now();
            let r = lead
                .call(
                    "agent_ask",
                    json!({"target": format!("{name}@sandbox:main"), "message": format!("ping {i}"),
                           "wait_seconds": 30}),
                )
                .await;
            assert_eq!(r["status"], "succeeded", "{name}: {r}");
            times[k].push(t.elapsed().as_secs_f64() * 1000.0);
        }
    }
    println!(
        "\nphase 6: a worker's start with and without its sandbox, {n} asks each, alternately"
    );
    let mut out = json!({});
    for (k, (name, _)) in agents.iter().enumerate() {
        let v = &mut times[k];
        v.sort_by(f64::total_cmp);
        let (min, med, max) = (v[0], v[v.len() / 2], v[v.len() - 1]);
        println!("  {name:6} agent_ask ms: min {min:.1}  median {med:.1}  max {max:.1}");
        out[*name] = json!({"min_ms": min, "median_ms": med, "max_ms": max});
    }
    let diff =
        out["boxed"]["median_ms"].as_f64().unwrap() - out["open"]["median_ms"].as_f64().unwrap();
    println!("  the sandbox adds {diff:.1} ms at the median");
    json!({"phase": "phase 6: sandboxed worker start", "asks": n, "agents": out, "median_added_ms": diff})
}
