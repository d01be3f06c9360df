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
    /// The message (at most 4,000 characters). Start it with @name (or several) to address
    /// those members; otherwise everyone mentioned anywhere gets it; @all reaches every agent.
    pub message: String,
    /// Send a direct message to this one member instead: only they (and you) can see it.
    #[serde(default)]
    #[schemars(with = "String")]
    pub to: Option<String>,
    /// Skip the check for messages posted since you last read the channel.
    #[serde(default)]
    pub force: bool,
    #[serde(flatten)]
    pub scope: ScopeArg,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(transform = super::no_null_defaults)]
pub struct ChannelReadArgs {
    /// Return messages after this message id (paging forward). Without it, the latest messages.
    #[serde(default)]
    #[schemars(with = "String")]
    pub since: Option<String>,
    /// How many messages (1-200, default 20).
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

#[tool_router(router = channel_tools, vis = "pub(crate)")]
impl AgentWorker {
    /// Post a `message` to your team's channel. Start with @name to address members (they get it
    /// in their inbox and are woken); use `to` for a private direct message. Returns the new
    /// message id, who received it, and any messages you missed since you last read the channel.
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
        };
        Ok(Json(self.kernel.channel_send(&scope, send).await?))
    }

    /// Read the team channel, oldest first: the latest messages, or those after `since`
    /// (pass the last id you saw to page forward). Direct messages appear only to their
    /// sender and recipient. With wait_seconds, a read with nothing to show (after `since`,
    /// or in an empty channel) waits for the next message instead of answering empty.
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
                .channel_read_wait(&scope, given(&a.since).map(str::to_owned), a.limit, wait)
                .await?,
        ))
    }
}
