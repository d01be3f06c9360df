//! The runtime: agents as things that run. Their lifecycle (create, change,
//! delete, what they did), the process manager and its run records, the
//! scheduler that decides when they run, their schedules and guards, agent_ask,
//! backend readiness, and the nodes that run them.
//!
//! It sits on messaging and the registry (below); workflows sit above it and hear
//! from it through events (a workflow run that went quiet, an agent that failed).
//!
//! It is made of services, each owning its state and built from the [`base::Base`]
//! (store, events, rooms below, clock) and the services below it, never above:
//! running (the table of runs in progress) < approvals < spending < worktrees <
//! workers (the process manager) < scheduler < nodes < agents, with branches,
//! asks and requests on top, and delegation (agents making and asking agents of
//! their own) over agents, asks and approvals. What goes up (a run's end to the scheduler, a closed
//! approval to whoever it releases) goes through a trait the lower service
//! defines. [`Runtime`] only composes them (`tests/tidy_runtime.rs` keeps the
//! order acyclic).

pub mod agents;
pub mod approvals;
pub mod ask;
pub mod backends;
pub mod base;
pub mod delegation;
pub mod idle;
pub mod nodes;
pub mod own_folder;
pub mod requests;
mod running;
pub mod runs;
pub mod scheduler;
pub mod schedules;
pub mod skills;
pub mod spending;
pub(crate) mod verdict;
pub(crate) mod voting;
pub mod workers;
pub mod worktrees;

use crate::timing::Clock;
use agents::Agents;
use approvals::{Approvals, Follow, MergeClosed};
use ask::Asks;
use base::Base;
pub use base::Below;
use domain::error::Result;
use domain::names::WorkflowRef;
use domain::states::Wake;
use domain::workspace::Worktree;
use futures::future::BoxFuture;
use nodes::Nodes;
use requests::Requests;
use running::Running;
use scheduler::Scheduler;
use spending::Spending;
use std::path::PathBuf;
use std::sync::atomic::AtomicI64;
use std::sync::{Arc, Weak};
use workers::{RunHandle, Workers};
use worktrees::{Branches, Worktrees};

/// The runtime as a room: the composition of its services.
pub struct Runtime {
    base: Arc<Base>,
    workers: Arc<Workers>,
    scheduler: Arc<Scheduler>,
    approvals: Arc<Approvals>,
    nodes: Arc<Nodes>,
    worktrees: Arc<Worktrees>,
    branches: Arc<Branches>,
    agents: Arc<Agents>,
    asks: Arc<Asks>,
    requests: Arc<Requests>,
    delegation: Arc<delegation::Delegation>,
    /// When a client last made a request (ms since the epoch): a background kernel
    /// exits only after a while without one (see [`idle`]).
    last_client: AtomicI64,
}

/// What a closed approval releases, above the approvals: the scheduler and the
/// branches, held weakly (they hold the approvals).
struct Released {
    scheduler: Weak<Scheduler>,
    branches: Weak<Branches>,
}

impl Follow for Released {
    fn spend_allowed(&self, agents: Vec<i64>) -> BoxFuture<'static, ()> {
        let scheduler = self.scheduler.upgrade();
        Box::pin(async move {
            let Some(s) = scheduler else { return };
            for a in agents {
                s.admit(a, Wake::Resume, None).await;
            }
        })
    }

    fn merge_closed(&self, m: MergeClosed) -> BoxFuture<'static, Result<()>> {
        let branches = self.branches.upgrade();
        Box::pin(async move {
            match branches {
                Some(b) => b.held_merge_closed(m).await,
                None => Ok(()),
            }
        })
    }

    fn rescan(&self) {
        if let Some(s) = self.scheduler.upgrade() {
            s.request_rescan();
        }
    }
}

impl Runtime {
    pub fn new(below: Below, data_dir: PathBuf, node: String, setup: crate::Setup) -> Self {
        let base = Arc::new(Base::new(below, data_dir, node, &setup));
        let running = Arc::new(Running::default());
        let approvals = Arc::new(Approvals::new(base.clone(), running.clone()));
        let spending = Arc::new(Spending::new(base.clone(), approvals.clone()));
        let worktrees = Arc::new(Worktrees::new(base.clone(), running.clone()));
        let skills = Arc::new(skills::Skills::default());
        let workers = Arc::new(Workers::new(
            base.clone(),
            workers::Parts {
                running: running.clone(),
                worktrees: worktrees.clone(),
                skills: skills.clone(),
                approvals: approvals.clone(),
                spending: spending.clone(),
                exe: setup.worker_exe,
            },
        ));
        let scheduler = Arc::new(Scheduler::new(base.clone(), workers.clone(), spending));
        let after: Weak<dyn workers::AfterRun> = Arc::downgrade(&scheduler) as _;
        workers.settle_with(after);
        let nodes = Arc::new(Nodes::new(
            base.clone(),
            scheduler.clone(),
            workers.clone(),
            approvals.clone(),
        ));
        let branches = Arc::new(Branches::new(
            base.clone(),
            worktrees.clone(),
            approvals.clone(),
        ));
        approvals.follow_with(Box::new(Released {
            scheduler: Arc::downgrade(&scheduler),
            branches: Arc::downgrade(&branches),
        }));
        let agents = Arc::new(Agents::new(
            base.clone(),
            agents::Services {
                running: running.clone(),
                workers: workers.clone(),
                scheduler: scheduler.clone(),
                nodes: nodes.clone(),
                worktrees: worktrees.clone(),
                skills,
            },
        ));
        let asks = Arc::new(Asks::new(base.clone(), workers.clone()));
        let requests = Arc::new(Requests::new(
            base.clone(),
            running,
            workers.clone(),
            approvals.clone(),
        ));
        let delegation = Arc::new(delegation::Delegation::new(
            base.clone(),
            agents.clone(),
            asks.clone(),
            approvals.clone(),
        ));
        Self {
            last_client: AtomicI64::new(base.clock.now_ms()),
            base,
            workers,
            scheduler,
            approvals,
            nodes,
            worktrees,
            branches,
            agents,
            asks,
            requests,
            delegation,
        }
    }

    /// The clock the runtime reads (a test's manual one, or the system's).
    pub(crate) fn clock(&self) -> &Clock {
        &self.base.clock
    }

    pub fn set_url(&self, url: String) {
        self.base.set_url(url)
    }

    /// The kernel's loopback MCP URL (`http://127.0.0.1:PORT/mcp`), once bound.
    pub fn url(&self) -> Option<&str> {
        self.base.url()
    }

    /// This kernel's node name.
    pub fn node(&self) -> &str {
        self.base.node()
    }

    /// The labels this node offers, as stored (`",a,b,"`, or `""`).
    pub fn labels(&self) -> &str {
        &self.base.labels
    }

    /// Agents' lifecycle (create, change, pause, move, delete, info).
    pub fn agents(&self) -> &Arc<Agents> {
        &self.agents
    }

    /// Approvals: decided, viewed, listed.
    pub fn approvals(&self) -> &Arc<Approvals> {
        &self.approvals
    }

    /// agent_ask.
    pub fn asks(&self) -> &Arc<Asks> {
        &self.asks
    }

    /// Agents making and asking agents of their own.
    pub fn delegation(&self) -> &Arc<delegation::Delegation> {
        &self.delegation
    }

    /// branch_diff and branch_merge.
    pub fn branches(&self) -> &Arc<Branches> {
        &self.branches
    }

    /// The nodes of the store.
    pub fn nodes(&self) -> &Arc<Nodes> {
        &self.nodes
    }

    /// A run's tool requests.
    pub fn requests(&self) -> &Arc<Requests> {
        &self.requests
    }

    /// The scheduler (schedules among its timers).
    pub fn scheduler(&self) -> &Arc<Scheduler> {
        &self.scheduler
    }

    /// The process manager and the run records.
    pub fn workers(&self) -> &Arc<Workers> {
        &self.workers
    }

    /// The run in progress for an agent, if any.
    pub fn active_run(&self, agent_id: i64) -> Option<RunHandle> {
        self.workers.active_run(agent_id)
    }

    /// Deletes an agent (see [`Agents::agent_delete`]).
    pub async fn agent_delete(
        &self,
        target: &str,
        discard: bool,
    ) -> Result<(crate::registry::AgentView, Option<String>)> {
        self.agents.agent_delete(target, discard).await
    }

    /// Whether any of these agents is running or has a wake remembered.
    pub(crate) fn any_active(&self, agent_ids: &[i64]) -> bool {
        self.workers.any_active(agent_ids)
    }

    /// Whether the scheduler still owes any of these agents a run.
    pub(crate) fn owes_runs(&self, agent_ids: &[i64]) -> bool {
        self.scheduler.owes(agent_ids)
    }

    pub(crate) fn watch_workflow(&self, workflow_id: i64, watched: bool) {
        self.scheduler.watch_workflow(workflow_id, watched)
    }

    /// Drops an agent's queued work and timers (not its schedule row): it was paused,
    /// deleted or registered anew.
    pub(crate) fn scheduler_forget(&self, agent_id: i64) {
        self.scheduler.forget_agent(agent_id)
    }

    pub(crate) fn arm_schedule(&self, agent_id: i64, at: Option<i64>) {
        self.scheduler.arm_schedule(agent_id, at)
    }

    /// Stops the run of an agent wherever it runs (see [`Nodes::stop_run_anywhere`]).
    pub(crate) async fn stop_run_anywhere(&self, agent_id: i64) -> Result<bool> {
        self.nodes.stop_run_anywhere(agent_id).await
    }

    pub fn workspace_dir(&self, wf: &WorkflowRef, agent: &str) -> PathBuf {
        self.base.workspace_dir(wf, agent)
    }

    /// A workflow agent's worktree (see [`Worktrees::worktree_for`]).
    pub(crate) async fn worktree_for(
        &self,
        wf: &WorkflowRef,
        name: &str,
        asked: &Worktree,
        cwd: Option<&str>,
    ) -> Result<(Worktree, bool)> {
        self.worktrees.worktree_for(wf, name, asked, cwd).await
    }

    pub(crate) async fn discard_worktree(&self, wf: &WorkflowRef, name: &str, w: &Worktree) {
        self.worktrees.discard_worktree(wf, name, w).await
    }

    pub(crate) async fn kept_branches(&self, workflow_id: i64) -> Result<Vec<String>> {
        self.worktrees.kept_branches(workflow_id).await
    }

    /// Approval `id` was closed by a vote of the members (a proposal): as if
    /// decided here.
    pub(crate) async fn approval_decided(&self, id: i64) -> Result<()> {
        self.approvals.decided(id).await
    }

    /// At start: runs a previous kernel left `running` are closed as lost.
    pub(crate) async fn recover_runs(&self) -> Result<usize> {
        self.workers.recover_runs().await
    }

    pub(crate) async fn recover_worktrees(&self) -> Result<()> {
        self.worktrees.recover_worktrees().await
    }

    pub(crate) async fn recover_approvals(&self) -> Result<()> {
        self.approvals.recover().await
    }

    pub(crate) fn start_bus(&self) -> Result<()> {
        self.nodes.start_bus()
    }

    pub(crate) async fn start_heartbeat(&self) -> Result<()> {
        self.nodes.start_heartbeat().await
    }

    pub async fn start_scheduler(&self) -> Result<()> {
        self.scheduler.start().await
    }
}
