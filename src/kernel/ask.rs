//! agent_ask: a direct message from the lead, a run now, and the reply.
//!
//! The reply is what the agent sent the lead during the run (DMs to `user` and
//! messages mentioning it), plus the run's private final text. The message is posted
//! like any other DM, so a run that cannot take it now (the agent is busy) takes it
//! in the run that follows.

use super::messaging::Outgoing;
use super::registry::AgentRecord;
use super::workers::RunHandle;
use super::{Caller, Kernel};
use crate::error::{Error, Result};
use schemars::JsonSchema;
use serde::Serialize;
use std::sync::Arc;

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
    /// Why the run failed: auth, billing_quota, rate_limit, network, timeout, crash, stopped or other.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error_class: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// A question in flight.
pub struct Asking {
    pub agent: AgentRecord,
    pub message_id: String,
    /// The run to follow: the one serving the question when `fresh`, else the run
    /// the agent was busy with when asked.
    pub run: RunHandle,
    /// False when the run started before the question: the run after it answers.
    pub fresh: bool,
    /// The run that served the question, when it came and went between two looks.
    pub ended: Option<String>,
}

/// Where the answer to a question stands once the run it was waiting behind is over.
pub enum Next {
    /// The run that reads the question is in progress.
    Running(RunHandle),
    /// It has already ended (it was quick).
    Ended(String),
    /// Not started yet: queued, waiting to retry, or held by a guard.
    NotYet,
}

impl Kernel {
    /// Posts the question as a DM from the lead and wakes the agent.
    pub async fn ask(self: &Arc<Self>, target: &str, message: &str) -> Result<Asking> {
        let agent = self.agent_get(target).await?;
        if agent.view.state == "paused" {
            return Err(Error::conflict(format!(
                "{} is paused; agent_resume it first (nothing was sent)",
                agent.view.target
            )));
        }
        let scope = self
            .scope(&Caller::Lead, Some(&agent.view.workflow))
            .await?;
        let sent = self
            .channel_send(
                &scope,
                Outgoing {
                    message: message.to_owned(),
                    to: Some(agent.view.name.clone()),
                    force: true,
                },
            )
            .await?;
        let run = self.wake(agent.id, "ask").await?;
        // Ids are time-ordered (UUIDv7): a run that started after the message was
        // posted reads it and answers, whoever started it (this wake, or the
        // scheduler woken by the DM itself); an earlier one leaves it to the next.
        let fresh = run.run_id > sent.id;
        Ok(Asking {
            agent,
            message_id: sent.id,
            run,
            fresh,
            ended: None,
        })
    }

    /// The first of the agent's runs to start after the question: the one that reads it.
    pub async fn next_run(&self, a: &Asking) -> Result<Next> {
        let active = self
            .active_run(a.agent.id)
            .filter(|h| h.run_id > a.message_id);
        if let Some(h) = active {
            return Ok(Next::Running(h));
        }
        let (agent_id, after) = (a.agent.id, a.message_id.clone());
        let first: Option<String> = self
            .store
            .read(move |c| {
                use rusqlite::OptionalExtension;
                Ok(c.query_row(
                    "SELECT id FROM runs WHERE agent_id = ?1 AND id > ?2 ORDER BY id LIMIT 1",
                    (agent_id, &after),
                    |r| r.get(0),
                )
                .optional()?)
            })
            .await?;
        Ok(match first {
            None => Next::NotYet,
            // Started between the two looks: follow it while it runs.
            Some(id) => match self.active_run(a.agent.id) {
                Some(h) if h.run_id == id => Next::Running(h),
                _ => Next::Ended(id),
            },
        })
    }

    /// The state of the run serving a question, with the reply once it is over.
    pub async fn ask_result(&self, a: &Asking) -> Result<AskResult> {
        let serving = match &a.ended {
            Some(id) => id,
            None if a.fresh => &a.run.run_id,
            None => {
                return Ok(AskResult {
                    run_id: None,
                    status: "waiting".into(),
                    message_id: a.message_id.clone(),
                    reply: None,
                    error_class: None,
                    error: None,
                });
            }
        };
        let run = self.run_view(serving).await?;
        let reply = if run.status == "running" {
            None
        } else {
            Some(Reply {
                messages: self
                    .replies_to_lead(a.agent.workflow_id, &a.agent.view.name, &a.message_id)
                    .await?,
                final_text: run.final_text.clone(),
            })
        };
        Ok(AskResult {
            run_id: Some(run.id),
            status: run.status,
            message_id: a.message_id.clone(),
            reply,
            error_class: run.error_class,
            error: run.error,
        })
    }
}
