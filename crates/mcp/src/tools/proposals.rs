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
    /// election, decision, approval or assignment.
    #[serde(rename = "type")]
    #[schemars(extend("enum" = ["election", "decision", "approval", "assignment"]))]
    pub kind: String,
    /// What is being decided, in a few words.
    pub title: String,
    /// Context for the voters (at most 2,000 characters).
    #[serde(default)]
    #[schemars(with = "String")]
    pub description: Option<String>,
    /// The choices: strings (the string is the id) or {id, label} objects. approval defaults to
    /// approve/reject; election and assignment default to the team's agents; a decision needs them.
    #[serde(default)]
    pub options: Vec<OptionArg>,
    /// plurality (default: most votes wins), majority (more than half) or unanimous.
    #[serde(default)]
    #[schemars(with = "String", extend("enum" = ["plurality", "majority", "unanimous"]))]
    pub resolution: Option<String>,
    /// Votes needed before it can resolve (default: every agent of the team).
    #[serde(default)]
    #[schemars(with = "i64", range(min = 1, max = 1000))]
    pub quorum: Option<i64>,
    /// How a plurality tie is broken: first (option order, default), random, or creator-decides
    /// (the creator's own vote picks among the tied options).
    #[serde(default)]
    #[schemars(with = "String", extend("enum" = ["first", "random", "creator-decides"]))]
    pub tie_breaker: Option<String>,
    /// Whether the team commits to the outcome (default true) or it is advisory.
    #[serde(default)]
    #[schemars(with = "bool")]
    pub binding: Option<bool>,
    /// How long voting stays open, e.g. "30m" (default "1h", at most "7d"). When it runs out the
    /// proposal expires with the plurality winner of the votes cast.
    #[serde(default)]
    #[schemars(with = "String")]
    pub timeout: Option<String>,
    /// A contract to put in force in this workflow instance (type approval only; the
    /// fields contract_set takes, without workflow). The lead's approve installs it at
    /// once; the lead's reject drops it; other votes are advice to the lead.
    #[serde(default)]
    #[schemars(with = "serde_json::Map<String, serde_json::Value>")]
    pub contract: Option<serde_json::Value>,
    #[serde(flatten)]
    pub scope: ScopeArg,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(transform = super::no_null_defaults)]
pub struct VoteArgs {
    /// The proposal id, e.g. "prop-3", or "latest".
    pub proposal: String,
    /// The option id (or its label) you vote for. Voting again replaces your vote.
    pub choice: String,
    /// Why, in a sentence; shown to the team.
    #[serde(default)]
    #[schemars(with = "String")]
    pub reason: Option<String>,
    #[serde(flatten)]
    pub scope: ScopeArg,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(transform = super::no_null_defaults)]
pub struct StatusArgs {
    /// One proposal ("prop-3" or "latest"); leave out for the open ones and the recently closed.
    #[serde(default)]
    #[schemars(with = "String")]
    pub proposal: Option<String>,
    #[serde(flatten)]
    pub scope: ScopeArg,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(transform = super::no_null_defaults)]
pub struct CancelArgs {
    /// The proposal id, e.g. "prop-3".
    pub proposal: String,
    #[serde(flatten)]
    pub scope: ScopeArg,
}

#[tool_router(router = proposal_tools, vis = "pub(crate)")]
impl AgentWorker {
    /// Ask the team to decide something by vote: an election, a decision, an approval or an
    /// assignment. The team is told in the channel (@mentioned, so it reaches their inboxes);
    /// it resolves when the votes meet the rule, or expires at its timeout with the plurality
    /// winner. Returns the proposal with its id. Required: `type` (election, decision,
    /// approval or assignment) and `title`. `options` is a list of strings or {id, label}
    /// (a decision needs them; the others have defaults); `resolution` is plurality
    /// (default), majority or unanimous; `tie_breaker` first (default), random or
    /// creator-decides; `contract` (approval only) is a contract_set object without workflow.
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
        Ok(Json(self.kernel.proposal_create(&scope, new).await?))
    }

    /// Vote on an open `proposal` ("prop-3" or "latest") for `choice` (an option id or label;
    /// a revote replaces your earlier vote). Returns the proposal's
    /// tally and, if your vote settled it, the winner.
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

    /// See proposals: options with vote counts, each vote and its reason, who has not voted,
    /// the deadline, and the winner once closed.
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
                .proposal_status(&scope, given(&a.proposal))
                .await?,
        ))
    }

    /// Withdraw an open `proposal` ("prop-3") you created (the lead may cancel any). The team is told that
    /// no vote is needed.
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
            self.kernel.proposal_cancel(&scope, &a.proposal).await?,
        ))
    }
}
