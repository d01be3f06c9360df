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
    /// How many messages (1-200, default 50).
    #[serde(default)]
    #[schemars(with = "i64", range(min = 1, max = 200))]
    pub limit: Option<i64>,
    /// If there is nothing yet, wait up to this many seconds (0..=50, default 0) for
    /// something to arrive instead of polling; it answers as soon as it does.
    #[serde(default)]
    #[schemars(with = "i64", range(min = 0, max = 50))]
    pub wait_seconds: Option<u64>,
    #[serde(flatten)]
    pub scope: ScopeArg,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(transform = super::no_null_defaults)]
pub struct AckArgs {
    /// The id of a message from your my_inbox.
    pub message_id: String,
    /// Also acknowledge every earlier message in your inbox (except ones you deferred).
    #[serde(default)]
    pub through: bool,
    #[serde(flatten)]
    pub scope: ScopeArg,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(transform = super::no_null_defaults)]
pub struct DeferArgs {
    /// The id of a message from your my_inbox.
    pub message_id: String,
    /// When it should come back: a duration such as "30m" or "2h", or a time such as
    /// "2026-11-22T10:00:00Z" (default "10m", at most 30 days).
    #[serde(default)]
    #[schemars(with = "String")]
    pub until: Option<String>,
    #[serde(flatten)]
    pub scope: ScopeArg,
}

#[tool_router(router = inbox_tools, vis = "pub(crate)")]
impl AgentWorker {
    /// Your inbox: messages addressed to you (mentions and direct messages) that you have not
    /// acknowledged, oldest first. Reading does not remove them: handle each one, then
    /// my_inbox_ack it; until then it stays (and comes back after a restart). With
    /// wait_seconds, an empty inbox waits for the next message instead of answering empty.
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
            self.kernel.my_inbox_wait(&scope, a.limit, wait).await?,
        ))
    }

    /// Mark a message (`message_id`, from my_inbox) as handled so it does not come back. With through: true,
    /// also everything before it. Acknowledgements are final.
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
                .my_inbox_ack(&scope, &a.message_id, a.through)
                .await?,
        ))
    }

    /// Put a message (`message_id`, from my_inbox) off until later: it leaves the inbox and comes back at
    /// the given time (default in 10 minutes).
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
                .my_inbox_defer(&scope, &a.message_id, given(&a.until))
                .await?,
        ))
    }
}
