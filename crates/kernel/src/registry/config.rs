//! An agent's stored configuration beyond its plain columns (the `config` JSON):
//! what its worker needs (mock rules, step cap, idle timeout), what it may do
//! (permissions, its own MCP servers) and its guards.

use domain::protocol::{self, MockRule};
use domain::workspace::Workspace;
use std::collections::BTreeMap;

/// Model turns per run unless the agent says otherwise.
pub const DEFAULT_MAX_STEPS: u32 = 30;

/// The agent's JSON `config` column: what the worker needs beyond the plain columns.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct AgentConfig {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mock: Vec<MockRule>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_steps: Option<u32>,
    /// Guards for this agent (unset fields: the workflow's, then the defaults).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<super::guards::Budget>,
    /// Idle timeout of one run in milliseconds (YAML `timeout`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// What the agent may do on the machine (default: the `edit` profile).
    #[serde(default)]
    pub permissions: domain::permissions::Permissions,
    /// The agent's own MCP servers (their env and headers are secrets).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub mcp_servers: BTreeMap<String, protocol::McpServer>,
    /// Where its runs work: its cwd (shared) or a git worktree of its own.
    #[serde(default, skip_serializing_if = "is_shared")]
    pub workspace: Workspace,
    /// Its skills: folders holding SKILL.md (absolute), read again at each run.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skills: Vec<std::path::PathBuf>,
    /// Whether and how far it may make and ask agents of its own (off: None).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delegate: Option<domain::delegate::Delegate>,
}

fn is_shared(w: &Workspace) -> bool {
    !w.is_worktree()
}
