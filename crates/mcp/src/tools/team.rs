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
    /// What you are working on (an empty string clears it).
    #[serde(default)]
    #[schemars(with = "String")]
    pub task: Option<String>,
    /// idle, busy or blocked. Setting idle without a task clears the task.
    #[serde(default)]
    #[schemars(with = "String", extend("enum" = ["idle", "busy", "blocked"]))]
    pub state: Option<String>,
    /// A short note for the team, e.g. what you are waiting for.
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
    /// Also show each member's state, task and note.
    #[serde(default)]
    pub include_status: bool,
    #[serde(flatten)]
    pub scope: ScopeArg,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct MembersOut {
    /// The agents of this workflow instance, plus `user` (the lead).
    pub members: Vec<Member>,
}

#[tool_router(router = team_tools, vis = "pub(crate)")]
impl AgentWorker {
    /// Tell the team what you are doing: your task, your `state` (idle, busy or blocked) and a
    /// short note. Others see it in team_members.
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
            status: self.kernel.my_status_set(&scope, update).await?,
        }))
    }

    /// Who is on your team: every agent in your workflow instance (name and backend) plus
    /// `user`, the lead. With include_status, also what each one reports doing.
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
        let scope = self.scope(&ctx, &a.scope).await?;
        Ok(Json(MembersOut {
            members: self.kernel.team_members(&scope, a.include_status).await?,
        }))
    }
}
