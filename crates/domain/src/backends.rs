//! The worker backends an agent may name, and which of them run no worker.

/// The worker backends an agent may name. Running them is the process manager's job.
pub const BACKENDS: &[&str] = &[
    "claude", "codex", "cursor", "gemini", "opencode", "sdk", "mock", EXTERNAL, HUMAN,
];
/// The backend of an agent that a client connected with agent_join acts as: the
/// kernel never starts a worker for it (two of the same agent would answer).
pub const EXTERNAL: &str = "external";
/// A person on the team: like `external`, the kernel never runs a worker for it; they
/// answer through an MCP client of their own (agent_join), and contracts may name
/// them as approvers or as the member a message is routed to.
pub const HUMAN: &str = "human";

/// Whether the kernel never starts a worker for agents of this backend.
pub fn has_no_worker(backend: &str) -> bool {
    backend == EXTERNAL || backend == HUMAN
}
