//! agent_ask: a direct message from the lead, a run now, and the reply.
//!
//! The reply is what the agent sent the lead during the run (DMs to `user` and
//! messages mentioning it), plus the run's private final text. The message is posted
//! like any other DM, so a run that cannot take it now (the agent is busy) takes it
//! in the run that follows. Which run answers is the run that read the message
//! (recorded with its delivery), whoever started it.

use crate::Caller;
use crate::events::Event;
use crate::messaging::Outgoing;
use crate::registry::AgentRecord;
use crate::runtime::base::Base;
use crate::runtime::workers::RunHandle;
use crate::runtime::workers::Workers;
use domain::error::{Error, Result};
use domain::result_schema::ResultSchema;
use domain::states::Wake;
use domain::states::{AgentState, RunStatus};
use schemars::JsonSchema;
use serde::Serialize;
use std::sync::Arc;
use tokio::sync::broadcast::{self, error::RecvError};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Reply {
    /// What the agent sent you since you asked (DMs to `user` and messages mentioning
    /// @user), oldest first.
    pub messages: Vec<String>,
    /// The run's private final text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub final_text: Option<String>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct AskResult {
    /// The agent's workflow instance, e.g. "@global:main".
    pub workflow: String,
    /// The run that serves the question (poll agent_info while it is running); absent
    /// while it has not started.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    /// running, succeeded, failed or stopped; or `waiting` when the agent was busy
    /// and the run that reads your question has not started yet (it is next: poll
    /// agent_info).
    pub status: String,
    /// The id of the direct message that was posted.
    pub message_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reply: Option<Reply>,
    /// The result the agent submitted (result_submit), fitting the `result_schema`
    /// you gave; absent while none was.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<serde_json::Value>,
    /// Why the run failed: auth, billing_quota, rate_limit, network, timeout, crash, stopped or other.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error_class: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// A question in flight.
pub struct Asking {
    pub agent: AgentRecord,
    /// Who asked: `user` (the lead), or the agent that made this one.
    pub asker: String,
    pub message_id: String,
    /// The run in progress when it was asked (subscribed from the start, so none of
    /// its progress is missed): a new one, or the one the agent was busy with.
    run: RunHandle,
}

/// agent_ask: a message to an agent that starts its run at once (past the
/// scheduler, straight to the process manager), and the wait for its answer.
pub struct Asks {
    base: Arc<Base>,
    workers: Arc<Workers>,
}

impl Asks {
    pub(crate) fn new(base: Arc<Base>, workers: Arc<Workers>) -> Self {
        Self { base, workers }
    }

    /// Posts the question as a DM from the lead and wakes the agent (a run starts
    /// now, or one more follows the run in progress).
    ///
    /// With `schema`, the question asks for a result fitting it (see
    /// `messaging::results`): the answer carries it once the agent submitted it.
    pub async fn ask(
        self: &Arc<Self>,
        target: &str,
        message: &str,
        schema: Option<ResultSchema>,
    ) -> Result<Asking> {
        let agent = self.base.registry.agent_get(target).await?;
        let scope = self
            .base
            .registry
            .scope(&Caller::Lead, Some(&agent.view.workflow))
            .await?;
        self.ask_as(&scope, agent, message, schema).await
    }

    /// The same question from `scope`'s member (an agent asking one it made).
    pub async fn ask_as(
        self: &Arc<Self>,
        scope: &crate::Scope,
        agent: AgentRecord,
        message: &str,
        schema: Option<ResultSchema>,
    ) -> Result<Asking> {
        if agent.view.state == AgentState::Paused {
            return Err(Error::conflict(format!(
                "{} is paused; agent_pause {{resume: true}} it first (nothing was sent)",
                agent.view.target
            )));
        }
        let sent = self
            .base
            .messaging
            .ask_send(
                scope,
                Outgoing {
                    message: message.to_owned(),
                    to: Some(agent.view.name.clone()),
                    force: true,
                    urgent: false,
                },
                schema.map(|s| (agent.view.name.clone(), s)),
            )
            .await?;
        let run = match agent.view.node.as_deref() {
            // Another node runs it: the question's delivery wakes it there (the bus
            // carries it), and the answer is followed through the store.
            Some(n) if n != self.base.node() => RunHandle::ended(String::new()),
            _ => self.wake_to_answer(&agent, &sent.id).await?,
        };
        Ok(Asking {
            agent,
            asker: scope.me.clone(),
            message_id: sent.id,
            run,
        })
    }

    /// A question asked before (by an earlier round of the same call), to wait for
    /// its answer again: nothing is sent and nothing is started. The run in
    /// progress is followed if it is the one that serves it.
    pub async fn asked(&self, target: &str, message_id: &str) -> Result<Asking> {
        let agent = self.base.registry.agent_get(target).await?;
        let run = self
            .workers
            .active_run(agent.id)
            .unwrap_or_else(|| RunHandle::ended(String::new()));
        Ok(Asking {
            agent,
            asker: domain::names::LEAD.to_owned(),
            message_id: message_id.to_owned(),
            run,
        })
    }

    /// The run that will answer: the one in progress (if it started before the
    /// question, one more is remembered to follow it and read it), else one that
    /// already read it, else a new one.
    ///
    /// Why look before starting: the question's delivery wakes the agent by itself,
    /// and a quick run can read it and end before this runs; a run started now would
    /// find the inbox empty and answer nothing.
    async fn wake_to_answer(
        self: &Arc<Self>,
        agent: &AgentRecord,
        message_id: &str,
    ) -> Result<RunHandle> {
        if let Some(h) = self
            .workers
            .remember_wake_before(agent.id, Wake::Ask, message_id)
        {
            return Ok(h);
        }
        if let Some(done) = self.serving_run_of(agent, message_id).await? {
            return Ok(self
                .workers
                .active_run(agent.id)
                .filter(|h| h.run_id == done)
                .unwrap_or_else(|| RunHandle::ended(done)));
        }
        // A run that started after the question may have read it and ended since
        // the look above: the claim looks again under the lock it takes.
        match self
            .workers
            .start_run_unless_served(agent.id, Wake::Ask, None, Some(message_id))
            .await
        {
            Ok(Ok(h)) => Ok(h),
            Ok(Err(served)) => Ok(RunHandle::ended(served)),
            // The scheduler, woken by the question's delivery, claimed the agent
            // between the look and the claim: that run reads the question.
            Err(e) => self
                .workers
                .remember_wake_before(agent.id, Wake::Ask, message_id)
                .ok_or(e),
        }
    }

    /// The run that answers the question, once there is one: the run that read it
    /// (recorded with its delivery when a run reads its inbox: a run that was busy
    /// when the question came may read it too), else the first run that started
    /// after it (it reads it, or fails before it could and says why).
    async fn serving_run(&self, a: &Asking) -> Result<Option<String>> {
        self.serving_run_of(&a.agent, &a.message_id).await
    }

    async fn serving_run_of(
        &self,
        agent: &AgentRecord,
        message_id: &str,
    ) -> Result<Option<String>> {
        let (wid, aid) = (agent.workflow_id, agent.id);
        let (name, id) = (agent.view.name.clone(), message_id.to_owned());
        // Another node's runs have ids from its clock, not comparable with this
        // node's message id: only the run that read the question answers it.
        let by_time = agent
            .view
            .node
            .as_deref()
            .is_none_or(|n| n == self.base.node());
        self.base.store
            .read(move |c| {
                use store::sql::OptionalExtension;
                let reader: Option<String> = c
                    .prepare_cached(
                        "SELECT COALESCE(
                           (SELECT read_by FROM deliveries WHERE workflow_id = ?1 AND recipient = ?2 AND message_id = ?3),
                           (SELECT read_by FROM deliveries_done WHERE workflow_id = ?1 AND recipient = ?2 AND message_id = ?3))",
                    )?
                    .query_row((wid, &name, &id), |r| r.get(0))
                    .optional()?
                    .flatten();
                if reader.is_some() || !by_time {
                    return Ok(reader);
                }
                // Run and message ids are both UUIDv7 from one clock: time-ordered.
                Ok(c.prepare_cached(
                    "SELECT id FROM runs WHERE agent_id = ?1 AND id > ?2 ORDER BY id LIMIT 1",
                )?
                .query_row((aid, &id), |r| r.get(0))
                .optional()?)
            })
            .await
    }

    /// Waits until the run that answers the question has ended, or until `deadline`
    /// or `cancel`, passing the agent's progress lines to `progress` meanwhile (the
    /// run it is busy with first, if any). A cancelled wait stops waiting, never the
    /// run.
    pub async fn await_answer(
        &self,
        mut a: Asking,
        deadline: Instant,
        cancel: &CancellationToken,
        progress: impl Fn(String),
    ) -> Result<AskResult> {
        let mut listening = true;
        // Subscribed before the first read, so no run that starts or ends after it
        // goes unnoticed.
        let mut runs = self.base.events.subscribe();
        let serving = loop {
            if let Some(id) = self.serving_run(&a).await? {
                break Some(id);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() || cancel.is_cancelled() {
                // A run that started after the question will read it, even if its
                // row is still being written (the process manager claims the agent
                // first).
                break (a.run.run_id > a.message_id).then(|| a.run.run_id.clone());
            }
            // Nothing has taken the question yet: the agent is busy with an earlier
            // run, or the next one is queued or waiting to retry.
            tokio::select! {
                msg = a.run.progress.recv(), if listening => match msg {
                    Ok(m) => progress(m),
                    Err(RecvError::Lagged(_)) => {}
                    Err(RecvError::Closed) => listening = false,
                },
                _ = run_of(&mut runs, &a.agent) => {}
                _ = tokio::time::sleep(left) => {}
                _ = cancel.cancelled() => {}
            }
        };
        let Some(run_id) = serving else {
            return Ok(AskResult {
                workflow: a.agent.view.workflow.clone(),
                run_id: None,
                status: "waiting".into(),
                message_id: a.message_id,
                reply: None,
                result: None,
                error_class: None,
                error: None,
            });
        };
        // Follow the serving run to its end: it is the run subscribed at the ask, or
        // the agent's run now; if neither, it has already ended.
        let follow = a.run.run_id == run_id
            || match self
                .workers
                .active_run(a.agent.id)
                .filter(|h| h.run_id == run_id)
            {
                Some(h) => {
                    a.run = h;
                    listening = true;
                    true
                }
                None => false,
            };
        if !follow {
            // A run of another node (or one that has ended): its row says when it is over.
            return self
                .until_row_ends(&a, &run_id, deadline, cancel, &mut runs)
                .await;
        }
        follow_run(&mut a.run, listening, deadline, cancel, &progress).await;
        self.ask_result(a.asker_of(), &a.message_id, &run_id).await
    }

    /// Reads the serving run's row again each time a run of the agent starts or
    /// ends, until it is over, `deadline` passes or `cancel` fires.
    async fn until_row_ends(
        &self,
        a: &Asking,
        run_id: &str,
        deadline: Instant,
        cancel: &CancellationToken,
        runs: &mut broadcast::Receiver<Event>,
    ) -> Result<AskResult> {
        loop {
            let r = self.ask_result(a.asker_of(), &a.message_id, run_id).await?;
            let left = deadline.saturating_duration_since(Instant::now());
            if r.status != RunStatus::Running.as_str() || left.is_zero() || cancel.is_cancelled() {
                return Ok(r);
            }
            tokio::select! {
                _ = run_of(runs, &a.agent) => {}
                _ = tokio::time::sleep(left) => {}
                _ = cancel.cancelled() => {}
            }
        }
    }

    /// The state of the run serving a question, with the reply once it is over.
    async fn ask_result(
        &self,
        (agent, asker): (&AgentRecord, &str),
        message_id: &str,
        run_id: &str,
    ) -> Result<AskResult> {
        let run = match self.workers.run_view(run_id).await {
            Ok(run) => run,
            // Claimed by the process manager, its row not yet written: it is starting.
            Err(Error::NotFound(_))
                if self
                    .workers
                    .active_run(agent.id)
                    .is_some_and(|h| h.run_id == run_id) =>
            {
                return Ok(AskResult {
                    workflow: agent.view.workflow.clone(),
                    run_id: Some(run_id.to_owned()),
                    status: "running".into(),
                    message_id: message_id.to_owned(),
                    reply: None,
                    result: None,
                    error_class: None,
                    error: None,
                });
            }
            Err(e) => return Err(e),
        };
        let reply = if run.status == RunStatus::Running {
            None
        } else {
            Some(Reply {
                messages: self
                    .workers
                    .replies_to(agent.workflow_id, (&agent.view.name, asker), message_id)
                    .await?,
                final_text: run.final_text.clone(),
            })
        };
        let result = self
            .base
            .messaging
            .result_of(agent.workflow_id, message_id)
            .await?;
        Ok(AskResult {
            workflow: agent.view.workflow.clone(),
            run_id: Some(run.id),
            status: run.status.to_string(),
            message_id: message_id.to_owned(),
            reply,
            result,
            error_class: run.error_class,
            error: run.error,
        })
    }
}

impl Asking {
    fn asker_of(&self) -> (&AgentRecord, &str) {
        (&self.agent, &self.asker)
    }
}

/// Returns when a run of `agent` starts or ends (on any node: the bus carries both),
/// or when events were lost (the caller reads the store again, the truth).
async fn run_of(events: &mut broadcast::Receiver<Event>, agent: &AgentRecord) {
    loop {
        match events.recv().await {
            Ok(Event::RunStarted {
                workflow_id,
                agent: name,
                ..
            })
            | Ok(Event::RunEnded {
                workflow_id,
                agent: name,
                ..
            }) if workflow_id == agent.workflow_id && name == agent.view.name => return,
            Ok(_) => {}
            Err(RecvError::Lagged(_)) => return,
            Err(RecvError::Closed) => std::future::pending().await,
        }
    }
}

/// Waits for a run of this node to end (or `deadline`, or `cancel`), passing its
/// progress lines on while `listening`.
async fn follow_run(
    run: &mut RunHandle,
    mut listening: bool,
    deadline: Instant,
    cancel: &CancellationToken,
    progress: &impl Fn(String),
) {
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        tokio::select! {
            _ = run.wait(left) => return,
            msg = run.progress.recv(), if listening => match msg {
                Ok(m) => progress(m),
                Err(RecvError::Lagged(_)) => {}
                // The run is finishing: nothing more will come.
                Err(RecvError::Closed) => listening = false,
            },
            _ = cancel.cancelled() => return,
        }
    }
}
