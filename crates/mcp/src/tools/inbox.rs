//! my_inbox, my_inbox_ack, my_inbox_defer.

use super::params::Parameters;
use super::{ScopeArg, ToolError, given, wait_seconds};
use crate::AgentWorker;
use kernel::messaging::inbox::{AckResult, DeferResult, Inbox};
use rmcp::{Json, RoleServer, service::RequestContext, tool, tool_router};
use schemars::JsonSchema;
use serde::Deserialize;

#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(transform = super::no_null_defaults)]
pub struct InboxArgs {
    /// 1-200 (default 50).
    #[serde(default)]
    #[schemars(with = "i64", range(min = 1, max = 200))]
    pub limit: Option<i64>,
    /// Wait this long (0..=50 s) for something new.
    #[serde(default)]
    #[schemars(with = "i64", range(min = 0, max = 50))]
    pub wait_seconds: Option<u64>,
    #[serde(flatten)]
    pub scope: ScopeArg,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(transform = super::no_null_defaults)]
pub struct AckArgs {
    pub message_id: String,
    /// Also every earlier one (not the deferred).
    #[serde(default)]
    pub through: bool,
    #[serde(flatten)]
    pub scope: ScopeArg,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(transform = super::no_null_defaults)]
pub struct DeferArgs {
    pub message_id: String,
    /// "30m", "2h" or an RFC 3339 time (default "10m", at most 30 days).
    #[serde(default)]
    #[schemars(with = "String")]
    pub until: Option<String>,
    #[serde(flatten)]
    pub scope: ScopeArg,
}

#[tool_router(router = inbox_tools, vis = "pub(crate)")]
impl AgentWorker {
    /// Your unacknowledged messages, oldest first; handle each, then my_inbox_ack it.
    #[tool(
        title = "Read my inbox",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn my_inbox(
        &self,
        Parameters(a): Parameters<InboxArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<Inbox>, ToolError> {
        let wait = wait_seconds(a.wait_seconds, 0, "my_inbox")?;
        let scope = self.scope(&ctx, &a.scope).await?;
        Ok(Json(
            self.kernel
                .messaging()
                .my_inbox_wait(&scope, a.limit, wait)
                .await?,
        ))
    }

    /// Mark a message (`message_id`) handled, so it does not come back.
    #[tool(
        title = "Acknowledge a message",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn my_inbox_ack(
        &self,
        Parameters(a): Parameters<AckArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<AckResult>, ToolError> {
        let scope = self.scope(&ctx, &a.scope).await?;
        Ok(Json(
            self.kernel
                .messaging()
                .my_inbox_ack(&scope, &a.message_id, a.through)
                .await?,
        ))
    }

    /// Put a message (`message_id`) off: it comes back `until` then.
    #[tool(
        title = "Defer a message",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = false,
            open_world_hint = false
        )
    )]
    async fn my_inbox_defer(
        &self,
        Parameters(a): Parameters<DeferArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<DeferResult>, ToolError> {
        let scope = self.scope(&ctx, &a.scope).await?;
        Ok(Json(
            self.kernel
                .messaging()
                .my_inbox_defer(&scope, &a.message_id, given(&a.until))
                .await?,
        ))
    }
}
