//! Workflow runs: their status, when they are done, stopping them.
//!
//! A workflow run (an instance started by workflow_run) is `running` until it is
//! idle, then `completed`, or `scheduled` when some of its agents still have a
//! schedule armed (nothing to do now, but runs will come: it is not done, and the
//! status says when the next one fires until workflow_stop disarms them). Idle means, for its agents: no run in progress, nothing
//! queued or waiting for a retry or a deferred message, no pending or seen
//! deliveries (paused agents aside), no open binding proposal, and no scheduled run
//! still owed (someone posted after the schedule last fired). The check runs after
//! a quiet second (the scheduler's debounce) and reads the store afresh. If what
//! remains is only work of paused agents, the run is `blocked` (a guard or an auth
//! error stopped it; the reason says which). A fourth failure in a row makes it
//! `failed`. workflow_stop makes it `stopped`. New activity in a completed or
//! blocked run makes it `running` again: completion is "nothing left to do now".
//!
//! Instances made with agent_new (and `@global:main`) are `active`: they are not
//! workflow runs and never complete.

mod facts;
pub mod run;
mod settle;
pub mod setup;
pub mod steps;
#[cfg(test)]
mod tests;

use crate::context::Context;
use crate::events::{Event, Events};
use crate::feedback::{FeedbackRoom, Summary};
use crate::governance::contracts::Contracts;
use crate::messaging::Messaging;
use crate::registry::Registry;
use crate::runtime::Runtime;
use crate::timing::Clock;
use crate::{Caller, messaging};
use domain::clock::fmt_ms;
use domain::error::Result;
use domain::names::WorkflowRef;
use domain::protocol::Usage;
use domain::states::{AgentState, WorkflowState};
use facts::{agent_facts, workflow_row};
use schemars::JsonSchema;
use serde::Serialize;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use store::Store;
use store::sql;

/// Most of the main document a status shows (the rest: team_doc_read).
const DOC_SHOWN_CHARS: usize = 20_000;

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct AgentSummary {
    pub name: String,
    pub backend: String,
    /// idle, running, paused or failed.
    pub state: AgentState,
    /// Why it is paused or failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// When an automatic pause ends.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resume_at: Option<String>,
    pub runs: i64,
    pub failed_runs: i64,
    /// Messages waiting in its inbox.
    pub pending: i64,
    pub usage: Usage,
    /// Its schedule's next fire, if it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_wake: Option<String>,
    /// The node that runs it (absent for an agent without a worker).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct DocShown {
    pub file: String,
    pub content: String,
    /// True when the content was cut (read the rest with team_doc_read).
    pub truncated: bool,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct WorkflowStatus {
    /// The instance, e.g. "@review:pr-1".
    pub workflow: String,
    /// running, completed, scheduled (idle, but schedules will run agents again:
    /// workflow_stop disarms them), blocked, failed, stopped; `active` for an
    /// instance of agents made with agent_new (it never completes).
    pub status: WorkflowState,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub started_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<String>,
    pub agents: Vec<AgentSummary>,
    /// Messages waiting in the agents' inboxes.
    pub pending: i64,
    /// Messages in the channel.
    pub messages: i64,
    pub runs: i64,
    pub usage: Usage,
    /// A step workflow's steps in order, with their state (absent for a workflow
    /// whose agents route by mentions).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<steps::view::StepView>,
    /// The main document (notes.md), once the run is no longer running.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub document: Option<DocShown>,
    /// What its members reported about their tools and skills (my_feedback): the
    /// count of each kind and the newest five; the rest in the instance's
    /// `feedback` resource.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub feedback: Option<Summary>,
    /// What workflow_run's caller should know that refused nothing (agents named
    /// only in `steps:` given the defaults); workflow_run alone fills it in.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

impl WorkflowStatus {
    /// Whether a waiter can stop waiting.
    pub fn settled(&self) -> bool {
        self.status != WorkflowState::Running
    }
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct WorkflowListed {
    pub workflow: String,
    pub status: WorkflowState,
    pub agents: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The YAML file it came from (`<inline>` for text).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub started_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<String>,
}

/// The workflows room as a service: it starts workflow runs from YAML, settles
/// them when their team goes quiet (hearing the runtime through events) and stops
/// them. It sits on every other room.
pub struct Workflows {
    store: Store,
    events: Events,
    /// The kernel's clock: stamps, and where schedules count from.
    clock: Clock,
    contracts: Arc<Contracts>,
    registry: Arc<Registry>,
    messaging: Arc<Messaging>,
    context: Arc<Context>,
    runtime: Arc<Runtime>,
    feedback: Arc<FeedbackRoom>,
    /// Where a workflow's shell setup steps keep their logs.
    data_dir: PathBuf,
    /// The graphs of step workflows.
    steps: steps::Steps,
    /// Instances being started now: a second start of one waits for nothing and
    /// is refused (two deliveries at once start it once).
    starting: Arc<std::sync::Mutex<std::collections::HashSet<String>>>,
}

/// An instance marked as starting; unmarked when dropped.
pub(crate) struct Starting {
    set: Arc<std::sync::Mutex<std::collections::HashSet<String>>>,
    key: String,
}

impl Drop for Starting {
    fn drop(&mut self) {
        self.set.lock().expect("starting").remove(&self.key);
    }
}

/// The rooms a [`Workflows`] is built on.
pub struct Rooms {
    pub feedback: Arc<FeedbackRoom>,
    pub contracts: Arc<Contracts>,
    pub registry: Arc<Registry>,
    pub messaging: Arc<Messaging>,
    pub context: Arc<Context>,
    pub runtime: Arc<Runtime>,
}

impl Workflows {
    pub fn new(
        (store, events, clock): (Store, Events, Clock),
        rooms: Rooms,
        data_dir: PathBuf,
    ) -> Self {
        let Rooms {
            feedback,
            contracts,
            registry,
            messaging,
            context,
            runtime,
        } = rooms;
        let steps = steps::Steps::new(
            (store.clone(), clock.clone()),
            contracts.clone(),
            messaging.clone(),
        );
        Self {
            store,
            events,
            clock,
            contracts,
            registry,
            messaging,
            context,
            runtime,
            feedback,
            data_dir,
            steps,
            starting: Arc::default(),
        }
    }

    /// Parses, sets up and starts a workflow instance.
    pub async fn workflow_start(
        self: &Arc<Self>,
        source: run::Source,
        tag: Option<&str>,
        params: &serde_json::Map<String, serde_json::Value>,
        org: Option<&str>,
    ) -> Result<run::Started> {
        self.start((source, tag), params, (org, false)).await
    }

    /// [`workflow_start`](Self::workflow_start) with params from a hook's payload:
    /// untrusted, so a setup command takes only those no shell reads and an
    /// agent's `cwd` filled in from them stays under the workflow's folder.
    pub async fn start_from_outside(
        self: &Arc<Self>,
        source: run::Source,
        tag: Option<&str>,
        params: &serde_json::Map<String, serde_json::Value>,
    ) -> Result<run::Started> {
        self.start((source, tag), params, (None, true)).await
    }

    /// Marks `wref` as starting; refused if a start of it is under way.
    fn starting(&self, wref: &WorkflowRef) -> Result<Starting> {
        let key = wref.to_string();
        if !self.starting.lock().expect("starting").insert(key.clone()) {
            return Err(domain::error::Error::conflict(format!(
                "{wref} is being started now; wait for it (workflow_status), or run another \
                 instance with a different tag"
            )));
        }
        Ok(Starting {
            set: self.starting.clone(),
            key,
        })
    }
}

impl Workflows {
    /// The status of a workflow instance, computed from the store and the runs in
    /// progress.
    pub async fn workflow_status(&self, workflow: &str) -> Result<WorkflowStatus> {
        let wref = WorkflowRef::parse(workflow)?;
        let wid = self.registry.workflow_id(&wref).await?;
        let now = self.clock.now_ms();
        let (row, agents, messages) = self
            .store
            .read(move |c| {
                let messages: i64 = c.query_row(
                    "SELECT count(*) FROM messages WHERE workflow_id = ?1",
                    [wid],
                    |r| r.get(0),
                )?;
                Ok((workflow_row(c, wid)?, agent_facts(c, wid, now)?, messages))
            })
            .await?;
        let ids: Vec<i64> = agents.iter().map(|a| a.id).collect();
        let busy = self.runtime.any_active(&ids) || self.runtime.owes_runs(&ids);
        let mut status = row.state;
        // Between an event and the debounced check, the stored state may lag.
        if busy
            && matches!(
                status,
                WorkflowState::Completed | WorkflowState::Scheduled | WorkflowState::Blocked
            )
        {
            status = WorkflowState::Running;
        }
        let mut usage = Usage::default();
        let (mut runs, mut pending) = (0, 0);
        let agents: Vec<AgentSummary> = agents
            .into_iter()
            .map(|a| {
                let mut s = a.summary;
                if self.runtime.active_run(a.id).is_some() {
                    s.state = AgentState::Running;
                }
                runs += s.runs;
                pending += s.pending;
                usage.input_tokens += s.usage.input_tokens;
                usage.output_tokens += s.usage.output_tokens;
                if let Some(c) = s.usage.cost_usd {
                    *usage.cost_usd.get_or_insert(0.0) += c;
                }
                s
            })
            .collect();
        let document = if matches!(status, WorkflowState::Running | WorkflowState::Active) {
            None
        } else {
            self.main_document(&wref).await
        };
        Ok(WorkflowStatus {
            workflow: wref.to_string(),
            status,
            reason: row.reason,
            started_at: row.started_at.map(fmt_ms),
            ended_at: row.ended_at.map(fmt_ms),
            agents,
            pending,
            messages,
            runs,
            usage,
            steps: self.steps.view(wid).await?,
            document,
            feedback: Some(self.feedback.summary(wid, 5).await?).filter(|f| !f.is_empty()),
            warnings: Vec::new(),
        })
    }

    async fn main_document(&self, wref: &WorkflowRef) -> Option<DocShown> {
        let scope = self
            .registry
            .scope(&Caller::Lead, Some(&wref.to_string()))
            .await
            .ok()?;
        let d = self.context.doc_read(&scope, None).await.ok()?;
        if !d.exists {
            return None;
        }
        let truncated = d.content.chars().count() > DOC_SHOWN_CHARS;
        Some(DocShown {
            file: d.file,
            content: d.content.chars().take(DOC_SHOWN_CHARS).collect(),
            truncated,
        })
    }

    /// Waits until the instance is no longer running or `wait` passes, calling
    /// `progress` with a line whenever something happens in it.
    pub async fn workflow_wait(
        &self,
        workflow: &str,
        wait: Duration,
        mut progress: impl FnMut(String),
    ) -> Result<WorkflowStatus> {
        let wref = WorkflowRef::parse(workflow)?;
        let wid = self.registry.workflow_id(&wref).await?;
        let mut rx = self.events.subscribe();
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            let s = self.workflow_status(workflow).await?;
            if s.settled() || tokio::time::Instant::now() >= deadline {
                return Ok(s);
            }
            // Wait for something in this instance, then look again.
            loop {
                match tokio::time::timeout_at(deadline, rx.recv()).await {
                    Err(_) => break,
                    Ok(Ok(Event::WorkflowSettled { workflow_id, .. })) if workflow_id == wid => {
                        break;
                    }
                    Ok(Ok(Event::RunEnded {
                        workflow_id,
                        agent,
                        ok,
                        ..
                    })) if workflow_id == wid => {
                        progress(format!(
                            "{agent}: run {}",
                            if ok { "done" } else { "failed" }
                        ));
                    }
                    Ok(Ok(Event::Delivered {
                        workflow_id,
                        recipients,
                        ..
                    })) if workflow_id == wid => {
                        progress(format!("message for {}", recipients.join(", ")))
                    }
                    Ok(Ok(_)) => {}
                    Ok(Err(tokio::sync::broadcast::error::RecvError::Lagged(_))) => break,
                    Ok(Err(_)) => return self.workflow_status(workflow).await,
                }
            }
        }
    }

    /// Stops every run of an instance's agents; returns how many were stopped.
    async fn stop_workflow_runs(&self, wid: i64) -> Result<usize> {
        let ids: Vec<i64> = self
            .store
            .read(move |c| {
                let mut st = c.prepare("SELECT id FROM agents WHERE workflow_id = ?1")?;
                let ids = st
                    .query_map([wid], |r| r.get(0))?
                    .collect::<sql::Result<Vec<i64>>>()?;
                Ok(ids)
            })
            .await?;
        let mut stopped = 0;
        for id in ids {
            self.runtime.scheduler_forget(id);
            self.runtime.arm_schedule(id, None);
            if self.runtime.stop_run_anywhere(id).await? {
                stopped += 1;
            }
        }
        Ok(stopped)
    }

    /// workflow_stop: stops the workers and the schedules of an instance; its channel,
    /// documents and inboxes stay. A workflow run becomes `stopped` (workflow_run
    /// starts it again); the agents of an `active` instance are paused instead.
    /// Returns how many runs were stopped and what became of its worktree agents'
    /// branches (kept, with how to merge or discard them).
    pub async fn workflow_stop(self: &Arc<Self>, workflow: &str) -> Result<(usize, Vec<String>)> {
        let wref = WorkflowRef::parse(workflow)?;
        let wid = self.registry.workflow_id(&wref).await?;
        let (w2, now) = (wref.clone(), self.clock.now_ms());
        let posted = self
            .store
            .write(move |c| {
                let run = c.execute(
                    "UPDATE workflows SET state = 'stopped', reason = 'stopped by the lead', ended_at = ?2,
                       updated_at = ?2 WHERE id = ?1 AND state <> 'active'",
                    (wid, now),
                )?;
                if run == 0 {
                    crate::runtime::schedules::pause_all_tx(c, wid, "the lead stopped the workflow")?;
                }
                messaging::post_system(
                    c,
                    wid,
                    &w2,
                    "The lead stopped this workflow; runs in progress were stopped and nothing runs until it \
                     starts again."
                        .into(),
                    now,
                )
            })
            .await?;
        self.messaging.announce(wid, &posted);
        self.runtime.watch_workflow(wid, false);
        let stopped = self.stop_workflow_runs(wid).await?;
        self.events.publish(Event::WorkflowSettled {
            workflow_id: wid,
            status: WorkflowState::Stopped,
        });
        Ok((stopped, self.runtime.kept_branches(wid).await?))
    }

    /// workflow_list: every instance, newest first.
    pub async fn workflow_list(&self) -> Result<Vec<WorkflowListed>> {
        self.store
            .read(|c| {
                let mut st = c.prepare(
                    "SELECT w.name, w.tag, w.state, w.reason, w.source, w.started_at, w.ended_at,
                            (SELECT count(*) FROM agents a WHERE a.workflow_id = w.id)
                     FROM workflows w ORDER BY coalesce(w.started_at, w.created_at) DESC, w.id DESC",
                )?;
                let rows = st
                    .query_map((), |r| {
                        Ok(WorkflowListed {
                            workflow: WorkflowRef {
                                name: r.get(0)?,
                                tag: r.get(1)?,
                            }
                            .to_string(),
                            status: r.parse(2)?,
                            reason: r.get(3)?,
                            source: r.get(4)?,
                            started_at: r.get::<Option<i64>>(5)?.map(fmt_ms),
                            ended_at: r.get::<Option<i64>>(6)?.map(fmt_ms),
                            agents: r.get(7)?,
                        })
                    })?
                    .collect::<sql::Result<Vec<_>>>()?;
                Ok(rows)
            })
            .await
    }
}
