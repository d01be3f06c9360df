//! Contracts on hooks (`when: {event: hook, hook, kind}`): a delivery is asked
//! before it acts; a `deny` refuses it (kept as denied, nothing started or
//! posted), a `require_approval` holds it (kept with its payload; it acts once
//! approved, and is dropped otherwise), a `notify` tells whom it names. A post is
//! governed as in the instance it posts in, a start as in `@global:main` (its
//! instance does not exist yet).

use super::Hooks;
use super::rows::{self, Stored};
use crate::Caller;
use crate::events::Event;
use crate::governance::approvals::{self, Ended};
use crate::governance::contracts::in_force;
use crate::runtime::verdict::VerdictOf;
use domain::contracts::{self, Event as Ev};
use domain::error::{Error, Result};
use domain::hooks::Action;
use domain::states::WorkflowState;
use std::sync::Arc;
use tokio::sync::broadcast::error::RecvError;

/// What contracts say of a delivery.
pub(super) enum Said {
    Go,
    Held { approval: i64 },
}

impl Hooks {
    /// What contracts say of `delivery` to `hook` of the sender's event `kind`:
    /// Err (why) when one refuses it.
    pub(super) async fn govern(&self, hook: &Stored, kind: &str, delivery: &str) -> Result<Said> {
        let workflow = match &hook.action {
            Action::Post { workflow, .. } => Some(workflow.as_str()),
            Action::Start { .. } => None,
        };
        let scope = self.registry.scope(&Caller::Lead, workflow).await?;
        let all = self.contracts.all();
        let v = contracts::decide(
            in_force(&all, scope.workflow_id, &scope.workflow),
            &Ev::Hook {
                hook: &hook.name,
                kind,
            },
        );
        if !v.any() {
            return Ok(Said::Go);
        }
        let detail = if kind.is_empty() {
            format!("a delivery to hook {}", hook.name)
        } else {
            format!("a {kind} delivery to hook {}", hook.name)
        };
        let verdict = VerdictOf {
            workflow_id: scope.workflow_id,
            workflow: scope.workflow.clone(),
            agent_id: 0,
            agent: format!("hook:{}", hook.name),
            run_id: None,
            event: "hook",
            title: detail.clone(),
            detail,
            held: Some(format!("hook:{}:{delivery}", hook.name)),
            refuses: Some("the delivery"),
            done_when_approved: true,
        };
        let now = self.clock.now_ms();
        let (posted, outcome) = self
            .store
            .write(move |c| verdict.record_tx(c, &v, now))
            .await?;
        for p in &posted {
            self.messaging.announce(scope.workflow_id, p);
        }
        match outcome.map_err(Error::forbidden)? {
            None => Ok(Said::Go),
            Some((approval, asked)) => {
                if let Some(timeout) = asked {
                    self.events.publish(Event::ApprovalAsked {
                        workflow_id: scope.workflow_id,
                        id: approval,
                    });
                    self.runtime.approvals().arm(approval, timeout);
                }
                Ok(Said::Held { approval })
            }
        }
    }

    /// Approval `id` closed: the delivery it held acts (approved) or is dropped.
    pub(super) async fn approval_closed(&self, id: i64) -> Result<()> {
        let Some((hook, delivery, payload)) = rows::held(&self.store, id).await? else {
            return Ok(());
        };
        let ended = self
            .store
            .read(move |c| Ok(approvals::get(c, id)?.map(|r| approvals::ended(&r))))
            .await?;
        let outcome = match ended {
            Some(Ended::Allowed(_)) => match rows::find(&self.store, hook.clone()).await? {
                Some(stored) => match self.act(&stored, &payload).await {
                    Ok(o) => o,
                    Err(e) => format!("failed: {e}"),
                },
                None => "failed: the hook was deleted meanwhile".to_owned(),
            },
            Some(Ended::Pending) => return Ok(()),
            Some(Ended::Refused(why)) => format!("denied: approval {id} was not given: {why}"),
            None => format!("denied: approval {id} is gone"),
        };
        tracing::info!(hook, delivery, outcome, "held hook delivery closed");
        rows::outcome(&self.store, (&hook, &delivery), &outcome).await
    }

    /// Hears approvals close and instances end, for as long as the room lives.
    /// Hooks of instances that ended unheard (before this start, or in events
    /// missed) are swept. A closed approval's delivery acts in a task of its own.
    pub fn start_watch(self: &Arc<Self>) {
        let me = Arc::downgrade(self);
        let mut rx = self.events.subscribe();
        tokio::spawn(async move {
            let mut sweep = true;
            loop {
                let Some(hooks) = me.upgrade() else { return };
                if std::mem::take(&mut sweep)
                    && let Err(e) = hooks.instance_ended(None).await
                {
                    tracing::warn!("ended instances' hooks were not swept: {e}");
                }
                drop(hooks);
                let heard = match rx.recv().await {
                    Ok(e) => e,
                    Err(RecvError::Lagged(_)) => {
                        sweep = true;
                        continue;
                    }
                    Err(RecvError::Closed) => return,
                };
                let Some(hooks) = me.upgrade() else { return };
                let done = match heard {
                    Event::ApprovalClosed { id, .. } => {
                        tokio::spawn(async move {
                            if let Err(e) = hooks.approval_closed(id).await {
                                tracing::warn!("a held hook delivery was not settled: {e}");
                            }
                        });
                        continue;
                    }
                    Event::WorkflowSettled {
                        workflow_id,
                        status: WorkflowState::Stopped | WorkflowState::Failed,
                    } => hooks.instance_ended(Some(workflow_id)).await,
                    _ => continue,
                };
                if let Err(e) = done {
                    tracing::warn!("a hook's event was not settled: {e}");
                }
            }
        });
    }
}
