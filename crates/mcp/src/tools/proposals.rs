//! team_proposal_create, team_vote, team_proposal_status, team_proposal_cancel.

use super::params::Parameters;
use super::{ScopeArg, ToolError, given};
use crate::AgentWorker;
use kernel::context::proposals::{Cancelled, Created, NewProposal, OptionArg, StatusList, Voted};
use rmcp::{Json, RoleServer, service::RequestContext, tool, tool_router};
use schemars::JsonSchema;
use serde::Deserialize;

#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(transform = super::no_null_defaults)]
pub struct CreateArgs {
    #[serde(rename = "type")]
    #[schemars(extend("enum" = ["election", "decision", "approval", "assignment"]))]
    pub kind: String,
    pub title: String,
    /// Context for the voters.
    #[serde(default)]
    #[schemars(with = "String")]
    pub description: Option<String>,
    #[serde(default)]
    #[schemars(schema_with = "super::any_array")]
    pub options: Vec<OptionArg>,
    #[serde(default)]
    #[schemars(with = "String", extend("enum" = ["plurality", "majority", "unanimous"]))]
    pub resolution: Option<String>,
    /// Votes needed (default: every agent).
    #[serde(default)]
    #[schemars(with = "i64", range(min = 1, max = 1000))]
    pub quorum: Option<i64>,
    #[serde(default)]
    #[schemars(with = "String", extend("enum" = ["first", "random", "creator-decides"]))]
    pub tie_breaker: Option<String>,
    /// Default true; false: advisory.
    #[serde(default)]
    #[schemars(with = "bool")]
    pub binding: Option<bool>,
    /// E.g. "30m" (default "1h", at most "7d").
    #[serde(default)]
    #[schemars(with = "String")]
    pub timeout: Option<String>,
    #[serde(default)]
    #[schemars(schema_with = "super::any_object")]
    pub contract: Option<serde_json::Value>,
    #[serde(flatten)]
    pub scope: ScopeArg,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(transform = super::no_null_defaults)]
pub struct VoteArgs {
    /// "prop-3" or "latest".
    pub proposal: String,
    /// An option's id or label.
    pub choice: String,
    /// Why (shown to the team).
    #[serde(default)]
    #[schemars(with = "String")]
    pub reason: Option<String>,
    #[serde(flatten)]
    pub scope: ScopeArg,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(transform = super::no_null_defaults)]
pub struct StatusArgs {
    /// "prop-3" or "latest" (default: open and recently closed ones).
    #[serde(default)]
    #[schemars(with = "String")]
    pub proposal: Option<String>,
    #[serde(flatten)]
    pub scope: ScopeArg,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(transform = super::no_null_defaults)]
pub struct CancelArgs {
    /// E.g. "prop-3".
    pub proposal: String,
    #[serde(flatten)]
    pub scope: ScopeArg,
}

#[tool_router(router = proposal_tools, vis = "pub(crate)")]
impl AgentWorker {
    /// Put a question (`type`, `title`) to a team vote. `options`: strings or {id, label}
    /// (a decision needs them). `contract` (type approval): a
    /// contract_set object the lead's approve puts in force here. Resolves by `resolution`
    /// (ties: `tie_breaker`).
    #[tool(
        title = "Propose a vote",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = false,
            open_world_hint = false
        )
    )]
    async fn team_proposal_create(
        &self,
        Parameters(a): Parameters<CreateArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<Created>, ToolError> {
        let scope = self.scope(&ctx, &a.scope).await?;
        let new = NewProposal {
            kind: a.kind,
            title: a.title,
            description: a.description,
            options: a.options,
            resolution: given(&a.resolution).map(str::to_owned),
            quorum: a.quorum,
            tie_breaker: given(&a.tie_breaker).map(str::to_owned),
            binding: a.binding,
            timeout: given(&a.timeout).map(str::to_owned),
            contract: a.contract,
        };
        Ok(Json(
            self.kernel.context().proposal_create(&scope, new).await?,
        ))
    }

    /// Vote on an open `proposal` for `choice`; a revote replaces yours. Returns the tally
    /// and any winner.
    #[tool(
        title = "Vote",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn team_vote(
        &self,
        Parameters(a): Parameters<VoteArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<Voted>, ToolError> {
        let scope = self.scope(&ctx, &a.scope).await?;
        Ok(Json(
            self.kernel
                .proposal_vote(&scope, &a.proposal, &a.choice, given(&a.reason))
                .await?,
        ))
    }

    /// A proposal's tally, votes with reasons, who has not voted, deadline and winner.
    #[tool(
        title = "Proposal status",
        annotations(
            read_only_hint = true,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn team_proposal_status(
        &self,
        Parameters(a): Parameters<StatusArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<StatusList>, ToolError> {
        let scope = self.scope(&ctx, &a.scope).await?;
        Ok(Json(
            self.kernel
                .context()
                .proposal_status(&scope, given(&a.proposal))
                .await?,
        ))
    }

    /// Withdraw an open `proposal` you created (the lead: any).
    #[tool(
        title = "Cancel a proposal",
        annotations(
            read_only_hint = false,
            destructive_hint = true,
            idempotent_hint = false,
            open_world_hint = false
        )
    )]
    async fn team_proposal_cancel(
        &self,
        Parameters(a): Parameters<CancelArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<Cancelled>, ToolError> {
        let scope = self.scope(&ctx, &a.scope).await?;
        Ok(Json(
            self.kernel
                .context()
                .proposal_cancel(&scope, &a.proposal)
                .await?,
        ))
    }
}
