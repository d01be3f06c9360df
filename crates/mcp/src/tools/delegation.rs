//! team_agent_new, team_agent_ask, team_agent_delete: an agent whose definition
//! carries `delegate` makes, asks and deletes agents of its own. Only such an agent
//! sees them (see [`crate::Tools`]); the kernel holds each call to its definition.

use super::agents::AgentOut;
use super::lifecycle::DEFAULT_ASK_WAIT;
use super::params::Parameters;
use super::{ToolError, caller, given, wait_seconds};
use crate::AgentWorker;
use domain::delegate::Delegate;
use domain::guards::Budget;
use domain::permissions::PermissionsArg;
use domain::protocol::MockRule;
use kernel::runtime::ask::AskResult;
use kernel::runtime::delegation::SubAgent;
use kernel::{AgentIdentity, Caller};
use rmcp::{Json, RoleServer, service::RequestContext, tool, tool_router};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tokio::time::Instant;

#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(transform = super::no_null_defaults)]
pub struct SubAgentNewArgs {
    pub name: String,
    pub backend: String,
    #[serde(default)]
    #[schemars(with = "String")]
    pub model: Option<String>,
    /// Its role.
    #[serde(default)]
    #[schemars(with = "String")]
    pub system: Option<String>,
    /// Default: yours; never wider.
    #[serde(default)]
    #[schemars(schema_with = "super::any_value")]
    pub permissions: Option<PermissionsArg>,
    #[serde(default)]
    #[schemars(schema_with = "super::any_object")]
    pub budget: Option<Budget>,
    #[serde(default)]
    #[schemars(schema_with = "super::any_array")]
    pub mock: Vec<MockRule>,
    #[serde(default)]
    #[schemars(with = "i64", range(min = 1, max = 500))]
    pub max_steps: Option<u32>,
    #[serde(default)]
    #[schemars(schema_with = "super::any_object")]
    pub delegate: Option<serde_json::Value>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(transform = super::no_null_defaults)]
pub struct SubAgentAskArgs {
    pub name: String,
    pub message: String,
    /// 0..=50 (default 30).
    #[serde(default)]
    #[schemars(with = "i64", range(min = 0, max = 50))]
    pub wait_seconds: Option<u64>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(transform = super::no_null_defaults)]
pub struct SubAgentDeleteArgs {
    pub name: String,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct SubAgentDeletedOut {
    pub deleted: String,
}

/// The agent calling (these tools are an agent's alone).
fn agent(ctx: &RequestContext<RoleServer>) -> Result<AgentIdentity, ToolError> {
    match caller(ctx)? {
        Caller::Agent(a) => Ok(a),
        Caller::Lead => Err(ToolError(
            "team_agent_* are an agent's; as the lead use agent_new and agent_ask".into(),
        )),
    }
}

#[tool_router(router = delegation_tools, vis = "pub(crate)")]
impl AgentWorker {
    /// Make an agent `name` of your own (`backend` one your definition allows; `permissions`,
    /// `budget`, `delegate` never wider than yours; `mock` rules for backend mock).
    #[tool(
        title = "Make a sub-agent",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = false,
            open_world_hint = false
        )
    )]
    async fn team_agent_new(
        &self,
        Parameters(a): Parameters<SubAgentNewArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<AgentOut>, ToolError> {
        let by = agent(&ctx)?;
        let s = SubAgent {
            name: a.name,
            backend: a.backend.trim().to_owned(),
            model: given(&a.model).map(str::to_owned),
            system: given(&a.system).map(str::to_owned),
            permissions: a
                .permissions
                .as_ref()
                .map(PermissionsArg::read)
                .transpose()
                .map_err(ToolError)?,
            budget: a.budget,
            mock: a.mock,
            max_steps: a.max_steps,
            delegate: a
                .delegate
                .as_ref()
                .map(Delegate::read)
                .transpose()
                .map_err(ToolError)?,
        };
        let agent = self.kernel.delegation().sub_agent_new(&by, s).await?;
        Ok(Json(AgentOut { agent }))
    }

    /// Ask one of your agents (`name`) a `message`, run it now and wait for its answer:
    /// what it sent you and its final text.
    #[tool(
        title = "Ask a sub-agent",
        output_schema = rmcp::handler::server::tool::schema_for_output::<AskResult>(),
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = false,
            open_world_hint = true
        )
    )]
    async fn team_agent_ask(
        &self,
        Parameters(a): Parameters<SubAgentAskArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<AskResult>, ToolError> {
        let by = agent(&ctx)?;
        let wait = wait_seconds(a.wait_seconds, DEFAULT_ASK_WAIT, "team_agent_ask again")?;
        let deadline = Instant::now() + wait;
        let asking = self
            .kernel
            .delegation()
            .sub_agent_ask(&by, &a.name, &a.message)
            .await?;
        let answer = self
            .kernel
            .await_answer(asking, deadline, &ctx.ct, |_| {})
            .await?;
        Ok(Json(answer))
    }

    /// Delete one of your agents (`name`), and the agents it made.
    #[tool(
        title = "Delete a sub-agent",
        annotations(
            read_only_hint = false,
            destructive_hint = true,
            idempotent_hint = false,
            open_world_hint = false
        )
    )]
    async fn team_agent_delete(
        &self,
        Parameters(a): Parameters<SubAgentDeleteArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<SubAgentDeletedOut>, ToolError> {
        let by = agent(&ctx)?;
        let v = self
            .kernel
            .delegation()
            .sub_agent_delete(&by, &a.name)
            .await?;
        Ok(Json(SubAgentDeletedOut { deleted: v.target }))
    }
}
