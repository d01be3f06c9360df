//! agent_ask, agent_pause (the lead only): running agents on demand, and holding them.

use super::agents::AgentOut;
use super::params::Parameters;
use super::{Progress, ToolError, caller, wait_seconds};
use crate::AgentWorker;
use crate::input_required::{Round, Waited};
use domain::result_schema::ResultSchema;
use kernel::runtime::ask::AskResult;
use rmcp::handler::server::tool::{InputResponses, RequestState};
use rmcp::{Json, RoleServer, service::RequestContext, tool, tool_router};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tokio::time::Instant;

pub const DEFAULT_ASK_WAIT: u64 = 30;

#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(transform = super::no_null_defaults)]
pub struct AgentAskArgs {
    pub target: String,
    pub message: String,
    /// 0..=50 (default 30); then poll agent_info.
    #[serde(default)]
    #[schemars(with = "i64", range(min = 0, max = 50))]
    pub wait_seconds: Option<u64>,
    /// A JSON schema (type, properties, required, enum, items) the result must fit.
    #[serde(default)]
    #[schemars(schema_with = "super::any_object")]
    pub result_schema: Option<serde_json::Value>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(transform = super::no_null_defaults)]
pub struct PauseArgs {
    pub target: String,
    /// Run again instead.
    #[serde(default)]
    pub resume: bool,
}

/// What a retry of agent_ask resumes: the question it posted (never posted twice).
#[derive(Serialize, Deserialize)]
struct Asked {
    target: String,
    message_id: String,
}

impl AgentWorker {
    async fn set_paused(&self, target: &str, paused: bool) -> Result<Json<AgentOut>, ToolError> {
        let rec = self.kernel.agent_get(target).await?;
        self.kernel.set_paused(rec.id, paused).await?;
        Ok(Json(AgentOut {
            agent: self.kernel.agent_get(target).await?.view,
        }))
    }
}

#[tool_router(router = lifecycle_tools, vis = "pub(crate)")]
impl AgentWorker {
    /// Ask an agent (`target`) a `message` as a DM from you, run it
    /// now and wait for its answer: the messages it sent you and its final text, or its run id;
    /// with a `result_schema`, the `result` it submits.
    #[tool(
        title = "Ask an agent",
        output_schema = rmcp::handler::server::tool::schema_for_output::<AskResult>(),
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = false,
            open_world_hint = true
        )
    )]
    async fn agent_ask(
        &self,
        Parameters(a): Parameters<AgentAskArgs>,
        RequestState(state): RequestState,
        InputResponses(answers): InputResponses,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Waited<AskResult>, ToolError> {
        caller(&ctx)?;
        let wait = wait_seconds(a.wait_seconds, DEFAULT_ASK_WAIT, "agent_info")?;
        let round = Round::<Asked>::begin(&self.kernel, &ctx, "agent_ask", state, answers).await?;
        let deadline = Instant::now() + wait;
        let asking = match round.resumed() {
            Some(q) => self.kernel.asked(&q.target, &q.message_id).await?,
            None => {
                let schema = a
                    .result_schema
                    .as_ref()
                    .map(ResultSchema::parse)
                    .transpose()
                    .map_err(|e| ToolError(format!("result_schema: {e}")))?;
                self.kernel.ask(&a.target, &a.message, schema).await?
            }
        };
        let resume = Asked {
            target: asking.agent.view.target.clone(),
            message_id: asking.message_id.clone(),
        };
        let progress = Progress::start(&ctx);
        let answer = async {
            let answer = self
                .kernel
                .await_answer(asking, deadline, &ctx.ct, |m| progress.send(m));
            Ok(answer.await?)
        };
        if wait.is_zero() {
            return Ok(Waited::Done(answer.await?));
        }
        round.wait(&self.kernel, &ctx, answer, resume).await
    }

    /// Pause an agent (`target`): a running worker stops at once (its messages go back to its
    /// inbox) and it does not run until resumed.
    #[tool(
        title = "Pause or resume an agent",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn agent_pause(
        &self,
        Parameters(a): Parameters<PauseArgs>,
    ) -> Result<Json<AgentOut>, ToolError> {
        self.set_paused(&a.target, !a.resume).await
    }
}
