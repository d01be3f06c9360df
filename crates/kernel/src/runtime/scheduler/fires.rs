//! The schedules' side of the scheduler: schedule_set and schedule_clear arm or
//! disarm an agent's timer, a fire asks for a run and arms the next one.

use super::Scheduler;
use crate::events::Event;
use crate::runtime::schedules::{ScheduleView, check_prompt, get, mark_seen_tx, polls, set_tx};
use domain::clock::fmt_ms;
use domain::error::{Error, Result};
use domain::states::Wake;
use domain::trigger::Trigger;
use std::sync::Arc;
use store::sql::OptionalExtension;

impl Scheduler {
    /// schedule_set: gives an agent a schedule (replacing any) and arms it.
    pub async fn schedule_set(
        &self,
        target: &str,
        trigger: Trigger,
        prompt: Option<String>,
    ) -> Result<ScheduleView> {
        check_prompt(prompt.as_deref())?;
        let agent = self.base.registry.agent_get(target).await?;
        let (id, t2, p2) = (agent.id, trigger.clone(), prompt.clone());
        let now = self.base.clock.now_ms();
        let next = self
            .base
            .store
            .write(move |c| set_tx(c, id, &t2, p2.as_deref(), now))
            .await?;
        self.arm_schedule(agent.id, Some(next));
        self.base.events.publish(Event::AgentChanged {
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
        let agent = self.base.registry.agent_get(target).await?;
        let id = agent.id;
        let had = self
            .base
            .store
            .write(move |c| crate::runtime::schedules::clear_tx(c, id))
            .await?;
        self.arm_schedule(id, None);
        Ok(had)
    }

    /// A schedule came due: ask for a run (with its prompt, or as a poll) and arm
    /// the next fire.
    /// Only on the agent's node, checked in the write that consumes the fire (an
    /// agent moved away a moment ago is the new node's to fire: this one disarms).
    pub(crate) async fn fire_schedule(self: &Arc<Self>, agent_id: i64) -> Result<()> {
        let now = self.base.clock.now_ms();
        let me = self.base.node.clone();
        let fired = self
            .base
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
        let row = self.base.store.read(move |c| get(c, agent_id)).await?;
        if let Some((_, _, _, next)) = row {
            self.arm_schedule(
                agent_id,
                Some(next.unwrap_or_else(|| self.base.clock.now_ms())),
            );
        }
        Ok(())
    }
}
