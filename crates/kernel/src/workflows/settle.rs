//! When a workflow run is done: the watch on the runtime's events, the debounced
//! check (done, blocked, scheduled, running again) and failing a run. A step
//! workflow's graph takes part: it is done only when every step is over, and a
//! failed step no step handles fails it.

use super::Workflows;
use super::facts::{AgentFacts, agent_facts, open_binding_proposals, workflow_row};
use super::steps::Outcome;
use crate::events::Event;
use domain::error::Result;
use domain::states::{AgentState, WorkflowState};
use std::sync::Arc;
use store::sql;

impl Workflows {
    /// Listens to the runtime: a quiet workflow run is checked (done, blocked,
    /// running again), an agent that failed for good fails its run (or its step,
    /// in a step workflow), and runs' ends, messages and documents move step
    /// graphs. Missed events (a lagging listener) are made up by checking every
    /// run in progress and every graph.
    pub fn start_workflow_watch(self: &Arc<Self>) {
        let weak = Arc::downgrade(self);
        let mut rx = self.events.subscribe();
        tokio::spawn(async move {
            loop {
                let ev = rx.recv().await;
                let Some(k) = weak.upgrade() else { return };
                let r = match ev {
                    Ok(ev) => k.on_event(ev).await,
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {
                        match k.steps.recover().await {
                            Ok(()) => k.settle_all_workflow_runs().await,
                            Err(e) => Err(e),
                        }
                    }
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
                };
                if let Err(e) = r {
                    tracing::error!("workflow watch: {e}");
                }
            }
        });
    }

    /// At the kernel's start: step graphs whose steps ended (or whose events
    /// came) while no kernel listened move on.
    pub async fn recover_steps(&self) -> Result<()> {
        self.steps.recover().await
    }

    async fn on_event(self: &Arc<Self>, ev: Event) -> Result<()> {
        match ev {
            Event::WorkflowQuiet { workflow_id } => self.workflow_settle(workflow_id).await,
            Event::AgentFailed {
                workflow_id,
                agent,
                reason,
            } => {
                if self
                    .steps
                    .agent_failed(workflow_id, &agent, &reason)
                    .await?
                {
                    return Ok(());
                }
                self.workflow_fail(workflow_id, &reason).await
            }
            Event::RunEnded {
                workflow_id, agent, ..
            }
            | Event::Acked { workflow_id, agent } => {
                self.steps.run_ended(workflow_id, &agent).await
            }
            Event::Posted {
                workflow_id,
                message_id,
            } => self.steps.posted(workflow_id, &message_id).await,
            Event::DocumentChanged {
                workflow_id, file, ..
            } => self.steps.document_written(workflow_id, &file).await,
            // A note or an edit leaves the state a step waits for as it was.
            Event::TaskChanged {
                workflow_id,
                id,
                state,
                moved: true,
            } => self.steps.task_changed(workflow_id, id, state).await,
            _ => Ok(()),
        }
    }

    pub(super) async fn settle_all_workflow_runs(self: &Arc<Self>) -> Result<()> {
        let ids: Vec<i64> = self
            .store
            .read(|c| {
                let mut st = c.prepare(
                    "SELECT id FROM workflows WHERE state IN ('running', 'completed', 'scheduled', 'blocked')",
                )?;
                let ids = st
                    .query_map((), |r| r.get(0))?
                    .collect::<sql::Result<Vec<i64>>>()?;
                Ok(ids)
            })
            .await?;
        for id in ids {
            self.workflow_settle(id).await?;
        }
        Ok(())
    }

    /// The debounced check: is this workflow run done, blocked, or running again?
    async fn workflow_settle(self: &Arc<Self>, wid: i64) -> Result<()> {
        let now = self.clock.now_ms();
        let (row, agents, binding) = self
            .store
            .read(move |c| {
                Ok((
                    workflow_row(c, wid)?,
                    agent_facts(c, wid, now)?,
                    open_binding_proposals(c, wid)?,
                ))
            })
            .await?;
        if !row.state.is_live_run() {
            self.runtime.watch_workflow(wid, false);
            return Ok(());
        }
        let graph = self.steps.outcome(wid).await?;
        let ids: Vec<i64> = agents.iter().map(|a| a.id).collect();
        // This node's runs and owed work from memory; every node's runs from the store.
        let work_left = self.runtime.any_active(&ids)
            || agents.iter().any(|a| a.running)
            || self.runtime.owes_runs(&ids)
            || binding > 0
            || agents
                .iter()
                .filter(|a| live(a, graph.is_some()))
                .any(|a| a.summary.pending > 0 || a.schedule_owed);
        let (state, reason) = if work_left {
            (WorkflowState::Running, None)
        } else {
            match idle_state(&agents, graph.as_ref()) {
                Idle::Fails(why) => return self.workflow_fail(wid, &why).await,
                Idle::Is(state, reason) => (state, reason),
            }
        };
        if state == row.state && reason == row.reason {
            return Ok(());
        }
        let (r2, now) = (reason.clone(), self.clock.now_ms());
        self.store
            .write(move |c| {
                // A scheduled run has not ended: its schedules will run it again.
                let ended =
                    (!matches!(state, WorkflowState::Running | WorkflowState::Scheduled)).then_some(now);
                c.execute(
                    "UPDATE workflows SET state = ?2, reason = ?3, ended_at = ?4, updated_at = ?5 WHERE id = ?1
                       AND state IN ('running', 'completed', 'scheduled', 'blocked')",
                    sql::params![wid, state.as_str(), r2, ended, now],
                )?;
                Ok(())
            })
            .await?;
        tracing::info!(
            workflow_id = wid,
            state = state.as_str(),
            "workflow settled"
        );
        self.events.publish(Event::WorkflowSettled {
            workflow_id: wid,
            status: state,
        });
        Ok(())
    }

    /// Marks a workflow run failed with the reason and stops its other runs. An
    /// instance that is not a workflow run (`active`) is left as it is.
    pub(crate) async fn workflow_fail(self: &Arc<Self>, wid: i64, reason: &str) -> Result<()> {
        let (r, now) = (reason.to_owned(), self.clock.now_ms());
        let changed = self
            .store
            .write(move |c| {
                Ok(c.execute(
                    "UPDATE workflows SET state = 'failed', reason = ?2, ended_at = ?3, updated_at = ?3
                     WHERE id = ?1 AND state IN ('running', 'completed', 'scheduled', 'blocked')",
                    sql::params![wid, r, now],
                )? > 0)
            })
            .await?;
        if !changed {
            return Ok(());
        }
        self.runtime.watch_workflow(wid, false);
        self.stop_workflow_runs(wid).await?;
        self.events.publish(Event::WorkflowSettled {
            workflow_id: wid,
            status: WorkflowState::Failed,
        });
        Ok(())
    }
}

/// Whether an agent's open work counts: not while it is paused, nor, in a step
/// workflow, once it failed for good (its step failed; the graph goes on).
fn live(a: &AgentFacts, steps: bool) -> bool {
    a.summary.state != AgentState::Paused && !(steps && a.summary.state == AgentState::Failed)
}

enum Idle {
    Is(WorkflowState, Option<String>),
    /// A failed step no step handles.
    Fails(String),
}

/// What an instance with nothing left to do now is: blocked by paused agents,
/// waiting for events its steps need, scheduled (a schedule that runs every
/// time is armed), failed by a step, or completed (polls aside).
fn idle_state(agents: &[AgentFacts], graph: Option<&Outcome>) -> Idle {
    let stuck: Vec<String> = agents
        .iter()
        .filter(|a| a.summary.state == AgentState::Paused && a.summary.pending > 0)
        .map(|a| {
            format!(
                "{} is paused ({})",
                a.summary.name,
                a.summary.reason.as_deref().unwrap_or("by the lead")
            )
        })
        .collect();
    // A poll with nothing owed runs again only when something comes: it does not
    // keep the instance from being done.
    let (polling, armed): (Vec<&AgentFacts>, Vec<&AgentFacts>) = agents
        .iter()
        .filter(|a| live(a, graph.is_some()) && a.summary.next_wake.is_some())
        .partition(|a| a.polls);
    let armed: Vec<String> = armed
        .iter()
        .filter_map(|a| {
            let at = a.summary.next_wake.as_ref()?;
            Some(format!("{} at {at}", a.summary.name))
        })
        .collect();
    if !stuck.is_empty() {
        return Idle::Is(WorkflowState::Blocked, Some(stuck.join("; ")));
    }
    if let Some(g) = graph.filter(|g| !g.waiting.is_empty()) {
        let why = format!("steps wait for: {}", g.waiting.join("; "));
        return Idle::Is(WorkflowState::Running, Some(why));
    }
    if !armed.is_empty() {
        return Idle::Is(
            WorkflowState::Scheduled,
            Some(format!(
                "nothing to do now; schedules will run again: {} (workflow_stop disarms them)",
                armed.join(", ")
            )),
        );
    }
    match graph.filter(|g| !g.failed.is_empty()) {
        Some(g) => Idle::Fails(g.failed.join("; ")),
        None => Idle::Is(WorkflowState::Completed, still_polling(&polling)),
    }
}

/// What a completed instance says of its polling agents: they wake again only
/// when something comes for them.
fn still_polling(polling: &[&AgentFacts]) -> Option<String> {
    let names: Vec<&str> = polling.iter().map(|a| a.summary.name.as_str()).collect();
    (!names.is_empty()).then(|| {
        format!(
            "nothing left to do; polls run again only when something waits (a message, or a post by \
             someone else): {} (workflow_stop disarms them)",
            names.join(", ")
        )
    })
}

#[cfg(test)]
mod tests;
