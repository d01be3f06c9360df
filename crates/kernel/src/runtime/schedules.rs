//! Schedules: one per agent, `every` (an interval after the agent was last idle) or
//! `cron` (five fields, local time), with an optional prompt for the run.
//!
//! An `every` schedule without a prompt of its own is a poll: its fire starts a run
//! only if something waits for the agent (an open delivery, or channel messages by
//! others after `seen_upto`; the gate decides). A `cron` schedule, or one with its
//! own prompt, runs every time.
//!
//! The row keeps the next fire time, so a restart re-arms it; a fire that came due
//! while the kernel was down fires once at start, not once per missed slot. A run's
//! start, and a fire that is not a poll, record the newest channel message
//! (`seen_upto`): while others post after it, a workflow run still owes that agent a
//! scheduled run and is not done.

use domain::clock::fmt_ms;
use domain::error::{Error, Result};
use domain::trigger::Trigger;
use schemars::JsonSchema;
use serde::Serialize;
use store::sql;
use store::sql::{Connection, OptionalExtension};

/// The longest prompt a schedule may carry.
pub const MAX_PROMPT_CHARS: usize = 4000;

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ScheduleView {
    /// The agent, e.g. `alice@review:pr-1`.
    pub target: String,
    /// "every" or "cron".
    pub kind: String,
    /// The interval (e.g. "5m") or the cron pattern.
    pub spec: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompt: Option<String>,
    /// When it fires next (RFC 3339, UTC).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_at: Option<String>,
}

/// Reads the schedule a user gave: exactly one of `every` and `cron`.
pub fn parse_given(every: Option<&str>, cron: Option<&str>) -> Result<Trigger> {
    fn given(s: Option<&str>) -> Option<&str> {
        s.map(str::trim).filter(|s| !s.is_empty())
    }
    match (given(every), given(cron)) {
        (Some(e), None) => Trigger::every(e).map_err(Error::invalid),
        (None, Some(c)) => Trigger::cron(c).map_err(Error::invalid),
        (Some(_), Some(_)) => Err(Error::invalid("give either `every` or `cron`, not both")),
        (None, None) => Err(Error::invalid(
            "give `every` (e.g. \"30m\": that long after the agent was last idle) or `cron` (five fields, \
             local time, e.g. \"0 9 * * 1-5\")",
        )),
    }
}

pub(crate) fn check_prompt(prompt: Option<&str>) -> Result<()> {
    if let Some(p) = prompt
        && p.chars().count() > MAX_PROMPT_CHARS
    {
        return Err(Error::invalid(format!(
            "the schedule's prompt is over {MAX_PROMPT_CHARS} characters; put long instructions in a \
             document and point to it"
        )));
    }
    Ok(())
}

/// Writes an agent's schedule (replacing any) inside a store job, counting from
/// `now`; returns the next fire.
pub(crate) fn set_tx(
    c: &Connection,
    agent_id: i64,
    trigger: &Trigger,
    prompt: Option<&str>,
    now: i64,
) -> Result<i64> {
    let next = trigger
        .next_after(now)
        .ok_or_else(|| Error::invalid("this cron pattern never fires; check the day and month"))?;
    c.execute(
        "INSERT INTO schedules (agent_id, kind, spec, prompt, next_at, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)
         ON CONFLICT (agent_id) DO UPDATE SET kind = excluded.kind, spec = excluded.spec,
           prompt = excluded.prompt, next_at = excluded.next_at",
        sql::params![agent_id, trigger.kind(), trigger.spec(), prompt, next, now],
    )?;
    Ok(next)
}

/// Clears an agent's schedule (if it has one) inside a store job.
pub(crate) fn clear_tx(c: &Connection, agent_id: i64) -> Result<bool> {
    Ok(c.execute("DELETE FROM schedules WHERE agent_id = ?1", [agent_id])? > 0)
}

/// Pauses every agent of instance `wid` for `reason` inside a store job (the
/// lead stopped an instance that is not a workflow run).
pub(crate) fn pause_all_tx(c: &Connection, wid: i64, reason: &str) -> Result<()> {
    c.execute(
        "UPDATE agents SET state = 'paused', state_reason = ?2, resume_at = NULL WHERE workflow_id = ?1",
        sql::params![wid, reason],
    )?;
    Ok(())
}

/// A stored schedule: kind, spec, prompt, next fire.
pub(crate) type Row = (String, String, Option<String>, Option<i64>);

/// An agent's schedule, if it has one.
pub(crate) fn get(c: &Connection, agent_id: i64) -> Result<Option<Row>> {
    Ok(c.query_row(
        "SELECT kind, spec, prompt, next_at FROM schedules WHERE agent_id = ?1",
        [agent_id],
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
    )
    .optional()?)
}

/// Whether a schedule is a poll: an `every` schedule without a prompt of its own,
/// which runs the agent only when something waits for it.
pub(crate) fn polls(kind: &str, prompt: Option<&str>) -> bool {
    kind == "every" && prompt.is_none_or(|p| p.trim().is_empty())
}

/// Records that the agent has seen its instance's channel up to its newest message
/// (a run's start reads it; a fire that is not a poll counts as seen).
pub(crate) fn mark_seen_tx(c: &Connection, agent_id: i64) -> Result<()> {
    c.execute(
        "UPDATE schedules SET seen_upto = (SELECT max(m.id) FROM messages m JOIN agents a
           ON a.workflow_id = m.workflow_id WHERE a.id = ?1)
         WHERE agent_id = ?1",
        [agent_id],
    )?;
    Ok(())
}

/// Whether others posted in the agent's channel after the newest message its last
/// run (or its schedule's last fire) could see: what a poll looks for besides its
/// inbox.
pub(crate) fn unseen(c: &Connection, agent_id: i64) -> Result<bool> {
    Ok(c.prepare_cached(
        "SELECT EXISTS (SELECT 1 FROM agents a JOIN messages m ON m.workflow_id = a.workflow_id
           LEFT JOIN schedules s ON s.agent_id = a.id
         WHERE a.id = ?1 AND m.sender <> a.name AND m.id > coalesce(s.seen_upto, ''))",
    )?
    .query_row([agent_id], |r| r.get(0))?)
}

/// A stored schedule as tools show it.
pub(crate) fn view(target: String, (kind, spec, prompt, next): Row) -> ScheduleView {
    ScheduleView {
        target,
        kind,
        spec,
        prompt,
        next_at: next.map(fmt_ms),
    }
}

#[cfg(test)]
mod tests;
