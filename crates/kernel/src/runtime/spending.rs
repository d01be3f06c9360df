//! Contracts that look at a run from outside: what has been spent, checked before
//! a run starts (notify, pause, or hold the agent's runs until an approval), and
//! how a run ended (notify, pause).

use super::runs::{Spender, spent};
use crate::events::Event;
use crate::governance::approvals::{self, NewApproval};
use crate::governance::contracts::{Decision, in_force, record_tx};
use crate::messaging::post_system_to;
use crate::runtime::approvals::Approvals;
use crate::runtime::base::{Base, Pause};
use domain::contracts::{self, Event as Ev, When};
use domain::error::Result;
use domain::names::WorkflowRef;
use domain::states::RunStatus;
use std::sync::Arc;
use store::sql::Connection;

/// Spend and run_end contracts, applied around a run.
pub struct Spending {
    base: Arc<Base>,
    approvals: Arc<Approvals>,
}

impl Spending {
    pub(crate) fn new(base: Arc<Base>, approvals: Arc<Approvals>) -> Self {
        Self { base, approvals }
    }

    /// Before a run starts: what spend contracts say. Returns true when the run
    /// must wait (an approval is open or was just asked for, or the agent paused).
    pub(crate) async fn spend_holds(
        self: &Arc<Self>,
        agent_id: i64,
        name: &str,
        workflow: &WorkflowRef,
        workflow_id: i64,
    ) -> Result<bool> {
        let all = self.base.contracts.all();
        let spend: Vec<contracts::Contract> = in_force(&all, workflow_id, workflow)
            .filter(|c| matches!(c.when, When::Spend { .. }))
            .cloned()
            .collect();
        if spend.is_empty() {
            return Ok(false);
        }
        let (wf, n) = (workflow.clone(), name.to_owned());
        let now = self.base.clock.now_ms();
        let out = self
            .base.store
            .write(move |c| {
                let (at, au) = spent(c, Spender::Agent(agent_id))?;
                let (wt, wu) = spent(c, Spender::Workflow(workflow_id))?;
                let v = contracts::decide(&spend, &Ev::Spend {
                    agent: &n,
                    agent_usd: au,
                    agent_tokens: at,
                    workflow_usd: wu,
                    workflow_tokens: wt,
                });
                let what = format!("spent ${au:.4} and {at} tokens (the workflow ${wu:.4} and {wt} tokens)");
                let once = |contract: &str, outcome: &str| first_spend_decision(c, workflow_id, &n, contract, outcome);
                let mut posted = Vec::new();
                for (contract, to) in &v.notify {
                    if once(contract, "notified")? {
                        record_tx(c, &Decision::new(workflow_id, &n, "spend", &what, vec![contract.clone()], "notified"), now)?;
                        posted.push(post_system_to(c, workflow_id, &wf, to, &format!("contract \"{contract}\": {n} has {what}."), now)?);
                    }
                }
                let mut pause = None;
                for (contract, why) in &v.pause {
                    if once(contract, "paused")? {
                        record_tx(c, &Decision {
                            reason: Some(why.clone()),
                            ..Decision::new(workflow_id, &n, "spend", &what, vec![contract.clone()], "paused")
                        }, now)?;
                        pause = Some(format!("contract \"{contract}\": {n} has {what}"));
                        break;
                    }
                }
                let mut hold = pause.is_some();
                if let Some(a) = &v.approval {
                    let per_agent = a.contracts.iter().all(|x| {
                        spend.iter().any(|s| s.name == *x && matches!(s.when, When::Spend { per: contracts::Per::Agent, .. }))
                    });
                    let (granted, open) =
                        approvals::spend_state(c, workflow_id, per_agent.then_some(agent_id), &a.contracts)?;
                    if !granted {
                        hold = true;
                        if !open {
                            let id = approvals::insert_tx(c, &NewApproval {
                                workflow_id,
                                agent_id,
                                agent: n.clone(),
                                run_id: None,
                                event: "spend".into(),
                                detail: what.clone(),
                                approval: a.clone(),
                            }, now)?;
                            posted.push(post_system_to(c, workflow_id, &wf, &a.approvers, &format!(
                                "approval {id}: {n} has {what} (contract {}); its next run waits until you decide with \
                                 approval_decide {{\"id\": {id}, \"decision\": \"approve\"}} or \"deny\" (within {}).",
                                a.contracts.iter().map(|x| format!("\"{x}\"")).collect::<Vec<_>>().join(", "),
                                humantime::format_duration(a.timeout)
                            ), now)?);
                            return Ok((posted, pause, hold, Some((id, a.timeout))));
                        }
                    }
                }
                Ok((posted, pause, hold, None))
            })
            .await?;
        let (posted, pause, hold, asked) = out;
        for p in &posted {
            self.base.messaging.announce(workflow_id, p);
        }
        if let Some((id, timeout)) = asked {
            self.base
                .events
                .publish(Event::ApprovalAsked { workflow_id, id });
            self.approvals.arm(id, timeout);
        }
        if let Some(why) = pause {
            let p = Pause::until_resumed(agent_id, (workflow, workflow_id), name, &why);
            self.base.pause(p).await?;
        }
        Ok(hold)
    }

    /// After a run: what run_end contracts say (tell someone, pause the agent).
    pub(crate) async fn run_end_contracts(
        self: &Arc<Self>,
        agent_id: i64,
        name: &str,
        workflow: &WorkflowRef,
        workflow_id: i64,
        status: RunStatus,
    ) -> Result<()> {
        let all = self.base.contracts.all();
        let v = contracts::decide(
            in_force(&all, workflow_id, workflow),
            &Ev::RunEnd {
                agent: name,
                status: status.as_str(),
            },
        );
        if !v.any() {
            return Ok(());
        }
        let (wf, n, st, v2) = (
            workflow.clone(),
            name.to_owned(),
            status.as_str().to_owned(),
            v.clone(),
        );
        let now = self.base.clock.now_ms();
        let posted = self
            .base
            .store
            .write(move |c| {
                record_tx(
                    c,
                    &Decision::of(workflow_id, &n, "run_end", &format!("a run {st}"), &v2),
                    now,
                )?;
                let mut posted = Vec::new();
                for (contract, to) in &v2.notify {
                    posted.push(post_system_to(
                        c,
                        workflow_id,
                        &wf,
                        to,
                        &format!("contract \"{contract}\": a run of {n} ended {st}."),
                        now,
                    )?);
                }
                Ok(posted)
            })
            .await?;
        for p in &posted {
            self.base.messaging.announce(workflow_id, p);
        }
        if let Some((contract, why)) = v.pause.first() {
            self.base
                .pause(Pause {
                    agent_id,
                    workflow,
                    workflow_id,
                    name,
                    reason: &format!("contract \"{contract}\": {why}"),
                    auto_from: None,
                })
                .await?;
        }
        Ok(())
    }
}

/// Whether `contract` has not yet decided `outcome` on this agent's spend in this
/// instance (a spend contract notifies or pauses once).
fn first_spend_decision(
    c: &Connection,
    workflow_id: i64,
    agent: &str,
    contract: &str,
    outcome: &str,
) -> Result<bool> {
    Ok(!c.query_row(
        "SELECT EXISTS (SELECT 1 FROM contract_decisions WHERE workflow_id = ?1 AND agent = ?2
           AND event = 'spend' AND outcome = ?3 AND contracts = ?4)",
        (
            workflow_id,
            agent,
            outcome,
            serde_json::to_string(&[contract]).unwrap_or_default(),
        ),
        |r| r.get::<bool>(0),
    )?)
}
