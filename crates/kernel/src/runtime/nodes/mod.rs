//! Nodes: the kernels that share a store, and which of them runs each agent.
//!
//! A node is a kernel with a name (`--node`, default the machine's host name). It
//! registers in the `nodes` table when it opens and writes a heartbeat while it
//! lives; the lead's `agent-worker://nodes` resource lists them. Every agent with a
//! worker is leased to one node, its `node` column: that node runs it (its runs,
//! schedule, retries and worker limit live there) and the agent's views show it.
//! A lease holds while its node's heartbeat is younger than the node's lease
//! ([`lease`], stored with the node), both by the store's clock, so machines whose
//! clocks disagree still agree on who is alive.
//!
//! Takeover: a node whose heartbeat is older than the lease is gone. Every live
//! node looks at each beat; the first to commit (writes are serialised) takes the
//! gone node's agents with the recovery a restart does (its runs closed `lost`
//! with the approvals they waited for, what they had read pending again, its CLI
//! conversations started afresh) and drops the node's row. A node that cannot
//! renew its lease for half of it (a heartbeat failing or hanging) stops its
//! workers itself, so that once others may take its agents, none of them still
//! runs there; one that finds its row gone (it was taken over) stops them and
//! registers again, with no agents. Underneath, the store refuses a run the
//! node's lease does not cover, and a run closed as lost settles nothing.
//!
//! SQLite has one kernel at a time (a file lock), so a kernel opening it takes
//! over every agent at once, whatever node ran it before. On PostgreSQL a kernel
//! that stops cleanly leaves the table, so the others take its agents at their next
//! beat; the bus (`bus.rs`) carries each node's events to the others.
//! `placing.rs` chooses the node of an agent (by name, or by labels a node offers
//! with `--labels`) and moves agents by hand.

mod bus;
mod fence;
pub(crate) mod placing;

pub(crate) use placing::{labels_of_tx, place_tx, require_live_tx};

use crate::runtime::approvals::Approvals;
use crate::runtime::base::Base;
use crate::runtime::scheduler::Scheduler;
use crate::runtime::workers::Workers;
use domain::clock::fmt_ms;
use domain::error::Result;
use domain::placement;
use schemars::JsonSchema;
use serde::Serialize;
use std::sync::OnceLock;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Weak};
use std::time::Duration;
use store::sql;

/// How long a node's lease lasts without a heartbeat (`AGENT_WORKER_NODE_LEASE`).
pub const DEFAULT_LEASE: Duration = Duration::from_secs(15);
/// The environment variable that sets the lease (a duration: `15s`, `3s`).
pub const LEASE_ENV: &str = "AGENT_WORKER_NODE_LEASE";

/// The lease: [`DEFAULT_LEASE`] unless `AGENT_WORKER_NODE_LEASE` says otherwise
/// (at least a second). A node beats five times per lease.
pub fn lease() -> Duration {
    static LEASE: std::sync::OnceLock<Duration> = std::sync::OnceLock::new();
    *LEASE.get_or_init(|| {
        std::env::var(LEASE_ENV)
            .ok()
            .and_then(|v| humantime::parse_duration(v.trim()).ok())
            .map_or(DEFAULT_LEASE, |d| d.max(Duration::from_secs(1)))
    })
}

fn heartbeat() -> Duration {
    lease() / 5
}
pub use store::FALLBACK_NODE;

/// A node as the nodes resource shows it.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct NodeView {
    /// Its name (`--node`; default the machine's host name).
    pub name: String,
    /// True for the node that answered this call.
    pub this: bool,
    /// Whether its heartbeat is recent (within its lease, 15 s by default), by the
    /// store's clock.
    pub alive: bool,
    /// Its loopback MCP endpoint, once it had one (reachable from its own machine).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Its process id, on its own machine.
    pub pid: i64,
    pub started_at: String,
    pub heartbeat_at: String,
    /// Agents leased to it (it runs them).
    pub agents: i64,
    /// Runs of its agents in progress.
    pub running: i64,
    /// The labels it offers (`--labels`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub labels: Vec<String>,
}

/// Checks a node name: 1 to 63 letters, digits, `.`, `_` or `-`, starting with a
/// letter or digit (a host name fits).
pub fn validate_name(name: &str) -> std::result::Result<(), String> {
    domain::placement::validate_name(name).map_err(|e| format!("node name {e}"))
}

/// The default node name: the machine's host name if it is a valid node name,
/// else [`FALLBACK_NODE`].
pub fn default_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_owned())
        .filter(|h| validate_name(h).is_ok())
        .unwrap_or_else(|| FALLBACK_NODE.into())
}

/// The lease in milliseconds, as stored with each node (each node is judged by its
/// own).
fn lease_ms() -> i64 {
    lease().as_millis() as i64
}

/// Registers `node`: started now, alive, with this kernel's lease and the labels
/// it offers (stored text, see [`domain::placement`]).
pub(crate) fn register_tx(c: &sql::Connection, node: &str, labels: &str) -> Result<()> {
    let now = c.now_ms()?;
    c.execute(
        "INSERT INTO nodes (name, pid, started_at, heartbeat_at, lease_ms, labels)
              VALUES (?1, ?2, ?3, ?3, ?4, ?5)
         ON CONFLICT (name) DO UPDATE SET pid = excluded.pid, url = NULL, lease_ms = excluded.lease_ms,
             started_at = excluded.started_at, heartbeat_at = excluded.heartbeat_at,
             labels = excluded.labels",
        sql::params![node, i64::from(std::process::id()), now, lease_ms(), labels],
    )?;
    Ok(())
}

/// The agents with a worker that no live node holds and that node `me`, offering
/// `offered`, may run (their labels are among its): (id, workflow id, name). By
/// the store's clock; `exclusive` (SQLite's one kernel) takes every one, labels
/// or not, since no other kernel can run them.
pub(crate) fn orphans_tx(
    c: &sql::Connection,
    me: &str,
    offered: &str,
    exclusive: bool,
) -> Result<Vec<(i64, i64, String)>> {
    // A node is alive while heartbeat_at + lease_ms >= cutoff.
    let cutoff = if exclusive { i64::MAX } else { c.now_ms()? };
    let mut st = c.prepare(
        "SELECT id, workflow_id, name, labels FROM agents
          WHERE backend NOT IN ('external', 'human') AND node IS DISTINCT FROM ?1
            AND NOT EXISTS (SELECT 1 FROM nodes n WHERE n.name = agents.node
                              AND n.heartbeat_at + n.lease_ms >= ?2)
          ORDER BY id",
    )?;
    let rows = st.query_map(sql::params![me, cutoff], |r| {
        Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get::<String>(3)?))
    })?;
    let mut out = Vec::new();
    for r in rows {
        let (id, wid, name, needed) = r?;
        if exclusive || domain::placement::satisfies(offered, &needed) {
            out.push((id, wid, name));
        }
    }
    Ok(out)
}

/// What a takeover moved.
#[derive(Debug, Default)]
pub(crate) struct Taken {
    /// The agents now leased to this node: (id, workflow id, name).
    pub agents: Vec<(i64, i64, String)>,
    /// Their runs that were in progress, closed as lost.
    pub lost_runs: usize,
    /// The nodes that were gone (their rows dropped).
    pub nodes: Vec<String>,
}

/// Takes over, for node `me` (offering the labels `offered`), every agent with a
/// worker that no live node holds and whose labels it has ([`orphans_tx`]): those
/// of nodes whose heartbeat is older than their lease by the store's clock (or
/// that are not in the table) and those never leased. An agent whose labels no
/// live node has waits, leased to the node that is gone, for one that has them.
/// Their runs in progress are closed as lost (with the approvals they waited for),
/// what they had read is pending again, their CLI conversations (files on the old
/// machine) start afresh, and the gone nodes' rows are dropped. `exclusive`
/// (SQLite's one kernel) takes over from every other node.
pub(crate) fn take_over_tx(
    c: &sql::Connection,
    me: &str,
    offered: &str,
    (exclusive, now): (bool, i64),
) -> Result<Taken> {
    let cutoff = if exclusive { i64::MAX } else { c.now_ms()? };
    let mut taken = Taken {
        agents: orphans_tx(c, me, offered, exclusive)?,
        ..Taken::default()
    };
    for (id, wid, name) in &taken.agents {
        c.execute(
            "UPDATE agents SET node = ?2, session_id = NULL, session_usage = NULL WHERE id = ?1",
            sql::params![id, me],
        )?;
        let runs: Vec<String> = c
            .prepare_cached("SELECT id FROM runs WHERE agent_id = ?1 AND status = 'running'")?
            .query_map([id], |r| r.get(0))?
            .collect::<sql::Result<_>>()?;
        taken.lost_runs += runs.len();
        for r in &runs {
            crate::governance::approvals::lose_run_tx(c, r, now)?;
        }
        crate::runtime::runs::close_lost_tx(c, &runs, now)?;
        // The members' votes on their approvals close too (in the channel).
        crate::context::proposals::held::close_settled_tx(c, now)?;
        c.execute(
            "UPDATE agents SET state = 'idle' WHERE id = ?1 AND state = 'running'",
            [id],
        )?;
        crate::messaging::runs::requeue_seen_tx(c, *wid, name)?;
    }
    let mut st = c.prepare(
        "DELETE FROM nodes WHERE name <> ?1 AND heartbeat_at + lease_ms < ?2 RETURNING name",
    )?;
    taken.nodes = st
        .query_map(sql::params![me, cutoff], |r| r.get(0))?
        .collect::<sql::Result<_>>()?;
    Ok(taken)
}

fn node_row(r: &sql::Row, this: &str) -> sql::Result<NodeView> {
    let name: String = r.get(0)?;
    Ok(NodeView {
        this: name == this,
        alive: r.get(7)?,
        name,
        url: r.get(1)?,
        pid: r.get(2)?,
        started_at: fmt_ms(r.get(3)?),
        heartbeat_at: fmt_ms(r.get(4)?),
        agents: r.get(5)?,
        running: r.get(6)?,
        labels: placement::from_text(&r.get::<String>(8)?),
    })
}

/// This node among the others: its heartbeat and lease, the takeover of nodes
/// that are gone, and (in `bus.rs`) the events between them.
pub struct Nodes {
    base: Arc<Base>,
    scheduler: Arc<Scheduler>,
    workers: Arc<Workers>,
    approvals: Arc<Approvals>,
    /// The bus to the other kernels of the store, once joined (PostgreSQL only).
    bus: OnceLock<Arc<store::bus::Bus>>,
    /// Set when the node leaves the store (a clean stop): no more heartbeats.
    leaving: AtomicBool,
    /// A takeover of gone nodes is in progress (see `take_over_aside`).
    taking: AtomicBool,
}

impl Nodes {
    pub(crate) fn new(
        base: Arc<Base>,
        scheduler: Arc<Scheduler>,
        workers: Arc<Workers>,
        approvals: Arc<Approvals>,
    ) -> Self {
        Self {
            base,
            scheduler,
            workers,
            approvals,
            bus: OnceLock::new(),
            leaving: AtomicBool::new(false),
            taking: AtomicBool::new(false),
        }
    }

    /// Every node registered in the store, this one first, then by name.
    pub async fn node_list(&self) -> Result<Vec<NodeView>> {
        let me = self.base.node.clone();
        self.base
            .store
            .read(move |c| {
                let now = c.now_ms()?;
                let mut st = c.prepare(
                    "SELECT n.name, n.url, n.pid, n.started_at, n.heartbeat_at,
                            (SELECT count(*) FROM agents a WHERE a.node = n.name),
                            (SELECT count(*) FROM runs r JOIN agents a ON a.id = r.agent_id
                              WHERE a.node = n.name AND r.status = 'running'),
                            n.heartbeat_at + n.lease_ms >= ?2, n.labels
                       FROM nodes n ORDER BY n.name <> ?1, n.name",
                )?;
                let rows = st
                    .query_map(sql::params![me, now], |r| node_row(r, &me))?
                    .collect::<sql::Result<Vec<_>>>()?;
                Ok(rows)
            })
            .await
    }

    /// Writes this node's heartbeat and URL now (so the nodes resource shows them
    /// from the first request), then five times per lease while the kernel lives,
    /// each time taking over from nodes that are gone (see the module docs).
    ///
    /// Fencing (a shared store only, `fence.rs`): a heartbeat that fails or hangs
    /// counts as not renewed; after half the lease without one, this node stops its
    /// workers, since others may take its agents once the lease is out. The first
    /// heartbeat that gets through again serves what the stopped runs left pending.
    pub(crate) async fn start_heartbeat(self: &Arc<Self>) -> Result<()> {
        let began = tokio::time::Instant::now();
        self.beat().await?;
        let every = heartbeat();
        let fence = Arc::new(fence::Fence::new(lease(), every, began));
        // One kernel on its store (SQLite): nobody else could take its agents.
        if !self.base.store.is_exclusive() {
            tokio::spawn(self.clone().fence(fence.clone()));
        }
        let weak: Weak<Self> = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let Some(k) = weak.upgrade() else { return };
                if k.leaving.load(std::sync::atomic::Ordering::Relaxed) {
                    return;
                }
                let began = tokio::time::Instant::now();
                match tokio::time::timeout(every, k.beat()).await {
                    Ok(Ok(())) => {
                        if fence.renewed(began) {
                            k.scheduler.request_rescan();
                        }
                        k.take_over_aside();
                    }
                    Ok(Err(e)) => tracing::warn!("node heartbeat not written: {e}"),
                    Err(_) => tracing::warn!("node heartbeat not written within {every:?}"),
                }
            }
        });
        Ok(())
    }

    /// Takes over from gone nodes on a task of its own, one takeover at a time: a
    /// beat never waits for one (a slow takeover, or one hanging on a database
    /// that stopped answering, would hold the next beat and so fence this node).
    fn take_over_aside(self: &Arc<Self>) {
        if self.taking.swap(true, std::sync::atomic::Ordering::SeqCst) {
            return;
        }
        /// Clears `taking` however the takeover ends (a panic too), so that one
        /// bad takeover does not end every later one.
        struct Taking(Arc<Nodes>);
        impl Drop for Taking {
            fn drop(&mut self) {
                self.0
                    .taking
                    .store(false, std::sync::atomic::Ordering::SeqCst);
            }
        }
        let k = Taking(self.clone());
        tokio::spawn(async move {
            if let Err(e) = k.0.take_over_gone().await {
                tracing::warn!("takeover of gone nodes failed: {e}");
            }
        });
    }

    /// Stops this node's workers whenever its lease went half its time unrenewed,
    /// until the node is gone or leaves.
    async fn fence(self: Arc<Self>, fence: Arc<fence::Fence>) {
        let weak: Weak<Self> = Arc::downgrade(&self);
        drop(self);
        loop {
            let first = match fence.next(tokio::time::Instant::now()) {
                fence::Next::Sleep(until) => {
                    tokio::time::sleep_until(until).await;
                    continue;
                }
                fence::Next::Stop { first } => first,
            };
            let Some(k) = weak.upgrade() else { return };
            if k.leaving.load(std::sync::atomic::Ordering::Relaxed) {
                return;
            }
            if first {
                tracing::error!(
                    "the lease could not be renewed for half its time: stopping this node's workers"
                );
            }
            k.workers.stop_all_runs().await;
            drop(k);
            tokio::time::sleep(fence.again()).await;
        }
    }

    /// Renews this node's lease. A node that finds its row gone was taken over:
    /// it stops its workers (their agents run elsewhere now) and registers again.
    async fn beat(self: &Arc<Self>) -> Result<()> {
        let (node, url) = (self.base.node.clone(), self.base.url().map(str::to_owned));
        let found = self
            .base
            .store
            .write(move |c| {
                let now = c.now_ms()?;
                Ok(c.execute(
                    "UPDATE nodes SET heartbeat_at = ?2, url = ?3 WHERE name = ?1",
                    sql::params![node, now, url],
                )?)
            })
            .await?;
        if found == 0 {
            tracing::error!(
                node = %self.base.node,
                "this node was taken over by another (its heartbeat was late): stopping its workers and registering again"
            );
            self.workers.stop_all_runs().await;
            self.scheduler.forget_all_agents();
            let (node, url) = (self.base.node.clone(), self.base.url().map(str::to_owned));
            let labels = self.base.labels.clone();
            self.base
                .store
                .write(move |c| {
                    register_tx(c, &node, &labels)?;
                    c.execute(
                        "UPDATE nodes SET url = ?2 WHERE name = ?1",
                        sql::params![node, url],
                    )?;
                    Ok(())
                })
                .await?;
        }
        Ok(())
    }

    /// Takes over the agents of nodes whose lease ran out (PostgreSQL; on SQLite the
    /// one kernel took every agent when it opened), then serves what they are owed.
    async fn take_over_gone(self: &Arc<Self>) -> Result<()> {
        if self.base.store.is_exclusive() {
            return Ok(());
        }
        let (me, labels) = (self.base.node.clone(), self.base.labels.clone());
        // A read first: the common case (nobody is gone) writes nothing.
        let gone: bool = self
            .base.store
            .read(move |c| {
                let now = c.now_ms()?;
                let nodes_gone: bool = c.query_row(
                    "SELECT EXISTS (SELECT 1 FROM nodes WHERE name <> ?1 AND heartbeat_at + lease_ms < ?2)",
                    sql::params![me, now],
                    |r| r.get(0),
                )?;
                Ok(nodes_gone || !orphans_tx(c, &me, &labels, false)?.is_empty())
            })
            .await?;
        if !gone {
            return Ok(());
        }
        let (me, labels) = (self.base.node.clone(), self.base.labels.clone());
        let now = self.base.clock.now_ms();
        let taken = self
            .base
            .store
            .write(move |c| take_over_tx(c, &me, &labels, (false, now)))
            .await?;
        self.after_takeover(&taken).await;
        Ok(())
    }

    /// Tells the lead and the scheduler about agents this node took over, and arms
    /// the deadlines of the approvals they wait for (those timers were the gone
    /// node's).
    pub(crate) async fn after_takeover(self: &Arc<Self>, taken: &Taken) {
        if taken.agents.is_empty() && taken.nodes.is_empty() {
            return;
        }
        tracing::warn!(
            agents = taken.agents.len(),
            lost_runs = taken.lost_runs,
            gone = ?taken.nodes,
            "took over the agents of nodes that stopped heartbeating"
        );
        for (_, wid, name) in &taken.agents {
            self.base
                .events
                .publish(crate::events::Event::AgentChanged {
                    workflow_id: *wid,
                    name: name.clone(),
                });
        }
        if let Err(e) = self.approvals.recover().await {
            tracing::warn!("approvals not re-armed after a takeover: {e}");
        }
        self.scheduler.request_rescan();
    }

    /// Leaves the table (a clean stop): the other nodes take this one's agents at
    /// their next beat instead of after the lease.
    pub async fn leave(&self) -> Result<()> {
        self.leaving
            .store(true, std::sync::atomic::Ordering::Relaxed);
        let node = self.base.node.clone();
        self.base
            .store
            .write(move |c| {
                c.execute("DELETE FROM nodes WHERE name = ?1", [&node])?;
                Ok(())
            })
            .await
    }
}
