//! channel_send, channel_read.

use super::params::Parameters;
use super::{ScopeArg, ToolError, given, wait_seconds};
use crate::AgentWorker;
use kernel::messaging::{Outgoing, ReadResult, SendResult};
use rmcp::{Json, RoleServer, service::RequestContext, tool, tool_router};
use schemars::JsonSchema;
use serde::Deserialize;

#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(transform = super::no_null_defaults)]
pub struct ChannelSendArgs {
    /// At most 4,000 chars; @all: every agent.
    pub message: String,
    /// Only this member gets it.
    #[serde(default)]
    #[schemars(with = "String")]
    pub to: Option<String>,
    /// Send despite unread posts.
    #[serde(default)]
    pub force: bool,
    /// Lead or by contract, with `to`: stop its turn; next run opens with it.
    #[serde(default)]
    pub urgent: bool,
    #[serde(flatten)]
    pub scope: ScopeArg,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(transform = super::no_null_defaults)]
pub struct ChannelReadArgs {
    /// Messages after this id (default: the latest).
    #[serde(default)]
    #[schemars(with = "String")]
    pub since: Option<String>,
    /// 1-200 (default 20).
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

#[tool_router(router = channel_tools, vis = "pub(crate)")]
impl AgentWorker {
    /// Post a `message` to the channel; @name wakes that member. Returns its id, who got it,
    /// what you missed.
    #[tool(
        title = "Send a message",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = false,
            open_world_hint = false
        )
    )]
    async fn channel_send(
        &self,
        Parameters(a): Parameters<ChannelSendArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<SendResult>, ToolError> {
        let scope = self.scope(&ctx, &a.scope).await?;
        let send = Outgoing {
            message: a.message,
            to: given(&a.to).map(str::to_owned),
            force: a.force,
            urgent: a.urgent,
        };
        Ok(Json(
            self.kernel.messaging().channel_send(&scope, send).await?,
        ))
    }

    /// Read the channel, oldest first: the latest messages, or those after `since`.
    #[tool(
        title = "Read the channel",
        annotations(
            read_only_hint = true,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn channel_read(
        &self,
        Parameters(a): Parameters<ChannelReadArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<ReadResult>, ToolError> {
        let wait = wait_seconds(a.wait_seconds, 0, "channel_read")?;
        let scope = self.scope(&ctx, &a.scope).await?;
        Ok(Json(
            self.kernel
                .messaging()
                .channel_read_wait(&scope, given(&a.since).map(str::to_owned), a.limit, wait)
                .await?,
        ))
    }
}
