//! The runtime: agents as things that run. Their lifecycle (create, change,
//! delete, what they did), the process manager and its run records, the
//! scheduler that decides when they run, their schedules and guards, agent_ask,
//! backend readiness, and the nodes that run them.
//!
//! It sits on messaging and the registry (below); workflows sit above it and hear
//! from it through events (a workflow run that went quiet, an agent that failed).

pub mod agents;
pub mod approvals;
pub mod ask;
pub mod backends;
pub mod idle;
pub mod nodes;
pub mod own_folder;
pub mod requests;
mod running;
pub mod runs;
pub mod scheduler;
pub mod schedules;
pub mod skills;
mod spec;
pub mod spending;
mod supervise;
pub(crate) mod voting;
pub mod workers;
pub mod worktrees;

use crate::events::Events;
use crate::governance::contracts::Contracts;
use crate::messaging::Messaging;
use crate::registry::Registry;
use crate::timing::{Clock, Timing};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicI64};
use std::sync::{Arc, Mutex, OnceLock};
use store::Store;

/// What the runtime is built on: the store, the event bus and the rooms below it.
pub struct Below {
    pub store: Store,
    pub events: Events,
    pub contracts: Arc<Contracts>,
    pub registry: Arc<Registry>,
    pub messaging: Arc<Messaging>,
}

/// The runtime as a service: it owns the runs in progress, the scheduler, the
/// approvals agents wait on and this node's place among the others. It hears the
/// rooms below through events and signals the workflows room above only so.
pub struct Runtime {
    store: Store,
    events: Events,
    contracts: Arc<Contracts>,
    registry: Arc<Registry>,
    messaging: Arc<Messaging>,
    /// Logs, workers' scratch space and agents' own folders live under it.
    data_dir: PathBuf,
    /// This kernel's node name (see [`nodes`]): the agents it runs are leased to it.
    node: String,
    /// The labels this node offers (`--labels`), as stored (see
    /// [`domain::placement`]).
    labels: String,
    /// The loopback MCP endpoint, once the HTTP listener is bound.
    url: OnceLock<String>,
    /// Runs in progress (the process manager).
    workers: workers::Workers,
    /// When agents run: wakes, the queue, retries, pauses, schedules.
    scheduler: scheduler::Scheduler,
    /// When a client last made a request (ms since the epoch): a background kernel
    /// exits only after a while without one (see [`idle`]).
    last_client: AtomicI64,
    /// Tool requests waiting for an approval, by approval id (with the asking
    /// agent): woken when it is decided.
    approval_waits: Mutex<HashMap<i64, (i64, Arc<tokio::sync::Notify>)>>,
    /// The bus to the other kernels of the store, once joined (PostgreSQL only).
    bus: OnceLock<Arc<store::bus::Bus>>,
    /// Set when the node leaves the store (a clean stop): no more heartbeats.
    leaving: AtomicBool,
    /// The agents' own git worktrees.
    worktrees: worktrees::Worktrees,
    /// One lock per agent for changes that read its configuration, change it and
    /// write it back (agent_update): two at once never lose one another's change.
    changing: Mutex<HashMap<i64, Arc<tokio::sync::Mutex<()>>>>,
    /// The agents' skills as last read.
    skills: Arc<skills::Skills>,
    /// The clock the scheduler reads, and the delays it keeps (see [`crate::timing`]).
    clock: Clock,
    timing: Timing,
}

impl Runtime {
    pub fn new(below: Below, data_dir: PathBuf, node: String, setup: crate::Setup) -> Self {
        let crate::Setup {
            clock,
            timing,
            worker_exe,
            labels,
        } = setup;
        let Below {
            store,
            events,
            contracts,
            registry,
            messaging,
        } = below;
        Self {
            store,
            events,
            contracts,
            registry,
            messaging,
            worktrees: worktrees::Worktrees::new(&data_dir),
            data_dir,
            node,
            labels: domain::placement::to_text(&labels),
            url: OnceLock::new(),
            workers: workers::Workers::new(worker_exe, os::process::Limits::default()),
            scheduler: scheduler::Scheduler::new(clock.clone(), timing.settle_debounce),
            last_client: AtomicI64::new(domain::clock::now_ms()),
            approval_waits: Mutex::new(HashMap::new()),
            changing: Mutex::new(HashMap::new()),
            skills: Arc::default(),
            bus: OnceLock::new(),
            leaving: AtomicBool::new(false),
            clock,
            timing,
        }
    }

    /// The clock the runtime reads (a test's manual one, or the system's).
    pub(crate) fn clock(&self) -> &Clock {
        &self.clock
    }

    pub fn set_url(&self, url: String) {
        let _ = self.url.set(url);
    }

    /// The kernel's loopback MCP URL (`http://127.0.0.1:PORT/mcp`), once bound.
    pub fn url(&self) -> Option<&str> {
        self.url.get().map(String::as_str)
    }
}
