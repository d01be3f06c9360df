//! result_submit: an agent answers an ask or a step that gave a result schema with
//! a result that fits it (a misfit is refused naming each field to fix).

use super::ToolError;
use super::params::Parameters;
use crate::AgentWorker;
use kernel::messaging::results::Submitted;
use rmcp::{Json, RoleServer, service::RequestContext, tool, tool_router};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(transform = super::no_null_defaults)]
pub struct ResultArgs {
    /// JSON fitting the schema you were given.
    pub result: Value,
    /// The message id of the ask (default: the one awaiting a result).
    #[serde(default)]
    #[schemars(with = "String")]
    pub ask: Option<String>,
    /// Or the step's id.
    #[serde(default)]
    #[schemars(with = "String")]
    pub step: Option<String>,
}

#[tool_router(router = result_tools, vis = "pub(crate)")]
impl AgentWorker {
    /// Submit the `result` an ask or step asked of you; a misfit is refused naming its fields.
    #[tool(
        title = "Submit a result",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = false,
            open_world_hint = false
        )
    )]
    async fn result_submit(
        &self,
        Parameters(a): Parameters<ResultArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<Submitted>, ToolError> {
        let scope = self.scope(&ctx, &super::ScopeArg::default()).await?;
        Ok(Json(
            self.kernel
                .messaging()
                .result_submit(&scope, a.result, a.ask, a.step)
                .await?,
        ))
    }
}
