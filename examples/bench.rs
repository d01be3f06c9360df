//! Kernel benchmark through the real interface: concurrent MCP agent sessions over
//! streamable HTTP.
//!
//! ```text
//! cargo run --release --example bench -- [--sessions 16] [--seconds 10] [--preload 1000000]
//!                                        [--client raw|rmcp] [--proto modern|legacy] [--data-dir DIR]
//!                                        [--store postgres://USER:PASSWORD@HOST:PORT/DB]
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
//! Phase 4 (`--fanout-agents`, 200): the lead sends `@all` to that many agents, four
//! clients at once: sends/s, deliveries/s and the memory it costs.
//! Phase 5 (`--asks`, 20): agent_ask of a mock agent one after the other: the round
//! trip (spawn a worker, its MCP calls, its exit), and the wake latency (from the call
//! that mentions the agent to its worker's process started).
//! Phase 6 (`--sandbox-starts`, 0 = off): a worker's start with its OS sandbox and
//! without, alternately (`bench/sandbox.rs`).
//! Memory: the process's RSS at the start, after the phases, and `--settle` seconds
//! (60) later. `--json PATH` writes every figure as JSON, for scripts to compare runs.
//!
//! `--client raw` (default) drives the sessions with a lean MCP 2026-07-28 client over
//! keep-alive HTTP, so the figures show the server; `--client rmcp` uses rmcp's own
//! client (with `--proto` choosing the protocol generation), which costs more CPU on
//! the shared cores and opens a TCP connection for almost every call.
//! The kernel runs in this process (SQLite in a temp dir unless --data-dir, or the
//! PostgreSQL database `--store` names, which should be empty) and is reached only
//! over loopback HTTP; client and server share the machine's cores.

mod common;
#[path = "bench/sandbox.rs"]
mod sandbox;

use agent_worker::kernel::events::Event;
use agent_worker::kernel::messaging::Outgoing;
use agent_worker::kernel::{Caller, Kernel};
use common::{AnyClient, Client, RawClient, call, connect, start_kernel_at};
use serde_json::json;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::broadcast::error::RecvError;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

struct Args {
    sessions: usize,
    seconds: u64,
    preload: usize,
    modern: bool,
    raw: bool,
    data_dir: Option<std::path::PathBuf>,
    store: Option<String>,
    fanout_agents: usize,
    asks: usize,
    sandbox_starts: usize,
    settle: u64,
    json: Option<std::path::PathBuf>,
}

const USAGE: &str = "\
cargo run --release --example bench -- [--sessions 16] [--seconds 10] [--preload 1000000]
    [--client raw|rmcp] [--proto modern|legacy] [--data-dir DIR] [--store postgres://USER:PASSWORD@HOST:PORT/DB]
    [--fanout-agents 200] [--asks 20] [--sandbox-starts 0] [--settle 60] [--json PATH]
The phases and figures are described at the top of examples/bench.rs.";

fn args() -> Args {
    let mut a = Args {
        sessions: 16,
        seconds: 10,
        preload: 1_000_000,
        modern: true,
        raw: true,
        data_dir: None,
        store: None,
        fanout_agents: 200,
        asks: 20,
        sandbox_starts: 0,
        settle: 60,
        json: None,
    };
    let mut f = common::Flags::new(USAGE);
    while let Some(flag) = f.next() {
        match flag.as_str() {
            "--sessions" => a.sessions = f.value(),
            "--seconds" => a.seconds = f.value(),
            "--preload" => a.preload = f.value(),
            "--proto" => a.modern = f.text() != "legacy",
            "--client" => a.raw = f.text() != "rmcp",
            "--data-dir" => a.data_dir = Some(f.text().into()),
            "--store" => a.store = Some(f.text()),
            "--fanout-agents" => a.fanout_agents = f.value(),
            "--asks" => a.asks = f.value(),
            "--sandbox-starts" => a.sandbox_starts = f.value(),
            "--settle" => a.settle = f.value(),
            "--json" => a.json = Some(f.text().into()),
            _ => f.unknown(),
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

async fn phase(
    label: &str,
    clients: &[Arc<AnyClient>],
    seconds: u64,
    send_only: bool,
) -> serde_json::Value {
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
    report(label, all, secs)
}

/// Prints a table of calls/s and p50/p99 per tool, and returns it as JSON.
fn report(label: &str, all: BTreeMap<&'static str, Vec<u32>>, secs: f64) -> serde_json::Value {
    println!(
        "  {:<14} {:>9} {:>10} {:>9} {:>9}",
        "tool", "calls", "calls/s", "p50 ms", "p99 ms"
    );
    let mut tools = serde_json::Map::new();
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
        tools.insert(
            tool.to_owned(),
            json!({"calls": v.len(), "per_second": v.len() as f64 / secs,
                   "p50_ms": pct(0.50), "p99_ms": pct(0.99)}),
        );
    }
    json!({"phase": label, "seconds": secs, "tools": tools})
}

/// This process's resident memory, KiB.
fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

/// Phase 4: `@all` to `agents` agents from four lead clients at once.
async fn fanout(
    kernel: &Arc<Kernel>,
    url: &str,
    admin: &str,
    agents: usize,
    seconds: u64,
) -> serde_json::Value {
    for i in 0..agents {
        let new = agent_worker::kernel::registry::NewAgent {
            name: format!("f{i}"),
            backend: "external".into(),
            workflow: Some("@fanout:main".into()),
            ..Default::default()
        };
        kernel.agent_new(new).await.unwrap();
    }
    let before = rss_kib();
    let until = Instant::now() + Duration::from_secs(seconds.min(5));
    let started = Instant::now();
    let handles: Vec<_> = (0..4)
        .map(|c| {
            let lead = RawClient::new(url, admin);
            tokio::spawn(async move {
                let mut lat = Vec::new();
                let mut i = 0;
                while Instant::now() < until {
                    let t = Instant::now();
                    lead.call(
                        "channel_send",
                        json!({"message": format!("@all update {c}-{i}"), "workflow": "@fanout:main", "force": true}),
                    )
                    .await;
                    lat.push(t.elapsed().as_micros() as u32);
                    i += 1;
                }
                lat
            })
        })
        .collect();
    let mut lat = Vec::new();
    for h in handles {
        lat.extend(h.await.unwrap());
    }
    let secs = started.elapsed().as_secs_f64();
    let after = rss_kib();
    println!(
        "\nphase 4: @all to {agents} agents, 4 lead clients, {secs:.1} s: {:.0} deliveries/s, RSS {} -> {} MiB",
        lat.len() as f64 * agents as f64 / secs,
        before / 1024,
        after / 1024
    );
    let mut v = report(
        "phase 4: @all fan-out",
        BTreeMap::from([("channel_send", lat)]),
        secs,
    );
    v["agents"] = json!(agents);
    v["rss_kib_before"] = json!(before);
    v["rss_kib_after"] = json!(after);
    v
}

/// Phase 5: agent_ask of a mock agent, one after the other.
async fn asks(kernel: &Arc<Kernel>, url: &str, admin: &str, n: usize) -> serde_json::Value {
    let new = agent_worker::kernel::registry::NewAgent {
        name: "echo".into(),
        backend: "mock".into(),
        workflow: Some("@ask:main".into()),
        ..Default::default()
    };
    kernel.agent_new(new).await.unwrap();
    let lead = RawClient::new(url, admin);
    let started = Instant::now();
    let (mut lat, mut woke) = (Vec::new(), Vec::new());
    for i in 0..n {
        // The wake latency: from the call that mentions the agent to its worker's
        // process started (the kernel's RunStarted event).
        let mut events = kernel.events.subscribe();
        let run_started = tokio::spawn(async move {
            loop {
                match events.recv().await {
                    Ok(Event::RunStarted { agent, .. }) if agent == "echo" => {
                        return Instant::now();
                    }
                    Err(RecvError::Closed) => panic!("the kernel's events closed"),
                    _ => {}
                }
            }
        });
        let t = Instant::now();
        let r = lead
            .call(
                "agent_ask",
                json!({"target": "echo@ask:main", "message": format!("ping {i}"), "wait_seconds": 30}),
            )
            .await;
        assert_eq!(r["status"], "succeeded", "{r}");
        lat.push(t.elapsed().as_micros() as u32);
        let at = run_started.await.expect("the ask started a worker");
        woke.push(at.duration_since(t).as_micros() as u32);
    }
    let secs = started.elapsed().as_secs_f64();
    println!("\nphase 5: agent_ask of a mock agent, {n} in a row, {secs:.1} s");
    report(
        "phase 5: agent_ask round trip",
        BTreeMap::from([("agent_ask", lat), ("worker_started", woke)]),
        secs,
    )
}

/// The bench's agents, each joined as its own MCP session.
async fn join_sessions(lead: &Client, url: &str, a: &Args) -> Vec<Arc<AnyClient>> {
    let mut clients = Vec::new();
    for i in 0..a.sessions {
        call(
            lead,
            "agent_new",
            json!({"name": format!("a{i}"), "backend": "external", "workflow": "@bench:main"}),
        )
        .await;
        let j = call(
            lead,
            "agent_join",
            json!({"target": format!("a{i}@bench:main")}),
        )
        .await;
        let token = j["token"].as_str().unwrap();
        clients.push(Arc::new(if a.raw {
            AnyClient::Raw(RawClient::new(url, token))
        } else {
            AnyClient::Rmcp(connect(url, token, a.modern).await)
        }));
    }
    clients
}

/// Phases 2 and 3: `a.preload` messages of history first (their rate per 100,000,
/// and the agents acking their backlog), then the same load again. The preload's
/// figures and the two phases.
async fn with_history(
    kernel: &Arc<Kernel>,
    clients: &[Arc<AnyClient>],
    a: &Args,
) -> (serde_json::Value, Vec<serde_json::Value>) {
    let mut phases = Vec::new();
    let t = Instant::now();
    let scope = kernel
        .registry()
        .scope(&Caller::Lead, Some("@bench:main"))
        .await
        .unwrap();
    let batch = 10_000;
    let mut done = 0;
    // The rate of each 100,000 messages, to show whether it stays flat as the
    // history grows.
    let (mut chunk_start, mut chunks) = (Instant::now(), Vec::new());
    while done < a.preload {
        let k = batch.min(a.preload - done);
        let sends = (done..done + k)
            .map(|i| Outgoing {
                message: format!("@a{} history item {i}", i % a.sessions),
                force: true,
                ..Default::default()
            })
            .collect();
        kernel
            .messaging()
            .channel_send_many(&scope, sends)
            .await
            .unwrap();
        done += k;
        if done % 100_000 == 0 || done == a.preload {
            let n = done - 100_000 * chunks.len();
            chunks.push((n as f64 / chunk_start.elapsed().as_secs_f64()).round());
            chunk_start = Instant::now();
        }
    }
    let secs = t.elapsed().as_secs_f64();
    println!(
        "\npreloaded {} messages in {secs:.1} s ({:.0}/s; per 100,000: {})",
        a.preload,
        a.preload as f64 / secs,
        chunks
            .iter()
            .map(|r| format!("{r:.0}"))
            .collect::<Vec<_>>()
            .join(" ")
    );
    // The history was handled: every agent works through its inbox, acking page by page.
    let t = Instant::now();
    for c in clients {
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
    let backlog = t.elapsed().as_secs_f64();
    println!("agents acked their backlog in {backlog:.1} s");
    let preload = json!({"messages": a.preload, "seconds": secs, "per_second": a.preload as f64 / secs,
                     "per_100k_per_second": chunks, "backlog_ack_seconds": backlog});
    let p2 = phase(
        &format!(
            "phase 2: the same with {} messages in the channel",
            a.preload
        ),
        clients,
        a.seconds,
        false,
    )
    .await;
    phases.push(p2);
    let label = format!(
        "phase 3: two sessions alone, addressing each other, with {} messages in the channel (unloaded latency)",
        a.preload
    );
    phases.push(phase(&label, &clients[..2], a.seconds, false).await);
    (preload, phases)
}

/// On the server's runtime (see `memory::runtime`), so memory figures match it.
fn main() {
    let rt = agent_worker::memory::runtime().build().expect("runtime");
    rt.block_on(run());
}

async fn run() {
    common::serve_worker_mode().await;
    // As the server binary does (see `no_huge_pages`), so memory figures match it.
    agent_worker::memory::no_huge_pages();
    assert!(
        agent_worker::store::sqlite_on_mimalloc(),
        "SQLite was initialised before the bench could give it mimalloc"
    );
    let a = args();
    let mut phases = Vec::new();
    let tmp = tempfile::tempdir().unwrap();
    let dir = a.data_dir.clone().unwrap_or_else(|| tmp.path().to_owned());
    let admin = "awadmin_bench_token_0123456789".to_string();
    let store = match &a.store {
        Some(url) => agent_worker::store::Location::Postgres(url.clone()),
        None => agent_worker::store::Location::Sqlite(dir.join(agent_worker::kernel::DB_FILE)),
    };
    let (kernel, url) = start_kernel_at(&dir, &admin, &store).await;
    // As the server does once started: the start's temporaries go back to the OS,
    // and the code that ran only to start leaves the resident set.
    agent_worker::memory::collect_thread();
    agent_worker::memory::release_start_code();
    let rss_start = rss_kib();
    println!(
        "agent-worker bench: kernel at {url}, data dir {}, store {store}, client {}",
        dir.display(),
        match (a.raw, a.modern) {
            (true, _) => "lean keep-alive HTTP, MCP 2026-07-28",
            (false, true) => "rmcp, MCP 2026-07-28",
            (false, false) => "rmcp, MCP 2025-11-25",
        }
    );

    let lead = connect(&url, &admin, a.modern).await;
    let clients = join_sessions(&lead, &url, &a).await;

    phases.push(kernel_direct(&kernel, a.sessions, a.seconds).await);
    phases.push(phase("phase 1a: channel_send only", &clients, a.seconds, true).await);
    phases.push(
        phase(
            "phase 1b: channel_send + my_inbox + my_inbox_ack",
            &clients,
            a.seconds,
            false,
        )
        .await,
    );
    let mut preload = json!(null);
    if a.preload > 0 {
        let (p, more) = with_history(&kernel, &clients, &a).await;
        preload = p;
        phases.extend(more);
    }
    if a.fanout_agents > 0 {
        phases.push(fanout(&kernel, &url, &admin, a.fanout_agents, a.seconds).await);
    }
    if a.asks > 0 {
        phases.push(asks(&kernel, &url, &admin, a.asks).await);
    }
    if a.sandbox_starts > 0 {
        phases.push(sandbox::starts(&url, &admin, a.sandbox_starts).await);
    }
    drop(clients);
    let rss_end = rss_kib();
    println!(
        "\nRSS: {} MiB at the start, {} MiB after the phases",
        rss_start / 1024,
        rss_end / 1024
    );
    let mut rss_settled = json!(null);
    if a.settle > 0 {
        tokio::time::sleep(Duration::from_secs(a.settle)).await;
        let r = rss_kib();
        println!("RSS {} s later: {} MiB", a.settle, r / 1024);
        rss_settled = json!(r);
    }
    if let Some(path) = &a.json {
        let out = json!({"sessions": a.sessions, "seconds": a.seconds, "phases": phases,
            "preload": preload, "rss_kib": {"start": rss_start, "end": rss_end, "settled": rss_settled,
            "settle_seconds": a.settle}});
        std::fs::write(path, serde_json::to_vec_pretty(&out).unwrap()).expect("write --json");
        println!("figures written to {}", path.display());
    }
}

/// Phase 0: the same sends through the kernel's API, no MCP or HTTP: what the kernel
/// alone can do, so the MCP phases show what the protocol stack costs on top.
async fn kernel_direct(kernel: &Arc<Kernel>, n: usize, seconds: u64) -> serde_json::Value {
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
                .registry()
                .authenticate(Some(
                    &k.registry()
                        .mint_agent_token(agent.id, Duration::from_secs(3600), "bench", None)
                        .await
                        .unwrap()
                        .0,
                ))
                .await
                .unwrap();
            let scope = k.registry().scope(&caller, None).await.unwrap();
            let mut lat = Vec::new();
            while Instant::now() < until {
                let t = Instant::now();
                let msg = Outgoing {
                    message: format!("@d{} direct from {me}", (me + 1) % n),
                    ..Default::default()
                };
                k.messaging().channel_send(&scope, msg).await.unwrap();
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
    println!("\nphase 0: kernel API directly (no MCP), {n} tasks, {secs:.1} s");
    report(
        "phase 0: kernel API directly",
        BTreeMap::from([("channel_send", v)]),
        secs,
    )
}
