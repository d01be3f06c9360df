//! Workflow YAML (pure apart from reading files and running setup steps):
//! parsing and validating with exact positions, binding params, `${{ }}`
//! interpolation and the setup shell steps.
//!
//! - `depth.rs`       nesting refused before parsing (a refusal takes milliseconds)
//! - `node.rs`        the document as an order- and duplicate-preserving tree
//! - `locate.rs`      where a node (or a `${{` inside a scalar) is in the text
//! - `spec/`          the format: every key, type and rule, as [`SpecError`]s
//!   (`mod.rs` the top level, `doc.rs` positions and typed values, `steps.rs`
//!   params and setup, `agent.rs` the agents, `context.rs` the documents)
//! - `suggest.rs`     "did you mean" for misspelt keys and values
//! - `params.rs`      binding the caller's params to the declared ones
//! - `interpolate.rs` `${{ name }}`: the scanner shared by validation and runtime
//! - `setup.rs`       the setup steps: `sh -c`, bounded output, killed on timeout
//!
//! The kernel calls [`load`] or [`parse`], then [`bind_params`], [`run_setup`]
//! and [`interpolate`]; nothing is registered until all of them succeeded.

pub mod depth;
mod interpolate;
mod locate;
mod node;
mod params;
mod spec;
mod suggest;

#[cfg(test)]
mod tests;

pub use interpolate::{Vars, interpolate, interpolate_except, interpolate_shell};
pub use params::bind_params;
pub use spec::{HookDecl, load, parse};

use crate::guards::Budget;
use crate::protocol::MockRule;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

/// The backends an agent may name: the registry's list, one place (`default` in a
/// YAML is read as `sdk`; `external` is an agent a joined client acts as).
pub use crate::backends::BACKENDS;

/// A parsed and validated workflow. Texts (`kickoff`, system prompts) are raw:
/// they are interpolated only once the params are bound and setup has run.
#[derive(Debug, Clone)]
pub struct Workflow {
    /// `name:`, or the file stem, or "workflow" for inline YAML without a name.
    pub name: String,
    /// The YAML file, when it came from one.
    pub file: Option<PathBuf>,
    /// The YAML's folder (or the base folder given for inline YAML).
    pub source_dir: PathBuf,
    /// In file order.
    pub agents: Vec<AgentDef>,
    pub context: ContextDef,
    pub params: Vec<ParamDef>,
    pub setup: Vec<SetupStep>,
    /// Raw text, not interpolated yet.
    pub kickoff: Option<String>,
    /// Top-level `budget:`: guards for the whole workflow instance.
    pub budget: Option<Budget>,
    /// `contracts:`: rules for this instance only, as given (each parsed and checked),
    /// with its name.
    pub contracts: Vec<(String, serde_json::Value)>,
    /// `trigger:`: the text a step workflow starts from (raw, not interpolated yet).
    pub trigger: Option<String>,
    /// `org:`: the organisation it runs within (None: @global).
    pub org: Option<String>,
    /// `hooks:`: events from outside that post into the instance (secrets raw).
    pub hooks: Vec<HookDecl>,
    /// `steps:`: the step graph, checked; prompts raw. Empty: agents route by mentions.
    pub steps: Vec<crate::steps::StepDef>,
    /// What the caller should know that refused nothing (agents given the defaults).
    pub warnings: Vec<String>,
}

#[derive(Debug, Clone)]
pub struct AgentDef {
    pub name: String,
    /// One of [`BACKENDS`].
    pub backend: String,
    pub model: Option<String>,
    /// The text (the file's content if it named a file); raw, not interpolated yet.
    pub system_prompt: Option<String>,
    /// Absolute: relative paths are resolved against the YAML's folder, `~` expanded;
    /// one with `${{ }}` is kept as written, filled in and resolved when the run starts.
    pub cwd: Option<PathBuf>,
    pub env: BTreeMap<String, String>,
    /// The node (kernel) to run it on, by name or by labels, when several share
    /// the store (default: the node that runs the workflow).
    pub node: Option<crate::placement::Placement>,
    /// As written; valid for [`crate::trigger::Trigger::wakeup`].
    pub wakeup: Option<String>,
    pub wakeup_prompt: Option<String>,
    pub budget: Option<Budget>,
    pub mock: Vec<MockRule>,
    pub max_steps: Option<u32>,
    /// Idle timeout of one run.
    pub timeout: Option<Duration>,
    /// What it may do on the machine (default: the `edit` profile).
    pub permissions: crate::permissions::Permissions,
    /// Its own MCP servers, by name.
    pub mcp_servers: BTreeMap<String, crate::protocol::McpServer>,
    /// Where its runs work: its cwd, or a git worktree of its own.
    pub workspace: crate::workspace::Workspace,
    /// Its skills' folders (absolute; each read and checked when the YAML is).
    pub skills: Vec<PathBuf>,
    /// Whether it may make and ask agents of its own (off: None).
    pub delegate: Option<crate::delegate::Delegate>,
}

/// The workflow's shared documents. All `None` = the kernel's defaults.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ContextDef {
    /// "file" or "sqlite".
    pub documents: Option<String>,
    /// Absolute folder for the file provider. May hold the literal
    /// `${{ workflow.name }}` / `${{ workflow.tag }}`, which the kernel replaces.
    pub dir: Option<PathBuf>,
    /// One of the agents.
    pub document_owner: Option<String>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ParamKind {
    #[default]
    String,
    Number,
    Boolean,
}

impl ParamKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ParamKind::String => "string",
            ParamKind::Number => "number",
            ParamKind::Boolean => "boolean",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParamDef {
    pub name: String,
    pub description: Option<String>,
    pub kind: ParamKind,
    pub required: bool,
    /// Already checked against `kind`, as text.
    pub default: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetupStep {
    /// Raw command, interpolated just before it runs.
    pub shell: String,
    /// The name its trimmed stdout is available under.
    pub as_name: Option<String>,
    /// Default 60s.
    pub timeout: Duration,
}

/// A mistake in a workflow YAML, with where it is and how to fix it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}:{line}:{column}: {field}: {message}. Fix: {fix}")]
pub struct SpecError {
    /// The file's path, or `<inline>`.
    pub file: String,
    /// 1-based.
    pub line: usize,
    /// 1-based, in characters.
    pub column: usize,
    /// Where in the document, e.g. `agents.alice.backend`.
    pub field: String,
    pub message: String,
    pub fix: String,
}
