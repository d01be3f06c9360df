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
    /// The run that serves the question (poll agent_info while it is running).
    pub run_id: String,
    /// running, succeeded, failed or stopped.
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
    pub run: RunHandle,
    /// False when the run started before the question: the run after it answers.
    pub fresh: bool,
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
        })
    }

    /// The state of the run serving a question, with the reply once it is over.
    pub async fn ask_result(&self, a: &Asking) -> Result<AskResult> {
        let run = self.run_view(&a.run.run_id).await?;
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
            run_id: run.id,
            status: run.status,
            message_id: a.message_id.clone(),
            reply,
            error_class: run.error_class,
            error: run.error,
        })
    }
}
