//! Nodes: the kernels that share a store, and which of them runs each agent.
//!
//! A node is a kernel with a name (`--node`, default the machine's host name). It
//! registers in the `nodes` table when it opens and writes a heartbeat while it
//! lives, so the nodes resource (`agent-worker://nodes`) can say which are alive. Every agent with a worker is
//! leased to one node, its `node` column: that node runs it (its runs, schedule
//! and retries live there) and the agent's views show it.
//!
//! For now a store has one kernel at a time (SQLite: one process per file;
//! PostgreSQL: the writer's session lock), so a kernel that opens takes over every
//! agent, whichever node ran it before: the previous kernel is gone, and its runs
//! are closed as lost and its read messages made pending again, as after any
//! restart. Nodes that are gone and run nothing are dropped from the table then.

use crate::error::{Error, Result};
use crate::kernel::Kernel;
use crate::kernel::clock::{fmt_ms, now_ms};
use crate::kernel::store::sql;
use schemars::JsonSchema;
use serde::Serialize;
use std::sync::{Arc, Weak};
use std::time::Duration;

/// How often a node writes its heartbeat.
pub const HEARTBEAT: Duration = Duration::from_secs(3);
/// A node whose last heartbeat is older than this is no longer alive.
pub const LEASE: Duration = Duration::from_secs(15);
/// The node name when neither `--node` nor the host name gives one.
pub const FALLBACK_NODE: &str = "local";
const MAX_NODE_NAME: usize = 63;

/// A node as the nodes resource shows it.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct NodeView {
    /// Its name (`--node`; default the machine's host name).
    pub name: String,
    /// True for the node that answered this call.
    pub this: bool,
    /// Whether its heartbeat is recent (within the lease, 15 s).
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
}

/// Checks a node name: 1 to 63 letters, digits, `.`, `_` or `-`, starting with a
/// letter or digit (a host name fits).
pub fn validate_name(name: &str) -> std::result::Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= MAX_NODE_NAME
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "node name {name:?}: use 1 to {MAX_NODE_NAME} letters, digits, '.', '_' or '-', \
             starting with a letter or digit"
        ))
    }
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

/// Registers `node` (started now, alive) and takes over every agent with a worker
/// (see the module docs); drops nodes that are gone and run nothing. Returns how
/// many agents came from other nodes. Runs in the open, before recovery, so the
/// recovery that follows is this node's.
pub(crate) fn register_and_take_over(c: &sql::Connection, node: &str) -> Result<usize> {
    let now = now_ms();
    c.execute(
        "INSERT INTO nodes (name, pid, started_at, heartbeat_at) VALUES (?1, ?2, ?3, ?3)
         ON CONFLICT (name) DO UPDATE SET pid = excluded.pid, url = NULL,
             started_at = excluded.started_at, heartbeat_at = excluded.heartbeat_at",
        sql::params![node, i64::from(std::process::id()), now],
    )?;
    let moved = c.execute(
        "UPDATE agents SET node = ?1
          WHERE node IS DISTINCT FROM ?1 AND backend NOT IN ('external', 'human')",
        [node],
    )?;
    c.execute(
        "DELETE FROM nodes WHERE name <> ?1
           AND NOT EXISTS (SELECT 1 FROM agents a WHERE a.node = nodes.name)",
        [node],
    )?;
    Ok(moved)
}

fn node_row(r: &sql::Row, this: &str, now: i64) -> sql::Result<NodeView> {
    let name: String = r.get(0)?;
    let heartbeat: i64 = r.get(4)?;
    Ok(NodeView {
        this: name == this,
        alive: now - heartbeat <= LEASE.as_millis() as i64,
        name,
        url: r.get(1)?,
        pid: r.get(2)?,
        started_at: fmt_ms(r.get(3)?),
        heartbeat_at: fmt_ms(heartbeat),
        agents: r.get(5)?,
        running: r.get(6)?,
    })
}

impl Kernel {
    /// This kernel's node name.
    pub fn node(&self) -> &str {
        &self.node
    }

    /// Every node registered in the store, this one first, then by name.
    pub async fn node_list(&self) -> Result<Vec<NodeView>> {
        let me = self.node.clone();
        self.store
            .read(move |c| {
                let mut st = c.prepare(
                    "SELECT n.name, n.url, n.pid, n.started_at, n.heartbeat_at,
                            (SELECT count(*) FROM agents a WHERE a.node = n.name),
                            (SELECT count(*) FROM runs r JOIN agents a ON a.id = r.agent_id
                              WHERE a.node = n.name AND r.status = 'running')
                       FROM nodes n ORDER BY n.name <> ?1, n.name",
                )?;
                let now = now_ms();
                let rows = st
                    .query_map([&me], |r| node_row(r, &me, now))?
                    .collect::<sql::Result<Vec<_>>>()?;
                Ok(rows)
            })
            .await
    }

    /// Writes this node's heartbeat and URL now (so the nodes resource shows them from the
    /// first request), then every [`HEARTBEAT`] while the kernel lives. A failed
    /// later write is logged and tried again at the next beat.
    pub(crate) async fn start_heartbeat(self: &Arc<Self>) -> Result<()> {
        self.beat().await?;
        let weak: Weak<Self> = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut tick =
                tokio::time::interval_at(tokio::time::Instant::now() + HEARTBEAT, HEARTBEAT);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let Some(k) = weak.upgrade() else { return };
                if let Err(e) = k.beat().await {
                    tracing::warn!("node heartbeat not written: {e}");
                }
            }
        });
        Ok(())
    }

    async fn beat(&self) -> Result<()> {
        let (node, url) = (self.node.clone(), self.url().map(str::to_owned));
        let found = self
            .store
            .write(move |c| {
                Ok(c.execute(
                    "UPDATE nodes SET heartbeat_at = ?2, url = ?3 WHERE name = ?1",
                    sql::params![node, now_ms(), url],
                )?)
            })
            .await?;
        if found == 0 {
            return Err(Error::internal(format!(
                "node {} is no longer registered in the store",
                self.node
            )));
        }
        Ok(())
    }
}
