//! Events across nodes: what a kernel publishes reaches the other kernels of its
//! store (PostgreSQL's LISTEN/NOTIFY, `store::postgres::bus`), and what they
//! publish reaches this kernel's subscribers as if it were its own.
//!
//! So a delivery committed on node A wakes an agent leased to node B (B's scheduler
//! hears it and starts its own agent), and a long poll or a subscription on any node
//! sees what happens on every node. What an event makes a node *do* stays with the
//! node that owns the thing: a scheduler starts runs of its own agents only, and a
//! workflow run is settled by the node that runs its agents (events about settling
//! are not sent). What a node keeps in memory about the others is refreshed here: the
//! contracts in force, cached tokens of deleted agents, the runs it must stop, the
//! approvals its runs wait for.
//!
//! Notifications are hints: after any gap (the listener reconnected) the node reads
//! the store again for what its agents are owed.

use super::Nodes;
use crate::events::Event;
use domain::states::{AgentState, WorkflowState};
use serde::{Deserialize, Serialize};
use std::sync::{Arc, Weak};
use std::time::Duration;
use store::bus::Handlers;
use store::sql;
use store::sql::OptionalExtension;
use tokio::sync::broadcast::{self, error::RecvError};

/// What travels on the bus.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "t", rename_all = "snake_case")]
enum Wire {
    /// An event of node `from`.
    Event { from: String, event: Event },
    /// Node `to`: stop the run of this agent (it was paused, deleted or its
    /// workflow stopped through another node).
    StopRun { to: String, agent_id: i64 },
    /// A sender dropped notifications: read the store again.
    Resync,
}

/// An agent as another node's change leaves it: id, node, state, its workflow's
/// state, its schedule's next fire.
type AgentLease = (i64, Option<String>, AgentState, WorkflowState, Option<i64>);

/// What the listener hands the kernel, in order.
enum Incoming {
    Payload(String),
    Gap,
}

/// Messages from the listener waiting for the kernel at most (the listener waits
/// when it is full: PostgreSQL buffers the rest).
const INCOMING: usize = 4096;
/// How often a stop asked of another node is asked again (a notification may be
/// dropped) and the store read again even if no run's end was heard.
const STOP_AGAIN: Duration = Duration::from_secs(1);

/// Whether other nodes hear of this event. A workflow going quiet or failing is for
/// the node that runs its agents alone.
fn travels(e: &Event) -> bool {
    !matches!(e, Event::WorkflowQuiet { .. } | Event::AgentFailed { .. })
}

impl Nodes {
    /// Joins the bus of the store's kernels (PostgreSQL; nothing on SQLite): this
    /// node's events go out, the others' come in.
    pub(crate) fn start_bus(self: &Arc<Self>) -> domain::error::Result<()> {
        let (tx, mut rx) = tokio::sync::mpsc::channel::<Incoming>(INCOMING);
        let gap = tx.clone();
        let handlers = Handlers {
            on_message: Box::new(move |p| {
                let _ = tx.blocking_send(Incoming::Payload(p));
            }),
            on_gap: Box::new(move || {
                let _ = gap.blocking_send(Incoming::Gap);
            }),
        };
        let Some(bus) = self.base.store.bus(handlers)? else {
            return Ok(());
        };
        let bus = Arc::new(bus);
        let _ = self.bus.set(bus.clone());
        let from = self.base.node.clone();
        self.base.events.forward_to(Box::new(move |e| {
            if !travels(e) {
                return;
            }
            let wire = Wire::Event {
                from: from.clone(),
                event: e.clone(),
            };
            match serde_json::to_string(&wire) {
                Ok(p) => bus.send(p),
                Err(err) => tracing::warn!("an event could not be sent to the other nodes: {err}"),
            }
        }));
        let weak: Weak<Self> = Arc::downgrade(self);
        tokio::spawn(async move {
            while let Some(m) = rx.recv().await {
                let Some(k) = weak.upgrade() else { return };
                match m {
                    Incoming::Gap => k.resync().await,
                    Incoming::Payload(p) => match serde_json::from_str::<Wire>(&p) {
                        Ok(w) => k.on_wire(w).await,
                        Err(e) => tracing::debug!("unreadable bus message ignored: {e}"),
                    },
                }
            }
        });
        Ok(())
    }

    /// After notifications may have been missed: everything this node keeps from
    /// them is read again (what its agents are owed, the contracts, tokens).
    async fn resync(self: &Arc<Self>) {
        self.scheduler.request_rescan();
        self.base.registry.tokens.forget_all();
        if let Err(e) = self.base.contracts.reload().await {
            tracing::warn!("contracts not read again after a bus gap: {e}");
        }
    }

    async fn on_wire(self: &Arc<Self>, w: Wire) {
        match w {
            Wire::Resync => self.resync().await,
            Wire::Event { from, .. } if from == self.base.node => {}
            Wire::Event { event, .. } => {
                self.on_remote_event(&event).await;
                self.base.events.publish_remote(event);
            }
            Wire::StopRun { to, agent_id } if to == self.base.node => {
                let k = self.clone();
                tokio::spawn(async move {
                    k.workers.stop_run(agent_id).await;
                });
            }
            Wire::StopRun { .. } => {}
        }
    }

    /// What this node refreshes when another one says something changed.
    async fn on_remote_event(self: &Arc<Self>, e: &Event) {
        let r = match e {
            Event::ContractsChanged => self.base.contracts.reload().await,
            Event::AgentChanged { workflow_id, name } => {
                self.reconcile_agent(*workflow_id, name).await
            }
            Event::ApprovalClosed { id, .. } => {
                self.approvals.closed_elsewhere(*id);
                Ok(())
            }
            _ => Ok(()),
        };
        if let Err(err) = r {
            tracing::warn!("could not follow another node's change: {err}");
        }
    }

    /// Another node changed an agent: forget its tokens if it is gone; if this node
    /// runs it, stop a run it may no longer have (paused, its workflow stopped) and
    /// serve what it is owed now (resumed, scheduled, moved here).
    pub(crate) async fn reconcile_agent(
        self: &Arc<Self>,
        workflow_id: i64,
        name: &str,
    ) -> domain::error::Result<()> {
        let n = name.to_owned();
        let row: Option<AgentLease> = self
            .base
            .store
            .read(move |c| {
                Ok(c.query_row(
                    "SELECT a.id, a.node, a.state, w.state, s.next_at FROM agents a
                       JOIN workflows w ON w.id = a.workflow_id
                       LEFT JOIN schedules s ON s.agent_id = a.id
                      WHERE a.workflow_id = ?1 AND a.name = ?2",
                    sql::params![workflow_id, n],
                    |r| Ok((r.get(0)?, r.get(1)?, r.parse(2)?, r.parse(3)?, r.get(4)?)),
                )
                .optional()?)
            })
            .await?;
        // Whatever changed (deleted, or deleted and made again under its name), its
        // cached tokens are read again from the store.
        self.base.registry.tokens.forget_named(workflow_id, name);
        let Some((id, node, state, wstate, next)) = row else {
            return Ok(());
        };
        if node.as_deref() != Some(self.base.node()) {
            // Not (or no longer) this node's: a run still here must not go on.
            self.scheduler.forget_agent(id);
            self.scheduler.arm_schedule(id, None);
            self.workers.stop_run(id).await;
            return Ok(());
        }
        if !domain::states::may_wake(state, wstate) {
            self.scheduler.forget_agent(id);
            self.workers.stop_run(id).await;
            return Ok(());
        }
        self.scheduler.arm_schedule(id, next);
        self.scheduler
            .admit(id, crate::runtime::scheduler::Wake::Message, None)
            .await;
        Ok(())
    }

    /// Stops the run of an agent wherever it runs, and waits until it is recorded:
    /// here directly; on another node by asking it over the bus and watching the
    /// store (a node that is gone has its runs closed by the takeover). Returns
    /// whether a run was in progress.
    pub(crate) async fn stop_run_anywhere(&self, agent_id: i64) -> domain::error::Result<bool> {
        if self.workers.stop_run(agent_id).await.is_some() {
            return Ok(true);
        }
        let Some(node) = self.running_on(agent_id).await? else {
            return Ok(false);
        };
        if node == self.base.node {
            return Ok(false); // claimed here, not started yet: nothing to stop
        }
        let Some(bus) = self.bus.get() else {
            return Ok(false);
        };
        let ask = serde_json::to_string(&Wire::StopRun {
            to: node.clone(),
            agent_id,
        })
        .map_err(|e| domain::error::Error::internal(e.to_string()))?;
        let deadline = tokio::time::Instant::now() + super::lease() * 2;
        let mut asked_at: Option<tokio::time::Instant> = None;
        // Subscribed before the first read: the run's end is heard, not polled for.
        let mut events = self.base.events.subscribe();
        while self.running_on(agent_id).await?.is_some() {
            if asked_at.is_none_or(|t| t.elapsed() >= STOP_AGAIN) {
                bus.send(ask.clone());
                asked_at = Some(tokio::time::Instant::now());
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(domain::error::Error::internal(format!(
                    "node {node} did not stop the agent's run; try again (once its lease runs out, \
                     another node takes the agent over)"
                )));
            }
            some_run_ended(&mut events, STOP_AGAIN).await;
        }
        Ok(true)
    }

    /// The node of an agent's run in progress, if it has one (by the store).
    async fn running_on(&self, agent_id: i64) -> domain::error::Result<Option<String>> {
        self.base
            .store
            .read(move |c| {
                Ok(c.query_row(
                    "SELECT a.node FROM runs r JOIN agents a ON a.id = r.agent_id
                      WHERE r.agent_id = ?1 AND r.status = 'running' LIMIT 1",
                    [agent_id],
                    |r| r.get::<Option<String>>(0),
                )
                .optional()?
                .flatten())
            })
            .await
    }
}

/// Returns when a run ends here or on another node (the bus carries its end), when
/// events were lost, or after `most`: the caller then reads the store again.
async fn some_run_ended(events: &mut broadcast::Receiver<Event>, most: Duration) {
    let heard = async {
        loop {
            match events.recv().await {
                Ok(Event::RunEnded { .. }) | Err(RecvError::Lagged(_)) => return,
                Ok(_) => {}
                Err(RecvError::Closed) => std::future::pending::<()>().await,
            }
        }
    };
    let _ = tokio::time::timeout(most, heard).await;
}
