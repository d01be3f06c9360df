//! The kernels of a chaos run: each a process of this program in its kernel mode
//! (`__kernel`), with a data dir and a node name of its own (`n1`, `n2`…), all on
//! one store. One node runs on SQLite or PostgreSQL; several share a PostgreSQL
//! database, with a short lease (2 s unless `AGENT_WORKER_NODE_LEASE` says
//! otherwise) so the survivors take a killed node's agents over within seconds.

use super::common::RawClient;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, BufReader};

pub const KERNEL_MODE: &str = "__kernel";

/// The lease the nodes of a cluster of several run with, unless the environment
/// names one.
const LEASE: &str = "2s";

struct Kernel {
    child: tokio::process::Child,
    url: String,
    token: String,
}

struct Node {
    name: String,
    dir: PathBuf,
    kernel: Kernel,
}

pub struct Cluster {
    store: Option<String>,
    nodes: Vec<Node>,
}

impl Cluster {
    /// `n` kernels on `store` (SQLite in `root` when None, for one node): one node
    /// in `root` itself, several each in `root/<name>`.
    pub async fn start(root: &Path, n: usize, store: Option<&str>) -> Self {
        let mut c = Cluster {
            store: store.map(str::to_owned),
            nodes: Vec::new(),
        };
        for i in 0..n {
            let name = format!("n{}", i + 1);
            let dir = if n == 1 {
                root.to_owned()
            } else {
                root.join(&name)
            };
            std::fs::create_dir_all(&dir).unwrap();
            let kernel = c.start_kernel(&dir, &name, n > 1).await;
            c.nodes.push(Node { name, dir, kernel });
        }
        c
    }

    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    pub fn name(&self, i: usize) -> &str {
        &self.nodes[i].name
    }

    pub fn dir(&self, i: usize) -> &Path {
        &self.nodes[i].dir
    }

    pub fn url(&self, i: usize) -> &str {
        &self.nodes[i].kernel.url
    }

    /// A lead's client of node `i`.
    pub fn lead(&self, i: usize) -> RawClient {
        let k = &self.nodes[i].kernel;
        RawClient::new(&k.url, &k.token)
    }

    /// Kills node `i` with SIGKILL and waits for it to be gone.
    pub async fn kill(&mut self, i: usize) {
        let k = &mut self.nodes[i].kernel;
        let _ = k.child.start_kill();
        let _ = k.child.wait().await;
    }

    /// Starts node `i` again on its data dir under its name; returns its pid.
    pub async fn restart(&mut self, i: usize) -> u32 {
        let several = self.nodes.len() > 1;
        let (dir, name) = (self.nodes[i].dir.clone(), self.nodes[i].name.clone());
        self.nodes[i].kernel = self.start_kernel(&dir, &name, several).await;
        self.nodes[i].kernel.child.id().unwrap_or(0)
    }

    /// Stops every node with SIGTERM, waiting up to 15 s for each.
    pub async fn stop(&mut self) {
        for n in &mut self.nodes {
            if let Some(pid) = n.kernel.child.id() {
                let pid = nix::unistd::Pid::from_raw(pid as i32);
                let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
            }
        }
        for n in &mut self.nodes {
            let _ = tokio::time::timeout(Duration::from_secs(15), n.kernel.child.wait()).await;
        }
    }

    /// Worker processes still alive in any node's data dir.
    pub fn workers(&self) -> usize {
        self.nodes.iter().map(|n| workers_in(&n.dir).len()).sum()
    }

    async fn start_kernel(&self, dir: &Path, name: &str, several: bool) -> Kernel {
        let lease = (several && std::env::var_os("AGENT_WORKER_NODE_LEASE").is_none())
            .then_some(("AGENT_WORKER_NODE_LEASE", LEASE));
        let store = self
            .store
            .as_deref()
            .map(|s| (agent_worker::config::STORE_ENV, s));
        let mut child = tokio::process::Command::new(std::env::current_exe().unwrap())
            .envs(store)
            .envs(lease)
            .arg(KERNEL_MODE)
            .args(["--http", "127.0.0.1:0", "--log", "warn", "--node", name])
            .arg("--data-dir")
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
            panic!("the kernel {name} exited before it served");
        })
        .await
        .unwrap_or_else(|_| panic!("the kernel {name} did not start in 30 s"));
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        let token = std::fs::read_to_string(dir.join("admin.token"))
            .unwrap()
            .trim()
            .to_owned();
        Kernel { child, url, token }
    }
}

/// Worker processes (this binary in `__worker` mode) working in `dir`, with their
/// parent pid.
pub fn workers_in(dir: &Path) -> Vec<(u32, u32)> {
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
