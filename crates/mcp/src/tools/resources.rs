//! resource_create, resource_read.

use super::params::Parameters;
use super::{ScopeArg, ToolError, given};
use crate::AgentWorker;
use kernel::messaging::resources::{Created, Resource};
use rmcp::{Json, RoleServer, service::RequestContext, tool, tool_router};
use schemars::JsonSchema;
use serde::Deserialize;

#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(transform = super::no_null_defaults)]
pub struct CreateArgs {
    /// At most 1 MiB.
    pub content: String,

    #[serde(default, rename = "type")]
    #[schemars(with = "String", extend("enum" = ["text", "markdown", "json", "diff"]))]
    pub kind: Option<String>,
    #[serde(flatten)]
    pub scope: ScopeArg,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(transform = super::no_null_defaults)]
pub struct ReadArgs {
    /// "res_…".
    pub id: String,
}

#[tool_router(router = resource_tools, vis = "pub(crate)")]
impl AgentWorker {
    /// Store long `content` and get an id to send instead; `type` text (default), markdown,
    /// json or diff.
    #[tool(
        title = "Store a resource",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn resource_create(
        &self,
        Parameters(a): Parameters<CreateArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<Created>, ToolError> {
        let scope = self.scope(&ctx, &a.scope).await?;
        Ok(Json(
            self.kernel
                .messaging()
                .resource_create(&scope, a.content, given(&a.kind))
                .await?,
        ))
    }

    /// Read a resource by its `id` ("res_…"), e.g. one quoted in a message.
    #[tool(
        title = "Read a resource",
        annotations(
            read_only_hint = true,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn resource_read(
        &self,
        Parameters(a): Parameters<ReadArgs>,
    ) -> Result<Json<Resource>, ToolError> {
        Ok(Json(self.kernel.messaging().resource_read(&a.id).await?))
    }
}
