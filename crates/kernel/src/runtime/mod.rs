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
pub mod spending;
mod supervise;
pub mod workers;
