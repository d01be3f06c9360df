//! After a run: what its outcome means for scheduling. Success clears the retry
//! count; a failure is retried with backoff (its deliveries stay pending); auth and
//! billing errors pause the agent and resume it by itself after a doubling wait; a
//! fourth failure in a row marks the agent failed. Guards on tokens and cost are
//! checked here too. The lead hears of every pause and failure in the channel.

use super::{Scheduler, Timer, Verdict, Wake};
use crate::events::Event;
use crate::messaging;
use crate::runtime::base::Pause;
use crate::runtime::runs::RunEnd;
use domain::error::Result;
use domain::names::WorkflowRef;
use domain::protocol::ErrorClass;
use std::sync::Arc;
use store::sql::OptionalExtension;

impl Scheduler {
    /// Settles what a finished run means for scheduling. Called by the process
    /// manager once the run's row is final, before it reports the run done.
    pub(crate) async fn after_run(
        self: &Arc<Self>,
        agent_id: i64,
        workflow_id: i64,
        end: &RunEnd,
        again: Option<(Wake, Option<String>)>,
    ) {
        if let Err(e) = self.settle_outcome(agent_id, workflow_id, end, again).await {
            tracing::error!(agent_id, "settling a run's outcome failed: {e}");
        }
        self.drain_queue().await;
    }

    async fn settle_outcome(
        self: &Arc<Self>,
        agent_id: i64,
        workflow_id: i64,
        end: &RunEnd,
        again: Option<(Wake, Option<String>)>,
    ) -> Result<()> {
        let now = self.base.clock.now_ms();
        let verdict =
            self.state
                .lock()
                .unwrap()
                .settle(agent_id, end, &self.base.timing.retry_delays);
        let class = end.error_class.unwrap_or(ErrorClass::Other);
        let error = end.error.clone().unwrap_or_else(|| "no error text".into());
        match verdict {
            Verdict::Nothing => Ok(()),
            Verdict::Succeeded => self.succeeded(agent_id, again, now).await,
            Verdict::Pause(class) => {
                let (wf, name) = self.agent_names_of(agent_id).await?;
                let reason = format!("{}: {error}", class.as_str());
                let p = Pause {
                    agent_id,
                    workflow: &wf,
                    workflow_id,
                    name: &name,
                    reason: &reason,
                    auto_from: Some(now),
                };
                self.pause(p).await
            }
            Verdict::Retry(attempt, delay) => {
                let (_, name) = self.agent_names_of(agent_id).await?;
                tracing::info!(agent = %name, attempt, ?delay, "run failed; retrying");
                self.arm(Timer::Retry(agent_id), now + delay.as_millis() as i64);
                Ok(())
            }
            Verdict::Failed(attempt) => {
                let (wf, name) = self.agent_names_of(agent_id).await?;
                let reason = format!(
                    "{name} failed {attempt} times in a row; the last error ({}): {error}",
                    class.as_str()
                );
                self.failed_for_good(agent_id, workflow_id, &wf, &name, reason)
                    .await
            }
        }
    }

    /// After a run that succeeded: the automatic-pause backoff starts over, an
    /// `every` schedule counts from now, a deferred delivery is armed, and a wake
    /// that arrived during the run is admitted.
    async fn succeeded(
        self: &Arc<Self>,
        agent_id: i64,
        again: Option<(Wake, Option<String>)>,
        now: i64,
    ) -> Result<()> {
        // Success: the automatic-pause backoff starts over; an `every` schedule
        // counts from now (it fires after this much idle time).
        let (every, deferred) = self
            .base.store
            .write(move |c| {
                c.execute("UPDATE agents SET pauses = 0, state_reason = NULL WHERE id = ?1 AND (pauses <> 0 OR state_reason IS NOT NULL) AND state <> 'paused'", [agent_id])?;
                let every: Option<String> = c
                    .query_row("SELECT spec FROM schedules WHERE agent_id = ?1 AND kind = 'every'", [agent_id], |r| r.get(0))
                    .optional()?;
                let next = every
                    .and_then(|s| domain::trigger::Trigger::every(&s).ok())
                    .and_then(|t| t.next_after(now));
                if let Some(n) = next {
                    c.execute("UPDATE schedules SET next_at = ?2 WHERE agent_id = ?1", (agent_id, n))?;
                }
                let deferred: Option<i64> = c.query_row(
                    "SELECT min(d.defer_until) FROM agents a JOIN deliveries d ON d.workflow_id = a.workflow_id
                       AND d.recipient = a.name WHERE a.id = ?1 AND d.state = 'deferred' AND d.defer_until > ?2",
                    (agent_id, now),
                    |r| r.get(0),
                )?;
                Ok((next, deferred))
            })
            .await?;
        if let Some(n) = every {
            self.arm(Timer::Schedule(agent_id), n);
        }
        if let Some(d) = deferred {
            self.arm(Timer::Deferred(agent_id), d);
        }
        if let Some((wake, prompt)) = again {
            self.admit(agent_id, readmitted(wake), prompt).await;
        }
        Ok(())
    }

    /// An agent that failed every retry: failed, said to the lead, and its
    /// workflow told (it fails with this reason).
    async fn failed_for_good(
        &self,
        agent_id: i64,
        workflow_id: i64,
        wf: &WorkflowRef,
        name: &str,
        reason: String,
    ) -> Result<()> {
        let (wf2, reason2, name2) = (wf.clone(), reason.clone(), name.to_owned());
        let now = self.base.clock.now_ms();
        let posted = self
            .base.store
            .write(move |c| {
                c.execute(
                    "UPDATE agents SET state = 'failed', state_reason = ?2 WHERE id = ?1 AND state <> 'paused'",
                    (agent_id, &reason2),
                )?;
                messaging::post_system(
                    c,
                    workflow_id,
                    &wf2,
                    format!(
                        "@user {reason2}. Its messages stay unread; a new message to @{name2} tries again, and \
                         agent_info shows its runs."
                    ),
                    now,
                )
            })
            .await?;
        self.base.messaging.announce(workflow_id, &posted);
        self.base.events.publish(Event::AgentFailed {
            workflow_id,
            agent: name.to_owned(),
            reason,
        });
        Ok(())
    }

    async fn agent_names_of(&self, agent_id: i64) -> Result<(WorkflowRef, String)> {
        self.base.store
            .read(move |c| {
                Ok(c.query_row(
                    "SELECT w.name, w.tag, a.name FROM agents a JOIN workflows w ON w.id = a.workflow_id WHERE a.id = ?1",
                    [agent_id],
                    |r| Ok((WorkflowRef { name: r.get(0)?, tag: r.get(1)? }, r.get(2)?)),
                )?)
            })
            .await
    }

    /// Pauses an agent and tells the lead why; an automatic pause (auth,
    /// billing) is armed to resume by itself.
    pub(crate) async fn pause(self: &Arc<Self>, p: Pause<'_>) -> Result<()> {
        let agent_id = p.agent_id;
        if let Some(at) = self.base.pause(p).await? {
            self.arm(Timer::Resume(agent_id), at);
        }
        Ok(())
    }

    /// The end of an automatic pause: the agent runs again if it has work.
    pub(super) async fn auto_resume(self: &Arc<Self>, agent_id: i64) -> Result<()> {
        let now = self.base.clock.now_ms();
        let resumed = self
            .base.store
            .write(move |c| {
                Ok(c.execute(
                    "UPDATE agents SET state = 'idle', resume_at = NULL WHERE id = ?1 AND state = 'paused'
                       AND resume_at IS NOT NULL AND resume_at <= ?2",
                    (agent_id, now),
                )? > 0)
            })
            .await?;
        if resumed {
            self.admit(agent_id, Wake::Resume, None).await;
        }
        Ok(())
    }

    /// A manual resume: clears the reason and the automatic resume, gives the agent
    /// fresh attempts, restarts the hop count (the lead looked), and serves its inbox.
    pub(crate) async fn resumed(self: &Arc<Self>, agent_id: i64) -> Result<()> {
        self.forget_agent(agent_id);
        self.base
            .store
            .write(move |c| {
                c.execute(
                    "UPDATE agents SET state_reason = NULL, resume_at = NULL WHERE id = ?1",
                    [agent_id],
                )?;
                crate::messaging::runs::restart_hops_tx(c, agent_id)
            })
            .await?;
        self.rearm_schedule(agent_id).await?;
        self.admit(agent_id, Wake::Resume, None).await;
        Ok(())
    }
}

/// The wake a run remembered, as the scheduler admits it once the run is over: as
/// itself, except an ask, which is a message in the inbox by then and goes through
/// the gate as one (agent_ask alone starts asks).
fn readmitted(wake: Wake) -> Wake {
    match wake {
        Wake::Ask => Wake::Message,
        w => w,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_remembered_wake_comes_back_as_itself() {
        // Retries and resumes used to come back as messages (the wake was kept as
        // its text and only "schedule" was read back).
        for w in [
            Wake::Message,
            Wake::Retry,
            Wake::Resume,
            Wake::Schedule,
            Wake::Poll,
        ] {
            assert_eq!(readmitted(w), w);
        }
        assert_eq!(readmitted(Wake::Ask), Wake::Message);
    }
}
