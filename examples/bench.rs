//! Kernel benchmark through the real interface: concurrent MCP agent sessions over
//! streamable HTTP.
//!
//! ```text
//! cargo run --release --example bench -- [--sessions 16] [--seconds 10] [--preload 1000000]
//!                                        [--client raw|rmcp] [--proto modern|legacy] [--data-dir DIR]
//! ```
//!
//! Phase 1a: `--sessions` agent sessions (each with its own agent_join token) loop
//! for `--seconds` doing channel_send to the next agent: send throughput.
//! Phase 1b: the same sessions loop channel_send, my_inbox, my_inbox_ack through the
//! newest. Each phase reports throughput and p50/p99 per tool.
//! Phase 2: preloads `--preload` messages into the channel (through the kernel's send
//! path, in batches), has every agent ack its share, then repeats phase 1 and reports
//! again: the my_inbox latency with that history in place.
//! Phase 3: two sessions alone on that history, addressing each other: latency without
//! queueing behind the other sessions on a 2-core machine.
//!
//! `--client raw` (default) drives the sessions with a lean MCP 2026-07-28 client over
//! keep-alive HTTP, so the figures show the server; `--client rmcp` uses rmcp's own
//! client (with `--proto` choosing the protocol generation), which costs more CPU on
//! the shared cores and opens a TCP connection for almost every call.
//! The kernel runs in this process (SQLite in a temp dir unless --data-dir) and is
//! reached only over loopback HTTP; client and server share the machine's cores.

mod common;

use agent_worker::kernel::messaging::Outgoing;
use agent_worker::kernel::{Caller, Kernel};
use common::{AnyClient, RawClient, call, connect, start_kernel};
use serde_json::json;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

struct Args {
    sessions: usize,
    seconds: u64,
    preload: usize,
    modern: bool,
    raw: bool,
    data_dir: Option<std::path::PathBuf>,
}

fn args() -> Args {
    let mut a = Args {
        sessions: 16,
        seconds: 10,
        preload: 1_000_000,
        modern: true,
        raw: true,
        data_dir: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(f) = it.next() {
        let mut v = || it.next().unwrap_or_else(|| panic!("{f} needs a value"));
        match f.as_str() {
            "--sessions" => a.sessions = v().parse().expect("--sessions N"),
            "--seconds" => a.seconds = v().parse().expect("--seconds N"),
            "--preload" => a.preload = v().parse().expect("--preload N"),
            "--proto" => a.modern = v() != "legacy",
            "--client" => a.raw = v() != "rmcp",
            "--data-dir" => a.data_dir = Some(v().into()),
            other => panic!("unknown argument {other}; see the doc comment of examples/bench.rs"),
        }
    }
    a
}

/// One session's loop: send, then (unless `send_only`) read the inbox and ack it.
/// Returns latencies (µs) per tool.
async fn session_loop(
    c: Arc<AnyClient>,
    me: usize,
    n: usize,
    until: Instant,
    send_only: bool,
) -> BTreeMap<&'static str, Vec<u32>> {
    let mut lat: BTreeMap<&'static str, Vec<u32>> = BTreeMap::new();
    let mut i = 0u64;
    while Instant::now() < until {
        let t = Instant::now();
        c.call(
            "channel_send",
            json!({"message": format!("@a{} item {i} from a{me}", (me + 1) % n)}),
        )
        .await;
        lat.entry("channel_send")
            .or_default()
            .push(t.elapsed().as_micros() as u32);
        i += 1;
        if send_only {
            continue;
        }
        let t = Instant::now();
        let inbox = c.call("my_inbox", json!({"limit": 50})).await;
        lat.entry("my_inbox")
            .or_default()
            .push(t.elapsed().as_micros() as u32);
        if let Some(last) = inbox["messages"].as_array().and_then(|m| m.last()) {
            let t = Instant::now();
            c.call(
                "my_inbox_ack",
                json!({"message_id": last["id"], "through": true}),
            )
            .await;
            lat.entry("my_inbox_ack")
                .or_default()
                .push(t.elapsed().as_micros() as u32);
        }
    }
    lat
}

async fn phase(label: &str, clients: &[Arc<AnyClient>], seconds: u64, send_only: bool) {
    let until = Instant::now() + Duration::from_secs(seconds);
    let started = Instant::now();
    let n = clients.len();
    let handles: Vec<_> = clients
        .iter()
        .enumerate()
        .map(|(i, c)| tokio::spawn(session_loop(c.clone(), i, n, until, send_only)))
        .collect();
    let mut all: BTreeMap<&'static str, Vec<u32>> = BTreeMap::new();
    for h in handles {
        for (k, v) in h.await.unwrap() {
            all.entry(k).or_default().extend(v);
        }
    }
    let secs = started.elapsed().as_secs_f64();
    println!("\n{label}: {n} sessions, {secs:.1} s");
    println!(
        "  {:<14} {:>9} {:>10} {:>9} {:>9}",
        "tool", "calls", "calls/s", "p50 ms", "p99 ms"
    );
    for (tool, mut v) in all {
        v.sort_unstable();
        let pct = |p: f64| v[((v.len() as f64 * p) as usize).min(v.len() - 1)] as f64 / 1000.0;
        println!(
            "  {:<14} {:>9} {:>10.0} {:>9.2} {:>9.2}",
            tool,
            v.len(),
            v.len() as f64 / secs,
            pct(0.50),
            pct(0.99)
        );
    }
}

#[tokio::main]
async fn main() {
    let a = args();
    let tmp = tempfile::tempdir().unwrap();
    let dir = a.data_dir.clone().unwrap_or_else(|| tmp.path().to_owned());
    let admin = "awadmin_bench_token_0123456789".to_string();
    let (kernel, url) = start_kernel(&dir, &admin).await;
    println!(
        "agent-worker bench: kernel at {url}, data dir {}, client {}",
        dir.display(),
        match (a.raw, a.modern) {
            (true, _) => "lean keep-alive HTTP, MCP 2026-07-28",
            (false, true) => "rmcp, MCP 2026-07-28",
            (false, false) => "rmcp, MCP 2025-11-25",
        }
    );

    let lead = connect(&url, &admin, a.modern).await;
    let mut clients = Vec::new();
    for i in 0..a.sessions {
        call(
            &lead,
            "agent_new",
            json!({"name": format!("a{i}"), "backend": "external", "workflow": "@bench:main"}),
        )
        .await;
        let j = call(
            &lead,
            "agent_join",
            json!({"target": format!("a{i}@bench:main")}),
        )
        .await;
        let token = j["token"].as_str().unwrap();
        clients.push(Arc::new(if a.raw {
            AnyClient::Raw(RawClient::new(&url, token))
        } else {
            AnyClient::Rmcp(connect(&url, token, a.modern).await)
        }));
    }

    kernel_direct(&kernel, a.sessions, a.seconds).await;
    phase("phase 1a: channel_send only", &clients, a.seconds, true).await;
    phase(
        "phase 1b: channel_send + my_inbox + my_inbox_ack",
        &clients,
        a.seconds,
        false,
    )
    .await;

    if a.preload > 0 {
        let t = Instant::now();
        let scope = kernel
            .scope(&Caller::Lead, Some("@bench:main"))
            .await
            .unwrap();
        let batch = 10_000;
        let mut done = 0;
        while done < a.preload {
            let k = batch.min(a.preload - done);
            let sends = (done..done + k)
                .map(|i| Outgoing {
                    message: format!("@a{} history item {i}", i % a.sessions),
                    force: true,
                    ..Default::default()
                })
                .collect();
            kernel.channel_send_many(&scope, sends).await.unwrap();
            done += k;
        }
        let secs = t.elapsed().as_secs_f64();
        println!(
            "\npreloaded {} messages in {secs:.1} s ({:.0}/s)",
            a.preload,
            a.preload as f64 / secs
        );
        // The history was handled: every agent works through its inbox, acking page by page.
        let t = Instant::now();
        for c in &clients {
            loop {
                let inbox = c.call("my_inbox", json!({"limit": 200})).await;
                let Some(last) = inbox["messages"].as_array().unwrap().last() else {
                    break;
                };
                c.call(
                    "my_inbox_ack",
                    json!({"message_id": last["id"], "through": true}),
                )
                .await;
            }
        }
        println!(
            "agents acked their backlog in {:.1} s",
            t.elapsed().as_secs_f64()
        );
        phase(
            &format!(
                "phase 2: the same with {} messages in the channel",
                a.preload
            ),
            &clients,
            a.seconds,
            false,
        )
        .await;
        let label = format!(
            "phase 3: two sessions alone, addressing each other, with {} messages in the channel (unloaded latency)",
            a.preload
        );
        phase(&label, &clients[..2], a.seconds, false).await;
    }
}

/// Phase 0: the same sends through the kernel's API, no MCP or HTTP: what the kernel
/// alone can do, so the MCP phases show what the protocol stack costs on top.
async fn kernel_direct(kernel: &Arc<Kernel>, n: usize, seconds: u64) {
    for i in 0..n {
        let new = agent_worker::kernel::registry::NewAgent {
            name: format!("d{i}"),
            backend: "external".into(),
            workflow: Some("@direct:main".into()),
            ..Default::default()
        };
        kernel.agent_new(new).await.unwrap();
    }
    let until = Instant::now() + Duration::from_secs(seconds.min(5));
    let started = Instant::now();
    let mut handles = Vec::new();
    for me in 0..n {
        let k = kernel.clone();
        handles.push(tokio::spawn(async move {
            // Its own workflow instance, so phases 1 and 2 start from a clean channel.
            let agent = k.agent_get(&format!("d{me}@direct:main")).await.unwrap();
            let caller = k
                .authenticate(Some(
                    &k.mint_agent_token(agent.id, Duration::from_secs(3600), "bench", None)
                        .await
                        .unwrap()
                        .0,
                ))
                .await
                .unwrap();
            let scope = k.scope(&caller, None).await.unwrap();
            let mut lat = Vec::new();
            while Instant::now() < until {
                let t = Instant::now();
                let msg = Outgoing {
                    message: format!("@d{} direct from {me}", (me + 1) % n),
                    ..Default::default()
                };
                k.channel_send(&scope, msg).await.unwrap();
                lat.push(t.elapsed().as_micros() as u32);
            }
            lat
        }));
    }
    let mut v = Vec::new();
    for h in handles {
        v.extend(h.await.unwrap());
    }
    let secs = started.elapsed().as_secs_f64();
    v.sort_unstable();
    println!("\nphase 0: kernel API directly (no MCP), {n} tasks, {secs:.1} s");
    println!(
        "  {:<14} {:>9} {:>10.0} {:>9.2} {:>9.2}",
        "channel_send",
        v.len(),
        v.len() as f64 / secs,
        v[v.len() / 2] as f64 / 1000.0,
        v[(v.len() * 99 / 100).min(v.len() - 1)] as f64 / 1000.0
    );
}
