//! After a run: what its outcome means for scheduling. Success clears the retry
//! count; a failure is retried with backoff (its deliveries stay pending); auth and
//! billing errors pause the agent and resume it by itself after a doubling wait; a
//! fourth failure in a row marks the agent failed. Guards on tokens and cost are
//! checked here too. The lead hears of every pause and failure in the channel.

use super::{Timer, Wake};
use crate::events::Event;
use crate::messaging;
use crate::runtime::Runtime;
use crate::runtime::runs::RunEnd;
use domain::error::Result;
use domain::names::WorkflowRef;
use domain::protocol::ErrorClass;
use std::sync::Arc;
use store::sql::OptionalExtension;

impl Runtime {
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
        if end.stopped() {
            return Ok(());
        }
        let now = self.clock.now_ms();
        if end.ok {
            return self.succeeded(agent_id, again, now).await;
        }
        let class = end.error_class.unwrap_or(ErrorClass::Other);
        let error = end.error.clone().unwrap_or_else(|| "no error text".into());
        let (wf, name) = self.agent_names_of(agent_id).await?;
        if matches!(class, ErrorClass::Auth | ErrorClass::BillingQuota) {
            self.scheduler
                .state
                .lock()
                .unwrap()
                .attempts
                .remove(&agent_id);
            return self
                .pause_with_reason(
                    agent_id,
                    &wf,
                    workflow_id,
                    &name,
                    &format!("{}: {error}", class.as_str()),
                    Some(now),
                )
                .await;
        }
        let attempt = {
            let mut st = self.scheduler.state.lock().unwrap();
            let n = st.attempts.entry(agent_id).or_default();
            *n += 1;
            *n
        };
        if let Some(delay) = self.timing.retry_delays.get(attempt - 1) {
            tracing::info!(agent = %name, attempt, ?delay, "run failed; retrying");
            self.scheduler
                .arm(Timer::Retry(agent_id), now + delay.as_millis() as i64);
            return Ok(());
        }
        self.scheduler
            .state
            .lock()
            .unwrap()
            .attempts
            .remove(&agent_id);
        let reason = format!(
            "{name} failed {attempt} times in a row; the last error ({}): {error}",
            class.as_str()
        );
        self.failed_for_good(agent_id, workflow_id, &wf, &name, reason)
            .await?;
        Ok(())
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
        self.scheduler
            .state
            .lock()
            .unwrap()
            .attempts
            .remove(&agent_id);
        // Success: the automatic-pause backoff starts over; an `every` schedule
        // counts from now (it fires after this much idle time).
        let (every, deferred) = self
            .store
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
            self.scheduler.arm(Timer::Schedule(agent_id), n);
        }
        if let Some(d) = deferred {
            self.scheduler.arm(Timer::Deferred(agent_id), d);
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
        let posted = self
            .store
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
                )
            })
            .await?;
        self.messaging.announce(workflow_id, &posted);
        self.events.publish(Event::AgentFailed {
            workflow_id,
            agent: name.to_owned(),
            reason,
        });
        Ok(())
    }

    async fn agent_names_of(&self, agent_id: i64) -> Result<(WorkflowRef, String)> {
        self.store
            .read(move |c| {
                Ok(c.query_row(
                    "SELECT w.name, w.tag, a.name FROM agents a JOIN workflows w ON w.id = a.workflow_id WHERE a.id = ?1",
                    [agent_id],
                    |r| Ok((WorkflowRef { name: r.get(0)?, tag: r.get(1)? }, r.get(2)?)),
                )?)
            })
            .await
    }

    /// Pauses an agent and tells the lead why. With `auto_from`, the pause is an
    /// automatic one (auth, billing): it resumes by itself after a backoff.
    pub(crate) async fn pause_with_reason(
        self: &Arc<Self>,
        agent_id: i64,
        wf: &WorkflowRef,
        workflow_id: i64,
        name: &str,
        reason: &str,
        auto_from: Option<i64>,
    ) -> Result<()> {
        let (wf2, reason2, name2) = (wf.clone(), reason.to_owned(), name.to_owned());
        let (first, max) = (self.timing.pause_first, self.timing.pause_max);
        let (posted, resume_at) = self
            .store
            .write(move |c| {
                let pauses: i64 = c.query_row("SELECT pauses FROM agents WHERE id = ?1", [agent_id], |r| r.get(0))?;
                let resume_at = auto_from.map(|now| {
                    let wait = first
                        .saturating_mul(1u32 << pauses.clamp(0, 16) as u32)
                        .min(max);
                    now + wait.as_millis() as i64
                });
                c.execute(
                    "UPDATE agents SET state = 'paused', state_reason = ?2, resume_at = ?3,
                       pauses = pauses + ?4 WHERE id = ?1",
                    (agent_id, &reason2, resume_at, auto_from.is_some() as i64),
                )?;
                let then = match resume_at {
                    Some(at) => format!(
                        "It tries again by itself at {} (the wait doubles each time, up to 1 h); fix the cause and \
                         resume {name2} (agent_pause, resume: true) to try now.",
                        domain::clock::fmt_ms(at)
                    ),
                    None => format!(
                        "It stays paused: raise the limit or resume {name2} (agent_pause, resume: true) when you have looked (its unread \
                         messages wait)."
                    ),
                };
                let posted = messaging::post_system(
                    c,
                    workflow_id,
                    &wf2,
                    format!("@user {name2} is paused. {reason2}. {then}"),
                )?;
                Ok((posted, resume_at))
            })
            .await?;
        self.messaging.announce(workflow_id, &posted);
        tracing::warn!(agent = %name, %reason, "agent paused");
        if let Some(at) = resume_at {
            self.scheduler.arm(Timer::Resume(agent_id), at);
        }
        self.events.publish(Event::AgentChanged {
            workflow_id,
            name: name.to_owned(),
        });
        Ok(())
    }

    /// The end of an automatic pause: the agent runs again if it has work.
    pub(super) async fn auto_resume(self: &Arc<Self>, agent_id: i64) -> Result<()> {
        let now = self.clock.now_ms();
        let resumed = self
            .store
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
        self.scheduler.forget_agent(agent_id);
        self.store
            .write(move |c| {
                c.execute(
                    "UPDATE agents SET state_reason = NULL, resume_at = NULL WHERE id = ?1",
                    [agent_id],
                )?;
                c.execute(
                    "UPDATE workflows SET hops = 0 WHERE id = (SELECT workflow_id FROM agents WHERE id = ?1)",
                    [agent_id],
                )?;
                Ok(())
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
