//! Admission: whether a wake becomes a run now, later, or not at all. The gate
//! reads the agent's facts in one snapshot (paused, external, its workflow's
//! state, an empty inbox, for a poll the channel it has not seen, its guards) and
//! the queue keeps the worker limit, first in, first out, one place per agent.

use super::{Admission, Queued, Scheduler, Wake};
use crate::messaging::runs::open_deliveries;
use crate::registry::config::AgentConfig;
use crate::runtime::base::Pause;
use crate::runtime::runs::{Spender, spent};
use crate::runtime::schedules;
use domain::error::Result;
use domain::guards::{Budget, DEFAULT_MAX_HOPS, DEFAULT_RUNS_PER_HOUR};
use domain::names::WorkflowRef;
use domain::states::{AgentState, WorkflowState, may_wake};
use std::sync::{Arc, Weak};
use store::sql::{self, Connection, OptionalExtension};

/// What the gate decided for one wake.
enum Gate {
    Go,
    Skip,
    Trip(String),
}

/// What the gate reads, in one snapshot.
struct GateFacts {
    /// Driven by a joined client: never started by the kernel.
    external: bool,
    name: String,
    workflow: WorkflowRef,
    workflow_id: i64,
    agent_state: AgentState,
    workflow_state: WorkflowState,
    open: i64,
    /// For a poll: others posted in the channel after what its last run saw, or
    /// something above the runtime waits for it (a task it may take).
    unseen: bool,
    hops: i64,
    runs_last_hour: i64,
    agent_budget: Budget,
    workflow_budget: Budget,
    agent_tokens: u64,
    agent_cost: f64,
    workflow_tokens: u64,
    workflow_cost: f64,
}

/// What decides whether an agent of this node (`node`) runs at `now` for `wake`;
/// None if it is gone or another node's.
fn gate_facts(
    c: &Connection,
    agent_id: i64,
    (node, now): (&str, i64),
    wake: Wake,
    waiting: Option<Arc<dyn super::Waiting>>,
) -> Result<Option<GateFacts>> {
    let row = c
        .query_row(
            "SELECT a.name, w.name, w.tag, w.id, a.state, w.state, w.hops, a.config, w.budget, a.backend
             FROM agents a JOIN workflows w ON w.id = a.workflow_id WHERE a.id = ?1 AND a.node = ?2",
            sql::params![agent_id, node],
            |r| {
                Ok((
                    r.get::<String>(0)?,
                    WorkflowRef {
                        name: r.get(1)?,
                        tag: r.get(2)?,
                    },
                    r.get::<i64>(3)?,
                    r.parse::<AgentState>(4)?,
                    r.parse::<WorkflowState>(5)?,
                    r.get::<i64>(6)?,
                    r.get::<String>(7)?,
                    r.get::<String>(8)?,
                    r.get::<String>(9)?,
                ))
            },
        )
        .optional()?;
    let Some((name, workflow, wid, agent_state, workflow_state, hops, config, wbudget, backend)) =
        row
    else {
        return Ok(None);
    };
    let open = open_deliveries(c, wid, &name, now)?;
    let unseen = wake == Wake::Poll
        && open == 0
        && (schedules::unseen(c, agent_id)?
            || match waiting {
                Some(w) => w.waiting_tx(c, wid, &name)?,
                None => false,
            });
    let runs_last_hour: i64 = c.query_row(
        "SELECT count(*) FROM runs WHERE agent_id = ?1 AND started_at > ?2",
        (agent_id, now - 3_600_000),
        |r| r.get(0),
    )?;
    let config: AgentConfig = serde_json::from_str(&config).unwrap_or_default();
    let agent_budget = config.budget.unwrap_or_default();
    let workflow_budget: Budget = serde_json::from_str(&wbudget).unwrap_or_default();
    // Spending is summed only for a budget that limits it: most agents have none, and
    // the sum grows with the history.
    let limited = |budget: &Budget, who: Spender| -> Result<(u64, f64)> {
        if budget.max_tokens.is_none() && budget.max_cost_usd.is_none() {
            return Ok((0, 0.0));
        }
        spent(c, who)
    };
    let (agent_tokens, agent_cost) = limited(&agent_budget, Spender::Agent(agent_id))?;
    let (workflow_tokens, workflow_cost) = limited(&workflow_budget, Spender::Workflow(wid))?;
    Ok(Some(GateFacts {
        external: crate::registry::has_no_worker(&backend),
        name,
        workflow,
        workflow_id: wid,
        agent_state,
        workflow_state,
        open,
        unseen,
        hops,
        runs_last_hour,
        agent_budget,
        workflow_budget,
        agent_tokens,
        agent_cost,
        workflow_tokens,
        workflow_cost,
    }))
}

impl GateFacts {
    fn decide(&self, wake: Wake) -> Gate {
        if self.external || !may_wake(self.agent_state, self.workflow_state) {
            return Gate::Skip;
        }
        if wake.needs_inbox() && self.open == 0 {
            return Gate::Skip;
        }
        // A poll with nothing waiting: no run, and so no guard to trip.
        if wake == Wake::Poll && self.open == 0 && !self.unseen {
            return Gate::Skip;
        }
        let b = self.agent_budget.or(&self.workflow_budget);
        let per_hour = b.max_runs_per_hour.unwrap_or(DEFAULT_RUNS_PER_HOUR) as i64;
        if self.runs_last_hour >= per_hour {
            return Gate::Trip(format!(
                "{} started {} runs in the last hour (max_runs_per_hour {per_hour})",
                self.name, self.runs_last_hour
            ));
        }
        let hops = b.max_hops.unwrap_or(DEFAULT_MAX_HOPS) as i64;
        if wake == Wake::Message && self.hops >= hops {
            return Gate::Trip(format!(
                "agents sent each other {} messages without a word from you (max_hops {hops}); this looks \
                 like a loop",
                self.hops
            ));
        }
        let agent = over_budget(
            &self.name,
            &self.agent_budget,
            self.agent_tokens,
            self.agent_cost,
        );
        let workflow = over_budget(
            &self.workflow.to_string(),
            &self.workflow_budget,
            self.workflow_tokens,
            self.workflow_cost,
        );
        match agent.or(workflow) {
            Some(why) => Gate::Trip(why),
            None => Gate::Go,
        }
    }
}

/// Why `who` (an agent or a workflow instance) is over its token or cost budget.
fn over_budget(who: &str, budget: &Budget, tokens: u64, cost: f64) -> Option<String> {
    if let Some(t) = budget.max_tokens
        && tokens >= t
    {
        return Some(format!(
            "{who} used {tokens} tokens, its budget is {t} (max_tokens)"
        ));
    }
    if let Some(d) = budget.max_cost_usd
        && cost >= d
    {
        return Some(format!(
            "{who} used ${cost:.4}, its budget is ${d} (max_cost_usd)"
        ));
    }
    None
}

impl Scheduler {
    /// Asks for a run of an agent; see the module docs for what may happen instead.
    pub(crate) async fn admit(
        self: &Arc<Self>,
        agent_id: i64,
        mut wake: Wake,
        mut prompt: Option<String>,
    ) {
        // Once more for a message that came while this admission was under way.
        while self.admit_once(agent_id, wake, prompt).await {
            (wake, prompt) = (Wake::Message, None);
        }
    }

    /// One admission; true if a message reached the agent meanwhile and it must
    /// be looked at again.
    async fn admit_once(
        self: &Arc<Self>,
        agent_id: i64,
        wake: Wake,
        prompt: Option<String>,
    ) -> bool {
        if self
            .workers
            .remember_wake(agent_id, wake, prompt.as_deref())
            .is_some()
        {
            return false;
        }
        let running = self.workers.runs_in_progress();
        let q = Queued {
            agent_id,
            wake,
            prompt,
        };
        let admitted = self.state.lock().unwrap().admit(q, running, self.limit);
        let Admission::Start(prompt) = admitted else {
            return false;
        };
        let r = self.gate_and_start(agent_id, wake, prompt).await;
        let again = self.state.lock().unwrap().started(agent_id);
        if let Err(e) = r {
            tracing::warn!(agent_id, "could not start a run: {e}");
        }
        again
    }

    async fn gate_and_start(
        self: &Arc<Self>,
        agent_id: i64,
        wake: Wake,
        prompt: Option<String>,
    ) -> Result<()> {
        let (me, now) = (self.base.node().to_owned(), self.base.clock.now_ms());
        let waiting = self.waiting.get().and_then(Weak::upgrade);
        let Some(facts) = self
            .base
            .store
            .read(move |c| gate_facts(c, agent_id, (&me, now), wake, waiting))
            .await?
        else {
            return Ok(()); // deleted, or another node's
        };
        match facts.decide(wake) {
            // A poll that starts nothing publishes nothing: a workflow run left
            // running by a check made while this admission was under way (it owed
            // a run then) looks again.
            Gate::Skip if wake == Wake::Poll && facts.workflow_state == WorkflowState::Running => {
                self.settle_soon(facts.workflow_id);
                Ok(())
            }
            Gate::Skip => Ok(()),
            Gate::Trip(why) => self
                .base
                .pause(Pause {
                    agent_id,
                    workflow: &facts.workflow,
                    workflow_id: facts.workflow_id,
                    name: &facts.name,
                    reason: &format!("guard: {why}"),
                    auto_from: None,
                })
                .await
                .map(|_| ()),
            Gate::Go
                if self
                    .spending
                    .spend_holds(agent_id, &facts.name, &facts.workflow, facts.workflow_id)
                    .await? =>
            {
                Ok(())
            }
            Gate::Go => match self.workers.start_run(agent_id, wake, prompt.clone()).await {
                Ok(_) => Ok(()),
                // Started by someone else (an ask) between the check and here.
                Err(domain::error::Error::Conflict(_)) => {
                    self.workers
                        .remember_wake(agent_id, wake, prompt.as_deref());
                    Ok(())
                }
                Err(e) => Err(e),
            },
        }
    }

    /// Starts queued runs while there is room.
    pub(super) async fn drain_queue(self: &Arc<Self>) {
        loop {
            let running = self.workers.runs_in_progress();
            let next = self.state.lock().unwrap().next(running, self.limit);
            let Some(q) = next else { return };
            self.admit(q.agent_id, q.wake, q.prompt).await;
        }
    }
}

#[cfg(test)]
mod tests;
