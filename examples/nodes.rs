//! Several kernels on one PostgreSQL database, measured: how soon a message sent
//! through one node starts the worker of an agent leased to another, against the
//! same on one node, and how many sends per second the nodes take together.
//!
//! ```text
//! cargo run --release --example nodes -- --store postgres://USER:PASSWORD@HOST:PORT/DB
//!                                        [--nodes 3] [--instances 1] [--wakes 50] [--seconds 5]
//!                                        [--tasks 8]
//! ```
//!
//! The database should be empty. The nodes run in this process (each with its own
//! data dir, store connections, bus and HTTP endpoint, as separate kernels would);
//! workers are this program in its worker mode. Wakes: a mock agent on the last node
//! and one on the first; the first node's lead sends each a direct message, one at a
//! time, and the time to the worker's process started (the `RunStarted` event on the
//! agent's node) is taken. Sends: `--tasks` tasks per node call `channel_send` on
//! their node's kernel for `--seconds`, node i's tasks in workflow instance i mod
//! `--instances` (each instance a team of its own, `@load:i1`…), then the same
//! number of tasks on one node in one instance: the ratio of the two, how long each
//! node's write transactions held the database's write lock, and how long each
//! instance's lock was held (the store's per-instance figures; "none recorded" when
//! the store keeps none). `--nodes 3 --instances 3` is the shape the design aims at:
//! three nodes on three instances against one node on one. With them, the machine's
//! CPU per send (`/proc/stat`, every process, the database's too) and the sends per
//! second all its cores would take at that cost.

mod common;

use agent_worker::kernel::events::Event;
use agent_worker::kernel::messaging::Outgoing;
use agent_worker::kernel::registry::NewAgent;
use agent_worker::kernel::{Caller, Kernel};
use agent_worker::store::HoldStats;
use agent_worker::store::Location;
use common::start_node;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

struct Args {
    store: String,
    nodes: usize,
    instances: usize,
    wakes: usize,
    seconds: u64,
    tasks: usize,
}

const USAGE: &str = "\
cargo run --release --example nodes -- --store postgres://USER:PASSWORD@HOST:PORT/DB
    [--nodes 3] [--instances 1] [--wakes 50] [--seconds 5] [--tasks 8]
Several kernels on one PostgreSQL database, measured; see the top of examples/nodes.rs.";

fn args() -> Args {
    let mut a = Args {
        store: String::new(),
        nodes: 3,
        instances: 1,
        wakes: 50,
        seconds: 5,
        tasks: 8,
    };
    let mut f = common::Flags::new(USAGE);
    while let Some(flag) = f.next() {
        match flag.as_str() {
            "--store" => a.store = f.text(),
            "--nodes" => a.nodes = f.value(),
            "--instances" => a.instances = f.value(),
            "--wakes" => a.wakes = f.value(),
            "--seconds" => a.seconds = f.value(),
            "--tasks" => a.tasks = f.value(),
            _ => f.unknown(),
        }
    }
    if !a.store.starts_with("postgres") {
        f.fail("--store postgres://… (an empty database) is required");
    }
    if a.nodes < 2 {
        f.fail("--nodes: at least 2");
    }
    if a.instances < 1 {
        f.fail("--instances: at least 1");
    }
    a
}

fn pct(v: &mut [u32], p: f64) -> f64 {
    v.sort_unstable();
    v[((v.len() as f64 * p) as usize).min(v.len() - 1)] as f64 / 1000.0
}

/// Sends DMs through `from` to `agent` (a mock on `on`), one at a time, each after
/// the previous run ended; returns the microseconds from each send to its worker
/// started.
async fn wakes(from: &Arc<Kernel>, on: &Arc<Kernel>, agent: &str, n: usize) -> Vec<u32> {
    let scope = from.registry().scope(&Caller::Lead, None).await.unwrap();
    let mut out = Vec::new();
    for i in 0..n {
        let mut events = on.events.subscribe();
        let t = Instant::now();
        from.messaging()
            .channel_send(
                &scope,
                Outgoing {
                    message: format!("ping {i}"),
                    to: Some(agent.to_owned()),
                    force: true,
                    urgent: false,
                },
            )
            .await
            .unwrap();
        let mut started = None;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            match tokio::time::timeout_at(deadline, events.recv()).await {
                Ok(Ok(Event::RunStarted { agent: a, .. })) if a == agent && started.is_none() => {
                    started = Some(t.elapsed());
                }
                Ok(Ok(Event::RunEnded { agent: a, .. })) if a == agent && started.is_some() => {
                    break;
                }
                Ok(Ok(_)) => {}
                Ok(Err(e)) => panic!("events: {e}"),
                Err(_) => {
                    let info = on
                        .agent_info(agent)
                        .await
                        .map(|i| serde_json::to_string(&i).unwrap());
                    panic!("{agent} did not run within 30 s (ping {i}); on its node: {info:?}")
                }
            }
        }
        out.push(started.unwrap().as_micros() as u32);
    }
    out
}

/// The instance the sends of node `i` go to: `@load:i1`… (node i on instance i mod n).
fn instance(i: usize, n: usize) -> String {
    format!("@load:i{}", i % n + 1)
}

/// `tasks` tasks on each kernel send for `secs` seconds, kernel i's in the instance
/// `instance(i, instances)`; returns sends per second.
async fn sends(kernels: &[Arc<Kernel>], instances: usize, tasks: usize, secs: u64) -> f64 {
    let stop = Instant::now() + Duration::from_secs(secs);
    let mut handles = Vec::new();
    for (i, k) in kernels.iter().enumerate() {
        let workflow = instance(i, instances);
        for t in 0..tasks {
            let (k, workflow) = (k.clone(), workflow.clone());
            handles.push(tokio::spawn(async move {
                let scope = k
                    .registry()
                    .scope(&Caller::Lead, Some(&workflow))
                    .await
                    .unwrap();
                let mut n = 0u64;
                while Instant::now() < stop {
                    k.messaging()
                        .channel_send(
                            &scope,
                            Outgoing {
                                message: format!("load {t} {n}"),
                                to: None,
                                force: true,
                                urgent: false,
                            },
                        )
                        .await
                        .unwrap();
                    n += 1;
                }
                n
            }));
        }
    }
    let mut total = 0;
    for h in handles {
        total += h.await.unwrap();
    }
    total as f64 / secs as f64
}

/// One measurement's figures: sends per second, each node's write transactions and
/// each node's holds of each instance's lock (instance id, figures).
struct Measured {
    label: String,
    per_s: f64,
    /// Cores of this machine busy during it, all processes (the database's too).
    busy_cores: f64,
    writes: Vec<HoldStats>,
    instances: Vec<Vec<(i64, HoldStats)>>,
}

/// The machine's CPU time so far from `/proc/stat` (its first line, read bounded):
/// busy and total ticks of all cores, and how many cores.
fn machine_cpu() -> (u64, u64, usize) {
    use std::io::Read;
    let mut text = String::new();
    let read =
        std::fs::File::open("/proc/stat").and_then(|f| f.take(64 * 1024).read_to_string(&mut text));
    let Ok(_) = read else { return (0, 0, 1) };
    let cores = text
        .lines()
        .filter(|l| l.starts_with("cpu") && !l.starts_with("cpu "))
        .count();
    let ticks: Vec<u64> = text
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .skip(1)
        .filter_map(|t| t.parse().ok())
        .collect();
    let total: u64 = ticks.iter().sum();
    // idle and iowait are the 4th and 5th fields.
    let idle = ticks.get(3).copied().unwrap_or(0) + ticks.get(4).copied().unwrap_or(0);
    (total - idle, total, cores.max(1))
}

/// [`sends`] through `kernels`, with the hold figures taken from them after it
/// (those of before taken and dropped first).
async fn measure(
    label: String,
    kernels: &[Arc<Kernel>],
    instances: usize,
    tasks: usize,
    secs: u64,
) -> Measured {
    for k in kernels {
        k.take_write_holds();
    }
    let before = machine_cpu();
    let per_s = sends(kernels, instances, tasks, secs).await;
    let after = machine_cpu();
    let busy = (after.0 - before.0) as f64 / (after.1 - before.1).max(1) as f64;
    let (writes, instances) = kernels.iter().map(|k| k.take_write_holds()).unzip();
    Measured {
        label,
        per_s,
        busy_cores: busy * after.2 as f64,
        writes,
        instances,
    }
}

/// The machine's CPU per send in each measurement, and what every core of it would
/// send at that cost: where sends stop adding up on this machine.
fn print_cpu(m: &[Measured; 2]) {
    let cores = machine_cpu().2;
    println!(
        "\nthe machine's CPU (every process on it) per send, and the sends/s all {cores} cores would take at that cost:"
    );
    for x in m {
        let us = x.busy_cores * 1e6 / x.per_s.max(1.0);
        println!(
            "  {:<30} {:>8.0} µs, {:.2} cores busy; at most {:.0}/s",
            x.label,
            us,
            x.busy_cores,
            cores as f64 * 1e6 / us.max(1.0)
        );
    }
}

fn hold_row(label: &str, h: &HoldStats) {
    println!(
        "  {label:<34} {:>8} {:>8.0} {:>8} {:>8} {:>8}",
        h.transactions, h.mean_us, h.p50_us, h.p99_us, h.max_us
    );
}

fn hold_header() {
    println!(
        "  {:<34} {:>8} {:>8} {:>8} {:>8} {:>8}",
        "", "count", "mean", "p50", "p99", "max"
    );
}

/// The sends per second of both measurements and their ratio, then the hold tables.
fn print_sends(m: &[Measured; 2], names: &HashMap<i64, String>, a: &Args) {
    println!(
        "\nchannel_send through the kernel API, {} tasks in all, {} s:",
        a.tasks * a.nodes,
        a.seconds
    );
    for x in m {
        println!("  {:<30} {:>8.0}/s", x.label, x.per_s);
    }
    println!(
        "  ratio: {:.2} ({} against {})",
        m[0].per_s / m[1].per_s,
        m[0].label,
        m[1].label
    );
    print_cpu(m);
    println!("\nwrite transactions (the database's write lock held, begin to commit), µs:");
    hold_header();
    for x in m {
        for (i, h) in x.writes.iter().enumerate() {
            hold_row(&format!("{}: n{}", x.label, i + 1), h);
        }
    }
    println!("\neach instance's write lock held (begin to commit), µs:");
    if m.iter().flat_map(|x| &x.instances).all(Vec::is_empty) {
        println!("  none recorded (this store keeps no per-instance figures)");
        return;
    }
    hold_header();
    for x in m {
        for (i, holds) in x.instances.iter().enumerate() {
            for (id, h) in holds {
                let name = names.get(id).cloned().unwrap_or_else(|| format!("#{id}"));
                hold_row(&format!("{}: n{} {name}", x.label, i + 1), h);
            }
        }
    }
}

fn main() {
    let rt = agent_worker::memory::runtime().build().expect("runtime");
    rt.block_on(run());
}

/// The agents the measurements use: a mock on the last node and one on the first
/// (the wakes), and an external sink in each load instance (the sends); returns
/// the load instances' names by id.
async fn agents(kernels: &[Arc<Kernel>], instances: usize) -> HashMap<i64, String> {
    let (first, last) = (&kernels[0], &kernels[kernels.len() - 1]);
    for (name, node) in [("far", last.node()), ("near", first.node())] {
        first
            .agent_new(NewAgent {
                name: name.into(),
                backend: "mock".into(),
                node: Some(agent_worker::placement::Placement::Node(node.to_owned())),
                ..Default::default()
            })
            .await
            .unwrap();
    }
    let mut names = HashMap::new();
    for i in 0..instances {
        let workflow = instance(i, instances);
        first
            .agent_new(NewAgent {
                name: "sink".into(),
                backend: "external".into(),
                workflow: Some(workflow.clone()),
                ..Default::default()
            })
            .await
            .unwrap();
        let scope = first
            .registry()
            .scope(&Caller::Lead, Some(&workflow))
            .await
            .unwrap();
        names.insert(scope.workflow_id, workflow);
    }
    names
}

async fn run() {
    common::serve_worker_mode().await;
    if std::env::var_os("RUST_LOG").is_some() {
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_writer(std::io::stderr)
            .init();
    }
    let a = args();
    let store = Location::Postgres(a.store.clone());
    let dirs: Vec<tempfile::TempDir> = (0..a.nodes).map(|_| tempfile::tempdir().unwrap()).collect();
    let mut kernels = Vec::new();
    for (i, d) in dirs.iter().enumerate() {
        let name = format!("n{}", i + 1);
        let (k, _) = start_node(d.path(), "awadmin_nodes_token_0123456789", &store, &name).await;
        kernels.push(k);
    }
    println!(
        "agent-worker nodes: {} kernels on {store}, sends over {} instance(s)",
        a.nodes, a.instances
    );
    let names = agents(&kernels, a.instances).await;
    let (first, last) = (&kernels[0], &kernels[a.nodes - 1]);
    let mut far = wakes(first, last, "far", a.wakes).await;
    let mut near = wakes(first, first, "near", a.wakes).await;
    println!(
        "\nwake, send through {} → worker started (ms, {} each):",
        first.node(),
        a.wakes
    );
    println!("  {:<34} {:>8} {:>8}", "", "p50", "p99");
    for (label, v) in [
        (format!("agent on {} (another node)", last.node()), &mut far),
        (
            format!("agent on {} (the same node)", first.node()),
            &mut near,
        ),
    ] {
        println!("  {label:<34} {:>8.1} {:>8.1}", pct(v, 0.5), pct(v, 0.99));
    }
    let plural = |n: usize, what: &str| format!("{n} {what}{}", if n == 1 { "" } else { "s" });
    let all = format!(
        "{} on {}",
        plural(a.nodes, "node"),
        plural(a.instances.min(a.nodes), "instance")
    );
    let all = measure(all, &kernels, a.instances, a.tasks, a.seconds).await;
    let one = "1 node on 1 instance".to_owned();
    let one = measure(one, &kernels[..1], 1, a.tasks * a.nodes, a.seconds).await;
    print_sends(&[all, one], &names, &a);
}
