//! Approvals asked inline: while the lead waits inside a call (agent_ask,
//! workflow_run, workflow_status with wait_seconds) and its client can show a
//! form, each approval the lead may decide is put to the person in the chat
//! window (approve or deny, with a reason) and their answer decides it.
//!
//! Declining or dismissing the form decides nothing: the approval stays pending
//! for approval_decide. Each era asks its own way: up to protocol 2025-11-25 the
//! server sends the client elicitation requests while the call waits (here); from
//! 2026-07-28 on a server sends no requests, so the waiting call returns
//! `input_required` with the same form and takes the answer on its retry
//! (`input_required.rs`).

use domain::names::LEAD;
use domain::states::ApprovalState;
use kernel::events::Event;
use kernel::{Caller, Kernel};
use rmcp::RoleServer;
use rmcp::service::{ElicitationError, ElicitationMode, Peer, RequestContext};
use schemars::JsonSchema;
use serde::Deserialize;
use std::collections::HashSet;
use std::sync::Arc;
use tokio::task::JoinHandle;

/// What the person answers (flat primitives: what an elicitation form may hold).
#[derive(Debug, Deserialize, JsonSchema)]
pub struct Answer {
    /// approve or deny
    #[schemars(extend("enum" = ["approve", "deny"]))]
    pub decision: String,
    /// Why (optional; the agent is told).
    #[serde(default)]
    pub reason: String,
}

rmcp::elicit_safe!(Answer);

/// Stops asking when the waiting call ends.
pub struct Asking(Option<JoinHandle<()>>);

impl Drop for Asking {
    fn drop(&mut self) {
        if let Some(t) = self.0.take() {
            t.abort();
        }
    }
}

/// Starts asking, if the caller is the lead and its client can be asked (by
/// requests: before 2026-07-28).
pub fn while_waiting(kernel: &Arc<Kernel>, ctx: &RequestContext<RoleServer>) -> Asking {
    let lead = super::caller(ctx).is_ok_and(|c| c.is_lead());
    if !lead
        || crate::era::modern(ctx)
        || !ctx
            .peer
            .supported_elicitation_modes()
            .contains(&ElicitationMode::Form)
    {
        return Asking(None);
    }
    let (kernel, peer) = (kernel.clone(), ctx.peer.clone());
    Asking(Some(tokio::spawn(ask_loop(kernel, peer))))
}

async fn ask_loop(kernel: Arc<Kernel>, peer: Peer<RoleServer>) {
    // Subscribe before reading what is pending, so nothing falls in between.
    let mut events = kernel.events.subscribe();
    let mut asked = HashSet::new();
    let mut queue: Vec<i64> = pending_for_lead(&kernel).await;
    loop {
        while let Some(id) = queue.pop() {
            if asked.insert(id) {
                ask_one(&kernel, &peer, id).await;
            }
        }
        match events.recv().await {
            Ok(Event::ApprovalAsked { id, .. }) => queue.push(id),
            Ok(_) => {}
            Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {
                queue = pending_for_lead(&kernel).await;
            }
            Err(_) => return,
        }
    }
}

/// The approvals pending now that the lead may decide, oldest last.
pub(crate) async fn pending_for_lead(kernel: &Kernel) -> Vec<i64> {
    kernel
        .approval_list(&Caller::Lead, None)
        .await
        .unwrap_or_default()
        .into_iter()
        .filter(|a| a.state == ApprovalState::Pending && a.approvers.iter().any(|m| m == LEAD))
        .map(|a| a.id)
        .rev()
        .collect()
}

/// What the person is asked about approval `id`, if it is still the lead's to decide.
pub(crate) async fn question(kernel: &Kernel, id: i64) -> Option<String> {
    let Ok(Some(a)) = kernel.runtime().approvals().view(id).await else {
        return None;
    };
    if a.state != ApprovalState::Pending || !a.approvers.iter().any(|m| m == LEAD) {
        return None;
    }
    Some(format!(
        "Approval {id} in {}: {} asks to use {} (contract {}). Approve or deny? If nobody decides by {}, it is {}.",
        a.workflow,
        a.agent,
        a.what,
        a.contracts.join(", "),
        a.deadline,
        if a.on_timeout == "allow" {
            "allowed"
        } else {
            "refused"
        }
    ))
}

/// Decides approval `id` as the person answered (approve or deny; anything else
/// decides nothing).
pub(crate) async fn decide(kernel: &Arc<Kernel>, id: i64, answer: Answer) {
    let approve = match answer.decision.as_str() {
        "approve" => true,
        "deny" => false,
        _ => return,
    };
    let reason = Some(answer.reason).filter(|r| !r.trim().is_empty());
    if let Err(e) = kernel
        .approval_decide(&Caller::Lead, id, approve, reason)
        .await
    {
        tracing::info!(id, "an inline decision was not taken: {e}");
    }
}

async fn ask_one(kernel: &Arc<Kernel>, peer: &Peer<RoleServer>, id: i64) {
    let Some(message) = question(kernel, id).await else {
        return;
    };
    match peer.elicit::<Answer>(message).await {
        Ok(Some(answer)) => decide(kernel, id, answer).await,
        Ok(None) | Err(ElicitationError::UserDeclined | ElicitationError::UserCancelled) => {}
        Err(e) => tracing::info!(id, "could not ask inline: {e}"),
    }
}
