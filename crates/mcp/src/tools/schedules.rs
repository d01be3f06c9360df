//! schedule_set, schedule_clear (the lead only): run an agent on a timer too.

use super::params::Parameters;
use super::params::TargetArgs;
use super::{ToolError, given};
use crate::AgentWorker;
use domain::trigger::Trigger;
use kernel::runtime::schedules::{ScheduleView, parse_given};
use rmcp::{Json, tool, tool_router};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A schedule: exactly one of `every` and `cron`.
#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(transform = super::no_null_defaults)]
pub struct ScheduleArgs {
    /// An interval such as "30s", "15m" or "2h", counted from when the agent was last idle.
    #[serde(default)]
    #[schemars(with = "String")]
    pub every: Option<String>,
    /// Five cron fields in the server's local time: minute hour day-of-month month
    /// day-of-week, e.g. "0 9 * * 1-5".
    #[serde(default)]
    #[schemars(with = "String")]
    pub cron: Option<String>,
    /// What the agent is told when the schedule wakes it (default: check for pending work).
    #[serde(default)]
    #[schemars(with = "String")]
    pub prompt: Option<String>,
}

impl ScheduleArgs {
    /// The trigger and prompt this asks for.
    pub fn read(&self) -> Result<(Trigger, Option<String>), ToolError> {
        let t = parse_given(given(&self.every), given(&self.cron))?;
        Ok((t, given(&self.prompt).map(str::to_owned)))
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(transform = super::no_null_defaults)]
pub struct ScheduleSetArgs {
    /// The agent: "alice", "alice@review" or "alice@review:pr-1".
    pub target: String,
    #[serde(flatten)]
    pub schedule: ScheduleArgs,
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
    /// Give an agent (`target`) a schedule (replacing any), with `every` ("30m") or `cron`
    /// ("0 9 * * 1-5", local time): it then also runs every interval after
    /// it was last idle, or at cron times, with an optional prompt. Returns the next fire
    /// time. A paused agent's schedule waits until agent_resume.
    #[tool(
        title = "Schedule an agent",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn schedule_set(
        &self,
        Parameters(a): Parameters<ScheduleSetArgs>,
    ) -> Result<Json<ScheduleOut>, ToolError> {
        let (trigger, prompt) = a.schedule.read()?;
        let schedule = self.kernel.schedule_set(&a.target, trigger, prompt).await?;
        Ok(Json(ScheduleOut {
            next_at: schedule.next_at.clone().unwrap_or_default(),
            schedule,
        }))
    }

    /// Remove an agent's (`target`) schedule; it still runs when messaged.
    #[tool(
        title = "Clear a schedule",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn schedule_clear(
        &self,
        Parameters(a): Parameters<TargetArgs>,
    ) -> Result<Json<ClearedOut>, ToolError> {
        Ok(Json(ClearedOut {
            cleared: self.kernel.schedule_clear(&a.target).await?,
        }))
    }
}
