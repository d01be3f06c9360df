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

use crate::events::Event;
use crate::runtime::Runtime;
use crate::runtime::scheduler::Wake;
use domain::clock::fmt_ms;
use domain::error::{Error, Result};
use domain::trigger::Trigger;
use schemars::JsonSchema;
use serde::Serialize;
use std::sync::Arc;
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

fn check_prompt(prompt: Option<&str>) -> Result<()> {
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

impl Runtime {
    /// schedule_set: gives an agent a schedule (replacing any) and arms it.
    pub async fn schedule_set(
        &self,
        target: &str,
        trigger: Trigger,
        prompt: Option<String>,
    ) -> Result<ScheduleView> {
        check_prompt(prompt.as_deref())?;
        let agent = self.registry.agent_get(target).await?;
        let (id, t2, p2) = (agent.id, trigger.clone(), prompt.clone());
        let now = self.clock.now_ms();
        let next = self
            .store
            .write(move |c| set_tx(c, id, &t2, p2.as_deref(), now))
            .await?;
        self.arm_schedule(agent.id, Some(next));
        self.events.publish(Event::AgentChanged {
            workflow_id: agent.workflow_id,
            name: agent.view.name.clone(),
        });
        Ok(ScheduleView {
            target: agent.view.target,
            kind: trigger.kind().into(),
            spec: trigger.spec(),
            prompt,
            next_at: Some(fmt_ms(next)),
        })
    }

    /// schedule_clear: removes an agent's schedule. Returns whether it had one.
    pub async fn schedule_clear(&self, target: &str) -> Result<bool> {
        let agent = self.registry.agent_get(target).await?;
        let id = agent.id;
        let n = self
            .store
            .write(move |c| Ok(c.execute("DELETE FROM schedules WHERE agent_id = ?1", [id])?))
            .await?;
        self.arm_schedule(id, None);
        Ok(n > 0)
    }

    /// A schedule came due: ask for a run (with its prompt, or as a poll) and arm
    /// the next fire.
    /// Only on the agent's node, checked in the write that consumes the fire (an
    /// agent moved away a moment ago is the new node's to fire: this one disarms).
    pub(crate) async fn fire_schedule(self: &Arc<Self>, agent_id: i64) -> Result<()> {
        let now = self.clock.now_ms();
        let me = self.node.clone();
        let fired = self
            .store
            .write(move |c| {
                let node: Option<String> = c
                    .query_row("SELECT node FROM agents WHERE id = ?1", [agent_id], |r| {
                        r.get(0)
                    })
                    .optional()?
                    .flatten();
                // Another node's agent (one without a worker has none: as before).
                if node.is_some_and(|n| n != me) {
                    return Ok(Err(()));
                }
                let Some((kind, spec, prompt, _)) = get(c, agent_id)? else {
                    return Ok(Ok(None));
                };
                let trigger = Trigger::stored(&kind, &spec).map_err(Error::internal)?;
                let next = trigger.next_after(now);
                let poll = polls(&kind, prompt.as_deref());
                if poll {
                    // Whether anything waits is the gate's question, against what
                    // the agent's last run saw: `seen_upto` stays.
                    c.execute(
                        "UPDATE schedules SET next_at = ?2 WHERE agent_id = ?1",
                        (agent_id, next),
                    )?;
                    return Ok(Ok(Some((Wake::Poll, None, next))));
                }
                c.execute(
                    "UPDATE schedules SET next_at = ?2 WHERE agent_id = ?1",
                    (agent_id, next),
                )?;
                mark_seen_tx(c, agent_id)?;
                let prompt = prompt.unwrap_or_else(|| {
                    "Scheduled wakeup. Check for any pending work or updates.".into()
                });
                Ok(Ok(Some((Wake::Schedule, Some(prompt), next))))
            })
            .await?;
        let Ok(fired) = fired else {
            self.arm_schedule(agent_id, None);
            return Ok(());
        };
        let Some((wake, prompt, next)) = fired else {
            return Ok(());
        };
        self.arm_schedule(agent_id, next);
        tracing::info!(agent_id, %wake, "schedule fired");
        self.admit(agent_id, wake, prompt).await;
        Ok(())
    }

    /// Re-arms an agent's schedule from its row (after a resume).
    pub(crate) async fn rearm_schedule(&self, agent_id: i64) -> Result<()> {
        let row = self.store.read(move |c| get(c, agent_id)).await?;
        if let Some((_, _, _, next)) = row {
            self.arm_schedule(agent_id, Some(next.unwrap_or_else(|| self.clock.now_ms())));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
