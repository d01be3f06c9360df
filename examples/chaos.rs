//! kill -9 chaos: the kernel is killed outright, again and again, while clients
//! send messages and a mock workflow runs, and restarted on the same data dir; or,
//! with `--nodes N`, one node of N kernels on one PostgreSQL database at a time,
//! while the others keep serving and take its agents over.
//!
//! ```sh
//! cargo run --release --example chaos -- --cycles 50
//! cargo run --release --example chaos -- --nodes 3 --cycles 100 --store postgres://…
//! ```
//!
//! Each cycle starts a kernel, starts a small workflow whose mock agents sleep in
//! their runs (so runs are in progress), has `--senders` clients post numbered
//! messages to an external agent, kills the kernel with SIGKILL after a random
//! moment, checks that no worker process of the killed kernel survives the next
//! kernel's start, and waits for the cycle's workflow to complete after the
//! restart. At the end every send that was acknowledged must be in the channel
//! exactly once. Columns: acknowledged sends lost, duplicated, workflows not
//! completed, worker processes left over; the target is 0 in each, and the
//! program exits 1 otherwise.
//!
//! With `--nodes N` (N > 1, `--store` required) the N kernels share the database,
//! each with its own data dir and node name (`n1`…), and the senders are spread
//! over them. Each cycle picks one node at random, starts the cycle's workflow on
//! it (its agents placed there), kills it with SIGKILL while the others keep
//! serving their senders, waits for the survivors to take over every agent leased
//! to it (each agent's node, as `agent_list` on a survivor shows it), then starts
//! it again and checks as above. One more column: the killed nodes' agents taken
//! over, which must be all of them.
//!
//! The example is its own kernel (`__kernel`) and worker (`__worker`), so it needs
//! nothing else built. Flags: `--cycles N` (50), `--senders N` (4), `--seed N`,
//! `--data-dir DIR` (a temp dir; with several nodes, one folder per node in it),
//! `--store postgres://…` (an empty PostgreSQL database instead of SQLite in the
//! data dir), `--nodes N` (1). The nodes of a cluster run with a 2 s lease unless
//! `AGENT_WORKER_NODE_LEASE` sets one.

#[path = "chaos/cluster.rs"]
mod cluster;
mod common;

use cluster::{Cluster, KERNEL_MODE, workers_in};
use common::RawClient;
use rand::{Rng, SeedableRng, rngs::StdRng};
use serde_json::json;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const SENDS: &str = "@chaos-sends";

/// The cycle's workflow; `node` places its agents (on the node to be killed).
fn workflow(node: Option<&str>) -> String {
    let at = node.map(|n| format!("\n    node: {n}")).unwrap_or_default();
    format!(
        r#"
name: chaos
agents:
  a:
    backend: mock{at}
    mock:
      - {{ when: "go", sleep: 300ms }}
      - {{ when: "go", send: "@b step" }}
  b:
    backend: mock{at}
    mock:
      - {{ when: "step", sleep: 300ms }}
      - {{ when: "step", send: "@c last" }}
  c:
    backend: mock{at}
    mock:
      - {{ when: "last", sleep: 300ms }}
      - {{ when: "last", reply: "done" }}
kickoff: "@a go"
"#
    )
}

struct Args {
    cycles: usize,
    senders: usize,
    seed: u64,
    data_dir: Option<PathBuf>,
    store: Option<String>,
    nodes: usize,
}

const USAGE: &str = "\
cargo run --release --example chaos -- [--cycles 50] [--senders 4] [--seed N] [--data-dir DIR]
    [--store postgres://USER:PASSWORD@HOST:PORT/DB] [--nodes 1]
kill -9 of the kernel during sends and a workflow, again and again; with --nodes N (N > 1,
--store required) of one node of N at a time; see the top of examples/chaos.rs.";

fn args() -> Args {
    let mut a = Args {
        cycles: 50,
        senders: 4,
        seed: rand::random(),
        data_dir: None,
        store: None,
        nodes: 1,
    };
    let mut f = common::Flags::new(USAGE);
    while let Some(flag) = f.next() {
        match flag.as_str() {
            "--cycles" => a.cycles = f.value(),
            "--senders" => a.senders = f.value(),
            "--seed" => a.seed = f.value(),
            "--data-dir" => a.data_dir = Some(PathBuf::from(f.text())),
            "--store" => a.store = Some(f.text()),
            "--nodes" => a.nodes = f.value(),
            _ => f.unknown(),
        }
    }
    if a.nodes == 0 {
        f.fail("--nodes: at least 1");
    }
    if a.nodes > 1
        && !a
            .store
            .as_deref()
            .is_some_and(|s| s.starts_with("postgres"))
    {
        f.fail(
            "--nodes N with N > 1 needs --store postgres://… (an empty database): \
             several kernels share one store only on PostgreSQL",
        );
    }
    a
}

fn main() -> std::process::ExitCode {
    let raw: Vec<String> = std::env::args().skip(1).collect();
    // This binary is also the kernel and the workers it starts.
    if raw.first().map(String::as_str) == Some(KERNEL_MODE) {
        return serve(&raw[1..]);
    }
    if let Ok(agent_worker::config::Launch::Worker) =
        agent_worker::config::parse_args(raw.iter().cloned())
    {
        let config = agent_worker::worker::configure();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let code = rt.block_on(agent_worker::worker::main(config));
        return std::process::ExitCode::from(code as u8);
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    if rt.block_on(chaos(args())) {
        std::process::ExitCode::SUCCESS
    } else {
        std::process::ExitCode::FAILURE
    }
}

fn serve(args: &[String]) -> std::process::ExitCode {
    let Ok(agent_worker::config::Launch::Serve(opts)) =
        agent_worker::config::parse_args(args.iter().cloned())
    else {
        eprintln!("chaos: bad kernel arguments {args:?}");
        return std::process::ExitCode::from(2);
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    match rt.block_on(agent_worker::server::run(*opts)) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("chaos kernel: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

#[derive(Default)]
struct Tally {
    acked: HashMap<String, String>,
    /// Worker processes running when the kernel was killed.
    live: usize,
    started: usize,
    incomplete: usize,
    leftover: usize,
    /// Agents leased to the killed nodes when they were killed, and of those the
    /// ones the survivors took over (several nodes only).
    to_take: usize,
    taken: usize,
}

async fn chaos(a: Args) -> bool {
    let tmp = tempfile::tempdir().unwrap();
    let dir = a.data_dir.clone().unwrap_or_else(|| tmp.path().to_owned());
    let dir = std::fs::canonicalize({
        std::fs::create_dir_all(&dir).unwrap();
        &dir
    })
    .unwrap();
    let store = match &a.store {
        Some(url) => agent_worker::store::Location::Postgres(url.clone()).to_string(),
        None => "SQLite in the data dir".into(),
    };
    let nodes = if a.nodes > 1 {
        format!("{} nodes, ", a.nodes)
    } else {
        String::new()
    };
    println!(
        "chaos: {nodes}{} cycles, {} senders, seed {}, data dir {}, store {store}",
        a.cycles,
        a.senders,
        a.seed,
        dir.display()
    );
    let mut rng = StdRng::seed_from_u64(a.seed);
    let tally = Arc::new(Mutex::new(Tally::default()));
    let begun = Instant::now();
    let mut cluster = Cluster::start(&dir, a.nodes, a.store.as_deref()).await;
    cluster
        .lead(0)
        .call(
            "agent_new",
            json!({"name": "sink", "backend": "external", "workflow": SENDS}),
        )
        .await;
    for cycle in 1..=a.cycles {
        one_cycle(&mut cluster, cycle, &mut rng, a.senders, &tally).await;
    }
    // Every acknowledged send reached the sink's inbox exactly once: read it as the
    // sink, acknowledging as it goes.
    let seen = read_sink(&cluster.lead(0), cluster.url(0)).await;
    // The last kernels stop cleanly; nothing of them may stay.
    cluster.stop().await;
    let leftover = tally.lock().unwrap().leftover + cluster.workers();
    let t = tally.lock().unwrap();
    report(&t, &seen, leftover, (a.cycles, a.nodes), begun)
}

/// One cycle: the workflow started on a node picked at random, the senders
/// started on every node, that node killed after a random moment, its agents
/// taken over by the others (several nodes), the node started again, its
/// leftover workers counted and the workflow awaited.
async fn one_cycle(
    c: &mut Cluster,
    cycle: usize,
    rng: &mut StdRng,
    senders: usize,
    tally: &Arc<Mutex<Tally>>,
) {
    let several = c.len() > 1;
    let victim = rng.random_range(0..c.len());
    let tag = format!("c{cycle}");
    let yaml = workflow(several.then(|| c.name(victim)));
    c.lead(victim)
        .call("workflow_run", json!({"yaml": yaml, "tag": tag}))
        .await;
    tally.lock().unwrap().started += 1;
    let stop = Arc::new(AtomicBool::new(false));
    let clients: Vec<_> = (0..c.len()).map(|i| Arc::new(c.lead(i))).collect();
    let running = send_until(&clients, senders, cycle, &stop, tally);
    tokio::time::sleep(Duration::from_millis(rng.random_range(200..1500))).await;
    let live = workers_in(c.dir(victim)).len();
    let held = if several {
        agents_on(&c.lead(victim), c.name(victim)).await
    } else {
        Vec::new()
    };
    c.kill(victim).await;
    // The survivors keep sending while they take the killed node's agents over.
    let taken = if several {
        let survivor = c.lead((victim + 1) % c.len());
        Some(wait_taken(&survivor, &held, c.name(victim)).await)
    } else {
        None
    };
    stop.store(true, Relaxed);
    for s in running {
        let _ = s.await;
    }
    let kernel_pid = c.restart(victim).await;
    // The new kernel kills what the old one left before it serves.
    let left = workers_in(c.dir(victim))
        .into_iter()
        .filter(|(_, ppid)| *ppid != kernel_pid)
        .count();
    let done = wait_completed(&c.lead(victim), &format!("@chaos:{tag}")).await;
    let mut t = tally.lock().unwrap();
    t.live += live;
    t.leftover += left;
    t.incomplete += usize::from(!done);
    let moved = match taken {
        Some((n, after)) => {
            t.to_take += held.len();
            t.taken += n;
            format!(
                "{n} of {} agent(s) taken over in {:.1} s; ",
                held.len(),
                after.as_secs_f64()
            )
        }
        None => String::new(),
    };
    let who = if several {
        format!("{} killed", c.name(victim))
    } else {
        "killed".into()
    };
    println!(
        "cycle {cycle:>3}: {who} with {live} run(s) in progress; {moved}{} sends acknowledged so far, \
         workflow {}, {left} leftover worker(s)",
        t.acked.len(),
        if done { "completed" } else { "NOT completed" },
    );
}

/// The agents (targets) leased to `node`, as `agent_list` through `lead` shows them.
async fn agents_on(lead: &RawClient, node: &str) -> Vec<String> {
    let list = lead.call("agent_list", json!({})).await;
    list["agents"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|a| a["node"] == node)
        .filter_map(|a| a["target"].as_str().map(str::to_owned))
        .collect()
}

/// Waits (up to 30 s) for every agent of `held` to be leased to a node other than
/// `gone`, as `agent_list` through a survivor shows it: how many were, and when.
/// Those that were not are printed with the node they show.
async fn wait_taken(survivor: &RawClient, held: &[String], gone: &str) -> (usize, Duration) {
    let begun = Instant::now();
    let end = begun + Duration::from_secs(30);
    loop {
        let list = survivor
            .try_call("agent_list", json!({}))
            .await
            .unwrap_or_default();
        let nodes: HashMap<&str, &str> = list["agents"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|a| Some((a["target"].as_str()?, a["node"].as_str().unwrap_or(""))))
            .collect();
        let left: Vec<_> = held
            .iter()
            .filter(|t| {
                nodes
                    .get(t.as_str())
                    .is_none_or(|n| n.is_empty() || *n == gone)
            })
            .map(|t| match nodes.get(t.as_str()) {
                Some(n) if !n.is_empty() => format!("{t} (on {n})"),
                Some(_) => format!("{t} (on no node)"),
                None => format!("{t} (not listed)"),
            })
            .collect();
        if left.is_empty() {
            return (held.len(), begun.elapsed());
        }
        if Instant::now() > end {
            println!("  not taken over from {gone}: {}", left.join(", "));
            return (held.len() - left.len(), begun.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// `n` senders sending to the sink until `stop`, sender `s` through
/// `clients[s % len]`, keeping every acknowledged send (by its text) in the tally.
/// A sender whose node is gone stops.
fn send_until(
    clients: &[Arc<RawClient>],
    n: usize,
    cycle: usize,
    stop: &Arc<AtomicBool>,
    tally: &Arc<Mutex<Tally>>,
) -> Vec<tokio::task::JoinHandle<()>> {
    let mut senders = Vec::new();
    for s in 0..n {
        let lead = clients[s % clients.len()].clone();
        let (stop, tally) = (stop.clone(), tally.clone());
        senders.push(tokio::spawn(async move {
            let mut n = 0;
            while !stop.load(Relaxed) {
                let text = format!("@sink chaos {cycle} {s} {n}");
                let r = lead
                    .try_call("channel_send", json!({"workflow": SENDS, "message": text}))
                    .await;
                match r {
                    Ok(v) => {
                        let id = v["id"].as_str().unwrap_or_default().to_owned();
                        tally.lock().unwrap().acked.insert(text, id);
                    }
                    Err(_) => return,
                }
                n += 1;
            }
        }));
    }
    senders
}

/// Every message in the sink's inbox, read as the sink and acknowledged page by
/// page: how many times each text arrived.
async fn read_sink(lead: &RawClient, url: &str) -> HashMap<String, usize> {
    let join = lead
        .call("agent_join", json!({"target": format!("sink{SENDS}")}))
        .await;
    let sink = RawClient::new(url, join["token"].as_str().unwrap());
    let mut seen: HashMap<String, usize> = HashMap::new();
    loop {
        let page = sink.call("my_inbox", json!({"limit": 200})).await;
        let msgs = page["messages"].as_array().cloned().unwrap_or_default();
        let Some(last) = msgs
            .last()
            .and_then(|m| m["id"].as_str())
            .map(str::to_owned)
        else {
            break;
        };
        for m in &msgs {
            *seen
                .entry(m["content"].as_str().unwrap_or_default().to_owned())
                .or_default() += 1;
        }
        sink.call("my_inbox_ack", json!({"message_id": last, "through": true}))
            .await;
    }
    seen
}

/// The run's table row, and whether it passed: every acknowledged send arrived
/// exactly once, every workflow completed, no worker was left behind, and (several
/// nodes) every killed node's agents were taken over.
fn report(
    t: &Tally,
    seen: &HashMap<String, usize>,
    leftover: usize,
    (cycles, nodes): (usize, usize),
    begun: Instant,
) -> bool {
    let lost = t.acked.keys().filter(|m| !seen.contains_key(*m)).count();
    let duplicated = t
        .acked
        .keys()
        .filter(|m| seen.get(*m).is_some_and(|n| *n > 1))
        .count();
    let taken = if nodes > 1 {
        format!("{} of {}", t.taken, t.to_take)
    } else {
        "-".into()
    };
    println!(
        "\n| nodes | cycles | runs killed mid-run | sends acknowledged | lost | duplicated | workflows | not completed | leftover workers | agents taken over | time |\n\
         |---|---|---|---|---|---|---|---|---|---|---|\n\
         | {nodes} | {cycles} | {} | {} | {lost} | {duplicated} | {} | {} | {leftover} | {taken} | {:.0} s |",
        t.live,
        t.acked.len(),
        t.started,
        t.incomplete,
        begun.elapsed().as_secs_f64()
    );
    lost == 0 && duplicated == 0 && t.incomplete == 0 && leftover == 0 && t.taken == t.to_take
}

/// Waits (up to a minute) for a workflow run to be completed.
async fn wait_completed(lead: &RawClient, workflow: &str) -> bool {
    let end = Instant::now() + Duration::from_secs(60);
    while Instant::now() < end {
        match lead
            .try_call(
                "workflow_status",
                json!({"workflow": workflow, "wait_seconds": 10}),
            )
            .await
        {
            Ok(s) if s["status"] == "completed" => return true,
            Ok(s) if matches!(s["status"].as_str(), Some("failed" | "stopped" | "blocked")) => {
                println!("  {workflow}: {}", s["status"]);
                return false;
            }
            _ => {}
        }
    }
    false
}
