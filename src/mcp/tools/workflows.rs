//! workflow_context_set (the lead only): an instance's document settings.
//!
//! Not in the original catalogue: a workflow YAML's `context:` sets the same things when
//! it runs, but an instance made with agent_new (including `@global:main`) had no way to
//! name a document owner or choose a provider. This keeps the two paths equal.

use super::{ToolError, given};
use crate::kernel::documents::settings::{ContextChange, ContextView};
use crate::mcp::AgentWorker;
use rmcp::{Json, handler::server::wrapper::Parameters, tool, tool_router};
use schemars::JsonSchema;
use serde::Deserialize;

#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(transform = super::no_null_defaults)]
pub struct ContextArgs {
    /// The workflow instance, e.g. "@review:pr-1" (default "@global:main"; created if new).
    #[serde(default)]
    #[schemars(with = "String")]
    pub workflow: Option<String>,
    /// Where documents are stored: "file" (real files, the default) or "sqlite" (in the database).
    /// Refused while the current store holds documents (they are not moved).
    #[serde(default)]
    #[schemars(with = "String")]
    pub documents: Option<String>,
    /// File provider: an existing absolute folder to keep the documents in, e.g. a project's docs
    /// folder ("" = back to the data dir's own folder for this instance).
    #[serde(default)]
    #[schemars(with = "String")]
    pub documents_dir: Option<String>,
    /// The agent who alone (with the lead) may write documents; others must use
    /// document_suggest ("" = everyone may write).
    #[serde(default)]
    #[schemars(with = "String")]
    pub document_owner: Option<String>,
}

#[tool_router(router = workflow_tools, vis = "pub(crate)")]
impl AgentWorker {
    /// Set how a workflow instance keeps its shared documents: the provider (file or sqlite), a
    /// folder to bind, and a document owner. Leave an argument out to keep its setting. Returns
    /// the settings now in force.
    #[tool(annotations(
        read_only_hint = false,
        destructive_hint = false,
        idempotent_hint = true,
        open_world_hint = false
    ))]
    async fn workflow_context_set(
        &self,
        Parameters(a): Parameters<ContextArgs>,
    ) -> Result<Json<ContextView>, ToolError> {
        let change = ContextChange {
            documents: given(&a.documents).map(str::to_owned),
            dir: a.documents_dir,
            owner: a.document_owner,
        };
        Ok(Json(
            self.kernel
                .workflow_context_set(given(&a.workflow).unwrap_or("@global:main"), change)
                .await?,
        ))
    }
}
