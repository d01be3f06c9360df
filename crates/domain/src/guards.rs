//! Guards: limits that stop a runaway agent before it burns a budget or loops.
//!
//! Checked by the scheduler before it starts a run (runs per hour, agent-to-agent
//! hops) and after a run ends (tokens, cost). A guard that trips pauses the agent,
//! says why in the channel (to the lead) and in workflow_status; it never resumes by
//! itself: the lead raises the limit or resumes the agent.
//!
//! Hops count the messages agents sent to other agents since the last message from
//! the lead (`user`), per workflow instance. A human message resets the count, so a
//! conversation the lead takes part in never trips it; two agents answering each
//! other for ever do.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The longest system prompt an agent may have (put longer instructions in a document).
pub const MAX_SYSTEM_PROMPT: usize = 64 * 1024;
/// The most environment variables an agent may set.
pub const MAX_ENV_VARS: usize = 64;
/// The most steps a run may take.
pub const MAX_STEPS: u32 = 500;

pub const DEFAULT_RUNS_PER_HOUR: u32 = 60;
pub const DEFAULT_MAX_HOPS: u32 = 30;

/// Limits for an agent or a whole workflow instance. Unset = the default (runs per
/// hour 60, hops 30) or no limit (tokens, cost).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Budget {
    /// Most runs an agent may start in any hour (default 60).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_runs_per_hour: Option<u32>,
    /// Most messages agents may send each other without a message from the lead in
    /// between (default 30). Stops ping-pong loops.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_hops: Option<u32>,
    /// Most tokens (input + output, as the backends report them) over all runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
    /// Most cost in US dollars over all runs (backends that report cost only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_cost_usd: Option<f64>,
}

impl Budget {
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }

    /// This budget with unset fields taken from `outer` (agent over workflow).
    pub fn or(&self, outer: &Budget) -> Budget {
        Budget {
            max_runs_per_hour: self.max_runs_per_hour.or(outer.max_runs_per_hour),
            max_hops: self.max_hops.or(outer.max_hops),
            max_tokens: self.max_tokens.or(outer.max_tokens),
            max_cost_usd: self.max_cost_usd.or(outer.max_cost_usd),
        }
    }

    /// Refuses limits that could never be met.
    pub fn validate(&self) -> Result<(), String> {
        if self.max_runs_per_hour == Some(0) {
            return Err("budget.max_runs_per_hour must be at least 1".into());
        }
        if self.max_hops == Some(0) {
            return Err("budget.max_hops must be at least 1".into());
        }
        if let Some(c) = self.max_cost_usd
            && !(c.is_finite() && c > 0.0)
        {
            return Err(format!(
                "budget.max_cost_usd must be a positive number, got {c}"
            ));
        }
        Ok(())
    }
}
