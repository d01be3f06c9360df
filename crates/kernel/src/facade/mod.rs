//! The kernel as the MCP layer sees it: the composition root that builds the rooms
//! (each a service that owns its state, built from the store, the clock, the
//! event bus and the rooms below it), the rooms themselves, and a façade for what
//! no one room decides. The MCP layer calls a room's own method where the room
//! decides alone (`kernel.messaging().channel_send(..)`: the room's documentation
//! is there); a `Kernel` method exists only where it composes rooms (an
//! organisation's members deleted as agents, a vote that decides an approval) or
//! checks what the caller named before the room acts (a contract's instance and
//! organisation). A room's method that is only half of such a composition is
//! `pub(crate)`, so the compiler sends the MCP layer here. `impl Kernel` lives
//! here and nowhere else (a tidy test keeps it so).

mod context;
mod contracts;
mod feedback;
mod orgs;
mod registry;
mod runtime;

use crate::events::Events;
use crate::{
    context as ctx, feedback as fb, governance, hooks as hk, messaging as msg, registry as reg,
    runtime as rt, tasks as tk,
    timing::{Clock, Setup},
    workflows as wf,
};
use domain::error::{Error, Result};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use store::Store;

pub struct Kernel {
    pub(crate) store: Store,
    pub events: Events,
    /// The clock every room reads.
    clock: Clock,
    /// Workflow instances, agents and their tokens.
    pub(crate) registry: Arc<reg::Registry>,
    data_dir: PathBuf,
    /// Documents and proposals.
    pub(crate) context: Arc<ctx::Context>,
    /// Agents as things that run: workers, the scheduler, nodes.
    pub(crate) runtime: Arc<rt::Runtime>,
    /// The task board of every instance.
    pub(crate) tasks: Arc<tk::Tasks>,
    /// Workflow runs from YAML: started, settled, stopped.
    pub(crate) workflows: Arc<wf::Workflows>,
    /// The contracts in force (hot-loaded on every change).
    pub(crate) contracts: Arc<governance::contracts::Contracts>,
    /// The channel and the inboxes.
    pub(crate) messaging: Arc<msg::Messaging>,
    /// What members report about their tools and skills.
    pub(crate) feedback: Arc<fb::FeedbackRoom>,
    /// Events from outside: hooks declared, requests to them checked and acted
    /// on (a field, as `events` is: the room decides alone, and the façade's
    /// methods are kept for what composes rooms).
    pub hooks: Arc<hk::Hooks>,
}

impl Kernel {
    /// Opens the data dir's database and recovers from the previous run: deliveries
    /// that were read but not acked go back to pending, so nothing is lost.
    pub async fn open(data_dir: &Path, admin_token: String) -> Result<Arc<Self>> {
        let store = store::Location::in_data_dir(data_dir);
        Self::open_at(data_dir, admin_token, &store, &rt::nodes::default_name()).await
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
        Self::open_timed(data_dir, admin_token, store, node, Setup::production()).await
    }

    /// [`Kernel::open_at`] with the given [`Setup`] (a test's manual clock, short
    /// retries, the binary its workers run).
    pub async fn open_timed(
        data_dir: &Path,
        admin_token: String,
        store: &store::Location,
        node: &str,
        setup: Setup,
    ) -> Result<Arc<Self>> {
        rt::nodes::validate_name(node).map_err(Error::invalid)?;
        let (location, me, dir) = (store.clone(), node.to_owned(), data_dir.to_owned());
        // The data dir as an absolute path without links: worktrees and folders the
        // kernel hands to git and to workers are named from it.
        let (store, data_dir) = tokio::task::spawn_blocking(move || {
            let cannot = |e: std::io::Error| {
                Error::internal(format!("cannot create data dir {}: {e}", dir.display()))
            };
            std::fs::create_dir_all(&dir).map_err(cannot)?;
            let dir = std::fs::canonicalize(&dir).map_err(cannot)?;
            Ok::<_, Error>((Store::open_as(&location, &me)?, dir))
        })
        .await
        .map_err(|e| Error::internal(format!("the store did not open: {e}")))??;
        let kernel = Arc::new(Self::compose(store, admin_token, (&data_dir, node), setup));
        kernel.recover(node).await?;
        Ok(kernel)
    }

    /// Builds each room from the store, the events, the clock and the rooms below it.
    fn compose(
        store: Store,
        admin_token: String,
        (data_dir, node): (&Path, &str),
        setup: Setup,
    ) -> Self {
        let events = Events::default();
        let clock = setup.clock.clone();
        let registry = Arc::new(reg::Registry::new(
            store.clone(),
            clock.clone(),
            admin_token,
        ));
        let contracts = Arc::new(governance::contracts::Contracts::new(
            store.clone(),
            events.clone(),
            clock.clone(),
        ));
        let messaging = Arc::new(msg::Messaging::new(
            (store.clone(), events.clone(), clock.clone()),
            contracts.clone(),
            node.to_owned(),
        ));
        let context = Arc::new(ctx::Context::new(
            (store.clone(), events.clone(), clock.clone()),
            contracts.clone(),
            (registry.clone(), messaging.clone()),
            data_dir.to_owned(),
        ));
        let runtime = Arc::new(rt::Runtime::new(
            rt::Below {
                store: store.clone(),
                events: events.clone(),
                contracts: contracts.clone(),
                registry: registry.clone(),
                messaging: messaging.clone(),
            },
            data_dir.to_owned(),
            node.to_owned(),
            setup,
        ));
        let tasks = Arc::new(tk::Tasks::new(
            (store.clone(), events.clone(), runtime.clock().clone()),
            contracts.clone(),
            messaging.clone(),
            Arc::downgrade(&runtime),
        ));
        let waiting = Arc::downgrade(&tasks) as std::sync::Weak<dyn rt::scheduler::Waiting>;
        runtime.scheduler().waiting_with(waiting);
        let feedback = Arc::new(fb::FeedbackRoom::new(
            store.clone(),
            events.clone(),
            clock.clone(),
        ));
        let workflows = Arc::new(wf::Workflows::new(
            // The same clock, as the runtime holds it.
            (store.clone(), events.clone(), runtime.clock().clone()),
            wf::Rooms {
                feedback: feedback.clone(),
                contracts: contracts.clone(),
                registry: registry.clone(),
                messaging: messaging.clone(),
                context: context.clone(),
                runtime: runtime.clone(),
            },
            data_dir.to_owned(),
        ));
        let hooks = Arc::new(hk::Hooks::new(
            (store.clone(), events.clone(), runtime.clock().clone()),
            (contracts.clone(), runtime.clone()),
            (registry.clone(), messaging.clone(), workflows.clone()),
        ));
        Self {
            hooks,
            registry,
            store,
            events,
            clock,
            data_dir: data_dir.to_owned(),
            context,
            runtime,
            tasks,
            workflows,
            contracts,
            messaging,
            feedback,
        }
    }

    /// Recovers from the previous run: this node's agents, and those no live node
    /// holds (every other node's, on SQLite), are taken over; lost runs closed;
    /// what they left in worktrees committed; read but unacked deliveries pending
    /// again; approvals and proposals timed.
    async fn recover(&self, node: &str) -> Result<()> {
        self.contracts.reload().await?;
        let (me, exclusive) = (node.to_owned(), self.store.is_exclusive());
        let labels = self.runtime.labels().to_owned();
        let now = self.runtime.clock().now_ms();
        let taken = self
            .store
            .write(move |c| {
                rt::nodes::register_tx(c, &me, &labels)?;
                rt::nodes::take_over_tx(c, &me, &labels, (exclusive, now))
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
        let lost = self.runtime.recover_runs().await?;
        if lost > 0 {
            tracing::warn!(
                lost,
                "runs in progress when the previous kernel stopped are closed as lost"
            );
        }
        self.runtime.recover_worktrees().await?;
        let requeued = self.messaging.requeue_seen().await?;
        if requeued > 0 {
            tracing::info!(
                requeued,
                "deliveries read but not acked before the restart are pending again"
            );
        }
        self.runtime.recover_approvals().await?;
        let released = self.tasks.settle(None).await?;
        if released > 0 {
            tracing::info!(
                released,
                "tasks claimed by runs that are gone are open again"
            );
        }
        self.context.start_proposal_timer();
        Ok(())
    }

    /// Starts what runs by itself once the HTTP endpoint is known (workers need its
    /// URL): the scheduler, which serves what the store says is owed, and the
    /// workflows room's watch on it.
    pub async fn start(self: &Arc<Self>) -> Result<()> {
        self.runtime.start_bus()?;
        self.runtime.start_heartbeat().await?;
        self.workflows.start_workflow_watch();
        self.tasks.start_watch();
        self.hooks.start_watch();
        self.hooks.start_recovery();
        self.runtime.start_scheduler().await?;
        // Step graphs whose events came while no kernel listened move on now.
        self.workflows.recover_steps().await
    }

    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    /// The kernel's clock (what a client is told the time is, e.g. the dashboard's).
    pub fn clock(&self) -> &Clock {
        &self.clock
    }

    /// Agents as things that run: their workers, schedules, approvals, nodes.
    pub fn runtime(&self) -> &Arc<rt::Runtime> {
        &self.runtime
    }

    /// Who is who: instances, agents, their tokens, organisations.
    pub fn registry(&self) -> &Arc<reg::Registry> {
        &self.registry
    }

    /// The channel, the inboxes, status and resources.
    pub fn messaging(&self) -> &Arc<msg::Messaging> {
        &self.messaging
    }

    /// Documents and proposals.
    pub fn context(&self) -> &Arc<ctx::Context> {
        &self.context
    }

    /// The task board: tasks added, claimed, moved, listed.
    pub fn tasks(&self) -> &Arc<tk::Tasks> {
        &self.tasks
    }

    /// Workflow runs from YAML: started, waited on, stopped, listed.
    pub fn workflows(&self) -> &Arc<wf::Workflows> {
        &self.workflows
    }
}
