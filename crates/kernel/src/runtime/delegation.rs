//! Delegation: an agent whose definition carries `delegate` makes and asks agents
//! of its own. A sub-agent lives in its parent's instance and belongs to it (paused
//! and deleted with it: agents/), is never wider than it (permissions, backends,
//! `delegate`), counts against `delegate.agents` (in the write that registers it),
//! spends from its parent's budget and the share `delegate.budget` gives (runs.rs,
//! the gate), and is made only as `agent_new` contracts say (deny, notify, or an
//! approval the making waits for, as a run's tool request does). An agent acts only
//! on the agents it made.

use crate::AgentIdentity;
use crate::events::Event;
use crate::governance::approvals::Ended;
use crate::governance::contracts::in_force;
use crate::registry::config::AgentConfig;
use crate::registry::{AgentRecord, AgentView, NewAgent};
use crate::runtime::agents::Agents;
use crate::runtime::approvals::Approvals;
use crate::runtime::ask::{Asking, Asks};
use crate::runtime::base::Base;
use crate::runtime::runs::{Spender, delegation_over, over, spent};
use crate::runtime::verdict::VerdictOf;
use domain::contracts::{self, Event as Ev};
use domain::delegate::{Delegate, within};
use domain::error::{Error, Result};
use domain::guards::Budget;
use domain::names::AgentRef;
use domain::permissions::Permissions;
use domain::placement::Placement;
use domain::protocol::MockRule;
use std::sync::Arc;

/// What an agent asks of a sub-agent; the rest (instance, folder, env) is its own.
#[derive(Debug, Clone, Default)]
pub struct SubAgent {
    pub name: String,
    pub backend: String,
    pub model: Option<String>,
    pub system: Option<String>,
    /// Default: the parent's own.
    pub permissions: Option<Permissions>,
    pub budget: Option<Budget>,
    pub mock: Vec<MockRule>,
    pub max_steps: Option<u32>,
    pub delegate: Option<Delegate>,
}

/// Making, asking and deleting the agents an agent made.
pub struct Delegation {
    base: Arc<Base>,
    agents: Arc<Agents>,
    asks: Arc<Asks>,
    approvals: Arc<Approvals>,
}

impl Delegation {
    pub(crate) fn new(
        base: Arc<Base>,
        agents: Arc<Agents>,
        asks: Arc<Asks>,
        approvals: Arc<Approvals>,
    ) -> Self {
        Self {
            base,
            agents,
            asks,
            approvals,
        }
    }

    /// The caller's own record and its `delegate` (refused as a missing tool when
    /// its definition has none: it is not offered the tools).
    async fn parent(&self, by: &AgentIdentity) -> Result<(AgentRecord, Delegate)> {
        let me = AgentRef {
            name: by.name.clone(),
            workflow: by.workflow.clone(),
        };
        let rec = self.base.registry.agent_get(&me.to_string()).await?;
        match rec.view.delegate.clone() {
            Some(d) => Ok((rec, d)),
            None => Err(Error::not_found(
                "your definition does not let you make agents (no delegate)",
            )),
        }
    }

    /// Makes a sub-agent of `by`, held to its definition's `delegate`.
    pub async fn sub_agent_new(&self, by: &AgentIdentity, s: SubAgent) -> Result<AgentView> {
        let (parent, d) = self.parent(by).await?;
        d.allows_backend(&parent.view.backend, &s.backend)
            .map_err(Error::invalid)?;
        let (env, own) = self
            .agents
            .agent_env_and_permissions(&parent.view.target)
            .await?;
        let asked = s.permissions.clone().unwrap_or_else(|| own.clone());
        let permissions = within(&asked, &own).map_err(Error::invalid)?;
        if let Some(sub) = &s.delegate {
            d.check_sub(&parent.view.backend, sub)
                .map_err(Error::invalid)?;
        }
        if let (Some(b), Some(own)) = (&s.budget, &parent.view.budget) {
            not_over_own(b, own)?;
        }
        if let Some(why) = self.spent_up(&parent).await? {
            return Err(Error::conflict(format!(
                "{why}; no new sub-agent can spend from it (nothing was made)"
            )));
        }
        let budget = self.share_left(&parent, &d, s.budget.clone()).await?;
        self.contracts(by, &parent, &s).await?;
        let new = NewAgent {
            name: s.name.trim().to_owned(),
            backend: s.backend,
            model: s.model,
            system: s.system,
            workflow: Some(parent.view.workflow.clone()),
            cwd: parent.view.cwd.clone(),
            env,
            config: AgentConfig {
                mock: s.mock,
                max_steps: s.max_steps,
                budget,
                permissions,
                delegate: s.delegate,
                ..Default::default()
            },
            schedule: None,
            node: parent.view.node.clone().map(Placement::Node),
            parent: Some((parent.id, d.agents)),
        };
        self.agents.agent_new(new).await
    }

    /// The sub-agent's budget within what is left of the share its parent gives
    /// (`delegate.budget`): a limit it leaves out is what is left; one over it, or
    /// a share used up, is refused.
    async fn share_left(
        &self,
        parent: &AgentRecord,
        d: &Delegate,
        asked: Option<Budget>,
    ) -> Result<Option<Budget>> {
        let Some(share) = d.budget.clone() else {
            return Ok(asked);
        };
        let id = parent.id;
        let (tokens, usd) = self
            .base
            .store
            .read(move |c| spent(c, Spender::SubAgents(id)))
            .await?;
        let mut b = asked.unwrap_or_default();
        if let Some(max) = share.max_tokens {
            let left = max.saturating_sub(tokens);
            if left == 0 {
                return Err(Error::invalid(format!(
                    "delegate.budget.max_tokens: your sub-agents have used {tokens} tokens of their \
                     {max}; no new sub-agent can spend more"
                )));
            }
            match b.max_tokens {
                Some(t) if t > left => {
                    return Err(Error::invalid(format!(
                        "budget.max_tokens: {t} is over what is left of your sub-agents' share \
                         ({left} of delegate.budget.max_tokens {max}); ask for {left} or less"
                    )));
                }
                Some(_) => {}
                None => b.max_tokens = Some(left),
            }
        }
        if let Some(max) = share.max_cost_usd {
            let left = max - usd;
            if left <= 0.0 {
                return Err(Error::invalid(format!(
                    "delegate.budget.max_cost_usd: your sub-agents have spent ${usd:.4} of their \
                     ${max}; no new sub-agent can spend more"
                )));
            }
            match b.max_cost_usd {
                Some(t) if t > left => {
                    return Err(Error::invalid(format!(
                        "budget.max_cost_usd: {t} is over what is left of your sub-agents' share \
                         (${left:.4} of delegate.budget.max_cost_usd {max})"
                    )));
                }
                Some(_) => {}
                None => b.max_cost_usd = Some(left),
            }
        }
        Ok(Some(b))
    }

    /// What `agent_new` contracts say of `by` making `s`: Err when one refuses or
    /// its approval is not given (waited for here, as a run's tool request waits).
    async fn contracts(
        &self,
        by: &AgentIdentity,
        parent: &AgentRecord,
        s: &SubAgent,
    ) -> Result<()> {
        let all = self.base.contracts.all();
        let v = contracts::decide(
            in_force(&all, by.workflow_id, &by.workflow),
            &Ev::AgentNew {
                by: &by.name,
                name: &s.name,
                backend: &s.backend,
            },
        );
        if !v.any() {
            return Ok(());
        }
        let detail = format!("{} makes agent {} ({})", by.name, s.name, s.backend);
        let verdict = VerdictOf {
            workflow_id: by.workflow_id,
            workflow: by.workflow.clone(),
            agent_id: parent.id,
            agent: by.name.clone(),
            run_id: by.run_id.clone(),
            event: "agent_new",
            title: detail.clone(),
            detail,
            held: None,
            refuses: None,
            done_when_approved: false,
        };
        let now = self.base.clock.now_ms();
        let (posted, outcome) = self
            .base
            .store
            .write(move |c| verdict.record_tx(c, &v, now))
            .await?;
        for p in &posted {
            self.base.messaging.announce(by.workflow_id, p);
        }
        let Some((id, Some(timeout))) = outcome.map_err(Error::forbidden)? else {
            return Ok(());
        };
        self.base.events.publish(Event::ApprovalAsked {
            workflow_id: by.workflow_id,
            id,
        });
        self.approvals.arm(id, timeout);
        let run = by.run_id.clone().unwrap_or_default();
        match self.approvals.wait(id, parent.id, &run).await? {
            Ended::Allowed(_) => Ok(()),
            Ended::Refused(why) => Err(Error::forbidden(format!(
                "approval {id} to make {} was not given: {why}",
                s.name
            ))),
            Ended::Pending => Err(Error::forbidden(format!("approval {id} is still open"))),
        }
    }

    /// One of the agents `by` made, by name (an agent acts on no other).
    async fn own(&self, by: &AgentIdentity, name: &str) -> Result<AgentRecord> {
        let (parent, _) = self.parent(by).await?;
        let target = AgentRef {
            name: name.trim().trim_start_matches('@').to_owned(),
            workflow: by.workflow.clone(),
        };
        let rec = self.base.registry.agent_get(&target.to_string()).await;
        match rec {
            Ok(r) if r.view.parent.as_deref() == Some(parent.view.name.as_str()) => Ok(r),
            _ => {
                let mine: Vec<String> = self
                    .base
                    .registry
                    .agent_list(Some(&by.workflow.to_string()))
                    .await?
                    .into_iter()
                    .filter(|a| a.parent.as_deref() == Some(parent.view.name.as_str()))
                    .map(|a| a.name)
                    .collect();
                Err(Error::not_found(format!(
                    "no agent {name:?} of yours; yours: {}",
                    if mine.is_empty() {
                        "(none: make one with team_agent_new)".into()
                    } else {
                        mine.join(", ")
                    }
                )))
            }
        }
    }

    /// Asks one of `by`'s sub-agents, as the lead's agent_ask does (the question a
    /// DM from `by`; the answer what it sent `by` and its final text).
    pub async fn sub_agent_ask(
        &self,
        by: &AgentIdentity,
        name: &str,
        message: &str,
    ) -> Result<Asking> {
        let sub = self.own(by, name).await?;
        // A question runs it at once, past the scheduler's guards: the limits on
        // what it and the agents above it may spend are checked here.
        if let Some(why) = self.spent_up(&sub).await? {
            return Err(Error::conflict(format!(
                "{why}; it is not asked (nothing was sent)"
            )));
        }
        let scope = self
            .base
            .registry
            .scope(&crate::Caller::Agent(by.clone()), None)
            .await?;
        self.asks.ask_as(&scope, sub, message, None).await
    }

    /// Why `a` may spend no more: its own budget or one of the agents above it
    /// (their budgets and the shares they give) is used up, as the gate judges.
    async fn spent_up(&self, a: &AgentRecord) -> Result<Option<String>> {
        let (id, own) = (a.id, a.view.budget.clone().unwrap_or_default());
        let who = a.view.name.clone();
        self.base
            .store
            .read(move |c| {
                if let Some(why) = delegation_over(c, id)? {
                    return Ok(Some(why));
                }
                Ok(over(
                    &who,
                    own.max_tokens,
                    own.max_cost_usd,
                    spent(c, Spender::Agent(id))?,
                    "budget",
                ))
            })
            .await
    }

    /// Deletes one of `by`'s sub-agents (and theirs).
    pub async fn sub_agent_delete(&self, by: &AgentIdentity, name: &str) -> Result<AgentView> {
        let sub = self.own(by, name).await?;
        Ok(self.agents.agent_delete(&sub.view.target, false).await?.0)
    }
}

/// A sub-agent's own token and cost limits are no larger than its parent's.
fn not_over_own(b: &Budget, own: &Budget) -> Result<()> {
    if let (Some(t), Some(o)) = (b.max_tokens, own.max_tokens)
        && t > o
    {
        return Err(Error::invalid(format!(
            "budget.max_tokens: {t} is over your own budget.max_tokens {o}"
        )));
    }
    if let (Some(t), Some(o)) = (b.max_cost_usd, own.max_cost_usd)
        && t > o
    {
        return Err(Error::invalid(format!(
            "budget.max_cost_usd: {t} is over your own budget.max_cost_usd {o}"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
