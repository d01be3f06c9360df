//! my_status_set, team_members.

use super::params::Parameters;
use super::{ScopeArg, ToolError, given};
use crate::AgentWorker;
use kernel::messaging::team::{Member, Status, StatusUpdate};
use rmcp::{Json, RoleServer, service::RequestContext, tool, tool_router};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(transform = super::no_null_defaults)]
pub struct StatusArgs {
    /// What you work on ("" clears it).
    #[serde(default)]
    #[schemars(with = "String")]
    pub task: Option<String>,

    #[serde(default)]
    #[schemars(with = "String", extend("enum" = ["idle", "busy", "blocked"]))]
    pub state: Option<String>,
    /// E.g. what you wait for.
    #[serde(default)]
    #[schemars(with = "String")]
    pub note: Option<String>,
    #[serde(flatten)]
    pub scope: ScopeArg,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct StatusOut {
    pub status: Status,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(transform = super::no_null_defaults)]
pub struct MembersArgs {
    /// Also each one's state, task and note.
    #[serde(default)]
    pub include_status: bool,
    #[serde(flatten)]
    pub scope: ScopeArg,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct MembersOut {
    /// The agents of this workflow instance, plus `user` (the lead).
    pub members: Vec<Member>,
    /// Your organisation's instance, e.g. "@org.review-team", when you are one of its
    /// members: its channel, documents and members are yours to use there.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub organisation: Option<String>,
}

#[tool_router(router = team_tools, vis = "pub(crate)")]
impl AgentWorker {
    /// Tell the team your task, `state` and a note (team_members shows them).
    #[tool(
        title = "Set my status",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn my_status_set(
        &self,
        Parameters(a): Parameters<StatusArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<StatusOut>, ToolError> {
        let scope = self.scope(&ctx, &a.scope).await?;
        let update = StatusUpdate {
            task: a.task,
            state: given(&a.state).map(str::to_owned),
            note: a.note,
        };
        Ok(Json(StatusOut {
            status: self
                .kernel
                .messaging()
                .my_status_set(&scope, update)
                .await?,
        }))
    }

    /// Your team: its agents (name, backend) and `user`, the lead.
    #[tool(
        title = "List team members",
        annotations(
            read_only_hint = true,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn team_members(
        &self,
        Parameters(a): Parameters<MembersArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<MembersOut>, ToolError> {
        let who = super::caller(&ctx)?;
        let scope = self.scope(&ctx, &a.scope).await?;
        Ok(Json(MembersOut {
            members: self
                .kernel
                .messaging()
                .team_members(&scope, a.include_status)
                .await?,
            organisation: self.kernel.registry().member_org(&who).await?,
        }))
    }
}
