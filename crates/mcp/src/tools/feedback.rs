//! my_feedback: a member tells the lead what it lacked, what got in its way, or
//! what would be better, about one of its tools or skills (seed 000's feedback
//! tool). The lead reads it in workflow_status, the instance's `feedback`
//! resource and the `organise` prompt.

use super::params::Parameters;
use super::{ScopeArg, ToolError};
use crate::AgentWorker;
use kernel::feedback::Feedback;
use rmcp::{Json, RoleServer, service::RequestContext, tool, tool_router};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(transform = super::no_null_defaults)]
pub struct FeedbackArgs {
    #[schemars(extend("enum" = ["missing", "friction", "suggestion"]))]
    pub kind: String,
    pub about: String,
    pub text: String,
    #[serde(flatten)]
    pub scope: ScopeArg,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct FeedbackOut {
    pub feedback: Feedback,
}

#[tool_router(router = feedback_tools, vis = "pub(crate)")]
impl AgentWorker {
    /// Tell the lead `kind` (missing, friction, suggestion) `about` a tool or skill: `text`.
    #[tool(
        title = "Give feedback",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = false,
            open_world_hint = false
        )
    )]
    async fn my_feedback(
        &self,
        Parameters(a): Parameters<FeedbackArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<FeedbackOut>, ToolError> {
        let scope = self.scope(&ctx, &a.scope).await?;
        let feedback = self
            .kernel
            .feedback_report(&scope, (&a.kind, &a.about, &a.text))
            .await?;
        Ok(Json(FeedbackOut { feedback }))
    }
}
