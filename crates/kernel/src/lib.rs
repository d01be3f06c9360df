//! The kernel: one per data dir, the single source of truth. It owns the store and
//! decides what a caller may see and change. The MCP layer above only translates.
//!
//! Each concept lives in its own module as an `impl Kernel` block:
//! `registry` (workflows, agents), `tokens` (identity), `messaging` (channel),
//! `inbox` (deliveries and their state), `team` (status and members), `resources`
//! (content-addressed blobs), `documents` (shared files behind providers),
//! `proposals` (votes and their resolution).

pub mod context;
pub mod events;
mod facade;
pub mod governance;
pub mod messaging;
pub mod registry;
pub mod runtime;
pub mod timing;
pub mod workflows;

#[cfg(test)]
mod sql_states;

use domain::error::{Error, Result};
use domain::names::WorkflowRef;
use events::Events;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use store::Store;

/// The variable the stdio configs agent_join hands out put the agent's token in
/// (named by their `--token-env`).
pub const AGENT_TOKEN_ENV: &str = "AGENT_WORKER_AGENT_TOKEN";

/// Where a data dir remembers its kernel's loopback port, so that every kernel
/// started on it (after an idle exit, a restart) serves the same URL.
pub const PORT_FILE: &str = "kernel.port";

pub use store::DB_FILE;

/// Who is calling. Resolved per request by the MCP layer (stdio and the admin token
/// are the lead; an agent token is one agent in one workflow instance).
#[derive(Debug, Clone)]
pub enum Caller {
    Lead,
    Agent(AgentIdentity),
}

#[derive(Debug, Clone)]
pub struct AgentIdentity {
    pub agent_id: i64,
    pub name: String,
    pub workflow: WorkflowRef,
    pub workflow_id: i64,
    /// The worker run this token was minted for (None for an agent_join client):
    /// what the run reads is recorded as read by it.
    pub run_id: Option<String>,
}

impl Caller {
    pub fn is_lead(&self) -> bool {
        matches!(self, Caller::Lead)
    }
}

/// The workflow instance a context tool acts in, and as whom.
#[derive(Debug, Clone)]
pub struct Scope {
    pub workflow: WorkflowRef,
    pub workflow_id: i64,
    /// The member name the caller acts as (`user` for the lead).
    pub me: String,
    pub lead: bool,
    /// The worker run acting, when the caller is one (see [`AgentIdentity::run_id`]).
    pub run_id: Option<String>,
}

pub struct Kernel {
    pub(crate) store: Store,
    pub events: Events,
    /// Workflow instances, agents and their tokens.
    pub(crate) registry: Arc<registry::Registry>,
    data_dir: PathBuf,
    /// Documents and proposals.
    pub(crate) context: Arc<context::Context>,
    /// Agents as things that run: workers, the scheduler, nodes.
    pub(crate) runtime: Arc<runtime::Runtime>,
    /// The contracts in force (hot-loaded on every change).
    pub(crate) contracts: Arc<governance::contracts::Contracts>,
    /// The channel and the inboxes.
    pub(crate) messaging: Arc<messaging::Messaging>,
}

/// The binary a worker runs: this one, unless `AGENT_WORKER_EXE` names another
/// (embedding the kernel in a program that is not agent-worker, e.g. a test).
pub(crate) fn worker_exe() -> PathBuf {
    std::env::var_os("AGENT_WORKER_EXE")
        .map(PathBuf::from)
        .or_else(|| std::env::current_exe().ok())
        .unwrap_or_else(|| PathBuf::from("agent-worker"))
}

impl Kernel {
    /// Opens the data dir's database and recovers from the previous run: deliveries
    /// that were read but not acked go back to pending, so nothing is lost.
    pub async fn open(data_dir: &Path, admin_token: String) -> Result<Arc<Self>> {
        let store = store::Location::in_data_dir(data_dir);
        Self::open_at(
            data_dir,
            admin_token,
            &store,
            &runtime::nodes::default_name(),
        )
        .await
    }

    /// [`Kernel::open`] with the state at `store` (SQLite or PostgreSQL), as node
    /// `node`; the data dir still holds the logs, document folders and workers'
    /// scratch space.
    pub async fn open_at(
        data_dir: &Path,
        admin_token: String,
        store: &store::Location,
        node: &str,
    ) -> Result<Arc<Self>> {
        let (clock, timing) = (timing::Clock::system(), timing::Timing::from_env());
        Self::open_timed(data_dir, admin_token, store, node, clock, timing).await
    }

    /// [`Kernel::open_at`] on the given clock and delays (a test's manual clock and
    /// short retries; production's are the system clock and [`timing::Timing::from_env`]).
    pub async fn open_timed(
        data_dir: &Path,
        admin_token: String,
        store: &store::Location,
        node: &str,
        clock: timing::Clock,
        timing: timing::Timing,
    ) -> Result<Arc<Self>> {
        runtime::nodes::validate_name(node).map_err(Error::invalid)?;
        std::fs::create_dir_all(data_dir).map_err(|e| {
            Error::internal(format!(
                "cannot create data dir {}: {e}",
                data_dir.display()
            ))
        })?;
        let (location, me) = (store.clone(), node.to_owned());
        let store = tokio::task::spawn_blocking(move || Store::open_as(&location, &me))
            .await
            .map_err(|e| Error::internal(format!("the store did not open: {e}")))??;
        let events = Events::default();
        let registry = Arc::new(registry::Registry::new(store.clone(), admin_token));
        let contracts = Arc::new(governance::contracts::Contracts::new(
            store.clone(),
            events.clone(),
        ));
        let messaging = Arc::new(messaging::Messaging::new(
            store.clone(),
            events.clone(),
            contracts.clone(),
            node.to_owned(),
        ));
        let context = Arc::new(context::Context::new(
            store.clone(),
            events.clone(),
            contracts.clone(),
            (registry.clone(), messaging.clone()),
            data_dir.to_owned(),
        ));
        let runtime = Arc::new(runtime::Runtime::new(
            runtime::Below {
                store: store.clone(),
                events: events.clone(),
                contracts: contracts.clone(),
                registry: registry.clone(),
                messaging: messaging.clone(),
            },
            data_dir.to_owned(),
            node.to_owned(),
            clock,
            timing,
        ));
        let kernel = Arc::new(Self {
            registry,
            store,
            events,
            data_dir: data_dir.to_owned(),
            context,
            runtime,
            contracts,
            messaging,
        });
        kernel.contracts.reload().await?;
        // This node's agents, and those no live node holds (every other node's, on
        // SQLite), are recovered below as after a restart.
        let (me, exclusive) = (node.to_owned(), kernel.store.is_exclusive());
        let taken = kernel
            .store
            .write(move |c| {
                runtime::nodes::register_tx(c, &me)?;
                runtime::nodes::take_over_tx(c, &me, exclusive)
            })
            .await?;
        if !taken.agents.is_empty() {
            tracing::info!(
                agents = taken.agents.len(),
                lost_runs = taken.lost_runs,
                node,
                "agents of nodes that are gone are run by this one now"
            );
        }
        let lost = kernel.runtime.recover_runs().await?;
        if lost > 0 {
            tracing::warn!(
                lost,
                "runs in progress when the previous kernel stopped are closed as lost"
            );
        }
        let requeued = kernel.messaging.requeue_seen().await?;
        if requeued > 0 {
            tracing::info!(
                requeued,
                "deliveries read but not acked before the restart are pending again"
            );
        }
        kernel.runtime.recover_approvals().await?;
        kernel.context.start_proposal_timer();
        Ok(kernel)
    }

    /// Starts what runs by itself once the HTTP endpoint is known (workers need its
    /// URL): the scheduler, which serves what the store says is owed, and the
    /// workflows room's watch on it.
    pub async fn start(self: &Arc<Self>) -> Result<()> {
        self.runtime.start_bus()?;
        self.runtime.start_heartbeat().await?;
        self.start_workflow_watch();
        self.runtime.start_scheduler().await
    }

    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }
}
