//! The tools, one file per group, and the plumbing they share: identity and scope
//! resolution, and the single mapping from kernel errors to tool errors.
//!
//! A tool handler is three lines: resolve the scope, call the kernel, wrap the result.
//! Handlers spell out `Result<Json<T>, ToolError>` (no alias): rmcp's macro derives the
//! output schema from that exact shape. The calls the lead waits in return
//! `Result<Waited<T>, ToolError>` (their result, or `input_required`) and name their
//! output schema in the `#[tool]` attribute.
//! Domain failures become `isError: true` results whose text tells the model what to
//! do next; only protocol faults are JSON-RPC errors.

mod agents;
mod backends;
mod branches;
mod channel;
pub(crate) mod contracts;
mod delegation;
mod documents;
mod feedback;
mod hooks;
mod inbox;
mod lifecycle;
mod orgs;
pub(crate) mod params;
mod proposals;
mod resources;
mod results;
pub(crate) mod schedules;
mod tasks;
mod team;
mod workflows;

use super::AgentWorker;
pub(crate) use super::caller;
use domain::error::Error;
use kernel::{Caller, Scope};
use rmcp::{
    RoleServer,
    handler::server::router::tool::ToolRouter,
    model::{ContentBlock, IntoContents},
    service::RequestContext,
};

/// A failed tool call, shown to the caller as an `isError` result.
#[derive(Debug)]
pub struct ToolError(pub String);

impl IntoContents for ToolError {
    fn into_contents(self) -> Vec<ContentBlock> {
        vec![ContentBlock::text(self.0)]
    }
}

impl From<Error> for ToolError {
    fn from(e: Error) -> Self {
        match &e {
            Error::Store(_) | Error::Internal(_) => {
                tracing::error!("tool failed: {e}");
                ToolError(format!(
                    "{e}. This is a fault in agent-worker, not in your request; retry, and report it if it persists."
                ))
            }
            Error::Unavailable(_) => {
                tracing::error!("tool failed: {e}");
                ToolError(format!("{e}. Retry once it is back."))
            }
            _ => ToolError(e.to_string()),
        }
    }
}

impl From<rmcp::ErrorData> for ToolError {
    fn from(e: rmcp::ErrorData) -> Self {
        ToolError(e.message.to_string())
    }
}

/// Schema transform for argument structs: optional fields default to `null`, which
/// contradicts their `type` and trips strict validators; drop those defaults.
pub(crate) fn no_null_defaults(schema: &mut schemars::Schema) {
    if let Some(props) = schema.get_mut("properties").and_then(|p| p.as_object_mut()) {
        for prop in props.values_mut() {
            if let Some(obj) = prop.as_object_mut()
                && obj.get("default").is_some_and(|d| d.is_null())
            {
                obj.remove("default");
            }
        }
    }
}

/// A parameter listed as a plain object: its shape is in the tool's description
/// and the lead's skill, and a mistake in it is refused naming the field, so its
/// schema costs the model no tokens.
pub(crate) fn any_object(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"type": "object"})
}

/// [`any_object`] for a value of more than one shape (a string or an object).
pub(crate) fn any_value(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"anyOf": [{"type": "string"}, {"type": "object"}]})
}

/// [`any_object`] for a list.
pub(crate) fn any_array(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"type": "array"})
}

/// Progress notifications for a call that waits: lines sent here reach the client
/// as `notifications/progress` when it asked for them (a progress token), in order.
pub(crate) struct Progress {
    tx: Option<tokio::sync::mpsc::UnboundedSender<String>>,
}

impl Progress {
    pub(crate) fn start(ctx: &RequestContext<RoleServer>) -> Self {
        let Some(token) = ctx.meta.get_progress_token() else {
            return Self { tx: None };
        };
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<String>();
        let peer = ctx.peer.clone();
        tokio::spawn(async move {
            let mut step = 0u32;
            while let Some(m) = rx.recv().await {
                step += 1;
                let p = rmcp::model::ProgressNotificationParam::new(token.clone(), step as f64)
                    .with_message(m);
                if peer.notify_progress(p).await.is_err() {
                    return;
                }
            }
        });
        Self { tx: Some(tx) }
    }

    pub(crate) fn send(&self, message: String) {
        if let Some(tx) = &self.tx {
            let _ = tx.send(message);
        }
    }
}

/// The longest a call may wait (most MCP clients give up after about 60 s).
pub const MAX_WAIT_SECONDS: u64 = 50;

/// Checks a `wait_seconds` argument.
pub(crate) fn wait_seconds(
    given: Option<u64>,
    default: u64,
    poll_with: &str,
) -> Result<std::time::Duration, ToolError> {
    let wait = given.unwrap_or(default);
    if wait > MAX_WAIT_SECONDS {
        return Err(ToolError(format!(
            "wait_seconds is at most {MAX_WAIT_SECONDS} (clients time out around 60 s); wait less and poll {poll_with} \
             for the rest"
        )));
    }
    Ok(std::time::Duration::from_secs(wait))
}

/// Optional text arguments arrive as missing, `null` or `""`; all mean "not given".
pub(crate) fn given(s: &Option<String>) -> Option<&str> {
    s.as_deref().map(str::trim).filter(|s| !s.is_empty())
}

/// The scope argument every context tool takes (flattened into its arguments).
#[derive(Debug, Default, serde::Deserialize, schemars::JsonSchema)]
pub struct ScopeArg {
    /// E.g. "@review:pr-1" (default "@global:main").
    #[serde(default)]
    #[schemars(with = "String")]
    pub workflow: Option<String>,
}

impl AgentWorker {
    /// The caller and the workflow instance a context tool acts in.
    pub(crate) async fn scope(
        &self,
        ctx: &RequestContext<RoleServer>,
        arg: &ScopeArg,
    ) -> Result<Scope, ToolError> {
        let who: Caller = caller(ctx)?;
        Ok(self
            .kernel
            .registry()
            .scope(&who, given(&arg.workflow))
            .await?)
    }

    /// Context tools: what agents (and the lead, as `user`) use to collaborate.
    pub(crate) fn context_tools() -> ToolRouter<Self> {
        Self::channel_tools()
            + Self::inbox_tools()
            + Self::team_tools()
            + Self::feedback_tools()
            + Self::document_tools()
            + Self::proposal_tools()
            + Self::resource_tools()
            + Self::result_tools()
            + Self::approval_tools()
            + Self::branch_read_tools()
            + Self::task_tools()
    }

    /// Delegation: only agents whose definition carries `delegate`.
    pub(crate) fn delegating_tools() -> ToolRouter<Self> {
        Self::delegation_tools()
    }

    /// Management tools: the lead only.
    pub(crate) fn management_tools() -> ToolRouter<Self> {
        Self::agent_tools()
            + Self::backend_tools()
            + Self::lifecycle_tools()
            + Self::workflow_tools()
            + Self::workflow_run_tools()
            + Self::schedule_tools()
            + Self::contract_tools()
            + Self::org_tools()
            + Self::branch_merge_tools()
            + Self::hook_tools()
    }
}
