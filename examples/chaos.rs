//! kill -9 chaos: the kernel is killed outright, again and again, while clients
//! send messages and a mock workflow runs, and restarted on the same data dir.
//!
//! ```sh
//! cargo run --release --example chaos -- --cycles 50
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
//! The example is its own kernel (`__kernel`) and worker (`__worker`), so it needs
//! nothing else built. Flags: `--cycles N` (50), `--senders N` (4), `--seed N`,
//! `--data-dir DIR` (a temp dir), `--store postgres://…` (an empty PostgreSQL
//! database instead of SQLite in the data dir).

mod common;

use common::RawClient;
use rand::{Rng, SeedableRng, rngs::StdRng};
use serde_json::json;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, BufReader};

const KERNEL_MODE: &str = "__kernel";
const SENDS: &str = "@chaos-sends";

const WORKFLOW: &str = r#"
name: chaos
agents:
  a:
    backend: mock
    mock:
      - { when: "go", sleep: 300ms }
      - { when: "go", send: "@b step" }
  b:
    backend: mock
    mock:
      - { when: "step", sleep: 300ms }
      - { when: "step", send: "@c last" }
  c:
    backend: mock
    mock:
      - { when: "last", sleep: 300ms }
      - { when: "last", reply: "done" }
kickoff: "@a go"
"#;

struct Args {
    cycles: usize,
    senders: usize,
    seed: u64,
    data_dir: Option<PathBuf>,
    store: Option<String>,
}

const USAGE: &str = "\
cargo run --release --example chaos -- [--cycles 50] [--senders 4] [--seed N] [--data-dir DIR]
    [--store postgres://USER:PASSWORD@HOST:PORT/DB]
kill -9 of the kernel during sends and a workflow, again and again; see the top of examples/chaos.rs.";

fn args() -> Args {
    let mut a = Args {
        cycles: 50,
        senders: 4,
        seed: rand::random(),
        data_dir: None,
        store: None,
    };
    let mut f = common::Flags::new(USAGE);
    while let Some(flag) = f.next() {
        match flag.as_str() {
            "--cycles" => a.cycles = f.value(),
            "--senders" => a.senders = f.value(),
            "--seed" => a.seed = f.value(),
            "--data-dir" => a.data_dir = Some(PathBuf::from(f.text())),
            "--store" => a.store = Some(f.text()),
            _ => f.unknown(),
        }
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

struct Kernel {
    child: tokio::process::Child,
    url: String,
    token: String,
}

async fn start_kernel(dir: &Path, store: Option<&str>) -> Kernel {
    let mut child = tokio::process::Command::new(std::env::current_exe().unwrap())
        .envs(store.map(|s| (agent_worker::config::STORE_ENV, s)))
        .arg(KERNEL_MODE)
        .args(["--http", "127.0.0.1:0", "--log", "warn", "--data-dir"])
        .arg(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start the kernel");
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let url = tokio::time::timeout(Duration::from_secs(30), async {
        while let Ok(Some(l)) = lines.next_line().await {
            if let Some(rest) = l.split("serving MCP at ").nth(1) {
                return rest.split_whitespace().next().unwrap().to_owned();
            }
        }
        panic!("the kernel exited before it served");
    })
    .await
    .expect("the kernel did not start in 30 s");
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    let token = std::fs::read_to_string(dir.join("admin.token"))
        .unwrap()
        .trim()
        .to_owned();
    Kernel { child, url, token }
}

/// Worker processes (this binary in `__worker` mode) working in `dir`, with their
/// parent pid.
fn workers_in(dir: &Path) -> Vec<(u32, u32)> {
    let exe = std::env::current_exe().unwrap();
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(cmd) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        let mut parts = cmd.split(|b| *b == 0);
        let is_worker = parts
            .next()
            .is_some_and(|p| Path::new(&*String::from_utf8_lossy(p)) == exe)
            && parts.next() == Some(b"__worker");
        let in_dir =
            std::fs::read_link(format!("/proc/{pid}/cwd")).is_ok_and(|c| c.starts_with(dir));
        if is_worker
            && in_dir
            && let Some(st) = agent_worker::process::proc_stat(pid)
            && st.alive()
        {
            out.push((pid, st.ppid));
        }
    }
    out
}

#[derive(Default)]
struct Tally {
    acked: HashMap<String, String>,
    /// Worker processes running when the kernel was killed.
    live: usize,
    started: usize,
    incomplete: usize,
    leftover: usize,
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
    println!(
        "chaos: {} cycles, {} senders, seed {}, data dir {}, store {store}",
        a.cycles,
        a.senders,
        a.seed,
        dir.display()
    );
    let mut rng = StdRng::seed_from_u64(a.seed);
    let tally = Arc::new(Mutex::new(Tally::default()));
    let begun = Instant::now();
    let mut k = start_kernel(&dir, a.store.as_deref()).await;
    let lead = RawClient::new(&k.url, &k.token);
    lead.call(
        "agent_new",
        json!({"name": "sink", "backend": "external", "workflow": SENDS}),
    )
    .await;
    for cycle in 1..=a.cycles {
        let lead = Arc::new(RawClient::new(&k.url, &k.token));
        let tag = format!("c{cycle}");
        lead.call("workflow_run", json!({"yaml": WORKFLOW, "tag": tag}))
            .await;
        tally.lock().unwrap().started += 1;
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let senders = send_until(&lead, a.senders, cycle, &stop, &tally);
        tokio::time::sleep(Duration::from_millis(rng.random_range(200..1500))).await;
        let live = workers_in(&dir).len();
        tally.lock().unwrap().live += live;
        let _ = k.child.start_kill();
        let _ = k.child.wait().await;
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for s in senders {
            let _ = s.await;
        }
        k = start_kernel(&dir, a.store.as_deref()).await;
        let kernel_pid = k.child.id().unwrap_or(0);
        // The new kernel kills what the old one left before it serves.
        let left: Vec<_> = workers_in(&dir)
            .into_iter()
            .filter(|(_, ppid)| *ppid != kernel_pid)
            .collect();
        let lead = RawClient::new(&k.url, &k.token);
        let done = wait_completed(&lead, &format!("@chaos:{tag}")).await;
        let mut t = tally.lock().unwrap();
        t.leftover += left.len();
        if !done {
            t.incomplete += 1;
        }
        println!(
            "cycle {cycle:>3}: killed with {live} run(s) in progress; {} sends acknowledged so far, workflow {}, \
             {} leftover worker(s)",
            t.acked.len(),
            if done { "completed" } else { "NOT completed" },
            left.len()
        );
    }
    // Every acknowledged send reached the sink's inbox exactly once: read it as the
    // sink, acknowledging as it goes.
    let lead = RawClient::new(&k.url, &k.token);
    let seen = read_sink(&lead, &k.url).await;
    // The last kernel stops cleanly; nothing of it may stay.
    let pid = nix::unistd::Pid::from_raw(k.child.id().unwrap() as i32);
    let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
    let _ = tokio::time::timeout(Duration::from_secs(15), k.child.wait()).await;
    let leftover = tally.lock().unwrap().leftover + workers_in(&dir).len();
    let t = tally.lock().unwrap();
    report(&t, &seen, leftover, a.cycles, begun)
}

/// `n` senders sending to the sink through `lead` until `stop`, keeping every
/// acknowledged send (by its text) in the tally.
fn send_until(
    lead: &Arc<RawClient>,
    n: usize,
    cycle: usize,
    stop: &Arc<std::sync::atomic::AtomicBool>,
    tally: &Arc<Mutex<Tally>>,
) -> Vec<tokio::task::JoinHandle<()>> {
    let mut senders = Vec::new();
    for s in 0..n {
        let (lead, stop, tally) = (lead.clone(), stop.clone(), tally.clone());
        senders.push(tokio::spawn(async move {
            let mut n = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
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
/// exactly once, every workflow completed, no worker was left behind.
fn report(
    t: &Tally,
    seen: &HashMap<String, usize>,
    leftover: usize,
    cycles: usize,
    begun: Instant,
) -> bool {
    let lost = t.acked.keys().filter(|m| !seen.contains_key(*m)).count();
    let duplicated = t
        .acked
        .keys()
        .filter(|m| seen.get(*m).is_some_and(|n| *n > 1))
        .count();
    println!(
        "\n| cycles | runs killed mid-run | sends acknowledged | lost | duplicated | workflows | not completed | leftover workers | time |\n\
         |---|---|---|---|---|---|---|---|---|\n\
         | {} | {} | {} | {lost} | {duplicated} | {} | {} | {leftover} | {:.0} s |",
        cycles,
        t.live,
        t.acked.len(),
        t.started,
        t.incomplete,
        begun.elapsed().as_secs_f64()
    );
    lost == 0 && duplicated == 0 && t.incomplete == 0 && leftover == 0
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
