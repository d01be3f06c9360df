//! agent_info: an agent as the lead reads it, with its inbox, its tokens, its
//! latest runs and what they cost, its schedule and its worktree.

use super::Agents;
use crate::registry::AgentView;
use domain::error::Result;
use domain::names::WorkflowRef;
use domain::states::DeliveryState;
use schemars::JsonSchema;
use serde::Serialize;

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct InboxCounts {
    /// Delivered, not yet read.
    pub pending: i64,
    /// Read, not yet acknowledged.
    pub seen: i64,
    /// Put off until later.
    pub deferred: i64,
    pub acked: i64,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct AgentInfo {
    pub agent: AgentView,
    /// What the agent last reported with my_status_set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<crate::messaging::team::Status>,
    pub inbox: InboxCounts,
    /// Tokens that currently let something act as this agent (agent_join, runs).
    pub active_tokens: i64,
    /// The run in progress, if any, as the database records it (on this node or
    /// another).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub running: Option<String>,
    /// The most recent runs, newest first (at most 10).
    pub runs: Vec<crate::runtime::runs::RunView>,
    /// Totals over all its runs: how many, how many failed, tokens and cost.
    pub usage: crate::runtime::runs::RunTotals,
    /// Its schedule, if it has one, with the next fire time.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub schedule: Option<crate::runtime::schedules::ScheduleView>,
    /// Its worktree (workspace: worktree): folder, branch, base and head commits,
    /// commits since the base.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub worktree: Option<crate::runtime::worktrees::WorktreeInfo>,
}

impl Agents {
    pub async fn agent_info(&self, target: &str) -> Result<AgentInfo> {
        let rec = self.base.registry.agent_get(target).await?;
        let (id, wid, name) = (rec.id, rec.workflow_id, rec.view.name.clone());
        // Before the database: a run leaves the active map only after its end is
        // committed, so "not running" here means the read below sees that end.
        let mine = self.workers.active_run(id).map(|h| h.run_id);
        let now = self.base.clock.now_ms();
        let (status, inbox, active_tokens, runs, usage, schedule) = self
            .base.store
            .read(move |c| {
                let status = crate::messaging::team::read_status(c, wid, &name)?;
                let mut inbox = InboxCounts { pending: 0, seen: 0, deferred: 0, acked: 0 };
                let mut st = c.prepare(
                    "SELECT state, count(*) FROM deliveries WHERE workflow_id = ?1 AND recipient = ?2 GROUP BY state",
                )?;
                for row in st.query_map((wid, &name), |r| Ok((r.parse::<DeliveryState>(0)?, r.get::<i64>(1)?)))? {
                    let (state, n) = row?;
                    match state {
                        DeliveryState::Pending => inbox.pending = n,
                        DeliveryState::Seen => inbox.seen = n,
                        DeliveryState::Deferred | DeliveryState::Acked => inbox.deferred = n,
                    }
                }
                // Broadcasts not yet written as its rows are pending too.
                inbox.pending += crate::messaging::broadcast::unwritten(c, wid, &name)?;
                inbox.acked = c.query_row(
                    "SELECT count(*) FROM deliveries_done WHERE workflow_id = ?1 AND recipient = ?2",
                    (wid, &name),
                    |r| r.get(0),
                )?;
                let tokens: i64 = c.query_row(
                    "SELECT count(*) FROM tokens WHERE agent_id = ?1 AND revoked_at IS NULL AND expires_at > ?2",
                    (id, now),
                    |r| r.get(0),
                )?;
                let runs = crate::runtime::runs::recent_runs(c, id, crate::runtime::runs::RECENT_RUNS)?;
                let usage = crate::runtime::runs::totals(c, id)?;
                let schedule = crate::runtime::schedules::get(c, id)?;
                Ok((status, inbox, tokens, runs, usage, schedule))
            })
            .await?;
        // The database's run in progress first (one per agent: one that began
        // since, or runs on another node); else this node's, whose row is not
        // written yet. `running` never says less than the newest run does.
        let newest = runs
            .first()
            .filter(|r| r.status == domain::states::RunStatus::Running);
        let running = newest.map(|r| r.id.clone()).or(mine);
        let target = rec.view.target.clone();
        let worktree = match (&rec.view.workspace, WorkflowRef::parse(&rec.view.workflow)) {
            (Some(domain::workspace::Workspace::Worktree(w)), Ok(wf)) => {
                Some(self.worktrees.info(&wf, &rec.view.name, w).await)
            }
            _ => None,
        };
        Ok(AgentInfo {
            worktree,
            running,
            agent: rec.view,
            status,
            inbox,
            active_tokens,
            runs,
            usage,
            schedule: schedule.map(|row| crate::runtime::schedules::view(target, row)),
        })
    }
}
