//! Contracts on hooks (`when: {event: hook, hook, kind}`): a delivery is asked
//! before it acts; a `deny` refuses it (kept as denied, nothing started or
//! posted), a `notify` tells whom it names. A post is governed as in the instance
//! it posts in, a start as in `@global:main` (its instance does not exist yet).

use super::Hooks;
use super::rows::Stored;
use crate::Caller;
use crate::governance::contracts::in_force;
use crate::runtime::verdict::VerdictOf;
use domain::contracts::{self, Event as Ev};
use domain::error::{Error, Result};
use domain::hooks::Action;

impl Hooks {
    /// What contracts say of a delivery to `hook` of the sender's event `kind`:
    /// Err (why) when one refuses it.
    pub(super) async fn govern(&self, hook: &Stored, kind: &str) -> Result<()> {
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
            return Ok(());
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
            held: None,
            refuses: Some("the delivery"),
            done_when_approved: false,
        };
        let now = self.clock.now_ms();
        let (posted, outcome) = self
            .store
            .write(move |c| verdict.record_tx(c, &v, now))
            .await?;
        for p in &posted {
            self.messaging.announce(scope.workflow_id, p);
        }
        // No approval can hold a delivery (the contract's parsing refuses one).
        outcome.map(|_| ()).map_err(Error::forbidden)
    }
}
