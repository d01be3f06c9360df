//! schedule_set, schedule_clear (the lead only): run an agent on a timer too.

use super::agents::TargetArgs;
use super::{ToolError, given};
use crate::kernel::schedules::{ScheduleView, parse_given};
use crate::mcp::AgentWorker;
use rmcp::{Json, handler::server::wrapper::Parameters, tool, tool_router};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(transform = super::no_null_defaults)]
pub struct ScheduleSetArgs {
    /// The agent: "alice", "alice@review" or "alice@review:pr-1".
    pub target: String,
    /// An interval such as "30s", "15m" or "2h", counted from when the agent was last idle.
    #[serde(default)]
    #[schemars(with = "String")]
    pub every: Option<String>,
    /// Instead of `every`: five cron fields in the server's local time (minute hour
    /// day-of-month month day-of-week), e.g. "0 9 * * 1-5" for 09:00 on weekdays.
    #[serde(default)]
    #[schemars(with = "String")]
    pub cron: Option<String>,
    /// What the agent is told when the schedule wakes it (default: check for pending work).
    #[serde(default)]
    #[schemars(with = "String")]
    pub prompt: Option<String>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct ScheduleOut {
    pub schedule: ScheduleView,
    /// When it fires next (RFC 3339, UTC).
    pub next_at: String,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct ClearedOut {
    /// False when the agent had no schedule.
    pub cleared: bool,
}

#[tool_router(router = schedule_tools, vis = "pub(crate)")]
impl AgentWorker {
    /// Give an agent a schedule (replacing any): it then also runs every interval after
    /// it was last idle, or at cron times, with an optional prompt. Returns the next fire
    /// time. A paused agent's schedule waits until agent_resume.
    #[tool(annotations(
        read_only_hint = false,
        destructive_hint = false,
        idempotent_hint = true,
        open_world_hint = false
    ))]
    async fn schedule_set(
        &self,
        Parameters(a): Parameters<ScheduleSetArgs>,
    ) -> Result<Json<ScheduleOut>, ToolError> {
        let trigger = parse_given(given(&a.every), given(&a.cron))?;
        let schedule = self
            .kernel
            .schedule_set(&a.target, trigger, given(&a.prompt).map(str::to_owned))
            .await?;
        Ok(Json(ScheduleOut {
            next_at: schedule.next_at.clone().unwrap_or_default(),
            schedule,
        }))
    }

    /// Remove an agent's schedule; it still runs when messaged.
    #[tool(annotations(
        read_only_hint = false,
        destructive_hint = false,
        idempotent_hint = true,
        open_world_hint = false
    ))]
    async fn schedule_clear(
        &self,
        Parameters(a): Parameters<TargetArgs>,
    ) -> Result<Json<ClearedOut>, ToolError> {
        Ok(Json(ClearedOut {
            cleared: self.kernel.schedule_clear(&a.target).await?,
        }))
    }
}
