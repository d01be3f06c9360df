//! The kernel: one per data dir, the single source of truth. It owns the store and
//! decides what a caller may see and change. The MCP layer above only translates.
//!
//! Each room is a service that owns its state and is built from the store, the
//! clock, the event bus and the rooms below it: [`registry::Registry`] (instances,
//! agents, tokens), [`governance::contracts::Contracts`], [`messaging::Messaging`]
//! (channel, inboxes, status, resources), [`context::Context`] (documents,
//! proposals), [`runtime::Runtime`] (workers, scheduler, nodes), [`tasks::Tasks`]
//! (the task board), [`workflows::Workflows`] and [`hooks::Hooks`] (events from
//! outside); [`feedback::FeedbackRoom`] (what members report about
//! their tools and skills) is built from the store and the events. [`Kernel`] (in
//! `facade/`) composes them, hands the MCP layer the rooms that decide alone, and
//! is the façade for what composes rooms.
//!
//! The order is store < registry < governance < messaging < context < runtime <
//! tasks < workflows < hooks: a room's code names no room above it (the workspace's
//! `tests/tidy_rooms.rs` reads each room's files for one), and [`events`],
//! [`timing`] and this root's own items are shared below them all; `feedback`
//! stands beside registry, on the store alone.

pub mod context;
pub mod events;
mod facade;
pub mod feedback;
pub use facade::Kernel;
pub use timing::Setup;
pub mod governance;
pub mod hooks;
pub mod messaging;
pub mod registry;
pub mod runtime;
pub mod tasks;
pub mod timing;
pub mod workflows;

#[cfg(test)]
mod sql_states;
#[cfg(test)]
pub(crate) mod testing;

use domain::names::WorkflowRef;

use std::path::PathBuf;

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
    /// Whether its definition lets it make and ask agents of its own (`delegate`):
    /// only then does it see the tools that do.
    pub delegates: bool,
    /// Whether another agent made it (its row has a parent): it never decides an
    /// approval nor acts as an organisation's member, whatever its name.
    pub sub_agent: bool,
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

/// The binary a worker runs: this one, unless `AGENT_WORKER_EXE` names another
/// (embedding the kernel in a program that is not agent-worker, e.g. a test).
pub(crate) fn worker_exe() -> PathBuf {
    std::env::var_os("AGENT_WORKER_EXE")
        .map(PathBuf::from)
        .or_else(|| std::env::current_exe().ok())
        .unwrap_or_else(|| PathBuf::from("agent-worker"))
}
