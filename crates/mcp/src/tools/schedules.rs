//! schedule_set (the lead only): run an agent on a timer too, or no longer.

use super::params::Parameters;
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
    /// E.g. "30m" after it was last idle; without a `prompt`, only if something waits.
    #[serde(default)]
    #[schemars(with = "String")]
    pub every: Option<String>,
    /// Five fields, local time, e.g. "0 9 * * 1-5".
    #[serde(default)]
    #[schemars(with = "String")]
    pub cron: Option<String>,
    /// What those runs are told; given, an `every` runs every time.
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
    pub target: String,
    #[serde(flatten)]
    pub schedule: ScheduleArgs,
    /// Remove the schedule instead.
    #[serde(default)]
    pub clear: bool,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct ScheduleOut {
    /// The schedule set (absent after `clear`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub schedule: Option<ScheduleView>,
    /// When it fires next (RFC 3339, UTC).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_at: Option<String>,
    /// After `clear`: false when the agent had no schedule.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cleared: Option<bool>,
}

#[tool_router(router = schedule_tools, vis = "pub(crate)")]
impl AgentWorker {
    /// Run an agent (`target`) `every` "30m" or at `cron` times too, replacing its schedule;
    /// `clear` removes it.
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
        if a.clear {
            let s = &a.schedule;
            if s.every.is_some() || s.cron.is_some() || s.prompt.is_some() {
                return Err(ToolError(
                    "clear: true removes the schedule; give it without every, cron or prompt"
                        .into(),
                ));
            }
            return Ok(Json(ScheduleOut {
                schedule: None,
                next_at: None,
                cleared: Some(self.kernel.schedule_clear(&a.target).await?),
            }));
        }
        let (trigger, prompt) = a.schedule.read()?;
        let schedule = self.kernel.schedule_set(&a.target, trigger, prompt).await?;
        Ok(Json(ScheduleOut {
            next_at: schedule.next_at.clone(),
            schedule: Some(schedule),
            cleared: None,
        }))
    }
}
